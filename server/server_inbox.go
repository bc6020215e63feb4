package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// An agent's inbox, chatd's own: the messages addressed to it that it has
// not processed, across all its rooms, for an agent without a socket. It
// reads the oldest (optionally taking it, so that workers sharing the
// agent never take the same message), waits for one with ?wait=, or lists
// them all.

func (s *Server) inboxRoutes() {
	s.handle("GET", "/api/v1/agent/inbox", agentsOnly, s.listInbox)
	s.handle("GET", "/api/v1/agent/inbox/next", agentsOnly, s.nextInboxMessage)
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
	ctx, agent := r.Context(), callerAgent(r)
	actor := store.AgentActor(agent)
	take := func() (*store.Message, error) { return s.db.InboxNext(ctx, actor) }
	if claim != nil && *claim {
		take = func() (*store.Message, error) { return s.db.ClaimMessage(ctx, actor, "") }
	}
	msg, err := s.waitFor(ctx, agent.ID, wait, nil, take)
	if err != nil {
		return err
	}
	if msg == nil {
		return noContent(w)
	}
	return reply(w, http.StatusOK, newMessageView(msg, agent.ID))
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
	return replyPage(w, messageViews(page.Items, agent.ID), s.meta(w, pq, scope, page.PageInfo))
}
