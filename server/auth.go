package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/store"
)

// audience says which API a route serves, and so which credentials it takes.
type audience int

const (
	public     audience = iota // no credentials
	agentsOnly                 // /api/v1/agent/*: an agent API key
	humansOnly                 // /api/v1/me/*: a human API key or a bearer token
	anyCaller                  // /mcp: an agent's or a person's credential; a bearer may carry an API key
)

var (
	errNoCredentials = &store.Error{Code: store.CodeUnauthorized,
		Message: "authentication required: send an API key in the X-API-Key header (humans may send Authorization: Bearer <token> instead)"}
	errBothCredentials = &httpError{Code: codeConflictingCredentials,
		Message: "send either X-API-Key or Authorization: Bearer, not both"}
	errBadToken     = &store.Error{Code: store.CodeUnauthorized, Message: "invalid or expired bearer token"}
	errEndedSession = &store.Error{Code: store.CodeUnauthorized, Message: "this session has ended (signed out or expired); sign in again"}
	errNotAgent     = &store.Error{Code: store.CodeForbidden,
		Message: "agent authentication required: this endpoint takes an agent API key"}
	errNotHuman = &store.Error{Code: store.CodeForbidden,
		Message: "agent keys cannot use the human API"}
	// OAuth access tokens are for /mcp only: their grant names the /mcp URL
	// as its resource (RFC 8707), and the person consented to an MCP client
	// acting there, not to a credential for the REST API, which would reach
	// what /mcp's tools do not (keys, agents, delegations, webhooks).
	errOAuthTokenOffMCP = &store.Error{Code: store.CodeUnauthorized,
		Message: "OAuth access tokens work on /mcp only; the REST API takes API keys and sign-in tokens"}
)

// authenticate returns the caller of r as the route's audience requires.
// Invalid credentials are 401 whatever the route; valid credentials of the
// wrong kind are 403. cachedOnly verifies API keys without reading the
// database (authenticateLimited).
func (s *Server) authenticate(r *http.Request, aud audience, cachedOnly bool) (*store.Principal, error) {
	keys := r.Header.Values("X-Api-Key")
	authz := r.Header.Values("Authorization")
	switch {
	case len(keys) > 0 && len(authz) > 0:
		return nil, errBothCredentials
	case len(keys) == 0 && len(authz) == 0:
		return nil, errNoCredentials
	case len(keys) > 1 || len(authz) > 1:
		return nil, &store.Error{Code: store.CodeUnauthorized, Message: "send one credential, once"}
	}
	var p *store.Principal
	var err error
	if len(keys) == 1 {
		p, err = s.lookupKey(r, strings.TrimSpace(keys[0]), cachedOnly)
	} else {
		scheme, token, ok := strings.Cut(strings.TrimSpace(authz[0]), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return nil, &store.Error{Code: store.CodeUnauthorized, Message: "the Authorization header must be Bearer <token>"}
		}
		token = strings.TrimSpace(token)
		switch {
		case aud == anyCaller && store.KindOfKey(token) != "":
			// MCP clients send whatever they hold as a bearer.
			p, err = s.lookupKey(r, token, cachedOnly)
		case store.IsOAuthAccessToken(token) && aud == anyCaller:
			p, err = s.db.AuthenticateOAuth(r.Context(), token)
		case store.IsOAuthAccessToken(token):
			err = errOAuthTokenOffMCP
		default:
			p, err = s.principalFromToken(r.Context(), token)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := admits(aud, p); err != nil {
		// With its principal: a valid credential takes a token from its
		// bucket for a refused request too (authenticateLimited).
		return p, err
	}
	s.db.TouchKey(p)
	return p, nil
}

// admits refuses a valid credential of the other audience (403).
func admits(aud audience, p *store.Principal) error {
	switch {
	case aud == agentsOnly && !p.IsAgent():
		return errNotAgent
	case aud == humansOnly && p.IsAgent():
		return errNotHuman
	}
	return nil
}

// lookupKey returns the principal of an API key, from the credential cache
// alone when cachedOnly.
func (s *Server) lookupKey(r *http.Request, key string, cachedOnly bool) (*store.Principal, error) {
	if cachedOnly {
		return s.db.AuthenticateCached(key)
	}
	return s.db.Authenticate(r.Context(), key)
}

// errorsIsSignature reports a token signed with another key (or not at all).
func errorsIsSignature(err error) bool {
	return errors.Is(err, jwt.ErrTokenSignatureInvalid) || errors.Is(err, jwt.ErrSignatureInvalid)
}

func principal(r *http.Request) *store.Principal {
	p, _ := r.Context().Value(principalKey).(*store.Principal)
	return p
}

// callerAgent is the authenticated agent of an agentsOnly route.
func callerAgent(r *http.Request) *store.Agent { return principal(r).Agent }

// callerUser is the authenticated human of a humansOnly route.
func callerUser(r *http.Request) *store.User { return principal(r).User }

// Bearer tokens for the Human API are JWTs signed with HS256. The signing key
// is derived from the database's server secret, so tokens survive restarts
// and stop working if the database (and its secret) is replaced.
const (
	tokenIssuer = "chatd"
	// MaxTokenTTL caps how long a bearer token may live.
	MaxTokenTTL = 30 * 24 * time.Hour
	// tokenLeeway lets a token's issue time run ahead of this clock (another
	// node's, or the chatd token command's host): the parser applies it to
	// every time it checks, so the expiry is checked again without it
	// (expiredAt).
	tokenLeeway = 30 * time.Second
)

// expiredAt reports whether a token that expires at exp (which the parser
// requires) has ended.
func expiredAt(exp *jwt.NumericDate) bool { return exp == nil || !time.Now().Before(exp.Time) }

// deriveKey derives a purpose-specific key from the server secret.
func deriveKey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// IssueUserToken returns a bearer token for the Human API that authenticates
// userID until now+ttl.
func IssueUserToken(serverSecret []byte, userID string, ttl time.Duration, now time.Time) (string, error) {
	if ttl <= 0 || ttl > MaxTokenTTL {
		return "", errors.New("token lifetime must be between 1s and 720h")
	}
	claims := jwt.RegisteredClaims{
		Issuer:    tokenIssuer,
		Subject:   userID,
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(deriveKey(serverSecret, "chatd/jwt/v1"))
}

// principalFromToken verifies a bearer token: HS256 only, issuer chatd,
// expiry required; its subject must be an existing user, and a token with a
// jti (a sign-in's) must name a live session of that user. A token signed with
// the delegation key is an agent acting for its person (server_delegation.go).
func (s *Server) principalFromToken(ctx context.Context, token string) (*store.Principal, error) {
	if token == "" || len(token) > 4096 {
		return nil, errBadToken
	}
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(tokenIssuer),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(tokenLeeway),
	)
	var claims jwt.RegisteredClaims
	_, err := parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return s.tokenKey, nil })
	if errorsIsSignature(err) {
		// Not a person's token; perhaps an agent's delegated one.
		p, ok, err := s.principalFromDelegatedToken(ctx, token)
		if !ok {
			return nil, errBadToken
		}
		return p, err
	}
	if err != nil || !store.ValidID(claims.Subject) || expiredAt(claims.ExpiresAt) {
		return nil, errBadToken
	}
	if claims.ID != "" {
		// A session token: it works while its session is live.
		if !store.ValidID(claims.ID) {
			return nil, errBadToken
		}
		u, err := s.db.SessionUser(ctx, claims.ID, claims.Subject)
		if err == store.ErrBadCredentials {
			return nil, errEndedSession
		}
		if err != nil {
			return nil, err
		}
		return &store.Principal{User: u, SessionID: claims.ID, Expires: claims.ExpiresAt.Time}, nil
	}
	u, err := s.db.UserByID(ctx, claims.Subject)
	if store.ErrorCode(err) == store.CodeNotFound {
		return nil, errBadToken
	}
	if err != nil {
		return nil, err
	}
	return &store.Principal{User: u, Expires: claims.ExpiresAt.Time}, nil
}
