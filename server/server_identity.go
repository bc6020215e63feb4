package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// Who the caller is: an agent's own profile (with the feature flags the
// SDKs negotiate), a person's profile, which they may edit.

func (s *Server) identityRoutes() {
	s.handle("GET", "/api/v1/agent/me", agentsOnly, s.getAgentMe)
	s.handle("GET", "/api/v1/me", humansOnly, s.getMe)
	s.handle("GET", "/api/v1/me/profile", humansOnly, s.getMe)
	s.handle("PUT", "/api/v1/me/profile", humansOnly, withBody(s, s.updateProfile))
}

// featureFlags are the capabilities the Band SDKs negotiate from /agent/me:
// a flag that is absent or false makes the SDK leave the feature alone, so
// each flag is true only when chatd serves the feature.
func (s *Server) featureFlags() map[string]bool {
	return map[string]bool{
		"ff_file_transfer": true,
		"ff_room_tasks":    s.roomTasks,
	}
}

type agentMeView struct {
	ID                string          `json:"id"`
	Name              string          `json:"name"`
	Handle            string          `json:"handle"`
	Description       *string         `json:"description"`
	Bio               *string         `json:"bio"`
	OwnerUUID         string          `json:"owner_uuid"`
	IsExternal        bool            `json:"is_external"`
	ListedInDirectory bool            `json:"listed_in_directory"`
	Tags              []string        `json:"tags"`
	FeatureFlags      map[string]bool `json:"feature_flags"`
	InsertedAt        string          `json:"inserted_at"`
	UpdatedAt         string          `json:"updated_at"`
}

// getAgentMe is GET /api/v1/agent/me: the calling agent's profile. A 200 here
// is how SDKs check that a key is valid.
func (s *Server) getAgentMe(w http.ResponseWriter, r *http.Request) error {
	a := callerAgent(r)
	return reply(w, http.StatusOK, agentMeView{
		ID: a.ID, Name: a.Name, Handle: a.Handle, Description: a.Description, Bio: a.Bio,
		OwnerUUID: a.OwnerID, IsExternal: a.IsExternal, ListedInDirectory: a.ListedInDirectory, Tags: a.Tags,
		FeatureFlags: s.featureFlags(), InsertedAt: timestamp(a.InsertedAt), UpdatedAt: timestamp(a.UpdatedAt),
	})
}

// userView is UserDetails: /me and /me/profile. Its email is required there,
// so a person without one is answered with their placeholder address
// (store.ReportedEmail).
type userView struct {
	ID                string `json:"id"`
	Handle            string `json:"handle"`
	Email             string `json:"email"`
	Name              string `json:"name"`
	FirstName         string `json:"first_name"`
	LastName          string `json:"last_name"`
	Role              string `json:"role"`
	ListedInDirectory bool   `json:"listed_in_directory"`
	OrganizationID    string `json:"organization_id"`
	InsertedAt        string `json:"inserted_at"`
	UpdatedAt         string `json:"updated_at"`
}

func newUserView(u *store.User) userView {
	return userView{
		ID: u.ID, Handle: u.Handle, Email: store.ReportedEmail(u.Handle, u.Email), Name: u.Name(), FirstName: u.FirstName, LastName: u.LastName,
		Role: u.Role, ListedInDirectory: u.ListedInDirectory, OrganizationID: u.OrganizationID,
		InsertedAt: timestamp(u.InsertedAt), UpdatedAt: timestamp(u.UpdatedAt),
	}
}

// getMe is GET /api/v1/me and GET /api/v1/me/profile: the calling human.
func (s *Server) getMe(w http.ResponseWriter, r *http.Request) error {
	return reply(w, http.StatusOK, newUserView(callerUser(r)))
}

// updateProfileRequest is the document's profile update, plus chatd's
// email: an address to set, or "" to remove the person's own.
type updateProfileRequest struct {
	User *struct {
		FirstName *string `json:"first_name"`
		LastName  *string `json:"last_name"`
		Email     *string `json:"email"`
	} `json:"user" chatd:"required"`
}

// updateProfile is PUT /api/v1/me/profile: only the fields sent change.
func (s *Server) updateProfile(w http.ResponseWriter, r *http.Request, req updateProfileRequest) error {
	u, err := s.db.UpdateProfile(r.Context(), callerUser(r).ID, store.ProfileUpdate{
		FirstName: req.User.FirstName, LastName: req.User.LastName, Email: req.User.Email,
	})
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newUserView(u))
}
