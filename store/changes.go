package store

import (
	"sync/atomic"
	"time"
)

// ChangeKind names something that happened to a room, as the realtime
// channels announce it.
type ChangeKind string

const (
	RoomAdded          ChangeKind = "room_added"          // Member joined Room (its creator too)
	RoomRemoved        ChangeKind = "room_removed"        // Member left Room, was removed, or Room was deleted
	RoomUpdated        ChangeKind = "room_updated"        // Room's title changed; Members are in it
	RoomDeleted        ChangeKind = "room_deleted"        // Room was soft-deleted; Members were in it
	RoomRead           ChangeKind = "room_read"           // Member (a person) read Room further; Room.Unread is what is left
	ParticipantAdded   ChangeKind = "participant_added"   // Member joined Room
	ParticipantRemoved ChangeKind = "participant_removed" // Member left Room or was removed
	MessageCreated     ChangeKind = "message_created"     // Message was posted in Room
	MessageUpdated     ChangeKind = "message_updated"     // an agent's delivery state of Message changed
	MessageChanged     ChangeKind = "message_changed"     // Message was edited or deleted; it carries every detail
	ReactionsChanged   ChangeKind = "reactions_changed"   // a reaction to Message was added or taken back
	BoardUpdated       ChangeKind = "board_updated"       // Room's goal was set or edited
	AgentDeleted       ChangeKind = "agent_deleted"       // Agent was deleted: its keys no longer work
	// CredentialsEnded: API keys were deleted or replaced, or sessions
	// ended (signed out, or the person's password set); connections opened
	// with them must close. Agent is set when an agent's keys were rotated.
	CredentialsEnded  ChangeKind = "credentials_ended"
	OtherProcessWrote ChangeKind = "other_process_wrote" // another process (a chatd command) committed; credentials may have ended

	ContactRequestReceived ChangeKind = "contact_request_received" // ContactRequest was made
	ContactRequestUpdated  ChangeKind = "contact_request_updated"  // ContactRequest was approved, rejected or cancelled
	ContactAdded           ChangeKind = "contact_added"            // Contact was made (one change per direction)
	ContactRemoved         ChangeKind = "contact_removed"          // Contact ended (one change per direction)

	TaskCreated ChangeKind = "task_created" // Task was created on Room's board
	TaskUpdated ChangeKind = "task_updated" // Task was edited, worked on, commented or changed state

	// NodePresence: another node told what its sockets are (Presence);
	// only ever relayed (ShareWithOtherNodes), never a write of this one.
	NodePresence ChangeKind = "node_presence"
)

// Change is one committed change, published after its transaction
// committed (never for a write that was rolled back).
type Change struct {
	Kind    ChangeKind
	At      time.Time
	Room    *Room
	Member  *Participant   // the participant concerned (room_added/removed, participant_*)
	Members []*Participant // everyone in the room (room_deleted, room_updated)
	Message *Message       // message_created, message_updated (Deliveries: the changed one), message_changed, reactions_changed
	// Seers are the agents that could see Message before the change (its
	// sender, if an agent, and those it mentions): message_changed,
	// reactions_changed.
	Seers []string
	Board *Board
	Agent *Agent // agent_deleted, credentials_ended by a key rotation

	// Relayed: another process made the change (a node beside this one on
	// PostgreSQL, cluster.go); this one only passes it on to its clients.
	// Origin names that process.
	Relayed bool   `json:"-"`
	Origin  string `json:"-"`

	Presence *PresenceNote // node_presence

	ContactRequest *ContactRequest // contact_request_*
	Contact        *Contact        // contact_added, contact_removed (Party: whom the owner gained or lost)
	Task           *Task           // task_created, task_updated
}

// Publisher receives committed changes. It runs on the writer goroutine, so
// it must not block.
type Publisher func(Change)

type publisherSlot struct{ p atomic.Pointer[Publisher] }

// SetPublisher installs the receiver of committed changes (nil for none).
func (db *DB) SetPublisher(p Publisher) {
	if p == nil {
		db.publisher.p.Store(nil)
		return
	}
	db.publisher.p.Store(&p)
}

// otherProcessWrote runs on the writer goroutine when another process
// committed to the database. What it changed is unknown: every cached
// principal is dropped, so that a key it revoked stops working here too,
// and OtherProcessWrote is published, so that connections opened with such
// a key can be found and closed.
func (db *DB) otherProcessWrote() {
	db.creds.invalidate()
	if p := db.publisher.p.Load(); p != nil {
		(*p)(Change{Kind: OtherProcessWrote, At: now()})
	}
}

// publish arranges for c to be published if and when tx commits.
func (db *DB) publish(tx *Tx, c Change) {
	c.At = tx.Now()
	if tx.w.dialect.shareChanges {
		tx.shared.Changes = append(tx.shared.Changes, c)
	}
	tx.AfterCommit(func() {
		if p := db.publisher.p.Load(); p != nil {
			(*p)(c)
		}
	})
}
