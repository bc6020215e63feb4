package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// The agent's delivery workflow: drain GET .../messages/next until 204, and
// report each message's progress with /processing, then /processed or
// /failed. Delivery is at least once (see store.Delivery).

func (s *Server) deliveryRoutes() {
	s.handle("GET", "/api/v1/agent/chats/:chat_id/messages/next", agentsOnly, s.nextMessage)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages/:id/processing", agentsOnly, withBody(s, s.markProcessing))
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages/:id/processed", agentsOnly, withBody(s, s.markProcessed))
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages/:id/failed", agentsOnly, withBody(s, s.markFailed))
}

// nextMessage is GET /agent/chats/{id}/messages/next: the oldest message not
// processed yet, or 204 with no body.
func (s *Server) nextMessage(w http.ResponseWriter, r *http.Request) error {
	agent := callerAgent(r)
	msg, err := s.db.NextMessage(r.Context(), store.AgentActor(agent), r.PathValue("chat_id"))
	if err != nil {
		return err
	}
	if msg == nil {
		return noContent(w)
	}
	return reply(w, http.StatusOK, newMessageView(msg, agent.ID))
}

// replyOutcome answers a step of a message's delivery: where it stands now.
func replyOutcome(w http.ResponseWriter, o *store.DeliveryOutcome) error {
	return reply(w, http.StatusOK, map[string]any{
		"id": o.MessageID, "status": o.Status, "attempt_number": o.AttemptNumber, "success": true,
	})
}

// markProcessing is POST .../messages/{id}/processing.
func (s *Server) markProcessing(w http.ResponseWriter, r *http.Request, _ emptyBody) error {
	o, err := s.db.MarkProcessing(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"))
	if err != nil {
		return err
	}
	return replyOutcome(w, o)
}

// markProcessed is POST .../messages/{id}/processed.
func (s *Server) markProcessed(w http.ResponseWriter, r *http.Request, _ emptyBody) error {
	o, err := s.db.MarkProcessed(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"))
	if err != nil {
		return err
	}
	return replyOutcome(w, o)
}

type failedRequest struct {
	Error *string `json:"error" chatd:"required"`
}

// markFailed is POST .../messages/{id}/failed with {"error": "..."}.
func (s *Server) markFailed(w http.ResponseWriter, r *http.Request, req failedRequest) error {
	o, err := s.db.MarkFailed(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"), *req.Error)
	if err != nil {
		return err
	}
	return replyOutcome(w, o)
}
