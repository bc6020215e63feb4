package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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
	if err := s.checkMCPOrigin(r); err != nil {
		return err
	}
	if err := s.readMCPBody(w, r); err != nil {
		return err
	}
	p := principal(r)
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		if r.Method != http.MethodPost {
			// A GET's stream lasts as long as the session: it is no
			// answer the session's end waits for.
			if !s.mcp.owns(id, p) {
				return errUnknownMCPSession
			}
			return s.serveInEnvelope(s.mcp.handler, w, r)
		}
		leave, ok := s.mcp.enter(id, p)
		if !ok {
			return errUnknownMCPSession
		}
		defer leave()
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

// checkMCPOrigin refuses a request a browser sent from another site's page
// (the Origin header names it), as the MCP transport requires against DNS
// rebinding: a page must not reach the endpoint of a server on the user's
// machine or network. The Host header cannot tell: under rebinding it is
// the attacker's name. So the pages allowed are those of the public URL
// and of this machine (a local inspector); clients other than browsers
// send no Origin.
func (s *Server) checkMCPOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" || s.mcpOriginAllowed(origin) {
		return nil
	}
	return &store.Error{Code: store.CodeForbidden,
		Message: "the Origin " + strconv.Quote(origin) + " is neither this server's public URL nor this machine: MCP requests from another site's page are refused"}
}

func (s *Server) mcpOriginAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	// The public URL is an origin already: scheme and host, no path.
	if s.publicURL != "" && strings.EqualFold(origin, s.publicURL) {
		return true
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback()
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
		return s.bodyTooLarge()
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
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// credentialLimitKey is what the per-credential connection limit counts:
// an API key, an OAuth grant (all its access tokens, so that a session
// carries on with the token that replaced the one that opened it), or the
// caller of a bearer token.
func credentialLimitKey(p *store.Principal) string {
	switch {
	case p.KeyID != "":
		return "key:" + p.KeyID
	case p.OAuthGrantID != "":
		return "oauth:" + p.OAuthGrantID
	}
	return "token:" + p.Actor().ID
}
