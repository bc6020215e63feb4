package server

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/store"
)

// Delegation: a person lets one of their agents act on the Human API for
// them, within scopes, through a token exchange shaped after RFC 8693:
//
//	POST /api/v1/me/agents/{id}/delegations       (person) -> one-time grant
//	POST /api/v1/agent/delegation/token           (agent, own key, grant)
//	                                              -> short-lived bearer token
//	Authorization: Bearer <token> on /api/v1/me/* (agent, acting for the person)
//
// The token is a JWT signed with its own key (never accepted as a person's
// token, nor the reverse) carrying the person as sub, the agent in the
// RFC 8693 act claim, the scopes, and the delegation id as jti; every use
// re-checks the delegation, so revoking it ends the token at once.

func (s *Server) delegationRoutes() {
	s.handle("GET", "/api/v1/me/agents/:id/delegations", humansOnly, s.listDelegations)
	s.handle("POST", "/api/v1/me/agents/:id/delegations", humansOnly, withBody(s, s.createDelegation))
	s.handle("DELETE", "/api/v1/me/agents/:id/delegations/:delegation_id", humansOnly, s.revokeDelegation)
	s.handle("POST", "/api/v1/agent/delegation/token", agentsOnly, withBody(s, s.exchangeDelegation))
}

// The token exchange's names (RFC 8693). The grant is chatd's own token type.
const (
	tokenExchangeGrant   = "urn:ietf:params:oauth:grant-type:token-exchange"
	delegationGrantType  = "urn:chatd:params:oauth:token-type:delegation-grant"
	issuedTokenTypeJWT   = "urn:ietf:params:oauth:token-type:jwt"
	delegatedTokenIssuer = "chatd"
	delegatedAudience    = "chatd:human-api"
)

// credentialRoutes answer with a new secret: a person's API key, an agent's
// key, a delegation grant, a webhook's signing secret, an OAuth code. A delegated token may call none of them, whatever
// its scopes (and the store refuses it too: store.WithDelegation).
var credentialRoutes = map[string]bool{
	"POST /api/v1/me/keys":                   true,
	"POST /api/v1/me/agents/register":        true,
	"POST /api/v1/me/agents/:id/rotate-key":  true,
	"POST /api/v1/me/agents/:id/delegations": true,
	"POST /api/v1/me/agents/:id/webhooks":    true,
	"POST /api/v1/me/oauth/authorization":    true,
	"POST /api/v1/me/password":               true,
	"POST /api/v1/me/invitations":            true,
}

// credentialScope is the "scope" of a credential route: none grants it.
const credentialScope = "(never: a credential)"

// delegationScope is the scope a delegated token needs for a Human API
// route: "<part>:read" for GET, "<part>:write" otherwise, where the part is
// the path's first segment under /api/v1/me. Routes outside the known parts
// (delegations themselves included) need a scope no delegation can hold,
// and credential routes credentialScope.
// Polling a bulk deletion needs the read scope of what the job deletes
// (bulkJobScope); starting one is a write of chats or agents.
func delegationScope(method, path string) string {
	if credentialRoutes[method+" "+path] {
		return credentialScope
	}
	rest := strings.TrimPrefix(path, "/api/v1/me")
	part, _, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	switch {
	case strings.Contains(rest, "/delegations"):
		return "" // a delegation never begets delegations
	case part == "" || part == "profile":
		part = "profile"
	case part == "peers":
		part = "chats" // finding whom to add to a room
	case part == "search":
		part = "chats" // reading the rooms' messages
	case part == "presence":
		part = "agents" // whether one's agents are connected
	case part == "bulk-deletions":
		return bulkJobScope
	case part != "agents" && part != "chats" && part != "contacts" && part != "memories":
		return ""
	}
	if method == http.MethodGet || (method == http.MethodPost && path == "/api/v1/me/contacts/resolve") {
		return part + ":read"
	}
	return part + ":write"
}

// allowedFor refuses a delegated caller a route its token's scopes do not
// cover; other callers pass.
func allowedFor(p *store.Principal, scope string) error {
	if p.Delegation == nil {
		return nil
	}
	if scope == bulkJobScope && bulkScopeAllows(p.Delegation.Scopes) {
		return nil
	}
	if scope == credentialScope {
		return store.ErrDelegatedCredential
	}
	if scope == "" || !slices.Contains(p.Delegation.Scopes, scope) {
		need := scope
		if need == "" {
			need = "(none: not available to delegated tokens)"
		}
		return store.Errorf(store.CodeForbidden, "this delegated token does not grant %s", need)
	}
	return nil
}

type delegatedClaims struct {
	jwt.RegisteredClaims
	Act   actorClaim `json:"act"`
	Scope string     `json:"scope"`
}

// actorClaim is RFC 8693's act: who acts for the subject.
type actorClaim struct {
	Sub string `json:"sub"`
}

// issueDelegatedToken signs the token of an exchanged delegation, for the
// scopes the exchange settled on (d.Scopes).
func (s *Server) issueDelegatedToken(d *store.Delegation) (string, error) {
	claims := delegatedClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    delegatedTokenIssuer,
			Subject:   d.UserID,
			Audience:  jwt.ClaimStrings{delegatedAudience},
			ID:        d.ID,
			IssuedAt:  jwt.NewNumericDate(*d.ExchangedAt),
			NotBefore: jwt.NewNumericDate(*d.ExchangedAt),
			ExpiresAt: jwt.NewNumericDate(*d.TokenExpiresAt()),
		},
		Act:   actorClaim{Sub: d.Agent.ID},
		Scope: strings.Join(d.Scopes, " "),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.delegationKey)
}

// principalFromDelegatedToken verifies a delegated token and the delegation
// behind it. It reports ok=false when token is not a delegated token at all.
func (s *Server) principalFromDelegatedToken(ctx context.Context, token string) (p *store.Principal, ok bool, err error) {
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(delegatedTokenIssuer),
		jwt.WithAudience(delegatedAudience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(tokenLeeway),
	)
	var claims delegatedClaims
	_, err = parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return s.delegationKey, nil })
	switch {
	case errorsIsSignature(err):
		return nil, false, nil
	case err != nil || expiredAt(claims.ExpiresAt) || !store.ValidID(claims.Subject) || !store.ValidID(claims.ID) || !store.ValidID(claims.Act.Sub):
		return nil, true, &store.Error{Code: store.CodeUnauthorized, Message: "invalid or expired delegated token"}
	}
	p, err = s.db.DelegatedPrincipal(ctx, claims.ID, claims.Subject, claims.Act.Sub)
	if err != nil {
		return nil, true, err
	}
	// The token may carry fewer scopes than the delegation (the agent asked
	// for less at the exchange): the token's own list is what it grants.
	granted := strings.Fields(claims.Scope)
	d := *p.Delegation
	d.Scopes = slices.DeleteFunc(slices.Clone(d.Scopes), func(sc string) bool { return !slices.Contains(granted, sc) })
	p.Delegation = &d
	return p, true, nil
}

// delegationView is a delegation as its person sees it (never the grant,
// except once in the answer that creates it).
type delegationView struct {
	ID              string   `json:"id"`
	AgentID         string   `json:"agent_id"`
	AgentHandle     string   `json:"agent_handle"`
	Scopes          []string `json:"scopes"`
	Status          string   `json:"status"`
	Grant           string   `json:"grant,omitempty"`
	GrantExpiresAt  string   `json:"grant_expires_at"`
	TokenTTLSeconds int      `json:"token_ttl_seconds"`
	ExchangedAt     *string  `json:"exchanged_at"`
	TokenExpiresAt  *string  `json:"token_expires_at"`
	RevokedAt       *string  `json:"revoked_at"`
	LastUsedAt      *string  `json:"last_used_at"`
	InsertedAt      string   `json:"inserted_at"`
}

func newDelegationView(d *store.Delegation) delegationView {
	opt := optionalTimestamp
	return delegationView{ID: d.ID, AgentID: d.Agent.ID, AgentHandle: d.Agent.Handle, Scopes: d.Scopes,
		Status: d.Status(time.Now()), GrantExpiresAt: timestamp(d.GrantExpiresAt), TokenTTLSeconds: int(d.TokenTTL.Seconds()),
		ExchangedAt: opt(d.ExchangedAt), TokenExpiresAt: opt(d.TokenExpiresAt()), RevokedAt: opt(d.RevokedAt),
		LastUsedAt: opt(d.LastUsedAt), InsertedAt: timestamp(d.InsertedAt)}
}

type createDelegationRequest struct {
	Delegation *struct {
		Scopes          []string `json:"scopes"`
		GrantTTLSeconds *int     `json:"grant_ttl_seconds"`
		TokenTTLSeconds *int     `json:"token_ttl_seconds"`
	} `json:"delegation" chatd:"required"`
}

// createDelegation is POST /me/agents/{id}/delegations: 201 with the
// delegation and its one-time grant.
func (s *Server) createDelegation(w http.ResponseWriter, r *http.Request, req createDelegationRequest) error {
	nd := store.NewDelegation{Scopes: req.Delegation.Scopes}
	p := store.Problems{}
	for _, ttl := range []struct {
		v   *int
		dst *time.Duration
		at  string
	}{{req.Delegation.GrantTTLSeconds, &nd.GrantTTL, "/delegation/grant_ttl_seconds"}, {req.Delegation.TokenTTLSeconds, &nd.TokenTTL, "/delegation/token_ttl_seconds"}} {
		if ttl.v == nil {
			continue
		}
		if *ttl.v <= 0 {
			p.Add(ttl.at, "must be a positive number of seconds")
			continue
		}
		*ttl.dst = time.Duration(*ttl.v) * time.Second
	}
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	d, grant, err := s.db.CreateDelegation(r.Context(), callerUser(r), r.PathValue("id"), nd)
	if err != nil {
		return err
	}
	v := newDelegationView(d)
	v.Grant = grant
	return reply(w, http.StatusCreated, v)
}

// listDelegations is GET /me/agents/{id}/delegations, newest first.
func (s *Server) listDelegations(w http.ResponseWriter, r *http.Request) error {
	list, err := s.db.ListDelegations(r.Context(), callerUser(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, viewsOf(list, newDelegationView))
}

// revokeDelegation is DELETE /me/agents/{id}/delegations/{delegation_id}.
func (s *Server) revokeDelegation(w http.ResponseWriter, r *http.Request) error {
	d, err := s.db.RevokeDelegation(r.Context(), callerUser(r), r.PathValue("id"), r.PathValue("delegation_id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, newDelegationView(d))
}

type tokenExchangeRequest struct {
	GrantType        *string `json:"grant_type"`
	SubjectToken     *string `json:"subject_token"`
	SubjectTokenType *string `json:"subject_token_type"`
	Scope            *string `json:"scope"`
}

// exchangeDelegation is POST /agent/delegation/token: the agent redeems its
// grant (once) for a token, optionally asking for fewer scopes.
func (s *Server) exchangeDelegation(w http.ResponseWriter, r *http.Request, req tokenExchangeRequest) error {
	p := store.Problems{}
	if req.GrantType == nil || *req.GrantType != tokenExchangeGrant {
		p.Add("/grant_type", "must be %s", tokenExchangeGrant)
	}
	if req.SubjectToken == nil || *req.SubjectToken == "" {
		p.Add("/subject_token", "is required: the delegation grant (band_g_...)")
	}
	if req.SubjectTokenType != nil && *req.SubjectTokenType != delegationGrantType {
		p.Add("/subject_token_type", "must be %s when given", delegationGrantType)
	}
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	var scopes []string
	if req.Scope != nil {
		scopes = strings.Fields(*req.Scope)
	}
	d, err := s.db.ExchangeDelegationGrant(r.Context(), callerAgent(r), *req.SubjectToken, scopes)
	if err != nil {
		return err
	}
	token, err := s.issueDelegatedToken(d)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, map[string]any{
		"access_token": token, "issued_token_type": issuedTokenTypeJWT, "token_type": "Bearer",
		"expires_in": int(d.TokenTTL.Seconds()), "scope": strings.Join(d.Scopes, " "), "delegation_id": d.ID,
	})
}
