package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatd/chatd/store"
)

// /mcp serves the Model Context Protocol's Streamable HTTP transport
// through the official Go SDK, so an MCP client joins chatd with one URL
// and one credential. Authentication, rate limits and the error envelope
// are the REST API's (the route is registered like any other); the SDK
// speaks the protocol. Each session is a server of its own, made for the
// credential that opened it: an agent's key gets the agent tools, a
// person's key or token the human tools, and every tool acts as that
// caller (mcp_tools.go).
//
// A session belongs to the credential that opened it: another credential
// naming its id gets 404, as for anything it may not see. Sessions count
// against the per-credential connection limit together with sockets, end
// when their credential ends (as sockets do, credentials.go), after
// mcpIdleTimeout without a request, and at shutdown.

const mcpIdleTimeout = 30 * time.Minute

var (
	errUnknownMCPSession = &store.Error{Code: store.CodeNotFound,
		Message: "MCP session not found: it ended or belongs to another credential; initialize a new one"}
	errMCPSessionRequired = errorf(codeMalformedRequest, "this request needs the Mcp-Session-Id header of an initialized session")
)

func (s *Server) mcpRoutes() {
	for _, method := range []string{"POST", "GET", "DELETE"} {
		s.handle(method, "/mcp", anyCaller, s.serveMCP)
	}
}

// serveMCP passes a request to the SDK's handler once it is known to be
// the caller's: a request of a session the caller owns, or a new session
// within the caller's connection limit.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := principal(r)
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		if !s.mcp.owns(id, p) {
			return errUnknownMCPSession
		}
		s.mcp.handler.ServeHTTP(w, r)
		return nil
	}
	if r.Method != http.MethodPost {
		return errMCPSessionRequired
	}
	limitKey := credentialLimitKey(p)
	if err := s.rt.sockets.admitKey(limitKey, s.maxSockets, s.maxSocketsPerKey); err != nil {
		return err
	}
	opened := &openedSession{}
	s.mcp.handler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), openedSessionKey{}, opened)))
	if opened.server == nil {
		s.rt.sockets.releaseKey(limitKey)
		return nil
	}
	for ss := range opened.server.Sessions() {
		s.mcp.adopt(ss, p, limitKey, func() { s.rt.sockets.releaseKey(limitKey) })
		return nil
	}
	s.rt.sockets.releaseKey(limitKey) // the SDK refused to open it
	return nil
}

// openedSession carries the server the SDK made for a new session back to
// serveMCP, which adopts the session.
type openedSession struct{ server *mcp.Server }

type openedSessionKey struct{}

// credentialLimitKey is what the per-credential connection limit counts:
// an API key, or the caller of a bearer token.
func credentialLimitKey(p *store.Principal) string {
	if p.KeyID != "" {
		return "key:" + p.KeyID
	}
	return "token:" + p.Actor().ID
}

// mcpSessions knows every open MCP session and whose it is.
type mcpSessions struct {
	s       *Server
	handler http.Handler
	mu      sync.Mutex
	byID    map[string]*mcpSession
}

type mcpSession struct {
	session   *mcp.ServerSession
	owner     string // credentialLimitKey of the credential that opened it
	agentID   string // the agent it acts as, if any
	keyID     string
	sessionID string
}

func newMCPSessions(s *Server) *mcpSessions {
	m := &mcpSessions{s: s, byID: map[string]*mcpSession{}}
	m.handler = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		opened, _ := r.Context().Value(openedSessionKey{}).(*openedSession)
		if opened == nil {
			return nil
		}
		opened.server = s.newMCPServer(principal(r))
		return opened.server
	}, &mcp.StreamableHTTPOptions{
		SessionTimeout:      mcpIdleTimeout,
		MaxRequestBodyBytes: s.maxBody,
		// Every request carries a credential in a header, which a page on
		// a rebinding host cannot send; and chatd on 127.0.0.1 behind a
		// reverse proxy sees the public host name.
		DisableLocalhostProtection: true,
	})
	return m
}

// owns reports whether session id is open and was opened by p's credential.
func (m *mcpSessions) owns(id string, p *store.Principal) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.byID[id]
	return ok && ms.owner == credentialLimitKey(p)
}

// adopt records a new session of p's; release gives back its connection
// slot when it ends, however it ends.
func (m *mcpSessions) adopt(ss *mcp.ServerSession, p *store.Principal, owner string, release func()) {
	ms := &mcpSession{session: ss, owner: owner, keyID: p.KeyID, sessionID: p.SessionID}
	if p.Agent != nil {
		ms.agentID = p.Agent.ID
	}
	m.mu.Lock()
	m.byID[ss.ID()] = ms
	m.mu.Unlock()
	var expiry *time.Timer
	if !p.Expires.IsZero() {
		expiry = time.AfterFunc(time.Until(p.Expires), func() { _ = ss.Close() })
	}
	go func() {
		_ = ss.Wait()
		if expiry != nil {
			expiry.Stop()
		}
		m.mu.Lock()
		delete(m.byID, ss.ID())
		m.mu.Unlock()
		release()
	}()
}

// sessions returns the open sessions that match.
func (m *mcpSessions) sessions(match func(*mcpSession) bool) []*mcpSession {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*mcpSession
	for _, ms := range m.byID {
		if match(ms) {
			out = append(out, ms)
		}
	}
	return out
}

// closeEndedCredentials closes the sessions whose key or sign-in session
// no longer authenticates.
func (m *mcpSessions) closeEndedCredentials() {
	open := m.sessions(func(*mcpSession) bool { return true })
	var keys, sessions []string
	for _, ms := range open {
		if ms.keyID != "" {
			keys = append(keys, ms.keyID)
		}
		if ms.sessionID != "" {
			sessions = append(sessions, ms.sessionID)
		}
	}
	if len(keys)+len(sessions) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ended, err := m.s.db.EndedCredentials(ctx, keys, sessions)
	if err != nil {
		m.s.log.Warn("checking the credentials of open MCP sessions failed", "err", err)
		return
	}
	for _, ms := range open {
		if ended[ms.keyID] || ended[ms.sessionID] {
			_ = ms.session.Close()
		}
	}
}

// closeAgent closes the sessions acting as a deleted agent.
func (m *mcpSessions) closeAgent(agentID string) {
	for _, ms := range m.sessions(func(ms *mcpSession) bool { return ms.agentID == agentID }) {
		_ = ms.session.Close()
	}
}

// closeAll ends every session, at shutdown.
func (m *mcpSessions) closeAll() {
	for _, ms := range m.sessions(func(*mcpSession) bool { return true }) {
		_ = ms.session.Close()
	}
}
