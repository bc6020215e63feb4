package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// The room task board (beta): shared tasks numbered per room, each with the
// participants working on it (one assignment each) and an append-only
// history.
//
// Lifecycle (state): only an active task accepts work. active -> cancelled,
// active -> archived, cancelled -> archived, superseded -> archived and
// archived -> active (un-archive); asking for the state a task is in changes
// nothing. A task becomes superseded only when a new task names it in
// supersedes_id. Tasks are never deleted, so board numbers are never reused.
//
// Work (status, active_form, linked_native_id) belongs to the caller's own
// assignment, which its first write of any of them creates (status pending
// unless sent). History records every change as its own row, except
// active_form and linked_native_id: those are the assignee's live state,
// rewritten as often as every step of its work, and would drown the ledger.
// A linked_native_id sent with a status change rides along in that event.

// TaskStates are the lifecycle states of a task.
var TaskStates = []string{"active", "cancelled", "superseded", "archived"}

// TaskStatuses are the statuses of an assignment (and of a task's roll-up).
var TaskStatuses = []string{"pending", "in_progress", "blocked", "in_review", "failed", "completed"}

// TaskHistoryLen is how many events a task read embeds.
const TaskHistoryLen = 100

// Task is a task on a room's board.
type Task struct {
	ID             string
	RoomID         string
	Number         int64
	Subject        string
	Detail         string
	State          string
	SupersededByID *string
	CreatedBy      ActorRef
	Assignments    []TaskAssignment // in the order the assignees joined
	InsertedAt     time.Time
	UpdatedAt      time.Time
	// With history only: the most recent events, oldest first, and whether
	// older ones exist.
	History          []TaskEvent
	HistoryTruncated bool
}

// TaskAssignment is one participant's stake in a task.
type TaskAssignment struct {
	Assignee       ActorRef // as it was at the assignee's last write
	Status         string
	ActiveForm     string
	LinkedNativeID string
	UpdatedAt      time.Time
}

// TaskEvent is one row of a task's history.
type TaskEvent struct {
	Actor   ActorRef        `json:"actor"`
	At      string          `json:"at"`
	Event   string          `json:"event"`
	Payload json.RawMessage `json:"payload"`
	seq     int64
	taskID  string
}

// OverallStatus rolls the assignments' statuses up into one: pending when
// nobody works on the task; completed when every assignee completed;
// otherwise the first of failed, blocked, in_progress and in_review that
// any assignee reports (a failure or a blocker is what the room needs to
// see first); otherwise pending.
func (t *Task) OverallStatus() string {
	if len(t.Assignments) == 0 {
		return "pending"
	}
	has := map[string]bool{}
	for _, a := range t.Assignments {
		has[a.Status] = true
	}
	if len(has) == 1 && has["completed"] {
		return "completed"
	}
	for _, s := range []string{"failed", "blocked", "in_progress", "in_review"} {
		if has[s] {
			return s
		}
	}
	return "pending"
}

// TaskKeyset is the paging position just after t (tasks list by number).
func TaskKeyset(t *Task) *Keyset { return &Keyset{Int: t.Number, ID: t.ID} }

const taskColumns = `t.id, t.room_id, t.number, t.subject, t.detail, t.state, t.superseded_by_id, t.created_by, t.inserted_at, t.updated_at`

func scanTask(row interface{ Scan(...any) error }) (*Task, error) {
	t := &Task{Assignments: []TaskAssignment{}}
	var superseded sql.NullString
	var created string
	var ins, upd int64
	if err := row.Scan(&t.ID, &t.RoomID, &t.Number, &t.Subject, &t.Detail, &t.State, &superseded, &created, &ins, &upd); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(created), &t.CreatedBy); err != nil {
		return nil, err
	}
	t.SupersededByID = nullString(superseded)
	t.InsertedAt, t.UpdatedAt = fromMicros(ins), fromMicros(upd)
	return t, nil
}

// parseTaskRef reads how a client names a task: its id (a canonical UUID)
// or its board number (a positive decimal integer, as "#3" is shown).
func parseTaskRef(ref string) (id string, number int64, ok bool) {
	if ValidID(ref) {
		return ref, 0, true
	}
	if ref == "" || ref[0] < '1' || ref[0] > '9' {
		return "", 0, false
	}
	n, err := strconv.ParseInt(ref, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return "", n, true
}

// readTask reads a task of the room with its assignments; ErrNotFound-like
// when ref names no task of this room.
func (db *DB) readTask(q queryer, roomID, ref string) (*Task, error) {
	id, number, ok := parseTaskRef(ref)
	if !ok {
		return nil, notFound("task")
	}
	var row *sql.Row
	if id != "" {
		row = q.QueryRow(`SELECT `+taskColumns+` FROM tasks t WHERE t.id = ? AND t.room_id = ?`, id, roomID)
	} else {
		row = q.QueryRow(`SELECT `+taskColumns+` FROM tasks t WHERE t.room_id = ? AND t.number = ?`, roomID, number)
	}
	t, err := scanTask(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("task")
	}
	if err != nil {
		return nil, err
	}
	return t, db.attachAssignments(q, []*Task{t})
}

// attachAssignments loads the assignments of tasks in one query. The table
// records no join time, so join order is the order of each assignee's first
// status_changed event (an assignment is always created with one); the
// scan stops at that event.
func (db *DB) attachAssignments(q queryer, tasks []*Task) error {
	if len(tasks) == 0 {
		return nil
	}
	byID, ids := byKey(tasks, func(t *Task) string { return t.ID })
	rows, err := q.Query(`SELECT a.task_id, a.assignee, a.status, a.active_form, a.linked_native_id, a.updated_at,
			(SELECT e.seq FROM task_events e WHERE e.task_id = a.task_id AND e.event = 'status_changed'
				AND `+db.dialect.jsonText("e.actor", "id")+` = a.assignee_id ORDER BY e.seq LIMIT 1) AS joined
		FROM task_assignments a WHERE a.task_id IN `+inList(len(ids))+`
		ORDER BY a.task_id, joined, a.assignee_id`, ids...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var taskID, assignee string
		var a TaskAssignment
		var upd int64
		var joined sql.NullInt64
		if err := rows.Scan(&taskID, &assignee, &a.Status, &a.ActiveForm, &a.LinkedNativeID, &upd, &joined); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(assignee), &a.Assignee); err != nil {
			return err
		}
		a.UpdatedAt = fromMicros(upd)
		byID[taskID].Assignments = append(byID[taskID].Assignments, a)
	}
	return rows.Err()
}

func scanTaskEvent(row interface{ Scan(...any) error }) (TaskEvent, error) {
	var e TaskEvent
	var actor, payload string
	var at int64
	if err := row.Scan(&e.seq, &e.taskID, &actor, &e.Event, &payload, &at); err != nil {
		return e, err
	}
	if err := json.Unmarshal([]byte(actor), &e.Actor); err != nil {
		return e, err
	}
	e.Payload, e.At = json.RawMessage(payload), FormatTime(fromMicros(at))
	return e, nil
}

const taskEventColumns = `e.seq, e.task_id, e.actor, e.event, e.payload, e.at`

func readTaskHistory(q queryer, t *Task) (err error) {
	t.History, t.HistoryTruncated, err = latestEvents(q, `SELECT `+taskEventColumns+` FROM task_events e WHERE e.task_id = ? ORDER BY e.seq DESC LIMIT ?`,
		t.ID, TaskHistoryLen, scanTaskEvent)
	return err
}

// Task returns a task of a readable room, in any state, by id or board
// number; with its most recent history when withHistory.
func (db *DB) Task(ctx context.Context, actor Actor, roomID, ref string, withHistory bool) (*Task, error) {
	var t *Task
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, actor, roomID); err != nil {
			return err
		}
		var err error
		if t, err = db.readTask(q, roomID, ref); err != nil {
			return err
		}
		if withHistory {
			return readTaskHistory(q, t)
		}
		return nil
	})
	return t, err
}

// ListTasks lists the tasks of a readable room in one state ("" for every
// state) by board number.
func (db *DB) ListTasks(ctx context.Context, actor Actor, roomID, state string, pr PageRequest) (*Page[*Task], error) {
	var page *Page[*Task]
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, actor, roomID); err != nil {
			return err
		}
		conds, args := []string{"t.room_id = ?"}, []any{roomID}
		if state != "" {
			conds, args = append(conds, "t.state = ?"), append(args, state)
		}
		var err error
		page, err = listPageIn(q, `SELECT `+taskColumns+` FROM tasks t`, conds, args,
			sortSpec{column: "t.number", idCol: "t.id"}, pr, scanTask)
		if err != nil {
			return err
		}
		return db.attachAssignments(q, page.Items)
	})
	if err != nil {
		return nil, err
	}
	if n := len(page.Items); n > 0 {
		page.Next = TaskKeyset(page.Items[n-1])
	}
	return page, nil
}

// TaskHistory pages through a task's whole history, oldest first.
func (db *DB) TaskHistory(ctx context.Context, actor Actor, roomID, ref string, pr PageRequest) (*Page[TaskEvent], error) {
	var page *Page[TaskEvent]
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, actor, roomID); err != nil {
			return err
		}
		t, err := db.readTask(q, roomID, ref)
		if err != nil {
			return err
		}
		// seq is unique, so the task id is only there because a keyset
		// needs an id; within one task it never breaks a tie.
		page, err = listPageIn(q, `SELECT `+taskEventColumns+` FROM task_events e`, []string{"e.task_id = ?"}, []any{t.ID},
			sortSpec{column: "e.seq", idCol: "e.task_id"}, pr, scanTaskEvent)
		return err
	})
	if err != nil {
		return nil, err
	}
	if page.Items == nil {
		page.Items = []TaskEvent{}
	}
	if n := len(page.Items); n > 0 {
		page.Next = &Keyset{Int: page.Items[n-1].seq, ID: page.Items[n-1].taskID}
	}
	return page, nil
}

// CreateTask puts a task on a room's board with the next number. Any
// participant may; the creator is not assigned. A task that supersedes
// another leaves it in place as superseded, pointing at its replacement.
func (db *DB) CreateTask(ctx context.Context, actor Actor, roomID string, nt NewTask) (*Task, error) {
	row, err := nt.check()
	if err != nil {
		return nil, err
	}
	var out *Task
	err = db.writeInRoom(ctx, actor, roomID, loadPostAccess, func(tx *Tx, a *roomAccess) error {
		number, err := db.nextTaskNumber(tx, roomID)
		if err != nil {
			return err
		}
		old, err := db.taskToSupersede(tx, roomID, nt.SupersedesID)
		if err != nil {
			return err
		}
		by := actorRefJSON(actor)
		id, err := insertTask(tx, roomID, number, row, by, old)
		if err != nil {
			return err
		}
		if old != nil {
			if err := supersedeTask(tx, old, id, by); err != nil {
				return err
			}
		}
		out, err = db.publishCreatedTask(tx, a.room, id, old)
		return err
	})
	return out, err
}

// nextTaskNumber is the board number the room's next task takes, once the
// room's task quota allows one more. Tasks are never deleted, but the count
// (not the top number) is what the quota is about.
func (db *DB) nextTaskNumber(tx *Tx, roomID string) (int64, error) {
	var count int
	var top int64
	if err := tx.QueryRow(`SELECT count(*), coalesce(max(number), 0) FROM tasks WHERE room_id = ?`, roomID).Scan(&count, &top); err != nil {
		return 0, err
	}
	if count >= db.limits.TasksPerRoom {
		return 0, limitReached("tasks", db.limits.TasksPerRoom, count)
	}
	return top + 1, nil
}

// taskToSupersede reads the task ref names (nil when none is named), which
// must be an active task of the room.
func (db *DB) taskToSupersede(tx *Tx, roomID string, ref *string) (*Task, error) {
	if ref == nil {
		return nil, nil
	}
	old, err := db.readTask(tx, roomID, *ref)
	if ErrorCode(err) == CodeNotFound {
		return nil, Problems{"/supersedes_id": {notSupersedable}}.Err(CodeValidation)
	}
	if err != nil {
		return nil, err
	}
	if old.State != "active" {
		return nil, Problems{"/supersedes_id": {"must name an active task: #" + strconv.FormatInt(old.Number, 10) + " is " + old.State}}.Err(CodeValidation)
	}
	return old, nil
}

// insertTask stores a new task with its created event, which names the
// task it supersedes (old, when not nil), and returns its id.
func insertTask(tx *Tx, roomID string, number int64, row taskRow, by []byte, old *Task) (string, error) {
	id, now := newID(), tx.Now().UnixMicro()
	if _, err := tx.Exec(`INSERT INTO tasks (id, room_id, number, subject, detail, created_by, inserted_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, roomID, number, row.subject, row.detail, string(by), now, now); err != nil {
		return "", err
	}
	created := map[string]any{"subject": row.subject, "detail": row.detail}
	if old != nil {
		created["supersedes_id"] = old.ID
	}
	return id, insertTaskEvent(tx, id, by, "created", created)
}

// supersedeTask marks old superseded by the task replacementID.
func supersedeTask(tx *Tx, old *Task, replacementID string, by []byte) error {
	if _, err := tx.Exec(`UPDATE tasks SET state = 'superseded', superseded_by_id = ?, updated_at = ? WHERE id = ?`,
		replacementID, tx.Now().UnixMicro(), old.ID); err != nil {
		return err
	}
	payload := map[string]any{"state": stateChange("active", "superseded"), "superseded_by_id": replacementID}
	return insertTaskEvent(tx, old.ID, by, "superseded", payload)
}

// publishCreatedTask reads the new task back and publishes it, and the task
// it superseded (old, when not nil) as updated.
func (db *DB) publishCreatedTask(tx *Tx, room *Room, id string, old *Task) (*Task, error) {
	created, err := db.readTask(tx, room.ID, id)
	if err != nil {
		return nil, err
	}
	db.publish(tx, Change{Kind: TaskCreated, Room: room, Task: created})
	if old != nil {
		if old, err = db.readTask(tx, room.ID, old.ID); err != nil {
			return nil, err
		}
		db.publish(tx, Change{Kind: TaskUpdated, Room: room, Task: old})
	}
	return created, nil
}

// actorRefJSON is the actor's ref as history and created_by store it.
func actorRefJSON(actor Actor) []byte {
	b, _ := json.Marshal(actor.Ref())
	return b
}

// UpdateTask applies an update from a participant. An un-archive (state
// active) comes first and any other state change last, so a restored task
// can be worked on and a finished one tidied away in the same call; work
// on a task that is not active is refused. The whole update is one write:
// a refusal at any step changes nothing. An update that changes nothing
// writes nothing.
func (db *DB) UpdateTask(ctx context.Context, actor Actor, roomID, taskRef string, up TaskUpdate) (*Task, error) {
	up, err := up.clean()
	if err != nil {
		return nil, err
	}
	var out *Task
	err = db.writeInRoom(ctx, actor, roomID, loadPostAccess, func(tx *Tx, a *roomAccess) error {
		t, err := db.readTask(tx, roomID, taskRef)
		if err != nil {
			return err
		}
		c := &taskChanges{tx: tx, task: t, actor: actor, by: actorRefJSON(actor)}
		for _, step := range []func(TaskUpdate) error{c.unarchive, c.refuseWorkUnlessActive, c.edit, c.work, c.comment, c.changeState} {
			if err := step(up); err != nil {
				return err
			}
		}
		if !c.changed {
			out = t
			return nil
		}
		out, err = db.saveTask(tx, a.room, t)
		return err
	})
	return out, err
}

// taskChanges applies the steps of one update to a task read in the write
// transaction: each step changes the task in memory and appends its event
// to the history, and changed says whether any step changed anything.
type taskChanges struct {
	tx      *Tx
	task    *Task
	actor   Actor
	by      []byte // the actor's ref, as history stores it
	changed bool
}

// record appends an event to the task's history.
func (c *taskChanges) record(event string, payload any) error {
	c.changed = true
	return insertTaskEvent(c.tx, c.task.ID, c.by, event, payload)
}

// moveTo sets the task's state, recorded as event.
func (c *taskChanges) moveTo(state, event string) error {
	from := c.task.State
	c.task.State = state
	return c.record(event, map[string]any{"state": stateChange(from, state)})
}

// unarchive makes the task active again when the update asks for it.
func (c *taskChanges) unarchive(up TaskUpdate) error {
	if up.State == nil || *up.State != "active" || c.task.State == "active" {
		return nil
	}
	if err := canChangeState(c.task, "active"); err != nil {
		return err
	}
	return c.moveTo("active", "unarchived")
}

func (c *taskChanges) refuseWorkUnlessActive(up TaskUpdate) error {
	if up.hasWork() && c.task.State != "active" {
		return notActive(c.task, up)
	}
	return nil
}

// edit changes the subject and detail sent, recorded as one event with
// each changed field's from and to.
func (c *taskChanges) edit(up TaskUpdate) error {
	edited := map[string]FromTo{}
	set := func(field string, cur *string, to *string) {
		if to != nil && *to != *cur {
			from := *cur
			edited[field] = FromTo{From: &from, To: to}
			*cur = *to
		}
	}
	set("subject", &c.task.Subject, up.Subject)
	set("detail", &c.task.Detail, up.Detail)
	if len(edited) == 0 {
		return nil
	}
	return c.record("edited", edited)
}

// work writes the caller's own assignment (see updateAssignment).
func (c *taskChanges) work(up TaskUpdate) error {
	if up.Status == nil && up.ActiveForm == nil && up.LinkedNativeID == nil {
		return nil
	}
	changed, err := updateAssignment(c.tx, c.task, c.actor, c.by, up)
	c.changed = c.changed || changed
	return err
}

func (c *taskChanges) comment(up TaskUpdate) error {
	if up.Comment == nil {
		return nil
	}
	return c.record("commented", map[string]string{"text": *up.Comment})
}

// changeState applies any state change but an un-archive; its events are
// named after the states.
func (c *taskChanges) changeState(up TaskUpdate) error {
	if up.State == nil || *up.State == "active" || *up.State == c.task.State {
		return nil
	}
	if err := canChangeState(c.task, *up.State); err != nil {
		return err
	}
	return c.moveTo(*up.State, *up.State)
}

// saveTask writes what an update changed of the task itself (its subject,
// detail, state and updated_at), then reads it back and publishes it.
func (db *DB) saveTask(tx *Tx, room *Room, t *Task) (*Task, error) {
	if _, err := tx.Exec(`UPDATE tasks SET subject = ?, detail = ?, state = ?, updated_at = ? WHERE id = ?`,
		t.Subject, t.Detail, t.State, tx.Now().UnixMicro(), t.ID); err != nil {
		return nil, err
	}
	out, err := db.readTask(tx, room.ID, t.ID)
	if err != nil {
		return nil, err
	}
	db.publish(tx, Change{Kind: TaskUpdated, Room: room, Task: out})
	return out, nil
}

// updateAssignment writes the caller's status, active_form and
// linked_native_id, creating its assignment on the first write, and reports
// whether anything changed. Joining and every status change are
// status_changed events (from null on joining); active_form and
// linked_native_id alone are live state, not history (see the top of this
// file), though still a change of the task.
func updateAssignment(tx *Tx, t *Task, actor Actor, refJSON []byte, up TaskUpdate) (bool, error) {
	var cur *TaskAssignment
	for i := range t.Assignments {
		if t.Assignments[i].Assignee.ID == actor.ID {
			cur = &t.Assignments[i]
		}
	}
	next := TaskAssignment{Status: "pending"}
	if cur != nil {
		next = *cur
	}
	if up.Status != nil {
		next.Status = *up.Status
	}
	if up.ActiveForm != nil {
		next.ActiveForm = *up.ActiveForm
	}
	if up.LinkedNativeID != nil {
		next.LinkedNativeID = *up.LinkedNativeID
	}
	if cur != nil && next.Status == cur.Status && next.ActiveForm == cur.ActiveForm && next.LinkedNativeID == cur.LinkedNativeID {
		return false, nil
	}
	_, err := tx.Exec(`INSERT INTO task_assignments (task_id, assignee_id, assignee, status, active_form, linked_native_id, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (task_id, assignee_id) DO UPDATE SET assignee = excluded.assignee, status = excluded.status,
			active_form = excluded.active_form, linked_native_id = excluded.linked_native_id, updated_at = excluded.updated_at`,
		t.ID, actor.ID, string(refJSON), next.Status, next.ActiveForm, next.LinkedNativeID, tx.Now().UnixMicro())
	if err != nil {
		return false, err
	}
	var from *string
	if cur != nil {
		if cur.Status == next.Status {
			return true, nil
		}
		from = &cur.Status
	}
	payload := map[string]any{"status": FromTo{From: from, To: &next.Status}}
	if up.LinkedNativeID != nil {
		payload["linked_native_id"] = *up.LinkedNativeID
	}
	return true, insertTaskEvent(tx, t.ID, refJSON, "status_changed", payload)
}

// canChangeState says whether t may move to state; asking for the state it
// is in is handled by the caller as no change.
func canChangeState(t *Task, to string) error {
	allowed := map[string][]string{
		"cancelled": {"active"},
		"archived":  {"active", "cancelled", "superseded"},
		"active":    {"archived"},
	}[to]
	for _, from := range allowed {
		if t.State == from {
			// A superseded task's replacement carries on its work; making it
			// active again would put two tasks on the board for one job.
			if to == "active" && t.SupersededByID != nil {
				return Problems{"/state": {"cannot restore a superseded task: it was replaced by another task"}}.Err(CodeValidation)
			}
			return nil
		}
	}
	msg := "cannot change a " + t.State + " task to " + to
	if to == "active" {
		msg += ": only an archived task can be restored"
	}
	return Problems{"/state": {msg}}.Err(CodeValidation)
}

// notActive refuses work on a task that is not active, at each work field
// sent.
func notActive(t *Task, up TaskUpdate) error {
	p := Problems{}
	for ptr, v := range map[string]*string{"/status": up.Status, "/active_form": up.ActiveForm, "/linked_native_id": up.LinkedNativeID,
		"/comment": up.Comment, "/subject": up.Subject, "/detail": up.Detail} {
		if v != nil {
			p.Add(ptr, "cannot be changed: the task is %s, and only active tasks accept work", t.State)
		}
	}
	return p.Err(CodeValidation)
}

func stateChange(from, to string) FromTo { return FromTo{From: &from, To: &to} }

// insertTaskEvent appends to a task's history.
func insertTaskEvent(tx *Tx, taskID string, actorJSON []byte, name string, payload any) error {
	payloadJSON, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	_, err = tx.Exec(`INSERT INTO task_events (task_id, actor, event, payload, at) VALUES (?, ?, ?, ?, ?)`,
		taskID, string(actorJSON), name, string(payloadJSON), tx.Now().UnixMicro())
	return err
}

// isTaskOfRoom reports whether id is a task of the room.
func isTaskOfRoom(q queryer, roomID, id string) (bool, error) {
	var one int
	err := q.QueryRow(`SELECT 1 FROM tasks WHERE id = ? AND room_id = ?`, id, roomID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
