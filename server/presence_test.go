package server

import (
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// presenceOf finds id in a presence listing.
func presenceOf(t *testing.T, r *response, id string) map[string]any {
	t.Helper()
	for _, item := range r.list(t) {
		p := item.(map[string]any)
		if p["id"] == id {
			return p
		}
	}
	t.Fatalf("%s is not in the presence listing %s", id, r.body)
	return nil
}

// TestPresence: an agent's socket opening and closing is pushed to the
// people reading its rooms, and to agents that asked for chatd's extension
// events, never to an agent's socket that did not (a Band SDK would log a
// warning for it); the listing says the same, with when it was last seen.
func TestPresence(t *testing.T) {
	w := newSocketWorld(t)
	ts := w.ts
	alice := mustUserByHandle(t, ts, "alice")
	watcher, watcherKey := ts.agent(alice, "Watcher")
	expect(t, ts.do(t, "POST", "/api/v1/me/chats/"+w.room+"/participants", apiKey(w.aliceKey),
		map[string]any{"participant": map[string]any{"participant_id": watcher.ID}}), 201, "")
	topic := "room_participants:" + w.room
	path := "/api/v1/me/chats/" + w.room + "/presence"

	before := presenceOf(t, ts.do(t, "GET", path, apiKey(w.aliceKey), nil), w.workerID)
	if before["connected"] != false || before["type"] != "Agent" {
		t.Fatalf("before it connects, the worker is %v", before)
	}

	person := newListener(t, ts, w.aliceKey, topic)
	extended := newListenerWith(t, ts, url.Values{"api_key": {watcherKey}, "extensions": {"true"}}, topic)
	plain := newListener(t, ts, w.posterKey, topic)

	worker := newListener(t, ts, w.workerKey)
	isWorker := func(connected bool) func(map[string]any) bool {
		return func(p map[string]any) bool { return p["id"] == w.workerID && p["connected"] == connected }
	}
	for _, l := range []*listener{person, extended} {
		got := l.await(t, topic, "presence", isWorker(true))
		if got["type"] != "Agent" || got["last_seen_at"] == nil {
			t.Fatalf("presence push %v", got)
		}
	}
	now := presenceOf(t, ts.do(t, "GET", path, apiKey(w.aliceKey), nil), w.workerID)
	if now["connected"] != true || now["last_seen_at"] == nil {
		t.Fatalf("while connected, the worker is %v", now)
	}

	worker.raw.conn.Close()
	for _, l := range []*listener{person, extended} {
		l.await(t, topic, "presence", isWorker(false))
	}
	after := presenceOf(t, ts.do(t, "GET", path, apiKey(w.aliceKey), nil), w.workerID)
	seen, err := time.Parse(time.RFC3339Nano, after["last_seen_at"].(string))
	if after["connected"] != false || err != nil || time.Since(seen) > time.Minute {
		t.Fatalf("after it closed, the worker is %v", after)
	}

	// The agent without ?extensions=true heard nothing, though it is in the
	// room: the pushes to the others went out in the same broadcasts.
	time.Sleep(100 * time.Millisecond)
	if n := plain.count(topic, "presence"); n != 0 {
		t.Fatalf("an agent's socket without extensions got %d presence pushes", n)
	}

	// Someone who cannot read the room cannot read its presence.
	expect(t, ts.do(t, "GET", path, apiKey(w.carolKey), nil), 404, "not_found")
	expect(t, ts.do(t, "GET", path, apiKey(w.workerKey), nil), 403, "forbidden")
}

// TestPresenceCountsEveryConnection: a person with two tabs stays connected
// until the last one closes.
func TestPresenceCountsEveryConnection(t *testing.T) {
	w := newSocketWorld(t)
	ts := w.ts
	topic := "room_participants:" + w.room
	watcher := newListener(t, ts, w.aliceKey, topic)
	first := newListener(t, ts, w.bobKey)
	watcher.await(t, topic, "presence", func(p map[string]any) bool { return p["id"] == w.bobID && p["connected"] == true })
	// The second tab joins a channel, so the server has taken it in (it
	// answers frames only from a registered connection) before the first
	// goes.
	second := newListener(t, ts, w.bobKey, "user_rooms:"+w.bobID)
	first.raw.conn.Close()
	<-first.closed
	// The server notices the close a moment later.
	time.Sleep(300 * time.Millisecond)
	path := "/api/v1/me/chats/" + w.room + "/presence"
	if p := presenceOf(t, ts.do(t, "GET", path, apiKey(w.aliceKey), nil), w.bobID); p["connected"] != true {
		t.Fatalf("with one tab still open, bob is %v", p)
	}
	// Only bob's pushes count: the watcher may also hear of its own
	// connection, when that push goes out after it joined.
	isBob := func(p map[string]any) bool { return p["id"] == w.bobID }
	if n := watcher.countOf(topic, "presence", isBob); n != 1 {
		t.Fatalf("closing one of two tabs pushed presence: %d pushes of bob's", n)
	}
	second.raw.conn.Close()
	watcher.await(t, topic, "presence", func(p map[string]any) bool { return p["id"] == w.bobID && p["connected"] == false })
}

// TestAgentsPresence: a person's agents page reads whether each agent is
// connected, or when it was last seen (here, by its key's use over REST).
func TestAgentsPresence(t *testing.T) {
	w := newSocketWorld(t)
	ts := w.ts
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(w.posterKey), nil), 200, "")
	worker := newListener(t, ts, w.workerKey)
	defer worker.raw.conn.Close()
	var got map[string]any
	waitFor := time.Now().Add(10 * time.Second)
	for time.Now().Before(waitFor) {
		r := ts.do(t, "GET", "/api/v1/me/presence", apiKey(w.aliceKey), nil)
		expect(t, r, 200, "")
		got = presenceOf(t, r, w.workerID)
		if got["connected"] == true {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got["connected"] != true {
		t.Fatalf("the connected worker is %v", got)
	}
	// Keys' last use is written a moment after the request.
	for time.Now().Before(waitFor) {
		poster := presenceOf(t, ts.do(t, "GET", "/api/v1/me/presence", apiKey(w.aliceKey), nil), mustAgentIDByKey(t, ts, w.posterKey))
		if poster["connected"] == false && poster["last_seen_at"] != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the poster, which used its key, has no last_seen_at")
}

// What other nodes tell of their sockets, as a node takes it in: a
// snapshot brings a node that started late up to date, and a node silent
// for presenceNodeSilence counts as having no sockets. (The sharing itself
// is TestTwoNodesSharePresence's; these are the parts that take minutes.)
func TestPresenceOfOtherNodes(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	tr := newPresenceTracker()
	tr.now = func() time.Time { return clock }
	pushed := func() (out []string) {
		for {
			select {
			case c := <-tr.changes:
				out = append(out, fmt.Sprintf("%s:%v", c.id, c.connected))
			default:
				return out
			}
		}
	}
	ann, bot := store.PresenceParty{ID: "ann"}, store.PresenceParty{ID: "bot", Agent: true}
	tr.heard("b", &store.PresenceNote{Snapshot: true, Everyone: []store.PresenceParty{ann, bot}}, clock)
	tr.heard("c", &store.PresenceNote{Party: &bot, Connected: true}, clock)
	if got := pushed(); !slices.Equal(got, []string{"ann:true", "bot:true"}) {
		t.Fatalf("a snapshot and a second node's socket pushed %v", got)
	}
	tr.heard("b", &store.PresenceNote{Snapshot: true, Everyone: []store.PresenceParty{bot}}, clock)
	if got := pushed(); !slices.Equal(got, []string{"ann:false"}) {
		t.Fatalf("ann left node b's snapshot: pushed %v", got)
	}
	clock = clock.Add(presenceNodeSilence / 2)
	tr.heard("c", &store.PresenceNote{Snapshot: true, Everyone: []store.PresenceParty{bot}}, clock)
	clock = clock.Add(presenceNodeSilence/2 + time.Second)
	tr.forgetSilentNodes()
	if got := pushed(); len(got) != 0 {
		t.Fatalf("node b went silent while node c still has bot: pushed %v", got)
	}
	if connected, _ := tr.state("bot"); !connected {
		t.Fatal("bot, on node c, is offline")
	}
	clock = clock.Add(presenceNodeSilence)
	tr.forgetSilentNodes()
	if got := pushed(); !slices.Equal(got, []string{"bot:false"}) {
		t.Fatalf("both nodes silent: pushed %v", got)
	}
	if connected, seen := tr.state("bot"); connected || !seen.Equal(clock) {
		t.Fatalf("bot after both nodes went silent: connected %v, last seen %v", connected, seen)
	}
}
