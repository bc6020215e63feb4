package server

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// net/http refuses some requests itself, before any handler runs, and
// writes its answer straight to the connection as text/plain with a fixed
// header block: a request line, target or header line it cannot parse
// (400, also for an invalid %-escape in the path), a missing or malformed
// Host or an invalid header name (400, the reason on the status line), a
// header block over MaxHeaderBytes (431), a Transfer-Encoding other than
// chunked (501), a version other than HTTP/1.x (505); and an Expect other
// than 100-continue gets 417 with an empty body. Clients read every error
// as the envelope, so each connection recognizes exactly those answers and
// writes the envelope in their place, with the same status, a request id
// and a code of its own.
//
// Only what is written while no handler owns the connection is looked at:
// from the connection's start, or from the moment its last response was
// written whole (http.StateIdle), until withRequestScope starts on its next
// request. A handler's response, whatever its bytes (a downloaded file may
// hold anything), goes through untouched, as does everything after a
// hijack (the WebSocket upgrade).

// jsonRefusals wraps ln so that the requests net/http refuses are answered
// in the envelope, and sets srv's hooks that tell each connection when a
// handler owns its output (keeping hooks set before).
func (s *Server) jsonRefusals(srv *http.Server, ln net.Listener) net.Listener {
	// net/http would answer OPTIONS * itself (200 without a request id);
	// chatd answers it as it answers OPTIONS on any path: 405.
	srv.DisableGeneralOptionsHandler = true
	connContext, connState := srv.ConnContext, srv.ConnState
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if connContext != nil {
			ctx = connContext(ctx, c)
		}
		if rc := asRefusalConn(c); rc != nil {
			ctx = context.WithValue(ctx, connKey, rc)
		}
		return ctx
	}
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		if rc := asRefusalConn(c); rc != nil && state == http.StateIdle {
			rc.handling.Store(false)
		}
		if connState != nil {
			connState(c, state)
		}
	}
	maxHeader := srv.MaxHeaderBytes
	if maxHeader <= 0 {
		maxHeader = http.DefaultMaxHeaderBytes
	}
	return &refusalListener{Listener: ln, s: s, maxHeader: maxHeader}
}

type refusalListener struct {
	net.Listener
	s         *Server
	maxHeader int
}

func (l *refusalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &refusalConn{Conn: c, l: l}, nil
}

// asRefusalConn finds the refusalConn in c, which another wrapper (one
// with NetConn, as tls.Conn has) may hold; nil if there is none.
func asRefusalConn(c net.Conn) *refusalConn {
	for range 8 {
		switch v := c.(type) {
		case *refusalConn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// refusalConn is one accepted connection.
type refusalConn struct {
	net.Conn
	l *refusalListener
	// handling is set while a handler owns the connection's output.
	handling atomic.Bool

	mu sync.Mutex
	// held is what net/http wrote outside a handler while it is not yet
	// known whether it is a whole refusal, some other answer, or neither.
	held []byte
}

// markHandling records that a handler now owns the output of the
// connection r came on, if it is a refusalConn.
func markHandling(r *http.Request) {
	if rc, _ := r.Context().Value(connKey).(*refusalConn); rc != nil {
		rc.handling.Store(true)
	}
}

func (c *refusalConn) Write(p []byte) (int, error) {
	if c.handling.Load() {
		return c.Conn.Write(p)
	}
	c.mu.Lock()
	c.held = append(c.held, p...)
	rf, v := parseRefusal(c.held)
	if v == partialRefusal {
		c.mu.Unlock()
		return len(p), nil
	}
	held := c.held
	c.held = nil
	c.mu.Unlock()
	if v == wholeRefusal {
		if _, err := c.Conn.Write(c.l.s.refusalResponse(rf, c.l.maxHeader, addrString(c.RemoteAddr()))); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	// Not a refusal: what was held goes out as it was written; of it, the
	// last len(p) bytes are this call's.
	n, err := c.Conn.Write(held)
	if err != nil {
		return max(0, n-(len(held)-len(p))), err
	}
	return len(p), nil
}

// release writes out whatever is still held (net/http stopped short of a
// whole refusal, which it never does), so that nothing it wrote is lost.
func (c *refusalConn) release() {
	c.mu.Lock()
	held := c.held
	c.held = nil
	c.mu.Unlock()
	if len(held) > 0 {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Conn.Write(held)
	}
}

// CloseWrite half-closes the connection as net/http does after a 431 (so
// that the client reads the answer before the connection is reset).
func (c *refusalConn) CloseWrite() error {
	c.release()
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *refusalConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// refusal is one of net/http's answers, read back.
type refusal struct {
	proto  string // HTTP/1.1 or HTTP/1.0, as net/http wrote it
	status int
	detail string // what the status line says after the reason phrase and ": "
}

type refusalVerdict int

const (
	notRefusal refusalVerdict = iota
	partialRefusal
	wholeRefusal
)

// maxRefusal bounds what is held: net/http's refusals are far shorter.
const maxRefusal = 512

// plainRefusalHead is the header block of net/http's text/plain refusals,
// after the status line.
const plainRefusalHead = "Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// parseRefusal says whether b is exactly one of net/http's refusals, the
// beginning of one, or anything else.
func parseRefusal(b []byte) (refusal, refusalVerdict) {
	var rf refusal
	if len(b) > maxRefusal {
		return rf, notRefusal
	}
	line, after, complete := strings.Cut(string(b), "\r\n")
	if !complete {
		for _, proto := range []string{"HTTP/1.1 ", "HTTP/1.0 "} {
			if strings.HasPrefix(proto, line) || strings.HasPrefix(line, proto) {
				return rf, partialRefusal
			}
		}
		return rf, notRefusal
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, reason, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if proto != "HTTP/1.1" && proto != "HTTP/1.0" || len(code) != 3 || err != nil || status < 400 {
		return rf, notRefusal
	}
	rf = refusal{proto: proto, status: status}
	_, rf.detail, _ = strings.Cut(reason, ": ")
	switch {
	case strings.HasPrefix(plainRefusalHead, after):
		return rf, partialRefusal
	case strings.HasPrefix(after, plainRefusalHead):
		// The body repeats the status line, except for 501.
		want, body := rest, after[len(plainRefusalHead):]
		if status == http.StatusNotImplemented {
			want = "Unsupported transfer encoding"
		}
		if body == want {
			return rf, wholeRefusal
		}
		if strings.HasPrefix(want, body) {
			return rf, partialRefusal
		}
	case status == http.StatusExpectationFailed:
		head, body, done := strings.Cut(after, "\r\n\r\n")
		if !done {
			return rf, partialRefusal
		}
		if body == "" && isExpectationFailedHead(head) {
			return rf, wholeRefusal
		}
	}
	return rf, notRefusal
}

// isExpectationFailedHead reports whether head is the header block net/http
// writes with its 417: Connection: close, a Date and Content-Length: 0.
func isExpectationFailedHead(head string) bool {
	seen := 0
	for _, h := range strings.Split(head, "\r\n") {
		switch {
		case h == "Connection: close", h == "Content-Length: 0", strings.HasPrefix(h, "Date: "):
			seen++
		default:
			return false
		}
	}
	return seen == 3
}

// refusalError is the envelope's error for a refusal. A refusal a later Go
// adds, not named here, is answered as the 400 malformed_request most of
// them are.
func refusalError(rf refusal, maxHeader int) *httpError {
	switch rf.status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return errorf(codeHeadersTooLarge, "the request line and headers are larger than the %d bytes accepted", maxHeader)
	case http.StatusNotImplemented:
		return errorf(codeUnsupportedTransferEncoding, "the only Transfer-Encoding accepted is chunked")
	case http.StatusHTTPVersionNotSupported:
		return errorf(codeHTTPVersionNotSupported, "only HTTP/1.1 and HTTP/1.0 are served")
	case http.StatusExpectationFailed:
		return errorf(codeExpectationFailed, "the only Expect accepted is 100-continue")
	}
	switch rf.detail {
	case "missing required Host header":
		return errorf(codeHostRequired, "an HTTP/1.1 request needs a Host header")
	case "malformed Host header":
		return errorf(codeInvalidHost, "the Host header is not a host name or address with an optional port")
	case "invalid header name":
		return errorf(codeInvalidHeader, "a header name is not a token (letters, digits and !#$%%&'*+-.^_`|~)")
	case "invalid header value":
		return errorf(codeInvalidHeader, "a header value holds a control character")
	}
	return errorf(codeMalformedRequest, "the request is not valid HTTP/1.1: a malformed request line, "+
		"request target (such as an invalid %%-escape in the path), header line, Content-Length or Transfer-Encoding")
}

// refusalResponse renders a refusal as the envelope, with the headers every
// chatd answer has, and logs it as the request's one line.
func (s *Server) refusalResponse(rf refusal, maxHeader int, remote string) []byte {
	e := refusalError(rf, maxHeader)
	id := newRequestID()
	w := &bufferedResponse{header: http.Header{}}
	w.header.Set("X-Request-Id", id)
	w.header.Set("X-Content-Type-Options", "nosniff")
	w.header.Set("Connection", "close")
	r := (&http.Request{URL: &url.URL{}}).WithContext(context.WithValue(context.Background(), requestIDKey, id))
	s.writeError(w, r, e)
	s.log.Info("request", "request_id", id, "status", w.status, "code", e.Code, "remote", remote,
		"refused", "by the HTTP parser, before routing")
	if s.metrics != nil {
		s.metrics.observeRefusal(w.status, e.Code)
	}
	return w.wire(rf.proto)
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
