package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// Changes to a message after it was sent, chatd's own: its sender edits or
// deletes it (the room's owner may delete any), and anyone in the room
// who may see it reacts to it. The same routes serve both APIs, under
// /api/v1/agent/chats and /api/v1/me/chats; each answers with the message
// as the caller sees it, and pushes message_updated (realtime.go).

func (s *Server) messageChangeRoutes() {
	for _, api := range []struct {
		base string
		aud  audience
	}{{"/api/v1/agent/chats", agentsOnly}, {"/api/v1/me/chats", humansOnly}} {
		message := api.base + "/:chat_id/messages/:id"
		s.handle("PATCH", message, api.aud, withBody(s, s.editMessage))
		s.handle("DELETE", message, api.aud, s.deleteMessage)
		s.handle("GET", message+"/edits", api.aud, s.listEdits)
		s.handle("GET", message+"/replies", api.aud, s.listReplies)
		s.handle("POST", message+"/reactions", api.aud, withBody(s, s.react))
		s.handle("DELETE", message+"/reactions/:emoji", api.aud, s.unreact)
	}
}

type editMessageRequest struct {
	Message *struct {
		Content *string `json:"content" chatd:"required"`
	} `json:"message" chatd:"required"`
}

// editMessage is PATCH …/messages/{id}: the caller's own text message gets
// new content.
func (s *Server) editMessage(w http.ResponseWriter, r *http.Request, req editMessageRequest) error {
	m, err := s.db.EditMessage(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"), *req.Message.Content)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newMessageView(m, readerOf(r)))
}

// deleteMessage is DELETE …/messages/{id}: the message becomes a tombstone.
func (s *Server) deleteMessage(w http.ResponseWriter, r *http.Request) error {
	m, err := s.db.DeleteMessage(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newMessageView(m, readerOf(r)))
}

// editView is one entry of a message's edit history.
type editView struct {
	Content  string `json:"content"`
	EditedAt string `json:"edited_at"`
}

// listEdits is GET …/messages/{id}/edits: what the message said before each
// edit, oldest first, for the room's owner.
func (s *Server) listEdits(w http.ResponseWriter, r *http.Request) error {
	edits, err := s.db.MessageEdits(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, viewsOf(edits, func(e store.Edit) editView {
		return editView{Content: e.Content, EditedAt: timestamp(e.EditedAt)}
	}))
}

var repliesListing = listing{defaultLimit: 20, maxLimit: 100}

// listReplies is GET …/messages/{id}/replies: the replies to a message,
// oldest first, by cursor; an agent sees its own and those that mention it.
func (s *Server) listReplies(w http.ResponseWriter, r *http.Request) error {
	roomID, messageID := r.PathValue("chat_id"), r.PathValue("id")
	scope := "replies:" + roomID + ":" + messageID
	pq, err := s.parsePage(r.URL.Query(), scope, repliesListing)
	if err != nil {
		return err
	}
	page, err := s.db.ListReplies(r.Context(), principal(r).Actor(), roomID, messageID, pq.PageRequest)
	if err != nil {
		return err
	}
	return replyPage(w, messageViews(page.Items, readerOf(r)), s.meta(w, pq, scope, page.PageInfo))
}

type reactRequest struct {
	Emoji *string `json:"emoji" chatd:"required"`
}

// react is POST …/messages/{id}/reactions with {"emoji": "👍"}. Reacting
// again with the same emoji changes nothing.
func (s *Server) react(w http.ResponseWriter, r *http.Request, req reactRequest) error {
	m, err := s.db.React(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"), *req.Emoji)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newMessageView(m, readerOf(r)))
}

// unreact is DELETE …/messages/{id}/reactions/{emoji}: the caller takes
// back a reaction (one never given changes nothing).
func (s *Server) unreact(w http.ResponseWriter, r *http.Request) error {
	m, err := s.db.Unreact(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"), r.PathValue("emoji"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newMessageView(m, readerOf(r)))
}
