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
		// After the library dropped a connection itself, disconnecting
		// shuts it down a second time (a panic: close of a closed
		// channel) or deadlocks; such a client waits an hour to reconnect
		// and is left alone. Otherwise no disconnect may hang the run.
		select {
		case <-c.closed:
			return
		default:
		}
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
	p := newPhxPushes(t)
	for _, step := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a mention reaches the worker and alice", p.mentionReachesWorkerAndAlice},
		{"a message without the worker reaches alice only", p.otherMessageReachesAlice},
		{"events reach people", p.eventsReachPeople},
		{"delivery progress reaches people", p.deliveryProgressReachesPeople},
		{"renames and the goal reach members", p.roomChangesReachMembers},
		{"tasks reach the task topic", p.tasksReachTheTaskTopic},
		{"contacts reach the agent's contacts topic", p.contactsReachTheAgent},
		{"the agent got only the message that mentions it", p.agentGotOnlyItsMessage},
		{"the connection stays open", p.connectionStaysOpen},
	} {
		if !t.Run(step.name, step.run) {
			return // each step builds on what the ones before it pushed
		}
	}
}

// phxPushes is what TestSocketPhxGoClient follows: the worker agent and
// alice, each on the real Go client, joined to every topic of theirs with
// the events it may carry, so that a push to the wrong topic or of the
// wrong event goes unrecorded and its wait fails.
type phxPushes struct {
	w             *socketWorld
	chat          string // the room's chat topic
	worker, alice *phxClient
	mentioning    string // the message that mentions the worker
}

func newPhxPushes(t *testing.T) *phxPushes {
	w := newSocketWorld(t)
	p := &phxPushes{w: w, chat: "chat_room:" + w.room}
	agentEvents := []string{"message_created", "message_updated", "room_added", "room_updated", "participant_added", "board_updated",
		"task_created", "task_updated", "contact_request_received", "contact_added"}
	p.worker = newPhxClient(t, w.ts, w.workerKey, map[string][]string{
		"agent_control:" + w.workerID: agentEvents, "agent_rooms:" + w.workerID: agentEvents, "agent_contacts:" + w.workerID: agentEvents,
		p.chat: agentEvents, "room_participants:" + w.room: agentEvents, "room_tasks:" + w.room: agentEvents,
	})
	personEvents := []string{"message_created", "message_updated", "event_created", "room_updated", "participant_added"}
	p.alice = newPhxClient(t, w.ts, w.aliceKey, map[string][]string{
		"user_rooms:" + w.aliceID: personEvents, p.chat: personEvents, "room_participants:" + w.room: personEvents,
	})
	return p
}

// mentionReachesWorkerAndAlice sends a text message mentioning the worker:
// it reaches the worker, with its own delivery state, and alice too.
func (p *phxPushes) mentionReachesWorkerAndAlice(t *testing.T) {
	p.mentioning = p.w.post(t, "please check the build", p.w.workerID)
	got := p.worker.await(t, p.chat, "message_created", func(m map[string]any) bool { return m["id"] == p.mentioning })
	meta := got["metadata"].(map[string]any)
	if got["content"] != "@alice/worker please check the build" || meta["status"] != "pending" || got["sender_type"] != "Agent" {
		t.Fatalf("pushed message = %v", got)
	}
	p.alice.await(t, p.chat, "message_created", func(m map[string]any) bool { return m["id"] == p.mentioning })
}

// otherMessageReachesAlice sends what agentGotOnlyItsMessage later proves
// the worker was not sent.
func (p *phxPushes) otherMessageReachesAlice(t *testing.T) {
	other := p.w.post(t, "alice, a word", p.w.aliceID)
	p.alice.await(t, p.chat, "message_created", func(m map[string]any) bool { return m["id"] == other })
}

// eventsReachPeople posts events, which reach people (as message_created
// and event_created), never agents; an internal type reaches no one. It is
// posted first: pushes go out in commit order, so by the time the second
// event arrives, the first would have.
func (p *phxPushes) eventsReachPeople(t *testing.T) {
	post := func(typ, content string) string {
		r := p.w.ts.do(t, "POST", "/api/v1/agent/chats/"+p.w.room+"/events", apiKey(p.w.posterKey),
			map[string]any{"event": map[string]any{"content": content, "message_type": typ}})
		expect(t, r, 201, "")
		return r.data(t)["id"].(string)
	}
	internal := post("guidelines", "keep answers short")
	event := post("thought", "thinking")
	p.alice.await(t, p.chat, "event_created", func(m map[string]any) bool { return m["id"] == event })
	for _, ev := range []string{"message_created", "event_created"} {
		if n := p.alice.countOf(p.chat, ev, func(m map[string]any) bool { return m["id"] == internal }); n != 0 {
			t.Fatalf("a person got %d %s pushes of an internal event", n, ev)
		}
	}
}

// deliveryProgressReachesPeople moves the worker's delivery of the mention
// on; people get the progress as message_updated.
func (p *phxPushes) deliveryProgressReachesPeople(t *testing.T) {
	expect(t, p.w.ts.do(t, "POST", "/api/v1/agent/chats/"+p.w.room+"/messages/"+p.mentioning+"/processing", apiKey(p.w.workerKey), nil), 200, "")
	upd := p.alice.await(t, p.chat, "message_updated", func(m map[string]any) bool { return m["id"] == p.mentioning })
	if ds := upd["metadata"].(map[string]any)["delivery_status"].(map[string]any)[p.w.workerID].(map[string]any); ds["status"] != "processing" {
		t.Fatalf("message_updated delivery_status = %v", ds)
	}
}

// roomChangesReachMembers renames the room and sets its goal; both reach
// the members' topics.
func (p *phxPushes) roomChangesReachMembers(t *testing.T) {
	w := p.w
	expect(t, w.ts.do(t, "PATCH", "/api/v1/agent/chats/"+w.room, apiKey(w.posterKey), map[string]any{"chat": map[string]any{"title": "Build room"}}), 200, "")
	p.worker.await(t, "agent_rooms:"+w.workerID, "room_updated", func(m map[string]any) bool { return m["title"] == "Build room" })
	p.alice.await(t, "user_rooms:"+w.aliceID, "room_updated", func(m map[string]any) bool { return m["title"] == "Build room" })
	expect(t, w.ts.do(t, "PUT", "/api/v1/agent/chats/"+w.room+"/board", apiKey(w.posterKey), map[string]any{"goal_title": "Green CI"}), 200, "")
	p.worker.await(t, "room_tasks:"+w.room, "board_updated", func(m map[string]any) bool { return m["goal_title"] == "Green CI" })
}

// tasksReachTheTaskTopic creates a task and moves it on; both reach the
// room's task topic.
func (p *phxPushes) tasksReachTheTaskTopic(t *testing.T) {
	w := p.w
	r := w.ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/tasks", apiKey(w.posterKey), map[string]any{"subject": "Fix the flaky test"})
	expect(t, r, 201, "")
	task := r.data(t)["id"].(string)
	p.worker.await(t, "room_tasks:"+w.room, "task_created", func(m map[string]any) bool { return m["id"] == task && m["number"] == float64(1) })
	expect(t, w.ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/tasks/1", apiKey(w.workerKey), map[string]any{"status": "in_progress"}), 200, "")
	p.worker.await(t, "room_tasks:"+w.room, "task_updated", func(m map[string]any) bool {
		return m["id"] == task && m["overall_status"] == "in_progress"
	})
}

// contactsReachTheAgent has carol ask the worker for contact and the worker
// approve; the request and the contact reach the agent's contacts topic.
func (p *phxPushes) contactsReachTheAgent(t *testing.T) {
	w := p.w
	contacts := "agent_contacts:" + w.workerID
	expect(t, w.ts.do(t, "POST", "/api/v1/me/contacts/requests", apiKey(w.carolKey),
		map[string]any{"contact_request": map[string]any{"recipient_handle": "alice/worker", "message": "hi"}}), 201, "")
	p.worker.await(t, contacts, "contact_request_received", func(m map[string]any) bool { return m["from_handle"] == "carol" })
	expect(t, w.ts.do(t, "POST", "/api/v1/agent/contacts/requests/respond", apiKey(w.workerKey),
		map[string]any{"action": "approve", "handle": "carol"}), 200, "")
	p.worker.await(t, contacts, "contact_added", func(m map[string]any) bool { return m["handle"] == "carol" && m["type"] == "User" })
}

// agentGotOnlyItsMessage waits for a pushed copy of the other message, which
// proves the agent was not sent it: pushes arrive in commit order.
func (p *phxPushes) agentGotOnlyItsMessage(t *testing.T) {
	time.Sleep(50 * time.Millisecond)
	if n := p.worker.count(p.chat, "message_created"); n != 1 {
		t.Fatalf("the worker got %d message_created, want only the one that mentions it", n)
	}
	if n := p.worker.count(p.chat, "message_updated"); n != 0 {
		t.Fatalf("agents get no message_updated, got %d", n)
	}
}

// connectionStaysOpen checks that heartbeats are answered: with a short
// interval, the client keeps its connection for several of them.
func (p *phxPushes) connectionStaysOpen(t *testing.T) {
	select {
	case <-p.worker.closed:
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
