package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// Attention marks, chatd's own (store/attention.go): a person marks an
// attention message done for themselves, takes the mark back, and lists
// their marks in a room; the web app's attention list is made of them.

func (s *Server) attentionRoutes() {
	s.handle("PUT", "/api/v1/me/chats/:chat_id/messages/:id/done", humansOnly, withBody(s, s.markAttentionDone))
	s.handle("DELETE", "/api/v1/me/chats/:chat_id/messages/:id/done", humansOnly, s.unmarkAttentionDone)
	s.handle("GET", "/api/v1/me/chats/:chat_id/done", humansOnly, s.listAttentionDone)
}

// attentionMarkView is one mark.
type attentionMarkView struct {
	MessageID string `json:"message_id"`
	DoneAt    string `json:"done_at"`
}

func newAttentionMarkView(m store.AttentionMark) attentionMarkView {
	return attentionMarkView{MessageID: m.MessageID, DoneAt: timestamp(m.DoneAt)}
}

// markAttentionDone is PUT …/messages/{id}/done: 200 with the mark (the
// first one's time, when it was marked already). It takes no body, and
// refuses one as every write does.
func (s *Server) markAttentionDone(w http.ResponseWriter, r *http.Request, _ emptyBody) error {
	m, err := s.db.MarkAttention(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"), true)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newAttentionMarkView(*m))
}

// unmarkAttentionDone is DELETE …/messages/{id}/done: 204, marked or not.
func (s *Server) unmarkAttentionDone(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.db.MarkAttention(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"), false); err != nil {
		return err
	}
	return noContent(w)
}

// listAttentionDone is GET /api/v1/me/chats/{id}/done: the caller's marks
// in the room, newest first.
func (s *Server) listAttentionDone(w http.ResponseWriter, r *http.Request) error {
	marks, err := s.db.AttentionMarks(r.Context(), principal(r).Actor(), r.PathValue("chat_id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, viewsOf(marks, newAttentionMarkView))
}
