package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chatd/chatd/store"
)

// Scenario tests of the room task board (beta): wire contract §3.1 "Chat
// tasks (beta) and board", the OpenAPI Task schemas, and the lifecycle and
// roll-up rules documented in store/tasks.go.

// tasksWorld is the team (see helpers_test.go) with a second room of
// helper's alone (other), and each agent's credential and actor reference.
type tasksWorld struct {
	team
	other                          string
	helperRef, scoutRef            store.ActorRef
	helperCred, scoutCred, lonCred cred
}

func newTasksWorld(t *testing.T, opts ...func(*store.Options)) *tasksWorld {
	t.Helper()
	return newTasksWorldOn(t, newTestServer(t, opts...))
}

func newTasksWorldOn(t *testing.T, ts *testServer) *tasksWorld {
	t.Helper()
	k := &tasksWorld{team: newTeam(t, ts)}
	k.helperCred, k.scoutCred, k.lonCred = apiKey(k.helperKey), apiKey(k.scoutKey), apiKey(k.lonerKey)
	k.helperRef, k.scoutRef = boardAgentRef(k.helper), boardAgentRef(k.scout)
	k.other = k.newRoom(t)
	return k
}

// path is a task route: tasksPath(room) is the board, with more segments a
// task and what is under it.
func tasksPath(room string, under ...string) string {
	return strings.Join(append([]string{"/api/v1/agent/chats", room, "tasks"}, under...), "/")
}

type taskEventJSON struct {
	Actor   store.ActorRef `json:"actor"`
	At      string         `json:"at"`
	Event   string         `json:"event"`
	Payload map[string]any `json:"payload"`
}

type taskAssignmentJSON struct {
	Assignee       store.ActorRef `json:"assignee"`
	Status         string         `json:"status"`
	ActiveForm     string         `json:"active_form"`
	LinkedNativeID string         `json:"linked_native_id"`
	UpdatedAt      string         `json:"updated_at"`
}

// taskJSON is the Task shape, decoded to compare.
type taskJSON struct {
	ID               string               `json:"id"`
	Number           int                  `json:"number"`
	ChatRoomID       string               `json:"chat_room_id"`
	Subject          string               `json:"subject"`
	Detail           string               `json:"detail"`
	State            string               `json:"state"`
	OverallStatus    string               `json:"overall_status"`
	SupersededByID   *string              `json:"superseded_by_id"`
	CreatedBy        store.ActorRef       `json:"created_by"`
	Assignments      []taskAssignmentJSON `json:"assignments"`
	InsertedAt       string               `json:"inserted_at"`
	UpdatedAt        string               `json:"updated_at"`
	History          []taskEventJSON      `json:"history"`
	HistoryTruncated *bool                `json:"history_truncated"`
}

func decodeTask(t testing.TB, r *response, status int) taskJSON {
	t.Helper()
	expect(t, r, status, "")
	var tj taskJSON
	remarshal(t, r.json(t)["data"], &tj)
	return tj
}

func (k *tasksWorld) create(t testing.TB, c cred, room string, body any) taskJSON {
	t.Helper()
	return decodeTask(t, k.ts.do(t, "POST", tasksPath(room), c, body), 201)
}

func (k *tasksWorld) subject(t testing.TB, c cred, room, subject string) taskJSON {
	t.Helper()
	return k.create(t, c, room, map[string]any{"subject": subject})
}

func (k *tasksWorld) update(t testing.TB, c cred, room, ref string, body any) taskJSON {
	t.Helper()
	return decodeTask(t, k.ts.do(t, "POST", tasksPath(room, ref), c, body), 200)
}

func (k *tasksWorld) get(t testing.TB, c cred, room, ref, query string) taskJSON {
	t.Helper()
	return decodeTask(t, k.ts.do(t, "GET", tasksPath(room, ref)+query, c, nil), 200)
}

// events is a task's embedded history, as "event:payload" lines (actor and
// time checked separately where they matter).
func (k *tasksWorld) events(t testing.TB, room, ref string) []string {
	t.Helper()
	var out []string
	for _, e := range k.get(t, k.helperCred, room, ref, "?include=history").History {
		out = append(out, e.Event+":"+string(mustJSON(t, e.Payload)))
	}
	return out
}

// block blocks an agent in the room (alice stands behind its owner).
func (k *tasksWorld) block(t testing.TB, room, agentID string) {
	t.Helper()
	expect(t, k.ts.do(t, "PATCH", "/api/v1/me/chats/"+room+"/participants/"+agentID, apiKey(k.aliceKey),
		map[string]any{"participant": map[string]any{"status": "blocked"}}), 200, "")
}

const taskUnknownID = "0190a000-0000-7000-8000-000000000000"

func TestTasksCreate(t *testing.T) {
	k := newTasksWorld(t)
	first := k.create(t, k.helperCred, k.room, map[string]any{"subject": "  Write the spec  "})
	if first.Number != 1 || first.Subject != "Write the spec" || first.Detail != "" || first.State != "active" ||
		first.OverallStatus != "pending" || first.SupersededByID != nil || first.ChatRoomID != k.room ||
		len(first.Assignments) != 0 || first.InsertedAt != first.UpdatedAt || !store.ValidID(first.ID) {
		t.Fatalf("created = %+v", first)
	}
	sameJSON(t, "created_by", first.CreatedBy, k.helperRef)
	if first.History != nil || first.HistoryTruncated != nil {
		t.Fatal("a create answer carries history")
	}

	// Another participant creates #2 and #3; the creator is never assigned.
	second := k.create(t, k.scoutCred, k.room, map[string]any{"subject": "Review", "detail": "Line one.\nLine two.\t(tab)"})
	third := k.subject(t, k.scoutCred, k.room, strings.Repeat("é", 200))
	if second.Number != 2 || third.Number != 3 || second.Detail != "Line one.\nLine two.\t(tab)" || len(second.Assignments) != 0 {
		t.Fatalf("second = %+v, third = %+v", second, third)
	}
	sameJSON(t, "created_by", second.CreatedBy, k.scoutRef)

	// Numbering is per room.
	if n := k.subject(t, k.helperCred, k.other, "Elsewhere").Number; n != 1 {
		t.Fatalf("the first task of another room is #%d", n)
	}
	if n := k.subject(t, k.helperCred, k.room, "Fourth").Number; n != 4 {
		t.Fatalf("the fourth task of the room is #%d", n)
	}

	// The created event carries the initial values.
	h := k.get(t, k.helperCred, k.room, second.ID, "?include=history")
	if len(h.History) != 1 || h.History[0].At != second.InsertedAt {
		t.Fatalf("history = %+v", h.History)
	}
	sameJSON(t, "created event", h.History[0], taskEventJSON{Actor: k.scoutRef, At: second.InsertedAt, Event: "created",
		Payload: map[string]any{"subject": "Review", "detail": "Line one.\nLine two.\t(tab)"}})
}

func TestTasksCreateRefusals(t *testing.T) {
	k := newTasksWorld(t)
	k.subject(t, k.helperCred, k.room, "Existing")
	blockedRoom := k.newRoom(t, k.scout.ID, k.alice.ID)
	k.block(t, blockedRoom, k.scout.ID)
	body := map[string]any{"subject": "New"}
	path := tasksPath(k.room)
	v422 := func(name string, body any, pointers ...string) scenario {
		return refusalCase(name, k.helperCred, "POST", path, body, 422, "validation_error", pointers...)
	}
	k.ts.run(t, []scenario{
		v422("no body", nil, "/subject"),
		v422("no subject", map[string]any{"detail": "x"}, "/subject"),
		v422("null subject", map[string]any{"subject": nil}, "/subject"),
		v422("blank subject", map[string]any{"subject": "   "}, "/subject"),
		v422("subject with a newline", map[string]any{"subject": "one\ntwo"}, "/subject"),
		v422("subject with a carriage return", map[string]any{"subject": "one\rtwo"}, "/subject"),
		v422("subject with NUL", map[string]any{"subject": "one\x00two"}, "/subject"),
		v422("subject over 200 characters", map[string]any{"subject": strings.Repeat("s", 201)}, "/subject"),
		v422("subject of the wrong type", map[string]any{"subject": 7}, "/subject"),
		v422("detail over 8000 characters", map[string]any{"subject": "x", "detail": strings.Repeat("d", 8001)}, "/detail"),
		v422("detail with a control character", map[string]any{"subject": "x", "detail": "a\x07b"}, "/detail"),
		v422("supersedes_id garbage", map[string]any{"subject": "x", "supersedes_id": "#1"}, "/supersedes_id"),
		v422("supersedes_id unknown", map[string]any{"subject": "x", "supersedes_id": taskUnknownID}, "/supersedes_id"),
		v422("supersedes_id unknown number", map[string]any{"subject": "x", "supersedes_id": "9"}, "/supersedes_id"),
		refusalCase("unknown field", k.helperCred, "POST", path, map[string]any{"subject": "x", "title": "x"}, 400, "unknown_field", "/title"),
		refusalCase("not JSON", k.helperCred, "POST", path, `{"subject":`, 400, "invalid_json"),
		refusalCase("not a participant", k.lonCred, "POST", path, body, 404, "not_found"),
		refusalCase("unknown room", k.helperCred, "POST", tasksPath(taskUnknownID), body, 404, "not_found"),
		refusalCase("malformed room id", k.helperCred, "POST", tasksPath("room-1"), body, 404, "not_found"),
		refusalCase("human key", apiKey(k.aliceKey), "POST", path, body, 403, "forbidden"),
		refusalCase("blocked agent", k.scoutCred, "POST", tasksPath(blockedRoom), body, 403, "execution_stopped"),
	})
}

func TestTasksQuota(t *testing.T) {
	k := newTasksWorld(t, func(o *store.Options) { o.Limits = store.Limits{TasksPerRoom: 2} })
	k.subject(t, k.helperCred, k.room, "One")
	k.subject(t, k.helperCred, k.room, "Two")
	r := k.ts.refused(t, "POST", tasksPath(k.room), k.helperCred, map[string]any{"subject": "Three"}, 403, "limit_reached", "")
	sameJSON(t, "details", errorDetails(t, r), map[string]any{"current": 2, "limit": 2, "resource": "tasks"})
	// Finished tasks still count (they stay on the board as records) ...
	k.update(t, k.helperCred, k.room, "1", map[string]any{"state": "archived"})
	k.ts.refused(t, "POST", tasksPath(k.room), k.helperCred, map[string]any{"subject": "Three"}, 403, "limit_reached", "")
	// ... and the quota is per room.
	k.subject(t, k.helperCred, k.other, "One")
}

func TestTasksSupersede(t *testing.T) {
	k := newTasksWorld(t)
	one := k.subject(t, k.helperCred, k.room, "Plan A")
	two := k.create(t, k.scoutCred, k.room, map[string]any{"subject": "Plan B", "supersedes_id": "1"})
	if two.Number != 2 || two.State != "active" || two.SupersededByID != nil {
		t.Fatalf("replacement = %+v", two)
	}
	old := k.get(t, k.helperCred, k.room, one.ID, "?include=history")
	if old.State != "superseded" || old.SupersededByID == nil || *old.SupersededByID != two.ID || old.UpdatedAt != two.InsertedAt {
		t.Fatalf("superseded = %+v", old)
	}
	sameJSON(t, "superseded event", old.History[1], taskEventJSON{Actor: k.scoutRef, At: two.InsertedAt, Event: "superseded",
		Payload: map[string]any{"state": map[string]any{"from": "active", "to": "superseded"}, "superseded_by_id": two.ID}})
	sameJSON(t, "created event", k.events(t, k.room, "2"),
		[]string{`created:{"detail":"","subject":"Plan B","supersedes_id":"` + one.ID + `"}`})

	// By id too; then neither a superseded, cancelled or archived task nor a
	// task of another room can be superseded.
	three := k.create(t, k.helperCred, k.room, map[string]any{"subject": "Plan C", "supersedes_id": two.ID})
	if got := k.get(t, k.helperCred, k.room, "2", ""); got.State != "superseded" || *got.SupersededByID != three.ID {
		t.Fatalf("#2 = %+v", got)
	}
	k.subject(t, k.helperCred, k.room, "Cancelled")
	k.update(t, k.helperCred, k.room, "4", map[string]any{"state": "cancelled"})
	k.subject(t, k.helperCred, k.room, "Archived")
	k.update(t, k.helperCred, k.room, "5", map[string]any{"state": "archived"})
	foreign := k.subject(t, k.helperCred, k.other, "Foreign")
	sup := func(ref string) map[string]any { return map[string]any{"subject": "D", "supersedes_id": ref} }
	path := tasksPath(k.room)
	k.ts.run(t, []scenario{
		refusalCase("superseded task", k.helperCred, "POST", path, sup("1"), 422, "validation_error", "/supersedes_id"),
		refusalCase("superseded task by id", k.helperCred, "POST", path, sup(one.ID), 422, "validation_error", "/supersedes_id"),
		refusalCase("cancelled task", k.helperCred, "POST", path, sup("4"), 422, "validation_error", "/supersedes_id"),
		refusalCase("archived task", k.helperCred, "POST", path, sup("5"), 422, "validation_error", "/supersedes_id"),
		refusalCase("task of another room", k.helperCred, "POST", path, sup(foreign.ID), 422, "validation_error", "/supersedes_id"),
		refusalCase("empty reference", k.helperCred, "POST", path, sup(""), 422, "validation_error", "/supersedes_id"),
	})
}

func TestTasksGet(t *testing.T) {
	k := newTasksWorld(t)
	one := k.subject(t, k.helperCred, k.room, "One")
	foreign := k.subject(t, k.helperCred, k.other, "Foreign")
	k.subject(t, k.helperCred, k.other, "Foreign two")

	byID := k.ts.do(t, "GET", tasksPath(k.room, one.ID), k.scoutCred, nil)
	byNumber := k.ts.do(t, "GET", tasksPath(k.room, "1"), k.scoutCred, nil)
	expect(t, byID, 200, "")
	expect(t, byNumber, 200, "")
	if string(byID.body) != string(byNumber.body) {
		t.Fatalf("by id %s\nby number %s", byID.body, byNumber.body)
	}
	for _, key := range []string{"history", "history_truncated"} {
		if _, ok := byID.data(t)[key]; ok {
			t.Fatalf("%s without include=history: %s", key, byID.body)
		}
	}
	// Any state reads.
	k.update(t, k.helperCred, k.room, "1", map[string]any{"state": "archived"})
	if got := k.get(t, k.scoutCred, k.room, "1", ""); got.State != "archived" {
		t.Fatalf("archived task reads as %+v", got)
	}

	for _, ref := range []string{foreign.ID, "2", "0", "-1", "+1", "01", "1.0", "abc", "%23" + "1", "{" + one.ID + "}",
		strings.ToUpper(strings.ReplaceAll(one.ID, "-", "")), taskUnknownID, "99999999999999999999"} {
		t.Run("ref "+ref, func(t *testing.T) {
			for _, q := range []string{"", "?include=history"} {
				expect(t, k.ts.do(t, "GET", tasksPath(k.room, ref)+q, k.helperCred, nil), 404, "not_found")
			}
			expect(t, k.ts.do(t, "GET", tasksPath(k.room, ref, "history"), k.helperCred, nil), 404, "not_found")
			k.ts.refused(t, "POST", tasksPath(k.room, ref), k.helperCred, map[string]any{"comment": "hi"}, 404, "not_found", "")
		})
	}
	for _, tc := range []struct {
		name string
		c    cred
		room string
	}{
		{"not a participant", k.lonCred, k.room},
		{"unknown room", k.helperCred, taskUnknownID},
		{"malformed room", k.helperCred, "room-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []string{tasksPath(tc.room), tasksPath(tc.room, "1"), tasksPath(tc.room, one.ID), tasksPath(tc.room, "1", "history")} {
				expect(t, k.ts.do(t, "GET", p, tc.c, nil), 404, "not_found")
			}
		})
	}
	for _, q := range []string{"?include=other", "?include=", "?include=History"} {
		k.ts.try(t, refusalCase(q, k.helperCred, "GET", tasksPath(k.room, "1")+q, nil, 422, "validation_error", "/include"))
	}
	// A blocked agent reads nothing, as for the room itself.
	k.block(t, k.room, k.scout.ID)
	expect(t, k.ts.do(t, "GET", tasksPath(k.room, "1"), k.scoutCred, nil), 404, "not_found")
	expect(t, k.ts.do(t, "GET", tasksPath(k.room), k.scoutCred, nil), 404, "not_found")
}

func TestTasksHistoryEmbed(t *testing.T) {
	k := newTasksWorld(t)
	k.subject(t, k.helperCred, k.room, "Chatty")
	// created + 99 comments: exactly 100 events, all shown.
	for i := 1; i < store.TaskHistoryLen; i++ {
		k.update(t, k.helperCred, k.room, "1", map[string]any{"comment": fmt.Sprintf("note %d", i)})
	}
	got := k.get(t, k.helperCred, k.room, "1", "?include=history")
	if len(got.History) != store.TaskHistoryLen || *got.HistoryTruncated || got.History[0].Event != "created" {
		t.Fatalf("at 100 events: %d, truncated %v, first %s", len(got.History), *got.HistoryTruncated, got.History[0].Event)
	}
	for i := store.TaskHistoryLen; i <= store.TaskHistoryLen+4; i++ {
		k.update(t, k.scoutCred, k.room, "1", map[string]any{"comment": fmt.Sprintf("note %d", i)})
	}
	got = k.get(t, k.helperCred, k.room, "1", "?include=history")
	if len(got.History) != store.TaskHistoryLen || got.HistoryTruncated == nil || !*got.HistoryTruncated {
		t.Fatalf("%d events, truncated %v", len(got.History), got.HistoryTruncated)
	}
	// The most recent 100 (notes 5..104), oldest first.
	for i, e := range got.History {
		want := fmt.Sprintf("note %d", i+5)
		if e.Event != "commented" || e.Payload["text"] != want {
			t.Fatalf("event %d = %+v, want %s", i, e, want)
		}
	}
	if got.History[99].At != got.UpdatedAt {
		t.Fatalf("last event at %s, task updated %s", got.History[99].At, got.UpdatedAt)
	}
}

func TestTasksUpdateFields(t *testing.T) {
	k := newTasksWorld(t)
	created := k.create(t, k.helperCred, k.room, map[string]any{"subject": "Draft", "detail": "First detail"})

	// Editing: only changed fields, from and to.
	got := k.update(t, k.scoutCred, k.room, "1", map[string]any{"subject": " Draft v2 ", "detail": "First detail"})
	if got.Subject != "Draft v2" || got.Detail != "First detail" || got.UpdatedAt <= created.UpdatedAt || got.InsertedAt != created.InsertedAt {
		t.Fatalf("after the edit: %+v", got)
	}
	sameJSON(t, "created_by after an edit", got.CreatedBy, k.helperRef)
	k.update(t, k.helperCred, k.room, "1", map[string]any{"subject": "Draft v3", "detail": "Second\ndetail"})

	// Sending the values a task has changes nothing at all.
	for _, body := range []map[string]any{{"subject": "Draft v3"}, {"subject": " Draft v3\t", "detail": "Second\ndetail  "}, {"state": "active"}} {
		snap := k.ts.snapshot(t)
		before := k.get(t, k.helperCred, k.room, "1", "")
		sameJSON(t, "unchanged task", k.update(t, k.scoutCred, k.room, "1", body), before)
		k.ts.unchanged(t, snap)
	}

	// The first status write joins the caller.
	got = k.update(t, k.scoutCred, k.room, "1", map[string]any{"status": "in_progress"})
	if len(got.Assignments) != 1 || got.OverallStatus != "in_progress" {
		t.Fatalf("after joining: %+v", got)
	}
	a := got.Assignments[0]
	sameJSON(t, "assignee", a.Assignee, k.scoutRef)
	if a.Status != "in_progress" || a.ActiveForm != "" || a.LinkedNativeID != "" || a.UpdatedAt != got.UpdatedAt {
		t.Fatalf("assignment = %+v", a)
	}
	// active_form is live state: the assignment and the task change, the history does not.
	n := len(k.events(t, k.room, "1"))
	got = k.update(t, k.scoutCred, k.room, "1", map[string]any{"active_form": "Writing the tests"})
	if got.Assignments[0].ActiveForm != "Writing the tests" || got.Assignments[0].Status != "in_progress" || got.Assignments[0].UpdatedAt != got.UpdatedAt {
		t.Fatalf("after active_form: %+v", got.Assignments)
	}
	if len(k.events(t, k.room, "1")) != n {
		t.Fatal("active_form was recorded in the history")
	}
	// A status change with a link records both.
	got = k.update(t, k.scoutCred, k.room, "1", map[string]any{"status": "in_review", "linked_native_id": "JIRA-7"})
	if got.Assignments[0].LinkedNativeID != "JIRA-7" || got.Assignments[0].ActiveForm != "Writing the tests" {
		t.Fatalf("after the link: %+v", got.Assignments)
	}
	// Joining with active_form only starts at pending.
	got = k.update(t, k.helperCred, k.room, "1", map[string]any{"active_form": "Watching"})
	if len(got.Assignments) != 2 || got.Assignments[1].Status != "pending" || got.Assignments[1].ActiveForm != "Watching" {
		t.Fatalf("after helper joined: %+v", got.Assignments)
	}
	got = k.update(t, k.helperCred, k.room, "1", map[string]any{"comment": "  Looks good.\nShip it.  "})
	got = k.update(t, k.helperCred, k.room, "1", map[string]any{"active_form": ""})
	if got.Assignments[1].ActiveForm != "" {
		t.Fatalf("active_form was not cleared: %+v", got.Assignments)
	}

	st := func(from any, to string) string {
		return string(mustJSON(t, map[string]any{"from": from, "to": to}))
	}
	sameJSON(t, "history", k.events(t, k.room, "1"), []string{
		`created:{"detail":"First detail","subject":"Draft"}`,
		`edited:{"subject":{"from":"Draft","to":"Draft v2"}}`,
		`edited:{"detail":{"from":"First detail","to":"Second\ndetail"},"subject":{"from":"Draft v2","to":"Draft v3"}}`,
		`status_changed:{"status":` + st(nil, "in_progress") + `}`,
		`status_changed:{"linked_native_id":"JIRA-7","status":` + st("in_progress", "in_review") + `}`,
		`status_changed:{"status":` + st(nil, "pending") + `}`,
		`commented:{"text":"Looks good.\nShip it."}`,
	})
	h := k.get(t, k.helperCred, k.room, "1", "?include=history").History
	actors := []store.ActorRef{}
	for _, e := range h {
		actors = append(actors, e.Actor)
	}
	sameJSON(t, "actors", actors, []store.ActorRef{k.helperRef, k.scoutRef, k.helperRef, k.scoutRef, k.scoutRef, k.helperRef, k.helperRef})
}

func TestTasksUpdateRefusals(t *testing.T) {
	t.Parallel() // its own server and database
	k := newTasksWorld(t)
	k.subject(t, k.helperCred, k.room, "Work")
	k.update(t, k.helperCred, k.room, "1", map[string]any{"status": "in_progress"})
	blockedRoom := k.newRoom(t, k.scout.ID, k.alice.ID)
	k.subject(t, k.helperCred, blockedRoom, "Blocked work")
	k.block(t, blockedRoom, k.scout.ID)
	path := tasksPath(k.room, "1")
	v422 := func(name string, body any, pointers ...string) scenario {
		return refusalCase(name, k.scoutCred, "POST", path, body, 422, "validation_error", pointers...)
	}
	k.ts.run(t, []scenario{
		v422("no body", nil),
		v422("empty object", map[string]any{}),
		v422("only nulls", map[string]any{"status": nil, "comment": nil}),
		v422("unknown status", map[string]any{"status": "done"}, "/status"),
		v422("status in another case", map[string]any{"status": "Completed"}, "/status"),
		v422("unknown state", map[string]any{"state": "deleted"}, "/state"),
		v422("superseded is no state to ask for", map[string]any{"state": "superseded"}, "/state"),
		v422("active_form over 200 characters", map[string]any{"active_form": strings.Repeat("a", 201)}, "/active_form"),
		v422("active_form with a newline", map[string]any{"active_form": "a\nb"}, "/active_form"),
		v422("linked_native_id over 200 characters", map[string]any{"linked_native_id": strings.Repeat("l", 201)}, "/linked_native_id"),
		v422("blank comment", map[string]any{"comment": " \n "}, "/comment"),
		v422("comment over 4000 characters", map[string]any{"comment": strings.Repeat("c", 4001)}, "/comment"),
		v422("blank subject", map[string]any{"subject": ""}, "/subject"),
		v422("subject with a newline", map[string]any{"subject": "a\nb"}, "/subject"),
		v422("detail over 8000 characters", map[string]any{"detail": strings.Repeat("d", 8001)}, "/detail"),
		v422("one bad field refuses the whole update", map[string]any{"status": "completed", "comment": "", "state": "archived"}, "/comment"),
		v422("status of the wrong type", map[string]any{"status": 1}, "/status"),
		refusalCase("unknown field", k.scoutCred, "POST", path, map[string]any{"status": "pending", "assignee": "x"}, 400, "unknown_field", "/assignee"),
		refusalCase("not a participant", k.lonCred, "POST", path, map[string]any{"comment": "hi"}, 404, "not_found"),
		refusalCase("human key", apiKey(k.aliceKey), "POST", path, map[string]any{"comment": "hi"}, 403, "forbidden"),
		refusalCase("blocked agent", k.scoutCred, "POST", tasksPath(blockedRoom, "1"), map[string]any{"status": "pending"}, 403, "execution_stopped"),
	})
	// The limits themselves are fine.
	k.update(t, k.scoutCred, k.room, "1", map[string]any{"active_form": strings.Repeat("é", 200), "linked_native_id": strings.Repeat("l", 200),
		"comment": strings.Repeat("c\n", 2000), "subject": strings.Repeat("s", 200), "detail": strings.Repeat("d", 8000)})
}

// TestTasksOverallStatus walks the roll-up rule: no assignments -> pending;
// all completed -> completed; else the first of failed, blocked,
// in_progress, in_review that anyone reports; else pending.
func TestTasksOverallStatus(t *testing.T) {
	k := newTasksWorld(t)
	for _, tc := range []struct {
		helper, scout, want string // "" = not assigned
	}{
		{"", "", "pending"},
		{"pending", "", "pending"},
		{"completed", "", "completed"},
		{"completed", "completed", "completed"},
		{"completed", "pending", "pending"},
		{"completed", "in_review", "in_review"},
		{"in_review", "in_progress", "in_progress"},
		{"in_progress", "blocked", "blocked"},
		{"blocked", "failed", "failed"},
		{"failed", "completed", "failed"},
		{"pending", "in_review", "in_review"},
		{"", "blocked", "blocked"},
	} {
		t.Run(tc.helper+"+"+tc.scout, func(t *testing.T) {
			task := k.subject(t, k.helperCred, k.room, "Roll-up")
			got := task
			for _, w := range []struct {
				c      cred
				status string
			}{{k.helperCred, tc.helper}, {k.scoutCred, tc.scout}} {
				if w.status != "" {
					got = k.update(t, w.c, k.room, task.ID, map[string]any{"status": w.status})
				}
			}
			if got.OverallStatus != tc.want {
				t.Fatalf("overall_status = %s, want %s (%+v)", got.OverallStatus, tc.want, got.Assignments)
			}
			if again := k.get(t, k.helperCred, k.room, task.ID, ""); again.OverallStatus != tc.want {
				t.Fatalf("read back as %s", again.OverallStatus)
			}
		})
	}

	// Each agent has its own assignment, listed in the order they joined,
	// whoever wrote last.
	task := k.subject(t, k.helperCred, k.room, "Two workers")
	k.update(t, k.scoutCred, k.room, task.ID, map[string]any{"status": "in_progress", "active_form": "Scouting"})
	k.update(t, k.helperCred, k.room, task.ID, map[string]any{"status": "blocked"})
	got := k.update(t, k.scoutCred, k.room, task.ID, map[string]any{"status": "completed"})
	if len(got.Assignments) != 2 {
		t.Fatalf("assignments = %+v", got.Assignments)
	}
	s, h := got.Assignments[0], got.Assignments[1]
	if s.Assignee.ID != k.scout.ID || s.Status != "completed" || s.ActiveForm != "Scouting" || h.Assignee.ID != k.helper.ID || h.Status != "blocked" {
		t.Fatalf("assignments = %+v", got.Assignments)
	}
	if s.UpdatedAt <= h.UpdatedAt || got.OverallStatus != "blocked" {
		t.Fatalf("assignments = %+v, overall %s", got.Assignments, got.OverallStatus)
	}
}

// stateEvent is the payload of a state change from one state to another.
func stateEvent(from, to string) string { return `{"state":{"from":"` + from + `","to":"` + to + `"}}` }

func TestTasksLifecycle(t *testing.T) {
	k := newTasksWorld(t)
	t.Run("a task's life", func(t *testing.T) { taskLife(t, k) })
	t.Run("every state to every requested state", func(t *testing.T) { everyStateToEveryState(t, k) })
}

func taskLife(t *testing.T, k *tasksWorld) {
	// Finish and tidy away in one call: the status first, then the state.
	k.subject(t, k.helperCred, k.room, "Finish me")
	got := k.update(t, k.helperCred, k.room, "1", map[string]any{"status": "completed", "state": "archived"})
	if got.State != "archived" || got.OverallStatus != "completed" || got.Assignments[0].Status != "completed" {
		t.Fatalf("after finish and tidy: %+v", got)
	}

	// Work on a task that is not active is refused, and changes nothing.
	for _, body := range []map[string]any{
		{"status": "in_progress"}, {"active_form": "x"}, {"linked_native_id": "x"}, {"comment": "x"}, {"subject": "x"}, {"detail": "x"},
		{"comment": "x", "state": "archived"},
	} {
		r := k.ts.refused(t, "POST", tasksPath(k.room, "1"), k.scoutCred, body, 422, "validation_error", "")
		if msg, _ := r.json(t)["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "only active tasks accept work") {
			t.Fatalf("message = %v", msg)
		}
		for field := range body {
			if _, ok := errorDetails(t, r)["/"+field]; !ok && field != "state" {
				t.Fatalf("details %v lack /%s", errorDetails(t, r), field)
			}
		}
	}

	// Restore and work in one call: the un-archive comes first.
	got = k.update(t, k.scoutCred, k.room, "1", map[string]any{"state": "active", "subject": "Finish me again"})
	if got.State != "active" || got.Subject != "Finish me again" {
		t.Fatalf("after restoring: %+v", got)
	}
	sameJSON(t, "history", k.events(t, k.room, "1"), []string{
		`created:{"detail":"","subject":"Finish me"}`,
		`status_changed:{"status":{"from":null,"to":"completed"}}`,
		`archived:` + stateEvent("active", "archived"),
		`unarchived:` + stateEvent("archived", "active"),
		`edited:{"subject":{"from":"Finish me","to":"Finish me again"}}`,
	})
	got = k.update(t, k.scoutCred, k.room, "1", map[string]any{"comment": "Why", "state": "cancelled"})
	if got.State != "cancelled" {
		t.Fatalf("after cancelling: %+v", got)
	}
	if e := k.events(t, k.room, "1"); e[len(e)-2] != `commented:{"text":"Why"}` || e[len(e)-1] != `cancelled:`+stateEvent("active", "cancelled") {
		t.Fatalf("history ends %v", e[len(e)-2:])
	}
}

// taskIn makes a task of the room and brings it to state ("archived after
// superseded": superseded first, then archived); it returns its id.
func (k *tasksWorld) taskIn(t *testing.T, state string) string {
	switch state {
	case "active":
		return k.subject(t, k.helperCred, k.room, "A").ID
	case "cancelled":
		id := k.subject(t, k.helperCred, k.room, "C").ID
		k.update(t, k.helperCred, k.room, id, map[string]any{"state": "cancelled"})
		return id
	case "superseded":
		id := k.subject(t, k.helperCred, k.room, "S").ID
		k.create(t, k.helperCred, k.room, map[string]any{"subject": "S2", "supersedes_id": id})
		return id
	case "archived":
		id := k.subject(t, k.helperCred, k.room, "R").ID
		k.update(t, k.helperCred, k.room, id, map[string]any{"state": "archived"})
		return id
	case "archived after superseded":
		id := k.subject(t, k.helperCred, k.room, "SR").ID
		k.create(t, k.helperCred, k.room, map[string]any{"subject": "SR2", "supersedes_id": id})
		k.update(t, k.helperCred, k.room, id, map[string]any{"state": "archived"})
		return id
	case "archived after cancelled":
		id := k.subject(t, k.helperCred, k.room, "CR").ID
		k.update(t, k.helperCred, k.room, id, map[string]any{"state": "cancelled"})
		k.update(t, k.helperCred, k.room, id, map[string]any{"state": "archived"})
		return id
	}
	t.Fatalf("no way to a task in state %q", state)
	return ""
}

func everyStateToEveryState(t *testing.T, k *tasksWorld) {
	for _, tc := range []struct {
		from, to string
		want     string // the state after, "" = refused, "same" = no change
		event    string
	}{
		{"active", "cancelled", "cancelled", "cancelled"},
		{"active", "archived", "archived", "archived"},
		{"active", "active", "same", ""},
		{"cancelled", "cancelled", "same", ""},
		{"cancelled", "archived", "archived", "archived"},
		{"cancelled", "active", "", ""},
		{"superseded", "cancelled", "", ""},
		{"superseded", "archived", "archived", "archived"},
		{"superseded", "active", "", ""},
		{"archived", "cancelled", "", ""},
		{"archived", "archived", "same", ""},
		{"archived", "active", "active", "unarchived"},
		{"archived after cancelled", "active", "active", "unarchived"},
		{"archived after superseded", "active", "", ""},
	} {
		t.Run(tc.from+" to "+tc.to, func(t *testing.T) {
			id := k.taskIn(t, tc.from)
			path := tasksPath(k.room, id)
			switch tc.want {
			case "":
				k.ts.refused(t, "POST", path, k.scoutCred, map[string]any{"state": tc.to}, 422, "validation_error", "/state")
			case "same":
				snap := k.ts.snapshot(t)
				before := k.get(t, k.scoutCred, k.room, id, "")
				sameJSON(t, "task", k.update(t, k.scoutCred, k.room, id, map[string]any{"state": tc.to}), before)
				k.ts.unchanged(t, snap)
			default:
				before := k.get(t, k.scoutCred, k.room, id, "")
				got := k.update(t, k.scoutCred, k.room, id, map[string]any{"state": tc.to})
				if got.State != tc.want || got.UpdatedAt <= before.UpdatedAt {
					t.Fatalf("after %s: %+v", tc.to, got)
				}
				h := k.get(t, k.scoutCred, k.room, id, "?include=history").History
				last := h[len(h)-1]
				sameJSON(t, "last event", last, taskEventJSON{Actor: k.scoutRef, At: got.UpdatedAt, Event: tc.event,
					Payload: map[string]any{"state": map[string]any{"from": before.State, "to": tc.want}}})
			}
		})
	}
}

func TestTasksList(t *testing.T) {
	k := newTasksWorld(t)
	for i := 1; i <= 5; i++ {
		k.subject(t, k.helperCred, k.room, fmt.Sprintf("Task %d", i))
	}
	k.subject(t, k.helperCred, k.other, "Elsewhere")
	render := func(r *response) string {
		var nums []string
		for _, it := range r.list(t) {
			var tj taskJSON
			remarshal(t, it, &tj)
			if tj.ChatRoomID != k.room || tj.History != nil {
				t.Fatalf("listed %+v", tj)
			}
			nums = append(nums, fmt.Sprint(tj.Number))
		}
		return strings.Join(nums, ",")
	}
	path := tasksPath(k.room)
	if got := k.ts.walkPages(t, path, "limit=2", k.scoutCred, render); got != "1,2|3,4|5" {
		t.Fatalf("pages = %s", got)
	}
	r := k.ts.do(t, "GET", path, k.scoutCred, nil)
	expect(t, r, 200, "")
	sameJSON(t, "metadata", r.meta(t), map[string]any{"has_more": false, "limit": 50, "next_cursor": nil})

	k.update(t, k.helperCred, k.room, "2", map[string]any{"state": "cancelled"})
	k.create(t, k.helperCred, k.room, map[string]any{"subject": "Task 6", "supersedes_id": "3"})
	k.update(t, k.helperCred, k.room, "4", map[string]any{"state": "archived"})
	for q, want := range map[string]string{
		"":                 "1,5,6",
		"state=active":     "1,5,6",
		"state=cancelled":  "2",
		"state=superseded": "3",
		"state=archived":   "4",
		"state=all":        "1,2|3,4|5,6",
	} {
		query := "limit=2"
		if q != "" {
			query += "&" + q
		}
		if got := k.ts.walkPages(t, path, query, k.helperCred, render); strings.ReplaceAll(got, "|", ",") != strings.ReplaceAll(want, "|", ",") {
			t.Errorf("%s: %s, want %s", q, got, want)
		}
	}
	if got := k.ts.walkPages(t, path, "limit=2&state=all", k.helperCred, render); got != "1,2|3,4|5,6" {
		t.Errorf("all, by two: %s", got)
	}
	// An empty board.
	r = k.ts.do(t, "GET", tasksPath(k.newRoom(t)), k.helperCred, nil)
	expect(t, r, 200, "")
	if len(r.list(t)) != 0 {
		t.Fatalf("empty board lists %s", r.body)
	}

	first := k.ts.do(t, "GET", path+"?state=all&limit=1", k.helperCred, nil)
	cursor := first.meta(t)["next_cursor"].(string)
	list := func(name, path, query, code string, pointers ...string) scenario {
		return refusalCase(name, k.helperCred, "GET", path+query, nil, 422, code, pointers...)
	}
	k.ts.run(t, []scenario{
		list("unknown state", path, "?state=open", "validation_error", "/state"),
		list("state in another case", path, "?state=Active", "validation_error", "/state"),
		list("limit 0", path, "?limit=0", "validation_error", "/limit"),
		list("limit 101", path, "?limit=101", "validation_error", "/limit"),
		list("limit not a number", path, "?limit=ten", "validation_error", "/limit"),
		list("garbage cursor", path, "?cursor=abc", "invalid_cursor", "/cursor"),
		list("cursor of another state", path, "?state=active&cursor="+cursor, "invalid_cursor", "/cursor"),
		list("cursor of another room", tasksPath(k.other), "?state=all&cursor="+cursor, "invalid_cursor", "/cursor"),
		list("cursor and page", path, "?cursor="+cursor+"&page=1", "validation_error"),
	})
	expect(t, k.ts.do(t, "GET", path, k.lonCred, nil), 404, "not_found")
	expect(t, k.ts.do(t, "GET", tasksPath(taskUnknownID), k.helperCred, nil), 404, "not_found")
}

func TestTasksHistoryListing(t *testing.T) {
	k := newTasksWorld(t)
	k.subject(t, k.helperCred, k.room, "Ledger")
	k.subject(t, k.helperCred, k.room, "Other")
	for i := 1; i <= 5; i++ {
		k.update(t, k.scoutCred, k.room, "1", map[string]any{"comment": fmt.Sprint(i)})
	}
	k.update(t, k.scoutCred, k.room, "1", map[string]any{"state": "archived"})
	render := func(r *response) string {
		var out []string
		for _, it := range r.list(t) {
			var e taskEventJSON
			remarshal(t, it, &e)
			if e.Event == "commented" {
				out = append(out, e.Payload["text"].(string))
			} else {
				out = append(out, e.Event)
			}
		}
		return strings.Join(out, ",")
	}
	one := k.get(t, k.helperCred, k.room, "1", "")
	for _, ref := range []string{"1", one.ID} {
		if got := k.ts.walkPages(t, tasksPath(k.room, ref, "history"), "limit=3", k.helperCred, render); got != "created,1,2|3,4,5|archived" {
			t.Fatalf("%s: pages %s", ref, got)
		}
	}
	r := k.ts.do(t, "GET", tasksPath(k.room, "1", "history"), k.helperCred, nil)
	expect(t, r, 200, "")
	sameJSON(t, "metadata", r.meta(t), map[string]any{"has_more": false, "limit": 50, "next_cursor": nil})
	// The full ledger agrees with the embed.
	sameJSON(t, "ledger", r.json(t)["data"], k.ts.do(t, "GET", tasksPath(k.room, "1")+"?include=history", k.helperCred, nil).data(t)["history"])

	cursor := k.ts.do(t, "GET", tasksPath(k.room, "1", "history")+"?limit=1", k.helperCred, nil).meta(t)["next_cursor"].(string)
	for name, p := range map[string]string{
		"garbage cursor":                tasksPath(k.room, "1", "history") + "?cursor=xyz",
		"cursor of another task":        tasksPath(k.room, "2", "history") + "?cursor=" + cursor,
		"cursor of the task listing":    tasksPath(k.room) + "?cursor=" + cursor,
		"limit 101":                     tasksPath(k.room, "1", "history") + "?limit=101",
		"cursor with page":              tasksPath(k.room, "1", "history") + "?cursor=" + cursor + "&page_size=2",
		"cursor of the history by uuid": tasksPath(k.room, one.ID, "history") + "?cursor=" + cursor,
	} {
		t.Run(name, func(t *testing.T) { expect(t, k.ts.do(t, "GET", p, k.helperCred, nil), 422, "") })
	}
	expect(t, k.ts.do(t, "GET", tasksPath(k.room, "1", "history"), k.lonCred, nil), 404, "not_found")
	expect(t, k.ts.do(t, "GET", tasksPath(k.room, "3", "history"), k.helperCred, nil), 404, "not_found")
}

func TestTasksFeatureFlag(t *testing.T) {
	on := newTasksWorld(t)
	flags := on.ts.do(t, "GET", "/api/v1/agent/me", on.helperCred, nil).data(t)["feature_flags"].(map[string]any)
	if flags["ff_room_tasks"] != true {
		t.Fatalf("feature_flags = %v", flags)
	}

	off := newTasksWorldOn(t, newTestServerWith(t, func(c *Config) { c.DisableRoomTasks = true }))
	flags = off.ts.do(t, "GET", "/api/v1/agent/me", off.helperCred, nil).data(t)["feature_flags"].(map[string]any)
	if flags["ff_room_tasks"] != false {
		t.Fatalf("feature_flags = %v", flags)
	}
	for _, rt := range []struct{ method, path string }{
		{"GET", tasksPath(off.room)},
		{"POST", tasksPath(off.room)},
		{"GET", tasksPath(off.room, "1")},
		{"POST", tasksPath(off.room, "1")},
		{"GET", tasksPath(off.room, "1", "history")},
	} {
		off.ts.refused(t, rt.method, rt.path, off.helperCred, map[string]any{"subject": "x"}, 404, "not_found", "")
	}
	// The board's goal is not part of the beta.
	expect(t, off.ts.do(t, "GET", "/api/v1/agent/chats/"+off.room+"/board", off.helperCred, nil), 200, "")
}

func TestTasksRealtime(t *testing.T) {
	k := newTasksWorld(t)
	topic := "room_tasks:" + k.room
	l := newListener(t, k.ts, k.scoutKey, topic)
	one := k.subject(t, k.helperCred, k.room, "Pushed")
	created := l.await(t, topic, "task_created", func(p map[string]any) bool { return p["id"] == one.ID })
	if err := k.ts.oas.ValidateSchema("Task", mustJSON(t, created)); err != nil {
		t.Fatalf("task_created is not a Task: %v\n%v", err, created)
	}
	if _, ok := created["history"]; ok || created["number"] != float64(1) || created["state"] != "active" {
		t.Fatalf("task_created = %v", created)
	}

	k.update(t, k.helperCred, k.room, "1", map[string]any{"status": "in_progress", "active_form": "Pushing"})
	updated := l.await(t, topic, "task_updated", func(p map[string]any) bool { return p["id"] == one.ID })
	if updated["overall_status"] != "in_progress" || len(updated["assignments"].([]any)) != 1 {
		t.Fatalf("task_updated = %v", updated)
	}
	if err := k.ts.oas.ValidateSchema("Task", mustJSON(t, updated)); err != nil {
		t.Fatalf("task_updated is not a Task: %v", err)
	}

	// Superseding pushes the new task and the old one.
	two := k.create(t, k.helperCred, k.room, map[string]any{"subject": "Replacement", "supersedes_id": "1"})
	l.await(t, topic, "task_created", func(p map[string]any) bool { return p["id"] == two.ID })
	l.await(t, topic, "task_updated", func(p map[string]any) bool { return p["id"] == one.ID && p["state"] == "superseded" })

	// A write that changes nothing pushes nothing; a refused one neither.
	k.update(t, k.helperCred, k.room, "2", map[string]any{"state": "active"})
	k.ts.do(t, "POST", tasksPath(k.room, "1"), k.helperCred, map[string]any{"comment": "late"})
	k.update(t, k.helperCred, k.room, "2", map[string]any{"comment": "marker"})
	l.await(t, topic, "task_updated", func(p map[string]any) bool { return p["id"] == two.ID })
	if n := l.count(topic, "task_updated"); n != 3 {
		t.Fatalf("%d task_updated pushes, want 3", n)
	}
	if n := l.count(topic, "task_created"); n != 2 {
		t.Fatalf("%d task_created pushes, want 2", n)
	}
}

func TestTasksAttentionEvents(t *testing.T) {
	k := newTasksWorld(t)
	mine := k.subject(t, k.helperCred, k.room, "Decide")
	foreign := k.subject(t, k.helperCred, k.other, "Elsewhere")
	k.update(t, k.helperCred, k.room, "1", map[string]any{"state": "archived"})
	path := "/api/v1/agent/chats/" + k.room + "/events"
	attention := func(taskID any) map[string]any {
		return map[string]any{"event": map[string]any{"content": "Which way?", "message_type": "attention",
			"metadata": map[string]any{"kind": "question", "blocking": true, "task_id": taskID}}}
	}
	// Any task of the room, in any state.
	expect(t, k.ts.do(t, "POST", path, k.scoutCred, attention(mine.ID)), 201, "")
	k.ts.run(t, []scenario{
		refusalCase("task of another room", k.scoutCred, "POST", path, attention(foreign.ID), 422, "validation_error", "/event/metadata/task_id"),
		refusalCase("unknown task", k.scoutCred, "POST", path, attention(taskUnknownID), 422, "validation_error", "/event/metadata/task_id"),
		refusalCase("board number", k.scoutCred, "POST", path, attention("1"), 422, "validation_error", "/event/metadata/task_id"),
		refusalCase("number", k.scoutCred, "POST", path, attention(1), 422, "validation_error", "/event/metadata/task_id"),
		refusalCase("not a participant", k.lonCred, "POST", path, attention(mine.ID), 404, "not_found"),
	})
	// An id in upper case names the same task, and is kept as chatd spells it.
	r := k.ts.do(t, "POST", path, k.scoutCred, attention(strings.ToUpper(mine.ID)))
	expect(t, r, 201, "")
	ctx := k.ts.do(t, "GET", "/api/v1/agent/chats/"+k.room+"/context?limit=100", k.scoutCred, nil)
	var taskID any = "nothing: the event is not listed"
	for _, m := range ctx.list(t) {
		if m := m.(map[string]any); m["id"] == r.data(t)["id"] {
			taskID = m["metadata"].(map[string]any)["task_id"]
		}
	}
	if taskID != mine.ID {
		t.Fatalf("the attention event's task_id reads %v, want %s", taskID, mine.ID)
	}
	// The task id is only checked on attention events.
	expect(t, k.ts.do(t, "POST", path, k.scoutCred, map[string]any{"event": map[string]any{"content": "x", "message_type": "task",
		"metadata": map[string]any{"task_id": foreign.ID}}}), 201, "")
}

// TestTasksPeopleRead: a person reading the room reads its board through
// the Human API, as the agents do; a person who cannot read it gets 404.
func TestTasksPeopleRead(t *testing.T) {
	k := newTasksWorld(t)
	k.subject(t, k.helperCred, k.room, "write the notes")
	done := k.subject(t, k.helperCred, k.room, "an old plan")
	k.update(t, k.helperCred, k.room, done.ID, map[string]any{"state": "archived"})
	path := "/api/v1/me/chats/" + k.room + "/tasks"
	r := k.ts.do(t, "GET", path, apiKey(k.aliceKey), nil)
	expect(t, r, 200, "")
	if got := listedValues(t, r, "subject"); got != "write the notes" {
		t.Fatalf("active tasks: %s", got)
	}
	r = k.ts.do(t, "GET", path+"?state=all", apiKey(k.aliceKey), nil)
	if got := listedValues(t, r, "subject"); got != "write the notes,an old plan" {
		t.Fatalf("all tasks: %s", got)
	}
	_, carolKey := k.ts.user("carol", "Elsewhere")
	expect(t, k.ts.do(t, "GET", path, apiKey(carolKey), nil), 404, "not_found")
}
