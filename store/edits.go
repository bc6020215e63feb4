package store

import (
	"context"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Edits and deletions. A sender may edit and delete their own text
// messages; a room's owner may also delete any message of the room. An
// edit changes the content and keeps what it replaced in the message's
// edit history, which the room's owner may read; the mentions, and with
// them every agent's delivery state, stay as they were. A deletion leaves
// a tombstone in the message's place: its content, attachments, reactions
// and edit history are gone, deleted_at is set, and the deliveries not
// processed yet and webhook requests not sent yet are withdrawn, so the
// message leaves /next and the inbox. What an agent had processed stays on
// record.

// EditMessage replaces the content of the actor's own text message, in a
// room the actor may post in, and returns the message as the actor sees
// it.
func (db *DB) EditMessage(ctx context.Context, actor Actor, roomID, messageID, content string) (*Message, error) {
	switch {
	case !utf8.ValidString(content):
		return nil, Problems{"/message/content": {"must be valid UTF-8"}}.Err(CodeValidation)
	case IsBlank(content):
		return nil, Problems{"/message/content": {"can't be blank or only invisible characters"}}.Err(CodeValidation)
	case utf8.RuneCountInString(content) > MaxTextLen:
		return nil, Problems{"/message/content": {"must be at most 32768 characters long"}}.Err(CodeValidation)
	}
	var out *Message
	err := db.writeInRoom(ctx, actor, roomID, loadPostAccess, func(tx *Tx, a *roomAccess) error {
		m, err := visibleMessage(tx, actor, roomID, messageID)
		if err != nil {
			return err
		}
		if err := mayEdit(actor, m); err != nil {
			return err
		}
		var mentions []Mention
		if err := json.Unmarshal(m.MentionsJSON, &mentions); err != nil {
			return err
		}
		// The edit keeps every mention in the text, as sending does.
		if content = withMentionsPrepended(content, mentions); content != m.Content {
			if err := recordEdit(tx, m, tx.Now()); err != nil {
				return err
			}
			now := tx.Now().UnixMicro()
			if _, err := tx.Exec(`UPDATE messages SET content = ?, edited_at = ?, updated_at = ? WHERE seq = ?`, content, now, now, m.Seq); err != nil {
				return err
			}
			if err := db.publishMessageChange(tx, a.room, m.Seq, MessageChanged, nil); err != nil {
				return err
			}
		}
		out, err = messageFor(tx, m.Seq, readerID(actor))
		return err
	})
	return out, err
}

// mayEdit refuses an edit of anything but the actor's own live text
// message.
func mayEdit(actor Actor, m *Message) error {
	switch {
	case m.SenderID != actor.ID:
		return &Error{Code: CodeForbidden, Message: "only the sender of a message may edit it"}
	case m.Type != "text":
		return &Error{Code: CodeForbidden, Message: "only text messages can be edited; events are a record of what happened"}
	case m.DeletedAt != nil:
		return &Error{Code: CodeConflict, Message: "the message was deleted"}
	}
	return nil
}

// recordEdit keeps the content m has before an edit made at, as its next
// edit.
func recordEdit(tx *Tx, m *Message, at time.Time) error {
	_, err := tx.Exec(`INSERT INTO message_edits (message_seq, edit, content, edited_at)
		VALUES (?, (SELECT coalesce(max(edit), 0) + 1 FROM message_edits WHERE message_seq = ?), ?, ?)`,
		m.Seq, m.Seq, m.Content, at.UnixMicro())
	return err
}

// publishMessageChange publishes the message at seq as people see it, for
// the kind of change made to it. The agents that may see it hear of it
// too: seers, or those that may see it now.
func (db *DB) publishMessageChange(tx *Tx, room *Room, seq int64, kind ChangeKind, told []string) error {
	m, err := messageFor(tx, seq, "")
	if err != nil {
		return err
	}
	if told == nil {
		told = seers(m)
	}
	db.publish(tx, Change{Kind: kind, Room: room, Message: m, Seers: told})
	return nil
}

// DeleteMessage makes a message a tombstone: the actor's own text message,
// or, for the room's owner, any message of the room. Deleting a tombstone
// again changes nothing. It returns the tombstone as the actor sees it.
func (db *DB) DeleteMessage(ctx context.Context, actor Actor, roomID, messageID string) (*Message, error) {
	var out *Message
	err := db.writeInRoom(ctx, actor, roomID, loadAccess, func(tx *Tx, a *roomAccess) error {
		m, err := visibleMessage(tx, actor, roomID, messageID)
		if err != nil {
			return err
		}
		own := m.SenderID == actor.ID && m.Type == "text"
		switch {
		case m.DeletedAt != nil:
		case !own && !a.isOwner():
			return &Error{Code: CodeForbidden, Message: "only the sender of a text message, or the room's owner, may delete it"}
		default:
			if own && !a.isOwner() {
				if err := a.mayPost(actor); err != nil {
					return err
				}
			}
			if err := db.deleteMessage(tx, a.room, m); err != nil {
				return err
			}
		}
		out, err = messageFor(tx, m.Seq, readerID(actor))
		return err
	})
	return out, err
}

// deleteMessage makes m a tombstone and tells those who could see it.
func (db *DB) deleteMessage(tx *Tx, room *Room, m *Message) error {
	// The agents the message was for hear of the deletion too, though
	// their deliveries go with it.
	if err := attachDeliveries(tx, []*Message{m}, ""); err != nil {
		return err
	}
	told := append([]string{}, seers(m)...)
	if err := tombstone(tx, m); err != nil {
		return err
	}
	return db.publishMessageChange(tx, room, m.Seq, MessageChanged, told)
}

// tombstone removes m's content, attachments, reactions and edit history,
// and withdraws what was still to be delivered of it.
func tombstone(tx *Tx, m *Message) error {
	now := tx.Now().UnixMicro()
	if _, err := tx.Exec(`UPDATE messages SET content = '', metadata = '{}', deleted_at = ?, updated_at = ? WHERE seq = ?`,
		now, now, m.Seq); err != nil {
		return err
	}
	for _, stmt := range []string{
		`DELETE FROM message_attachments WHERE message_seq = ?`,
		`DELETE FROM reactions WHERE message_seq = ?`,
		`DELETE FROM message_edits WHERE message_seq = ?`,
		`DELETE FROM deliveries WHERE message_seq = ? AND status != 'processed'`,
		`DELETE FROM webhook_deliveries WHERE message_seq = ? AND status = 'pending'`,
	} {
		if _, err := tx.Exec(stmt, m.Seq); err != nil {
			return err
		}
	}
	return nil
}

// Edit is one entry of a message's edit history: the content it had before
// an edit, and when that edit was made.
type Edit struct {
	Content  string
	EditedAt time.Time
}

// MessageEdits returns the edit history of a message, oldest first, to the
// owner of its room.
func (db *DB) MessageEdits(ctx context.Context, actor Actor, roomID, messageID string) ([]Edit, error) {
	var out []Edit
	err := db.readTx(ctx, func(q readQ) error {
		a, err := loadAccess(q, actor, roomID)
		if err != nil {
			return err
		}
		m, err := visibleMessage(q, actor, roomID, messageID)
		if err != nil {
			return err
		}
		if !a.isOwner() {
			return &Error{Code: CodeForbidden, Message: "only the room's owner may read a message's edit history"}
		}
		rows, err := q.Query(`SELECT content, edited_at FROM message_edits WHERE message_seq = ? ORDER BY edit`, m.Seq)
		if err != nil {
			return err
		}
		out, err = scanAll(rows, func(row interface{ Scan(...any) error }) (Edit, error) {
			var e Edit
			var at int64
			err := row.Scan(&e.Content, &at)
			e.EditedAt = fromMicros(at)
			return e, err
		})
		return err
	})
	if out == nil && err == nil {
		out = []Edit{}
	}
	return out, err
}
