package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// Invitations, chatd's own (store/invitations.go): an organization's admin
// invites a person with a one-time link, lists and revokes the open ones;
// the invited person accepts on the link's page with a handle, a name and a
// password, and is signed in.

func (s *Server) invitationRoutes() {
	s.handle("POST", "/api/v1/me/invitations", humansOnly, withBody(s, s.createInvitation))
	s.handle("GET", "/api/v1/me/invitations", humansOnly, s.listInvitations)
	s.handle("DELETE", "/api/v1/me/invitations/:id", humansOnly, s.revokeInvitation)
	s.handle("POST", "/api/v1/auth/accept-invitation", public, withBody(s, s.acceptInvitation))
}

// invitationView is an invitation as its admins see it; the token only in
// the answer that creates it.
type invitationView struct {
	ID         string `json:"id"`
	Role       string `json:"role"`
	InvitedBy  string `json:"invited_by"`
	InsertedAt string `json:"inserted_at"`
	ExpiresAt  string `json:"expires_at"`
	Token      string `json:"token,omitempty"`
}

func newInvitationView(inv store.Invitation) invitationView {
	return invitationView{ID: inv.ID, Role: inv.Role, InvitedBy: inv.InvitedBy,
		InsertedAt: timestamp(inv.Inserted), ExpiresAt: timestamp(inv.Expires)}
}

type createInvitationRequest struct {
	Invitation *struct {
		Role string `json:"role"`
	} `json:"invitation" chatd:"required"`
}

// createInvitation is POST /api/v1/me/invitations: 201 with the token,
// shown this once.
func (s *Server) createInvitation(w http.ResponseWriter, r *http.Request, req createInvitationRequest) error {
	inv, token, err := s.db.CreateInvitation(r.Context(), callerUser(r), req.Invitation.Role)
	if err != nil {
		return err
	}
	v := newInvitationView(*inv)
	v.Token = token
	return reply(w, http.StatusCreated, v)
}

// listInvitations is GET /api/v1/me/invitations: the organization's open
// invitations, newest first (admins only).
func (s *Server) listInvitations(w http.ResponseWriter, r *http.Request) error {
	list, err := s.db.Invitations(r.Context(), callerUser(r))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, viewsOf(list, newInvitationView))
}

// revokeInvitation is DELETE /api/v1/me/invitations/{id}: the link stops
// working.
func (s *Server) revokeInvitation(w http.ResponseWriter, r *http.Request) error {
	if err := s.db.RevokeInvitation(r.Context(), callerUser(r), r.PathValue("id")); err != nil {
		return err
	}
	return noContent(w)
}

// acceptInvitation is POST /api/v1/auth/accept-invitation: the token
// creates the person and signs them in (201, as setup answers). A bad,
// expired or used token is 401 and counts against the address's
// failed-authentication limit.
func (s *Server) acceptInvitation(w http.ResponseWriter, r *http.Request, req newPersonRequest) error {
	return s.startSession(w, r, http.StatusCreated, func() (*store.User, *store.Session, error) {
		return s.db.AcceptInvitation(r.Context(), req.Token,
			store.NewUser{Handle: req.Handle, Name: req.Name, Email: req.Email}, req.Password)
	})
}
