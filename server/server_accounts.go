package server

import (
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/store"
)

// Accounts, for the web app: first-run setup, sign-in and sign-out with a
// password, and a person's own human API keys. These routes are chatd's
// own (the hosted API has no equivalent).
//
// A session token is a bearer token like the ones `chatd token` mints, plus
// the session's id as its jti: every use checks the session is live (one
// indexed read, no cache), so signing out ends it at once. Tokens without a
// jti carry no session and keep working until they expire.

func (s *Server) accountRoutes() {
	s.handle("POST", "/api/v1/auth/setup", public, withBody(s, s.setup))
	s.handle("POST", "/api/v1/auth/sign-in", public, withBody(s, s.signIn))
	s.handle("POST", "/api/v1/auth/sign-out", humansOnly, withBody(s, s.signOut))
	s.handle("GET", "/api/v1/me/keys", humansOnly, s.listKeys)
	s.handle("POST", "/api/v1/me/keys", humansOnly, withBody(s, s.createKey))
	s.handle("DELETE", "/api/v1/me/keys/:id", humansOnly, s.deleteKey)
	s.handle("POST", "/api/v1/me/password", humansOnly, withBody(s, s.changePassword))
	s.handle("GET", "/api/v1/me/sessions", humansOnly, s.listSessions)
	s.handle("DELETE", "/api/v1/me/sessions/:id", humansOnly, s.endSession)
}

// SessionToken signs the bearer token of a session, as a sign-in answers
// it; chatd dev signs its person in with it.
func (s *Server) SessionToken(sess *store.Session) (string, error) {
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Issuer:    tokenIssuer,
		Subject:   sess.UserID,
		ID:        sess.ID,
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(sess.ExpiresAt),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.tokenKey)
}

// startSession answers, with status, the session that signIn starts: its
// bearer token and, when signIn names one, its user. A refusal counts
// against the address's failed-authentication limit, as a bad key does.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, status int, signIn func() (*store.User, *store.Session, error)) error {
	var u *store.User
	var sess *store.Session
	err := s.underAuthFailureLimit(r, "sign_in", func() (err error) {
		u, sess, err = signIn()
		return err
	})
	if err != nil {
		return err
	}
	tok, err := s.SessionToken(sess)
	if err != nil {
		return err
	}
	out := map[string]any{"access_token": tok, "token_type": "Bearer",
		"expires_in": int(time.Until(sess.ExpiresAt).Round(time.Second).Seconds())}
	if u != nil {
		out["user"] = newUserView(u)
	}
	return reply(w, status, out)
}

// newPersonRequest is the body of a one-time link that makes a person:
// the first-run setup link's, or an invitation's.
type newPersonRequest struct {
	Token    string `json:"token"`
	Handle   string `json:"handle"`
	Name     string `json:"name"`
	Email    string `json:"email"`
	Password string `json:"password"`
}

// setup is POST /api/v1/auth/setup: the first-run link's token creates the
// first person (admin of the default organization) and signs them in.
func (s *Server) setup(w http.ResponseWriter, r *http.Request, req newPersonRequest) error {
	return s.startSession(w, r, http.StatusCreated, func() (*store.User, *store.Session, error) {
		return s.db.SetUpFirstUser(r.Context(), req.Token,
			store.NewUser{Handle: req.Handle, Name: req.Name, Email: req.Email}, req.Password)
	})
}

type signInRequest struct {
	Handle   string `json:"handle"`
	Password string `json:"password"`
}

// signIn is POST /api/v1/auth/sign-in: a handle and password for a session
// token, answered without the user. A wrong handle and a wrong password
// answer the same 401.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request, req signInRequest) error {
	return s.startSession(w, r, http.StatusOK, func() (*store.User, *store.Session, error) {
		_, sess, err := s.db.SignIn(r.Context(), req.Handle, req.Password)
		return nil, sess, err
	})
}

// signOut is POST /api/v1/auth/sign-out: the session behind the bearer
// token ends, and the token with it. Only a session has anything to end: an
// API key is deleted instead, and a `chatd token` token lapses.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request, _ emptyBody) error {
	p := principal(r)
	if p.SessionID == "" {
		return store.Errorf(store.CodeBadRequest,
			"only a session token (from sign-in) can be signed out; delete an API key with DELETE /api/v1/me/keys/{id}")
	}
	if err := s.db.EndSession(r.Context(), p.SessionID); err != nil {
		return err
	}
	return noContent(w)
}

// keyView is a human API key as its person sees it: never the key, except
// once in the answer that creates it.
type keyView struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Prefix     string  `json:"prefix"`
	APIKey     string  `json:"api_key,omitempty"`
	InsertedAt string  `json:"inserted_at"`
	LastUsedAt *string `json:"last_used_at"`
}

func newKeyView(k store.KeyInfo) keyView {
	return keyView{ID: k.ID, Name: k.Name, Prefix: k.Prefix, InsertedAt: timestamp(k.InsertedAt),
		LastUsedAt: optionalTimestamp(k.LastUsedAt)}
}

// listKeys is GET /api/v1/me/keys: the caller's own human API keys.
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.db.UserKeys(r.Context(), callerUser(r).ID)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, viewsOf(keys, newKeyView))
}

type createKeyRequest struct {
	Key *struct {
		Name string `json:"name"`
	} `json:"key" chatd:"required"`
}

// createKey is POST /api/v1/me/keys: 201 with the new key, shown this once.
func (s *Server) createKey(w http.ResponseWriter, r *http.Request, req createKeyRequest) error {
	info, key, err := s.db.CreateUserKey(r.Context(), callerUser(r).ID, req.Key.Name)
	if err != nil {
		return err
	}
	v := newKeyView(info)
	v.APIKey = key
	return reply(w, http.StatusCreated, v)
}

// deleteKey is DELETE /api/v1/me/keys/{id}: the key stops working at once.
func (s *Server) deleteKey(w http.ResponseWriter, r *http.Request) error {
	if err := s.db.DeleteUserKey(r.Context(), callerUser(r).ID, r.PathValue("id")); err != nil {
		return err
	}
	return noContent(w)
}

type changePasswordRequest struct {
	CurrentPassword string `json:"current_password"`
	NewPassword     string `json:"new_password"`
}

// changePassword is POST /api/v1/me/password: with the current password,
// a new one; every session ends, and the answer is a new session token (as
// sign-in answers it) for the browser that asked. A wrong current password
// is 422 (not 401, which would tell a client its credential ended) and
// counts against the address's failed-authentication limit.
func (s *Server) changePassword(w http.ResponseWriter, r *http.Request, req changePasswordRequest) error {
	return s.startSession(w, r, http.StatusOK, func() (*store.User, *store.Session, error) {
		sess, err := s.db.ChangePassword(r.Context(), callerUser(r).ID, req.CurrentPassword, req.NewPassword)
		return nil, sess, err
	})
}

// sessionView is a live session as its person sees it; current marks the
// one the request came with.
type sessionView struct {
	ID         string `json:"id"`
	InsertedAt string `json:"inserted_at"`
	ExpiresAt  string `json:"expires_at"`
	Current    bool   `json:"current"`
}

// listSessions is GET /api/v1/me/sessions: the caller's live sign-ins,
// newest first.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	list, err := s.db.UserSessions(r.Context(), callerUser(r).ID)
	if err != nil {
		return err
	}
	current := principal(r).SessionID
	return reply(w, http.StatusOK, viewsOf(list, func(x store.SessionInfo) sessionView {
		return sessionView{ID: x.ID, InsertedAt: timestamp(x.InsertedAt), ExpiresAt: timestamp(x.ExpiresAt), Current: x.ID == current}
	}))
}

// endSession is DELETE /api/v1/me/sessions/{id}: that sign-in ends at once.
func (s *Server) endSession(w http.ResponseWriter, r *http.Request) error {
	if err := s.db.EndUserSession(r.Context(), callerUser(r).ID, r.PathValue("id")); err != nil {
		return err
	}
	return noContent(w)
}
