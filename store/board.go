package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// ActorRef names who did something, captured when it was done.
type ActorRef struct {
	ID     string    `json:"id"`
	Name   string    `json:"name"`
	Type   PartyType `json:"type"`
	Handle *string   `json:"handle"`
}

// Ref captures the actor for an audit trail.
func (a Actor) Ref() ActorRef {
	h := a.Handle
	return ActorRef{ID: a.ID, Name: a.Name, Type: a.Type, Handle: &h}
}

// Board is a room's goal (its mission) and, on request, its audit trail.
type Board struct {
	RoomID           string
	GoalTitle        *string
	GoalSummary      *string
	CreatedBy        *ActorRef
	UpdatedBy        *ActorRef
	InsertedAt       *time.Time
	UpdatedAt        *time.Time
	History          []BoardEvent // with history only: the most recent events, oldest first
	HistoryTruncated bool         // with history only: older events exist
}

// BoardEvent is one entry of the goal's append-only audit.
type BoardEvent struct {
	Actor   ActorRef          `json:"actor"`
	At      string            `json:"at"`
	Event   string            `json:"event"` // goal_set (the first write), goal_edited
	Payload map[string]FromTo `json:"payload"`
}

// FromTo is one field's change.
type FromTo struct {
	From *string `json:"from"`
	To   *string `json:"to"`
}

const (
	maxGoalTitleLen   = 200
	maxGoalSummaryLen = 4000
	// BoardHistoryLen is how many audit events a board read embeds.
	BoardHistoryLen = 100
)

func readBoard(q queryer, roomID string) (*Board, error) {
	b := &Board{RoomID: roomID}
	var title, summary sql.NullString
	var created, updated string
	var ins, upd int64
	err := q.QueryRow(`SELECT goal_title, goal_summary, created_by, updated_by, inserted_at, updated_at FROM boards WHERE room_id = ?`, roomID).
		Scan(&title, &summary, &created, &updated, &ins, &upd)
	if errors.Is(err, sql.ErrNoRows) {
		return b, nil // a room without a goal reads as the empty default
	}
	if err != nil {
		return nil, err
	}
	b.GoalTitle, b.GoalSummary = nullString(title), nullString(summary)
	b.CreatedBy, b.UpdatedBy = &ActorRef{}, &ActorRef{}
	if err := json.Unmarshal([]byte(created), b.CreatedBy); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(updated), b.UpdatedBy); err != nil {
		return nil, err
	}
	i, u := fromMicros(ins), fromMicros(upd)
	b.InsertedAt, b.UpdatedAt = &i, &u
	return b, nil
}

func scanBoardEvent(row interface{ Scan(...any) error }) (BoardEvent, error) {
	var e BoardEvent
	var actor, payload string
	var at int64
	if err := row.Scan(&actor, &e.Event, &payload, &at); err != nil {
		return e, err
	}
	if err := json.Unmarshal([]byte(actor), &e.Actor); err != nil {
		return e, err
	}
	if err := json.Unmarshal([]byte(payload), &e.Payload); err != nil {
		return e, err
	}
	e.At = FormatTime(fromMicros(at))
	return e, nil
}

func readBoardHistory(q queryer, b *Board) (err error) {
	b.History, b.HistoryTruncated, err = latestEvents(q, `SELECT actor, event, payload, at FROM board_events WHERE room_id = ? ORDER BY seq DESC LIMIT ?`,
		b.RoomID, BoardHistoryLen, scanBoardEvent)
	return err
}

// latestEvents reads the latest events of an audit: query selects them
// newest first for the audited id, up to a limit, and is asked for one more
// than max to tell whether older ones exist. It returns at most max of them
// oldest first; none is an empty history, not a missing one.
func latestEvents[T any](q queryer, query, id string, max int, scan func(interface{ Scan(...any) error }) (T, error)) ([]T, bool, error) {
	rows, err := q.Query(query, id, max+1)
	if err != nil {
		return nil, false, err
	}
	events, err := scanAll(rows, scan)
	if err != nil {
		return nil, false, err
	}
	truncated := len(events) > max
	if truncated {
		events = events[:max]
	}
	slices.Reverse(events)
	if events == nil {
		events = []T{}
	}
	return events, truncated, nil
}

// Board returns a room's goal, with its audit trail when withHistory.
func (db *DB) Board(ctx context.Context, actor Actor, roomID string, withHistory bool) (*Board, error) {
	var b *Board
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, actor, roomID); err != nil {
			return err
		}
		var err error
		if b, err = readBoard(q, roomID); err != nil {
			return err
		}
		if withHistory {
			return readBoardHistory(q, b)
		}
		return nil
	})
	return b, err
}

// BoardUpdate holds the goal fields to set; nil leaves a field as it is and
// an empty string clears it.
type BoardUpdate struct {
	GoalTitle   *string
	GoalSummary *string
}

// check validates up and returns it with its texts trimmed.
func (up BoardUpdate) check() (BoardUpdate, error) {
	p := Problems{}
	if up.GoalTitle != nil {
		t, msg := cleanText(*up.GoalTitle, 0, maxGoalTitleLen)
		if msg != "" {
			p.Add("/goal_title", "%s", msg)
		}
		up.GoalTitle = &t
	}
	if up.GoalSummary != nil {
		s, msg := cleanMultiline(*up.GoalSummary, maxGoalSummaryLen)
		if msg != "" {
			p.Add("/goal_summary", "%s", msg)
		}
		up.GoalSummary = &s
	}
	return up, p.Err(CodeValidation)
}

// UpdateBoard sets the fields sent. Any participant may; a write that
// changes something appends goal_set (the first) or goal_edited to the audit
// with each changed field's from and to.
func (db *DB) UpdateBoard(ctx context.Context, actor Actor, roomID string, up BoardUpdate) (*Board, error) {
	up, err := up.check()
	if err != nil {
		return nil, err
	}
	var out *Board
	err = db.writeInRoom(ctx, actor, roomID, loadPostAccess, func(tx *Tx, a *roomAccess) error {
		b, err := readBoard(tx, roomID)
		if err != nil {
			return err
		}
		if changed := b.applyGoal(up); len(changed) > 0 {
			if err := saveBoard(tx, b, actor.Ref(), changed); err != nil {
				return err
			}
			db.publish(tx, Change{Kind: BoardUpdated, Room: a.room, Board: b})
		}
		out = b
		return nil
	})
	return out, err
}

// applyGoal sets the goal fields up sends (an empty string clears one) and
// returns each changed field's from and to.
func (b *Board) applyGoal(up BoardUpdate) map[string]FromTo {
	changed := map[string]FromTo{}
	set := func(field string, cur **string, next *string) {
		if next == nil {
			return
		}
		var to *string
		if *next != "" {
			to = next
		}
		if (*cur == nil) != (to == nil) || (*cur != nil && to != nil && **cur != *to) {
			changed[field] = FromTo{From: *cur, To: to}
			*cur = to
		}
	}
	set("goal_title", &b.GoalTitle, up.GoalTitle)
	set("goal_summary", &b.GoalSummary, up.GoalSummary)
	return changed
}

// saveBoard writes the board and appends changed to its audit: goal_set
// when the board was never written, goal_edited after that.
func saveBoard(tx *Tx, b *Board, by ActorRef, changed map[string]FromTo) error {
	now := tx.Now()
	event := "goal_edited"
	if b.InsertedAt == nil {
		event = "goal_set"
		b.CreatedBy, b.InsertedAt = &by, &now
	}
	b.UpdatedBy, b.UpdatedAt = &by, &now
	createdJSON, _ := json.Marshal(b.CreatedBy)
	byJSON, _ := json.Marshal(by)
	_, err := tx.Exec(`INSERT INTO boards (room_id, goal_title, goal_summary, created_by, updated_by, inserted_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (room_id) DO UPDATE SET goal_title = excluded.goal_title, goal_summary = excluded.goal_summary,
			updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
		b.RoomID, toNullString(b.GoalTitle), toNullString(b.GoalSummary), string(createdJSON), string(byJSON),
		b.InsertedAt.UnixMicro(), now.UnixMicro())
	if err != nil {
		return err
	}
	changedJSON, _ := json.Marshal(changed)
	_, err = tx.Exec(`INSERT INTO board_events (room_id, actor, event, payload, at) VALUES (?, ?, ?, ?, ?)`,
		b.RoomID, string(byJSON), event, string(changedJSON), now.UnixMicro())
	return err
}
