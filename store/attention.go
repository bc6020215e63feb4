package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Attention marks, chatd's own: a person puts an attention message (an
// agent asking for something) away with "Mark done", for themselves alone;
// the web app lists what is left. Only people keep marks, only on attention
// messages of rooms they read.

// AttentionMark is one message a person marked done, and when.
type AttentionMark struct {
	MessageID string
	DoneAt    time.Time
}

var errNotAttention = &Error{Code: CodeValidation, Message: "/message_id is not an attention message: only those are marked done",
	Details: Problems{"/message_id": {"is not an attention message"}}}

// MarkAttention marks the attention message messageID of a room done for
// the actor (done), or not done any more; it answers the mark, or nil when
// it was taken back. Marking again changes nothing.
func (db *DB) MarkAttention(ctx context.Context, actor Actor, roomID, messageID string, done bool) (*AttentionMark, error) {
	if actor.IsAgent() {
		return nil, &Error{Code: CodeForbidden, Message: "only people mark attention messages done"}
	}
	var mark *AttentionMark
	if !ValidID(messageID) {
		return nil, notFound("message")
	}
	err := db.writeInRoom(ctx, actor, roomID, loadAccess, func(tx *Tx, _ *roomAccess) error {
		var seq int64
		var typ string
		err := tx.QueryRow(`SELECT seq, message_type FROM messages WHERE id = ? AND room_id = ?`, messageID, roomID).Scan(&seq, &typ)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return notFound("message")
		case err != nil:
			return err
		case typ != "attention":
			return errNotAttention
		}
		if !done {
			_, err := tx.Exec(`DELETE FROM attention_marks WHERE user_id = ? AND message_seq = ?`, actor.ID, seq)
			return err
		}
		if _, err := tx.Exec(`INSERT INTO attention_marks (user_id, room_id, message_seq, done_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			actor.ID, roomID, seq, tx.Now().UnixMicro()); err != nil {
			return err
		}
		var at int64
		if err := tx.QueryRow(`SELECT done_at FROM attention_marks WHERE user_id = ? AND message_seq = ?`, actor.ID, seq).Scan(&at); err != nil {
			return err
		}
		mark = &AttentionMark{MessageID: messageID, DoneAt: fromMicros(at)}
		return nil
	})
	return mark, err
}

// AttentionMarks returns the actor's marks in a room it may read, newest
// first.
func (db *DB) AttentionMarks(ctx context.Context, actor Actor, roomID string) ([]AttentionMark, error) {
	var marks []AttentionMark
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, actor, roomID); err != nil {
			return err
		}
		rows, err := q.Query(`SELECT m.id, a.done_at FROM attention_marks a JOIN messages m ON m.seq = a.message_seq
			WHERE a.user_id = ? AND a.room_id = ? ORDER BY a.done_at DESC, m.seq DESC`, actor.ID, roomID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m AttentionMark
			var at int64
			if err := rows.Scan(&m.MessageID, &at); err != nil {
				return err
			}
			m.DoneAt = fromMicros(at)
			marks = append(marks, m)
		}
		return rows.Err()
	})
	return marks, err
}
