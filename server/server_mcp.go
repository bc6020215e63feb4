package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

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
	errMCPSessionRequired = errorf(codeInvalidMCPRequest, "this request needs the Mcp-Session-Id header of an initialized session")
)

func (s *Server) mcpRoutes() {
	for _, method := range []string{"POST", "GET", "DELETE"} {
		s.handle(method, "/mcp", anyCaller, s.serveMCP)
	}
}

// serveMCP passes a request to the SDK's handler once it is known to be
// the caller's: a request of a session the caller owns, or a new session
// within the caller's connection limit.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) error {
	if err := s.readMCPBody(w, r); err != nil {
		return err
	}
	p := principal(r)
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		if !s.mcp.owns(id, p) {
			return errUnknownMCPSession
		}
		return s.serveInEnvelope(s.mcp.handler, w, r)
	}
	if r.Method != http.MethodPost {
		return errMCPSessionRequired
	}
	limitKey := credentialLimitKey(p)
	if err := s.rt.sockets.admitKey(limitKey, s.maxSockets, s.maxSocketsPerKey); err != nil {
		return err
	}
	opening := &openingSession{principal: p, owner: limitKey, ended: make(chan struct{})}
	err := s.serveInEnvelope(s.mcp.handler, w, r.WithContext(context.WithValue(r.Context(), openingSessionKey{}, opening)))
	if !s.mcp.adopt(opening, func() { s.rt.sockets.releaseKey(limitKey) }) {
		s.rt.sockets.releaseKey(limitKey) // no session was opened
	}
	return err
}

// serveInEnvelope serves r with the SDK's handler, turning the refusals it
// answers in plain text into the error envelope every chatd refusal has.
func (s *Server) serveInEnvelope(h http.Handler, w http.ResponseWriter, r *http.Request) error {
	rw := &plainRefusal{ResponseWriter: w}
	h.ServeHTTP(rw, r)
	if rw.status == 0 {
		return nil
	}
	msg := strings.TrimSpace(rw.text.String())
	switch rw.status {
	case http.StatusNotFound:
		return errUnknownMCPSession
	case http.StatusForbidden:
		return store.Errorf(store.CodeForbidden, "%s", msg)
	case http.StatusMethodNotAllowed:
		return errorf(codeMethodNotAllowed, "%s", msg)
	case http.StatusRequestEntityTooLarge:
		return errorf(codePayloadTooLarge, "request body is larger than %d bytes", s.maxBody)
	case http.StatusInternalServerError:
		return fmt.Errorf("mcp: %s", msg)
	}
	return errorf(codeInvalidMCPRequest, "%s", msg)
}

// plainRefusal holds back an error the SDK writes as text (http.Error),
// for serveInEnvelope to answer in the envelope; anything else, streams
// included, passes through.
type plainRefusal struct {
	http.ResponseWriter
	status int
	text   bytes.Buffer
}

func (p *plainRefusal) WriteHeader(code int) {
	if code >= 400 && strings.HasPrefix(p.Header().Get("Content-Type"), "text/plain") {
		p.status = code
		p.Header().Del("X-Content-Type-Options")
		return
	}
	p.ResponseWriter.WriteHeader(code)
}

func (p *plainRefusal) Write(b []byte) (int, error) {
	if p.status != 0 {
		return p.text.Write(b)
	}
	return p.ResponseWriter.Write(b)
}

func (p *plainRefusal) Flush() {
	if p.status == 0 {
		_ = http.NewResponseController(p.ResponseWriter).Flush()
	}
}

func (p *plainRefusal) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// readMCPBody reads a POST's body whole, within the body limit and the
// minimum transfer rate, before the SDK looks at the request: a body too
// large is 413 whatever else is wrong with the request, as on every route.
func (s *Server) readMCPBody(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return nil
	}
	tooLarge := errorf(codePayloadTooLarge, "request body is larger than %d bytes", s.maxBody)
	if r.ContentLength > s.maxBody {
		return tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		return s.bodyReadError(err, tooLarge)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// openingSession is a session being opened by an initialize request: the
// SDK asks for the server (newMCPServer) and its id (reserve) while it
// serves the request, and serveMCP adopts the session afterwards.
type openingSession struct {
	principal *store.Principal
	owner     string
	ended     chan struct{} // closed when the session ends
	server    *mcp.Server
	id        string
}

type openingSessionKey struct{}

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
	session *mcp.ServerSession
	ended   chan struct{} // closed by end: the waits of its tools stop
	endOnce sync.Once
	owner   string // credentialLimitKey of the credential that opened it
	agentID string // the agent it acts as, if any
	heldCredential
}

func newMCPSessions(s *Server) *mcpSessions {
	m := &mcpSessions{s: s, byID: map[string]*mcpSession{}}
	m.handler = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		opening, _ := r.Context().Value(openingSessionKey{}).(*openingSession)
		if opening == nil {
			return nil
		}
		opening.server = s.newMCPServer(opening.principal, func() string { return m.reserve(opening) }, opening.ended)
		return opening.server
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

// reserve names a new session and records whose it is, before the SDK
// answers its initialize: the client's next request may come before
// serveMCP adopts the session.
func (m *mcpSessions) reserve(opening *openingSession) string {
	opening.id = rand.Text()
	ms := &mcpSession{owner: opening.owner, ended: opening.ended,
		heldCredential: heldCredential{keyID: opening.principal.KeyID, sessionID: opening.principal.SessionID}}
	if a := opening.principal.Agent; a != nil {
		ms.agentID = a.ID
	}
	m.mu.Lock()
	m.byID[opening.id] = ms
	m.mu.Unlock()
	return opening.id
}

// adopt takes on the session an initialize opened, if it did, until it
// ends, however it ends; then release gives back its connection slot. It
// reports whether there was a session.
func (m *mcpSessions) adopt(opening *openingSession, release func()) bool {
	var ss *mcp.ServerSession
	if opening.server != nil {
		for s := range opening.server.Sessions() {
			ss = s
		}
	}
	m.mu.Lock()
	ms := m.byID[opening.id]
	if ss == nil || ms == nil {
		delete(m.byID, opening.id)
		m.mu.Unlock()
		return false
	}
	ms.session = ss
	m.mu.Unlock()
	var expiry *time.Timer
	if p := opening.principal; !p.Expires.IsZero() {
		expiry = time.AfterFunc(time.Until(p.Expires), ms.end)
	}
	go func() {
		_ = ss.Wait()
		ms.end()
		if expiry != nil {
			expiry.Stop()
		}
		m.mu.Lock()
		delete(m.byID, opening.id)
		m.mu.Unlock()
		release()
	}()
	return true
}

// sessions returns the open sessions that match.
func (m *mcpSessions) sessions(match func(*mcpSession) bool) []*mcpSession {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*mcpSession
	for _, ms := range m.byID {
		if ms.session != nil && match(ms) {
			out = append(out, ms)
		}
	}
	return out
}

// closeEndedCredentials closes the sessions whose key or sign-in session
// no longer authenticates.
func (m *mcpSessions) closeEndedCredentials() {
	open := m.sessions(func(*mcpSession) bool { return true })
	held := make([]heldCredential, len(open))
	for i, ms := range open {
		held[i] = ms.heldCredential
	}
	ended, err := m.s.endedCredentials(held)
	if err != nil {
		m.s.log.Warn("checking the credentials of open MCP sessions failed", "err", err)
		return
	}
	for _, ms := range open {
		if ended[ms.keyID] || ended[ms.sessionID] {
			ms.end()
		}
	}
}

// closeAgent closes the sessions acting as a deleted agent.
func (m *mcpSessions) closeAgent(agentID string) {
	for _, ms := range m.sessions(func(ms *mcpSession) bool { return ms.agentID == agentID }) {
		ms.end()
	}
}

// closeAll ends every session, at shutdown.
func (m *mcpSessions) closeAll() {
	for _, ms := range m.sessions(func(*mcpSession) bool { return true }) {
		ms.end()
	}
}

// end ends the session: its waits stop and the SDK closes it.
func (ms *mcpSession) end() {
	ms.endOnce.Do(func() {
		close(ms.ended)
		_ = ms.session.Close()
	})
}
