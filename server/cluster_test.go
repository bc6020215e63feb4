package server

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// Several chatd nodes on one PostgreSQL database, as behind a proxy: what
// a client does through one node reaches the clients of the other.

// twoNodes starts two servers on one PostgreSQL database.
func twoNodes(t *testing.T, opts ...func(*store.Options)) (a, b *testServer) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	return newTestServerAt(t, url, nil, opts...), newTestServerAt(t, url, nil, opts...)
}

// A message posted on node A is pushed to the agent it mentions and to the
// person reading the room, both connected to node B; a long-poll held on
// node B returns it; and a message posted on B reaches a socket on A.
func TestTwoNodesPushWhatEitherCommitted(t *testing.T) {
	a, b := twoNodes(t)
	w := newSocketWorldOn(t, a)
	worker := newListener(t, b, w.workerKey, "chat_room:"+w.room)
	alice := newListener(t, b, w.aliceKey, "chat_room:"+w.room, "user_rooms:"+w.aliceID)

	id := w.post(t, "posted on A", w.workerID)
	isIt := func(p map[string]any) bool { return p["id"] == id }
	worker.await(t, "chat_room:"+w.room, "message_created", isIt)
	alice.await(t, "chat_room:"+w.room, "message_created", isIt)

	polled := make(chan *response, 1)
	go func() {
		polled <- b.do(t, "GET", agentChatsPath+"/"+w.room+"/messages/next?wait=20", apiKey(w.workerKey), nil)
	}()
	time.Sleep(200 * time.Millisecond) // the poll is held (if not, it returns the message at once: also right)
	later := w.post(t, "posted on A while B holds a poll", w.workerID)
	r := <-polled
	if got := r.data(t)["id"]; got != id && got != later {
		t.Fatalf("/next on node B returned %v, want a message posted on A", got)
	}

	onA := newListener(t, a, w.workerKey, "chat_room:"+w.room)
	fromB := expectCreated(t, b.do(t, "POST", agentChatsPath+"/"+w.room+"/messages", apiKey(w.posterKey),
		map[string]any{"message": map[string]any{"content": "posted on B", "mentions": []map[string]string{{"id": w.workerID}}}}))
	onA.await(t, "chat_room:"+w.room, "message_created", func(p map[string]any) bool { return p["id"] == fromB })
	if n := worker.countOf("chat_room:"+w.room, "message_created", isIt); n != 1 {
		t.Fatalf("the message reached node B's socket %d times", n)
	}
}

// A key rotated through node A closes the sockets it opened on node B, and
// node B refuses it from then on.
func TestTwoNodesEndRevokedCredentialsOnBoth(t *testing.T) {
	a, b := twoNodes(t)
	w := newSocketWorldOn(t, a)
	worker := newListener(t, b, w.workerKey, "agent_rooms:"+w.workerID)
	expect(t, b.do(t, "GET", agentChatsPath, apiKey(w.workerKey), nil), 200, "")
	expect(t, a.do(t, "POST", "/api/v1/me/agents/"+w.workerID+"/rotate-key", apiKey(w.aliceKey), map[string]any{}), 200, "")
	worker.awaitClose(t, 1008, "a socket opened on node B with the rotated key")
	expect(t, b.do(t, "GET", agentChatsPath, apiKey(w.workerKey), nil), 401, "unauthorized")
}

// A quota holds with clients on both nodes at once: of twenty tasks asked
// for on a board that takes five, five are made, numbered 1 to 5.
func TestTwoNodesHoldQuotasTogether(t *testing.T) {
	a, b := twoNodes(t, func(o *store.Options) { o.Limits.TasksPerRoom = 5 })
	w := newSocketWorldOn(t, a)
	var mu sync.Mutex
	var made []int
	refused := 0
	var wg sync.WaitGroup
	for i := range 20 {
		node := []*testServer{a, b}[i%2]
		wg.Go(func() {
			r := node.do(t, "POST", tasksPath(w.room), apiKey(w.posterKey), map[string]any{"subject": fmt.Sprint("task ", i)})
			mu.Lock()
			defer mu.Unlock()
			switch r.status {
			case 201:
				made = append(made, int(r.data(t)["number"].(float64)))
			case 403:
				refused++
			default:
				t.Errorf("creating a task: %d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	slices.Sort(made)
	if !slices.Equal(made, []int{1, 2, 3, 4, 5}) || refused != 15 {
		t.Fatalf("made tasks %v and refused %d, want 1 to 5 and 15", made, refused)
	}
}

func expectCreated(t *testing.T, r *response) string {
	t.Helper()
	expect(t, r, http.StatusCreated, "")
	return r.data(t)["id"].(string)
}

// Presence counts the sockets of every node: an agent connected to node B
// is pushed as connected to a person watching through node A, and listed
// so there; a second socket on node A changes nothing; it goes offline on
// A only when its last socket, on either node, closes; and when node B
// stops, what was connected to it goes offline on A.
func TestTwoNodesSharePresence(t *testing.T) {
	a, b := twoNodes(t)
	w := newSocketWorldOn(t, a)
	topic := "room_participants:" + w.room
	path := "/api/v1/me/chats/" + w.room + "/presence"
	watcher := newListener(t, a, w.aliceKey, topic)
	isWorker := func(connected bool) func(map[string]any) bool {
		return func(p map[string]any) bool { return p["id"] == w.workerID && p["connected"] == connected }
	}
	listed := func() any {
		return presenceOf(t, a.do(t, "GET", path, apiKey(w.aliceKey), nil), w.workerID)["connected"]
	}

	onB := newListener(t, b, w.workerKey, "agent_rooms:"+w.workerID)
	watcher.await(t, topic, "presence", isWorker(true))
	if got := listed(); got != true {
		t.Fatalf("node A lists the worker connected to node B as %v", got)
	}
	onA := newListener(t, a, w.workerKey, "agent_rooms:"+w.workerID)
	onB.raw.conn.Close()
	<-onB.closed
	time.Sleep(500 * time.Millisecond) // node B notices the close, and tells node A
	if n := watcher.countOf(topic, "presence", isWorker(false)); n != 0 || listed() != true {
		t.Fatalf("with a socket still open on node A, the worker went offline (%d pushes, listed %v)", n, listed())
	}
	onA.raw.conn.Close()
	watcher.await(t, topic, "presence", isWorker(false))

	newListener(t, b, w.workerKey, "agent_rooms:"+w.workerID)
	eventually(t, "the worker's second connection to be pushed", func() bool {
		return watcher.countOf(topic, "presence", isWorker(true)) == 2
	})
	b.srv.Close()
	eventually(t, "node A to hear that node B's sockets are gone", func() bool {
		return watcher.countOf(topic, "presence", isWorker(false)) == 2 && listed() == false
	})
}
