package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Participant is a user or an agent in a room, with its display details.
type Participant struct {
	RoomID      string
	ID          string // the user's or agent's id
	Type        PartyType
	Name        string
	Handle      string
	Description *string // agents only
	IsExternal  *bool   // agents only
	OwnerID     string  // an agent's owner; a user's own id
	Role        string  // owner, admin, member
	Status      string  // active, blocked
	InsertedAt  time.Time
	UpdatedAt   time.Time
}

// Roles are the participant roles, from most to least powerful.
var Roles = []string{"owner", "admin", "member"}

const participantSelect = `SELECT p.room_id, p.member_id, CASE WHEN p.user_id IS NULL THEN 'Agent' ELSE 'User' END,
	coalesce(trim(u.first_name || ' ' || u.last_name), a.name), coalesce(u.handle, a.handle), a.description, a.is_external,
	coalesce(a.owner_id, u.id), p.role, p.status, p.inserted_at, p.updated_at
	FROM participants p LEFT JOIN users u ON u.id = p.user_id LEFT JOIN agents a ON a.id = p.agent_id`

func scanParticipant(row interface{ Scan(...any) error }) (*Participant, error) {
	var p Participant
	var desc sql.NullString
	var ext sql.NullBool
	var ins, upd int64
	err := row.Scan(&p.RoomID, &p.ID, &p.Type, &p.Name, &p.Handle, &desc, &ext, &p.OwnerID, &p.Role, &p.Status, &ins, &upd)
	if err != nil {
		return nil, err
	}
	p.Description = nullString(desc)
	if ext.Valid {
		p.IsExternal = &ext.Bool
	}
	p.InsertedAt, p.UpdatedAt = fromMicros(ins), fromMicros(upd)
	return &p, nil
}

func insertParticipant(tx *Tx, roomID, memberID string, isAgent bool, role string) (*Participant, error) {
	userID, agentID := sql.NullString{}, sql.NullString{}
	if isAgent {
		agentID = sql.NullString{String: memberID, Valid: true}
	} else {
		userID = sql.NullString{String: memberID, Valid: true}
	}
	ts := tx.Now().UnixMicro()
	_, err := tx.Exec(`INSERT INTO participants (room_id, member_id, user_id, agent_id, role, status, inserted_at, updated_at)
		VALUES (?, ?, ?, ?, ?, 'active', ?, ?)`, roomID, memberID, userID, agentID, role, ts, ts)
	if err != nil {
		return nil, err
	}
	return participant(tx, roomID, memberID)
}

// participant returns one row of a room, or a not_found error.
func participant(q queryer, roomID, memberID string) (*Participant, error) {
	p, err := scanParticipant(q.QueryRow(participantSelect+` WHERE p.room_id = ? AND p.member_id = ?`, roomID, memberID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("participant")
	}
	return p, err
}

// roomParticipants returns the participants of a room, oldest first,
// optionally only of one type ("" for both).
func roomParticipants(q queryer, roomID string, typ PartyType) ([]*Participant, error) {
	query := participantSelect + ` WHERE p.room_id = ?`
	args := []any{roomID}
	switch typ {
	case PartyUser:
		query += ` AND p.user_id IS NOT NULL`
	case PartyAgent:
		query += ` AND p.agent_id IS NOT NULL`
	}
	rows, err := q.Query(query+` ORDER BY p.inserted_at, p.member_id`, args...)
	if err != nil {
		return nil, err
	}
	return scanAll(rows, scanParticipant)
}

// ParticipantKeyset is the paging position just after p.
func ParticipantKeyset(p *Participant) *Keyset {
	return &Keyset{Int: p.InsertedAt.UnixMicro(), ID: p.ID}
}

// ListParticipants lists the participants of a room the actor may read,
// oldest first, optionally only of one type ("" for both).
func (db *DB) ListParticipants(ctx context.Context, actor Actor, roomID string, typ PartyType, pr PageRequest) (*Page[*Participant], error) {
	conds, args := []string{"p.room_id = ?"}, []any{roomID}
	switch typ {
	case PartyUser:
		conds = append(conds, "p.user_id IS NOT NULL")
	case PartyAgent:
		conds = append(conds, "p.agent_id IS NOT NULL")
	}
	var page *Page[*Participant]
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, actor, roomID); err != nil {
			return err
		}
		var err error
		page, err = listPageIn(q, participantSelect, conds, args, sortSpec{column: "p.inserted_at", idCol: "p.member_id"}, pr, scanParticipant)
		return err
	})
	if err != nil {
		return nil, err
	}
	if n := len(page.Items); n > 0 {
		page.Next = ParticipantKeyset(page.Items[n-1])
	}
	return page, nil
}

// AddParticipant adds one of the actor's peers to a room, with role
// ("member" when empty). Adding someone already in the room is a validation
// error; someone the actor cannot see is not found.
func (db *DB) AddParticipant(ctx context.Context, actor Actor, roomID, memberID, role string) (*Participant, error) {
	if role == "" {
		role = "member"
	}
	if p := (Problems{}); !checkOneOf(p, "/participant/role", role, Roles) {
		return nil, p.Err(CodeValidation)
	}
	var added *Participant
	err := db.writeInRoom(ctx, actor, roomID, loadAccess, func(tx *Tx, a *roomAccess) error {
		standing := a.effectiveRole()
		switch {
		case standing == "":
			return &Error{Code: CodeForbidden, Message: "only participants of the room may add others to it"}
		case role == "owner" && standing != "owner":
			return &Error{Code: CodeForbidden, Message: "only an owner of the room may add another owner"}
		case role == "admin" && standing == "member":
			return &Error{Code: CodeForbidden, Message: "only an owner or admin of the room may add an admin"}
		}
		if _, err := participant(tx, a.room.ID, memberID); err == nil {
			return Problems{"/participant/participant_id": {"is already a participant of this room"}}.Err(CodeValidation)
		} else if ErrorCode(err) != CodeNotFound {
			return err
		}
		peerType, err := peerTypeOf(tx, actor, memberID)
		if err != nil {
			return err
		}
		var count int
		if err := tx.QueryRow(`SELECT count(*) FROM participants WHERE room_id = ?`, roomID).Scan(&count); err != nil {
			return err
		}
		if count >= db.limits.ParticipantsPerRoom {
			return limitReached("participants", db.limits.ParticipantsPerRoom, count)
		}
		if added, err = insertParticipant(tx, roomID, memberID, peerType == PartyAgent, role); err != nil {
			return err
		}
		db.publish(tx, Change{Kind: ParticipantAdded, Room: a.room, Member: added})
		db.publish(tx, Change{Kind: RoomAdded, Room: a.room, Member: added})
		return nil
	})
	return added, err
}

// RemoveParticipant removes someone from a room: an owner or admin may
// remove anyone, anyone may remove themselves, and a person may remove the
// agents it owns. The last owner stays.
func (db *DB) RemoveParticipant(ctx context.Context, actor Actor, roomID, memberID string) (*Participant, error) {
	var removed *Participant
	err := db.Write(ctx, func(tx *Tx) error {
		a, target, err := loadTarget(tx, actor, roomID, memberID)
		if err != nil {
			return err
		}
		self := target.ID == actor.ID || (!actor.IsAgent() && target.Type == PartyAgent && target.OwnerID == actor.ID)
		if !self {
			if err := a.mayManage(target); err != nil {
				return err
			}
		}
		if err := keepAnOwner(tx, target, "remove"); err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM participants WHERE room_id = ? AND member_id = ?`, roomID, memberID); err != nil {
			return err
		}
		removed = target
		db.publish(tx, Change{Kind: ParticipantRemoved, Room: a.room, Member: removed})
		db.publish(tx, Change{Kind: RoomRemoved, Room: a.room, Member: removed})
		return nil
	})
	return removed, err
}

// loadTarget reads the actor's access to a room and the participant it
// acts on; either missing is not found.
func loadTarget(tx *Tx, actor Actor, roomID, memberID string) (*roomAccess, *Participant, error) {
	a, err := loadAccess(tx, actor, roomID)
	if err != nil {
		return nil, nil, err
	}
	target, err := participant(tx, roomID, memberID)
	if err != nil {
		return nil, nil, err
	}
	return a, target, nil
}

// keepAnOwner refuses to take the owner role from the last owner of a room.
func keepAnOwner(tx *Tx, target *Participant, action string) error {
	if target.Role != "owner" || target.Status != "active" {
		return nil
	}
	var owners int
	if err := tx.QueryRow(`SELECT count(*) FROM participants WHERE room_id = ? AND role = 'owner' AND status = 'active'`, target.RoomID).Scan(&owners); err != nil {
		return err
	}
	if owners <= 1 {
		return &Error{Code: CodeCannotRemoveSoleOwner, Message: "cannot " + action + " the only owner of the room; make someone else an owner first"}
	}
	return nil
}

// ParticipantUpdate changes a participant's role or status; nil leaves it.
type ParticipantUpdate struct {
	Role   *string
	Status *string // "active" or "blocked"
}

// UpdateParticipant changes a participant's role or status. It takes an
// owner or admin; making or unmaking an owner takes an owner. A blocked
// participant loses read access (and a blocked agent cannot post) until it is
// made active again.
func (db *DB) UpdateParticipant(ctx context.Context, actor Actor, roomID, memberID string, up ParticipantUpdate) (*Participant, error) {
	p := Problems{}
	if up.Role != nil {
		checkOneOf(p, "/participant/role", *up.Role, Roles)
	}
	if up.Status != nil && *up.Status != "active" && *up.Status != "blocked" {
		p.Add("/participant/status", "must be active or blocked")
	}
	if err := p.Err(CodeValidation); err != nil {
		return nil, err
	}
	var out *Participant
	err := db.Write(ctx, func(tx *Tx) error {
		a, target, err := loadTarget(tx, actor, roomID, memberID)
		if err != nil {
			return err
		}
		if err := a.mayManage(target); err != nil {
			return err
		}
		role, status := target.Role, target.Status
		if up.Role != nil {
			role = *up.Role
		}
		if up.Status != nil {
			status = *up.Status
		}
		if (role == "owner") != (target.Role == "owner") && !a.isOwner() {
			return &Error{Code: CodeForbidden, Message: "only an owner of the room may make or unmake owners"}
		}
		if role != "owner" || status != "active" {
			if err := keepAnOwner(tx, target, "demote or block"); err != nil {
				return err
			}
		}
		if role == target.Role && status == target.Status {
			out = target
			return nil
		}
		if _, err := tx.Exec(`UPDATE participants SET role = ?, status = ?, updated_at = ? WHERE room_id = ? AND member_id = ?`,
			role, status, tx.Now().UnixMicro(), roomID, memberID); err != nil {
			return err
		}
		if out, err = participant(tx, roomID, memberID); err != nil {
			return err
		}
		// Losing or regaining read access reads, to the participant, like
		// leaving or joining the room.
		switch {
		case target.Status == "active" && status == "blocked":
			db.publish(tx, Change{Kind: RoomRemoved, Room: a.room, Member: out})
		case target.Status == "blocked" && status == "active":
			db.publish(tx, Change{Kind: RoomAdded, Room: a.room, Member: out})
		}
		return nil
	})
	return out, err
}
