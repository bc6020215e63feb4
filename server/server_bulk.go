package server

import (
	"net/http"
	"slices"

	"github.com/chatd/chatd/store"
)

// Bulk deletion (/api/v1/me/chats/bulk-delete, /api/v1/me/agents/bulk-delete,
// /api/v1/me/bulk-deletions/{id}): the POST only queues a job (202); the
// store's worker deletes the targets one by one, and the caller polls.
//
// The two POSTs are names at an id's position (handleNamed): bulk-delete
// shares POST /me/agents/:id with register, and POST /me/chats/:chat_id has
// no other name.

func (s *Server) bulkRoutes() {
	s.handleNamed("POST", "/api/v1/me/chats/:chat_id", "bulk-delete", humansOnly, withBody(s, s.bulkDeleteChats))
	s.handleNamed("POST", "/api/v1/me/agents/:id", "bulk-delete", humansOnly, withBody(s, s.bulkDeleteAgents))
	s.handle("GET", "/api/v1/me/bulk-deletions/:id", humansOnly, s.pollBulkDeletion)
}

// bulkJobScope stands for the read scope of whichever part a polled job
// deletes: the route cannot know it before the job is loaded, so allowedFor
// lets in a token with either read scope and pollBulkDeletion checks the one
// the job needs.
const bulkJobScope = "bulk-deletions:read"

type bulkDeleteChatsRequest struct {
	IDs *[]*string `json:"ids"`
}

type bulkDeleteAgentsRequest struct {
	IDs   *[]*string `json:"ids"`
	Force *bool      `json:"force"`
}

// bulkIDs checks the submitted ids: present, 1..100, strings, no repeats.
// What the ids name is each item's business, not the request's: a
// malformed id is a not_found item, as the spec says.
func bulkIDs(ids *[]*string) ([]string, error) {
	p := store.Problems{}
	switch {
	case ids == nil:
		p.Add("/ids", "is required")
	case len(*ids) == 0:
		p.Add("/ids", "must hold at least 1 id")
	case len(*ids) > store.MaxBulkIDs:
		p.Add("/ids", "must hold at most %d ids", store.MaxBulkIDs)
	}
	if len(p) > 0 {
		return nil, p.Err(store.CodeValidation)
	}
	out := make([]string, len(*ids))
	first := map[string]int{}
	for i, id := range *ids {
		if id == nil {
			p.Add(store.Pointer("ids", i), "must be a string")
			continue
		}
		if j, seen := first[*id]; seen {
			p.Add(store.Pointer("ids", i), "repeats /ids/%d", j)
			continue
		}
		first[*id] = i
		out[i] = *id
	}
	if err := p.Err(store.CodeValidation); err != nil {
		return nil, err
	}
	return out, nil
}

// bulkDeleteChats is POST /api/v1/me/chats/bulk-delete.
func (s *Server) bulkDeleteChats(w http.ResponseWriter, r *http.Request, req bulkDeleteChatsRequest) error {
	ids, err := bulkIDs(req.IDs)
	if err != nil {
		return err
	}
	return s.queueBulkDeletion(w, r, store.BulkChats, ids, false)
}

// bulkDeleteAgents is POST /api/v1/me/agents/bulk-delete: force as in DELETE
// /me/agents/{id}?force=true, for every agent of the job.
func (s *Server) bulkDeleteAgents(w http.ResponseWriter, r *http.Request, req bulkDeleteAgentsRequest) error {
	ids, err := bulkIDs(req.IDs)
	if err != nil {
		return err
	}
	return s.queueBulkDeletion(w, r, store.BulkAgents, ids, req.Force != nil && *req.Force)
}

func (s *Server) queueBulkDeletion(w http.ResponseWriter, r *http.Request, kind string, ids []string, force bool) error {
	job, err := s.db.CreateBulkJob(r.Context(), callerUser(r), kind, ids, force)
	if err != nil {
		return err
	}
	return reply(w, http.StatusAccepted, newBulkJobView(job))
}

// pollBulkDeletion is GET /api/v1/me/bulk-deletions/{id}: only the job's
// creator sees it.
func (s *Server) pollBulkDeletion(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	job, err := s.db.BulkJobOf(r.Context(), p.User, r.PathValue("id"))
	if err != nil {
		return err
	}
	if p.Delegation != nil {
		if err := allowedFor(p, bulkPart(job.ResourceType)+":read"); err != nil {
			return err
		}
	}
	return reply(w, http.StatusOK, newBulkJobView(job))
}

// bulkPart is the delegation part of a job's resource type.
func bulkPart(kind string) string {
	if kind == store.BulkAgents {
		return "agents"
	}
	return "chats"
}

// bulkScopeAllows lets a delegated token poll a job if it may read one of
// the parts a job can delete; pollBulkDeletion checks the job's own.
func bulkScopeAllows(scopes []string) bool {
	return slices.Contains(scopes, "chats:read") || slices.Contains(scopes, "agents:read")
}

// bulkJobView is BulkDeletionJob.
type bulkJobView struct {
	ID           string           `json:"id"`
	ResourceType string           `json:"resource_type"`
	Status       string           `json:"status"`
	Force        bool             `json:"force"`
	Total        int              `json:"total"`
	Processed    int              `json:"processed"`
	Succeeded    int              `json:"succeeded"`
	Failed       int              `json:"failed"`
	Results      []bulkResultView `json:"results"`
	InsertedAt   string           `json:"inserted_at"`
	StartedAt    *string          `json:"started_at"`
	CompletedAt  *string          `json:"completed_at"`
}

type bulkResultView struct {
	ID     string         `json:"id"`
	Status string         `json:"status"`
	Error  *bulkErrorView `json:"error"`
}

type bulkErrorView struct {
	Code    store.Code `json:"code"`
	Message string     `json:"message"`
}

func newBulkJobView(j *store.BulkJob) bulkJobView {
	processed, succeeded, failed := j.Counts()
	v := bulkJobView{
		ID: j.ID, ResourceType: j.ResourceType, Status: j.Status, Force: j.Force,
		Total: len(j.Items), Processed: processed, Succeeded: succeeded, Failed: failed,
		Results:    make([]bulkResultView, len(j.Items)),
		InsertedAt: timestamp(j.InsertedAt), StartedAt: optionalTimestamp(j.StartedAt), CompletedAt: optionalTimestamp(j.CompletedAt),
	}
	for i, it := range j.Items {
		v.Results[i] = bulkResultView{ID: it.ID, Status: it.Status}
		if it.Error != nil {
			v.Results[i].Error = &bulkErrorView{Code: it.Error.Code, Message: it.Error.Message}
		}
	}
	return v
}
