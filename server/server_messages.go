package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/chatd/chatd/store"
)

// Messages: sending text (both APIs), posting events (agents), and reading
// history (humans: every message, newest first) and work (agents: the text
// messages that mention them, oldest first, by delivery status).

func (s *Server) messageRoutes() {
	s.handle("GET", "/api/v1/agent/chats/:chat_id/messages", agentsOnly, s.listAgentMessages)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages", agentsOnly, withBody(s, s.sendMessage))
	s.handle("POST", "/api/v1/agent/chats/:chat_id/events", agentsOnly, withBody(s, s.postEvent))
	s.handle("GET", "/api/v1/agent/chats/:chat_id/context", agentsOnly, s.listContext)

	s.handle("GET", "/api/v1/me/chats/:chat_id/messages", humansOnly, s.listHistory)
	s.handle("POST", "/api/v1/me/chats/:chat_id/messages", humansOnly, withBody(s, s.sendMessage))
}

// messageView is ChatMessage, in the REST answers and the chat_room
// pushes alike. The fields after UpdatedAt are chatd's own (replies, edits,
// deletions, reactions), which the Band SDKs' models let pass.
type messageView struct {
	ID          string             `json:"id"`
	ChatRoomID  string             `json:"chat_room_id"`
	Content     string             `json:"content"`
	MessageType string             `json:"message_type"`
	SenderID    string             `json:"sender_id"`
	SenderType  store.PartyType    `json:"sender_type"`
	SenderName  string             `json:"sender_name"`
	ThreadID    *string            `json:"thread_id"`
	Metadata    json.RawMessage    `json:"metadata"`
	Attachments []store.Attachment `json:"attachments"`
	InsertedAt  string             `json:"inserted_at"`
	UpdatedAt   string             `json:"updated_at"`
	ReplyToID   *string            `json:"reply_to_id"`
	ReplyTo     *quoteView         `json:"reply_to"`
	EditedAt    *string            `json:"edited_at"`
	DeletedAt   *string            `json:"deleted_at"`
	Reactions   []reactionView     `json:"reactions"`
}

// quoteView is what a reply shows of its parent.
type quoteView struct {
	ID         string          `json:"id"`
	SenderID   string          `json:"sender_id"`
	SenderType store.PartyType `json:"sender_type"`
	SenderName string          `json:"sender_name"`
	Excerpt    string          `json:"excerpt"`
	Deleted    bool            `json:"deleted"`
}

// reactionView is one emoji on a message: how many gave it, and whether
// the reader did.
type reactionView struct {
	Emoji   string `json:"emoji"`
	Count   int    `json:"count"`
	Reacted bool   `json:"reacted"`
}

// reader is who a message is rendered for: an agent (which sees its own
// delivery state at the top of a text message's metadata) or a person.
// The id marks the reactions the reader gave; "" marks none.
type reader struct {
	id    string
	agent bool
}

func agentReader(id string) reader  { return reader{id: id, agent: true} }
func personReader(id string) reader { return reader{id: id} }

// readerOf is the caller of r, as its messages are rendered for it.
func readerOf(r *http.Request) reader {
	a := principal(r).Actor()
	return reader{id: a.ID, agent: a.IsAgent()}
}

// newMessageView renders a message for rd. For a text message, metadata
// holds what its sender attached, then the resolved mentions and
// delivery_status (per agent: status, current_attempt, attempts,
// processed_at); for an agent reading, also that agent's own status,
// current_attempt and attempts at the top level. An event's metadata is
// the object its sender posted. Mentions and attempts are passed through as
// stored, without a round trip through Go values: history reads render
// thousands of them.
func newMessageView(m *store.Message, rd reader) messageView {
	v := messageView{
		ID: m.ID, ChatRoomID: m.RoomID, Content: m.Content, MessageType: m.Type, SenderID: m.SenderID,
		SenderType: m.SenderType, SenderName: m.SenderName, Metadata: m.Metadata, Attachments: m.Attachments,
		InsertedAt: timestamp(m.InsertedAt), UpdatedAt: timestamp(m.UpdatedAt),
		EditedAt: optionalTimestamp(m.EditedAt), DeletedAt: optionalTimestamp(m.DeletedAt),
		Reactions: make([]reactionView, len(m.Reactions)),
	}
	if v.Attachments == nil {
		v.Attachments = []store.Attachment{}
	}
	if m.Type == "text" {
		forAgent := ""
		if rd.agent {
			forAgent = rd.id
		}
		v.Metadata = textMetadata(m, forAgent)
	}
	if q := m.ReplyTo; q != nil {
		v.ReplyToID = &q.ID
		if q.Visible {
			v.ReplyTo = &quoteView{ID: q.ID, SenderID: q.SenderID, SenderType: q.SenderType, SenderName: q.SenderName,
				Excerpt: q.Excerpt, Deleted: q.Deleted}
		}
	}
	for i, r := range m.Reactions {
		v.Reactions[i] = reactionView{Emoji: r.Emoji, Count: len(r.ActorIDs), Reacted: rd.id != "" && slices.Contains(r.ActorIDs, rd.id)}
	}
	return v
}

// textMetadata writes a text message's metadata object. The keys a sender
// attached cannot collide with chatd's (those are refused on input).
func textMetadata(m *store.Message, forAgent string) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	if attached := bytes.TrimSpace(m.Metadata); len(attached) > 2 {
		b.Write(attached[1 : len(attached)-1]) // the fields, without their braces
		b.WriteByte(',')
	}
	b.WriteString(`"mentions":`)
	b.Write(orEmptyArray(m.MentionsJSON))
	b.WriteString(`,"delivery_status":{`)
	var own *store.Delivery
	for i, d := range m.Deliveries {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, d.AgentID)
		b.WriteString(`:{"status":`)
		writeString(&b, d.Status)
		b.WriteString(`,"current_attempt":`)
		b.WriteString(strconv.Itoa(d.CurrentAttempt))
		b.WriteString(`,"attempts":`)
		b.Write(orEmptyArray(d.AttemptsJSON))
		b.WriteString(`,"processed_at":`)
		if d.ProcessedAt != nil {
			writeString(&b, timestamp(*d.ProcessedAt))
		} else {
			b.WriteString("null")
		}
		b.WriteByte('}')
		if d.AgentID == forAgent {
			own = d
		}
	}
	b.WriteByte('}')
	if own != nil {
		b.WriteString(`,"status":`)
		writeString(&b, own.Status)
		b.WriteString(`,"current_attempt":`)
		b.WriteString(strconv.Itoa(own.CurrentAttempt))
		b.WriteString(`,"attempts":`)
		b.Write(orEmptyArray(own.AttemptsJSON))
	}
	b.WriteByte('}')
	return b.Bytes()
}

func orEmptyArray(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("[]")
	}
	return raw
}

// writeString writes s as a JSON string.
func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}

func messageViews(ms []*store.Message, rd reader) []messageView {
	return viewsOf(ms, func(m *store.Message) messageView { return newMessageView(m, rd) })
}

type mentionRequest struct {
	ID     *string         `json:"id"`
	Handle *string         `json:"handle"`
	Name   *string         `json:"name"`
	Kind   json.RawMessage `json:"kind"` // raw, to tell an explicit null from an absent field
	// Username is not in the OpenAPI schema, but the TypeScript SDK passes it
	// through from its model's tool calls; it stands in for a missing handle.
	Username *string `json:"username"`
}

type sendMessageRequest struct {
	Message *struct {
		Content       *string           `json:"content"`
		Mentions      *[]mentionRequest `json:"mentions"`
		AttachmentIDs []string          `json:"attachment_ids"`
		// Not in the OpenAPI schema, but sent by the TypeScript SDK: its A2A
		// gateway attaches metadata, and its events fallback names the type.
		Metadata    json.RawMessage `json:"metadata"`
		MessageType *string         `json:"message_type"`
		// chatd's own: the message this one answers.
		ReplyToID *string `json:"reply_to_id"`
	} `json:"message" chatd:"required"`
}

// sendMessage is POST /agent/chats/{id}/messages and POST
// /me/chats/{id}/messages: a text message with at least one mention.
func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request, req sendMessageRequest) error {
	if mt := req.Message.MessageType; mt != nil && *mt != "text" {
		return store.Problems{"/message/message_type": {"must be text: post other types to /events"}}.Err(store.CodeValidation)
	}
	in := store.TextInput{AttachmentIDs: req.Message.AttachmentIDs, Metadata: req.Message.Metadata, ReplyToID: req.Message.ReplyToID}
	if req.Message.Content != nil {
		in.Content = *req.Message.Content
	}
	if req.Message.Mentions != nil {
		in.Mentions = make([]store.MentionInput, len(*req.Message.Mentions))
		for i, m := range *req.Message.Mentions {
			mi := store.MentionInput{ID: m.ID, Handle: m.Handle, Name: m.Name}
			if mi.Handle == nil {
				mi.Handle = m.Username
			}
			if raw := bytes.TrimSpace(m.Kind); len(raw) > 0 {
				var kind string
				switch {
				case bytes.Equal(raw, []byte("null")):
					mi.KindNull = true
				case json.Unmarshal(raw, &kind) == nil:
					mi.Kind = &kind
				default:
					invalid := "(not a string)"
					mi.Kind = &invalid
				}
			}
			in.Mentions[i] = mi
		}
	}
	msg, err := s.db.SendText(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), in)
	if err != nil {
		return err
	}
	type recipient struct {
		ID     string `json:"id"`
		Handle string `json:"handle"`
		Name   string `json:"name"`
	}
	recipients := []recipient{}
	for _, m := range msg.Mentions {
		if m.Kind == "mention" {
			recipients = append(recipients, recipient{ID: m.ID, Handle: m.Handle, Name: m.Name})
		}
	}
	return reply(w, http.StatusCreated, map[string]any{"id": msg.ID, "success": true, "recipients": recipients})
}

type postEventRequest struct {
	Event *struct {
		Content     *string         `json:"content" chatd:"required"`
		MessageType *string         `json:"message_type" chatd:"required"`
		Metadata    json.RawMessage `json:"metadata"`
	} `json:"event" chatd:"required"`
}

// postEvent is POST /agent/chats/{id}/events: a tool call, result, thought,
// error, task or attention record. No mentions; delivered to no agent.
func (s *Server) postEvent(w http.ResponseWriter, r *http.Request, req postEventRequest) error {
	msg, err := s.db.PostEvent(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), store.EventInput{
		Content: *req.Event.Content, Type: *req.Event.MessageType, Metadata: req.Event.Metadata,
	})
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, map[string]any{"id": msg.ID, "message_type": msg.Type, "success": true})
}

var (
	messageListing = listing{defaultLimit: 20, maxLimit: 100}
	contextListing = listing{defaultLimit: 50, maxLimit: 100}
)

// messagesMeta is the agent message listing's metadata: the paging fields
// and the status filter applied (null when none was given).
type messagesMeta struct {
	pageMeta
	StatusFilter *string `json:"status_filter"`
}

// listAgentMessages is GET /agent/chats/{id}/messages: the text messages
// that mention the agent, by delivery status, oldest first by default.
func (s *Server) listAgentMessages(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := store.Problems{}
	status := enumParam(q, "status", "", store.DeliveryStatuses, p)
	desc := enumParam(q, "sort_order", "asc", []string{"asc", "desc"}, p) == "desc"
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	roomID := r.PathValue("chat_id")
	scope := "agent/messages:" + roomID + ":" + orderName(desc)
	pq, err := s.parsePage(q, scope, messageListing)
	if err != nil {
		return err
	}
	agent := callerAgent(r)
	page, err := s.db.ListDeliveries(r.Context(), store.AgentActor(agent), roomID, status, desc, pq.PageRequest)
	if err != nil {
		return err
	}
	meta := messagesMeta{pageMeta: s.meta(w, pq, scope, page.PageInfo)}
	if _, given := q["status"]; given {
		meta.StatusFilter = &status
	}
	return replyPage(w, messageViews(page.Items, agentReader(agent.ID)), meta)
}

// listContext is GET /agent/chats/{id}/context: what the agent sent and the
// text messages that mention it, oldest first. The metadata is also under
// the deprecated key meta.
func (s *Server) listContext(w http.ResponseWriter, r *http.Request) error {
	roomID := r.PathValue("chat_id")
	scope := "agent/context:" + roomID
	pq, err := s.parsePage(r.URL.Query(), scope, contextListing)
	if err != nil {
		return err
	}
	agent := callerAgent(r)
	page, err := s.db.ListContext(r.Context(), store.AgentActor(agent), roomID, pq.PageRequest)
	if err != nil {
		return err
	}
	meta := s.meta(w, pq, scope, page.PageInfo)
	writeJSON(w, http.StatusOK, map[string]any{"data": messageViews(page.Items, agentReader(agent.ID)), "metadata": meta, "meta": meta})
	return nil
}

// listHistory is GET /me/chats/{id}/messages: every message of a readable
// room, newest first, optionally of one type or after a time.
func (s *Server) listHistory(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := store.Problems{}
	f := store.HistoryFilter{Type: enumParam(q, "message_type", "", store.PersonTypes, p)}
	if v, ok := q["since"]; ok {
		t, err := time.Parse(time.RFC3339Nano, v[0])
		if err != nil {
			p.Add("/since", "must be an RFC 3339 date-time, such as 2026-01-15T10:30:00Z")
		}
		f.Since = &t
		if _, withCursor := q["cursor"]; withCursor {
			p.Add("/since", "cannot be combined with cursor")
		}
	}
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	roomID := r.PathValue("chat_id")
	scope := "me/messages:" + roomID + ":" + f.Type
	pq, err := s.parsePage(q, scope, messageListing)
	if err != nil {
		return err
	}
	page, err := s.db.ListHistory(r.Context(), principal(r).Actor(), roomID, f, pq.PageRequest)
	if err != nil {
		return err
	}
	return replyPage(w, messageViews(page.Items, readerOf(r)), s.meta(w, pq, scope, page.PageInfo))
}
