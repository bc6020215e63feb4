package store

import (
	"context"
	"database/sql"
	"errors"
)

// Actor is who performs an action on a room: a human or an agent, with what
// the permission rules and the audit trail need.
type Actor struct {
	ID             string
	Type           PartyType
	Name           string
	Handle         string
	OwnerID        string // for an agent, its owner; for a human, the human
	OrganizationID string
}

// IsAgent reports whether the actor is an agent.
func (a Actor) IsAgent() bool { return a.Type == PartyAgent }

// UserActor is a human as an actor.
func UserActor(u *User) Actor {
	return Actor{ID: u.ID, Type: PartyUser, Name: u.Name(), Handle: u.Handle, OwnerID: u.ID, OrganizationID: u.OrganizationID}
}

// AgentActor is an agent as an actor.
func AgentActor(a *Agent) Actor {
	return Actor{ID: a.ID, Type: PartyAgent, Name: a.Name, Handle: a.Handle, OwnerID: a.OwnerID, OrganizationID: a.OrganizationID}
}

// Actor returns the principal as an actor.
func (p *Principal) Actor() Actor {
	if p.Agent != nil {
		return AgentActor(p.Agent)
	}
	return UserActor(p.User)
}

// The permission rules, all decided here:
//
//   - Read a room (its details, history, participants, board): an agent needs
//     an active participant row; a human needs a participant row that is not
//     blocked, or an owned agent with an active row. A soft-deleted room reads
//     as missing. Anything unreadable is ErrNotFound, whether or not it exists.
//   - Post (messages, events, board): the actor's own active row. A blocked
//     agent gets 403 execution_stopped; a human who reads the room only
//     through an agent gets 403 forbidden.
//   - Manage the room (rename, delete): its owner, that is an actor whose own
//     row has role owner, or a human who owns an agent whose row has role
//     owner (a person stands behind the rooms their agents created).
//   - Add a participant: any actor with its own active row (or owner
//     standing), adding one of its peers (see ListPeers). Granting admin takes
//     an owner or admin; granting owner takes an owner.
//   - Remove a participant, or change a role or status: an owner or admin,
//     and only an owner when the participant is an owner; anyone may remove
//     themselves (leave), and a person the agents it owns. The last owner can
//     be neither removed nor demoted nor blocked (403
//     cannot_remove_sole_owner).

// roomAccess is what an actor may do in one room.
type roomAccess struct {
	room *Room
	// role and status of the actor's own row ("" when it has none).
	role, status string
	// ownerByAgent: a human whose agent owns the room.
	ownerByAgent bool
	// readByAgent: a human who reads the room through an owned agent.
	readByAgent bool
}

func (a *roomAccess) canRead() bool {
	return a.status == "active" || a.readByAgent
}

// effectiveRole is the actor's standing for managing the room.
func (a *roomAccess) effectiveRole() string {
	if a.ownerByAgent {
		return "owner"
	}
	if a.status == "active" {
		return a.role
	}
	return ""
}

func (a *roomAccess) isOwner() bool { return a.effectiveRole() == "owner" }

func (a *roomAccess) isManager() bool {
	r := a.effectiveRole()
	return r == "owner" || r == "admin"
}

// mayManage returns nil when the actor may remove or change target: an owner
// or admin may, but only an owner may touch an owner.
func (a *roomAccess) mayManage(target *Participant) error {
	switch {
	case !a.isManager():
		return &Error{Code: CodeForbidden, Message: "only an owner or admin of the room may remove or change others"}
	case target.Role == "owner" && !a.isOwner():
		return &Error{Code: CodeForbidden, Message: "only an owner of the room may remove or change an owner"}
	}
	return nil
}

// mayPost returns nil when the actor may post to the room.
func (a *roomAccess) mayPost(actor Actor) error {
	switch {
	case a.status == "active":
		return nil
	case actor.IsAgent() && a.status == "blocked":
		return &Error{Code: CodeExecutionStopped, Message: "execution stopped: this agent is blocked in the room"}
	}
	return &Error{Code: CodeForbidden, Message: "only participants of the room may post in it"}
}

// queryer is what both the writer's *Tx and a read transaction offer.
type queryer interface {
	QueryRow(query string, args ...any) *sql.Row
	Query(query string, args ...any) (*sql.Rows, error)
}

// loadAccess returns the actor's access to a live room, or ErrNotFound when
// the actor may not read it (or it does not exist, or roomID is no UUID).
func loadAccess(q queryer, actor Actor, roomID string) (*roomAccess, error) {
	a, err := accessTo(q, actor, roomID)
	if err != nil {
		return nil, err
	}
	if !a.canRead() {
		return nil, notFound("chat room")
	}
	return a, nil
}

// loadPostAccess returns the actor's access to a live room it may post in.
// An agent blocked in the room learns that its execution there is stopped
// (403) rather than that the room is missing: it was let in once, and the
// block is what it needs to know about. The access it returns serves the
// post alone: for an active participant it leaves out what the actor's
// agents give them (ownerByAgent), which no post depends on.
func loadPostAccess(q queryer, actor Actor, roomID string) (*roomAccess, error) {
	a, err := ownAccessTo(q, actor, roomID)
	if err != nil {
		return nil, err
	}
	if a.status == "active" {
		// May post; what the actor's agents do in the room changes nothing.
		return a, nil
	}
	if err := a.addAgentStanding(q, actor); err != nil {
		return nil, err
	}
	if actor.IsAgent() && a.status == "blocked" {
		return nil, a.mayPost(actor)
	}
	if !a.canRead() {
		return nil, notFound("chat room")
	}
	return a, a.mayPost(actor)
}

// writeInRoom runs fn in a write transaction with the actor's access to
// the room as load (loadAccess or loadPostAccess) finds it; what load
// refuses writes nothing.
func (db *DB) writeInRoom(ctx context.Context, actor Actor, roomID string,
	load func(queryer, Actor, string) (*roomAccess, error), fn func(tx *Tx, a *roomAccess) error) error {
	return db.Write(ctx, func(tx *Tx) error {
		a, err := load(tx, actor, roomID)
		if err != nil {
			return err
		}
		return fn(tx, a)
	})
}

// accessTo reads the actor's standing in a live room without deciding
// anything; ErrNotFound only when there is no such live room.
func accessTo(q queryer, actor Actor, roomID string) (*roomAccess, error) {
	a, err := ownAccessTo(q, actor, roomID)
	if err != nil {
		return nil, err
	}
	return a, a.addAgentStanding(q, actor)
}

// ownAccessTo reads the room and the actor's own row in it, and nothing of
// the agents the actor owns there: a roomAccess whose ownerByAgent and
// readByAgent are not known yet.
func ownAccessTo(q queryer, actor Actor, roomID string) (*roomAccess, error) {
	if !ValidID(roomID) {
		return nil, notFound("chat room")
	}
	room, err := scanRoom(q.QueryRow(`SELECT `+roomColumns+` FROM rooms r WHERE r.id = ? AND r.deleted_at IS NULL`, roomID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("chat room")
	}
	if err != nil {
		return nil, err
	}
	a := &roomAccess{room: room}
	err = q.QueryRow(`SELECT role, status FROM participants WHERE room_id = ? AND member_id = ?`, room.ID, actor.ID).Scan(&a.role, &a.status)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	return a, nil
}

// addAgentStanding reads what a person's agents give them in the room:
// reading it through one, owning it through one. An agent has no agents.
func (a *roomAccess) addAgentStanding(q queryer, actor Actor) error {
	if actor.IsAgent() {
		return nil
	}
	var read, owner int
	err := q.QueryRow(`SELECT count(*), coalesce(max(CASE WHEN p.role = 'owner' THEN 1 ELSE 0 END), 0) FROM participants p JOIN agents a ON a.id = p.agent_id
		WHERE p.room_id = ? AND p.status = 'active' AND a.owner_id = ? AND a.deleted_at IS NULL`, a.room.ID, actor.ID).Scan(&read, &owner)
	if err != nil {
		return err
	}
	a.readByAgent, a.ownerByAgent = read > 0, owner == 1
	return nil
}

// readableRooms is the condition "room r is readable by the actor", for
// listings; its arguments follow. It lists the rooms from the actor's own
// participant rows (and its agents'), by index, rather than asking of every
// room in the database whether the actor is in it: a listing costs the
// actor's rooms, however many rooms the server holds.
func readableRooms(actor Actor, includeAgentRooms bool) (string, []any) {
	own := `SELECT p.room_id FROM participants p WHERE p.member_id = ? AND p.status = 'active'`
	if actor.IsAgent() || !includeAgentRooms {
		return `r.id IN (` + own + `)`, []any{actor.ID}
	}
	return `r.id IN (` + own + ` UNION ALL SELECT p.room_id FROM agents a
		JOIN participants p ON p.member_id = a.id AND p.status = 'active'
		WHERE a.owner_id = ? AND a.deleted_at IS NULL)`, []any{actor.ID, actor.ID}
}
