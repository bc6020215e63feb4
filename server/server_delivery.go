package server

import (
	"context"
	"net/http"

	"github.com/chatd/chatd/store"
)

// The agent's delivery workflow: drain GET .../messages/next until 204, and
// report each message's progress with /processing, then /processed or
// /failed. Delivery is at least once (see store.Delivery).

func (s *Server) deliveryRoutes() {
	s.handle("GET", "/api/v1/agent/chats/:chat_id/messages/next", agentsOnly, s.nextMessage)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages/:id/processing", agentsOnly, withBody(s, s.markDelivery(s.db.MarkProcessing)))
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages/:id/processed", agentsOnly, withBody(s, s.markDelivery(s.db.MarkProcessed)))
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

// markDelivery is POST .../messages/{id}/processing and .../processed,
// which take no body (nothing, or {}): mark records the step for the caller
// on the message the path names.
func (s *Server) markDelivery(mark func(ctx context.Context, caller store.Actor, roomID, messageID string) (*store.DeliveryOutcome, error)) bodyHandler[emptyBody] {
	return func(w http.ResponseWriter, r *http.Request, _ emptyBody) error {
		o, err := mark(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"))
		if err != nil {
			return err
		}
		return replyOutcome(w, o)
	}
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
