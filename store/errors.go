package store

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Code is a machine-readable error code, exactly as it appears in the API's
// error envelope. The server maps each code to one HTTP status in one table.
type Code string

// The domain codes: the store's own. The server answers what is wrong with
// how a request arrived (malformed JSON, an unknown route, ...) with
// transport codes of its own type (server/errors.go), in the same envelope.
const (
	CodeValidation   Code = "validation_error"    // 422: the request is well-formed but its values are not acceptable
	CodeBadRequest   Code = "bad_request"         // 400: missing identifier, malformed handle, ...
	CodeUnauthorized Code = "unauthorized"        // 401: missing or invalid credentials
	CodeForbidden    Code = "forbidden"           // 403: authenticated, but not permitted
	CodeLimitReached Code = "limit_reached"       // 403: a plan quota is exhausted
	CodeNotFound     Code = "not_found"           // 404: missing, or not visible to the caller
	CodeConflict     Code = "conflict"            // 409: the resource already exists or is in the way
	CodeUnavailable  Code = "service_unavailable" // 503: the write queue is full or the server is stopping; retry
	CodeInternal     Code = "internal_error"      // 500: a bug or an I/O failure; never carries internals

	// 403 refinements.
	CodeExecutionStopped      Code = "execution_stopped"        // the agent is blocked in the room
	CodeCannotRemoveSoleOwner Code = "cannot_remove_sole_owner" // the room would be left without an owner

	// 422 refinements of message creation (the spec's codes).
	CodeMentionsRequired         Code = "mentions_required"
	CodeCannotMentionSelf        Code = "cannot_mention_self"
	CodeDuplicateMentions        Code = "duplicate_mentions"
	CodeMentionNotInRoom         Code = "mentioned_participant_not_in_room"
	CodeInvalidMentionKind       Code = "invalid_mention_kind"
	CodeHandleNotFound           Code = "handle_not_found"
	CodeMentionMissingIdentifier Code = "mention_missing_identifier"
	CodeUnknownAttachment        Code = "unknown_attachment"

	// Other 422 refinements.
	CodeNoActiveAttempt        Code = "no_active_attempt"        // processed/failed without a processing attempt
	CodeExecutionHistoryExists Code = "execution_history_exists" // deleting an agent that processed messages, without force

	// OAuth refusals: the vocabulary the OAuth RFCs prescribe (RFC 6749 §5.2,
	// RFC 7591 §3.2.2, RFC 8707 §2). Only the OAuth endpoints answer them,
	// in OAuth's own error format rather than the envelope
	// (server/oauth_errors.go).
	CodeInvalidGrant          Code = "invalid_grant"           // 400: a code or refresh token unknown, used, expired, or another client's
	CodeInvalidClient         Code = "invalid_client"          // 401: no registered client has this id
	CodeInvalidTarget         Code = "invalid_target"          // 400: a resource the grant is not for
	CodeInvalidRedirectURI    Code = "invalid_redirect_uri"    // 400: registration: a redirect URI chatd does not take
	CodeInvalidClientMetadata Code = "invalid_client_metadata" // 400: registration: other metadata refused
)

// Error is the one application error type. Everything the store refuses on
// purpose is an *Error; anything else reaching the HTTP layer is a bug or an I/O
// failure and is answered as internal_error without echoing it.
type Error struct {
	Code    Code
	Message string
	// Details is optional. Validation errors carry Problems (JSON Pointer ->
	// messages); other errors may carry a small object such as a quota's
	// resource, limit and current count.
	Details any
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, or CodeInternal when err is not an *Error.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Problems collects validation problems keyed by RFC 6901 JSON Pointer
// ("/message/mentions/1/handle"), each with one or more messages.
type Problems map[string][]string

// Add records a problem at pointer.
func (p Problems) Add(pointer, format string, args ...any) {
	p[pointer] = append(p[pointer], fmt.Sprintf(format, args...))
}

// Err returns nil when nothing was recorded, otherwise an *Error with the given
// code whose message names the first problem (in pointer order) and whose
// details hold them all. When the code is about one problem in particular,
// use ErrAt, so that the message and the code tell the same story.
func (p Problems) Err(code Code) error { return p.ErrAt(code, "") }

// ErrAt is Err with the message led by the problem at pointer lead, the one
// the code names; "" or a pointer with no problem leads with the first.
func (p Problems) ErrAt(code Code, lead string) error {
	if len(p) == 0 {
		return nil
	}
	return &Error{Code: code, Message: p.Summary(lead), Details: p}
}

// Summary is the message of ErrAt's error: the problem at pointer lead (""
// or a pointer with no problem: the first in pointer order) and how many
// more there are. The server words its own refusals of a body's fields with
// it (server/body.go).
func (p Problems) Summary(lead string) string {
	if len(p) == 0 {
		return ""
	}
	if len(p[lead]) == 0 {
		pointers := make([]string, 0, len(p))
		for k := range p {
			pointers = append(pointers, k)
		}
		sort.Strings(pointers)
		lead = pointers[0]
	}
	msg := lead + " " + p[lead][0]
	if len(p) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(p)-1)
	}
	return strings.TrimSpace(msg)
}

// codedProblems collects validation problems; the error's code is the code
// of the first problem found (checks run in a fixed order: the body's own
// checks, then those against the room), its message leads with that problem,
// and its details hold every problem of the stage that found one.
type codedProblems struct {
	code Code
	lead string // the pointer of the problem the code names
	p    Problems
}

func (c *codedProblems) add(code Code, pointer, msg string) {
	if c.p == nil {
		c.p = Problems{}
	}
	if c.code == "" {
		c.code, c.lead = code, pointer
	}
	c.p[pointer] = append(c.p[pointer], msg)
}

func (c *codedProblems) err() error {
	if c.code == "" {
		return nil
	}
	return c.p.ErrAt(c.code, c.lead)
}

// Pointer builds an RFC 6901 JSON Pointer from path segments, escaping "~" and "/".
func Pointer(segments ...any) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteByte('/')
		part := fmt.Sprint(s)
		part = strings.ReplaceAll(part, "~", "~0")
		part = strings.ReplaceAll(part, "/", "~1")
		b.WriteString(part)
	}
	return b.String()
}

// The catalogue of errors the store returns as values.
var (
	// ErrQueueFull is returned at once, without blocking, when the writer's
	// queue is full. Callers answer 503 with Retry-After.
	ErrQueueFull = &Error{Code: CodeUnavailable, Message: "the server is busy writing; retry shortly"}
	// ErrClosed is returned for writes submitted while the database shuts down.
	ErrClosed = &Error{Code: CodeUnavailable, Message: "the server is shutting down; retry shortly"}
	// ErrLocked is returned when another process held the database's write
	// lock past the busy timeout.
	ErrLocked = &Error{Code: CodeUnavailable, Message: "the database is locked by another process; retry shortly"}
	// ErrBulkQueueFull refuses a bulk deletion job while the open ones reach
	// the bulk queue's bound.
	ErrBulkQueueFull = &Error{Code: CodeUnavailable, Message: "too many bulk deletion jobs are waiting; retry shortly"}
	// ErrNotFound is the generic "missing or not yours" answer.
	ErrNotFound = &Error{Code: CodeNotFound, Message: "not found"}
)

// notFound returns a not_found error naming the kind of resource.
func notFound(what string) *Error {
	return &Error{Code: CodeNotFound, Message: what + " not found"}
}

// limitReached is the quota error: 403 limit_reached naming the resource, the
// limit and the current count.
func limitReached(resource string, limit, current int) *Error {
	return &Error{
		Code:    CodeLimitReached,
		Message: fmt.Sprintf("limit reached: at most %d %s", limit, resource),
		Details: map[string]any{"resource": resource, "limit": limit, "current": current},
	}
}
