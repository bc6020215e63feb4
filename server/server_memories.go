package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/chatd/chatd/store"
)

// Memories, for agents (/api/v1/agent/memories: store, list, read, archive,
// supersede) and humans (/api/v1/me/memories: list, read, and archive,
// restore, supersede or delete the memories about them). Who sees and who
// changes what is the store's rule (store/memories.go).
//
// The routes are always registered so that authentication answers first
// (401, and 403 for an agent key on /me); with memories switched off they
// then answer 403 feature_disabled.

func (s *Server) memoryRoutes() {
	handle := func(method, path string, aud audience, h handlerFunc) {
		s.handle(method, path, aud, s.memoryGate(h))
	}
	handle("GET", "/api/v1/agent/memories", agentsOnly, s.listAgentMemories)
	handle("POST", "/api/v1/agent/memories", agentsOnly, withBody(s, s.createMemory))
	handle("GET", "/api/v1/agent/memories/:id", agentsOnly, s.getMemory)
	handle("POST", "/api/v1/agent/memories/:id/archive", agentsOnly, withBody(s, s.changeMemory(s.db.ArchiveMemory)))
	handle("POST", "/api/v1/agent/memories/:id/supersede", agentsOnly, withBody(s, s.supersedeAgentMemory))

	handle("GET", "/api/v1/me/memories", humansOnly, s.listMyMemories)
	handle("GET", "/api/v1/me/memories/:id", humansOnly, s.getMemory)
	handle("DELETE", "/api/v1/me/memories/:id", humansOnly, s.deleteMemory)
	handle("POST", "/api/v1/me/memories/:id/archive", humansOnly, withBody(s, s.changeMemory(s.db.ArchiveMemory)))
	handle("POST", "/api/v1/me/memories/:id/restore", humansOnly, withBody(s, s.changeMemory(s.db.RestoreMemory)))
	handle("POST", "/api/v1/me/memories/:id/supersede", humansOnly, withBody(s, s.supersedeMyMemory))
}

var errMemoriesOff = &httpError{Code: codeFeatureDisabled, Message: "memories are switched off on this server"}

// memoryGate answers 403 feature_disabled when memories are switched off.
func (s *Server) memoryGate(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.memories {
			return errMemoriesOff
		}
		return h(w, r)
	}
}

// memoryView is AgentMemory and UserMemory: both APIs get the same shape,
// UserMemory's (AgentMemory plus chat_room_id), with updated_at and
// superseded_by besides (the documents allow extra fields).
type memoryView struct {
	ID             string          `json:"id"`
	Content        string          `json:"content"`
	System         string          `json:"system"`
	Type           string          `json:"type"`
	Segment        string          `json:"segment"`
	Scope          string          `json:"scope"`
	Status         string          `json:"status"`
	Thought        *string         `json:"thought"`
	SubjectID      *string         `json:"subject_id"`
	SourceAgentID  string          `json:"source_agent_id"`
	OrganizationID string          `json:"organization_id"`
	ChatRoomID     *string         `json:"chat_room_id"`
	Metadata       json.RawMessage `json:"metadata"`
	SupersededBy   *string         `json:"superseded_by"`
	InsertedAt     string          `json:"inserted_at"`
	UpdatedAt      string          `json:"updated_at"`
}

func newMemoryView(m *store.Memory) memoryView {
	return memoryView{ID: m.ID, Content: m.Content, System: m.System, Type: m.Type, Segment: m.Segment, Scope: m.Scope,
		Status: m.Status, Thought: m.Thought, SubjectID: m.SubjectID, SourceAgentID: m.SourceAgentID,
		OrganizationID: m.OrganizationID, ChatRoomID: m.ChatRoomID, Metadata: m.Metadata, SupersededBy: m.SupersededBy,
		InsertedAt: timestamp(m.InsertedAt), UpdatedAt: timestamp(m.UpdatedAt)}
}

// userMemoryView is a memory on the Human API: memoryView with chatd's
// source_agent and subject, the names of who stored it and whom it is
// about (null when the agent was deleted, the memory has no subject, or the
// subject no longer exists). The store takes them from the memory's
// organization only. The Agent API leaves them out: an agent sees memories
// stored by agents and about people beyond its peers (organization-wide
// ones, and what its siblings stored), whose names it has no other way to
// learn.
type userMemoryView struct {
	memoryView
	SourceAgent *partyRef          `json:"source_agent"`
	Subject     *memorySubjectView `json:"subject"`
}

// memorySubjectView names a memory's subject, a person or an agent.
type memorySubjectView struct {
	partyRef
	Type store.PartyType `json:"type"`
}

func newUserMemoryView(m *store.Memory) userMemoryView {
	v := userMemoryView{memoryView: newMemoryView(m)}
	if a := m.SourceAgent; a != nil {
		v.SourceAgent = &partyRef{ID: a.ID, Handle: a.Handle, Name: a.Name}
	}
	if p := m.Subject; p != nil {
		v.Subject = &memorySubjectView{partyRef: partyRef{ID: p.ID, Handle: p.Handle, Name: p.Name}, Type: p.Type}
	}
	return v
}

// memoryOut renders m for the API of the request.
func memoryOut(r *http.Request, m *store.Memory) any {
	if principal(r).IsAgent() {
		return newMemoryView(m)
	}
	return newUserMemoryView(m)
}

// memoryFields is the memory object of a create (or supersede) body.
// metadata is taken raw: the store refuses keys other than tags and
// references with 422 at their pointer, as it does every other value.
type memoryFields struct {
	Content    *string         `json:"content"`
	System     *string         `json:"system"`
	Type       *string         `json:"type"`
	Segment    *string         `json:"segment"`
	Thought    *string         `json:"thought"`
	Scope      *string         `json:"scope"`
	SubjectID  *string         `json:"subject_id"`
	ChatRoomID *string         `json:"chat_room_id"`
	Metadata   json.RawMessage `json:"metadata"`
}

func (f *memoryFields) newMemory() *store.NewMemory {
	if f == nil {
		return nil
	}
	return &store.NewMemory{Content: f.Content, System: f.System, Type: f.Type, Segment: f.Segment, Thought: f.Thought,
		Scope: f.Scope, SubjectID: f.SubjectID, ChatRoomID: f.ChatRoomID, Metadata: f.Metadata}
}

type createMemoryRequest struct {
	Memory *memoryFields `json:"memory" chatd:"required"`
}

// createMemory is POST /agent/memories: 201 with the memory.
func (s *Server) createMemory(w http.ResponseWriter, r *http.Request, req createMemoryRequest) error {
	m, err := s.db.CreateMemory(r.Context(), principal(r).Actor(), *req.Memory.newMemory())
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, newMemoryView(m))
}

// getMemory is GET /agent/memories/{id} and GET /me/memories/{id}.
func (s *Server) getMemory(w http.ResponseWriter, r *http.Request) error {
	m, err := s.db.Memory(r.Context(), principal(r).Actor(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, memoryOut(r, m))
}

// changeMemory is POST .../memories/{id}/archive (both APIs) and POST
// /me/memories/{id}/restore, which take no body: change, made by the caller
// to the memory the path names, answered with the memory.
func (s *Server) changeMemory(change func(context.Context, store.Actor, string) (*store.Memory, error)) bodyHandler[emptyBody] {
	return func(w http.ResponseWriter, r *http.Request, _ emptyBody) error {
		m, err := change(r.Context(), principal(r).Actor(), r.PathValue("id"))
		if err != nil {
			return err
		}
		return reply(w, http.StatusOK, memoryOut(r, m))
	}
}

// supersedeMemoryRequest is the optional body of a supersede.
type supersedeMemoryRequest struct {
	Memory *memoryFields `json:"memory"`
}

// supersedeAgentMemory is POST /agent/memories/{id}/supersede. The body is
// optional: {"memory": {...}} also stores the replacement (a chatd
// extension), atomically with the supersede.
func (s *Server) supersedeAgentMemory(w http.ResponseWriter, r *http.Request, req supersedeMemoryRequest) error {
	m, err := s.db.SupersedeMemory(r.Context(), principal(r).Actor(), r.PathValue("id"), req.Memory.newMemory())
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, memoryOut(r, m))
}

// supersedeMyMemory is POST /me/memories/{id}/supersede: the agent's
// supersede without a replacement, as it takes no body.
func (s *Server) supersedeMyMemory(w http.ResponseWriter, r *http.Request, _ emptyBody) error {
	return s.supersedeAgentMemory(w, r, supersedeMemoryRequest{})
}

// deleteMemory is DELETE /me/memories/{id}: a hard delete, answered 204.
func (s *Server) deleteMemory(w http.ResponseWriter, r *http.Request) error {
	if err := s.db.DeleteMemory(r.Context(), principal(r).Actor(), r.PathValue("id")); err != nil {
		return err
	}
	return noContent(w)
}

// Memory listings page by cursor and limit (1..100); the deprecated
// page_size stops at 50, as the hosted API's does.
var (
	memoryListing       = listing{defaultLimit: 20, maxLimit: 100}
	legacyMemoryListing = listing{defaultLimit: 20, maxLimit: 50}
)

// memoryFilters reads the filters both listings share: system, type,
// segment, status (default active; all for any) and content_query.
func memoryFilters(q url.Values, p store.Problems) store.MemoryFilter {
	f := store.MemoryFilter{
		System:  enumParam(q, "system", "", store.MemorySystems, p),
		Type:    enumParam(q, "type", "", store.MemoryTypes, p),
		Segment: enumParam(q, "segment", "", store.MemorySegments, p),
		Status:  enumParam(q, "status", "active", append(append([]string{}, store.MemoryStatuses...), "all"), p),
	}
	if f.Status == "all" {
		f.Status = ""
	}
	if v, ok := q["content_query"]; ok {
		f.ContentQuery = &v[0]
	}
	return f
}

// idParam reads an optional UUID query parameter ("" when absent).
func idParam(q url.Values, name string, p store.Problems) string {
	v, ok := q[name]
	if !ok {
		return ""
	}
	id := store.NormalizeID(strings.TrimSpace(v[0]))
	if !store.ValidID(id) {
		p.Add("/"+name, "must be a UUID")
		return ""
	}
	return id
}

// listMemories runs a listing whose filters f and p hold, and renders it
// with both metadata and its deprecated twin meta.
func (s *Server) listMemories(w http.ResponseWriter, r *http.Request, scope string, f store.MemoryFilter, p store.Problems) error {
	q := r.URL.Query()
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	l := memoryListing
	if _, legacy := q["page_size"]; legacy {
		l = legacyMemoryListing
	}
	pq, err := s.parsePage(q, scope, l)
	if err != nil {
		return err
	}
	page, err := s.db.ListMemories(r.Context(), principal(r).Actor(), f, pq.PageRequest)
	if err != nil {
		return err
	}
	items := make([]any, len(page.Items))
	for i, m := range page.Items {
		items[i] = memoryOut(r, m)
	}
	meta := s.meta(w, pq, scope, page.PageInfo)
	writeJSON(w, http.StatusOK, map[string]any{"data": items, "metadata": meta, "meta": meta})
	return nil
}

// listAgentMemories is GET /agent/memories. scope subject takes a
// subject_id; without a scope, a subject_id lists the memories about that
// subject and the organization-wide ones. scope agent (newer servers') lists
// the memories about the calling agent, as an agent-scope memory is stored.
func (s *Server) listAgentMemories(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := store.Problems{}
	f := memoryFilters(q, p)
	f.Scope = enumParam(q, "scope", "", []string{"subject", "organization", "agent", "all"}, p)
	if f.Scope == "agent" {
		f.Scope = "about_me"
	}
	f.SubjectID = idParam(q, "subject_id", p)
	if _, sent := q["subject_id"]; f.Scope == "subject" && !sent {
		p.Add("/subject_id", "is required when scope is subject")
	}
	return s.listMemories(w, r, "agent/memories:inserted_at:desc", f, p)
}

// listMyMemories is GET /me/memories. scope: about_me, organization, room
// (stored from a room the person can read, or from chat_room_id) or all
// (the default: every memory the person sees).
func (s *Server) listMyMemories(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := store.Problems{}
	f := memoryFilters(q, p)
	f.Scope = enumParam(q, "scope", "all", []string{"about_me", "organization", "room", "all"}, p)
	f.ChatRoomID = idParam(q, "chat_room_id", p)
	return s.listMemories(w, r, "me/memories:inserted_at:desc", f, p)
}
