//go:build !race

// The real nshafer/phx client (the Go Phoenix client the jam CLI uses) has
// data races of its own: Push.Send writes a field that its reply goroutine
// reads. Under the race detector every test using it would fail for that
// alone, so these run without it (.ci/run runs them in a pass of their
// own); every other socket test uses a raw client and runs with -race.

package server

import (
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/nshafer/phx"
)

// phxClient is the real nshafer/phx client (the one the jam CLI uses),
// connected with a key in the query, with every push recorded.
type phxClient struct {
	pushLog
	socket *phx.Socket
	closed chan struct{}
}

// newPhxClient connects and joins topics (each with the events to record).
// The library keeps unsynchronised maps that its connection goroutine reads,
// so every channel is made before connecting, as it expects.
func newPhxClient(t *testing.T, ts *testServer, key string, topics map[string][]string, options ...func(*phx.Socket)) *phxClient {
	t.Helper()
	u, _ := url.Parse(ts.http.URL)
	// The library appends /websocket and vsn=2.0.0 itself.
	u.Scheme, u.Path, u.RawQuery = "ws", "/api/v1/socket", url.Values{"api_key": {key}}.Encode()
	c := &phxClient{socket: phx.NewSocket(u), closed: make(chan struct{})}
	c.socket.ReconnectAfterFunc = func(int) time.Duration { return time.Hour } // a test sees every close
	for _, o := range options {
		o(c.socket)
	}
	joined := make(chan string, len(topics))
	var channels []*phx.Channel
	for topic, events := range topics {
		ch := c.socket.Channel(topic, nil)
		ch.OnJoin(func(any) { joined <- topic })
		for _, ev := range events {
			ch.On(ev, func(payload any) {
				m, _ := payload.(map[string]any)
				c.record(topic, ev, m)
			})
		}
		channels = append(channels, ch)
	}
	var once sync.Once
	c.socket.OnClose(func() { once.Do(func() { close(c.closed) }) })
	opened := make(chan struct{})
	var openOnce sync.Once
	c.socket.OnOpen(func() { openOnce.Do(func() { close(opened) }) })
	if err := c.socket.Connect(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The library can deadlock disconnecting after it dropped a
		// connection itself; do not let that hang the test run.
		done := make(chan struct{})
		go func() { c.socket.Disconnect(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
	})
	select {
	case <-opened:
	case <-time.After(10 * time.Second):
		t.Fatal("socket did not open")
	}
	for _, ch := range channels {
		if _, err := ch.Join(); err != nil {
			t.Fatal(err)
		}
	}
	for range channels {
		select {
		case <-joined:
		case <-time.After(10 * time.Second):
			t.Fatal("a join was not accepted")
		}
	}
	return c
}

func TestSocketPhxGoClient(t *testing.T) {
	w := newSocketWorld(t)
	chat := "chat_room:" + w.room
	agentEvents := []string{"message_created", "message_updated", "room_added", "room_updated", "participant_added", "board_updated",
		"task_created", "task_updated", "contact_request_received", "contact_added"}
	worker := newPhxClient(t, w.ts, w.workerKey, map[string][]string{
		"agent_control:" + w.workerID: agentEvents, "agent_rooms:" + w.workerID: agentEvents, "agent_contacts:" + w.workerID: agentEvents,
		chat: agentEvents, "room_participants:" + w.room: agentEvents, "room_tasks:" + w.room: agentEvents,
	})
	personEvents := []string{"message_created", "message_updated", "event_created", "room_updated", "participant_added"}
	alice := newPhxClient(t, w.ts, w.aliceKey, map[string][]string{
		"user_rooms:" + w.aliceID: personEvents, chat: personEvents, "room_participants:" + w.room: personEvents,
	})

	// A text message mentioning the worker reaches it, with its own
	// delivery state; alice reads it too.
	mentioning := w.post(t, "please check the build", w.workerID)
	got := worker.await(t, chat, "message_created", func(p map[string]any) bool { return p["id"] == mentioning })
	meta := got["metadata"].(map[string]any)
	if got["content"] != "@alice/worker please check the build" || meta["status"] != "pending" || got["sender_type"] != "Agent" {
		t.Fatalf("pushed message = %v", got)
	}
	alice.await(t, chat, "message_created", func(p map[string]any) bool { return p["id"] == mentioning })

	// A message that does not mention the worker reaches alice only.
	other := w.post(t, "alice, a word", w.aliceID)
	alice.await(t, chat, "message_created", func(p map[string]any) bool { return p["id"] == other })

	// Events reach people (as message_created and event_created), never agents.
	r := w.ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/events", apiKey(w.posterKey),
		map[string]any{"event": map[string]any{"content": "thinking", "message_type": "thought"}})
	expect(t, r, 201, "")
	event := r.data(t)["id"].(string)
	alice.await(t, chat, "event_created", func(p map[string]any) bool { return p["id"] == event })

	// Delivery progress reaches people as message_updated.
	expect(t, w.ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/messages/"+mentioning+"/processing", apiKey(w.workerKey), nil), 200, "")
	upd := alice.await(t, chat, "message_updated", func(p map[string]any) bool { return p["id"] == mentioning })
	if ds := upd["metadata"].(map[string]any)["delivery_status"].(map[string]any)[w.workerID].(map[string]any); ds["status"] != "processing" {
		t.Fatalf("message_updated delivery_status = %v", ds)
	}

	// Renames and the goal reach members' topics.
	expect(t, w.ts.do(t, "PATCH", "/api/v1/agent/chats/"+w.room, apiKey(w.posterKey), map[string]any{"chat": map[string]any{"title": "Build room"}}), 200, "")
	worker.await(t, "agent_rooms:"+w.workerID, "room_updated", func(p map[string]any) bool { return p["title"] == "Build room" })
	alice.await(t, "user_rooms:"+w.aliceID, "room_updated", func(p map[string]any) bool { return p["title"] == "Build room" })
	expect(t, w.ts.do(t, "PUT", "/api/v1/agent/chats/"+w.room+"/board", apiKey(w.posterKey), map[string]any{"goal_title": "Green CI"}), 200, "")
	worker.await(t, "room_tasks:"+w.room, "board_updated", func(p map[string]any) bool { return p["goal_title"] == "Green CI" })

	// Tasks reach the room's task topic.
	r = w.ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/tasks", apiKey(w.posterKey), map[string]any{"subject": "Fix the flaky test"})
	expect(t, r, 201, "")
	task := r.data(t)["id"].(string)
	worker.await(t, "room_tasks:"+w.room, "task_created", func(p map[string]any) bool { return p["id"] == task && p["number"] == float64(1) })
	expect(t, w.ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/tasks/1", apiKey(w.workerKey), map[string]any{"status": "in_progress"}), 200, "")
	worker.await(t, "room_tasks:"+w.room, "task_updated", func(p map[string]any) bool {
		return p["id"] == task && p["overall_status"] == "in_progress"
	})

	// Contact requests and contacts reach the agent's contacts topic.
	contacts := "agent_contacts:" + w.workerID
	expect(t, w.ts.do(t, "POST", "/api/v1/me/contacts/requests", apiKey(w.carolKey),
		map[string]any{"contact_request": map[string]any{"recipient_handle": "alice/worker", "message": "hi"}}), 201, "")
	worker.await(t, contacts, "contact_request_received", func(p map[string]any) bool { return p["from_handle"] == "carol" })
	expect(t, w.ts.do(t, "POST", "/api/v1/agent/contacts/requests/respond", apiKey(w.workerKey),
		map[string]any{"action": "approve", "handle": "carol"}), 200, "")
	worker.await(t, contacts, "contact_added", func(p map[string]any) bool { return p["handle"] == "carol" && p["type"] == "User" })

	// Waiting for a pushed copy of the other message proves the agent was
	// not sent it: pushes arrive in commit order.
	time.Sleep(50 * time.Millisecond)
	if n := worker.count(chat, "message_created"); n != 1 {
		t.Fatalf("the worker got %d message_created, want only the one that mentions it", n)
	}
	if n := worker.count(chat, "message_updated"); n != 0 {
		t.Fatalf("agents get no message_updated, got %d", n)
	}

	// Heartbeats are answered: with a short interval, the client keeps its
	// connection for several of them.
	select {
	case <-worker.closed:
		t.Fatal("the socket closed")
	case <-time.After(100 * time.Millisecond):
	}
}

func TestSocketPhxGoClientHeartbeats(t *testing.T) {
	w := newSocketWorld(t)
	// The client drops its connection when a heartbeat goes unanswered for
	// an interval (and, in these tests, does not come back); at 250 ms it
	// would be gone within 1.5 s. The interval leaves a busy test machine
	// ample time to answer each one.
	c := newPhxClient(t, w.ts, w.workerKey, nil, func(s *phx.Socket) { s.HeartbeatInterval = 250 * time.Millisecond })
	time.Sleep(1500 * time.Millisecond)
	if !c.socket.IsConnected() {
		t.Fatal("a heartbeating client lost its connection")
	}
}

// The Go client sees an unauthorized join as an errored channel, and gets
// nothing from the topic.
func TestSocketPhxGoClientUnauthorizedJoin(t *testing.T) {
	w := newSocketWorld(t)
	u, _ := url.Parse(w.ts.http.URL)
	u.Scheme, u.Path, u.RawQuery = "ws", "/api/v1/socket", url.Values{"api_key": {w.carolKey}}.Encode()
	socket := phx.NewSocket(u)
	socket.ReconnectAfterFunc = func(int) time.Duration { return time.Hour }
	ch := socket.Channel("chat_room:"+w.room, nil)
	var got sync.Mutex
	received := 0
	ch.On("message_created", func(any) { got.Lock(); received++; got.Unlock() })
	opened := make(chan struct{})
	socket.OnOpen(func() { close(opened) })
	if err := socket.Connect(); err != nil {
		t.Fatal(err)
	}
	defer socket.Disconnect()
	<-opened
	if _, err := ch.Join(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !ch.IsErrored() {
		if time.Now().After(deadline) {
			t.Fatalf("the channel is %v, want errored", ch.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
	w.post(t, "not for carol", w.aliceID)
	time.Sleep(100 * time.Millisecond)
	got.Lock()
	defer got.Unlock()
	if received != 0 {
		t.Fatalf("an unauthorized channel received %d messages", received)
	}
}

// Two Go clients for one agent: the newer supersedes the older, which is
// told on agent_control; with on_conflict=reject the newer never connects.
func TestSocketPhxGoClientSupersedeAndReject(t *testing.T) {
	w := newSocketWorld(t)
	control := "agent_control:" + w.workerID
	first := newPhxClient(t, w.ts, w.workerKey, map[string][]string{control: {"supersede"}})

	u, _ := url.Parse(w.ts.http.URL)
	u.Scheme, u.Path, u.RawQuery = "ws", "/api/v1/socket", url.Values{"api_key": {w.workerKey}, "on_conflict": {"reject"}}.Encode()
	rejected := phx.NewSocket(u)
	rejected.ReconnectAfterFunc = func(int) time.Duration { return time.Hour }
	if err := rejected.Connect(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if rejected.IsConnected() {
		t.Fatal("on_conflict=reject connected although the agent is connected")
	}
	rejected.Disconnect()

	newPhxClient(t, w.ts, w.workerKey, nil)
	p := first.await(t, control, "supersede", nil)
	if p["reason"] != "superseded" || p["retryable"] != false {
		t.Fatalf("supersede = %v", p)
	}
	select {
	case <-first.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the superseded connection stayed open")
	}
}
