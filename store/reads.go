package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
)

// Read markers and unread counts: chatd's own extension for the web app (the
// Band API has none). A person's marker in a room is the seq of the last
// message they read there; the room's unread count is what others sent
// after it for people to read: messages, requests for attention and
// errors. An agent's thoughts, tool calls and task updates are its working
// out loud, shown in the room but not news: thirty of them would otherwise
// bury the one answer. Only people have markers: agents track their work
// through deliveries.

// UnreadCap bounds an unread count: counting stops there, so a room with a
// backlog of thousands costs no more to list than one with UnreadCap unread
// messages. A count of UnreadCap reads "UnreadCap or more" (the web app
// shows "99+").
const UnreadCap = 100

// UnreadTypes are the message types an unread count counts.
var UnreadTypes = []string{"attention", "error", "text"}

// unreadTypeList is UnreadTypes as an SQL list of literals, written into
// the query text: the unread count stays a fixed query the planner sees
// whole.
var unreadTypeList = literalList(UnreadTypes)

// unreadSQL is a person's unread count in the room r.id, as an SQL
// expression: its arguments are the person's id, twice. The inner LIMIT
// caps the work, not only the answer: the scan of messages_room stops at
// the UnreadCap-th match.
var unreadSQL = `(SELECT count(*) FROM (SELECT 1 FROM messages m WHERE m.room_id = r.id
	AND m.seq > coalesce((SELECT k.last_read_seq FROM read_markers k WHERE k.user_id = ? AND k.room_id = r.id), 0)
	AND m.sender_id != ? AND m.message_type IN ` + unreadTypeList + ` LIMIT ` + strconv.Itoa(UnreadCap) + `) AS unread)`

// roomUnread returns the actor's unread count in a room; 0 for an agent,
// which keeps no marker.
func roomUnread(q queryer, actor Actor, roomID string) (int, error) {
	if actor.IsAgent() {
		return 0, nil
	}
	var n int
	err := q.QueryRow(`SELECT `+unreadSQL+` FROM rooms r WHERE r.id = ?`, actor.ID, actor.ID, roomID).Scan(&n)
	return n, err
}

// markReadUpTo moves a person's marker in a room forward to seq and reports
// whether it moved; a marker already there or beyond stays (markers never
// move back).
func markReadUpTo(tx *Tx, userID, roomID string, seq int64) (bool, error) {
	res, err := tx.Exec(`INSERT INTO read_markers (user_id, room_id, last_read_seq) VALUES (?, ?, ?)
		ON CONFLICT (user_id, room_id) DO UPDATE SET last_read_seq = excluded.last_read_seq
		WHERE excluded.last_read_seq > read_markers.last_read_seq`, userID, roomID, seq)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// MarkRead moves a person's read marker in a room they may read up to a
// message of that room (messageID nil: up to its newest message), never
// back, and returns the room with its unread count after the move. A
// message that is not in the room is not found, as a room the person may
// not read.
func (db *DB) MarkRead(ctx context.Context, actor Actor, roomID string, messageID *string) (*Room, error) {
	if actor.IsAgent() {
		return nil, &Error{Code: CodeForbidden, Message: "only people keep read markers"}
	}
	var room *Room
	err := db.writeInRoom(ctx, actor, roomID, loadAccess, func(tx *Tx, a *roomAccess) error {
		var seq int64
		var err error
		if messageID == nil {
			err = tx.QueryRow(`SELECT coalesce(max(seq), 0) FROM messages WHERE room_id = ?`, roomID).Scan(&seq)
		} else if !ValidID(*messageID) {
			err = notFound("message")
		} else {
			err = tx.QueryRow(`SELECT seq FROM messages WHERE id = ? AND room_id = ?`, *messageID, roomID).Scan(&seq)
			if errors.Is(err, sql.ErrNoRows) {
				err = notFound("message")
			}
		}
		if err != nil {
			return err
		}
		moved := false
		if seq > 0 {
			if moved, err = markReadUpTo(tx, actor.ID, roomID, seq); err != nil {
				return err
			}
		}
		room = a.room
		if room.Unread, err = roomUnread(tx, actor, roomID); err != nil {
			return err
		}
		if moved {
			// The person's other tabs and devices learn the new count.
			db.publish(tx, Change{Kind: RoomRead, Room: room, Member: &Participant{RoomID: roomID, ID: actor.ID, Type: PartyUser}})
		}
		return nil
	})
	return room, err
}
