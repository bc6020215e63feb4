package server

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// The room goal (board) with its audit trail, and the agents' activity
// reports (spec "Board (room goal)", "Room goal", "Board goal"; wire
// contract §3.1 Chat tasks and board, Activity).

// boardWorld is the team (see helpers_test.go) and its room's board.
type boardWorld struct{ team }

func newBoardWorld(t *testing.T) *boardWorld {
	t.Helper()
	return &boardWorld{newTeam(t, newTestServer(t))}
}

// boardPath is the board of room in the API of key (agent or human).
func (k *boardWorld) boardPath(key, room string) string { return k.roomPath(key, room, "board") }

// boardJSON is the Board shape, decoded strictly enough to compare.
type boardJSON struct {
	ChatRoomID       string             `json:"chat_room_id"`
	GoalTitle        *string            `json:"goal_title"`
	GoalSummary      *string            `json:"goal_summary"`
	CreatedBy        *store.ActorRef    `json:"created_by"`
	UpdatedBy        *store.ActorRef    `json:"updated_by"`
	InsertedAt       *string            `json:"inserted_at"`
	UpdatedAt        *string            `json:"updated_at"`
	History          []store.BoardEvent `json:"history"`
	HistoryTruncated *bool              `json:"history_truncated"`
}

// board decodes a 200 board answer; the human API's (which the OpenAPI
// document lacks) is checked against the Board schema here.
func (k *boardWorld) board(t testing.TB, r *response) boardJSON {
	t.Helper()
	expect(t, r, 200, "")
	raw := r.json(t)["data"]
	if err := k.ts.oas.ValidateSchema("Board", mustJSON(t, raw)); err != nil {
		t.Errorf("not a Board: %v\n%s", err, r.body)
	}
	var b boardJSON
	remarshal(t, raw, &b)
	return b
}

func (k *boardWorld) get(t testing.TB, key, room, query string) boardJSON {
	t.Helper()
	return k.board(t, k.ts.do(t, "GET", k.boardPath(key, room)+query, apiKey(key), nil))
}

func (k *boardWorld) put(t testing.TB, key, room string, body any) boardJSON {
	t.Helper()
	return k.board(t, k.ts.do(t, "PUT", k.boardPath(key, room), apiKey(key), body))
}

func (k *boardWorld) history(t testing.TB) []store.BoardEvent {
	t.Helper()
	return k.get(t, k.helperKey, k.room, "?include=history").History
}

func boardStr(s string) *string { return &s }

// boardAgentRef and boardUserRef are actor references as captured now.
func boardAgentRef(a *store.Agent) store.ActorRef {
	return store.ActorRef{ID: a.ID, Name: a.Name, Type: store.PartyAgent, Handle: boardStr(a.Handle)}
}

func boardUserRef(u *store.User, name string) store.ActorRef {
	return store.ActorRef{ID: u.ID, Name: name, Type: store.PartyUser, Handle: boardStr(u.Handle)}
}

func boardFromTo(from, to *string) store.FromTo { return store.FromTo{From: from, To: to} }

func TestBoardEmptyDefault(t *testing.T) {
	k := newBoardWorld(t)
	for _, key := range []string{k.helperKey, k.scoutKey, k.aliceKey} {
		r := k.ts.do(t, "GET", k.boardPath(key, k.room), apiKey(key), nil)
		expect(t, r, 200, "")
		want := `{"data":{"chat_room_id":"` + k.room + `","created_by":null,"goal_summary":null,"goal_title":null,` +
			`"inserted_at":null,"updated_at":null,"updated_by":null}}`
		if got := string(mustJSON(t, r.json(t))); got != want { // keys sorted
			t.Fatalf("empty board = %s\nwant %s", got, want)
		}
	}
	// Alice also reads a room she is not in, through her agent.
	other := k.newRoom(t)
	k.get(t, k.aliceKey, other, "")

	for _, tc := range []struct {
		name, key, room string
	}{
		{"agent not in the room", k.lonerKey, k.room},
		{"human with no standing in the room", k.bobKey, k.room},
		{"unknown room", k.helperKey, "0190a000-0000-7000-8000-000000000000"},
		{"malformed room id", k.helperKey, "room-1"},
	} {
		path := k.boardPath(tc.key, tc.room)
		k.ts.run(t, []scenario{
			refusalCase(tc.name+", read", apiKey(tc.key), "GET", path, nil, 404, "not_found"),
			refusalCase(tc.name+", read with history", apiKey(tc.key), "GET", path+"?include=history", nil, 404, "not_found"),
			refusalCase(tc.name+", write", apiKey(tc.key), "PUT", path, map[string]any{"goal_title": "Mine"}, 404, "not_found"),
		})
	}
}

// TestBoardHistoryOfAnEmptyBoard: with include=history, both history keys
// are there even when no event was recorded yet.
func TestBoardHistoryOfAnEmptyBoard(t *testing.T) {
	k := newBoardWorld(t)
	for _, key := range []string{k.helperKey, k.aliceKey} {
		r := k.ts.do(t, "GET", k.boardPath(key, k.room)+"?include=history", apiKey(key), nil)
		expect(t, r, 200, "")
		d := r.data(t)
		if h, ok := d["history"].([]any); !ok || len(h) != 0 || d["history_truncated"] != false {
			t.Errorf("%s: %s\nwant history [] and history_truncated false", k.boardPath(key, k.room), bytes.TrimSpace(r.body))
		}
	}
}

// TestBoardWrites: any participant sets the goal; each write that changes
// something records goal_set (first) or goal_edited with {from, to} for the
// changed fields only.
func TestBoardWrites(t *testing.T) {
	k := newBoardWorld(t)
	helper, scout, alice := boardAgentRef(k.helper), boardAgentRef(k.scout), boardUserRef(k.alice, "Alice Tester")

	// An empty body and a clear of an unset field change nothing: still the default.
	for _, body := range []any{nil, map[string]any{}, map[string]any{"goal_title": ""}, map[string]any{"goal_summary": "  "}} {
		snap := k.ts.snapshot(t)
		if b := k.put(t, k.helperKey, k.room, body); b.InsertedAt != nil || b.GoalTitle != nil || b.CreatedBy != nil {
			t.Fatalf("PUT %v on an empty board = %+v", body, b)
		}
		k.ts.unchanged(t, snap)
	}

	// First write: goal_set, from null.
	b1 := k.put(t, k.helperKey, k.room, map[string]any{"goal_title": "  Ship v1 "})
	if *b1.GoalTitle != "Ship v1" || b1.GoalSummary != nil || b1.InsertedAt == nil || *b1.InsertedAt != *b1.UpdatedAt {
		t.Fatalf("after the first write: %+v", b1)
	}
	sameJSON(t, "created_by", b1.CreatedBy, helper)
	sameJSON(t, "updated_by", b1.UpdatedBy, helper)
	if b1.History != nil || b1.HistoryTruncated != nil {
		t.Fatal("a PUT answer carries history")
	}

	// Another agent adds the summary: goal_edited, only goal_summary.
	b2 := k.put(t, k.scoutKey, k.room, map[string]any{"goal_summary": "Para one.\nPara two."})
	if *b2.GoalTitle != "Ship v1" || *b2.GoalSummary != "Para one.\nPara two." || *b2.InsertedAt != *b1.InsertedAt || *b2.UpdatedAt <= *b1.UpdatedAt {
		t.Fatalf("after the second write: %+v", b2)
	}
	sameJSON(t, "created_by", b2.CreatedBy, helper)
	sameJSON(t, "updated_by", b2.UpdatedBy, scout)

	// The owner, through the human API, sends both fields; only the title changed.
	b3 := k.put(t, k.aliceKey, k.room, map[string]any{"goal_title": "Ship v2", "goal_summary": "Para one.\nPara two."})
	sameJSON(t, "updated_by", b3.UpdatedBy, alice)
	sameJSON(t, "created_by", b3.CreatedBy, helper)

	// Sending the same values again (even padded) records nothing.
	for _, body := range []map[string]any{{"goal_title": "Ship v2"}, {"goal_title": " Ship v2\n", "goal_summary": "Para one.\nPara two.  "}, {}} {
		snap := k.ts.snapshot(t)
		sameJSON(t, "unchanged board", k.put(t, k.scoutKey, k.room, body), b3)
		k.ts.unchanged(t, snap)
	}

	// "" clears a field.
	b4 := k.put(t, k.scoutKey, k.room, map[string]any{"goal_summary": ""})
	if b4.GoalSummary != nil || *b4.GoalTitle != "Ship v2" {
		t.Fatalf("after clearing the summary: %+v", b4)
	}

	want := []store.BoardEvent{
		{Actor: helper, Event: "goal_set", Payload: map[string]store.FromTo{"goal_title": boardFromTo(nil, boardStr("Ship v1"))}},
		{Actor: scout, Event: "goal_edited", Payload: map[string]store.FromTo{"goal_summary": boardFromTo(nil, boardStr("Para one.\nPara two."))}},
		{Actor: alice, Event: "goal_edited", Payload: map[string]store.FromTo{"goal_title": boardFromTo(boardStr("Ship v1"), boardStr("Ship v2"))}},
		{Actor: scout, Event: "goal_edited", Payload: map[string]store.FromTo{"goal_summary": boardFromTo(boardStr("Para one.\nPara two."), nil)}},
	}
	for _, key := range []string{k.helperKey, k.aliceKey} {
		b := k.get(t, key, k.room, "?include=history")
		if b.HistoryTruncated == nil || *b.HistoryTruncated {
			t.Fatalf("history_truncated = %v", b.HistoryTruncated)
		}
		got := b.History
		if len(got) != len(want) {
			t.Fatalf("history has %d events, want %d: %+v", len(got), len(want), got)
		}
		for i := range got {
			if got[i].At == "" || (i > 0 && got[i].At < got[i-1].At) {
				t.Fatalf("event %d at %q, not oldest first", i, got[i].At)
			}
			got[i].At = ""
		}
		sameJSON(t, "history", got, want)
		// The last event's time is the board's updated_at; the first's its inserted_at.
		b = k.get(t, key, k.room, "?include=history")
		if b.History[0].At != *b.InsertedAt || b.History[3].At != *b.UpdatedAt {
			t.Fatalf("event times %s..%s vs board %s..%s", b.History[0].At, b.History[3].At, *b.InsertedAt, *b.UpdatedAt)
		}
	}
}

// TestBoardActorsCapturedAtWriteTime: an actor's name is the one it had
// when it wrote.
func TestBoardActorsCapturedAtWriteTime(t *testing.T) {
	k := newBoardWorld(t)
	k.put(t, k.aliceKey, k.room, map[string]any{"goal_title": "First"})
	expect(t, k.ts.do(t, "PUT", "/api/v1/me/profile", apiKey(k.aliceKey), map[string]any{"user": map[string]any{"first_name": "Alicia"}}), 200, "")
	before, after := boardUserRef(k.alice, "Alice Tester"), boardUserRef(k.alice, "Alicia Tester")

	b := k.get(t, k.helperKey, k.room, "")
	sameJSON(t, "created_by after the rename", b.CreatedBy, before)
	b = k.put(t, k.aliceKey, k.room, map[string]any{"goal_title": "Second"})
	sameJSON(t, "created_by", b.CreatedBy, before)
	sameJSON(t, "updated_by", b.UpdatedBy, after)
	h := k.history(t)
	sameJSON(t, "actors", []store.ActorRef{h[0].Actor, h[1].Actor}, []store.ActorRef{before, after})
}

func TestBoardRefusals(t *testing.T) {
	k := newBoardWorld(t)
	k.put(t, k.helperKey, k.room, map[string]any{"goal_title": "Keep me"})
	// Alice reads this room only through her agent: she may not write.
	agentsOnly := k.newRoom(t)

	put := func(name, key, room string, body any, status int, code string, pointers ...string) scenario {
		return refusalCase(name, apiKey(key), "PUT", k.boardPath(key, room), body, status, code, pointers...)
	}
	k.ts.run(t, []scenario{
		put("title with a newline", k.helperKey, k.room, map[string]any{"goal_title": "one\ntwo"}, 422, "validation_error", "/goal_title"),
		put("title with a carriage return", k.helperKey, k.room, map[string]any{"goal_title": "one\rtwo"}, 422, "validation_error", "/goal_title"),
		put("title over 200 characters", k.helperKey, k.room, map[string]any{"goal_title": strings.Repeat("t", 201)}, 422, "validation_error", "/goal_title"),
		put("summary with a control character", k.helperKey, k.room, map[string]any{"goal_summary": "a\x00b"}, 422, "validation_error", "/goal_summary"),
		put("summary over 4000 characters", k.helperKey, k.room, map[string]any{"goal_summary": strings.Repeat("s", 4001)}, 422, "validation_error", "/goal_summary"),
		put("one bad field refuses the whole write", k.helperKey, k.room, map[string]any{"goal_title": "Fine", "goal_summary": "a\x07"}, 422, "validation_error", "/goal_summary"),
		put("title of the wrong type", k.helperKey, k.room, map[string]any{"goal_title": 5}, 422, "validation_error", "/goal_title"),
		put("null title", k.helperKey, k.room, map[string]any{"goal_title": nil, "goal_summary": "\x01"}, 422, "validation_error", "/goal_summary"),
		put("unknown field", k.helperKey, k.room, map[string]any{"goal_title": "x", "goal": "x"}, 400, "unknown_field", "/goal"),
		put("unknown field, human API", k.aliceKey, k.room, map[string]any{"title": "x"}, 400, "unknown_field", "/title"),
		put("not JSON", k.helperKey, k.room, `{"goal_title":`, 400, "invalid_json"),
		put("human who reads only through an agent", k.aliceKey, agentsOnly, map[string]any{"goal_title": "x"}, 403, "forbidden"),
	})

	// The limits themselves are accepted; a line break in the summary is fine.
	b := k.put(t, k.helperKey, k.room, map[string]any{"goal_title": strings.Repeat("é", 200), "goal_summary": strings.Repeat("s\n", 2000)})
	if len([]rune(*b.GoalTitle)) != 200 {
		t.Fatalf("title = %q", *b.GoalTitle)
	}
	// An explicit null leaves a field as it is.
	b = k.put(t, k.helperKey, k.room, map[string]any{"goal_title": nil})
	if len([]rune(*b.GoalTitle)) != 200 {
		t.Fatalf("a null title changed it to %v", b.GoalTitle)
	}
	// A human agent key cannot use the human route, and the reverse.
	expect(t, k.ts.do(t, "PUT", "/api/v1/me/chats/"+k.room+"/board", apiKey(k.helperKey), map[string]any{}), 403, "")
	expect(t, k.ts.do(t, "PUT", "/api/v1/agent/chats/"+k.room+"/board", apiKey(k.aliceKey), map[string]any{}), 403, "")
}

func TestBoardHistory(t *testing.T) {
	k := newBoardWorld(t)
	const changes = 105
	keys := []string{k.helperKey, k.scoutKey, k.aliceKey}
	for i := 1; i <= changes; i++ {
		k.put(t, keys[i%len(keys)], k.room, map[string]any{"goal_title": fmt.Sprintf("goal %d", i)})
		if i == store.BoardHistoryLen {
			// Exactly 100 events: all of them, not truncated.
			b := k.get(t, k.helperKey, k.room, "?include=history")
			if len(b.History) != store.BoardHistoryLen || *b.HistoryTruncated || b.History[0].Event != "goal_set" {
				t.Fatalf("at %d events: %d returned, truncated %v, first %s", i, len(b.History), *b.HistoryTruncated, b.History[0].Event)
			}
		}
	}
	for _, key := range []string{k.helperKey, k.aliceKey} {
		b := k.get(t, key, k.room, "?include=history")
		if len(b.History) != store.BoardHistoryLen || b.HistoryTruncated == nil || !*b.HistoryTruncated {
			t.Fatalf("%d events, truncated %v; want the %d most recent, truncated", len(b.History), b.HistoryTruncated, store.BoardHistoryLen)
		}
		// The most recent 100 (changes 6..105), oldest first.
		for i, e := range b.History {
			n := changes - store.BoardHistoryLen + 1 + i
			want := boardFromTo(boardStr(fmt.Sprintf("goal %d", n-1)), boardStr(fmt.Sprintf("goal %d", n)))
			if e.Event != "goal_edited" || len(e.Payload) != 1 || !jsonEqual(t, e.Payload["goal_title"], want) {
				t.Fatalf("event %d = %+v, want change %d", i, e, n)
			}
			if i > 0 && e.At < b.History[i-1].At {
				t.Fatalf("event %d is older than event %d", i, i-1)
			}
		}
	}

	// Without include: no history keys at all.
	r := k.ts.do(t, "GET", k.boardPath(k.helperKey, k.room), apiKey(k.helperKey), nil)
	expect(t, r, 200, "")
	for _, key := range []string{"history", "history_truncated"} {
		if _, ok := r.data(t)[key]; ok {
			t.Fatalf("%s without include=history: %s", key, r.body)
		}
	}
	for _, q := range []string{"?include=other", "?include=", "?include=History"} {
		k.ts.try(t, refusalCase(q, apiKey(k.helperKey), "GET", k.boardPath(k.helperKey, k.room)+q, nil, 422, "validation_error", "/include"))
	}
}

// working returns each participant's working flag as listed with key (nil
// when the entry has none), checking both APIs.
func (k *boardWorld) working(t testing.TB, room string) map[string]any {
	t.Helper()
	read := func(path, key string) map[string]any {
		r := k.ts.do(t, "GET", path, apiKey(key), nil)
		expect(t, r, 200, "")
		out := map[string]any{}
		for _, p := range r.list(t) {
			p := p.(map[string]any)
			out[p["id"].(string)] = p["working"]
		}
		return out
	}
	agent := read("/api/v1/agent/chats/"+room+"/participants", k.scoutKey)
	human := read("/api/v1/me/chats/"+room+"/participants", k.aliceKey)
	sameJSON(t, "working in the human API", human, agent)
	return agent
}

func TestActivity(t *testing.T) {
	k := newBoardWorld(t)
	other := k.newRoom(t, k.scout.ID, k.alice.ID)
	activity := func(key, room string, body any) *response {
		return k.ts.do(t, "POST", "/api/v1/agent/chats/"+room+"/activity", apiKey(key), body)
	}
	want := func(helper, scout bool) map[string]any {
		return map[string]any{k.helper.ID: helper, k.scout.ID: scout, k.alice.ID: nil}
	}
	sameJSON(t, "working", k.working(t, k.room), want(false, false))

	// Reports live in memory only: the database does not change.
	snap := k.ts.snapshot(t)
	r := activity(k.helperKey, k.room, map[string]any{"working": true})
	expect(t, r, 200, "")
	sameJSON(t, "answer", r.json(t), map[string]any{"data": map[string]any{"working": true}})
	k.ts.unchanged(t, snap)
	sameJSON(t, "working", k.working(t, k.room), want(true, false))
	sameJSON(t, "working elsewhere", k.working(t, other), want(false, false))

	r = activity(k.helperKey, k.room, map[string]any{"working": false})
	expect(t, r, 200, "")
	sameJSON(t, "answer", r.json(t), map[string]any{"data": map[string]any{"working": false}})
	sameJSON(t, "working", k.working(t, k.room), want(false, false))

	// The report lapses after activityTTL without a keep-alive.
	expect(t, activity(k.scoutKey, k.room, map[string]any{"working": true}), 200, "")
	sameJSON(t, "working", k.working(t, k.room), want(false, true))
	setClock := func(now func() time.Time) {
		tr := k.ts.srv.activity
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.now = now
	}
	setClock(func() time.Time { return time.Now().Add(activityTTL - time.Second) })
	sameJSON(t, "working just before the TTL", k.working(t, k.room), want(false, true))
	setClock(func() time.Time { return time.Now().Add(activityTTL + time.Second) })
	sameJSON(t, "working after the TTL", k.working(t, k.room), want(false, false))
	setClock(time.Now) // the report is live again in real time; scout is done
	expect(t, activity(k.scoutKey, k.room, map[string]any{"working": false}), 200, "")

	// Reports live in memory, beyond the database: same reads them.
	report := func(name, key, room string, body any, status int, code string, pointers ...string) scenario {
		s := refusalCase(name, apiKey(key), "POST", "/api/v1/agent/chats/"+room+"/activity", body, status, code, pointers...)
		s.same = func(t testing.TB) string { return string(mustJSON(t, k.working(t, k.room))) }
		return s
	}
	k.ts.run(t, []scenario{
		report("no body", k.helperKey, k.room, nil, 422, "validation_error", "/working"),
		report("missing working", k.helperKey, k.room, map[string]any{}, 422, "validation_error", "/working"),
		report("null working", k.helperKey, k.room, map[string]any{"working": nil}, 422, "validation_error", "/working"),
		report("working of the wrong type", k.helperKey, k.room, map[string]any{"working": "yes"}, 422, "validation_error", "/working"),
		report("unknown field", k.helperKey, k.room, map[string]any{"working": true, "task": "x"}, 400, "unknown_field", "/task"),
		report("room the agent is not in", k.lonerKey, k.room, map[string]any{"working": true}, 404, "not_found"),
		report("unknown room", k.helperKey, "0190a000-0000-7000-8000-000000000000", map[string]any{"working": true}, 404, "not_found"),
		report("human key", k.aliceKey, k.room, map[string]any{"working": true}, 403, ""),
	})
	sameJSON(t, "working after the refusals", k.working(t, k.room), want(false, false))
}
