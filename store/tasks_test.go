package store

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// The rules of the task board, called on the store directly (the HTTP
// tests pin the same rules through the API): numbering per room, the
// quota, superseding, assignments and their roll-up, the state lifecycle
// and the history each change appends.

// taskKit: alice owns the agents helper, scout and loner. helper created
// room (with scout in it) and other (alone); loner is in no room.
type taskKit struct {
	db                   *DB
	helper, scout, loner Actor
	room, other          string
}

func newTaskKit(t *testing.T, opts Options) *taskKit {
	t.Helper()
	db := openTestDB(t, opts)
	alice, _ := mustUser(t, db, "alice")
	agent := func(name string) Actor {
		a, _ := mustAgent(t, db, alice, name)
		return AgentActor(a)
	}
	k := &taskKit{db: db, helper: agent("Helper"), scout: agent("Scout"), loner: agent("Loner")}
	k.room = k.newRoom(t, k.scout.ID)
	k.other = k.newRoom(t)
	return k
}

// newRoom is a room helper created, with members added.
func (k *taskKit) newRoom(t *testing.T, members ...string) string {
	t.Helper()
	ctx := context.Background()
	room, err := k.db.CreateRoom(ctx, k.helper, NewRoom{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if _, err := k.db.AddParticipant(ctx, k.helper, room.ID, m, ""); err != nil {
			t.Fatal(err)
		}
	}
	return room.ID
}

func (k *taskKit) create(t *testing.T, by Actor, room string, nt NewTask) *Task {
	t.Helper()
	task, err := k.db.CreateTask(context.Background(), by, room, nt)
	if err != nil {
		t.Fatalf("create %+v: %v", nt, err)
	}
	return task
}

func (k *taskKit) subject(t *testing.T, room, subject string) *Task {
	t.Helper()
	return k.create(t, k.helper, room, NewTask{Subject: &subject})
}

func (k *taskKit) update(t *testing.T, by Actor, ref string, up TaskUpdate) *Task {
	t.Helper()
	task, err := k.db.UpdateTask(context.Background(), by, k.room, ref, up)
	if err != nil {
		t.Fatalf("update %s: %v", ref, err)
	}
	return task
}

// events renders a task's history as "event:payload" lines, oldest first.
func (k *taskKit) events(t *testing.T, ref string) []string {
	t.Helper()
	task, err := k.db.Task(context.Background(), k.helper, k.room, ref, true)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range task.History {
		out = append(out, e.Event+":"+string(e.Payload))
	}
	return out
}

func str(s string) *string { return &s }

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// wantProblem fails unless err is a validation error with a problem at
// pointer ("" for any).
func wantProblem(t *testing.T, err error, pointer string) {
	t.Helper()
	wantCode(t, err, CodeValidation)
	if p, _ := err.(*Error).Details.(Problems); pointer != "" && len(p[pointer]) == 0 {
		t.Fatalf("problems %v, want one at %q", p, pointer)
	}
}

func TestTaskNumbersArePerRoomAndCreatorsAreNotAssigned(t *testing.T) {
	k := newTaskKit(t, Options{})
	first := k.create(t, k.helper, k.room, NewTask{Subject: str("  Write the spec  "), Detail: str("Line one.\nLine two.\t(tab)  ")})
	if first.Number != 1 || first.Subject != "Write the spec" || first.Detail != "Line one.\nLine two.\t(tab)" || first.State != "active" ||
		first.SupersededByID != nil || first.RoomID != k.room || len(first.Assignments) != 0 || !first.InsertedAt.Equal(first.UpdatedAt) {
		t.Fatalf("created = %+v", first)
	}
	if first.CreatedBy.ID != k.helper.ID || first.OverallStatus() != "pending" {
		t.Fatalf("created by %+v, overall %s", first.CreatedBy, first.OverallStatus())
	}
	second := k.create(t, k.scout, k.room, NewTask{Subject: str("Review")})
	if second.Number != 2 || second.CreatedBy.ID != k.scout.ID || len(second.Assignments) != 0 {
		t.Fatalf("second = %+v", second)
	}
	if n := k.subject(t, k.other, "Elsewhere").Number; n != 1 {
		t.Fatalf("the first task of another room is #%d", n)
	}
	if n := k.subject(t, k.room, "Third").Number; n != 3 {
		t.Fatalf("the third task of the room is #%d", n)
	}
	sameLines(t, "history", k.events(t, "1"), []string{`created:{"detail":"Line one.\nLine two.\t(tab)","subject":"Write the spec"}`})

	// A task reads by id or by board number, only in its own room.
	byNumber, err := k.db.Task(context.Background(), k.scout, k.room, "2", false)
	if err != nil || byNumber.ID != second.ID || byNumber.History != nil {
		t.Fatalf("#2 = %+v, %v", byNumber, err)
	}
	for _, ref := range []string{"0", "01", "+1", "9", "abc", strings.ToUpper(first.ID)} {
		_, err := k.db.Task(context.Background(), k.helper, k.room, ref, false)
		wantCode(t, err, CodeNotFound)
	}
	_, err = k.db.Task(context.Background(), k.helper, k.other, first.ID, false)
	wantCode(t, err, CodeNotFound)
}

func TestTaskCreateRefusals(t *testing.T) {
	k := newTaskKit(t, Options{})
	blocked := k.newRoom(t, k.scout.ID)
	k.subject(t, blocked, "Before the block")
	if _, err := k.db.UpdateParticipant(context.Background(), k.helper, blocked, k.scout.ID, ParticipantUpdate{Status: str("blocked")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		nt      NewTask
		pointer string
	}{
		{"no subject", NewTask{Detail: str("x")}, "/subject"},
		{"blank subject", NewTask{Subject: str("   ")}, "/subject"},
		{"subject with a newline", NewTask{Subject: str("one\ntwo")}, "/subject"},
		{"subject over 200 characters", NewTask{Subject: str(strings.Repeat("s", 201))}, "/subject"},
		{"detail over 8000 characters", NewTask{Subject: str("x"), Detail: str(strings.Repeat("d", 8001))}, "/detail"},
		{"detail with a control character", NewTask{Subject: str("x"), Detail: str("a\x07b")}, "/detail"},
		{"supersedes_id that is no reference", NewTask{Subject: str("x"), SupersedesID: str("#1")}, "/supersedes_id"},
		{"supersedes_id of no task", NewTask{Subject: str("x"), SupersedesID: str("9")}, "/supersedes_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k.db.CreateTask(context.Background(), k.helper, k.room, tc.nt)
			wantProblem(t, err, tc.pointer)
		})
	}
	_, err := k.db.CreateTask(context.Background(), k.loner, k.room, NewTask{Subject: str("x")})
	wantCode(t, err, CodeNotFound)
	_, err = k.db.CreateTask(context.Background(), k.scout, blocked, NewTask{Subject: str("x")})
	wantCode(t, err, CodeExecutionStopped)
	_, err = k.db.UpdateTask(context.Background(), k.scout, blocked, "1", TaskUpdate{Status: str("pending")})
	wantCode(t, err, CodeExecutionStopped)
	if n := rawCount(t, k.db, `SELECT count(*) FROM tasks`); n != 1 {
		t.Fatalf("%d tasks after refusals, want 1", n)
	}
}

func TestTaskQuotaCountsEveryStateOfOneRoom(t *testing.T) {
	k := newTaskKit(t, Options{Limits: Limits{TasksPerRoom: 2}})
	k.subject(t, k.room, "One")
	k.subject(t, k.room, "Two")
	_, err := k.db.CreateTask(context.Background(), k.helper, k.room, NewTask{Subject: str("Three")})
	wantCode(t, err, CodeLimitReached)
	details, _ := json.Marshal(err.(*Error).Details)
	if string(details) != `{"current":2,"limit":2,"resource":"tasks"}` {
		t.Fatalf("details = %s", details)
	}
	// An archived task stays on the board as a record, and counts.
	k.update(t, k.helper, "1", TaskUpdate{State: str("archived")})
	_, err = k.db.CreateTask(context.Background(), k.helper, k.room, NewTask{Subject: str("Three")})
	wantCode(t, err, CodeLimitReached)
	k.subject(t, k.other, "One")
}

func TestTaskSupersede(t *testing.T) {
	k := newTaskKit(t, Options{})
	one := k.subject(t, k.room, "Plan A")
	two := k.create(t, k.scout, k.room, NewTask{Subject: str("Plan B"), SupersedesID: str("1")})
	if two.Number != 2 || two.State != "active" || two.SupersededByID != nil {
		t.Fatalf("replacement = %+v", two)
	}
	old, err := k.db.Task(context.Background(), k.helper, k.room, one.ID, false)
	if err != nil || old.State != "superseded" || old.SupersededByID == nil || *old.SupersededByID != two.ID || !old.UpdatedAt.Equal(two.InsertedAt) {
		t.Fatalf("superseded = %+v, %v", old, err)
	}
	sameLines(t, "superseded history", k.events(t, "1"), []string{
		`created:{"detail":"","subject":"Plan A"}`,
		`superseded:{"state":{"from":"active","to":"superseded"},"superseded_by_id":"` + two.ID + `"}`,
	})
	sameLines(t, "replacement history", k.events(t, "2"), []string{`created:{"detail":"","subject":"Plan B","supersedes_id":"` + one.ID + `"}`})

	// Only an active task of the room can be superseded.
	k.subject(t, k.room, "Cancelled")
	k.update(t, k.helper, "3", TaskUpdate{State: str("cancelled")})
	foreign := k.subject(t, k.other, "Foreign")
	for _, ref := range []string{"1", one.ID, "3", foreign.ID, ""} {
		_, err := k.db.CreateTask(context.Background(), k.helper, k.room, NewTask{Subject: str("D"), SupersedesID: str(ref)})
		wantProblem(t, err, "/supersedes_id")
	}
}

// TestTaskAssignments: the first write of status, active_form or
// linked_native_id joins the caller (at pending unless a status is sent);
// every status change is history, active_form alone is not; assignments
// list in the order their assignees joined.
func TestTaskAssignments(t *testing.T) {
	k := newTaskKit(t, Options{})
	k.subject(t, k.room, "Work")
	got := k.update(t, k.scout, "1", TaskUpdate{Status: str("in_progress")})
	if len(got.Assignments) != 1 || got.Assignments[0].Assignee.ID != k.scout.ID || got.Assignments[0].Status != "in_progress" ||
		!got.Assignments[0].UpdatedAt.Equal(got.UpdatedAt) {
		t.Fatalf("after joining: %+v", got.Assignments)
	}
	n := len(k.events(t, "1"))
	got = k.update(t, k.scout, "1", TaskUpdate{ActiveForm: str(" Writing the tests ")})
	if a := got.Assignments[0]; a.ActiveForm != "Writing the tests" || a.Status != "in_progress" {
		t.Fatalf("after active_form: %+v", a)
	}
	if len(k.events(t, "1")) != n {
		t.Fatal("active_form alone was recorded in the history")
	}
	got = k.update(t, k.scout, "1", TaskUpdate{Status: str("in_review"), LinkedNativeID: str("JIRA-7")})
	if a := got.Assignments[0]; a.LinkedNativeID != "JIRA-7" || a.ActiveForm != "Writing the tests" {
		t.Fatalf("after the link: %+v", a)
	}
	got = k.update(t, k.helper, "1", TaskUpdate{ActiveForm: str("Watching")})
	if len(got.Assignments) != 2 || got.Assignments[1].Assignee.ID != k.helper.ID || got.Assignments[1].Status != "pending" {
		t.Fatalf("after helper joined: %+v", got.Assignments)
	}
	// The scout writes last; the order stays the order of joining.
	got = k.update(t, k.scout, "1", TaskUpdate{Status: str("completed")})
	if got.Assignments[0].Assignee.ID != k.scout.ID || got.Assignments[1].Assignee.ID != k.helper.ID {
		t.Fatalf("assignments = %+v", got.Assignments)
	}
	sameLines(t, "history", k.events(t, "1"), []string{
		`created:{"detail":"","subject":"Work"}`,
		`status_changed:{"status":{"from":null,"to":"in_progress"}}`,
		`status_changed:{"linked_native_id":"JIRA-7","status":{"from":"in_progress","to":"in_review"}}`,
		`status_changed:{"status":{"from":null,"to":"pending"}}`,
		`status_changed:{"status":{"from":"in_review","to":"completed"}}`,
	})
}

// TestTaskOverallStatus: no assignments -> pending; all completed ->
// completed; else the first of failed, blocked, in_progress, in_review
// that anyone reports; else pending. Read back as stored, too.
func TestTaskOverallStatus(t *testing.T) {
	k := newTaskKit(t, Options{})
	for _, tc := range []struct{ helper, scout, want string }{ // "" = not assigned
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
		{"", "blocked", "blocked"},
	} {
		task := k.subject(t, k.room, "Roll-up")
		for _, w := range []struct {
			by     Actor
			status string
		}{{k.helper, tc.helper}, {k.scout, tc.scout}} {
			if w.status != "" {
				k.update(t, w.by, task.ID, TaskUpdate{Status: str(w.status)})
			}
		}
		got, err := k.db.Task(context.Background(), k.helper, k.room, task.ID, false)
		if err != nil || got.OverallStatus() != tc.want {
			t.Errorf("%s+%s: overall_status %s, want %s (%v)", tc.helper, tc.scout, got.OverallStatus(), tc.want, err)
		}
	}
}

// TestTaskStateLifecycle: every state against every state an update may
// ask for. Asking for the state a task is in changes nothing at all.
func TestTaskStateLifecycle(t *testing.T) {
	k := newTaskKit(t, Options{})
	set := func(ref string, state string) { k.update(t, k.helper, ref, TaskUpdate{State: str(state)}) }
	setUp := map[string]func(id string){
		"active":     func(string) {},
		"cancelled":  func(id string) { set(id, "cancelled") },
		"superseded": func(id string) { k.create(t, k.helper, k.room, NewTask{Subject: str("Next"), SupersedesID: str(id)}) },
		"archived":   func(id string) { set(id, "archived") },
		"archived after cancelled": func(id string) {
			set(id, "cancelled")
			set(id, "archived")
		},
		"archived after superseded": func(id string) {
			k.create(t, k.helper, k.room, NewTask{Subject: str("Next"), SupersedesID: str(id)})
			set(id, "archived")
		},
	}
	for _, tc := range []struct {
		from, to string
		event    string // "" = refused, "same" = no change
		want     string
	}{
		{"active", "cancelled", "cancelled", "cancelled"},
		{"active", "archived", "archived", "archived"},
		{"active", "active", "same", "active"},
		{"cancelled", "cancelled", "same", "cancelled"},
		{"cancelled", "archived", "archived", "archived"},
		{"cancelled", "active", "", ""},
		{"superseded", "cancelled", "", ""},
		{"superseded", "archived", "archived", "archived"},
		{"superseded", "active", "", ""},
		{"archived", "cancelled", "", ""},
		{"archived", "archived", "same", "archived"},
		{"archived", "active", "unarchived", "active"},
		{"archived after cancelled", "active", "unarchived", "active"},
		{"archived after superseded", "active", "", ""},
	} {
		t.Run(tc.from+" to "+tc.to, func(t *testing.T) {
			id := k.subject(t, k.room, tc.from).ID
			setUp[tc.from](id)
			before, _ := k.db.Task(context.Background(), k.helper, k.room, id, true)
			got, err := k.db.UpdateTask(context.Background(), k.scout, k.room, id, TaskUpdate{State: str(tc.to)})
			after, _ := k.db.Task(context.Background(), k.helper, k.room, id, true)
			switch tc.event {
			case "":
				wantProblem(t, err, "/state")
				if len(after.History) != len(before.History) || after.State != before.State {
					t.Fatalf("a refused change changed the task: %+v", after)
				}
			case "same":
				if err != nil || got.State != tc.want || !after.UpdatedAt.Equal(before.UpdatedAt) || len(after.History) != len(before.History) {
					t.Fatalf("asking for the state it is in: %+v, %v", after, err)
				}
			default:
				last := after.History[len(after.History)-1]
				wantPayload := `{"state":{"from":"` + before.State + `","to":"` + tc.want + `"}}`
				if err != nil || got.State != tc.want || !after.UpdatedAt.After(before.UpdatedAt) || last.Event != tc.event ||
					string(last.Payload) != wantPayload || last.Actor.ID != k.scout.ID {
					t.Fatalf("after %s: %+v, last event %s %s (%v)", tc.to, got, last.Event, last.Payload, err)
				}
			}
		})
	}
}

// TestTaskUpdateOrder: an un-archive comes before work and any other state
// change after it; work on a task that is not active is refused at every
// work field sent, and a refused update writes nothing; an update that
// changes nothing writes nothing.
func TestTaskUpdateOrder(t *testing.T) {
	k := newTaskKit(t, Options{})
	k.subject(t, k.room, "Finish me")
	got := k.update(t, k.helper, "1", TaskUpdate{Status: str("completed"), State: str("archived")})
	if got.State != "archived" || got.OverallStatus() != "completed" {
		t.Fatalf("after finish and tidy: %+v", got)
	}
	before := len(k.events(t, "1"))
	_, err := k.db.UpdateTask(context.Background(), k.scout, k.room, "1",
		TaskUpdate{Status: str("in_progress"), Comment: str("x"), Subject: str("y"), State: str("archived")})
	wantProblem(t, err, "")
	if p := err.(*Error).Details.(Problems); len(p) != 3 || len(p["/status"])+len(p["/comment"])+len(p["/subject"]) != 3 ||
		!strings.Contains(err.Error(), "only active tasks accept work") {
		t.Fatalf("refusal = %v, problems %v", err, p)
	}
	if len(k.events(t, "1")) != before {
		t.Fatal("a refused update wrote history")
	}
	got = k.update(t, k.scout, "1", TaskUpdate{State: str("active"), Subject: str("Finish me again"), Detail: str("Now")})
	if got.State != "active" || got.Subject != "Finish me again" || got.Detail != "Now" {
		t.Fatalf("after restoring: %+v", got)
	}
	k.update(t, k.scout, "1", TaskUpdate{Comment: str("  Why\nnot  "), State: str("cancelled")})
	sameLines(t, "history", k.events(t, "1"), []string{
		`created:{"detail":"","subject":"Finish me"}`,
		`status_changed:{"status":{"from":null,"to":"completed"}}`,
		`archived:{"state":{"from":"active","to":"archived"}}`,
		`unarchived:{"state":{"from":"archived","to":"active"}}`,
		`edited:{"detail":{"from":"","to":"Now"},"subject":{"from":"Finish me","to":"Finish me again"}}`,
		`commented:{"text":"Why\nnot"}`,
		`cancelled:{"state":{"from":"active","to":"cancelled"}}`,
	})

	// The values a task already has change nothing at all.
	k.subject(t, k.room, "Steady")
	k.update(t, k.scout, "2", TaskUpdate{Status: str("blocked"), ActiveForm: str("Waiting")})
	steady, _ := k.db.Task(context.Background(), k.helper, k.room, "2", true)
	same := k.update(t, k.scout, "2", TaskUpdate{Subject: str(" Steady "), Detail: str(""), Status: str("blocked"), ActiveForm: str("Waiting"), State: str("active")})
	after, _ := k.db.Task(context.Background(), k.helper, k.room, "2", true)
	if !same.UpdatedAt.Equal(steady.UpdatedAt) || !after.UpdatedAt.Equal(steady.UpdatedAt) || len(after.History) != len(steady.History) ||
		!after.Assignments[0].UpdatedAt.Equal(steady.Assignments[0].UpdatedAt) {
		t.Fatalf("an update that changes nothing wrote: %+v", after)
	}
}

func TestTaskUpdateChecks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		up      TaskUpdate
		pointer string
	}{
		{"nothing", TaskUpdate{}, ""},
		{"unknown status", TaskUpdate{Status: str("done")}, "/status"},
		{"status in another case", TaskUpdate{Status: str("Completed")}, "/status"},
		{"superseded is no state to ask for", TaskUpdate{State: str("superseded")}, "/state"},
		{"active_form with a newline", TaskUpdate{ActiveForm: str("a\nb")}, "/active_form"},
		{"linked_native_id over 200 characters", TaskUpdate{LinkedNativeID: str(strings.Repeat("l", 201))}, "/linked_native_id"},
		{"blank comment", TaskUpdate{Comment: str(" \n ")}, "/comment"},
		{"blank subject", TaskUpdate{Subject: str("")}, "/subject"},
		{"detail over 8000 characters", TaskUpdate{Detail: str(strings.Repeat("d", 8001))}, "/detail"},
	} {
		_, err := tc.up.clean()
		if ErrorCode(err) != CodeValidation {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if p := err.(*Error).Details.(Problems); len(p[tc.pointer]) == 0 {
			t.Errorf("%s: problems %v, want one at %q", tc.name, p, tc.pointer)
		}
	}
	up, err := TaskUpdate{ActiveForm: str(strings.Repeat("é", 200)), Comment: str(" c\n "), Subject: str(" s ")}.clean()
	if err != nil || *up.Comment != "c" || *up.Subject != "s" {
		t.Fatalf("clean = %+v, %v", up, err)
	}
}

func TestTaskHistoryReadsTheLatestEvents(t *testing.T) {
	k := newTaskKit(t, Options{Sync: SyncNormal})
	k.subject(t, k.room, "Chatty")
	for i := 0; i < TaskHistoryLen; i++ {
		k.update(t, k.helper, "1", TaskUpdate{Comment: str("note")})
	}
	task, err := k.db.Task(context.Background(), k.helper, k.room, "1", true)
	if err != nil || len(task.History) != TaskHistoryLen || !task.HistoryTruncated || task.History[0].Event != "commented" {
		t.Fatalf("history of %d events, truncated %v (%v)", len(task.History), task.HistoryTruncated, err)
	}
	page, err := k.db.TaskHistory(context.Background(), k.helper, k.room, "1", PageRequest{Limit: 2})
	if err != nil || len(page.Items) != 2 || page.Items[0].Event != "created" || !page.HasMore {
		t.Fatalf("first page %+v (%v)", page, err)
	}
}
