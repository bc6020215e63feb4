package server

import (
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/chatd/chatd/store"
)

// Scenario tests of the rooms, participants and peers endpoints, for both
// APIs. The permission rules under test are the ones documented in
// store/access.go; the peer network is the one documented in store/peers.go.

// roomsParty is a human or an agent, with the room API it calls.
type roomsParty struct {
	name string
	id   string
	cred cred
	base string      // agentChatsPath or humanChatsPath
	user *store.User // nil for agents
}

// room is the path of a room (and of what is under it) in the actor's API.
func (a roomsParty) room(id string, under ...string) string {
	return strings.Join(append([]string{a.base, id}, under...), "/")
}

// roomsWorld drives one test server and remembers the test's name of every
// id it made, so that listings compare as readable names.
type roomsWorld struct {
	ts    *testServer
	names idLabels
}

func newRoomsWorld(t *testing.T, opts ...func(*store.Options)) *roomsWorld {
	return &roomsWorld{ts: newTestServer(t, opts...), names: map[string]string{}}
}

func (k *roomsWorld) human(handle string, org ...string) roomsParty {
	u, key := k.ts.user(handle, org...)
	k.names[u.ID] = handle
	return roomsParty{name: handle, id: u.ID, cred: apiKey(key), base: humanChatsPath, user: u}
}

// bot registers an agent; its name in listings is name, lower-cased and
// without spaces.
func (k *roomsWorld) bot(owner roomsParty, name string) roomsParty {
	a, key := k.ts.agent(owner.user, name)
	label := strings.ToLower(strings.ReplaceAll(name, " ", ""))
	k.names[a.ID] = label
	return roomsParty{name: label, id: a.ID, cred: apiKey(key), base: agentChatsPath}
}

// people are the persons most rooms tests start from, made in this order:
// alice, bob and dave of one organization, carol of another.
func (k *roomsWorld) people() (alice, bob, dave, carol roomsParty) {
	return k.human("alice"), k.human("bob"), k.human("dave"), k.human("carol", "Other Org")
}

// newRoom creates a room as a (chat is the body's chat object, nil for
// none) and returns its id.
func (k *roomsWorld) newRoom(t testing.TB, a roomsParty, name string, chat map[string]any) string {
	t.Helper()
	if chat == nil {
		chat = map[string]any{}
	}
	r := k.ts.do(t, "POST", a.base, a.cred, map[string]any{"chat": chat})
	expect(t, r, 201, "")
	id := r.data(t)["id"].(string)
	k.names[id] = name
	return id
}

// add adds member to a room as a, with role ("" for the default).
func (k *roomsWorld) add(t testing.TB, a roomsParty, room string, member roomsParty, role string) {
	t.Helper()
	expect(t, k.ts.do(t, "POST", a.room(room, "participants"), a.cred, participantBody(member.id, role)), 201, "")
}

// patch changes a participant through the human API.
func (k *roomsWorld) patch(t testing.TB, a roomsParty, room, member string, fields map[string]any) *response {
	t.Helper()
	return k.ts.do(t, "PATCH", a.room(room, "participants", member), a.cred, map[string]any{"participant": fields})
}

// send posts a text message that mentions mention.
func (k *roomsWorld) send(t testing.TB, a roomsParty, room, content string, mention roomsParty) *response {
	t.Helper()
	return k.ts.do(t, "POST", a.room(room, "messages"), a.cred, map[string]any{"message": map[string]any{
		"content": content, "mentions": []any{map[string]any{"id": mention.id}},
	}})
}

// get reads a room as a, expecting 200.
func (k *roomsWorld) get(t testing.TB, a roomsParty, room string) map[string]any {
	t.Helper()
	r := k.ts.do(t, "GET", a.room(room), a.cred, nil)
	expect(t, r, 200, "")
	return r.data(t)
}

// listed returns the test's names of the items of a listing, in order.
func (k *roomsWorld) listed(t testing.TB, r *response) string {
	t.Helper()
	return k.names.listed(t, r)
}

// walk pages through a cursor listing (query holds limit and the filters)
// and returns its pages, "|" between them.
func (k *roomsWorld) walk(t testing.TB, a roomsParty, path, query string) string {
	t.Helper()
	return k.ts.walkPages(t, path, query, a.cred, func(r *response) string { return k.listed(t, r) })
}

func TestRoomsCreate(t *testing.T) {
	k := newRoomsWorld(t)
	alice := k.human("alice")
	helper := k.bot(alice, "Helper")
	const task = "0190a000-0000-7000-8000-00000000abcd"
	long := strings.Repeat("é", 120)
	chat := func(fields map[string]any) map[string]any { return map[string]any{"chat": fields} }

	for _, caller := range []roomsParty{helper, alice} {
		for _, tc := range []struct {
			name  string
			body  any
			title any // the room's title, nil for none (a title locks the room's title)
			task  any
		}{
			{"no body", nil, nil, nil},
			{"empty object", map[string]any{}, nil, nil},
			{"empty chat", chat(map[string]any{}), nil, nil},
			{"null chat", `{"chat":null}`, nil, nil},
			{"null title and task", chat(map[string]any{"title": nil, "task_id": nil}), nil, nil},
			{"blank title", chat(map[string]any{"title": " \t "}), nil, nil},
			{"title", chat(map[string]any{"title": "  Launch plan  "}), "Launch plan", nil},
			{"title of 120 characters after trimming", chat(map[string]any{"title": "  " + long + "  "}), long, nil},
			{"task id", chat(map[string]any{"task_id": task}), nil, task},
			{"title and task id", chat(map[string]any{"title": "Task room", "task_id": task}), "Task room", task},
		} {
			t.Run(caller.name+"/"+tc.name, func(t *testing.T) {
				r := k.ts.do(t, "POST", caller.base, caller.cred, tc.body)
				expect(t, r, 201, "")
				room := r.data(t)
				if room["title"] != tc.title || room["title_locked"] != (tc.title != nil) || room["task_id"] != tc.task {
					t.Fatalf("room = %v, want title %v (locked %v), task %v", room, tc.title, tc.title != nil, tc.task)
				}
				if room["inserted_at"] != room["updated_at"] {
					t.Errorf("a new room's updated_at %v differs from inserted_at %v", room["updated_at"], room["inserted_at"])
				}
				if caller.user != nil {
					if lm, ok := room["last_message_at"]; !ok || lm != nil || room["type"] != "direct" || room["status"] != "active" {
						t.Errorf("MeChatRoom = %v, want type direct, status active, last_message_at null", room)
					}
				} else if _, ok := room["type"]; ok {
					t.Errorf("agents get the terse ChatRoom, got %v", room)
				}
				id := room["id"].(string)
				if got := k.get(t, caller, id); !reflect.DeepEqual(got, room) {
					t.Errorf("GET = %v, want the created room %v", got, room)
				}
				parts := k.ts.do(t, "GET", caller.room(id, "participants"), caller.cred, nil).list(t)
				if len(parts) != 1 {
					t.Fatalf("participants = %v, want only the creator", parts)
				}
				if p := parts[0].(map[string]any); p["id"] != caller.id || p["role"] != "owner" || p["status"] != "active" {
					t.Fatalf("creator = %v, want the caller as active owner", p)
				}
			})
		}
	}
}

func TestRoomsCreateRefusals(t *testing.T) {
	k := newRoomsWorld(t)
	alice := k.human("alice")
	helper := k.bot(alice, "Helper")
	chat := func(fields map[string]any) map[string]any { return map[string]any{"chat": fields} }
	var cases []scenario
	for _, caller := range []roomsParty{helper, alice} {
		for _, tc := range []scenario{
			{name: "title with a newline", body: chat(map[string]any{"title": "Line one\nline two"}), pointers: []string{"/chat/title"}},
			{name: "title with a carriage return", body: chat(map[string]any{"title": "Line one\rline two"}), pointers: []string{"/chat/title"}},
			{name: "title with NUL", body: chat(map[string]any{"title": "Null\x00byte"}), pointers: []string{"/chat/title"}},
			{name: "title of 121 characters", body: chat(map[string]any{"title": strings.Repeat("t", 121)}), pointers: []string{"/chat/title"}},
			{name: "title of invisible characters only", body: chat(map[string]any{"title": "\u200b\u2060"}), pointers: []string{"/chat/title"}},
			{name: "title of a NUL only", body: chat(map[string]any{"title": "\x00"}), pointers: []string{"/chat/title"}},
			{name: "title of the wrong type", body: chat(map[string]any{"title": 42}), pointers: []string{"/chat/title"}},
			{name: "task id not a uuid", body: chat(map[string]any{"task_id": "task-1"}), pointers: []string{"/chat/task_id"}},
			{name: "task id of the wrong type", body: chat(map[string]any{"task_id": 7}), pointers: []string{"/chat/task_id"}},
			{name: "chat of the wrong type", body: map[string]any{"chat": "room"}, pointers: []string{"/chat"}},
			{name: "unknown field", body: chat(map[string]any{"name": "x"}), status: 400, code: "unknown_field", pointers: []string{"/chat/name"}},
			{name: "not JSON", body: `{"chat":`, status: 400, code: "invalid_json"},
		} {
			tc.name, tc.cred, tc.method, tc.path = caller.name+"/"+tc.name, caller.cred, "POST", caller.base
			if tc.status == 0 {
				tc.status, tc.code = 422, "validation_error"
			}
			cases = append(cases, tc)
		}
	}
	k.ts.run(t, cases)

	// Both problems of one body are reported together.
	r := k.ts.do(t, "POST", humanChatsPath, alice.cred, chat(map[string]any{"title": "a\nb", "task_id": "x"}))
	expect(t, r, 422, "validation_error")
	if d := errorDetails(t, r); d["/chat/title"] == nil || d["/chat/task_id"] == nil {
		t.Fatalf("details = %v, want both pointers", d)
	}
}

// A person and the agents it owns share one chats quota.
func TestRoomsCreateQuota(t *testing.T) {
	k := newRoomsWorld(t, func(o *store.Options) { o.Limits = store.Limits{ChatsPerUser: 2} })
	alice := k.human("alice")
	helper := k.bot(alice, "Helper")
	bob := k.human("bob")
	mine := k.newRoom(t, alice, "mine", nil)
	k.newRoom(t, helper, "helper's", nil)

	var cases []scenario
	for _, caller := range []roomsParty{alice, helper} {
		cases = append(cases, scenario{name: caller.name, cred: caller.cred, method: "POST", path: caller.base,
			body: map[string]any{"chat": map[string]any{"title": "One too many"}}, status: 403, code: "limit_reached"})
	}
	k.ts.run(t, cases)
	r := k.ts.do(t, "POST", helper.base, helper.cred, nil)
	want := map[string]any{"resource": "chats", "limit": float64(2), "current": float64(2)}
	if d := errorDetails(t, r); !reflect.DeepEqual(d, want) {
		t.Fatalf("details = %v, want %v", d, want)
	}

	// Someone else's quota is their own; a deleted room frees its place.
	k.newRoom(t, bob, "bob's", nil)
	expect(t, k.ts.do(t, "DELETE", alice.room(mine), alice.cred, nil), 204, "")
	k.newRoom(t, helper, "again", nil)
}

func TestRoomsAgentListing(t *testing.T) {
	k := newRoomsWorld(t)
	alice := k.human("alice")
	helper := k.bot(alice, "Helper")
	sibling := k.bot(alice, "Sibling")
	for _, name := range []string{"r1", "r2", "r3", "r4"} {
		k.newRoom(t, helper, name, nil)
	}
	r5 := k.newRoom(t, alice, "r5", nil)
	k.add(t, alice, r5, helper, "")
	k.newRoom(t, sibling, "elsewhere", nil)
	gone := k.newRoom(t, helper, "gone", nil)
	expect(t, k.ts.do(t, "DELETE", alice.room(gone), alice.cred, nil), 204, "")

	for _, tc := range []struct {
		query, rooms string
		meta         map[string]any
	}{
		{"", "r5,r4,r3,r2,r1", offsetMetaJSON(1, 20, 5, 1)},
		{"page=2&page_size=2", "r3,r2", offsetMetaJSON(2, 2, 5, 3)},
		{"page=3&page_size=2", "r1", offsetMetaJSON(3, 2, 5, 3)},
		{"page=4&page_size=2", "", offsetMetaJSON(4, 2, 5, 3)},
		{"page_size=100", "r5,r4,r3,r2,r1", offsetMetaJSON(1, 100, 5, 1)},
		{"page_size=1", "r5", offsetMetaJSON(1, 1, 5, 5)},
	} {
		t.Run("?"+tc.query, func(t *testing.T) {
			r := k.ts.do(t, "GET", agentChatsPath+"?"+tc.query, helper.cred, nil)
			expect(t, r, 200, "")
			if got := k.listed(t, r); got != tc.rooms {
				t.Errorf("rooms = %s, want %s", got, tc.rooms)
			}
			if m := r.meta(t); !reflect.DeepEqual(m, tc.meta) {
				t.Errorf("metadata = %v, want %v", m, tc.meta)
			}
			// page/page_size is this listing's only paging, so not deprecated here.
			if r.header.Get("Deprecation") != "" {
				t.Error("the agent room listing answers Deprecation")
			}
			for _, it := range r.list(t) {
				if _, ok := it.(map[string]any)["type"]; ok {
					t.Fatalf("agents get the terse ChatRoom, got %v", it)
				}
			}
		})
	}

	var cases []scenario
	for _, q := range []struct{ query, pointer string }{
		{"page_size=0", "/page_size"}, {"page_size=101", "/page_size"}, {"page_size=ten", "/page_size"},
		{"page=0", "/page"}, {"page=-1", "/page"}, {"page=first", "/page"},
	} {
		cases = append(cases, scenario{name: q.query, cred: helper.cred, method: "GET", path: agentChatsPath + "?" + q.query,
			status: 422, code: "validation_error", pointers: []string{q.pointer}})
	}
	k.ts.run(t, cases)
}

func TestRoomsHumanListing(t *testing.T) {
	t.Parallel() // its own server and database
	k := newRoomsWorld(t)
	alice := k.human("alice")
	bob := k.human("bob")
	helper := k.bot(alice, "Helper")
	ids := map[string]string{}
	for _, name := range []string{"m1", "m2", "m3", "m4", "m5"} {
		ids[name] = k.newRoom(t, alice, name, nil)
	}
	k.newRoom(t, helper, "a1", nil) // alice reads it only through her agent
	b1 := k.newRoom(t, bob, "b1", nil)
	k.add(t, bob, b1, alice, "")
	k.newRoom(t, bob, "b2", nil)
	gone := k.newRoom(t, alice, "gone", nil)
	expect(t, k.ts.do(t, "DELETE", alice.room(gone), alice.cred, nil), 204, "")

	t.Run("newest first, oldest first, with agent rooms", func(t *testing.T) { humanListingOrders(t, k, alice) })

	// A rename moves updated_at, and with it the room's place in that order.
	t.Run("a rename moves the room in updated_at order", func(t *testing.T) { humanListingByUpdate(t, k, alice, ids) })
	t.Run("status and type filters", func(t *testing.T) { humanListingFilters(t, k, ids, alice) })

	// The deprecated page/page_size still work, with totals and headers.
	t.Run("the deprecated page and page_size", func(t *testing.T) { humanListingPagesByPage(t, k, alice) })
	t.Run("refusals", func(t *testing.T) { humanListingRefusals(t, k, alice) })
}

func humanListingOrders(t *testing.T, k *roomsWorld, alice roomsParty) {
	r := k.ts.do(t, "GET", humanChatsPath, alice.cred, nil)
	expect(t, r, 200, "")
	if got := k.listed(t, r); got != "b1,m5,m4,m3,m2,m1" {
		t.Fatalf("default listing (newest first) = %s", got)
	}
	want := map[string]any{"has_more": false, "limit": float64(20), "next_cursor": nil}
	if m := r.meta(t); !reflect.DeepEqual(m, want) {
		t.Fatalf("cursor-mode metadata = %v, want %v", m, want)
	}
	for _, it := range r.list(t) {
		room := it.(map[string]any)
		if _, ok := room["last_message_at"]; !ok || room["type"] == nil || room["status"] == nil {
			t.Fatalf("not a MeChatRoom: %v", room)
		}
	}

	for _, w := range []struct{ name, query, pages string }{
		{"newest first", "limit=2", "b1,m5|m4,m3|m2,m1"},
		{"oldest first", "limit=4&order=asc", "m1,m2,m3,m4|m5,b1"},
		{"with agent rooms", "limit=3&include=agent_rooms", "b1,a1,m5|m4,m3,m2|m1"},
		{"an empty include is no include", "limit=10&include=", "b1,m5,m4,m3,m2,m1"},
	} {
		if got := k.walk(t, alice, humanChatsPath, w.query); got != w.pages {
			t.Errorf("%s: walk = %s, want %s", w.name, got, w.pages)
		}
	}
}

func humanListingByUpdate(t *testing.T, k *roomsWorld, alice roomsParty, ids map[string]string) {
	expect(t, k.ts.do(t, "PATCH", alice.room(ids["m1"]), alice.cred, map[string]any{"chat": map[string]any{"title": "Renamed"}}), 200, "")
	if got := k.walk(t, alice, humanChatsPath, "limit=2&sort_by=updated_at"); got != "m1,b1|m5,m4|m3,m2" {
		t.Errorf("walk by updated_at = %s", got)
	}
	if got := k.walk(t, alice, humanChatsPath, "limit=5&sort_by=updated_at&order=asc"); got != "m2,m3,m4,m5,b1|m1" {
		t.Errorf("walk by updated_at ascending = %s", got)
	}
}

func humanListingFilters(t *testing.T, k *roomsWorld, ids map[string]string, alice roomsParty) {
	k.ts.exec(t, `UPDATE rooms SET status = 'archived' WHERE id = ?`, ids["m2"])
	k.ts.exec(t, `UPDATE rooms SET type = 'group' WHERE id = ?`, ids["m3"])
	for _, f := range []struct{ query, rooms string }{
		{"status=archived", "m2"},
		{"status=active", "b1,m5,m4,m3,m1"},
		{"status=closed", ""},
		{"type=group", "m3"},
		{"type=direct&status=active", "b1,m5,m4,m1"},
		{"type=task", ""},
		{"type=direct&include=agent_rooms", "b1,a1,m5,m4,m2,m1"},
	} {
		r := k.ts.do(t, "GET", humanChatsPath+"?"+f.query, alice.cred, nil)
		expect(t, r, 200, "")
		if got := k.listed(t, r); got != f.rooms {
			t.Errorf("?%s = %s, want %s", f.query, got, f.rooms)
		}
	}
	if got := k.walk(t, alice, humanChatsPath, "limit=1&status=active&type=direct"); got != "b1|m5|m4|m1" {
		t.Errorf("filtered walk = %s", got)
	}
}

func humanListingPagesByPage(t *testing.T, k *roomsWorld, alice roomsParty) {
	page := k.ts.do(t, "GET", humanChatsPath+"?page=2&page_size=4", alice.cred, nil)
	expect(t, page, 200, "")
	if got := k.listed(t, page); got != "m2,m1" {
		t.Errorf("page 2 = %s", got)
	}
	m := page.meta(t)
	if m["page"] != float64(2) || m["page_size"] != float64(4) || m["total_count"] != float64(6) || m["total_pages"] != float64(2) || m["has_more"] != false {
		t.Errorf("page metadata = %v", m)
	}
	if page.header.Get("Deprecation") == "" || page.header.Get("Sunset") == "" {
		t.Error("page/page_size without Deprecation and Sunset headers")
	}
}

func humanListingRefusals(t *testing.T, k *roomsWorld, alice roomsParty) {
	byUpdated := k.ts.do(t, "GET", humanChatsPath+"?limit=1&sort_by=updated_at", alice.cred, nil).meta(t)["next_cursor"].(string)
	byInserted := k.ts.do(t, "GET", humanChatsPath+"?limit=1", alice.cred, nil).meta(t)["next_cursor"].(string)
	refused := func(query, code string, pointers ...string) scenario {
		return scenario{name: query, cred: alice.cred, method: "GET", path: humanChatsPath + "?" + query, status: 422, code: code, pointers: pointers}
	}
	k.ts.run(t, []scenario{
		refused("include=everything", "validation_error", "/include"),
		refused("status=open", "validation_error", "/status"),
		refused("type=dm", "validation_error", "/type"),
		refused("sort_by=title", "validation_error", "/sort_by"),
		refused("order=up", "validation_error", "/order"),
		refused("limit=0", "validation_error", "/limit"),
		refused("limit=101", "validation_error", "/limit"),
		refused("page=0", "validation_error", "/page"),
		refused("cursor="+url.QueryEscape(byInserted)+"&page=1", "validation_error"),
		refused("cursor=garbage", "invalid_cursor", "/cursor"),
		refused("cursor="+url.QueryEscape(byUpdated), "invalid_cursor", "/cursor"),
		refused("sort_by=updated_at&order=asc&cursor="+url.QueryEscape(byUpdated), "invalid_cursor", "/cursor"),
		refused("status=active&cursor="+url.QueryEscape(byInserted), "invalid_cursor", "/cursor"),
		refused("include=agent_rooms&cursor="+url.QueryEscape(byInserted), "invalid_cursor", "/cursor"),
	})
}

func TestRoomsGet(t *testing.T) {
	k := newRoomsWorld(t)
	alice, bob, dave, carol := k.people()
	helper := k.bot(alice, "Helper")
	sibling := k.bot(alice, "Sibling")
	carolBot := k.bot(carol, "Carol Bot")

	room := k.newRoom(t, alice, "room", map[string]any{"title": "Shared"})
	k.add(t, alice, room, helper, "")
	k.add(t, alice, room, bob, "")
	agentRoom := k.newRoom(t, helper, "agent room", nil)
	blocking := k.newRoom(t, alice, "blocking", nil)
	k.add(t, alice, blocking, helper, "")
	k.add(t, alice, blocking, bob, "")
	for _, who := range []roomsParty{helper, bob} {
		expect(t, k.patch(t, alice, blocking, who.id, map[string]any{"status": "blocked"}), 200, "")
	}
	gone := k.newRoom(t, alice, "gone", nil)
	k.add(t, alice, gone, helper, "")
	expect(t, k.ts.do(t, "DELETE", alice.room(gone), alice.cred, nil), 204, "")

	for _, tc := range []struct {
		name string
		as   roomsParty
		room string
	}{
		{"owner", alice, room},
		{"agent participant", helper, room},
		{"human participant", bob, room},
		{"agent creator", helper, agentRoom},
		{"the owner of a participating agent", alice, agentRoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := k.get(t, tc.as, tc.room)
			if got["id"] != tc.room {
				t.Fatalf("room = %v", got)
			}
			if tc.as.user == nil {
				if _, ok := got["type"]; ok {
					t.Fatalf("agents get the terse ChatRoom, got %v", got)
				}
			} else if _, ok := got["last_message_at"]; !ok {
				t.Fatalf("humans get MeChatRoom, got %v", got)
			}
		})
	}
	// Whatever the reason, a room the caller cannot read answers the same 404.
	var messages []string
	for _, tc := range []struct {
		name string
		as   roomsParty
		path string
	}{
		{"a person of the organization not in the room", dave, dave.room(room)},
		{"a sibling agent not in the room", sibling, sibling.room(room)},
		{"a person of another organization", carol, carol.room(room)},
		{"an agent of another organization", carolBot, carolBot.room(room)},
		{"a deleted room", alice, alice.room(gone)},
		{"a deleted room, by its agent", helper, helper.room(gone)},
		{"an agent blocked in the room", helper, helper.room(blocking)},
		{"a person blocked in the room", bob, bob.room(blocking)},
		{"an unknown id", alice, alice.room(nilID)},
		{"a malformed id", alice, alice.room("not-a-uuid")},
		{"an id in braces", alice, alice.room("{" + room + "}")},
		{"a malformed id, agent API", helper, helper.room("42")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.ts.do(t, "GET", tc.path, tc.as.cred, nil)
			expect(t, r, 404, "not_found")
			messages = append(messages, r.json(t)["error"].(map[string]any)["message"].(string))
		})
	}
	for _, m := range messages {
		if m != messages[0] {
			t.Fatalf("404 messages differ, which tells a hidden room from a missing one: %q", messages)
		}
	}
}

// chatTitle is the body that renames a room to title.
func chatTitle(title any) map[string]any {
	return map[string]any{"chat": map[string]any{"title": title}}
}

func TestRoomsRename(t *testing.T) {
	k := newRoomsWorld(t)
	alice, bob, dave, carol := k.people()
	helper := k.bot(alice, "Helper")
	sibling := k.bot(alice, "Sibling")
	room := k.newRoom(t, alice, "room", nil)
	k.add(t, alice, room, helper, "")
	k.add(t, alice, room, bob, "")
	agentRoom := k.newRoom(t, helper, "agent room", nil)
	k.add(t, helper, agentRoom, sibling, "")

	for _, tc := range []struct {
		name  string
		as    roomsParty
		room  string
		title string
		want  string
	}{
		{"a person who owns the room", alice, room, "  Q3 planning\t", "Q3 planning"},
		{"an agent that owns the room", helper, agentRoom, "Agent plans", "Agent plans"},
		{"the owner of the agent that owns the room", alice, agentRoom, "Alice's plans", "Alice's plans"},
		{"to 120 characters after trimming", alice, room, " " + strings.Repeat("x", 120) + " ", strings.Repeat("x", 120)},
		{"back again", alice, room, "Q3 planning", "Q3 planning"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := k.get(t, tc.as, tc.room)
			r := k.ts.do(t, "PATCH", tc.as.room(tc.room), tc.as.cred, chatTitle(tc.title))
			expect(t, r, 200, "")
			got := r.data(t)
			if got["title"] != tc.want || got["title_locked"] != true || got["id"] != tc.room {
				t.Fatalf("renamed = %v, want title %q, locked", got, tc.want)
			}
			if got["updated_at"].(string) <= before["updated_at"].(string) {
				t.Errorf("updated_at %v did not move past %v", got["updated_at"], before["updated_at"])
			}
			if tc.as.user == nil {
				if _, ok := got["type"]; ok {
					t.Errorf("agents get the terse ChatRoom, got %v", got)
				}
			} else if got["last_message_at"] != nil || got["type"] != "direct" {
				t.Errorf("MeChatRoom = %v", got)
			}
			if after := k.get(t, tc.as, tc.room); after["title"] != tc.want || after["updated_at"] != got["updated_at"] {
				t.Errorf("GET after rename = %v", after)
			}
		})
	}

	t.Run("to the same locked title changes nothing", func(t *testing.T) {
		for _, same := range []string{"Q3 planning", "  Q3 planning  "} {
			before, snap := k.get(t, alice, room), k.ts.snapshot(t)
			r := k.ts.do(t, "PATCH", alice.room(room), alice.cred, chatTitle(same))
			expect(t, r, 200, "")
			if got := r.data(t); got["updated_at"] != before["updated_at"] || got["title"] != "Q3 planning" || got["title_locked"] != true {
				t.Fatalf("no-op rename = %v, before %v", got, before)
			}
			k.ts.unchanged(t, snap)
		}
	})

	t.Run("refusals", func(t *testing.T) { renameRefusals(t, k, bob, room, helper, sibling, agentRoom, dave, carol, alice) })
}

func renameRefusals(t *testing.T, k *roomsWorld, bob roomsParty, room string, helper, sibling roomsParty, agentRoom string, dave, carol, alice roomsParty) {
	rename := func(name string, as roomsParty, room string, body any, status int, code string, pointers ...string) scenario {
		return scenario{name: name, cred: as.cred, method: "PATCH", path: as.room(room), body: body, status: status, code: code, pointers: pointers}
	}
	k.ts.run(t, []scenario{
		rename("a person member", bob, room, chatTitle("Mine now"), 403, "forbidden"),
		rename("an agent member", helper, room, chatTitle("Mine now"), 403, "forbidden"),
		rename("a sibling agent member", sibling, agentRoom, chatTitle("Mine now"), 403, "forbidden"),
		rename("a person not in the room", dave, room, chatTitle("Mine now"), 404, "not_found"),
		rename("a person of another organization", carol, room, chatTitle("Mine now"), 404, "not_found"),
		rename("an agent not in the room", sibling, room, chatTitle("Mine now"), 404, "not_found"),
		rename("a malformed id", alice, "nope", chatTitle("Mine now"), 404, "not_found"),
		rename("an unknown id", alice, nilID, chatTitle("Mine now"), 404, "not_found"),
		rename("empty", alice, room, chatTitle(""), 422, "validation_error", "/chat/title"),
		rename("blank", alice, room, chatTitle(" \t "), 422, "validation_error", "/chat/title"),
		rename("121 characters after trimming", alice, room, chatTitle(" "+strings.Repeat("y", 121)+" "), 422, "validation_error", "/chat/title"),
		rename("a newline", alice, room, chatTitle("Q3\nplanning"), 422, "validation_error", "/chat/title"),
		rename("a carriage return", alice, room, chatTitle("Q3\rplanning"), 422, "validation_error", "/chat/title"),
		rename("NUL", alice, room, chatTitle("Q3\x00planning"), 422, "validation_error", "/chat/title"),
		rename("null title", alice, room, chatTitle(nil), 422, "validation_error", "/chat/title"),
		rename("a number", alice, room, chatTitle(3), 422, "validation_error", "/chat/title"),
		rename("no title", alice, room, map[string]any{"chat": map[string]any{}}, 422, "validation_error", "/chat/title"),
		rename("no body", alice, room, nil, 422, "validation_error", "/chat/title"),
		rename("an unknown field", alice, room, map[string]any{"chat": map[string]any{"title": "x", "status": "closed"}}, 400, "unknown_field", "/chat/status"),
		rename("agent API, bad title", helper, agentRoom, chatTitle("a\nb"), 422, "validation_error", "/chat/title"),
	})
}

// Without a title, a room takes one from its first text message; a title
// given at creation or by a rename locks it.
func TestRoomsTitleFromFirstMessage(t *testing.T) {
	k := newRoomsWorld(t)
	alice := k.human("alice")
	helper := k.bot(alice, "Helper")
	long := strings.Repeat("a", 119) + " " + strings.Repeat("b", 10) // the cut at 120 ends in a space
	for _, tc := range []struct {
		name    string
		created map[string]any
		first   string
		want    any
		locked  bool
	}{
		{"first visible line, trimmed", nil, "\n \t \n\u200b\u2060\n  Deploy  checklist\tfor Friday  \nsecond line", "Deploy  checklist for Friday", false},
		{"cut at 120 characters", nil, long + "\nmore", strings.Repeat("a", 119), false},
		{"wide characters count as one", nil, strings.Repeat("日", 130), strings.Repeat("日", 120), false},
		{"locked at creation", map[string]any{"title": "Fixed"}, "Something else entirely", "Fixed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			room := k.newRoom(t, alice, tc.name, tc.created)
			k.add(t, alice, room, helper, "")
			before := k.get(t, alice, room)
			expect(t, k.send(t, alice, room, tc.first, helper), 201, "")
			got := k.get(t, alice, room)
			if got["title"] != tc.want || got["title_locked"] != tc.locked {
				t.Fatalf("room = %v, want title %q (locked %v)", got, tc.want, tc.locked)
			}
			if got["last_message_at"] == nil {
				t.Errorf("last_message_at not set by a message: %v", got)
			}
			if !tc.locked && got["updated_at"].(string) <= before["updated_at"].(string) {
				t.Errorf("titling did not move updated_at: %v", got)
			}
			// Only the first message titles the room.
			expect(t, k.send(t, alice, room, "A later topic", helper), 201, "")
			if again := k.get(t, alice, room); again["title"] != tc.want {
				t.Fatalf("a second message retitled the room: %v", again)
			}
		})
	}

	t.Run("agent message in an agent's room", func(t *testing.T) {
		room := k.newRoom(t, helper, "agent room", nil)
		k.add(t, helper, room, alice, "")
		expect(t, k.send(t, helper, room, "Status report\nAll green", alice), 201, "")
		if got := k.get(t, helper, room); got["title"] != "Status report" || got["title_locked"] != false {
			t.Fatalf("room = %v", got)
		}
	})

	t.Run("a rename locks a derived title", func(t *testing.T) {
		room := k.newRoom(t, alice, "derived", nil)
		k.add(t, alice, room, helper, "")
		expect(t, k.send(t, alice, room, "Kickoff", helper), 201, "")
		derived := k.get(t, alice, room)
		// The same title as the derived one still locks it: the no-op is only
		// for a title that is already locked.
		r := k.ts.do(t, "PATCH", alice.room(room), alice.cred, map[string]any{"chat": map[string]any{"title": "Kickoff"}})
		expect(t, r, 200, "")
		got := r.data(t)
		if got["title"] != "Kickoff" || got["title_locked"] != true || got["updated_at"] == derived["updated_at"] {
			t.Fatalf("rename = %v, before %v", got, derived)
		}
		if got["last_message_at"] != derived["last_message_at"] {
			t.Errorf("a rename moved last_message_at: %v -> %v", derived["last_message_at"], got["last_message_at"])
		}
	})
}

func TestRoomsDelete(t *testing.T) {
	k := newRoomsWorld(t)
	alice, bob, dave, carol := k.people()
	helper := k.bot(alice, "Helper")
	room := k.newRoom(t, alice, "room", map[string]any{"title": "Doomed"})
	k.add(t, alice, room, helper, "admin")
	k.add(t, alice, room, bob, "")
	expect(t, k.send(t, alice, room, "Hello @alice/helper", helper), 201, "")
	kept := k.newRoom(t, alice, "kept", nil)
	k.add(t, alice, kept, helper, "")

	// Bob's room where alice's agent is only a member: its owner does not
	// own the room.
	bobs := k.newRoom(t, bob, "bob's", nil)
	k.add(t, bob, bobs, alice, "")
	k.add(t, alice, bobs, helper, "")

	k.ts.run(t, []scenario{
		{name: "a person member", cred: bob.cred, method: "DELETE", path: bob.room(room), status: 403, code: "forbidden"},
		{name: "a person not in the room", cred: dave.cred, method: "DELETE", path: dave.room(room), status: 404, code: "not_found"},
		{name: "a person of another organization", cred: carol.cred, method: "DELETE", path: carol.room(room), status: 404, code: "not_found"},
		{name: "the owner of a member agent", cred: alice.cred, method: "DELETE", path: alice.room(bobs), status: 403, code: "forbidden"},
		{name: "an unknown id", cred: alice.cred, method: "DELETE", path: alice.room(nilID), status: 404, code: "not_found"},
		{name: "a malformed id", cred: alice.cred, method: "DELETE", path: alice.room("room-1"), status: 404, code: "not_found"},
	})

	r := k.ts.do(t, "DELETE", alice.room(room), alice.cred, nil)
	expect(t, r, 204, "")
	if len(r.body) != 0 {
		t.Fatalf("204 with a body: %q", r.body)
	}

	// The room is gone from every read and listing, for everyone in it.
	gone := func(as roomsParty, method, path string, body any) scenario {
		return refusalCase("after delete/"+as.name+" "+method+" "+strings.TrimPrefix(path, as.room(room)), as.cred, method, path, body, 404, "not_found")
	}
	k.ts.run(t, []scenario{
		gone(alice, "GET", alice.room(room), nil),
		gone(alice, "GET", alice.room(room, "messages"), nil),
		gone(alice, "GET", alice.room(room, "participants"), nil),
		gone(alice, "PATCH", alice.room(room), map[string]any{"chat": map[string]any{"title": "Back"}}),
		gone(alice, "DELETE", alice.room(room), nil),
		gone(alice, "POST", alice.room(room, "participants"), participantBody(dave.id, "")),
		gone(bob, "GET", bob.room(room), nil),
		gone(bob, "DELETE", bob.room(room, "participants", bob.id), nil),
		gone(helper, "GET", helper.room(room), nil),
		gone(helper, "GET", helper.room(room, "messages"), nil),
		gone(helper, "GET", helper.room(room, "participants"), nil),
		gone(helper, "POST", helper.room(room, "messages"), map[string]any{"message": map[string]any{"content": "hi", "mentions": []any{map[string]any{"id": alice.id}}}}),
	})
	t.Run("the listings leave it out", func(t *testing.T) { deletedRoomIsNotListed(t, k, alice, bob, helper) })

	t.Run("by the owner of the agent that owns the room", func(t *testing.T) {
		agentRoom := k.newRoom(t, helper, "agent room", nil)
		k.ts.run(t, []scenario{{name: "not by someone outside it", cred: bob.cred, method: "DELETE", path: bob.room(agentRoom), status: 404, code: "not_found"}})
		expect(t, k.ts.do(t, "DELETE", alice.room(agentRoom), alice.cred, nil), 204, "")
		expect(t, k.ts.do(t, "GET", helper.room(agentRoom), helper.cred, nil), 404, "not_found")
	})
}

func deletedRoomIsNotListed(t *testing.T, k *roomsWorld, alice, bob, helper roomsParty) {
	for _, tc := range []struct {
		as          roomsParty
		path, rooms string
	}{
		{alice, humanChatsPath, "bob's,kept"},
		{alice, humanChatsPath + "?include=agent_rooms", "bob's,kept"},
		{bob, humanChatsPath, "bob's"},
		{helper, agentChatsPath, "bob's,kept"},
	} {
		r := k.ts.do(t, "GET", tc.path, tc.as.cred, nil)
		expect(t, r, 200, "")
		if got := k.listed(t, r); got != tc.rooms {
			t.Errorf("%s %s = %s, want %s", tc.as.name, tc.path, got, tc.rooms)
		}
	}
	if m := k.ts.do(t, "GET", agentChatsPath, helper.cred, nil).meta(t); m["total_count"] != float64(2) {
		t.Errorf("agent listing counts the deleted room: %v", m)
	}
}

func TestParticipantsList(t *testing.T) {
	k := newRoomsWorld(t)
	alice, bob, dave, carol := k.people()
	erin := k.human("erin", "Other Org")
	helper := k.bot(alice, "Helper")
	sibling := k.bot(alice, "Sibling")
	global := k.bot(carol, "Global")
	k.ts.exec(t, `UPDATE agents SET is_global = 1 WHERE id = ?`, global.id)
	room := k.newRoom(t, alice, "room", nil)
	for _, p := range []roomsParty{helper, bob, sibling, global} {
		k.add(t, alice, room, p, "")
	}
	const all = "alice,helper,bob,sibling,global" // oldest first

	t.Run("agent API", func(t *testing.T) { participantsListAgentAPI(t, k, room, all, alice, bob, helper, sibling) })

	t.Run("human API", func(t *testing.T) { participantsListHumanAPI(t, k, room, all, alice, bob, helper, sibling) })

	// A person reads the rooms its agents are in (store/access.go), so the
	// owner of a global agent reads this room from another organization.
	if got := k.listed(t, k.ts.do(t, "GET", carol.room(room, "participants"), carol.cred, nil)); got != all {
		t.Errorf("the global agent's owner reads %s", got)
	}

	t.Run("refusals", func(t *testing.T) { participantsListRefusals(t, k, alice, room, helper, sibling, dave, erin, bob) })
}

func participantsListAgentAPI(t *testing.T, k *roomsWorld, room, all string, alice, bob, helper, sibling roomsParty) {
	r := k.ts.do(t, "GET", helper.room(room, "participants"), helper.cred, nil)
	expect(t, r, 200, "")
	if got := k.listed(t, r); got != all {
		t.Fatalf("participants = %s, want %s", got, all)
	}
	if _, ok := r.json(t)["metadata"]; ok {
		t.Fatalf("the agent API's participant list has no metadata: %s", r.body)
	}
	for _, it := range r.list(t) {
		p := it.(map[string]any)
		wantType, wantRole := "Agent", "member"
		if p["id"] == alice.id || p["id"] == bob.id {
			wantType = "User"
		}
		if p["id"] == alice.id {
			wantRole = "owner"
		}
		if p["type"] != wantType || p["role"] != wantRole || p["status"] != "active" || p["name"] == "" || p["handle"] == "" {
			t.Errorf("participant = %v, want type %s role %s", p, wantType, wantRole)
		}
	}
	// Agents read the same list through the agent API only.
	expect(t, k.ts.do(t, "GET", sibling.room(room, "participants"), sibling.cred, nil), 200, "")
}

func participantsListHumanAPI(t *testing.T, k *roomsWorld, room, all string, alice, bob, helper, sibling roomsParty) {
	r := k.ts.do(t, "GET", alice.room(room, "participants"), alice.cred, nil)
	expect(t, r, 200, "")
	if got := k.listed(t, r); got != all {
		t.Fatalf("participants = %s", got)
	}
	want := map[string]any{"has_more": false, "limit": float64(20), "next_cursor": nil}
	if m := r.meta(t); !reflect.DeepEqual(m, want) {
		t.Fatalf("metadata = %v, want %v", m, want)
	}
	details := map[string]map[string]any{}
	for _, it := range r.list(t) {
		p := it.(map[string]any)
		details[k.names[p["id"].(string)]] = p
	}
	if p := details["bob"]; p["name"] != "Bob Tester" || p["handle"] != "bob" || p["description"] != nil || p["is_external"] != nil {
		t.Errorf("a person's details = %v", p)
	}
	if p := details["global"]; p["name"] != "Global" || p["handle"] != "carol/global" || p["description"] != "Global does things" || p["is_external"] != true {
		t.Errorf("an agent's details = %v", p)
	}
	for query, pages := range map[string]string{
		"limit=2":                         "alice,helper|bob,sibling|global",
		"limit=2&participant_type=User":   "alice,bob",
		"limit=2&participant_type=Agent":  "helper,sibling|global",
		"limit=100&participant_type=User": "alice,bob",
	} {
		if got := k.walk(t, alice, alice.room(room, "participants"), query); got != pages {
			t.Errorf("walk ?%s = %s, want %s", query, got, pages)
		}
	}
	// Any reader may list, not only managers.
	if got := k.walk(t, bob, bob.room(room, "participants"), "limit=5"); got != all {
		t.Errorf("bob's walk = %s", got)
	}
	r = k.ts.do(t, "GET", alice.room(room, "participants")+"?page=2&page_size=2", alice.cred, nil)
	expect(t, r, 200, "")
	m := r.meta(t)
	if got := k.listed(t, r); got != "bob,sibling" || m["total_count"] != float64(5) || m["total_pages"] != float64(3) {
		t.Errorf("page 2 = %s, metadata %v", got, m)
	}
}

func participantsListRefusals(t *testing.T, k *roomsWorld, alice roomsParty, room string, helper, sibling, dave, erin, bob roomsParty) {
	agentsCursor := k.ts.do(t, "GET", alice.room(room, "participants")+"?limit=1&participant_type=Agent", alice.cred, nil).meta(t)["next_cursor"].(string)
	other := k.newRoom(t, alice, "other", nil)
	k.add(t, alice, other, helper, "")
	k.add(t, alice, other, sibling, "")
	k.ts.run(t, []scenario{
		{name: "bad participant_type", cred: alice.cred, method: "GET", path: alice.room(room, "participants") + "?participant_type=Bot", status: 422, code: "validation_error", pointers: []string{"/participant_type"}},
		{name: "limit 0", cred: alice.cred, method: "GET", path: alice.room(room, "participants") + "?limit=0", status: 422, code: "validation_error", pointers: []string{"/limit"}},
		{name: "cursor of another type", cred: alice.cred, method: "GET", path: alice.room(room, "participants") + "?participant_type=User&cursor=" + url.QueryEscape(agentsCursor), status: 422, code: "invalid_cursor"},
		{name: "cursor of another room", cred: alice.cred, method: "GET", path: alice.room(other, "participants") + "?participant_type=Agent&cursor=" + url.QueryEscape(agentsCursor), status: 422, code: "invalid_cursor"},
		{name: "a person not in the room", cred: dave.cred, method: "GET", path: dave.room(room, "participants"), status: 404, code: "not_found"},
		{name: "a person of another organization", cred: erin.cred, method: "GET", path: erin.room(room, "participants"), status: 404, code: "not_found"},
		{name: "a malformed room id", cred: alice.cred, method: "GET", path: alice.room("x", "participants"), status: 404, code: "not_found"},
		{name: "agent API, an agent not in the room", cred: k.bot(bob, "Outsider").cred, method: "GET", path: agentChatsPath + "/" + room + "/participants", status: 404, code: "not_found"},
	})
}

func TestParticipantsAdd(t *testing.T) {
	k := newRoomsWorld(t)
	alice, bob, dave, carol := k.people()
	helper := k.bot(alice, "Helper")
	sibling := k.bot(alice, "Sibling")
	second := k.bot(alice, "Second")
	bobBot := k.bot(bob, "Bob Bot")
	bobShared := k.bot(bob, "Bob Shared")
	global := k.bot(carol, "Global")
	carolBot := k.bot(carol, "Carol Bot")
	k.ts.exec(t, `UPDATE agents SET shared_with_organization = 1 WHERE id = ?`, bobShared.id)
	k.ts.exec(t, `UPDATE agents SET is_global = 1 WHERE id = ?`, global.id)

	agentRoom := k.newRoom(t, helper, "agent room", nil)
	humanRoom := k.newRoom(t, alice, "human room", nil)
	for _, tc := range []struct {
		name     string
		as       roomsParty
		room     string
		member   roomsParty
		role     string
		wantRole string
	}{
		{"an agent adds a sibling agent", helper, agentRoom, sibling, "", "member"},
		{"an agent adds its owner", helper, agentRoom, alice, "", "member"},
		{"an agent adds a global agent of another organization", helper, agentRoom, global, "member", "member"},
		{"an agent adds an agent shared with its organization", helper, agentRoom, bobShared, "", "member"},
		{"an owner agent grants admin", helper, agentRoom, second, "admin", "admin"},
		{"a person adds its agent", alice, humanRoom, helper, "", "member"},
		{"a person adds a person of its organization", alice, humanRoom, bob, "admin", "admin"},
		{"a person adds a global agent", alice, humanRoom, global, "", "member"},
		{"an admin adds an admin", bob, humanRoom, dave, "admin", "admin"},
		{"a member agent adds a member", helper, humanRoom, sibling, "", "member"},
		{"an owner adds an owner", alice, humanRoom, second, "owner", "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.ts.do(t, "POST", tc.as.room(tc.room, "participants"), tc.as.cred, participantBody(tc.member.id, tc.role))
			expect(t, r, 201, "")
			p := r.data(t)
			wantType := "Agent"
			if tc.member.user != nil {
				wantType = "User"
			}
			if p["id"] != tc.member.id || p["type"] != wantType || p["role"] != tc.wantRole || p["status"] != "active" {
				t.Fatalf("added = %v, want %s as %s %s", p, tc.member.name, wantType, tc.wantRole)
			}
			// The new participant reads the room at once.
			k.get(t, tc.member, tc.room)
		})
	}

	t.Run("refusals", func(t *testing.T) {
		participantsAddRefusals(t, k, alice, helper, bob, dave, agentRoom, bobBot, carol, carolBot, sibling, second)
	})
}

func participantsAddRefusals(t *testing.T, k *roomsWorld, alice, helper, bob, dave roomsParty, agentRoom string, bobBot, carol, carolBot, sibling, second roomsParty) {
	plain := k.newRoom(t, alice, "plain", nil)
	k.add(t, alice, plain, helper, "") // a member agent
	k.add(t, alice, plain, bob, "")    // a member person
	k.add(t, alice, plain, dave, "admin")
	post := func(name string, as roomsParty, room string, body any, status int, code string, pointers ...string) scenario {
		return scenario{name: name, cred: as.cred, method: "POST", path: as.room(room, "participants"), body: body, status: status, code: code, pointers: pointers}
	}
	// add asks as to add id to room with role ("" for the default).
	add := func(name string, as roomsParty, room, id, role string, status int, code string, pointers ...string) scenario {
		return post(name, as, room, participantBody(id, role), status, code, pointers...)
	}
	k.ts.run(t, []scenario{
		add("an agent adds a person who is not its owner", helper, agentRoom, bob.id, "", 404, "not_found"),
		add("an agent adds another person's private agent", helper, agentRoom, bobBot.id, "", 404, "not_found"),
		add("an agent adds a person of another organization", helper, agentRoom, carol.id, "", 404, "not_found"),
		add("an agent adds a private agent of another organization", helper, agentRoom, carolBot.id, "", 404, "not_found"),
		add("a person adds a person of another organization", alice, plain, carol.id, "", 404, "not_found"),
		add("a person adds another person's private agent", alice, plain, bobBot.id, "", 404, "not_found"),
		add("a person adds an agent of another organization", alice, plain, carolBot.id, "", 404, "not_found"),
		add("a non-existent id", alice, plain, nilID, "", 404, "not_found"),
		add("a malformed id", alice, plain, "someone", "", 404, "not_found"),
		add("an existing participant", alice, plain, helper.id, "", 422, "validation_error", "/participant/participant_id"),
		add("an existing participant, agent API", helper, agentRoom, sibling.id, "admin", 422, "validation_error", "/participant/participant_id"),
		add("a member grants admin", bob, plain, sibling.id, "admin", 403, "forbidden"),
		add("a member agent grants admin", helper, plain, sibling.id, "admin", 403, "forbidden"),
		add("a member grants owner", bob, plain, sibling.id, "owner", 403, "forbidden"),
		add("an admin grants owner", dave, plain, sibling.id, "owner", 403, "forbidden"),
		add("a caller not in the room", dave, agentRoom, alice.id, "", 404, "not_found"),
		add("an agent caller not in the room", sibling, plain, second.id, "", 404, "not_found"),
		add("a malformed room id", alice, "room", bob.id, "", 404, "not_found"),
		add("an unknown role", alice, plain, sibling.id, "boss", 422, "validation_error", "/participant/role"),
		post("no participant id", alice, plain, map[string]any{"participant": map[string]any{"role": "member"}}, 422, "validation_error", "/participant/participant_id"),
		post("no body", alice, plain, nil, 422, "validation_error", "/participant/participant_id"),
		post("a participant id of the wrong type", alice, plain, map[string]any{"participant": map[string]any{"participant_id": 7}}, 422, "validation_error", "/participant/participant_id"),
		post("an unknown field", alice, plain, map[string]any{"participant": map[string]any{"participant_id": sibling.id, "status": "blocked"}}, 400, "unknown_field", "/participant/status"),
	})
}

func TestParticipantsQuota(t *testing.T) {
	k := newRoomsWorld(t, func(o *store.Options) { o.Limits = store.Limits{ParticipantsPerRoom: 2} })
	alice := k.human("alice")
	helper := k.bot(alice, "Helper")
	sibling := k.bot(alice, "Sibling")
	room := k.newRoom(t, alice, "room", nil)
	k.add(t, alice, room, helper, "")
	k.ts.run(t, []scenario{
		{name: "human API", cred: alice.cred, method: "POST", path: alice.room(room, "participants"), body: participantBody(sibling.id, ""), status: 403, code: "limit_reached"},
		{name: "agent API", cred: helper.cred, method: "POST", path: helper.room(room, "participants"), body: participantBody(sibling.id, ""), status: 403, code: "limit_reached"},
	})
	r := k.ts.do(t, "POST", alice.room(room, "participants"), alice.cred, participantBody(sibling.id, ""))
	want := map[string]any{"resource": "participants", "limit": float64(2), "current": float64(2)}
	if d := errorDetails(t, r); !reflect.DeepEqual(d, want) {
		t.Fatalf("details = %v, want %v", d, want)
	}
	// Leaving frees a place.
	expect(t, k.ts.do(t, "DELETE", helper.room(room, "participants", helper.id), helper.cred, nil), 200, "")
	k.add(t, alice, room, sibling, "")
}

func TestParticipantsRemove(t *testing.T) {
	k := newRoomsWorld(t)
	alice := k.human("alice")
	bob := k.human("bob")
	dave := k.human("dave")
	eve := k.human("eve")
	frank := k.human("frank")
	helper := k.bot(alice, "Helper")
	sibling := k.bot(alice, "Sibling")
	daveBot := k.bot(dave, "Dave Bot")
	room := k.newRoom(t, alice, "room", nil)
	k.add(t, alice, room, bob, "admin")
	for _, p := range []roomsParty{dave, eve, helper, sibling} {
		k.add(t, alice, room, p, "")
	}
	k.add(t, dave, room, daveBot, "") // a member adds its own agent

	remove := func(as roomsParty, who string) (string, string) { return "DELETE", as.room(room, "participants", who) }
	removal := func(name string, as roomsParty, who string, status int, code string) scenario {
		m, p := remove(as, who)
		return scenario{name: name, cred: as.cred, method: m, path: p, status: status, code: code}
	}
	k.ts.run(t, []scenario{
		removal("a member removes someone else", dave, eve.id, 403, "forbidden"),
		removal("a member agent removes someone else", helper, sibling.id, 403, "forbidden"),
		removal("a member removes another person's agent", eve, daveBot.id, 403, "forbidden"),
		removal("a member removes the owner", dave, alice.id, 403, "forbidden"),
		removal("the only owner leaves", alice, alice.id, 403, "cannot_remove_sole_owner"),
		removal("an admin removes the only owner", bob, alice.id, 403, "forbidden"),
		removal("someone not in the room", alice, frank.id, 404, "not_found"),
		removal("an unknown id", alice, nilID, 404, "not_found"),
		removal("a malformed id", alice, "eve", 404, "not_found"),
		removal("a caller not in the room", frank, eve.id, 404, "not_found"),
	})

	// Each step removes one participant; the room's list shrinks accordingly.
	for _, tc := range []struct {
		name string
		as   roomsParty
		who  roomsParty
		left string
	}{
		{"a person removes the agent it owns", dave, daveBot, "alice,bob,dave,eve,helper,sibling"},
		{"an admin removes a member", bob, eve, "alice,bob,dave,helper,sibling"},
		{"a member leaves", dave, dave, "alice,bob,helper,sibling"},
		{"an agent leaves", helper, helper, "alice,bob,sibling"},
		{"the owner removes an admin", alice, bob, "alice,sibling"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, p := remove(tc.as, tc.who.id)
			r := k.ts.do(t, m, p, tc.as.cred, nil)
			expect(t, r, 200, "")
			if d := r.data(t); d["id"] != tc.who.id || d["role"] == nil || d["status"] != "active" {
				t.Fatalf("removed = %v, want %s", d, tc.who.name)
			}
			if got := k.listed(t, k.ts.do(t, "GET", alice.room(room, "participants"), alice.cred, nil)); got != tc.left {
				t.Fatalf("left = %s, want %s", got, tc.left)
			}
			if tc.who.id != tc.as.id {
				return
			}
			// Who left reads the room no more.
			expect(t, k.ts.do(t, "GET", tc.who.room(room), tc.who.cred, nil), 404, "not_found")
		})
	}

	t.Run("with two owners, an owner may leave", func(t *testing.T) {
		k.add(t, alice, room, frank, "owner")
		m, p := remove(alice, alice.id)
		expect(t, k.ts.do(t, m, p, alice.cred, nil), 200, "")
		m, p = remove(frank, frank.id)
		k.ts.run(t, []scenario{{name: "then the last one may not", cred: frank.cred, method: m, path: p, status: 403, code: "cannot_remove_sole_owner"}})
	})
}

// patchRefusal is a refused change of participant who in room, as as, to
// the participant fields (nil: no body at all).
func patchRefusal(name string, as roomsParty, room, who string, fields map[string]any, status int, code string, pointers ...string) scenario {
	var body any
	if fields != nil {
		body = map[string]any{"participant": fields}
	}
	return refusalCase(name, as.cred, "PATCH", as.room(room, "participants", who), body, status, code, pointers...)
}

func TestParticipantsBlock(t *testing.T) {
	t.Parallel() // its own server and database
	k := newRoomsWorld(t)
	alice := k.human("alice")
	bob := k.human("bob")
	dave := k.human("dave")
	helper := k.bot(alice, "Helper")
	room := k.newRoom(t, alice, "room", nil)
	k.add(t, alice, room, helper, "")
	k.add(t, alice, room, bob, "")
	blocked := map[string]any{"status": "blocked"}
	active := map[string]any{"status": "active"}

	r := k.patch(t, alice, room, helper.id, blocked)
	expect(t, r, 200, "")
	if d := r.data(t); d["id"] != helper.id || d["status"] != "blocked" || d["role"] != "member" {
		t.Fatalf("blocked = %v", d)
	}
	t.Run("blocking twice changes nothing", func(t *testing.T) {
		before := k.ts.snapshot(t)
		expect(t, k.patch(t, alice, room, helper.id, blocked), 200, "")
		k.ts.unchanged(t, before)
	})

	t.Run("a blocked agent reads nothing", func(t *testing.T) { blockedAgentReadsNothing(t, k, room, alice, helper, blocked) })

	// The spec: an agent whose execution in the room is stopped gets 403 on
	// messages and events (not the 404 of a room it cannot see).
	t.Run("a blocked agent's posts are refused as execution_stopped", func(t *testing.T) { blockedAgentCannotPost(t, k, room, alice, helper) })
	t.Run("unblocking restores it", func(t *testing.T) { unblockingRestores(t, k, room, alice, helper, active) })
	t.Run("a blocked person reads nothing", func(t *testing.T) { blockedPersonReadsNothing(t, k, room, alice, bob, blocked, active) })

	k.ts.run(t, []scenario{
		patchRefusal("the only owner blocks itself", alice, room, alice.id, blocked, 403, "cannot_remove_sole_owner"),
		patchRefusal("the only owner demotes itself", alice, room, alice.id, map[string]any{"role": "admin"}, 403, "cannot_remove_sole_owner"),
		patchRefusal("a member blocks someone", bob, room, helper.id, blocked, 403, "forbidden"),
		patchRefusal("a member promotes itself", bob, room, bob.id, map[string]any{"role": "admin"}, 403, "forbidden"),
		patchRefusal("a person not in the room", dave, room, helper.id, blocked, 404, "not_found"),
		patchRefusal("someone not in the room", alice, room, dave.id, blocked, 404, "not_found"),
		patchRefusal("a malformed participant id", alice, room, "helper", blocked, 404, "not_found"),
		patchRefusal("an unknown status", alice, room, helper.id, map[string]any{"status": "paused"}, 422, "validation_error", "/participant/status"),
		patchRefusal("an unknown role", alice, room, helper.id, map[string]any{"role": "boss"}, 422, "validation_error", "/participant/role"),
		patchRefusal("nothing to change", alice, room, helper.id, map[string]any{}, 422, "validation_error", "/participant"),
		patchRefusal("no body", alice, room, helper.id, nil, 422, "validation_error", "/participant"),
	})

	t.Run("owners and admins", func(t *testing.T) { ownersAndAdminsBlock(t, k, room, alice, bob, helper, blocked, active) })
}

func blockedAgentReadsNothing(t *testing.T, k *roomsWorld, room string, alice, helper roomsParty, blocked map[string]any) {
	k.ts.run(t, []scenario{
		{name: "room", cred: helper.cred, method: "GET", path: helper.room(room), status: 404, code: "not_found"},
		{name: "messages", cred: helper.cred, method: "GET", path: helper.room(room, "messages"), status: 404, code: "not_found"},
		{name: "participants", cred: helper.cred, method: "GET", path: helper.room(room, "participants"), status: 404, code: "not_found"},
	})
	if got := k.listed(t, k.ts.do(t, "GET", agentChatsPath, helper.cred, nil)); got != "" {
		t.Errorf("the blocked agent still lists %s", got)
	}
	// The others still see it in the room, as blocked.
	for _, it := range k.ts.do(t, "GET", alice.room(room, "participants"), alice.cred, nil).list(t) {
		if p := it.(map[string]any); p["id"] == helper.id && p["status"] != "blocked" {
			t.Errorf("participant = %v", p)
		}
	}
}

func blockedAgentCannotPost(t *testing.T, k *roomsWorld, room string, alice, helper roomsParty) {
	k.ts.run(t, []scenario{
		{name: "message", cred: helper.cred, method: "POST", path: helper.room(room, "messages"),
			body:   map[string]any{"message": map[string]any{"content": "Still here", "mentions": []any{map[string]any{"id": alice.id}}}},
			status: 403, code: "execution_stopped"},
		{name: "event", cred: helper.cred, method: "POST", path: helper.room(room, "events"),
			body:   map[string]any{"event": map[string]any{"content": "thinking", "message_type": "thought"}},
			status: 403, code: "execution_stopped"},
	})
}

func unblockingRestores(t *testing.T, k *roomsWorld, room string, alice, helper roomsParty, active map[string]any) {
	r := k.patch(t, alice, room, helper.id, active)
	expect(t, r, 200, "")
	if d := r.data(t); d["status"] != "active" {
		t.Fatalf("unblocked = %v", d)
	}
	k.get(t, helper, room)
	expect(t, k.send(t, helper, room, "Back at work", alice), 201, "")
	if got := k.listed(t, k.ts.do(t, "GET", agentChatsPath, helper.cred, nil)); got != "room" {
		t.Errorf("agent listing = %s", got)
	}
}

func blockedPersonReadsNothing(t *testing.T, k *roomsWorld, room string, alice, bob roomsParty, blocked, active map[string]any) {
	expect(t, k.patch(t, alice, room, bob.id, blocked), 200, "")
	expect(t, k.ts.do(t, "GET", bob.room(room), bob.cred, nil), 404, "not_found")
	if got := k.listed(t, k.ts.do(t, "GET", humanChatsPath, bob.cred, nil)); got != "" {
		t.Errorf("the blocked person still lists %s", got)
	}
	expect(t, k.patch(t, alice, room, bob.id, active), 200, "")
	k.get(t, bob, room)
}

func ownersAndAdminsBlock(t *testing.T, k *roomsWorld, room string, alice, bob, helper roomsParty, blocked, active map[string]any) {
	expect(t, k.patch(t, alice, room, bob.id, map[string]any{"role": "admin"}), 200, "")
	k.ts.run(t, []scenario{
		patchRefusal("an admin makes an owner", bob, room, helper.id, map[string]any{"role": "owner"}, 403, "forbidden"),
		patchRefusal("an admin blocks an owner", bob, room, alice.id, blocked, 403, "forbidden"),
	})
	// An admin blocks and unblocks a member.
	expect(t, k.patch(t, bob, room, helper.id, blocked), 200, "")
	expect(t, k.patch(t, bob, room, helper.id, active), 200, "")
	// With a second owner, the first may step down.
	r := k.patch(t, alice, room, bob.id, map[string]any{"role": "owner"})
	expect(t, r, 200, "")
	if d := r.data(t); d["role"] != "owner" {
		t.Fatalf("promoted = %v", d)
	}
	expect(t, k.patch(t, alice, room, alice.id, map[string]any{"role": "member"}), 200, "")
	k.ts.run(t, []scenario{
		patchRefusal("a former owner blocks someone", alice, room, bob.id, blocked, 403, "forbidden"),
		patchRefusal("the new only owner blocks itself", bob, room, bob.id, blocked, 403, "cannot_remove_sole_owner"),
	})
}

func TestPeersOfAnAgent(t *testing.T) {
	k, w := newPeerCast(t)
	const path = "/api/v1/agent/peers"
	// The owner, then agents by name: siblings, global agents (of any
	// organization) and agents shared with the organization.
	checkPeers(t, k, k.listPeers(t, w.helper, path, peerListing{"", "alice,bobglobal,bobshared,carolglobal,sibling", offsetMetaJSON(1, 20, 5, 1)}))

	room := k.newRoom(t, w.helper, "room", nil)
	k.add(t, w.helper, room, w.sibling, "")
	k.add(t, w.helper, room, w.alice, "")
	elsewhere := k.newRoom(t, w.bob, "elsewhere", nil)
	for _, l := range []peerListing{
		{"page=2&page_size=2", "bobshared,carolglobal", offsetMetaJSON(2, 2, 5, 3)},
		{"page=9&page_size=2", "", offsetMetaJSON(9, 2, 5, 3)},
		{"not_in_chat=" + room, "bobglobal,bobshared,carolglobal", offsetMetaJSON(1, 20, 3, 1)},
		{"not_in_chat=" + room + "&page_size=1&page=3", "carolglobal", offsetMetaJSON(3, 1, 3, 3)},
		// A room the agent cannot read leaves nobody out (and so reveals nothing).
		{"not_in_chat=" + elsewhere, "alice,bobglobal,bobshared,carolglobal,sibling", offsetMetaJSON(1, 20, 5, 1)},
		{"not_in_chat=" + nilID, "alice,bobglobal,bobshared,carolglobal,sibling", offsetMetaJSON(1, 20, 5, 1)},
	} {
		k.listPeers(t, w.helper, path, l)
	}

	// Carol's agent: her, her other agents, and the global ones, but not
	// what is shared with alice's organization.
	k.listPeers(t, w.carolPrivate, path, peerListing{peers: "carol,bobglobal,carolglobal,carolshared"})
	k.ts.run(t, peerRefusals(w.helper, path))
}

func TestPeersOfAPerson(t *testing.T) {
	k, w := newPeerCast(t)
	const path = "/api/v1/me/peers"
	// The other people of the organization, then her agents and global ones.
	checkPeers(t, k, k.listPeers(t, w.alice, path, peerListing{"", "bob,dave,bobglobal,carolglobal,helper,sibling", offsetMetaJSON(1, 20, 6, 1)}))

	room := k.newRoom(t, w.alice, "room", nil)
	k.add(t, w.alice, room, w.bob, "")
	k.add(t, w.alice, room, w.helper, "")
	for _, l := range []peerListing{
		{"type=User", "bob,dave", offsetMetaJSON(1, 20, 2, 1)},
		{"type=Agent", "bobglobal,carolglobal,helper,sibling", offsetMetaJSON(1, 20, 4, 1)},
		{"type=Agent&page=2&page_size=3", "sibling", offsetMetaJSON(2, 3, 4, 2)},
		{"page=2&page_size=4", "helper,sibling", offsetMetaJSON(2, 4, 6, 2)},
		{"not_in_chat=" + room, "dave,bobglobal,carolglobal,sibling", offsetMetaJSON(1, 20, 4, 1)},
		{"not_in_chat=" + room + "&type=User", "dave", offsetMetaJSON(1, 20, 1, 1)},
	} {
		k.listPeers(t, w.alice, path, l)
	}

	// Carol is alone in her organization: her agents and the global ones,
	// each once although one of hers is global.
	k.listPeers(t, w.carol, path, peerListing{peers: "bobglobal,carolglobal,carolprivate,carolshared"})
	refusals := append(peerRefusals(w.alice, path),
		scenario{name: "bad type", cred: w.alice.cred, method: "GET", path: path + "?type=Bot", status: 422, code: "validation_error", pointers: []string{"/type"}},
		scenario{name: "type in lower case", cred: w.alice.cred, method: "GET", path: path + "?type=user", status: 422, code: "validation_error", pointers: []string{"/type"}})
	k.ts.run(t, refusals)
}

// peerCast is two organizations with people and agents of every kind.
type peerCast struct {
	alice, bob, dave, carol                roomsParty
	helper, sibling                        roomsParty // alice's
	bobPrivate, bobShared, bobGlobal       roomsParty
	carolPrivate, carolShared, carolGlobal roomsParty
}

func newPeerCast(t *testing.T) (*roomsWorld, *peerCast) {
	k := newRoomsWorld(t)
	w := &peerCast{alice: k.human("alice"), bob: k.human("bob"), dave: k.human("dave"), carol: k.human("carol", "Other Org")}
	w.helper, w.sibling = k.bot(w.alice, "Helper"), k.bot(w.alice, "Sibling")
	w.bobPrivate, w.bobShared, w.bobGlobal = k.bot(w.bob, "Bob Private"), k.bot(w.bob, "Bob Shared"), k.bot(w.bob, "Bob Global")
	w.carolPrivate, w.carolShared, w.carolGlobal = k.bot(w.carol, "Carol Private"), k.bot(w.carol, "Carol Shared"), k.bot(w.carol, "Carol Global")
	for _, a := range []roomsParty{w.bobShared, w.carolShared} {
		k.ts.exec(t, `UPDATE agents SET shared_with_organization = 1 WHERE id = ?`, a.id)
	}
	for _, a := range []roomsParty{w.bobGlobal, w.carolGlobal} {
		k.ts.exec(t, `UPDATE agents SET is_global = 1 WHERE id = ?`, a.id)
	}
	// A deleted agent is nobody's peer.
	gone := k.bot(w.alice, "Gone")
	expect(t, k.ts.do(t, "DELETE", "/api/v1/me/agents/"+gone.id, w.alice.cred, nil), 200, "")
	return k, w
}

// peerListing is a query of a peer listing, the peers it names (listed) and,
// unless nil, its metadata.
type peerListing struct {
	query, peers string
	meta         map[string]any
}

// listPeers lists path?l.query as as and checks what l expects of it.
func (k *roomsWorld) listPeers(t *testing.T, as roomsParty, path string, l peerListing) *response {
	t.Helper()
	if l.query != "" {
		path += "?" + l.query
	}
	r := k.ts.do(t, "GET", path, as.cred, nil)
	expect(t, r, 200, "")
	if got := k.listed(t, r); got != l.peers {
		t.Errorf("%s = %s, want %s", path, got, l.peers)
	}
	if l.meta == nil {
		return r
	}
	if m := r.meta(t); !reflect.DeepEqual(m, l.meta) {
		t.Errorf("%s metadata = %v, want %v", path, m, l.meta)
	}
	return r
}

// checkPeers checks the fields every peer has: registry peers that are no
// contacts, in the Peer shape of their type.
func checkPeers(t *testing.T, k *roomsWorld, r *response) {
	t.Helper()
	for _, it := range r.list(t) {
		p := it.(map[string]any)
		name := k.names[p["id"].(string)]
		if p["is_contact"] != false || p["source"] != "registry" || p["handle"] == "" || p["name"] == "" {
			t.Errorf("%s: peer = %v", name, p)
		}
		switch p["type"] {
		case "User":
			if p["handle"] != name || p["is_external"] != nil || p["description"] != nil {
				t.Errorf("%s: person peer = %v", name, p)
			}
		case "Agent":
			if !strings.Contains(p["handle"].(string), "/") || p["is_external"] != true || p["description"] == nil {
				t.Errorf("%s: agent peer = %v", name, p)
			}
			if _, ok := p["tags"].([]any); !ok {
				t.Errorf("%s: agent tags = %v, want an array", name, p["tags"])
			}
		default:
			t.Errorf("%s: peer type %v", name, p["type"])
		}
	}
}

func peerRefusals(as roomsParty, path string) []scenario {
	var out []scenario
	for _, q := range []struct{ query, pointer string }{
		{"not_in_chat=room-1", "/not_in_chat"},
		{"not_in_chat=" + strings.Repeat("0", 36), "/not_in_chat"},
		{"page=0", "/page"},
		{"page_size=0", "/page_size"},
		{"page_size=101", "/page_size"},
		{"page_size=all", "/page_size"},
	} {
		out = append(out, scenario{name: q.query, cred: as.cred, method: "GET", path: path + "?" + q.query, status: 422, code: "validation_error", pointers: []string{q.pointer}})
	}
	return out
}
