package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// An agent's inbox is the text messages addressed to it that it has not
// processed, in every room it is an active participant of: what an agent
// without a socket drains, one room at a time (NextMessage) or across its
// rooms (InboxNext, ListInbox), or takes one message at a time with
// ClaimMessage when several workers share the agent.

// ClaimMessage takes work for an agent that has no socket: the oldest
// message addressed to it that no worker holds — new, or in an attempt that
// outlived the attempt timeout — in roomID, or in any room it is an active
// participant of when roomID is empty. The same write starts a processing
// attempt on it, so two callers never take the same message. It returns
// nil when there is nothing to take.
//
// A failed message is not taken again: an agent that waits for work right
// after reporting a failure would otherwise get the same message back at
// once. It stays in the room's listing (and NextMessage) for a deliberate
// retry.
func (db *DB) ClaimMessage(ctx context.Context, agent Actor, roomID string) (*Message, error) {
	if roomID != "" {
		if _, err := db.Room(ctx, agent, roomID); err != nil {
			return nil, err
		}
	}
	// Most calls find nothing: a read answers those without the writer.
	var found claim
	err := db.readTx(ctx, func(q readQ) (err error) {
		found, err = db.claimable(q, agent, roomID, now())
		return err
	})
	if err != nil || !found.ok {
		return nil, err
	}
	var msg *Message
	err = db.Write(ctx, func(tx *Tx) error {
		c, err := db.claimable(tx, agent, roomID, tx.Now())
		if err != nil || !c.ok {
			return err
		}
		a, err := loadAccess(tx, agent, c.roomID)
		if err != nil {
			return err
		}
		_, msg, err = db.applyTransition(tx, a.room, c.seq, c.delivery, db.startAttempt)
		return err
	})
	return msg, err
}

// claim is the delivery ClaimMessage would take.
type claim struct {
	ok       bool
	roomID   string
	seq      int64
	delivery *Delivery
}

// inboxDeliveries selects, from deliveries d, an agent's (the one
// argument) not yet processed, in the live rooms it is an active
// participant of: its inbox. A room it left or was blocked in keeps its
// deliveries, out of the inbox. It reads the open deliveries' index (see
// openDeliveries), so an inbox costs its backlog, never the agent's history.
func (db *DB) inboxDeliveries() string {
	return `FROM ` + db.openDeliveries() + `
	JOIN rooms r ON r.id = d.room_id AND r.deleted_at IS NULL
	JOIN participants p ON p.room_id = d.room_id AND p.member_id = d.agent_id AND p.status = 'active'
	WHERE d.agent_id = ? AND ` + isOpen
}

// claimable finds the delivery ClaimMessage takes next, if any.
func (db *DB) claimable(q queryer, agent Actor, roomID string, at time.Time) (claim, error) {
	stale := at.Add(-db.attemptTimeout).UnixMicro()
	query := `SELECT d.room_id, d.message_seq, ` + prefixed("d.", deliveryColumns) + ` ` + db.inboxDeliveries() + `
		AND (d.status IN ('pending', 'delivered') OR (d.status = 'processing' AND d.updated_at < ?))`
	args := []any{agent.ID, stale}
	if roomID != "" {
		query += ` AND d.room_id = ?`
		args = append(args, roomID)
	}
	query += ` ORDER BY d.message_seq LIMIT 1`
	var c claim
	var seq int64
	row := q.QueryRow(query, args...)
	d, err := scanDelivery(scanFirst{row, &c.roomID}, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return claim{}, nil
	}
	if err != nil {
		return claim{}, err
	}
	c.ok, c.seq, c.delivery = true, seq, d
	return c, nil
}

// scanFirst scans its first column into dest and the rest as its row
// would, so a scan function for a column list reads a row with one more
// column in front.
type scanFirst struct {
	row  interface{ Scan(...any) error }
	dest any
}

func (s scanFirst) Scan(dest ...any) error {
	return s.row.Scan(append([]any{s.dest}, dest...)...)
}

// InboxNext returns the oldest message of the agent's inbox, as NextMessage
// does for one room, or nil when the inbox is empty.
func (db *DB) InboxNext(ctx context.Context, agent Actor) (*Message, error) {
	var msg *Message
	err := db.readTx(ctx, func(q readQ) (err error) {
		msg, err = firstDelivered(q, agent.ID, `SELECT d.message_seq `+db.inboxDeliveries()+`
			ORDER BY d.message_seq LIMIT 1`, agent.ID)
		return err
	})
	return msg, err
}

// ListInbox lists the agent's inbox, oldest first, with its own delivery
// state of each message.
func (db *DB) ListInbox(ctx context.Context, agent Actor, pr PageRequest) (*Page[*Message], error) {
	conds := []string{`m.seq IN (SELECT d.message_seq ` + db.inboxDeliveries() + `)`}
	return db.readMessages(ctx, agent, "", agent.ID, `SELECT `+messageColumns+` FROM messages m`, conds, []any{agent.ID},
		sortSpec{column: "m.seq", idCol: "m.id"}, pr)
}
