package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/chatd/chatd/store"
)

// Transport codes: refusals decided by the HTTP layer before the store is
// asked. Together with the store's domain codes they form the one catalogue
// of codes that can appear in an error envelope.
const (
	codeInvalidJSON            store.Code = "invalid_json"            // the body is not one JSON value
	codeUnknownField           store.Code = "unknown_field"           // the body has a field the endpoint does not take
	codeConflictingCredentials store.Code = "conflicting_credentials" // X-API-Key and Authorization both sent
	codeMethodNotAllowed       store.Code = "method_not_allowed"
	codePayloadTooLarge        store.Code = "payload_too_large"
	codeInvalidCursor          store.Code = "invalid_cursor"
	codeInvalidOnConflict      store.Code = "invalid_on_conflict"   // socket: on_conflict is not supersede or reject
	codeConnectionConflict     store.Code = "connection_conflict"   // socket: the agent is connected and on_conflict=reject
	codeTooManyRequests        store.Code = "too_many_requests"     // socket: over the connection limits
	codeFeatureDisabled        store.Code = "feature_disabled"      // the operator switched this feature off
	codeRangeNotSatisfiable    store.Code = "range_not_satisfiable" // file download: the Range starts past the end
	codeRateLimited            store.Code = "rate_limited"          // over a rate limit (ratelimit.go)
	codeRequestTimeout         store.Code = "request_timeout"       // the request body came slower than the minimum rate (transfer.go)

	// Refusals of requests that are not valid HTTP/1.1, which net/http
	// decides before any handler runs (refusal.go rewrites its answers into
	// the envelope), and of WebSocket handshakes gobwas/ws would refuse.
	codeMalformedRequest            store.Code = "malformed_request"             // request line, target (a bad %-escape), header line, Content-Length
	codeHostRequired                store.Code = "host_required"                 // an HTTP/1.1 request without Host
	codeInvalidHost                 store.Code = "invalid_host"                  // a Host header that is no host
	codeInvalidHeader               store.Code = "invalid_header"                // a header name that is no token, a value with control characters
	codeExpectationFailed           store.Code = "expectation_failed"            // an Expect other than 100-continue
	codeHeadersTooLarge             store.Code = "headers_too_large"             // request line and headers over the server's limit
	codeUnsupportedTransferEncoding store.Code = "unsupported_transfer_encoding" // a Transfer-Encoding other than chunked
	codeHTTPVersionNotSupported     store.Code = "http_version_not_supported"    // neither HTTP/1.0 nor HTTP/1.1 (HTTP/2 included)
	codeInvalidHandshake            store.Code = "invalid_handshake"             // socket: a WebSocket handshake gobwas/ws would refuse
	codeUpgradeRequired             store.Code = "upgrade_required"              // socket: not a WebSocket upgrade, or not version 13
)

// statusOf maps every code to its HTTP status. A code missing here is a bug
// and is answered as 500 (a test walks the catalogue).
var statusOf = map[store.Code]int{
	store.CodeBadRequest:               http.StatusBadRequest,
	codeInvalidJSON:                    http.StatusBadRequest,
	codeUnknownField:                   http.StatusBadRequest,
	codeConflictingCredentials:         http.StatusBadRequest,
	codeInvalidOnConflict:              http.StatusBadRequest,
	codeMalformedRequest:               http.StatusBadRequest,
	codeHostRequired:                   http.StatusBadRequest,
	codeInvalidHost:                    http.StatusBadRequest,
	codeInvalidHeader:                  http.StatusBadRequest,
	codeInvalidHandshake:               http.StatusBadRequest,
	codeExpectationFailed:              http.StatusExpectationFailed,
	codeUpgradeRequired:                http.StatusUpgradeRequired,
	codeHeadersTooLarge:                http.StatusRequestHeaderFieldsTooLarge,
	codeUnsupportedTransferEncoding:    http.StatusNotImplemented,
	codeHTTPVersionNotSupported:        http.StatusHTTPVersionNotSupported,
	codeConnectionConflict:             http.StatusConflict,
	codeTooManyRequests:                http.StatusTooManyRequests,
	codeRateLimited:                    http.StatusTooManyRequests,
	store.CodeUnauthorized:             http.StatusUnauthorized,
	store.CodeForbidden:                http.StatusForbidden,
	codeFeatureDisabled:                http.StatusForbidden,
	store.CodeLimitReached:             http.StatusForbidden,
	store.CodeNotFound:                 http.StatusNotFound,
	codeMethodNotAllowed:               http.StatusMethodNotAllowed,
	codeRequestTimeout:                 http.StatusRequestTimeout,
	store.CodeConflict:                 http.StatusConflict,
	codePayloadTooLarge:                http.StatusRequestEntityTooLarge,
	codeRangeNotSatisfiable:            http.StatusRequestedRangeNotSatisfiable,
	store.CodeValidation:               http.StatusUnprocessableEntity,
	codeInvalidCursor:                  http.StatusUnprocessableEntity,
	store.CodeExecutionStopped:         http.StatusForbidden,
	store.CodeCannotRemoveSoleOwner:    http.StatusForbidden,
	store.CodeMentionsRequired:         http.StatusUnprocessableEntity,
	store.CodeCannotMentionSelf:        http.StatusUnprocessableEntity,
	store.CodeDuplicateMentions:        http.StatusUnprocessableEntity,
	store.CodeMentionNotInRoom:         http.StatusUnprocessableEntity,
	store.CodeInvalidMentionKind:       http.StatusUnprocessableEntity,
	store.CodeHandleNotFound:           http.StatusUnprocessableEntity,
	store.CodeMentionMissingIdentifier: http.StatusUnprocessableEntity,
	store.CodeUnknownAttachment:        http.StatusUnprocessableEntity,
	store.CodeNoActiveAttempt:          http.StatusUnprocessableEntity,
	store.CodeExecutionHistoryExists:   http.StatusUnprocessableEntity,
	store.CodeInternal:                 http.StatusInternalServerError,
	store.CodeUnavailable:              http.StatusServiceUnavailable,
}

// retryAfterSeconds is what a 503 (or a 429 over the connection limits)
// tells clients to wait: the write queue drains in milliseconds, so one
// second is plenty. A rate limit computes its own (retryError).
const retryAfterSeconds = 1

type errorBody struct {
	Code      store.Code `json:"code"`
	Message   string     `json:"message"`
	RequestID string     `json:"request_id"`
	Details   any        `json:"details,omitempty"`
	// RetryAfter repeats the Retry-After header of a 429 or 503 in seconds
	// (the SDKs read it from the body of a refused socket upgrade).
	RetryAfter int `json:"retry_after,omitempty"`
}

// writeError answers err in the error envelope. Errors that are not
// *store.Error are internal: logged with the request id, never echoed.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *store.Error
	if !errors.As(err, &e) {
		s.log.Error("internal error", "request_id", requestID(r), "method", r.Method, "path", r.URL.Path, "err", err)
		e = &store.Error{Code: store.CodeInternal, Message: "internal server error"}
	}
	status, ok := statusOf[e.Code]
	if !ok {
		s.log.Error("error code missing from the status table", "code", e.Code, "request_id", requestID(r))
		status = http.StatusInternalServerError
	}
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
	}
	writeJSON(w, status, map[string]any{"error": body})
}

// errorf is shorthand for a *store.Error with a formatted message.
var errorf = store.Errorf
