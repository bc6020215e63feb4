package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/chatd/chatd/server/webhook"
	"github.com/chatd/chatd/store"
)

// Webhooks, chatd's own: an agent registers URLs that chatd POSTs each new
// message addressed to it to (the sending is webhooks.go's), reads each
// endpoint's delivery log, and resumes an endpoint that was paused after a
// run of failures. The agent does so with its key, on the Agent API; the
// person who owns it does the same for it on the Human API, under
// /me/agents/{id}. The signing secret is answered once, by the creation.

func (s *Server) webhookRoutes() {
	for _, api := range []struct {
		base, one string
		aud       audience
	}{
		{"/api/v1/agent/webhooks", "/api/v1/agent/webhooks/:id", agentsOnly},
		{"/api/v1/me/agents/:id/webhooks", "/api/v1/me/agents/:id/webhooks/:webhook_id", humansOnly},
	} {
		s.handle("GET", api.base, api.aud, s.listWebhooks)
		s.handle("POST", api.base, api.aud, withBody(s, s.createWebhook))
		s.handle("GET", api.one, api.aud, s.getWebhook)
		s.handle("DELETE", api.one, api.aud, s.deleteWebhook)
		s.handle("POST", api.one+"/resume", api.aud, withBody(s, s.resumeWebhook))
		s.handle("GET", api.one+"/deliveries", api.aud, s.listWebhookDeliveries)
	}
}

// webhookTarget is the agent whose webhooks a request manages, and the
// webhook its path names ("" for none): on the Agent API, the calling
// agent and {id}; on the Human API, the agent {id} (the store checks that
// the caller owns it) and {webhook_id}.
func webhookTarget(r *http.Request) (agentID, webhookID string) {
	if p := principal(r); p.IsAgent() {
		return p.Agent.ID, r.PathValue("id")
	}
	return r.PathValue("id"), r.PathValue("webhook_id")
}

// webhookView is an endpoint. status is active or paused; a paused one
// says when and why, and is sent nothing until resumed.
type webhookView struct {
	ID                  string  `json:"id"`
	AgentID             string  `json:"agent_id"`
	URL                 string  `json:"url"`
	Description         string  `json:"description"`
	Status              string  `json:"status"`
	PausedAt            *string `json:"paused_at"`
	PauseReason         *string `json:"pause_reason"`
	ConsecutiveFailures int     `json:"consecutive_failures"`
	InsertedAt          string  `json:"inserted_at"`
	UpdatedAt           string  `json:"updated_at"`
}

func newWebhookView(w *store.Webhook) webhookView {
	status := "active"
	if w.PausedAt != nil {
		status = "paused"
	}
	return webhookView{ID: w.ID, AgentID: w.AgentID, URL: w.URL, Description: w.Description, Status: status,
		PausedAt: optionalTimestamp(w.PausedAt), PauseReason: w.PauseReason, ConsecutiveFailures: w.ConsecutiveFailures,
		InsertedAt: timestamp(w.InsertedAt), UpdatedAt: timestamp(w.UpdatedAt)}
}

// createdWebhookView is a new endpoint with its signing secret, which no
// other answer carries.
type createdWebhookView struct {
	webhookView
	Secret string `json:"secret"`
}

type createWebhookRequest struct {
	Webhook *struct {
		URL         *string `json:"url" chatd:"required"`
		Description *string `json:"description"`
	} `json:"webhook" chatd:"required"`
}

// createWebhook is POST /agent/webhooks (and /me/agents/{id}/webhooks): 201 with the endpoint and its
// secret. An address webhooks may not reach is refused here (422 at
// /webhook/url), and again whenever a request is sent.
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, req createWebhookRequest) error {
	nw := store.NewWebhook{URL: *req.Webhook.URL}
	if req.Webhook.Description != nil {
		nw.Description = *req.Webhook.Description
	}
	if err := CheckWebhookURL(r.Context(), s.webhookGuard, nw.URL); err != nil {
		return err
	}
	agentID, _ := webhookTarget(r)
	created, secret, err := s.db.CreateWebhook(r.Context(), principal(r).Actor(), agentID, nw)
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, createdWebhookView{webhookView: newWebhookView(created), Secret: secret})
}

// CheckWebhookURL refuses a webhook URL that leads where guard refuses, as
// registering it over HTTP does: a validation problem at /webhook/url that
// names the address and what it is. A URL of the wrong form passes: it is
// the store's to describe, with the body's other problems. The command line
// registers webhooks through it too, so that both refuse alike.
func CheckWebhookURL(ctx context.Context, guard *webhook.Guard, raw string) error {
	u, err := store.ParseWebhookURL(raw)
	if err != nil {
		return nil
	}
	var refused *webhook.RefusedError
	if err := guard.CheckURL(ctx, u); errors.As(err, &refused) {
		return store.Problems{store.WebhookURLPointer: {"leads to " + refused.Target + ", " + refused.Reason + ", which webhooks may not reach"}}.
			Err(store.CodeValidation)
	} else if err != nil {
		return err
	}
	return nil
}

// WebhookJSON is an endpoint as the API answers it, for the command line's
// --json.
func WebhookJSON(w *store.Webhook) any { return newWebhookView(w) }

// CreatedWebhookJSON is a new endpoint with its secret as the API answers
// it, for the command line's --json.
func CreatedWebhookJSON(w *store.Webhook, secret string) any {
	return createdWebhookView{webhookView: newWebhookView(w), Secret: secret}
}

// WebhookDeliveryJSON is a line of a delivery log as the API answers it,
// for the command line's --json.
func WebhookDeliveryJSON(d *store.WebhookDelivery) any { return newWebhookDeliveryView(d) }

// listWebhooks is GET …/webhooks: every endpoint (at most
// store.MaxWebhooksPerAgent), oldest first.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	agentID, _ := webhookTarget(r)
	hooks, err := s.db.ListWebhooks(r.Context(), principal(r).Actor(), agentID)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, viewsOf(hooks, newWebhookView))
}

// getWebhook is GET …/webhooks/{id}.
func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) error {
	agentID, id := webhookTarget(r)
	hook, err := s.db.Webhook(r.Context(), principal(r).Actor(), agentID, id)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newWebhookView(hook))
}

// deleteWebhook is DELETE …/webhooks/{id}: 204; its queue and log go
// with it.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	agentID, id := webhookTarget(r)
	if err := s.db.DeleteWebhook(r.Context(), principal(r).Actor(), agentID, id); err != nil {
		return err
	}
	return noContent(w)
}

// resumeWebhook is POST …/webhooks/{id}/resume: the endpoint, active,
// its pending deliveries due at once.
func (s *Server) resumeWebhook(w http.ResponseWriter, r *http.Request, _ emptyBody) error {
	agentID, id := webhookTarget(r)
	hook, err := s.db.ResumeWebhook(r.Context(), principal(r).Actor(), agentID, id)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newWebhookView(hook))
}

// webhookDeliveryView is one line of a delivery log.
type webhookDeliveryView struct {
	ID             string  `json:"id"`
	MessageID      string  `json:"message_id"`
	ChatRoomID     string  `json:"chat_room_id"`
	Status         string  `json:"status"`
	Attempts       int     `json:"attempts"`
	NextAttemptAt  *string `json:"next_attempt_at"`
	LastAttemptAt  *string `json:"last_attempt_at"`
	LastStatusCode *int    `json:"last_status_code"`
	LastLatencyMS  *int64  `json:"last_latency_ms"`
	LastError      *string `json:"last_error"`
	InsertedAt     string  `json:"inserted_at"`
	CompletedAt    *string `json:"completed_at"`
}

func newWebhookDeliveryView(d *store.WebhookDelivery) webhookDeliveryView {
	v := webhookDeliveryView{ID: d.ID, MessageID: d.MessageID, ChatRoomID: d.RoomID, Status: d.Status, Attempts: d.Attempts,
		NextAttemptAt: optionalTimestamp(d.NextAttemptAt), LastAttemptAt: optionalTimestamp(d.LastAttemptAt),
		LastStatusCode: d.LastStatusCode, LastError: d.LastError, InsertedAt: timestamp(d.InsertedAt),
		CompletedAt: optionalTimestamp(d.CompletedAt)}
	if d.LastLatency != nil {
		ms := d.LastLatency.Milliseconds()
		v.LastLatencyMS = &ms
	}
	return v
}

var webhookDeliveryListing = listing{defaultLimit: 20, maxLimit: 100}

// listWebhookDeliveries is GET …/webhooks/{id}/deliveries: the
// delivery log, newest message first, by cursor.
func (s *Server) listWebhookDeliveries(w http.ResponseWriter, r *http.Request) error {
	agentID, id := webhookTarget(r)
	scope := "webhook-deliveries:" + id
	pq, err := s.parsePage(r.URL.Query(), scope, webhookDeliveryListing)
	if err != nil {
		return err
	}
	page, err := s.db.ListWebhookDeliveries(r.Context(), principal(r).Actor(), agentID, id, pq.PageRequest)
	if err != nil {
		return err
	}
	return replyPage(w, viewsOf(page.Items, newWebhookDeliveryView), s.meta(w, pq, scope, page.PageInfo))
}
