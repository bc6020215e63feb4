package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// Message is a text message or an event in a room.
type Message struct {
	Seq          int64
	ID           string
	RoomID       string
	SenderID     string
	SenderType   PartyType
	SenderName   string // captured when it was sent
	Type         string // text or one of the event types
	Content      string
	Mentions     []Mention       // resolved, text messages only; set when the message is written
	MentionsJSON json.RawMessage // the resolved mentions as stored (always set)
	Metadata     json.RawMessage // an event's metadata object; "{}" for text
	Deliveries   []*Delivery     // per mentioned agent, as the reader may see them
	InsertedAt   time.Time
	UpdatedAt    time.Time
	Attachments  []Attachment

	// ReplyTo is the message this one answers (replies.go): its id always,
	// the rest only when the reader may see it. Nil for none, and for a
	// reply whose parent is gone for good.
	ReplyTo    *Quote
	replyToSeq int64
	// EditedAt is when the content last changed; DeletedAt makes the
	// message a tombstone, its content and attachments gone (edits.go).
	EditedAt, DeletedAt *time.Time
	// Reactions are its reactions, each emoji with who gave it, in the
	// order they were first given (reactions.go).
	Reactions []Reaction
}

// EventTypes are the message types posted through the events endpoint. The
// last three are internal types the spec names for system use.
var EventTypes = []string{"tool_call", "tool_result", "thought", "error", "task", "attention", "system", "action", "guidelines"}

// MessageTypes are all message types.
var MessageTypes = append([]string{"text"}, EventTypes...)

// InternalTypes are the event types the spec keeps for system use: agents
// post and read them, and they are not exposed to people (the /me surface,
// its pushes, its search). PersonTypes are the rest, what people see.
var (
	InternalTypes = []string{"system", "action", "guidelines"}
	PersonTypes   = slices.DeleteFunc(slices.Clone(MessageTypes), func(t string) bool { return slices.Contains(InternalTypes, t) })
)

// IsInternalType reports whether a message type is kept from people.
func IsInternalType(typ string) bool { return slices.Contains(InternalTypes, typ) }

// notInternal is the condition that keeps internal types out of what a
// person reads, on messages m.
var notInternal = `m.message_type NOT IN ` + literalList(InternalTypes)

// chatContentTypes are the types that move a room's last_message_at: text
// and the public event types (not the internal ones).
var chatContentTypes = map[string]bool{
	"text": true, "tool_call": true, "tool_result": true, "thought": true, "error": true, "task": true, "attention": true,
}

const messageColumns = `m.seq, m.id, m.room_id, m.sender_id, m.sender_type, m.sender_name, m.message_type, m.content,
	m.mentions, m.metadata, m.inserted_at, m.updated_at, m.reply_to_seq, m.edited_at, m.deleted_at`

func scanMessage(row interface{ Scan(...any) error }) (*Message, error) {
	var m Message
	var mentions, metadata string
	var ins, upd int64
	var replyTo, edited, deleted sql.NullInt64
	err := row.Scan(&m.Seq, &m.ID, &m.RoomID, &m.SenderID, &m.SenderType, &m.SenderName, &m.Type, &m.Content,
		&mentions, &metadata, &ins, &upd, &replyTo, &edited, &deleted)
	if err != nil {
		return nil, err
	}
	m.MentionsJSON, m.Metadata = json.RawMessage(mentions), json.RawMessage(metadata)
	m.InsertedAt, m.UpdatedAt = fromMicros(ins), fromMicros(upd)
	m.replyToSeq = replyTo.Int64
	m.EditedAt, m.DeletedAt = optionalMicros(edited), optionalMicros(deleted)
	m.Attachments = []Attachment{}
	m.Reactions = []Reaction{}
	return &m, nil
}

// SendText posts a text message. Every mention-kind entry naming an agent
// gives that agent a delivery to process, and queues the message for each
// of the agent's webhooks, in the same write. A refused message writes
// nothing.
func (db *DB) SendText(ctx context.Context, sender Actor, roomID string, in TextInput) (*Message, error) {
	c := checkText(in)
	if err := c.err(); err != nil {
		return nil, err
	}
	var msg *Message
	err := db.writeInRoom(ctx, sender, roomID, loadPostAccess, func(tx *Tx, a *roomAccess) error {
		candidates, err := mentionCandidates(tx, a.room.ID, in.Mentions)
		if err != nil {
			return err
		}
		mentions := resolveMentions(c, in.Mentions, candidates, sender)
		files, err := resolveAttachments(tx, c, a.room.ID, in.AttachmentIDs)
		if err != nil {
			return err
		}
		parent, err := resolveReplyTo(tx, c, a.room.ID, sender, in.ReplyToID)
		if err != nil {
			return err
		}
		if err := c.err(); err != nil {
			return err
		}
		content := withMentionsPrepended(in.Content, mentions)
		meta, _ := metadataObject(in.Metadata) // checked above
		msg, err = insertMessage(tx, db.limits, a.room, sender, "text", content, mentions, meta, parent)
		if err != nil {
			return err
		}
		if err := insertAttachments(tx, msg, files); err != nil {
			return err
		}
		for _, m := range mentions {
			if m.Kind != "mention" {
				continue
			}
			if p := findParticipant(candidates, m.ID); p != nil && p.Type == PartyAgent {
				d := &Delivery{AgentID: m.ID, Status: "pending", Attempts: []Attempt{}, AttemptsJSON: json.RawMessage("[]"), UpdatedAt: tx.Now()}
				if _, err := tx.Exec(`INSERT INTO deliveries (agent_id, room_id, message_seq, updated_at) VALUES (?, ?, ?, ?)`,
					m.ID, roomID, msg.Seq, tx.Now().UnixMicro()); err != nil {
					return err
				}
				if err := db.enqueueWebhooks(tx, m.ID, msg.Seq); err != nil {
					return err
				}
				msg.Deliveries = append(msg.Deliveries, d)
			}
		}
		if !a.room.TitleLocked && a.room.Title == nil {
			if t := TitleFromMessage(in.Content); t != "" {
				if _, err := tx.Exec(`UPDATE rooms SET title = ?, updated_at = ? WHERE id = ?`, t, tx.Now().UnixMicro(), roomID); err != nil {
					return err
				}
				a.room.Title, a.room.UpdatedAt = &t, tx.Now()
				everyone, err := roomParticipants(tx, roomID, "")
				if err != nil {
					return err
				}
				db.publish(tx, Change{Kind: RoomUpdated, Room: a.room, Members: everyone})
			}
		}
		db.publish(tx, Change{Kind: MessageCreated, Room: a.room, Message: msg})
		return nil
	})
	return msg, err
}

func findParticipant(ps []*Participant, id string) *Participant {
	for _, p := range ps {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// insertMessage stores a message (a reply to parent, when not nil) after
// checking the room's message quota, and moves the room's message count
// and, for chat content, last_message_at. A person's own message also moves
// their read marker to it: what they write is never unread to them, nor is
// what came before it (they answered the room as it stood).
func insertMessage(tx *Tx, limits Limits, room *Room, sender Actor, typ, content string, mentions []Mention, metadata json.RawMessage,
	parent *Message) (*Message, error) {
	if room.MessageCount >= limits.MessagesPerRoom {
		return nil, limitReached("messages", limits.MessagesPerRoom, room.MessageCount)
	}
	if mentions == nil {
		mentions = []Mention{}
	}
	mj, err := json.Marshal(mentions)
	if err != nil {
		return nil, err
	}
	now := tx.Now()
	m := &Message{
		ID: newID(), RoomID: room.ID, SenderID: sender.ID, SenderType: sender.Type, SenderName: sender.Name,
		Type: typ, Content: content, Mentions: mentions, MentionsJSON: mj, Metadata: metadata, InsertedAt: now, UpdatedAt: now,
		Attachments: []Attachment{}, Reactions: []Reaction{},
	}
	var replyTo any
	if parent != nil {
		m.replyToSeq, m.ReplyTo, replyTo = parent.Seq, quoteOf(parent, true), parent.Seq
	}
	err = tx.QueryRow(`INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type, content, mentions, metadata,
		inserted_at, updated_at, reply_to_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
		m.ID, m.RoomID, m.SenderID, m.SenderType, m.SenderName, typ, content, string(mj), string(metadata), now.UnixMicro(), now.UnixMicro(),
		replyTo).Scan(&m.Seq)
	if err != nil {
		return nil, err
	}
	if !sender.IsAgent() {
		if _, err := markReadUpTo(tx, sender.ID, room.ID, m.Seq); err != nil {
			return nil, err
		}
	}
	room.MessageCount++
	if chatContentTypes[typ] {
		room.LastMessageAt = &now
		_, err = tx.Exec(`UPDATE rooms SET message_count = message_count + 1, last_message_at = ? WHERE id = ?`, now.UnixMicro(), room.ID)
	} else {
		_, err = tx.Exec(`UPDATE rooms SET message_count = message_count + 1 WHERE id = ?`, room.ID)
	}
	return m, err
}

// PostEvent records an event (a tool call, a thought, ...) in a room. Events
// need no mentions and are delivered to no agent.
func (db *DB) PostEvent(ctx context.Context, sender Actor, roomID string, in EventInput) (*Message, error) {
	meta, taskID, err := checkEvent(in)
	if err != nil {
		return nil, err
	}
	var msg *Message
	err = db.writeInRoom(ctx, sender, roomID, loadPostAccess, func(tx *Tx, a *roomAccess) error {
		if taskID != "" {
			ok, err := isTaskOfRoom(tx, roomID, taskID)
			if err != nil {
				return err
			}
			if !ok {
				return Problems{"/event/metadata/task_id": {"is not a task of this room"}}.Err(CodeValidation)
			}
		}
		var err error
		if msg, err = insertMessage(tx, db.limits, a.room, sender, in.Type, in.Content, nil, meta, nil); err != nil {
			return err
		}
		db.publish(tx, Change{Kind: MessageCreated, Room: a.room, Message: msg})
		return nil
	})
	return msg, err
}

// attachDeliveries loads the deliveries of msgs, all of them or (agentID
// set) only that agent's.
func attachDeliveries(q queryer, msgs []*Message, agentID string) error {
	if len(msgs) == 0 {
		return nil
	}
	bySeq, seqs := byKey(msgs, func(m *Message) int64 { return m.Seq })
	query := `SELECT message_seq, ` + deliveryColumns + ` FROM deliveries WHERE message_seq IN ` + inList(len(seqs))
	args := seqs
	if agentID != "" {
		query += ` AND agent_id = ?`
		args = append(args, agentID)
	}
	rows, err := q.Query(query+` ORDER BY message_seq, agent_id`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		d, err := scanDelivery(rows, &seq)
		if err != nil {
			return err
		}
		bySeq[seq].Deliveries = append(bySeq[seq].Deliveries, d)
	}
	return rows.Err()
}

// attachMessageDetails loads what msgs carry besides their own row: their
// attachments, deliveries (all of them, or, with agentID set, that agent's
// own), the quotes of the messages they reply to (as agentID, or a person,
// may see them) and their reactions.
func attachMessageDetails(q queryer, msgs []*Message, agentID string) error {
	for _, m := range msgs {
		m.Attachments, m.Deliveries, m.ReplyTo, m.Reactions = []Attachment{}, nil, nil, []Reaction{}
	}
	if err := attachFiles(q, msgs); err != nil {
		return err
	}
	if err := attachDeliveries(q, msgs, agentID); err != nil {
		return err
	}
	if err := attachReplies(q, msgs, agentID); err != nil {
		return err
	}
	return attachReactions(q, msgs)
}

// messageFor loads the message at seq with what attachMessageDetails adds,
// as agentID (or, "", a person) sees it.
func messageFor(q queryer, seq int64, agentID string) (*Message, error) {
	m, err := messageBySeq(q, seq)
	if err != nil {
		return nil, err
	}
	return m, attachMessageDetails(q, []*Message{m}, agentID)
}

// readerID is how attachMessageDetails names a reader: an agent by its id,
// a person by "".
func readerID(a Actor) string {
	if a.IsAgent() {
		return a.ID
	}
	return ""
}

// MessageKeyset is the paging position just after m.
func MessageKeyset(m *Message) *Keyset { return &Keyset{Int: m.Seq, ID: m.ID} }

// readMessages runs a message listing in one read transaction (the access
// check, the page, its attachments and its deliveries see one snapshot) and
// attaches deliveries (all, or only agentID's). A listing across rooms
// (roomID "") has no room to check: its conditions keep it to what the
// actor may read.
func (db *DB) readMessages(ctx context.Context, actor Actor, roomID, agentID string, base string, conds []string, args []any,
	sort sortSpec, pr PageRequest) (*Page[*Message], error) {
	var page *Page[*Message]
	err := db.readTx(ctx, func(q readQ) error {
		if roomID != "" {
			if _, err := loadAccess(q, actor, roomID); err != nil {
				return err
			}
		}
		var err error
		if page, err = listPageIn(q, base, conds, args, sort, pr, scanMessage); err != nil {
			return err
		}
		return attachMessageDetails(q, page.Items, agentID)
	})
	if err != nil {
		return nil, err
	}
	if n := len(page.Items); n > 0 {
		page.Next = MessageKeyset(page.Items[n-1])
	}
	return page, nil
}

// HistoryFilter narrows ListHistory.
type HistoryFilter struct {
	Type  string     // one message type, or "" for all
	Since *time.Time // only messages sent after this
}

// ListHistory lists every message of a room the actor may read, newest
// first, with every agent's delivery state; a person reads no internal
// types.
func (db *DB) ListHistory(ctx context.Context, actor Actor, roomID string, f HistoryFilter, pr PageRequest) (*Page[*Message], error) {
	conds, args := []string{"m.room_id = ?"}, []any{roomID}
	if !actor.IsAgent() {
		conds = append(conds, notInternal)
	}
	if f.Type != "" {
		conds = append(conds, "m.message_type = ?")
		args = append(args, f.Type)
	}
	if f.Since != nil {
		conds = append(conds, "m.inserted_at > ?")
		args = append(args, f.Since.UnixMicro())
	}
	return db.readMessages(ctx, actor, roomID, "", `SELECT `+messageColumns+` FROM messages m`, conds, args,
		sortSpec{column: "m.seq", idCol: "m.id", descend: true}, pr)
}

// DeliveryStatuses are the values of the agent message listing's status
// filter ("" is everything not processed).
var DeliveryStatuses = []string{"pending", "processing", "processed", "failed", "all"}

// ListDeliveries lists the text messages that mention an agent in a room,
// oldest first unless descending, with the agent's own delivery state.
// status: "" (everything not processed), pending (not started, delivered,
// or failed and not being retried), processing, processed, failed, all.
func (db *DB) ListDeliveries(ctx context.Context, agent Actor, roomID, status string, descending bool, pr PageRequest) (*Page[*Message], error) {
	conds := []string{"m.seq IN (SELECT d.message_seq FROM " + db.deliveriesFor(status) + " WHERE d.agent_id = ? AND d.room_id = ?" + statusCond(status) + ")"}
	args := []any{agent.ID, roomID}
	return db.readMessages(ctx, agent, roomID, agent.ID, `SELECT `+messageColumns+` FROM messages m`, conds, args,
		sortSpec{column: "m.seq", idCol: "m.id", descend: descending}, pr)
}

// statusCond is the listing's status filter on deliveries d; the filters
// of what is not processed say so as isOpen too, so that deliveriesFor can
// read them through the open deliveries' index.
func statusCond(status string) string {
	switch status {
	case "":
		return " AND " + isOpen
	case "pending":
		return " AND " + isOpen + " AND d.status IN ('pending', 'delivered', 'failed')"
	case "processing", "failed":
		return " AND " + isOpen + " AND d.status = '" + status + "'"
	case "processed":
		return " AND d.status = 'processed'"
	}
	return ""
}

// deliveriesFor is the table a status filter reads its deliveries from.
func (db *DB) deliveriesFor(status string) string {
	if status == "processed" || status == "all" {
		return "deliveries d"
	}
	return db.openDeliveries()
}

// ListContext lists what an agent needs to resume work in a room, oldest
// first: every message it sent (any type) and every text message that
// mentions it.
func (db *DB) ListContext(ctx context.Context, agent Actor, roomID string, pr PageRequest) (*Page[*Message], error) {
	conds := []string{`m.seq IN (SELECT seq FROM messages WHERE room_id = ? AND sender_id = ?
		UNION ALL SELECT message_seq FROM deliveries WHERE agent_id = ? AND room_id = ?)`}
	args := []any{roomID, agent.ID, agent.ID, roomID}
	return db.readMessages(ctx, agent, roomID, agent.ID, `SELECT `+messageColumns+` FROM messages m`, conds, args,
		sortSpec{column: "m.seq", idCol: "m.id"}, pr)
}

// messageBySeq loads one message, without what attachMessageDetails adds.
func messageBySeq(q queryer, seq int64) (*Message, error) {
	m, err := scanMessage(q.QueryRow(`SELECT `+messageColumns+` FROM messages m WHERE m.seq = ?`, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("message")
	}
	return m, err
}

// Message returns one message of a room the actor may read, with every
// agent's delivery state of it.
func (db *DB) Message(ctx context.Context, actor Actor, roomID, messageID string) (*Message, error) {
	if !ValidID(messageID) {
		return nil, notFound("message")
	}
	var msg *Message
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, actor, roomID); err != nil {
			return err
		}
		m, err := scanMessage(q.QueryRow(`SELECT `+messageColumns+` FROM messages m WHERE m.id = ? AND m.room_id = ?`, messageID, roomID))
		if errors.Is(err, sql.ErrNoRows) || err == nil && !actor.IsAgent() && IsInternalType(m.Type) {
			return notFound("message")
		}
		if err != nil {
			return err
		}
		msg = m
		return attachMessageDetails(q, []*Message{m}, "")
	})
	return msg, err
}
