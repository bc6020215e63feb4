package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// Participants of a room, for both APIs, and peers: whom the caller could
// add to a room. Who may add, remove or change whom is decided in the store
// (see store/access.go).

func (s *Server) participantRoutes() {
	s.handle("GET", "/api/v1/agent/chats/:chat_id/participants", agentsOnly, s.listParticipants)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/participants", agentsOnly, withBody(s, s.addParticipant))
	s.handle("DELETE", "/api/v1/agent/chats/:chat_id/participants/:id", agentsOnly, s.removeParticipant)
	s.handle("GET", "/api/v1/agent/peers", agentsOnly, s.listPeers)

	s.handle("GET", "/api/v1/me/chats/:chat_id/participants", humansOnly, s.listParticipants)
	s.handle("POST", "/api/v1/me/chats/:chat_id/participants", humansOnly, withBody(s, s.addParticipant))
	s.handle("PATCH", "/api/v1/me/chats/:chat_id/participants/:id", humansOnly, withBody(s, s.updateParticipant))
	s.handle("DELETE", "/api/v1/me/chats/:chat_id/participants/:id", humansOnly, s.removeParticipant)
	s.handle("GET", "/api/v1/me/peers", humansOnly, s.listPeers)
	s.handle("GET", "/api/v1/me/chats/:chat_id/presence", humansOnly, s.listPresence)
	s.handle("GET", "/api/v1/me/presence", humansOnly, s.listAgentsPresence)
}

// participantView is ChatParticipant, with the details of
// ChatParticipantDetails (description, is_external) and, for agents, whether
// the agent reports that it is working in the room.
type participantView struct {
	ID          string          `json:"id"`
	Type        store.PartyType `json:"type"`
	Name        string          `json:"name"`
	Handle      string          `json:"handle"`
	Role        string          `json:"role"`
	Status      string          `json:"status"`
	Description *string         `json:"description"`
	IsExternal  *bool           `json:"is_external"`
	Working     *bool           `json:"working,omitempty"`
}

func (s *Server) newParticipantView(p *store.Participant) participantView {
	v := participantView{ID: p.ID, Type: p.Type, Name: p.Name, Handle: p.Handle, Role: p.Role, Status: p.Status,
		Description: p.Description, IsExternal: p.IsExternal}
	if p.Type == store.PartyAgent {
		w := s.activity.working(p.RoomID, p.ID)
		v.Working = &w
	}
	return v
}

// peerView is Peer.
type peerView struct {
	ID                string          `json:"id"`
	Type              store.PartyType `json:"type"`
	Name              string          `json:"name"`
	Handle            string          `json:"handle"`
	Description       *string         `json:"description"`
	IsContact         bool            `json:"is_contact"`
	IsExternal        *bool           `json:"is_external"`
	ListedInDirectory bool            `json:"listed_in_directory"`
	Source            string          `json:"source"`
	Tags              []string        `json:"tags"`
}

func newPeerView(p *store.Peer) peerView {
	return peerView{ID: p.ID, Type: p.Type, Name: p.Name, Handle: p.Handle, Description: p.Description,
		IsContact: p.IsContact, IsExternal: p.IsExternal, ListedInDirectory: p.ListedInDirectory, Source: p.Source, Tags: p.Tags}
}

// participantEvent is participant_added: the participant, with agents'
// description and is_external, and no null role or status.
func participantEvent(p *store.Participant) map[string]any {
	ev := map[string]any{"id": p.ID, "type": p.Type, "name": p.Name, "handle": p.Handle, "role": p.Role, "status": p.Status}
	if p.Type == store.PartyAgent {
		ev["description"], ev["is_external"] = p.Description, p.IsExternal != nil && *p.IsExternal
	}
	return ev
}

// participantRemovedEvent is participant_removed: who left, by name, handle
// and type as participant_added says who came, so that a client can tell
// its user who left without a lookup (the participant is no longer listed).
func participantRemovedEvent(p *store.Participant) map[string]string {
	return map[string]string{"id": p.ID, "type": string(p.Type), "name": p.Name, "handle": p.Handle}
}

// listParticipants is GET /agent/chats/{id}/participants (every participant,
// no paging, as the OpenAPI document defines it) and GET
// /me/chats/{id}/participants (participant_type filter, cursor or page
// paging).
func (s *Server) listParticipants(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	roomID := r.PathValue("chat_id")
	if p.IsAgent() {
		page, err := s.db.ListParticipants(r.Context(), p.Actor(), roomID, "",
			store.PageRequest{Limit: s.db.Limits().ParticipantsPerRoom})
		if err != nil {
			return err
		}
		return reply(w, http.StatusOK, viewsOf(page.Items, s.newParticipantView))
	}
	q := r.URL.Query()
	problems := store.Problems{}
	typ := enumParam(q, "participant_type", "", store.PartyTypes, problems)
	if err := problems.Err(store.CodeValidation); err != nil {
		return err
	}
	scope := "participants:" + roomID + ":" + string(typ)
	pq, err := s.parsePage(q, scope, roomListing)
	if err != nil {
		return err
	}
	page, err := s.db.ListParticipants(r.Context(), p.Actor(), roomID, typ, pq.PageRequest)
	if err != nil {
		return err
	}
	return replyPage(w, viewsOf(page.Items, s.newParticipantView), s.meta(w, pq, scope, page.PageInfo))
}

type addParticipantRequest struct {
	Participant *struct {
		ParticipantID *string `json:"participant_id"`
		Role          string  `json:"role"`
	} `json:"participant"`
}

// addParticipant is POST .../participants: add one of the caller's peers.
func (s *Server) addParticipant(w http.ResponseWriter, r *http.Request, req addParticipantRequest) error {
	if req.Participant == nil || req.Participant.ParticipantID == nil {
		return store.Problems{"/participant/participant_id": {"is required"}}.Err(store.CodeValidation)
	}
	added, err := s.db.AddParticipant(r.Context(), principal(r).Actor(), r.PathValue("chat_id"),
		*req.Participant.ParticipantID, req.Participant.Role)
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, s.newParticipantView(added))
}

// removeParticipant is DELETE .../participants/{id}.
func (s *Server) removeParticipant(w http.ResponseWriter, r *http.Request) error {
	removed, err := s.db.RemoveParticipant(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, s.newParticipantView(removed))
}

type updateParticipantRequest struct {
	Participant *struct {
		Role   *string `json:"role"`
		Status *string `json:"status"`
	} `json:"participant"`
}

// updateParticipant is PATCH /me/chats/{id}/participants/{id}: change a
// participant's role, or block and unblock it (a blocked participant reads
// nothing, and a blocked agent's execution in the room is stopped).
func (s *Server) updateParticipant(w http.ResponseWriter, r *http.Request, req updateParticipantRequest) error {
	if req.Participant == nil || (req.Participant.Role == nil && req.Participant.Status == nil) {
		return store.Problems{"/participant": {"needs a role or a status"}}.Err(store.CodeValidation)
	}
	updated, err := s.db.UpdateParticipant(r.Context(), principal(r).Actor(), r.PathValue("chat_id"), r.PathValue("id"),
		store.ParticipantUpdate{Role: req.Participant.Role, Status: req.Participant.Status})
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, s.newParticipantView(updated))
}

// listPeers is GET /agent/peers and GET /me/peers.
func (s *Server) listPeers(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := principal(r)
	problems := store.Problems{}
	f := store.PeerFilter{NotInChat: store.NormalizeID(q.Get("not_in_chat"))}
	if f.NotInChat != "" && !store.ValidID(f.NotInChat) {
		problems.Add("/not_in_chat", "must be a chat room id (UUID)")
	}
	if !p.IsAgent() {
		f.Type = enumParam(q, "type", "", store.PartyTypes, problems)
	}
	if err := problems.Err(store.CodeValidation); err != nil {
		return err
	}
	op, err := parseOffsetPage(q, offsetListing)
	if err != nil {
		return err
	}
	page, err := s.db.ListPeers(r.Context(), p.Actor(), f, op.request())
	if err != nil {
		return err
	}
	return replyPage(w, viewsOf(page.Items, newPeerView), op.meta(page.Total))
}
