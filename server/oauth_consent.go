package server

import (
	"net/http"
	"net/url"

	"github.com/chatd/chatd/store"
)

// The consent, on the Human API for the web app's consent screen: GET
// /api/v1/me/oauth/authorization describes an authorization request (which
// client, where its answer goes), POST on it answers the request, and
// /api/v1/me/oauth/grants lists and revokes what the person consented to.
// The request's problems are refused here in the envelope, each at its
// parameter's pointer; the screen shows them rather than sending the
// browser anywhere. Delegated tokens reach none of these routes.

// consentView describes an authorization request to the person deciding it.
type consentView struct {
	Client struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	} `json:"client"`
	RedirectURI string `json:"redirect_uri"`
	Scope       string `json:"scope"`
	Resource    string `json:"resource"`
}

// checkAuthorizationRequest checks a request as the consent's routes take
// it: every problem at once, each at at+parameter.
func (s *Server) checkAuthorizationRequest(r *http.Request, a *authorizationRequest, at string) (*store.OAuthClient, error) {
	client, problem, err := s.resolveClient(r.Context(), a)
	if err != nil {
		return nil, err
	}
	problems := store.Problems{}
	if problem != nil {
		problems.Add(at+problem.param, "%s", problem.detail)
	}
	for _, p := range s.authorizationRequestProblems(r, a) {
		if problem == nil || p.param != problem.param { // one problem is enough for the redirect URI
			problems.Add(at+p.param, "%s", p.detail)
		}
	}
	if err := problems.Err(store.CodeValidation); err != nil {
		return nil, err
	}
	return client, nil
}

// oauthConsentRequest is GET /api/v1/me/oauth/authorization?<the request>.
func (s *Server) oauthConsentRequest(w http.ResponseWriter, r *http.Request) error {
	a, problem := authorizationRequestFrom(r.URL.Query())
	if problem != nil {
		return store.Problems{"/" + problem.param: {problem.detail}}.Err(store.CodeValidation)
	}
	client, err := s.checkAuthorizationRequest(r, &a, "/")
	if err != nil {
		return err
	}
	var v consentView
	v.Client.ID, v.Client.Name, v.Client.URI = client.ID, client.Name, client.URI
	v.RedirectURI, v.Scope, v.Resource = a.RedirectURI, grantedScope(a.Scope), s.mcpResource(r)
	return reply(w, http.StatusOK, v)
}

type oauthConsentRequest struct {
	Authorization *struct {
		authorizationRequest
		// AgentID is whom the client acts as; null or absent, the person.
		AgentID *string `json:"agent_id"`
		Approve *bool   `json:"approve" chatd:"required"`
	} `json:"authorization" chatd:"required"`
}

// oauthConsent is POST /api/v1/me/oauth/authorization: 201 with where to
// send the browser with a code, or 200 with where to send it with
// access_denied when the person declines.
func (s *Server) oauthConsent(w http.ResponseWriter, r *http.Request, req oauthConsentRequest) error {
	a := &req.Authorization.authorizationRequest
	if _, err := s.checkAuthorizationRequest(r, a, "/authorization/"); err != nil {
		return err
	}
	if !*req.Authorization.Approve {
		return reply(w, http.StatusOK, map[string]string{"redirect_to": s.authorizationResponse(r, a, url.Values{
			"error": {string(codeOAuthAccessDenied)}, "error_description": {"the person declined"}})})
	}
	consent := store.OAuthAuthorization{ClientID: a.ClientID, RedirectURI: a.RedirectURI, CodeChallenge: a.CodeChallenge,
		Scope: grantedScope(a.Scope), Resource: s.mcpResource(r)}
	if id := req.Authorization.AgentID; id != nil {
		consent.AgentID = *id
	}
	code, err := s.db.AuthorizeOAuthClient(r.Context(), callerUser(r), consent)
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, map[string]string{"redirect_to": s.authorizationResponse(r, a, url.Values{"code": {code}})})
}

// oauthGrantView is a grant as its person sees it: never a token.
type oauthGrantView struct {
	ID         string  `json:"id"`
	ClientID   string  `json:"client_id"`
	ClientName string  `json:"client_name"`
	ClientURI  string  `json:"client_uri"`
	AgentID    *string `json:"agent_id"`
	AgentName  *string `json:"agent_name"`
	// AgentHandle names the agent the client acts as; null, the person.
	AgentHandle *string `json:"agent_handle"`
	Scope       string  `json:"scope"`
	Resource    string  `json:"resource"`
	InsertedAt  string  `json:"inserted_at"`
	ExpiresAt   string  `json:"expires_at"`
	LastUsedAt  *string `json:"last_used_at"`
}

func newOAuthGrantView(g *store.OAuthGrant) oauthGrantView {
	v := oauthGrantView{ID: g.ID, ClientID: g.ClientID, ClientName: g.ClientName, ClientURI: g.ClientURI, Scope: g.Scope,
		Resource: g.Resource, InsertedAt: timestamp(g.InsertedAt), ExpiresAt: timestamp(g.ExpiresAt),
		LastUsedAt: optionalTimestamp(g.LastUsedAt)}
	if g.AgentID != "" {
		v.AgentID, v.AgentName, v.AgentHandle = &g.AgentID, &g.AgentName, &g.AgentHandle
	}
	return v
}

// listOAuthGrants is GET /api/v1/me/oauth/grants: the person's live
// grants, newest first (at most store.MaxOAuthGrantsPerUser, unpaged).
func (s *Server) listOAuthGrants(w http.ResponseWriter, r *http.Request) error {
	list, err := s.db.ListOAuthGrants(r.Context(), callerUser(r))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, viewsOf(list, newOAuthGrantView))
}

// revokeOAuthGrant is DELETE /api/v1/me/oauth/grants/{id}: 204; the
// client's tokens stop working and its MCP sessions close.
func (s *Server) revokeOAuthGrant(w http.ResponseWriter, r *http.Request) error {
	if err := s.db.RevokeOAuthGrant(r.Context(), callerUser(r), r.PathValue("id")); err != nil {
		return err
	}
	return noContent(w)
}
