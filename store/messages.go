package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Message is a text message or an event in a room.
type Message struct {
	Seq          int64
	ID           string
	RoomID       string
	SenderID     string
	SenderType   string // "User" or "Agent"
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
}

// Mention is a resolved mention of a participant.
type Mention struct {
	ID     string `json:"id"`
	Handle string `json:"handle"`
	Name   string `json:"name"`
	Kind   string `json:"kind"` // "mention" (delivered) or "reference" (narrative only)
}

// EventTypes are the message types posted through the events endpoint. The
// last three are internal types the spec names for system use.
var EventTypes = []string{"tool_call", "tool_result", "thought", "error", "task", "attention", "system", "action", "guidelines"}

// MessageTypes are all message types.
var MessageTypes = append([]string{"text"}, EventTypes...)

// chatContentTypes are the types that move a room's last_message_at: text
// and the public event types (not the internal ones).
var chatContentTypes = map[string]bool{
	"text": true, "tool_call": true, "tool_result": true, "thought": true, "error": true, "task": true, "attention": true,
}

// Limits on message content.
const (
	MaxTextLen          = 32768 // characters of a text message
	MaxEventContentLen  = 16384 // characters of an event's content
	MaxEventMetadataLen = 65536 // bytes of an event's metadata, serialized
	maxMentions         = 50
	maxAttachments      = 20
)

const messageColumns = `m.seq, m.id, m.room_id, m.sender_id, m.sender_type, m.sender_name, m.message_type, m.content,
	m.mentions, m.metadata, m.inserted_at, m.updated_at`

func scanMessage(row interface{ Scan(...any) error }) (*Message, error) {
	var m Message
	var mentions, metadata string
	var ins, upd int64
	err := row.Scan(&m.Seq, &m.ID, &m.RoomID, &m.SenderID, &m.SenderType, &m.SenderName, &m.Type, &m.Content,
		&mentions, &metadata, &ins, &upd)
	if err != nil {
		return nil, err
	}
	m.MentionsJSON, m.Metadata = json.RawMessage(mentions), json.RawMessage(metadata)
	m.InsertedAt, m.UpdatedAt = fromMicros(ins), fromMicros(upd)
	m.Attachments = []Attachment{}
	return &m, nil
}

// MentionInput is one entry of a message's mentions as the client sent it.
type MentionInput struct {
	ID, Handle, Name *string
	Kind             *string
	KindNull         bool // "kind": null was sent (refused)
}

// TextInput is a text message as the client sent it.
type TextInput struct {
	Content       string
	Mentions      []MentionInput // nil: the field was missing
	AttachmentIDs []string
	// Metadata is an optional object the client attaches (null or absent for
	// none); it is kept beside the mentions and delivery states chatd adds.
	Metadata json.RawMessage
}

// codedProblems collects validation problems; the error's code is the code
// of the first problem found (checks run in a fixed order: the body's own
// checks, then those against the room), its message leads with that problem,
// and its details hold every problem of the stage that found one.
type codedProblems struct {
	code Code
	lead string // the pointer of the problem the code names
	p    Problems
}

func (c *codedProblems) add(code Code, pointer, msg string) {
	if c.p == nil {
		c.p = Problems{}
	}
	if c.code == "" {
		c.code, c.lead = code, pointer
	}
	c.p[pointer] = append(c.p[pointer], msg)
}

func (c *codedProblems) err() error {
	if c.code == "" {
		return nil
	}
	return c.p.ErrAt(c.code, c.lead)
}

// checkText checks what can be checked of a text message without the
// database, in the order the codes take precedence.
func checkText(in TextInput) *codedProblems {
	c := &codedProblems{}
	switch {
	case !utf8.ValidString(in.Content):
		c.add(CodeValidation, "/message/content", "must be valid UTF-8")
	case IsBlank(in.Content):
		c.add(CodeValidation, "/message/content", "can't be blank or only invisible characters")
	case utf8.RuneCountInString(in.Content) > MaxTextLen:
		c.add(CodeValidation, "/message/content", "must be at most 32768 characters long")
	}
	switch {
	case in.Mentions == nil:
		c.add(CodeMentionsRequired, "/message/mentions", "is required: mention at least one participant")
	case len(in.Mentions) == 0:
		c.add(CodeMentionsRequired, "/message/mentions", "can't be empty: mention at least one participant")
	case len(in.Mentions) > maxMentions:
		c.add(CodeValidation, "/message/mentions", "must have at most 50 entries")
	}
	hasMention, badKind := false, false
	for i, m := range in.Mentions {
		switch {
		case m.KindNull:
			badKind = true
			c.add(CodeInvalidMentionKind, Pointer("message", "mentions", i, "kind"), "must be mention or reference (omit it rather than send null)")
		case m.Kind != nil && *m.Kind != "mention" && *m.Kind != "reference":
			badKind = true
			c.add(CodeInvalidMentionKind, Pointer("message", "mentions", i, "kind"), "must be mention or reference")
		case m.Kind == nil || *m.Kind == "mention":
			hasMention = true
		}
		if (m.ID == nil || *m.ID == "") && (m.Handle == nil || strings.TrimPrefix(strings.TrimSpace(*m.Handle), "@") == "") {
			c.add(CodeMentionMissingIdentifier, Pointer("message", "mentions", i), "needs an id or a handle")
		}
	}
	// Only references (no entry that mentions) is mentions_required; when a
	// kind is invalid, that is the more useful thing to say.
	if len(in.Mentions) > 0 && !hasMention && !badKind {
		c.add(CodeMentionsRequired, "/message/mentions", "must hold at least one entry of kind mention")
	}
	if len(in.AttachmentIDs) > maxAttachments {
		c.add(CodeValidation, "/message/attachment_ids", "must have at most 20 entries")
	}
	if meta, msg := metadataObject(in.Metadata); msg != "" {
		c.add(CodeValidation, "/message/metadata", msg)
	} else {
		var obj map[string]json.RawMessage
		_ = json.Unmarshal(meta, &obj)
		for _, k := range reservedMetadataKeys {
			if _, ok := obj[k]; ok {
				c.add(CodeValidation, Pointer("message", "metadata", k), "is reserved: chatd sets it")
			}
		}
	}
	return c
}

// reservedMetadataKeys are the keys of a text message's metadata that chatd
// fills in itself (mentions and delivery state); a sender cannot set them.
var reservedMetadataKeys = []string{"mentions", "delivery_status", "status", "attempts", "current_attempt"}

// metadataObject checks optional client metadata: an object of at most
// MaxEventMetadataLen bytes serialized (null or absent read as {}). It
// returns the object compacted, or what is wrong with it.
func metadataObject(raw json.RawMessage) (json.RawMessage, string) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return json.RawMessage("{}"), ""
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil || obj == nil {
		return nil, "must be an object"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil || buf.Len() > MaxEventMetadataLen {
		return nil, "must be at most 65536 bytes when serialized"
	}
	return json.RawMessage(buf.Bytes()), ""
}

// resolveMentions resolves mentions against the room's participants (by id,
// which wins, or by handle within the room) and appends their problems.
func resolveMentions(c *codedProblems, in []MentionInput, members []*Participant, sender Actor) []Mention {
	byID := map[string]*Participant{}
	byHandle := map[string]*Participant{}
	for _, p := range members {
		byID[p.ID] = p
		if p.Status == "active" { // a blocked participant cannot be addressed
			byHandle[strings.ToLower(p.Handle)] = p
		}
	}
	out := make([]Mention, 0, len(in))
	seen := map[string]int{}
	for i, m := range in {
		var p *Participant
		switch {
		case m.ID != nil && *m.ID != "":
			if p = byID[*m.ID]; p == nil || p.Status != "active" {
				c.add(CodeMentionNotInRoom, Pointer("message", "mentions", i, "id"), unmentionable(*m.ID, p))
				continue
			}
		case m.Handle != nil:
			h := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(*m.Handle), "@"))
			if h == "" {
				continue // reported as mention_missing_identifier
			}
			if p = byHandle[h]; p == nil {
				c.add(CodeHandleNotFound, Pointer("message", "mentions", i, "handle"), "does not name a participant of this room")
				continue
			}
		default:
			continue
		}
		if p.ID == sender.ID {
			c.add(CodeCannotMentionSelf, Pointer("message", "mentions", i), "mentions the sender")
			continue
		}
		if first, dup := seen[p.ID]; dup {
			c.add(CodeDuplicateMentions, Pointer("message", "mentions", i), "mentions the same participant as entry "+strconv.Itoa(first))
			continue
		}
		seen[p.ID] = i
		kind := "mention"
		if m.Kind != nil {
			kind = *m.Kind
		}
		out = append(out, Mention{ID: p.ID, Handle: p.Handle, Name: p.Name, Kind: kind})
	}
	return out
}

// unmentionable says why id, which names p (nil if no one in the room),
// cannot be mentioned: not a UUID, no participant's, or a blocked one's.
// The code is mentioned_participant_not_in_room for all three, as the API
// documents for an entry that names no one in the room.
func unmentionable(id string, p *Participant) string {
	switch {
	case p != nil:
		return "is the id of a participant blocked in this room, who cannot be mentioned"
	case !ValidID(id):
		if len(id) > 40 {
			id = strings.ToValidUTF8(id[:40], "") + "…"
		}
		return fmt.Sprintf("is not a UUID (8-4-4-4-12 hexadecimal digits), so it names no participant: %q", id)
	}
	return "is not the id of a participant of this room: " + id
}

// withMentionsPrepended returns content with "@handle " prepended for each
// mention-kind entry the content does not @-reference already.
func withMentionsPrepended(content string, mentions []Mention) string {
	var prefix strings.Builder
	for _, m := range mentions {
		if m.Kind == "mention" && !MentionsHandle(content, m.Handle) {
			prefix.WriteString("@" + m.Handle + " ")
		}
	}
	return prefix.String() + content
}

// SendText posts a text message. Every mention-kind entry naming an agent
// gives that agent a delivery to process. A refused message writes nothing.
func (db *DB) SendText(ctx context.Context, sender Actor, roomID string, in TextInput) (*Message, error) {
	c := checkText(in)
	if err := c.err(); err != nil {
		return nil, err
	}
	var msg *Message
	err := db.Write(ctx, func(tx *Tx) error {
		a, err := loadPostAccess(tx, sender, roomID)
		if err != nil {
			return err
		}
		members, err := roomParticipants(tx, a.room.ID, "")
		if err != nil {
			return err
		}
		mentions := resolveMentions(c, in.Mentions, members, sender)
		files, err := resolveAttachments(tx, c, a.room.ID, in.AttachmentIDs)
		if err != nil {
			return err
		}
		if err := c.err(); err != nil {
			return err
		}
		content := withMentionsPrepended(in.Content, mentions)
		meta, _ := metadataObject(in.Metadata) // checked above
		msg, err = insertMessage(tx, db.limits, a.room, sender, "text", content, mentions, meta)
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
			if p := findParticipant(members, m.ID); p != nil && p.Type == "Agent" {
				d := &Delivery{AgentID: m.ID, Status: "pending", Attempts: []Attempt{}, AttemptsJSON: json.RawMessage("[]"), UpdatedAt: tx.Now()}
				if _, err := tx.Exec(`INSERT INTO deliveries (agent_id, room_id, message_seq, updated_at) VALUES (?, ?, ?, ?)`,
					m.ID, roomID, msg.Seq, tx.Now().UnixMicro()); err != nil {
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
				db.publish(tx, Change{Kind: RoomUpdated, Room: a.room, Members: members})
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

// insertMessage stores a message after checking the room's message quota,
// and moves the room's message count and, for chat content, last_message_at.
// A person's own message also moves their read marker to it: what they
// write is never unread to them, nor is what came before it (they answered
// the room as it stood).
func insertMessage(tx *Tx, limits Limits, room *Room, sender Actor, typ, content string, mentions []Mention, metadata json.RawMessage) (*Message, error) {
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
		Attachments: []Attachment{},
	}
	err = tx.QueryRow(`INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type, content, mentions, metadata, inserted_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
		m.ID, m.RoomID, m.SenderID, m.SenderType, m.SenderName, typ, content, string(mj), string(metadata), now.UnixMicro(), now.UnixMicro()).Scan(&m.Seq)
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

// EventInput is an event as the client sent it.
type EventInput struct {
	Content  string
	Type     string
	Metadata json.RawMessage // an object, null, or absent
}

var attentionKinds = map[string]bool{"question": true, "assumption": true, "failure": true, "review": true}

// checkEvent validates an event and returns its metadata, compacted, and
// the task id an attention event names ("" for none), which only the write
// transaction can check against the room's board.
func checkEvent(in EventInput) (json.RawMessage, string, error) {
	p := Problems{}
	checkOneOf(p, "/event/message_type", in.Type, EventTypes)
	if !utf8.ValidString(in.Content) {
		p.Add("/event/content", "must be valid UTF-8")
	} else if utf8.RuneCountInString(in.Content) > MaxEventContentLen {
		p.Add("/event/content", "must be at most 16384 characters long")
	}
	meta, msg := metadataObject(in.Metadata)
	if msg != "" {
		p.Add("/event/metadata", "%s", msg)
	}
	var taskID string
	if in.Type == "attention" {
		var obj map[string]json.RawMessage
		_ = json.Unmarshal(meta, &obj)
		taskID = checkAttention(obj, p)
		if lower, _ := json.Marshal(taskID); taskID != "" && !bytes.Equal(obj["task_id"], lower) {
			// The task id is kept as chatd spells ids, whatever the case sent.
			obj["task_id"] = lower
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(obj)
			meta = bytes.TrimSpace(buf.Bytes())
		}
	}
	return meta, taskID, p.Err(CodeValidation)
}

// checkAttention checks an attention event's metadata and returns the task
// id it names, if any.
func checkAttention(meta map[string]json.RawMessage, p Problems) (taskID string) {
	var kind string
	if raw, ok := meta["kind"]; !ok || json.Unmarshal(raw, &kind) != nil || !attentionKinds[kind] {
		p.Add("/event/metadata/kind", "is required for attention events: question, assumption, failure or review")
	}
	if raw, ok := meta["blocking"]; ok {
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			p.Add("/event/metadata/blocking", "must be a boolean")
		}
	}
	if raw, ok := meta["task_id"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &taskID) != nil || !ValidID(NormalizeID(taskID)) {
			p.Add("/event/metadata/task_id", "is not a task of this room")
			taskID = ""
		}
	}
	return NormalizeID(taskID)
}

// PostEvent records an event (a tool call, a thought, ...) in a room. Events
// need no mentions and are delivered to no agent.
func (db *DB) PostEvent(ctx context.Context, sender Actor, roomID string, in EventInput) (*Message, error) {
	meta, taskID, err := checkEvent(in)
	if err != nil {
		return nil, err
	}
	var msg *Message
	err = db.Write(ctx, func(tx *Tx) error {
		a, err := loadPostAccess(tx, sender, roomID)
		if err != nil {
			return err
		}
		if taskID != "" {
			ok, err := isTaskOfRoom(tx, roomID, taskID)
			if err != nil {
				return err
			}
			if !ok {
				return Problems{"/event/metadata/task_id": {"is not a task of this room"}}.Err(CodeValidation)
			}
		}
		if msg, err = insertMessage(tx, db.limits, a.room, sender, in.Type, in.Content, nil, meta); err != nil {
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

// MessageKeyset is the paging position just after m.
func MessageKeyset(m *Message) *Keyset { return &Keyset{Int: m.Seq, ID: m.ID} }

// readMessages runs a message listing in one read transaction (the access
// check, the page, its attachments and its deliveries see one snapshot) and
// attaches deliveries (all, or only agentID's).
func (db *DB) readMessages(ctx context.Context, actor Actor, roomID, agentID string, base string, conds []string, args []any,
	sort sortSpec, pr PageRequest) (*Page[*Message], error) {
	var page *Page[*Message]
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, actor, roomID); err != nil {
			return err
		}
		var err error
		if page, err = listPageIn(q, base, conds, args, sort, pr, scanMessage); err != nil {
			return err
		}
		if err := attachFiles(q, page.Items); err != nil {
			return err
		}
		return attachDeliveries(q, page.Items, agentID)
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

// ListHistory lists every message of a room the actor (a human) may read,
// newest first, with every agent's delivery state.
func (db *DB) ListHistory(ctx context.Context, actor Actor, roomID string, f HistoryFilter, pr PageRequest) (*Page[*Message], error) {
	conds, args := []string{"m.room_id = ?"}, []any{roomID}
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
	conds := []string{"m.seq IN (SELECT d.message_seq FROM deliveries d WHERE d.agent_id = ? AND d.room_id = ?" + statusCond(status) + ")"}
	args := []any{agent.ID, roomID}
	return db.readMessages(ctx, agent, roomID, agent.ID, `SELECT `+messageColumns+` FROM messages m`, conds, args,
		sortSpec{column: "m.seq", idCol: "m.id", descend: descending}, pr)
}

func statusCond(status string) string {
	switch status {
	case "":
		return " AND d.status != 'processed'"
	case "pending":
		return " AND d.status IN ('pending', 'delivered', 'failed')"
	case "processing", "processed", "failed":
		return " AND d.status = '" + status + "'"
	}
	return ""
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

// messageBySeq loads one message with its attachments.
func messageBySeq(q queryer, seq int64) (*Message, error) {
	m, err := scanMessage(q.QueryRow(`SELECT `+messageColumns+` FROM messages m WHERE m.seq = ?`, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("message")
	}
	if err != nil {
		return nil, err
	}
	return m, attachFiles(q, []*Message{m})
}
