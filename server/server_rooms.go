package server

import (
	"net/http"
	"time"

	"github.com/chatd/chatd/store"
)

// Rooms, for agents (/api/v1/agent/chats) and humans (/api/v1/me/chats). The
// two APIs share the store; they differ in the room shape (agents get the
// terse ChatRoom) and in paging (the agent listing pages by page/page_size
// only, as the OpenAPI document defines it).

func (s *Server) roomRoutes() {
	s.handle("GET", "/api/v1/agent/chats", agentsOnly, s.listAgentRooms)
	s.handle("POST", "/api/v1/agent/chats", agentsOnly, withBody(s, s.createRoom))
	s.handle("GET", "/api/v1/agent/chats/:chat_id", agentsOnly, s.getRoom)
	s.handle("PATCH", "/api/v1/agent/chats/:chat_id", agentsOnly, withBody(s, s.renameRoom))

	s.handle("GET", "/api/v1/me/chats", humansOnly, s.listMyRooms)
	s.handle("POST", "/api/v1/me/chats", humansOnly, withBody(s, s.createRoom))
	s.handle("GET", "/api/v1/me/chats/:chat_id", humansOnly, s.getRoom)
	s.handle("PATCH", "/api/v1/me/chats/:chat_id", humansOnly, withBody(s, s.renameRoom))
	s.handle("DELETE", "/api/v1/me/chats/:chat_id", humansOnly, s.deleteRoom)
	s.handle("POST", "/api/v1/me/chats/:chat_id/read", humansOnly, withBody(s, s.markRead))
}

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

// roomEvent is the payload of room_added, room_updated and room_removed:
// the room, with title, status and type always strings (the TypeScript SDK
// drops events where they are not) and, for a removal, removed_at.
func roomEvent(r *store.Room, member *store.Participant, removedAt *time.Time) map[string]any {
	title := ""
	if r.Title != nil {
		title = *r.Title
	}
	ev := map[string]any{
		"id": r.ID, "title": title, "task_id": r.TaskID, "type": r.Type, "status": r.Status,
		"inserted_at": timestamp(r.InsertedAt), "updated_at": timestamp(r.UpdatedAt),
	}
	if member != nil {
		ev["participant_role"] = member.Role
	}
	if removedAt != nil {
		ev["removed_at"] = timestamp(*removedAt)
	}
	return ev
}

type createRoomRequest struct {
	Chat *struct {
		Title  *string `json:"title"`
		TaskID *string `json:"task_id"`
	} `json:"chat"`
}

// createRoom is POST /agent/chats and POST /me/chats. {} and {"chat":{}}
// are both accepted.
func (s *Server) createRoom(w http.ResponseWriter, r *http.Request, req createRoomRequest) error {
	var nr store.NewRoom
	if req.Chat != nil {
		nr.Title, nr.TaskID = req.Chat.Title, req.Chat.TaskID
	}
	p := principal(r)
	room, err := s.db.CreateRoom(r.Context(), p.Actor(), nr)
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, s.roomView(p, room))
}

// roomView renders a room in the caller's API's shape.
func (s *Server) roomView(p *store.Principal, room *store.Room) any {
	if p.IsAgent() {
		return newChatRoomView(room)
	}
	return newMeChatRoomView(room)
}

// getRoom is GET /agent/chats/{id} and GET /me/chats/{id}.
func (s *Server) getRoom(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	room, err := s.db.Room(r.Context(), p.Actor(), r.PathValue("chat_id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, s.roomView(p, room))
}

type renameRoomRequest struct {
	Chat *struct {
		Title *string `json:"title"`
	} `json:"chat"`
}

// renameRoom is PATCH /agent/chats/{id} and PATCH /me/chats/{id}.
func (s *Server) renameRoom(w http.ResponseWriter, r *http.Request, req renameRoomRequest) error {
	if req.Chat == nil || req.Chat.Title == nil {
		return store.Problems{"/chat/title": {"is required"}}.Err(store.CodeValidation)
	}
	p := principal(r)
	room, err := s.db.RenameRoom(r.Context(), p.Actor(), r.PathValue("chat_id"), *req.Chat.Title)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, s.roomView(p, room))
}

type markReadRequest struct {
	MessageID *string `json:"message_id"`
}

// markRead is POST /me/chats/{id}/read, chatd's own: it moves the caller's
// read marker up to message_id (absent or null: the newest message), never
// back, and answers the room with its unread count. A message_id that is
// not a message of the room is 404, as an unreadable room.
func (s *Server) markRead(w http.ResponseWriter, r *http.Request, req markReadRequest) error {
	room, err := s.db.MarkRead(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), req.MessageID)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newMeChatRoomView(room))
}

// deleteRoom is DELETE /me/chats/{id}: a soft delete, answered 204.
func (s *Server) deleteRoom(w http.ResponseWriter, r *http.Request) error {
	if err := s.db.DeleteRoom(r.Context(), principal(r).Actor(), r.PathValue("chat_id")); err != nil {
		return err
	}
	return noContent(w)
}

// listAgentRooms is GET /agent/chats: the rooms the agent is in, newest
// first, paged by page/page_size.
func (s *Server) listAgentRooms(w http.ResponseWriter, r *http.Request) error {
	op, err := parseOffsetPage(r.URL.Query(), offsetListing)
	if err != nil {
		return err
	}
	page, err := s.db.ListRooms(r.Context(), principal(r).Actor(), store.RoomFilter{Descending: true}, op.request())
	if err != nil {
		return err
	}
	return replyPage(w, viewsOf(page.Items, newChatRoomView), op.meta(page.Total))
}

var roomListing = listing{defaultLimit: 20, maxLimit: 100}

// listMyRooms is GET /me/chats: the rooms the human is in (and, with
// include=agent_rooms, the rooms its agents are in), with status and type
// filters, sort_by and order, cursor or page paging.
func (s *Server) listMyRooms(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := store.Problems{}
	f := store.RoomFilter{
		Status:     enumParam(q, "status", "", []string{"active", "archived", "closed"}, p),
		Type:       enumParam(q, "type", "", []string{"direct", "group", "task"}, p),
		Sort:       enumParam(q, "sort_by", "inserted_at", store.RoomSorts, p),
		Descending: enumParam(q, "order", "desc", []string{"asc", "desc"}, p) == "desc",
	}
	switch include := q.Get("include"); include {
	case "":
	case "agent_rooms":
		f.IncludeAgentRooms = true
	default:
		p.Add("/include", "must be agent_rooms")
	}
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	scope := "me/chats:" + f.Sort + ":" + orderName(f.Descending) + ":" + q.Get("include") + ":" + f.Status + ":" + f.Type
	pq, err := s.parsePage(q, scope, roomListing)
	if err != nil {
		return err
	}
	page, err := s.db.ListRooms(r.Context(), principal(r).Actor(), f, pq.PageRequest)
	if err != nil {
		return err
	}
	return replyPage(w, viewsOf(page.Items, newMeChatRoomView), s.meta(w, pq, scope, page.PageInfo))
}
