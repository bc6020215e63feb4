package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/chatd/chatd/store"
)

// errorCode is a code as the error envelope carries it: the one vocabulary
// statusOf maps to HTTP statuses. Its codes come from two places. The
// store's domain codes (store.Code) say that what was asked is not allowed
// or not there; they become errorCodes where a *store.Error is answered
// (asHTTPError). The transport codes below are the refusals only this
// package decides, before or instead of asking the store: how the request
// arrived (its bytes, headers, rate or handshake), where it went (a method
// the path lacks, a feature switched off) and what only HTTP has (a cursor,
// a Range). They are errorCodes from the start and never store.Codes, which
// keeps the store's catalogue its own: a store function cannot return a
// transport refusal, nor the server add to the store's codes.
type errorCode string

// The transport codes: refusals decided by the HTTP layer before the store
// is asked. Together with the store's domain codes they form the one
// catalogue of codes that can appear in an error envelope.
const (
	codeInvalidJSON            errorCode = "invalid_json"            // the body is not one JSON value
	codeUnknownField           errorCode = "unknown_field"           // the body has a field the endpoint does not take
	codeConflictingCredentials errorCode = "conflicting_credentials" // X-API-Key and Authorization both sent
	codeMethodNotAllowed       errorCode = "method_not_allowed"
	codePayloadTooLarge        errorCode = "payload_too_large"
	codeInvalidCursor          errorCode = "invalid_cursor"
	codeInvalidOnConflict      errorCode = "invalid_on_conflict"   // socket: on_conflict is not supersede or reject
	codeConnectionConflict     errorCode = "connection_conflict"   // socket: the agent is connected and on_conflict=reject
	codeTooManyRequests        errorCode = "too_many_requests"     // socket: over the connection limits
	codeFeatureDisabled        errorCode = "feature_disabled"      // the operator switched this feature off
	codeRangeNotSatisfiable    errorCode = "range_not_satisfiable" // file download: the Range starts past the end
	codeRateLimited            errorCode = "rate_limited"          // over a rate limit (ratelimit.go)
	codeRequestTimeout         errorCode = "request_timeout"       // the request body came slower than the minimum rate (transfer.go)
	codeInvalidMCPRequest      errorCode = "invalid_mcp_request"   // /mcp: a request the MCP transport refuses (headers, JSON-RPC)

	// Refusals of requests that are not valid HTTP/1.1, which net/http
	// decides before any handler runs (refusal.go rewrites its answers into
	// the envelope), and of WebSocket handshakes gobwas/ws would refuse.
	codeMalformedRequest            errorCode = "malformed_request"             // request line, target (a bad %-escape), header line, Content-Length
	codeHostRequired                errorCode = "host_required"                 // an HTTP/1.1 request without Host
	codeInvalidHost                 errorCode = "invalid_host"                  // a Host header that is no host
	codeInvalidHeader               errorCode = "invalid_header"                // a header name that is no token, a value with control characters
	codeExpectationFailed           errorCode = "expectation_failed"            // an Expect other than 100-continue
	codeHeadersTooLarge             errorCode = "headers_too_large"             // request line and headers over the server's limit
	codeUnsupportedTransferEncoding errorCode = "unsupported_transfer_encoding" // a Transfer-Encoding other than chunked
	codeHTTPVersionNotSupported     errorCode = "http_version_not_supported"    // neither HTTP/1.0 nor HTTP/1.1 (HTTP/2 included)
	codeInvalidHandshake            errorCode = "invalid_handshake"             // socket: a WebSocket handshake gobwas/ws would refuse
	codeUpgradeRequired             errorCode = "upgrade_required"              // socket: not a WebSocket upgrade, or not version 13
)

// statusOf maps every code to its HTTP status: the store's domain codes
// first, then the transport codes. A code missing here is a bug and is
// answered as 500 (a test walks the catalogue).
var statusOf = map[errorCode]int{
	errorCode(store.CodeBadRequest):               http.StatusBadRequest,
	errorCode(store.CodeUnauthorized):             http.StatusUnauthorized,
	errorCode(store.CodeForbidden):                http.StatusForbidden,
	errorCode(store.CodeLimitReached):             http.StatusForbidden,
	errorCode(store.CodeExecutionStopped):         http.StatusForbidden,
	errorCode(store.CodeCannotRemoveSoleOwner):    http.StatusForbidden,
	errorCode(store.CodeNotFound):                 http.StatusNotFound,
	errorCode(store.CodeConflict):                 http.StatusConflict,
	errorCode(store.CodeValidation):               http.StatusUnprocessableEntity,
	errorCode(store.CodeMentionsRequired):         http.StatusUnprocessableEntity,
	errorCode(store.CodeCannotMentionSelf):        http.StatusUnprocessableEntity,
	errorCode(store.CodeDuplicateMentions):        http.StatusUnprocessableEntity,
	errorCode(store.CodeMentionNotInRoom):         http.StatusUnprocessableEntity,
	errorCode(store.CodeInvalidMentionKind):       http.StatusUnprocessableEntity,
	errorCode(store.CodeHandleNotFound):           http.StatusUnprocessableEntity,
	errorCode(store.CodeMentionMissingIdentifier): http.StatusUnprocessableEntity,
	errorCode(store.CodeUnknownAttachment):        http.StatusUnprocessableEntity,
	errorCode(store.CodeNoActiveAttempt):          http.StatusUnprocessableEntity,
	errorCode(store.CodeExecutionHistoryExists):   http.StatusUnprocessableEntity,
	errorCode(store.CodeInternal):                 http.StatusInternalServerError,
	errorCode(store.CodeUnavailable):              http.StatusServiceUnavailable,

	codeInvalidJSON:                 http.StatusBadRequest,
	codeUnknownField:                http.StatusBadRequest,
	codeConflictingCredentials:      http.StatusBadRequest,
	codeInvalidOnConflict:           http.StatusBadRequest,
	codeMalformedRequest:            http.StatusBadRequest,
	codeHostRequired:                http.StatusBadRequest,
	codeInvalidHost:                 http.StatusBadRequest,
	codeInvalidHeader:               http.StatusBadRequest,
	codeInvalidHandshake:            http.StatusBadRequest,
	codeExpectationFailed:           http.StatusExpectationFailed,
	codeUpgradeRequired:             http.StatusUpgradeRequired,
	codeHeadersTooLarge:             http.StatusRequestHeaderFieldsTooLarge,
	codeUnsupportedTransferEncoding: http.StatusNotImplemented,
	codeHTTPVersionNotSupported:     http.StatusHTTPVersionNotSupported,
	codeConnectionConflict:          http.StatusConflict,
	codeTooManyRequests:             http.StatusTooManyRequests,
	codeRateLimited:                 http.StatusTooManyRequests,
	codeFeatureDisabled:             http.StatusForbidden,
	codeMethodNotAllowed:            http.StatusMethodNotAllowed,
	codeRequestTimeout:              http.StatusRequestTimeout,
	codePayloadTooLarge:             http.StatusRequestEntityTooLarge,
	codeRangeNotSatisfiable:         http.StatusRequestedRangeNotSatisfiable,
	codeInvalidCursor:               http.StatusUnprocessableEntity,
	codeInvalidMCPRequest:           http.StatusBadRequest,

	// OAuth's codes (oauth_errors.go), answered only by the OAuth
	// endpoints, in OAuth's error format.
	errorCode(store.CodeInvalidGrant):          http.StatusBadRequest,
	errorCode(store.CodeInvalidClient):         http.StatusUnauthorized,
	errorCode(store.CodeInvalidTarget):         http.StatusBadRequest,
	errorCode(store.CodeInvalidRedirectURI):    http.StatusBadRequest,
	errorCode(store.CodeInvalidClientMetadata): http.StatusBadRequest,
	codeOAuthInvalidRequest:                    http.StatusBadRequest,
	codeOAuthUnsupportedGrantType:              http.StatusBadRequest,
	codeOAuthUnsupportedResponseType:           http.StatusBadRequest,
	codeOAuthAccessDenied:                      http.StatusForbidden,
	codeOAuthTemporarilyUnavailable:            http.StatusServiceUnavailable,
	codeOAuthServerError:                       http.StatusInternalServerError,
}

// httpError is a refusal in the envelope's terms. A transport refusal is
// made as one (errorf); a *store.Error becomes one where it is answered
// (asHTTPError).
type httpError struct {
	Code    errorCode
	Message string
	// Details is as in store.Error: Problems for a refusal of values,
	// otherwise a small object, or nil.
	Details any
}

func (e *httpError) Error() string { return string(e.Code) + ": " + e.Message }

// errorf returns a transport refusal with a formatted message.
func errorf(code errorCode, format string, args ...any) *httpError {
	return &httpError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// asHTTPError is err as the envelope answers it: an *httpError, or a
// *store.Error under its code. ok is false for any other error, which is a
// bug or an I/O failure, answered as internal_error.
func asHTTPError(err error) (e *httpError, ok bool) {
	if errors.As(err, &e) {
		return e, true
	}
	var se *store.Error
	if errors.As(err, &se) {
		return &httpError{Code: errorCode(se.Code), Message: se.Message, Details: se.Details}, true
	}
	return nil, false
}

// retryAfterSeconds is what a 503 (or a 429 over the connection limits)
// tells clients to wait: the write queue drains in milliseconds, so one
// second is plenty. A rate limit computes its own (retryError).
const retryAfterSeconds = 1

type errorBody struct {
	Code      errorCode `json:"code"`
	Message   string    `json:"message"`
	RequestID string    `json:"request_id"`
	Details   any       `json:"details,omitempty"`
	// RetryAfter repeats the Retry-After header of a 429 or 503 in seconds
	// (the SDKs read it from the body of a refused socket upgrade).
	RetryAfter int `json:"retry_after,omitempty"`
}

// classify is what err tells the client, and with which status: a refusal
// as it was made, anything else (logged here) as an internal error.
func (s *Server) classify(r *http.Request, err error) (*httpError, int) {
	e, ok := asHTTPError(err)
	if !ok {
		s.log.Error("internal error", "request_id", requestID(r), "method", r.Method, "path", r.URL.Path, "err", err)
		e = &httpError{Code: errorCode(store.CodeInternal), Message: "internal server error"}
	}
	status, ok := statusOf[e.Code]
	if !ok {
		s.log.Error("error code missing from the status table", "code", e.Code, "request_id", requestID(r))
		status = http.StatusInternalServerError
	}
	return e, status
}

// writeError answers err in the error envelope. Errors that are neither
// *httpError nor *store.Error are internal: logged with the request id,
// never echoed.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away before its answer, which cut the work
		// short: nothing went wrong here, and no one is left to tell.
		noteErrorCode(r, codeClientClosed)
		w.WriteHeader(statusClientClosed)
		return
	}
	e, status := s.classify(r, err)
	noteErrorCode(r, e.Code)
	body := errorBody{Code: e.Code, Message: e.Message, RequestID: requestID(r), Details: e.Details}
	if status == http.StatusUnprocessableEntity && body.Details == nil {
		// Validation errors always carry details keyed by JSON Pointer; the
		// empty pointer names the whole request.
		body.Details = store.Problems{"": {e.Message}}
	}
	if e.Code == codeRequestTimeout {
		// The rest of the body is still on its way: the connection cannot
		// carry another request.
		w.Header().Set("Connection", "close")
	}
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		after := retryAfterOf(err)
		w.Header().Set("Retry-After", strconv.Itoa(after))
		body.RetryAfter = after
		noteRetryReason(r, retryReasonOf(err))
	}
	writeJSON(w, status, map[string]any{"error": body})
}
