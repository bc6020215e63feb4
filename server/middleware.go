package server

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/chatd/chatd/store"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	principalKey
	callerKey
	connKey // the *refusalConn a request came on (refusal.go)
)

// callerNote is who made a request, filled in once authentication has
// decided it, for the request's log line.
type callerNote struct {
	id, kind      string // the person or agent; kind "user" or "agent"
	actingAgent   string // a delegated token: the agent acting for id
	delegationID  string
	authenticated bool
	route         *routeStats // the metrics of the route matched; nil if none (or no metrics)
	code          errorCode   // the envelope's code of a refusal, for the log line and the metrics
	retryReason   string      // why a 429 or 503 asks to retry later (retryReasonOf), for the metrics
	start         time.Time   // when the request arrived
	// handedOver is set when a handler took the connection over to answer
	// it later (a held long-poll): the line is logged when it answers.
	handedOver bool
}

// noteErrorCode records the code a refusal of r answered with.
func noteErrorCode(r *http.Request, code errorCode) {
	if n, _ := r.Context().Value(callerKey).(*callerNote); n != nil {
		n.code = code
	}
}

// noteCaller records the caller of r for its log line. Every request an
// agent makes with a delegated token is logged with that agent and the
// delegation, so the person can tell its actions from their own.
func noteCaller(r *http.Request, p *store.Principal) {
	n, _ := r.Context().Value(callerKey).(*callerNote)
	if n == nil {
		return
	}
	n.authenticated = true
	if p.Agent != nil {
		n.id, n.kind = p.Agent.ID, "agent"
		return
	}
	n.id, n.kind = p.User.ID, "user"
	if d := p.Delegation; d != nil {
		n.actingAgent, n.delegationID = d.Agent.ID, d.ID
	}
}

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// newRequestID returns a random id such as "req_5f3k9v2m1q8c7w4x0b6n".
func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "req_" + idEncoding.EncodeToString(b)
}

// validRequestID accepts a caller's X-Request-Id so traces can span a proxy,
// but only a short token of safe characters (it is logged and echoed).
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

// statusRecorder remembers the status and size of a response for the log line.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (the WebSocket
// upgrade hijacks it).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// withRequestScope wraps every request: it assigns the request id (echoed in
// x-request-id), sets headers every response carries, holds the body and the
// response to the minimum transfer rate, turns a panic into a 500 in the
// envelope, and logs one line per request. The query string is never
// logged: it may carry credentials (WebSocket api_key/token).
func (s *Server) withRequestScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		markHandling(r)
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = newRequestID()
		}
		caller := &callerNote{start: start}
		r = r.WithContext(context.WithValue(context.WithValue(r.Context(), requestIDKey, id), callerKey, caller))
		h := w.Header()
		h.Set("X-Request-Id", id)
		h.Set("X-Content-Type-Options", "nosniff")
		rec := &statusRecorder{ResponseWriter: s.limitTransferRates(w, r)}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic serving request", "request_id", id, "method", r.Method, "path", r.URL.Path,
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rec.status == 0 {
					s.writeError(rec, r, &store.Error{Code: store.CodeInternal, Message: "internal server error"})
				}
			}
			if !caller.handedOver {
				s.logRequest(r, rec.status, rec.bytes)
			}
		}()
		if r.ProtoMajor != 1 {
			// net/http passes on "PRI * HTTP/2.0", the preface of HTTP/2
			// spoken without upgrading, for handlers that speak HTTP/2
			// themselves; chatd speaks HTTP/1.1 only.
			s.writeError(rec, r, errorf(codeHTTPVersionNotSupported, "HTTP/2 is not served here: use HTTP/1.1"))
			return
		}
		next.ServeHTTP(rec, r)
	})
}

// A request whose client left before its answer (a held long-poll, or
// work the client's going cut short) is logged with nginx's 499 and this
// code: no answer reaches anyone, so neither is in the error catalogue.
const (
	statusClientClosed           = 499
	codeClientClosed   errorCode = "client_closed"
)

// logRequest writes r's one log line, and its metrics, once it is answered
// with status (0 for 200: nothing said otherwise) and bytes of body.
func (s *Server) logRequest(r *http.Request, status int, bytes int64) {
	caller, _ := r.Context().Value(callerKey).(*callerNote)
	if status == 0 {
		status = http.StatusOK
	}
	elapsed := time.Since(caller.start)
	attrs := []any{"request_id", requestID(r), "method", r.Method, "path", r.URL.Path, "status", status,
		"bytes", bytes, "duration_ms", float64(elapsed.Microseconds()) / 1000}
	if caller.code != "" {
		attrs = append(attrs, "error", string(caller.code))
	}
	if caller.authenticated {
		attrs = append(attrs, caller.kind, caller.id)
		if caller.actingAgent != "" {
			attrs = append(attrs, "acting_agent", caller.actingAgent, "delegation", caller.delegationID)
		}
	}
	s.log.Info("request", attrs...)
	if s.metrics != nil {
		s.metrics.observeRequest(r.Method, caller, status, elapsed)
	}
}
