package server

import (
	"encoding/json"

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

// meChatRoomView is the human API's MeChatRoom.
type meChatRoomView struct {
	chatRoomView
	Type          string  `json:"type"`
	Status        string  `json:"status"`
	LastMessageAt *string `json:"last_message_at"`
}

func newMeChatRoomView(r *store.Room) meChatRoomView {
	v := meChatRoomView{chatRoomView: newChatRoomView(r), Type: r.Type, Status: r.Status}
	if r.LastMessageAt != nil {
		t := timestamp(*r.LastMessageAt)
		v.LastMessageAt = &t
	}
	return v
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

// deliveryView is one agent's entry of metadata.delivery_status.
type deliveryView struct {
	Status         string          `json:"status"`
	CurrentAttempt int             `json:"current_attempt"`
	Attempts       []store.Attempt `json:"attempts"`
	ProcessedAt    *string         `json:"processed_at"`
}

// newMessageView renders a message. For a text message, metadata holds what
// its sender attached, then the resolved mentions and delivery_status (per
// agent: status, current_attempt, attempts); with forAgent set (an agent
// reading), also that agent's own status and attempts at the top level. An
// event's metadata is the object its sender posted.
func newMessageView(m *store.Message, forAgent string) messageView {
	v := messageView{
		ID: m.ID, ChatRoomID: m.RoomID, Content: m.Content, MessageType: m.Type, SenderID: m.SenderID,
		SenderType: m.SenderType, SenderName: m.SenderName, Metadata: m.Metadata, Attachments: m.Attachments,
		InsertedAt: timestamp(m.InsertedAt), UpdatedAt: timestamp(m.UpdatedAt),
	}
	if v.Attachments == nil {
		v.Attachments = []store.Attachment{}
	}
	if m.Type != "text" {
		return v
	}
	meta := map[string]any{}
	if len(m.Metadata) > 2 { // more than "{}"
		var attached map[string]any
		if json.Unmarshal(m.Metadata, &attached) == nil {
			meta = attached
		}
	}
	meta["mentions"] = m.Mentions
	statuses := map[string]deliveryView{}
	for _, d := range m.Deliveries {
		dv := deliveryView{Status: d.Status, CurrentAttempt: d.CurrentAttempt, Attempts: d.Attempts}
		if dv.Attempts == nil {
			dv.Attempts = []store.Attempt{}
		}
		if d.ProcessedAt != nil {
			t := timestamp(*d.ProcessedAt)
			dv.ProcessedAt = &t
		}
		statuses[d.AgentID] = dv
		if d.AgentID == forAgent {
			meta["status"], meta["attempts"], meta["current_attempt"] = dv.Status, dv.Attempts, dv.CurrentAttempt
		}
	}
	meta["delivery_status"] = statuses
	v.Metadata, _ = json.Marshal(meta)
	return v
}

func messageViews(ms []*store.Message, forAgent string) []messageView {
	out := make([]messageView, len(ms))
	for i, m := range ms {
		out[i] = newMessageView(m, forAgent)
	}
	return out
}
