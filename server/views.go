package server

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/chatd/chatd/store"
)

// The JSON shapes of rooms, participants, peers and messages, shared by the
// REST handlers and the realtime pushes (which carry the same shapes).

// chatRoomView is the agent API's ChatRoom.
type chatRoomView struct {
	ID          string  `json:"id"`
	Title       *string `json:"title"`
	TitleLocked bool    `json:"title_locked"`
	TaskID      *string `json:"task_id"`
	InsertedAt  string  `json:"inserted_at"`
	UpdatedAt   string  `json:"updated_at"`
}

func newChatRoomView(r *store.Room) chatRoomView {
	return chatRoomView{ID: r.ID, Title: r.Title, TitleLocked: r.TitleLocked, TaskID: r.TaskID,
		InsertedAt: timestamp(r.InsertedAt), UpdatedAt: timestamp(r.UpdatedAt)}
}

// meChatRoomView is the human API's MeChatRoom, with chatd's own
// unread_count (capped at store.UnreadCap; see store/reads.go).
type meChatRoomView struct {
	chatRoomView
	Type          string  `json:"type"`
	Status        string  `json:"status"`
	LastMessageAt *string `json:"last_message_at"`
	UnreadCount   int     `json:"unread_count"`
}

func newMeChatRoomView(r *store.Room) meChatRoomView {
	return meChatRoomView{chatRoomView: newChatRoomView(r), Type: r.Type, Status: r.Status, LastMessageAt: optionalTimestamp(r.LastMessageAt),
		UnreadCount: r.Unread}
}

// participantView is ChatParticipant, with the details of
// ChatParticipantDetails (description, is_external) and, for agents, whether
// the agent reports that it is working in the room.
type participantView struct {
	ID          string  `json:"id"`
	Type        string  `json:"type"`
	Name        string  `json:"name"`
	Handle      string  `json:"handle"`
	Role        string  `json:"role"`
	Status      string  `json:"status"`
	Description *string `json:"description"`
	IsExternal  *bool   `json:"is_external"`
	Working     *bool   `json:"working,omitempty"`
}

func (s *Server) newParticipantView(p *store.Participant) participantView {
	v := participantView{ID: p.ID, Type: p.Type, Name: p.Name, Handle: p.Handle, Role: p.Role, Status: p.Status,
		Description: p.Description, IsExternal: p.IsExternal}
	if p.Type == "Agent" {
		w := s.activity.working(p.RoomID, p.ID)
		v.Working = &w
	}
	return v
}

// peerView is Peer.
type peerView struct {
	ID                string   `json:"id"`
	Type              string   `json:"type"`
	Name              string   `json:"name"`
	Handle            string   `json:"handle"`
	Description       *string  `json:"description"`
	IsContact         bool     `json:"is_contact"`
	IsExternal        *bool    `json:"is_external"`
	ListedInDirectory bool     `json:"listed_in_directory"`
	Source            string   `json:"source"`
	Tags              []string `json:"tags"`
}

func newPeerView(p *store.Peer) peerView {
	return peerView{ID: p.ID, Type: p.Type, Name: p.Name, Handle: p.Handle, Description: p.Description,
		IsContact: p.IsContact, IsExternal: p.IsExternal, ListedInDirectory: p.ListedInDirectory, Source: p.Source, Tags: p.Tags}
}

// messageView is ChatMessage.
type messageView struct {
	ID          string             `json:"id"`
	ChatRoomID  string             `json:"chat_room_id"`
	Content     string             `json:"content"`
	MessageType string             `json:"message_type"`
	SenderID    string             `json:"sender_id"`
	SenderType  string             `json:"sender_type"`
	SenderName  string             `json:"sender_name"`
	ThreadID    *string            `json:"thread_id"`
	Metadata    json.RawMessage    `json:"metadata"`
	Attachments []store.Attachment `json:"attachments"`
	InsertedAt  string             `json:"inserted_at"`
	UpdatedAt   string             `json:"updated_at"`
}

// newMessageView renders a message. For a text message, metadata holds what
// its sender attached, then the resolved mentions and delivery_status (per
// agent: status, current_attempt, attempts, processed_at); with forAgent set
// (an agent reading), also that agent's own status, current_attempt and
// attempts at the top level. An event's metadata is the object its sender
// posted. Mentions and attempts are passed through as stored, without a
// round trip through Go values: history reads render thousands of them.
func newMessageView(m *store.Message, forAgent string) messageView {
	v := messageView{
		ID: m.ID, ChatRoomID: m.RoomID, Content: m.Content, MessageType: m.Type, SenderID: m.SenderID,
		SenderType: m.SenderType, SenderName: m.SenderName, Metadata: m.Metadata, Attachments: m.Attachments,
		InsertedAt: timestamp(m.InsertedAt), UpdatedAt: timestamp(m.UpdatedAt),
	}
	if v.Attachments == nil {
		v.Attachments = []store.Attachment{}
	}
	if m.Type == "text" {
		v.Metadata = textMetadata(m, forAgent)
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

func messageViews(ms []*store.Message, forAgent string) []messageView {
	out := make([]messageView, len(ms))
	for i, m := range ms {
		out[i] = newMessageView(m, forAgent)
	}
	return out
}
