package server

import (
	"encoding/base64"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chatd/chatd/server/phx"
	"github.com/chatd/chatd/store"
)

// The real-time socket: GET /api/v1/socket/websocket, Phoenix Channels
// (serializer V2). Credentials come with the upgrade request, as the Band
// SDKs send them: an x-api-key header (which wins), an api_key query
// parameter, or a token (bearer JWT) query parameter. agent_id makes the
// connection act as that agent (with its key, or its owner's key);
// on_conflict says what happens when the agent already has a connection:
// supersede (the default: the old one is told and closed) or reject (409).
// A refused upgrade is an ordinary HTTP error in the envelope.

func (s *Server) socketRoutes() {
	s.handle("GET", "/api/v1/socket/websocket", public, s.socket)
}

// socketConn is what the server knows about one connection.
type socketConn struct {
	agent    *store.Agent // the agent the connection acts as, or nil
	user     *store.User  // the human, for a human connection
	limitKey string       // what the per-credential connection limit counts
	// The credential the connection was opened with, checked again
	// whenever credentials end (credentials.go): the API key (an agent's
	// or a person's, with agent_id or not), or the session of a sign-in
	// token, and when a bearer token expires (zero for keys).
	heldCredential
	expires time.Time
	// expiry closes the connection at expires; gone is set once it
	// closed. Both are guarded by socketRegistry.mu.
	expiry *time.Timer
	gone   bool
	// extensions is set when the client asked for chatd's extension events
	// (?extensions=true): message_updated for edits, deletions and
	// reactions of the messages an agent may see (realtime.go).
	extensions bool
}

func (sc *socketConn) actor() store.Actor {
	if sc.agent != nil {
		return store.AgentActor(sc.agent)
	}
	return store.UserActor(sc.user)
}

func (sc *socketConn) id() string { return sc.actor().ID }

var (
	errBadOnConflict = &httpError{Code: codeInvalidOnConflict,
		Message: `on_conflict must be "supersede" or "reject"`}
	errConnectionConflict = &httpError{Code: codeConnectionConflict,
		Message: "this agent already has a connection (on_conflict=reject)"}
	errTooManySockets = &httpError{Code: codeTooManyRequests,
		Message: "too many open connections; close some or retry later"}
)

// socket is GET /api/v1/socket/websocket.
func (s *Server) socket(w http.ResponseWriter, r *http.Request) error {
	if err := checkHandshake(w, r); err != nil {
		return err
	}
	q := r.URL.Query()
	onConflict := q.Get("on_conflict")
	if onConflict == "" {
		onConflict = "supersede"
	}
	if onConflict != "supersede" && onConflict != "reject" {
		return errBadOnConflict
	}
	// Credentials that end while this one is being checked must not miss
	// the connection: register rechecks it if any ended meanwhile.
	ended := s.rt.credentialsEnded.Load()
	sc, err := s.socketPrincipal(w, r)
	if err != nil {
		return err
	}
	if err := s.rt.sockets.admit(sc, s.maxSockets, s.maxSocketsPerKey, onConflict == "reject"); err != nil {
		return err
	}

	// Serializer V2 is the only one served: clients that do not ask for it
	// are closed after the upgrade with 1011, as the hosted API does.
	vsn := q.Get("vsn")
	nc, rw, _, err := s.upgrader.Upgrade(r, w)
	if err != nil {
		s.rt.sockets.release(sc)
		return nil // gobwas answered the client already
	}
	if rec, ok := w.(*statusRecorder); ok {
		rec.status = http.StatusSwitchingProtocols
	}
	var buffered = rw.Reader
	// Registered before it is read: otherwise an older connection of the
	// same agent, registered late, could supersede this newer one.
	_, ok := s.rt.hub.Serve(nc, buffered, sc, func(c *phx.Conn) {
		if !strings.HasPrefix(vsn, "2.") {
			c.Close(phx.CloseServerError, "unsupported serializer: connect with vsn=2.0.0")
			return
		}
		s.rt.register(c, sc, ended)
	})
	if !ok {
		s.rt.sockets.release(sc)
	}
	return nil
}

// checkHandshake refuses, in the envelope, what gobwas/ws's upgrader
// would refuse itself in text/plain after hijacking the connection: it
// checks what that upgrader checks (RFC 6455 section 4.2.1), as strictly or
// more. A request that is no upgrade at all (a browser or curl opening the
// URL) is told to upgrade.
func checkHandshake(w http.ResponseWriter, r *http.Request) error {
	// gobwas reads the first value of each header, as Header.Get does.
	version := r.Header.Get("Sec-WebSocket-Version")
	switch {
	case !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || !hasUpgradeToken(r.Header.Get("Connection")):
		w.Header().Set("Upgrade", "websocket")
		return errorf(codeUpgradeRequired, "this endpoint speaks WebSocket only: send Connection: Upgrade and Upgrade: websocket")
	case !r.ProtoAtLeast(1, 1):
		return errorf(codeInvalidHandshake, "a WebSocket upgrade needs HTTP/1.1")
	case r.Host == "":
		return errorf(codeInvalidHandshake, "a WebSocket upgrade needs a Host header")
	case !validWebSocketKey(r.Header.Get("Sec-WebSocket-Key")):
		return errorf(codeInvalidHandshake, "Sec-WebSocket-Key must be 16 bytes in base64")
	case version == "":
		return errorf(codeInvalidHandshake, "Sec-WebSocket-Version is required: send 13")
	case version != "13":
		w.Header().Set("Sec-WebSocket-Version", "13")
		return errorf(codeUpgradeRequired, "the WebSocket version served is 13")
	}
	return nil
}

// hasUpgradeToken reports whether a Connection header lists "upgrade",
// every element before it being a token: stricter than gobwas, which also
// takes elements it cannot read as long as it reaches "upgrade" (and takes
// no tab between elements, which is why only spaces are trimmed here).
func hasUpgradeToken(connection string) bool {
	for _, el := range strings.Split(connection, ",") {
		el = strings.Trim(el, " ")
		if !isToken(el) {
			return false
		}
		if strings.EqualFold(el, "upgrade") {
			return true
		}
	}
	return false
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// validWebSocketKey reports whether key is a nonce as RFC 6455 defines it:
// 16 bytes in base64 (gobwas checks only its length, 24).
func validWebSocketKey(key string) bool {
	b, err := base64.StdEncoding.DecodeString(key)
	return len(key) == 24 && err == nil && len(b) == 16
}

// socketPrincipal authenticates an upgrade request (an upgrade counts
// against the rate limits like any request) and resolves agent_id.
func (s *Server) socketPrincipal(w http.ResponseWriter, r *http.Request) (*socketConn, error) {
	q := r.URL.Query()
	p, err := s.authenticateLimited(w, r, codeTooManyRequests, func(cachedOnly bool) (*store.Principal, error) {
		switch key, authz := r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"); {
		case key != "":
			return s.lookupKey(r, strings.TrimSpace(key), cachedOnly)
		case authz != "":
			scheme, token, _ := strings.Cut(strings.TrimSpace(authz), " ")
			if !strings.EqualFold(scheme, "Bearer") {
				return nil, &store.Error{Code: store.CodeUnauthorized, Message: "the Authorization header must be Bearer <token>"}
			}
			return s.principalFromToken(r.Context(), strings.TrimSpace(token))
		case q.Get("api_key") != "":
			return s.lookupKey(r, q.Get("api_key"), cachedOnly)
		case q.Get("token") != "":
			return s.principalFromToken(r.Context(), q.Get("token"))
		}
		return nil, errNoCredentials
	})
	if err != nil {
		return nil, err
	}
	if p.Delegation != nil {
		return nil, store.Errorf(store.CodeForbidden, "delegated tokens act on the REST Human API only; the agent connects with its own key")
	}
	sc := &socketConn{agent: p.Agent, user: p.User, limitKey: credentialLimitKey(p),
		heldCredential: heldBy(p), expires: p.Expires, extensions: q.Get("extensions") == "true"}
	agentID := store.NormalizeID(q.Get("agent_id"))
	switch {
	case agentID == "":
	case p.IsAgent() && agentID != p.Agent.ID:
		return nil, &store.Error{Code: store.CodeForbidden, Message: "agent_id does not name the agent this key belongs to"}
	case !p.IsAgent():
		// A person's credentials with agent_id connect as one of their agents.
		a, err := s.db.AgentByID(r.Context(), agentID)
		if store.ErrorCode(err) == store.CodeNotFound || (err == nil && a.OwnerID != p.User.ID) {
			return nil, &store.Error{Code: store.CodeForbidden, Message: "agent_id does not name an agent you own"}
		}
		if err != nil {
			return nil, err
		}
		sc.agent, sc.user = a, nil
	}
	s.db.TouchKey(p)
	return sc, nil
}

// socketRegistry counts connections against the global and per-credential
// bounds, and knows whose each one is: an agent's (one agent, one
// connection: a new one supersedes the older), and every one by the agent
// or person it acts as (to close those whose credential ended).
type socketRegistry struct {
	mu     sync.Mutex
	slots  slots
	agents map[string]map[*phx.Conn]struct{}
	byID   map[string]map[*phx.Conn]struct{} // agent or user id -> connections
}

func newSocketRegistry() socketRegistry {
	return socketRegistry{slots: newSlots(), agents: map[string]map[*phx.Conn]struct{}{},
		byID: map[string]map[*phx.Conn]struct{}{}}
}

// admit counts the connection sc is about to open against the limits
// (maxTotal in all, maxPerKey per credential), or refuses it: over a limit,
// or, with reject, for an agent that already has a connection.
func (reg *socketRegistry) admit(sc *socketConn, maxTotal, maxPerKey int, reject bool) error {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if err := reg.admitLocked(sc.limitKey, maxTotal, maxPerKey); err != nil {
		return err
	}
	if sc.agent != nil && reject && len(reg.agents[sc.agent.ID]) > 0 {
		reg.releaseLocked(sc.limitKey)
		return errConnectionConflict
	}
	return nil
}

// admitKey counts a connection of the credential limitKey (an MCP session)
// against the same limits, or refuses it.
func (reg *socketRegistry) admitKey(limitKey string, maxTotal, maxPerKey int) error {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return reg.admitLocked(limitKey, maxTotal, maxPerKey)
}

func (reg *socketRegistry) admitLocked(limitKey string, maxTotal, maxPerKey int) error {
	if !reg.slots.take(limitKey, maxTotal, maxPerKey) {
		return errTooManySockets
	}
	return nil
}

// release gives back the limits a connection held.
func (reg *socketRegistry) release(sc *socketConn) { reg.releaseKey(sc.limitKey) }

// releaseKey gives back a connection slot of the credential limitKey.
func (reg *socketRegistry) releaseKey(limitKey string) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.releaseLocked(limitKey)
}

func (reg *socketRegistry) releaseLocked(limitKey string) {
	reg.slots.give(limitKey)
}

// add records c, the connection of sc, and sets its expiry; added runs
// with it, under the same lock as remove, so that a connection closing
// meanwhile is never counted open. It returns the agent's older
// connections, which c supersedes; ok is false when c closed already
// (remove has run and must not be undone).
func (reg *socketRegistry) add(c *phx.Conn, sc *socketConn, added func(*socketConn)) (older []*phx.Conn, ok bool) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if sc.gone {
		return nil, false
	}
	added(sc)
	if sc.agent != nil {
		for o := range reg.agents[sc.agent.ID] {
			older = append(older, o)
		}
		addConn(reg.agents, sc.agent.ID, c)
	}
	addConn(reg.byID, sc.id(), c)
	if !sc.expires.IsZero() {
		sc.expiry = time.AfterFunc(time.Until(sc.expires), func() {
			c.Close(phx.ClosePolicy, "the credential expired")
		})
	}
	return older, true
}

// remove forgets c, the connection of sc, which closed.
func (reg *socketRegistry) remove(c *phx.Conn, sc *socketConn) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	sc.gone = true
	if sc.expiry != nil {
		sc.expiry.Stop()
	}
	if sc.agent != nil {
		dropConn(reg.agents, sc.agent.ID, c)
	}
	dropConn(reg.byID, sc.id(), c)
}

// agentConns returns the connections of an agent.
func (reg *socketRegistry) agentConns(agentID string) []*phx.Conn {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return slices.Collect(maps.Keys(reg.agents[agentID]))
}

// all returns every registered connection.
func (reg *socketRegistry) all() []*phx.Conn {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	var conns []*phx.Conn
	for _, set := range reg.byID {
		for conn := range set {
			conns = append(conns, conn)
		}
	}
	return conns
}

func addConn(m map[string]map[*phx.Conn]struct{}, key string, c *phx.Conn) {
	if m[key] == nil {
		m[key] = map[*phx.Conn]struct{}{}
	}
	m[key][c] = struct{}{}
}

func dropConn(m map[string]map[*phx.Conn]struct{}, key string, c *phx.Conn) {
	delete(m[key], c)
	if len(m[key]) == 0 {
		delete(m, key)
	}
}

// register records a new connection; for an agent it supersedes the
// agent's older connections (last connection wins). ended is the count of
// credentialsEnded from before the connection's credential was checked.
func (rt *realtime) register(c *phx.Conn, sc *socketConn, ended int64) {
	older, ok := rt.sockets.add(c, sc, rt.presence.opened)
	if !ok {
		return
	}
	rt.recheckIfCredentialsEnded(c, ended)
	for _, o := range older {
		// Tell the older connection why it goes (the SDKs then stop
		// reconnecting), on its control channel if it joined it.
		topic := "agent_control:" + sc.agent.ID
		if joinRef, ok := rt.hub.JoinRef(o, topic); ok {
			o.Push(joinRef, topic, "supersede", payloadJSON(map[string]any{
				"reason": "superseded", "retryable": false,
				"message": "another connection for this agent was opened; this one is closed",
			}))
		}
		o.Close(phx.ClosePolicy, "superseded by a newer connection")
	}
}

// Closed is phx.Handler: a connection is gone.
func (rt *realtime) Closed(c *phx.Conn) {
	sc := c.Value.(*socketConn)
	rt.sockets.release(sc)
	rt.sockets.remove(c, sc)
	rt.presence.closed(sc)
}
