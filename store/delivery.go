package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"
)

// Delivery is one agent's processing state of one text message that
// mentions it. Delivery is at least once: an agent drains what it has not
// processed with NextMessage and reports each message's outcome; a message
// left in processing (a crashed worker) is served again.
//
// The state machine, per agent and message:
//
//	pending | delivered  --processing-->  processing (attempt n+1 starts)
//	processing           --processing-->  processing (no-op while the attempt is live;
//	                                      a stale attempt is closed as failed and n+1 starts)
//	processing           --processed--->  processed  (attempt completes)
//	processing           --failed------>  failed     (attempt completes with the error)
//	failed | processed   --processing-->  processing (attempt n+1; a processed message reopens)
//	anything else        --processed/failed--> unchanged, 422 no_active_attempt
type Delivery struct {
	AgentID        string
	Status         string // pending, delivered, processing, processed, failed
	CurrentAttempt int
	Attempts       []Attempt       // the most recent maxAttemptsKept, oldest first; parsed for a transition
	AttemptsJSON   json.RawMessage // the attempts as stored (always set)
	ProcessedAt    *time.Time
	UpdatedAt      time.Time
}

// Attempt is one processing attempt, stored and served as is.
type Attempt struct {
	AttemptNumber int     `json:"attempt_number"`
	Status        string  `json:"status"` // processing, processed, failed
	StartedAt     string  `json:"started_at"`
	CompletedAt   *string `json:"completed_at"`
	Error         *string `json:"error"`
}

const (
	// maxAttemptsKept bounds the attempt history of one delivery; numbering
	// goes on past it.
	maxAttemptsKept = 50
	// MaxErrorLen bounds the error an agent reports with /failed.
	MaxErrorLen = 4000
	// abandonedError is recorded on an attempt that outlived the attempt
	// timeout when the agent starts a new one.
	abandonedError = "abandoned: no outcome was reported before the attempt timed out"
)

// FormatTime renders a time as the API does: RFC 3339, UTC, microseconds.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

const deliveryColumns = `agent_id, status, current_attempt, attempts, processed_at, updated_at`

// scanDelivery scans message_seq followed by deliveryColumns.
func scanDelivery(row interface{ Scan(...any) error }, seq *int64) (*Delivery, error) {
	var d Delivery
	var attempts string
	var processed sql.NullInt64
	var upd int64
	if err := row.Scan(seq, &d.AgentID, &d.Status, &d.CurrentAttempt, &attempts, &processed, &upd); err != nil {
		return nil, err
	}
	d.AttemptsJSON = json.RawMessage(attempts)
	if processed.Valid {
		t := fromMicros(processed.Int64)
		d.ProcessedAt = &t
	}
	d.UpdatedAt = fromMicros(upd)
	return &d, nil
}

// openDeliveries names the deliveries table, as d, read through its index
// of the deliveries not yet processed, and isOpen is the condition that index
// holds (a query must say it, word for word, to read it). Without
// statistics SQLite's planner rates that index no better than the primary
// key, whose prefix (agent, room) is the same, and would walk every
// delivery the agent ever processed in the room to find the first open
// one: 58 ms behind half a million processed messages, against 0.1 ms.
// The hint is SQLite's (see dialect.indexHint).
func (db *DB) openDeliveries() string {
	return `deliveries d` + db.dialect.indexHint("deliveries_open")
}

const isOpen = `d.status != 'processed'`

// NextMessage returns the oldest text message mentioning the agent in the
// room that it has not processed (new, delivered, stuck in processing or
// failed), or nil when there is none.
func (db *DB) NextMessage(ctx context.Context, agent Actor, roomID string) (*Message, error) {
	var msg *Message
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, agent, roomID); err != nil {
			return err
		}
		var err error
		msg, err = firstDelivered(q, agent.ID, `SELECT d.message_seq FROM `+db.openDeliveries()+`
			WHERE d.agent_id = ? AND d.room_id = ? AND `+isOpen+` ORDER BY d.message_seq LIMIT 1`, agent.ID, roomID)
		return err
	})
	return msg, err
}

// firstDelivered loads the message whose seq query selects, if any, with
// the agent's delivery of it.
func firstDelivered(q queryer, agentID, query string, args ...any) (*Message, error) {
	var seq int64
	err := q.QueryRow(query, args...).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	msg, err := messageBySeq(q, seq)
	if err != nil {
		return nil, err
	}
	return msg, attachMessageDetails(q, []*Message{msg}, agentID)
}

// DeliveryOutcome is the state a transition left a delivery in.
type DeliveryOutcome struct {
	MessageID     string
	Status        string
	AttemptNumber int
}

// MarkProcessing records that the agent started working on a message.
func (db *DB) MarkProcessing(ctx context.Context, agent Actor, roomID, messageID string) (*DeliveryOutcome, error) {
	return db.transition(ctx, agent, roomID, messageID, db.startAttempt)
}

// startAttempt starts a processing attempt, unless one is live: an attempt
// that outlived the attempt timeout is closed as abandoned first.
func (db *DB) startAttempt(d *Delivery, now time.Time) (bool, error) {
	if d.Status == "processing" {
		last := &d.Attempts[len(d.Attempts)-1]
		started, _ := time.Parse(time.RFC3339Nano, last.StartedAt)
		if now.Sub(started) < db.attemptTimeout {
			return false, nil // the attempt is live: nothing to do
		}
		completeAttempt(last, "failed", now, abandonedError)
	}
	d.CurrentAttempt++
	d.Attempts = append(d.Attempts, Attempt{AttemptNumber: d.CurrentAttempt, Status: "processing", StartedAt: FormatTime(now)})
	if len(d.Attempts) > maxAttemptsKept {
		d.Attempts = d.Attempts[len(d.Attempts)-maxAttemptsKept:]
	}
	d.Status, d.ProcessedAt = "processing", nil
	return true, nil
}

// MarkProcessed records that the agent's current attempt succeeded: the
// message leaves the default listing and NextMessage.
func (db *DB) MarkProcessed(ctx context.Context, agent Actor, roomID, messageID string) (*DeliveryOutcome, error) {
	return db.transition(ctx, agent, roomID, messageID, func(d *Delivery, now time.Time) (bool, error) {
		if err := requireActiveAttempt(d); err != nil {
			return false, err
		}
		completeAttempt(&d.Attempts[len(d.Attempts)-1], "processed", now, "")
		d.Status, d.ProcessedAt = "processed", &now
		return true, nil
	})
}

// MarkFailed records that the agent's current attempt failed with reason;
// the message stays available for a retry.
func (db *DB) MarkFailed(ctx context.Context, agent Actor, roomID, messageID, reason string) (*DeliveryOutcome, error) {
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return nil, Problems{"/error": {"can't be blank"}}.Err(CodeValidation)
	case !utf8.ValidString(reason) || utf8.RuneCountInString(reason) > MaxErrorLen:
		return nil, Problems{"/error": {"must be valid UTF-8 of at most 4000 characters"}}.Err(CodeValidation)
	}
	return db.transition(ctx, agent, roomID, messageID, func(d *Delivery, now time.Time) (bool, error) {
		if err := requireActiveAttempt(d); err != nil {
			return false, err
		}
		completeAttempt(&d.Attempts[len(d.Attempts)-1], "failed", now, reason)
		d.Status = "failed"
		return true, nil
	})
}

func requireActiveAttempt(d *Delivery) error {
	if d.Status != "processing" || len(d.Attempts) == 0 {
		return &Error{Code: CodeNoActiveAttempt,
			Message: "no active processing attempt: call /processing first (the message is " + d.Status + ")",
			Details: Problems{"": {"no active processing attempt"}}}
	}
	return nil
}

func completeAttempt(a *Attempt, status string, now time.Time, reason string) {
	done := FormatTime(now)
	a.Status, a.CompletedAt = status, &done
	if reason != "" {
		a.Error = &reason
	}
}

// transition applies a change to the agent's delivery of a message in the
// room. A message the agent cannot see there (unknown, of another room, not
// mentioning it) is not found. apply reports whether it changed anything.
func (db *DB) transition(ctx context.Context, agent Actor, roomID, messageID string,
	apply func(*Delivery, time.Time) (bool, error)) (*DeliveryOutcome, error) {
	if !ValidID(messageID) {
		return nil, notFound("message")
	}
	var out *DeliveryOutcome
	err := db.writeInRoom(ctx, agent, roomID, loadAccess, func(tx *Tx, a *roomAccess) error {
		var seq int64
		d, err := scanDelivery(tx.QueryRow(`SELECT d.message_seq, `+prefixed("d.", deliveryColumns)+`
			FROM deliveries d JOIN messages m ON m.seq = d.message_seq
			WHERE m.id = ? AND d.room_id = ? AND d.agent_id = ?`, messageID, roomID, agent.ID), &seq)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("message")
		}
		if err != nil {
			return err
		}
		out, _, err = db.applyTransition(tx, a.room, seq, d, apply)
		return err
	})
	return out, err
}

// applyTransition applies a change to delivery d of the message at seq in
// room, saves it and publishes the message's new state. It returns the
// outcome and, when anything changed, the message with d attached.
func (db *DB) applyTransition(tx *Tx, room *Room, seq int64, d *Delivery,
	apply func(*Delivery, time.Time) (bool, error)) (*DeliveryOutcome, *Message, error) {
	if err := json.Unmarshal(d.AttemptsJSON, &d.Attempts); err != nil {
		return nil, nil, err
	}
	changed, err := apply(d, tx.Now())
	if err != nil {
		return nil, nil, err
	}
	msg, err := messageBySeq(tx, seq)
	if err != nil {
		return nil, nil, err
	}
	out := &DeliveryOutcome{MessageID: msg.ID, Status: d.Status, AttemptNumber: d.CurrentAttempt}
	if !changed {
		return out, nil, nil
	}
	if err := saveDelivery(tx, room.ID, seq, d); err != nil {
		return nil, nil, err
	}
	// The push carries this delivery alone (clients merge it into what
	// they hold), and what people see of the message besides.
	if err := attachFiles(tx, []*Message{msg}); err != nil {
		return nil, nil, err
	}
	if err := attachReplies(tx, []*Message{msg}, ""); err != nil {
		return nil, nil, err
	}
	if err := attachReactions(tx, []*Message{msg}); err != nil {
		return nil, nil, err
	}
	msg.Deliveries = []*Delivery{d}
	db.publish(tx, Change{Kind: MessageUpdated, Room: room, Message: msg})
	return out, msg, nil
}

// saveDelivery writes a changed delivery back.
func saveDelivery(tx *Tx, roomID string, seq int64, d *Delivery) error {
	attempts, err := json.Marshal(d.Attempts)
	if err != nil {
		return err
	}
	d.AttemptsJSON = attempts
	d.UpdatedAt = tx.Now()
	var processed any
	if d.ProcessedAt != nil {
		processed = d.ProcessedAt.UnixMicro()
	}
	_, err = tx.Exec(`UPDATE deliveries SET status = ?, current_attempt = ?, attempts = ?, processed_at = ?, updated_at = ?
		WHERE agent_id = ? AND room_id = ? AND message_seq = ?`,
		d.Status, d.CurrentAttempt, string(attempts), processed, d.UpdatedAt.UnixMicro(), d.AgentID, roomID, seq)
	return err
}

// prefixed qualifies each column of a comma-separated list.
func prefixed(prefix, columns string) string {
	parts := strings.Split(columns, ",")
	for i, c := range parts {
		parts[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// DeliveryBacklog is the work the agents have not finished: the
// deliveries not processed yet, by status, and when the message of the
// oldest one still pending (never picked up) was posted.
type DeliveryBacklog struct {
	Open          map[string]int64 // pending, processing, failed
	OldestPending time.Time        // zero while nothing is pending
	// Capped is set when the count stopped at its limit: the counts are
	// then lower bounds, and OldestPending the oldest among those counted.
	Capped bool
}

// DeliveryBacklog counts the deliveries not processed yet, up to limit in
// all. Nothing orders them by age or state (the partial index
// deliveries_open holds exactly them, by agent and room), so each one
// counted costs a row lookup: the limit keeps a large backlog (an agent
// that never takes its messages) from making every read cost seconds.
func (db *DB) DeliveryBacklog(ctx context.Context, limit int) (DeliveryBacklog, error) {
	b := DeliveryBacklog{Open: map[string]int64{"pending": 0, "processing": 0, "failed": 0}}
	err := db.readTx(ctx, func(q readQ) error {
		rows, err := q.Query(`SELECT status, count(*), min(message_seq) FROM
			(SELECT status, message_seq FROM deliveries WHERE status != 'processed' LIMIT ?) open_deliveries GROUP BY status`, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		var oldest, total int64
		for rows.Next() {
			var status string
			var n, seq int64
			if err := rows.Scan(&status, &n, &seq); err != nil {
				return err
			}
			b.Open[status], total = n, total+n
			if status == "pending" {
				oldest = seq
			}
		}
		b.Capped = total >= int64(limit)
		if err := rows.Err(); err != nil || oldest == 0 {
			return err
		}
		var at int64
		if err := q.QueryRow(`SELECT inserted_at FROM messages WHERE seq = ?`, oldest).Scan(&at); err != nil {
			return err
		}
		b.OldestPending = fromMicros(at)
		return nil
	})
	return b, err
}
