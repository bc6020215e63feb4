package server

import (
	"fmt"
	"testing"
)

// Scenario tests of read markers and unread counts (chatd's own extension,
// see store/reads.go): unread_count on every MeChatRoom, and
// POST /me/chats/{id}/read.

// unreadIn reads a's unread count in a room both ways the web app does: the
// room itself and its entry in the listing (with agent rooms, so that rooms
// read through an agent are there too). The two must agree.
func (k *roomsWorld) unreadIn(t testing.TB, a roomsParty, room string) int {
	t.Helper()
	got, ok := k.get(t, a, room)["unread_count"].(float64)
	if !ok {
		t.Fatalf("GET %s: no unread_count", k.names[room])
	}
	r := k.ts.do(t, "GET", humanChatsPath+"?limit=100&include=agent_rooms", a.cred, nil)
	expect(t, r, 200, "")
	for _, it := range r.list(t) {
		if it := it.(map[string]any); it["id"] == room {
			if listed, ok := it["unread_count"].(float64); !ok || listed != got {
				t.Fatalf("%s: the listing says unread_count %v, the room %v", k.names[room], it["unread_count"], got)
			}
			return int(got)
		}
	}
	t.Fatalf("%s is not in %s's listing", k.names[room], a.name)
	return 0
}

// markRead posts to a room's read route and returns the room it answers.
func (k *roomsWorld) markRead(t testing.TB, a roomsParty, room string, body any) map[string]any {
	t.Helper()
	r := k.ts.do(t, "POST", a.room(room, "read"), a.cred, body)
	expect(t, r, 200, "")
	got := r.data(t)
	if got["id"] != room || got["type"] == nil || got["status"] == nil {
		t.Fatalf("read answers %v, want the MeChatRoom", got)
	}
	if _, ok := got["unread_count"].(float64); !ok {
		t.Fatalf("read answers no unread_count: %v", got)
	}
	return got
}

// event posts an event of type typ as an agent and returns its id.
func (k *roomsWorld) event(t testing.TB, a roomsParty, room, typ string) string {
	t.Helper()
	ev := map[string]any{"content": typ + " here", "message_type": typ}
	if typ == "attention" {
		ev["metadata"] = map[string]any{"kind": "question"}
	}
	r := k.ts.do(t, "POST", a.room(room, "events"), a.cred, map[string]any{"event": ev})
	expect(t, r, 201, "")
	return r.data(t)["id"].(string)
}

// unreadStory is the room TestReadsUnreadCounts follows: alice's room, with
// bob and her agent helper in it, beside quiet, a room of hers where nothing
// happens (it stays 0 beside the other).
type unreadStory struct {
	k                  *roomsWorld
	alice, bob, helper roomsParty
	room, quiet        string
	ids                map[string]string // message ids by step name, for later steps to point at
}

func newUnreadStory(t *testing.T) *unreadStory {
	k := newRoomsWorld(t)
	s := &unreadStory{k: k, ids: map[string]string{}}
	s.alice = k.human("alice")
	s.bob = k.human("bob")
	s.helper = k.bot(s.alice, "Helper")
	s.room = k.newRoom(t, s.alice, "room", nil)
	s.quiet = k.newRoom(t, s.alice, "quiet", nil)
	k.add(t, s.alice, s.room, s.bob, "")
	k.add(t, s.alice, s.room, s.helper, "")
	return s
}

// unreadStep is what happens in the room and the counts alice and bob must
// then read.
type unreadStep struct {
	name       string
	do         func(t *testing.T) string // returns the id of a message it sent, if any
	alice, bob int
}

// text is a step in which a sends a message that mentions mention.
func (s *unreadStory) text(a, mention roomsParty) func(t *testing.T) string {
	return func(t *testing.T) string {
		r := s.k.send(t, a, s.room, "a word from "+a.name, mention)
		expect(t, r, 201, "")
		return r.data(t)["id"].(string)
	}
}

// event is a step in which helper posts an event of type typ.
func (s *unreadStory) event(typ string) func(t *testing.T) string {
	return func(t *testing.T) string { return s.k.event(t, s.helper, s.room, typ) }
}

// read is a step in which a marks the room read with body, and the answer
// must count answers unread.
func (s *unreadStory) read(a roomsParty, body func() any, answers int) func(t *testing.T) string {
	return func(t *testing.T) string {
		if got := s.k.markRead(t, a, s.room, body())["unread_count"]; got != float64(answers) {
			t.Fatalf("read answers unread_count %v, want %d", got, answers)
		}
		return ""
	}
}

// upTo is a read body naming the message an earlier step sent; it is made
// when the read runs, as the id exists only then.
func (s *unreadStory) upTo(step string) func() any {
	return func() any { return map[string]any{"message_id": s.ids[step]} }
}

// noReadBody is a read with no body at all.
func noReadBody() any { return nil }

// play takes the step and checks both people's counts after it, and that
// the quiet room stays unread-free.
func (s *unreadStory) play(t *testing.T, step unreadStep) {
	if step.do != nil {
		if id := step.do(t); id != "" {
			s.ids[step.name] = id
		}
	}
	if got := s.k.unreadIn(t, s.alice, s.room); got != step.alice {
		t.Errorf("alice's unread_count = %d, want %d", got, step.alice)
	}
	if got := s.k.unreadIn(t, s.bob, s.room); got != step.bob {
		t.Errorf("bob's unread_count = %d, want %d", got, step.bob)
	}
	if got := s.k.unreadIn(t, s.alice, s.quiet); got != 0 {
		t.Errorf("the quiet room's unread_count = %d", got)
	}
}

// rereadWritesNothing has bob read again what he read already, by id and
// with no body: each answers 200, and the database is as it was.
func (s *unreadStory) rereadWritesNothing(t *testing.T) {
	before := s.k.ts.snapshot(t)
	s.k.markRead(t, s.bob, s.room, map[string]any{"message_id": s.ids["the agent's text"]})
	s.k.markRead(t, s.bob, s.room, nil)
	s.k.ts.unchanged(t, before)
}

// agentsSeeNoCount checks that helper reads the terse ChatRoom: the count
// is the person's.
func (s *unreadStory) agentsSeeNoCount(t *testing.T) {
	if _, ok := s.k.get(t, s.helper, s.room)["unread_count"]; ok {
		t.Error("an agent's ChatRoom carries unread_count")
	}
}

func TestReadsUnreadCounts(t *testing.T) {
	s := newUnreadStory(t)
	alice, bob, helper := s.alice, s.bob, s.helper
	for _, step := range []unreadStep{
		{"a new room has nothing unread", nil, 0, 0},
		{"reading an empty room changes nothing", s.read(bob, noReadBody, 0), 0, 0},
		{"the agent's text", s.text(helper, alice), 1, 1},
		{"the agent's thought is its working, not news", s.event("thought"), 1, 1},
		{"nor is a tool call", s.event("tool_call"), 1, 1},
		{"an internal event is not either", s.event("system"), 1, 1},
		{"a request for attention is", s.event("attention"), 2, 2},
		{"bob's message: unread to alice, not to bob", s.text(bob, helper), 3, 0},
		{"alice answers: her own message marks the room read for her", s.text(alice, helper), 0, 1},
		{"bob reads with no body", s.read(bob, noReadBody, 0), 0, 0},
		{"more from the agent", s.text(helper, bob), 1, 1},
		{"and more", s.event("error"), 2, 2},
		{"bob marks an older message: his marker does not move back", s.read(bob, s.upTo("the agent's text"), 2), 2, 2},
		{"bob reads up to the first new one", s.read(bob, s.upTo("more from the agent"), 1), 2, 1},
		{"bob reads up to the newest by id", s.read(bob, s.upTo("and more"), 0), 2, 0},
		{"alice reads with an empty object", s.read(alice, func() any { return map[string]any{} }, 0), 0, 0},
		{"a null message_id is the newest too", s.read(alice, func() any { return map[string]any{"message_id": nil} }, 0), 0, 0},
	} {
		t.Run(step.name, func(t *testing.T) { s.play(t, step) })
	}
	t.Run("reading what was read already writes nothing", s.rereadWritesNothing)
	t.Run("agents see no unread count", s.agentsSeeNoCount)
}

// A person reads the rooms of the agents they own without being in them;
// those rooms count unread and take a read marker too.
func TestReadsThroughAnAgent(t *testing.T) {
	k := newRoomsWorld(t)
	alice := k.human("alice")
	helper := k.bot(alice, "Helper")
	room := k.newRoom(t, helper, "helper's room", nil)
	k.event(t, helper, room, "error")
	k.event(t, helper, room, "tool_call")
	k.event(t, helper, room, "attention")
	if got := k.unreadIn(t, alice, room); got != 2 {
		t.Fatalf("unread_count = %d, want 2", got)
	}
	if got := k.markRead(t, alice, room, nil)["unread_count"]; got != float64(0) {
		t.Fatalf("read answers unread_count %v", got)
	}
	if got := k.unreadIn(t, alice, room); got != 0 {
		t.Fatalf("unread_count after reading = %d", got)
	}
}

// The count stops at store.UnreadCap, however long the backlog: 100 reads
// "100 or more".
func TestReadsUnreadCountIsCapped(t *testing.T) {
	t.Parallel() // its own server and database
	k := newRoomsWorld(t)
	alice := k.human("alice")
	helper := k.bot(alice, "Helper")
	for _, tc := range []struct {
		backlog, want int
	}{
		{99, 99}, {100, 100}, {101, 100}, {2500, 100},
	} {
		t.Run(fmt.Sprint(tc.backlog), func(t *testing.T) {
			room := k.newRoom(t, helper, fmt.Sprint("backlog of ", tc.backlog), nil)
			k.add(t, helper, room, alice, "")
			// One statement writes the backlog: the API would take a request
			// a message, and the count is about what the table holds. Ids
			// end in i padded to 12 digits, in SQL both databases read.
			k.ts.exec(t, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
				INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type, content, inserted_at, updated_at)
				SELECT ? || substr(CAST(1000000000000 + i AS TEXT), 2), ?, ?, 'Agent', 'Helper', 'text', 'backlog ' || i, i, i FROM n`,
				tc.backlog, fmt.Sprintf("%08x-0000-7000-8000-", tc.backlog), room, helper.id)
			if got := k.unreadIn(t, alice, room); got != tc.want {
				t.Fatalf("unread_count = %d, want %d", got, tc.want)
			}
			if got := k.markRead(t, alice, room, nil)["unread_count"]; got != float64(0) {
				t.Fatalf("read answers unread_count %v", got)
			}
		})
	}
}

func TestReadsRefusals(t *testing.T) {
	k := newRoomsWorld(t)
	alice := k.human("alice")
	bob := k.human("bob")
	helper := k.bot(alice, "Helper")
	carol := k.human("carol", "globex")
	rival := k.bot(carol, "Rival")
	room := k.newRoom(t, alice, "room", nil)
	k.add(t, alice, room, helper, "")
	k.add(t, alice, room, bob, "")
	other := k.newRoom(t, alice, "other", nil)
	k.add(t, alice, other, helper, "")
	foreign := k.newRoom(t, carol, "foreign", nil)
	k.add(t, carol, foreign, rival, "")

	k.event(t, helper, room, "error")
	inOther := k.event(t, helper, other, "error")
	r := k.send(t, carol, foreign, "secret", rival)
	expect(t, r, 201, "")
	inForeign := r.data(t)["id"].(string)
	// Bob is blocked in the room: he reads nothing there until unblocked.
	expect(t, k.patch(t, alice, room, bob.id, map[string]any{"status": "blocked"}), 200, "")

	read := func(room string) string { return humanChatsPath + "/" + room + "/read" }
	upTo := func(id any) map[string]any { return map[string]any{"message_id": id} }
	k.ts.run(t, []scenario{
		{name: "another organization's room", cred: alice.cred, method: "POST", path: read(foreign), status: 404, code: "not_found"},
		{name: "another organization's room, up to its message", cred: alice.cred, method: "POST", path: read(foreign), body: upTo(inForeign), status: 404, code: "not_found"},
		{name: "a message of another organization's room", cred: alice.cred, method: "POST", path: read(room), body: upTo(inForeign), status: 404, code: "not_found"},
		{name: "a message of another of my rooms", cred: alice.cred, method: "POST", path: read(room), body: upTo(inOther), status: 404, code: "not_found"},
		{name: "a message that does not exist", cred: alice.cred, method: "POST", path: read(room), body: upTo(nilID), status: 404, code: "not_found"},
		{name: "a message id that is no UUID", cred: alice.cred, method: "POST", path: read(room), body: upTo("latest"), status: 404, code: "not_found"},
		{name: "an empty message id", cred: alice.cred, method: "POST", path: read(room), body: upTo(""), status: 404, code: "not_found"},
		{name: "a room that does not exist", cred: alice.cred, method: "POST", path: read(nilID), status: 404, code: "not_found"},
		{name: "a room id that is no UUID", cred: alice.cred, method: "POST", path: read("general"), status: 404, code: "not_found"},
		{name: "a room the person is blocked in", cred: bob.cred, method: "POST", path: read(room), status: 404, code: "not_found"},
		{name: "an unknown field", cred: alice.cred, method: "POST", path: read(room), body: map[string]any{"seq": 3}, status: 400, code: "unknown_field", pointers: []string{"/seq"}},
		{name: "a message id of the wrong type", cred: alice.cred, method: "POST", path: read(room), body: upTo(42), status: 422, code: "validation_error", pointers: []string{"/message_id"}},
		{name: "not JSON", cred: alice.cred, method: "POST", path: read(room), body: `{"message_id":`, status: 400, code: "invalid_json"},
		{name: "an agent", cred: helper.cred, method: "POST", path: read(room), status: 403, code: "forbidden"},
	})
	if got := k.unreadIn(t, alice, room); got != 1 {
		t.Fatalf("after the refusals alice's unread_count = %d, want 1", got)
	}
}

// Marking a room read is a room write for a delegated token, as posting in
// it is: chats:read does not cover it.
func TestReadsDelegationScope(t *testing.T) {
	if got := delegationScope("POST", "/api/v1/me/chats/:chat_id/read"); got != "chats:write" {
		t.Fatalf("scope = %q, want chats:write", got)
	}
}

// Reading further tells the person's other tabs and devices the new count on
// their user_rooms topic, and nobody else; a read that moves nothing pushes
// nothing.
func TestReadsPushTheNewCountToThePersonOnly(t *testing.T) {
	w := newSocketWorld(t)
	aliceTab := newListener(t, w.ts, w.aliceKey, "user_rooms:"+w.aliceID)
	bobTab := newListener(t, w.ts, w.bobKey, "user_rooms:"+w.bobID)
	first := w.post(t, "one for alice", w.aliceID)
	w.post(t, "two for alice", w.aliceID)

	read := func(body any) {
		t.Helper()
		expect(t, w.ts.do(t, "POST", "/api/v1/me/chats/"+w.room+"/read", apiKey(w.aliceKey), body), 200, "")
	}
	read(map[string]any{"message_id": first})
	got := aliceTab.await(t, "user_rooms:"+w.aliceID, "room_read", nil)
	if got["id"] != w.room || got["unread_count"] != float64(1) {
		t.Fatalf("room_read = %v, want the room with 1 unread", got)
	}
	read(map[string]any{"message_id": first}) // the marker is already there
	read(nil)
	aliceTab.await(t, "user_rooms:"+w.aliceID, "room_read", func(p map[string]any) bool { return p["unread_count"] == float64(0) })
	// A last push for both, so that anything sent before it has arrived.
	w.ts.do(t, "PATCH", "/api/v1/me/chats/"+w.room, apiKey(w.aliceKey), map[string]any{"chat": map[string]any{"title": "fence"}})
	aliceTab.await(t, "user_rooms:"+w.aliceID, "room_updated", nil)
	bobTab.await(t, "user_rooms:"+w.bobID, "room_updated", nil)
	if n := aliceTab.count("user_rooms:"+w.aliceID, "room_read"); n != 2 {
		t.Errorf("alice heard %d room_read pushes, want 2 (a read that moves nothing is silent)", n)
	}
	if n := bobTab.count("user_rooms:"+w.bobID, "room_read"); n != 0 {
		t.Errorf("bob heard %d room_read pushes of alice's reads", n)
	}
}
