package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/chatd/chatd/store"
)

// Most MCP tools are a REST request made in-process: the route's own
// handler decodes the arguments, calls the store and renders the answer,
// so a tool and its REST route cannot differ in a rule, a limit, a view or
// an error code. The answer's data becomes the tool's result; a refusal
// becomes a tool error carrying the envelope's code and message.

// routeCall is the REST request behind one tool call.
type routeCall struct {
	method, route string   // the route as registered: /api/v1/agent/chats/:chat_id
	params        []string // the values of the route's parameters, in order
	query         url.Values
	body          any    // sent as the JSON body; nil for none
	result        string // the key of the answer's data in the tool's result
	// bodyKey is the body's wrapping key ("message" in {"message": {...}}):
	// a refusal's pointers name the tool's arguments without it.
	bodyKey string
	// renamed maps the pointers of query parameters the tool's arguments
	// name otherwise ("/q" is the argument "/query"), so that a refusal
	// names the argument.
	renamed map[string]string
}

// callRoute answers rc for p as its route's handler does: the tool's
// result, or a *toolError.
func (s *Server) callRoute(ctx context.Context, p *store.Principal, rc routeCall) (map[string]any, error) {
	rt, ok := s.route(rc.method, rc.route)
	if !ok {
		return nil, fmt.Errorf("mcp: no route %s %s", rc.method, rc.route)
	}
	if err := admits(rt.aud, p); err != nil {
		return nil, s.toolError(err, "")
	}
	if err := allowedFor(p, rt.scope); err != nil {
		return nil, s.toolError(err, "")
	}
	path, values := fillRoute(rc.route, rc.params)
	if len(rc.query) > 0 {
		path += "?" + rc.query.Encode()
	}
	body := io.Reader(http.NoBody)
	if rc.body != nil {
		b, err := json.Marshal(rc.body)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(withCaller(ctx, p), rc.method, path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for _, v := range values {
		req.SetPathValue(v.Key, v.Value)
	}
	answer := newAnswerBuffer()
	if err := rt.h(answer, req); err != nil {
		return nil, renamePointers(s.toolError(err, rc.bodyKey), rc.renamed)
	}
	return answer.result(rc.result)
}

// fillRoute puts the parameter values into a registered route, as the
// router would have read them from a request's path.
func fillRoute(route string, values []string) (string, httprouter.Params) {
	segments := strings.Split(route, "/")
	var ps httprouter.Params
	for i, seg := range segments {
		if !strings.HasPrefix(seg, ":") || len(ps) == len(values) {
			continue
		}
		v := store.NormalizeID(values[len(ps)])
		ps = append(ps, httprouter.Param{Key: seg[1:], Value: v})
		segments[i] = url.PathEscape(v)
	}
	return strings.Join(segments, "/"), ps
}

// answerBuffer is the ResponseWriter a handler answers a tool call into.
type answerBuffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newAnswerBuffer() *answerBuffer { return &answerBuffer{header: http.Header{}} }

func (a *answerBuffer) Header() http.Header { return a.header }

func (a *answerBuffer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
}

func (a *answerBuffer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

// result is the tool's result: the answer's data under key, and its
// listing metadata, if any. An answer without a body (204) is {}.
func (a *answerBuffer) result(key string) (map[string]any, error) {
	out := map[string]any{}
	if a.body.Len() == 0 {
		return out, nil
	}
	var answer struct {
		Data     json.RawMessage `json:"data"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(a.body.Bytes(), &answer); err != nil {
		return nil, fmt.Errorf("mcp: decode the answer: %w", err)
	}
	out[key] = answer.Data
	if answer.Metadata != nil {
		out["metadata"] = answer.Metadata
	}
	return out, nil
}

// toolError is a refusal as a tool answers it: the error envelope's JSON,
// the text the client's model reads.
type toolError struct {
	Code    errorCode `json:"code"`
	Message string    `json:"message"`
	Details any       `json:"details,omitempty"`
}

func (e *toolError) Error() string {
	b, _ := json.Marshal(map[string]any{"error": e})
	return string(b)
}

// toolError renders err as the envelope would, with pointers into the
// request body (under bodyKey) turned into pointers to the tool's
// arguments. Errors that are not refusals are logged, never echoed.
func (s *Server) toolError(err error, bodyKey string) error {
	if te, ok := err.(*toolError); ok {
		return te
	}
	e, ok := asHTTPError(err)
	if !ok {
		s.log.Error("internal error in an MCP tool", "err", err)
		return &toolError{Code: errorCode(store.CodeInternal), Message: "internal server error"}
	}
	te := &toolError{Code: e.Code, Message: e.Message, Details: e.Details}
	if problems, ok := e.Details.(store.Problems); ok && bodyKey != "" {
		unwrapped := store.Problems{}
		for ptr, msgs := range problems {
			unwrapped[strings.TrimPrefix(ptr, "/"+bodyKey)] = msgs
		}
		te.Details = unwrapped
		te.Message = strings.ReplaceAll(te.Message, "/"+bodyKey+"/", "/")
	}
	return te
}

// renamePointers renames the pointers of a refusal's details as renamed
// says, and words its message after the renamed problems.
func renamePointers(err error, renamed map[string]string) error {
	te, ok := err.(*toolError)
	if !ok || len(renamed) == 0 {
		return err
	}
	problems, ok := te.Details.(store.Problems)
	if !ok {
		return err
	}
	out, changed := store.Problems{}, false
	for ptr, msgs := range problems {
		if to, ok := renamed[ptr]; ok {
			ptr, changed = to, true
		}
		out[ptr] = append(out[ptr], msgs...)
	}
	if changed {
		te.Details, te.Message = out, out.Summary("")
	}
	return te
}
