package server

import (
	"crypto/rand"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatd/chatd/store"
)

// The MCP sessions chatd holds: whose each one is, from the moment the SDK
// names it, and how each ends: a DELETE from its client, mcpIdleTimeout
// without a request, its credential ending, its agent deleted, or
// shutdown. A session that ends stops its tools' waits at once.

const mcpIdleTimeout = 30 * time.Minute

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

	mu       sync.Mutex
	requests int           // its POSTs being answered
	answered chan struct{} // closed once it ended and answered them all
	settled  bool          // answered is closed
}

// mcpAnswerGrace bounds how long an ended session waits for the answers
// of its calls in progress before it closes anyway.
const mcpAnswerGrace = 5 * time.Second

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

// enter admits a POST of session id when the session is open and was
// opened by p's credential; leave must follow once it is answered.
func (m *mcpSessions) enter(id string, p *store.Principal) (leave func(), ok bool) {
	m.mu.Lock()
	ms, ok := m.byID[id]
	m.mu.Unlock()
	if !ok || ms.owner != credentialLimitKey(p) || !ms.enter() {
		return nil, false
	}
	return ms.leave, true
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
	ms := &mcpSession{owner: opening.owner, ended: opening.ended, answered: make(chan struct{}),
		heldCredential: heldBy(opening.principal)}
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
	endWithCredentials(m.s, "MCP sessions", m.sessions(func(*mcpSession) bool { return true }),
		func(ms *mcpSession) heldCredential { return ms.heldCredential }, (*mcpSession).end)
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

// end ends the session: its waits stop, and once the calls in progress
// have answered (a wait stopped by the end says why: waitForMessage) the
// SDK closes it. Closed at once, it would cut those answers, and a client
// would wait for them until its own timeout.
func (ms *mcpSession) end() {
	ms.endOnce.Do(func() {
		ms.mu.Lock()
		close(ms.ended)
		ms.settle()
		ms.mu.Unlock()
		go func() {
			grace := time.NewTimer(mcpAnswerGrace)
			defer grace.Stop()
			select {
			case <-ms.answered:
			case <-grace.C:
			}
			_ = ms.session.Close()
		}()
	})
}

// enter counts a POST of the session in progress, unless it ended.
func (ms *mcpSession) enter() bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	select {
	case <-ms.ended:
		return false
	default:
	}
	ms.requests++
	return true
}

func (ms *mcpSession) leave() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.requests--
	ms.settle()
}

// settle closes answered once the session ended with nothing in progress;
// ms.mu is held.
func (ms *mcpSession) settle() {
	select {
	case <-ms.ended:
	default:
		return
	}
	if ms.requests == 0 && !ms.settled {
		ms.settled = true
		close(ms.answered)
	}
}
