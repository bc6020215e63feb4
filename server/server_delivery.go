package server

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/chatd/chatd/store"
)

// The agent's delivery workflow: drain GET .../messages/next until 204, and
// report each message's progress with /processing, then /processed or
// /failed. Delivery is at least once (see store.Delivery).
//
// An agent without a socket waits for work with ?wait= (long-poll), or
// works from its inbox, chatd's own: the messages addressed to it that it
// has not processed, across all its rooms. inbox/next reads the oldest,
// optionally taking it (claim=true), so that workers sharing the agent
// never take the same message.

func (s *Server) deliveryRoutes() {
	// A name where GET …/messages/{id}/replies takes an id (routes.go).
	s.handleNamed("GET", "/api/v1/agent/chats/:chat_id/messages/:id", "next", agentsOnly, s.nextMessage)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages/:id/processing", agentsOnly, withBody(s, s.markDelivery(s.db.MarkProcessing)))
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages/:id/processed", agentsOnly, withBody(s, s.markDelivery(s.db.MarkProcessed)))
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages/:id/failed", agentsOnly, withBody(s, s.markFailed))
	s.handle("GET", "/api/v1/agent/inbox", agentsOnly, s.listInbox)
	s.handle("GET", "/api/v1/agent/inbox/next", agentsOnly, s.nextInboxMessage)
}

// nextMessage is GET /agent/chats/{id}/messages/next: the oldest message not
// processed yet, or 204 with no body. With ?wait=N (chatd's long-poll) it
// holds the request up to N seconds for a message to arrive.
func (s *Server) nextMessage(w http.ResponseWriter, r *http.Request) error {
	agent := callerAgent(r)
	wait, err := waitParam(r.URL.Query())
	if err != nil {
		return err
	}
	actor, roomID := store.AgentActor(agent), r.PathValue("chat_id")
	return s.answerNext(w, r, wait, func(ctx context.Context) (*store.Message, error) {
		return s.db.NextMessage(ctx, actor, roomID)
	})
}

// maxWait bounds how long a long-poll (?wait=) holds its request.
const maxWait = 60 * time.Second

// waitParam reads a long-poll's ?wait=: whole seconds, 0 to 60; absent, 0
// (answer at once).
func waitParam(q url.Values) (time.Duration, error) {
	p := store.Problems{}
	seconds := intParam(q, "wait", 0, 0, int(maxWait/time.Second), p)
	return time.Duration(seconds) * time.Second, p.Err(store.CodeValidation)
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

// nextInboxMessage is GET /agent/inbox/next: the oldest message of the
// inbox with its chat_room_id, or 204. claim=true starts a processing
// attempt on it in the same write (a message another worker holds is
// skipped); wait=N holds the request up to N seconds for one.
func (s *Server) nextInboxMessage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	wait, err := waitParam(q)
	if err != nil {
		return err
	}
	p := store.Problems{}
	claim := boolParam(q, "claim", p)
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	actor := store.AgentActor(callerAgent(r))
	take := func(ctx context.Context) (*store.Message, error) { return s.db.InboxNext(ctx, actor) }
	if claim != nil && *claim {
		take = func(ctx context.Context) (*store.Message, error) { return s.db.ClaimMessage(ctx, actor, "") }
	}
	return s.answerNext(w, r, wait, take)
}

var inboxListing = listing{defaultLimit: 20, maxLimit: 100}

// listInbox is GET /agent/inbox: the inbox, oldest first, by cursor.
func (s *Server) listInbox(w http.ResponseWriter, r *http.Request) error {
	agent := callerAgent(r)
	scope := "agent/inbox"
	pq, err := s.parsePage(r.URL.Query(), scope, inboxListing)
	if err != nil {
		return err
	}
	page, err := s.db.ListInbox(r.Context(), store.AgentActor(agent), pq.PageRequest)
	if err != nil {
		return err
	}
	return replyPage(w, messageViews(page.Items, agentReader(agent.ID)), s.meta(w, pq, scope, page.PageInfo))
}
