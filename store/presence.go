package store

import (
	"context"
	"database/sql"
	"time"
)

// What presence (chatd's extension: who is connected to the socket, and
// when each was last seen) needs from the database. Whether someone is
// connected lives in the server's memory, not here; the database knows the
// rooms a connection's presence is pushed to, and when each participant's
// API keys were last used, which is when an agent that works without a
// socket (long-poll, webhooks, MCP) was last seen.

// MemberRoomIDs returns the rooms, not deleted, that id (an agent or a
// person) is a participant of: where a change of its presence is told. It
// is the server's own read, on behalf of nobody.
func (db *DB) MemberRoomIDs(ctx context.Context, id string) ([]string, error) {
	return scanStrings(db.query(ctx, `SELECT p.room_id FROM participants p JOIN rooms r ON r.id = p.room_id
		WHERE p.member_id = ? AND r.deleted_at IS NULL`, id))
}

// Presence is one participant of a room, for the presence listing: who it
// is, and when any of its API keys was last used (zero when never).
type Presence struct {
	ID       string
	Type     PartyType
	LastUsed time.Time
}

// RoomPresence returns every participant of a room the actor may read,
// with when its keys were last used; a room the actor may not read is not
// found.
func (db *DB) RoomPresence(ctx context.Context, actor Actor, roomID string) ([]Presence, error) {
	var out []Presence
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, actor, roomID); err != nil {
			return err
		}
		rows, err := q.Query(`SELECT p.member_id, p.agent_id IS NOT NULL,
			(SELECT max(k.last_used_at) FROM api_keys k WHERE k.agent_id = p.agent_id OR k.user_id = p.user_id)
			FROM participants p WHERE p.room_id = ? ORDER BY p.inserted_at, p.member_id`, roomID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p Presence
			var agent bool
			var used sql.NullInt64
			if err := rows.Scan(&p.ID, &agent, &used); err != nil {
				return err
			}
			p.Type = PartyUser
			if agent {
				p.Type = PartyAgent
			}
			if used.Valid {
				p.LastUsed = fromMicros(used.Int64)
			}
			out = append(out, p)
		}
		return rows.Err()
	})
	return out, err
}

// OwnedAgentsPresence returns every live agent of a person, with when its
// keys were last used, for the person's agents page.
func (db *DB) OwnedAgentsPresence(ctx context.Context, ownerID string) ([]Presence, error) {
	rows, err := db.query(ctx, `SELECT a.id, (SELECT max(k.last_used_at) FROM api_keys k WHERE k.agent_id = a.id)
		FROM agents a WHERE a.owner_id = ? AND a.deleted_at IS NULL ORDER BY a.inserted_at, a.id`, ownerID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Presence
	for rows.Next() {
		p := Presence{Type: PartyAgent}
		var used sql.NullInt64
		if err := rows.Scan(&p.ID, &used); err != nil {
			return nil, err
		}
		if used.Valid {
			p.LastUsed = fromMicros(used.Int64)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
