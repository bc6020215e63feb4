package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// The agents a person owns (/api/v1/me/agents): list, register, rotate a
// key, delete. Deleting many at once is bulk deletion's (server_bulk.go),
// delegating one's work to an agent delegation's (server_delegation.go).

func (s *Server) myAgentRoutes() {
	s.handle("GET", "/api/v1/me/agents", humansOnly, s.listMyAgents)
	s.handleNamed("POST", "/api/v1/me/agents/:id", "register", humansOnly, withBody(s, s.registerAgent))
	s.handle("DELETE", "/api/v1/me/agents/:id", humansOnly, s.deleteAgent)
	s.handle("POST", "/api/v1/me/agents/:id/rotate-key", humansOnly, withBody(s, s.rotateAgentKey))
}

// myAgentView is MyAgent: an agent as its owner sees it. chatd hosts only
// external agents (their reasoning runs elsewhere), so the hosted platform's
// model and system-prompt fields are always null.
type myAgentView struct {
	ID                     string   `json:"id"`
	Name                   string   `json:"name"`
	Handle                 string   `json:"handle"`
	Slug                   string   `json:"slug"`
	Description            *string  `json:"description"`
	Bio                    *string  `json:"bio"`
	IsExternal             bool     `json:"is_external"`
	IsGlobal               bool     `json:"is_global"`
	ListedInDirectory      bool     `json:"listed_in_directory"`
	SharedWithOrganization bool     `json:"shared_with_organization"`
	RegistryAccess         bool     `json:"registry_access"`
	ModelType              *string  `json:"model_type"`
	SystemPromptID         *string  `json:"system_prompt_id"`
	Tags                   []string `json:"tags"`
	InsertedAt             string   `json:"inserted_at"`
	UpdatedAt              string   `json:"updated_at"`
}

func newMyAgentView(a *store.Agent) myAgentView {
	return myAgentView{
		ID: a.ID, Name: a.Name, Handle: a.Handle, Slug: a.Slug, Description: a.Description, Bio: a.Bio,
		IsExternal: a.IsExternal, IsGlobal: a.IsGlobal, ListedInDirectory: a.ListedInDirectory,
		SharedWithOrganization: a.SharedWithOrganization, Tags: a.Tags,
		InsertedAt: timestamp(a.InsertedAt), UpdatedAt: timestamp(a.UpdatedAt),
	}
}

type labelledParam struct {
	Label string `json:"label"`
	Param string `json:"param"`
	Type  string `json:"type,omitempty"`
}

// The filters and sorts of GET /me/agents, listed in its metadata so that a
// UI can offer them without hard-coding.
var (
	agentFilters = []labelledParam{
		{Label: "Name", Param: "name", Type: "string"},
		{Label: "External", Param: "is_external", Type: "boolean"},
		{Label: "Listed in directory", Param: "listed_in_directory", Type: "boolean"},
	}
	agentSortFields = []labelledParam{
		{Label: "Created", Param: "inserted_at"},
		{Label: "Updated", Param: "updated_at"},
		{Label: "Name", Param: "name"},
	}
	agentListing = listing{defaultLimit: 20, maxLimit: 100, bothShapes: true}
)

type myAgentsMeta struct {
	pageMeta
	AvailableFilters []labelledParam `json:"available_filters"`
	SortableFields   []labelledParam `json:"sortable_fields"`
}

// listMyAgents is GET /api/v1/me/agents: the caller's agents, filtered,
// sorted and paged.
func (s *Server) listMyAgents(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := store.Problems{}
	f := store.AgentFilter{
		Name:              q.Get("name"),
		IsExternal:        boolParam(q, "is_external", p),
		ListedInDirectory: boolParam(q, "listed_in_directory", p),
		Sort:              enumParam(q, "sort", "inserted_at", store.AgentSorts, p),
		Descending:        enumParam(q, "order", "desc", []string{"asc", "desc"}, p) == "desc",
	}
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	scope := "me/agents:" + f.Sort + ":" + orderName(f.Descending)
	pq, err := s.parsePage(q, scope, agentListing)
	if err != nil {
		return err
	}
	page, err := s.db.ListOwnedAgents(r.Context(), callerUser(r).ID, f, pq.PageRequest)
	if err != nil {
		return err
	}
	return replyPage(w, viewsOf(page.Items, newMyAgentView), myAgentsMeta{
		pageMeta:         s.meta(w, pq, scope, page.PageInfo),
		AvailableFilters: agentFilters,
		SortableFields:   agentSortFields,
	})
}

// registerAgentRequest is the OpenAPI AgentRegisterRequest, plus the optional
// bio and tags (chatd has no other endpoint that sets them).
type registerAgentRequest struct {
	Agent *struct {
		Name        *string  `json:"name" chatd:"required"`
		Description *string  `json:"description" chatd:"required"`
		Bio         string   `json:"bio"`
		Tags        []string `json:"tags"`
	} `json:"agent" chatd:"required"`
}

// registerAgent is POST /api/v1/me/agents/register: a new external agent and
// its API key, which is shown in this response only.
func (s *Server) registerAgent(w http.ResponseWriter, r *http.Request, req registerAgentRequest) error {
	a, key, err := s.db.RegisterAgent(r.Context(), store.NewAgent{
		OwnerID: callerUser(r).ID, Name: *req.Agent.Name, Description: *req.Agent.Description,
		Bio: req.Agent.Bio, Tags: req.Agent.Tags, PickSlug: true,
	})
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, agentWithKey(a, key))
}

// agentWithKey is the answer that hands out an agent's key: the agent and
// its credentials.
func agentWithKey(a *store.Agent, key string) map[string]any {
	return map[string]any{
		"agent": map[string]any{
			"id": a.ID, "name": a.Name, "handle": a.Handle, "slug": a.Slug, "description": a.Description,
			"owner_id": a.OwnerID, "is_external": a.IsExternal, "inserted_at": timestamp(a.InsertedAt),
		},
		"credentials": map[string]string{"api_key": key},
	}
}

// rotateAgentKey is POST /api/v1/me/agents/{id}/rotate-key (chatd's own;
// no body, or {}): the agent's keys are replaced by a new one, shown in
// this answer only. The old key is refused from now on, and the agent's
// connections opened with it are closed; its rooms, contacts and history
// stay.
func (s *Server) rotateAgentKey(w http.ResponseWriter, r *http.Request, _ emptyBody) error {
	a, key, err := s.db.RotateAgentKey(r.Context(), callerUser(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, agentWithKey(a, key))
}

// deleteAgent is DELETE /api/v1/me/agents/{id}[?force=true]: the agent's keys
// stop working at once and its handle becomes free.
func (s *Server) deleteAgent(w http.ResponseWriter, r *http.Request) error {
	p := store.Problems{}
	force := boolParam(r.URL.Query(), "force", p)
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	d, err := s.db.DeleteAgent(r.Context(), callerUser(r), r.PathValue("id"), force != nil && *force)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, map[string]any{
		"id": d.Agent.ID, "name": d.Agent.Name, "description": d.Agent.Description,
		"executions_deleted": d.ExecutionsDeleted,
	})
}
