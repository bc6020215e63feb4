// Package apitest is what chatd's test suites share: above all, checking
// chatd's HTTP responses against chatd's own OpenAPI document
// (server/openapi, the document the binary serves); also the story an
// error tells, a free local address, and a strict reading of Prometheus
// text (promtext.go). It is imported only by tests, so kin-openapi never
// ends up in the chatd binary.
//
// The check is strict: a response whose status the operation does not list
// fails, and so does an error whose envelope code is not among the codes
// the document lists for that status (x-error-codes). So the document must
// say everything the server answers, and the server suite proves it.
package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/chatd/chatd/server/openapi"
)

// Validator validates responses against an OpenAPI document.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
}

var (
	loadOnce sync.Once
	shared   *Validator
	loadErr  error
)

// Load returns the validator for chatd's own document, loading it once.
func Load() (*Validator, error) {
	loadOnce.Do(func() { shared, loadErr = load(openapi.JSON) })
	return shared, loadErr
}

// LoadFile returns a validator for the OpenAPI document at path (the
// official Band document, for the compatibility test).
func LoadFile(path string) (*Validator, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read OpenAPI document: %w", err)
	}
	return load(raw)
}

func load(raw []byte) (*Validator, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	// The Band document's schema names hold "/" and spaces ("Agent
	// API/Identity_…"), which a JSON Pointer resolver splits; rename them
	// consistently (chatd's own names are left as they are).
	if comps, ok := doc["components"].(map[string]any); ok {
		if schemas, ok := comps["schemas"].(map[string]any); ok {
			renamed := make(map[string]any, len(schemas))
			for k, v := range schemas {
				renamed[schemaKey(k)] = v
			}
			comps["schemas"] = renamed
		}
	}
	rewriteRefs(doc)
	// The router matches full URLs; the tests' paths are made absolute
	// against this one server.
	doc["servers"] = []any{map[string]any{"url": "http://localhost"}}
	norm, _ := json.Marshal(doc)

	loader := openapi3.NewLoader()
	t, err := loader.LoadFromData(norm)
	if err != nil {
		return nil, fmt.Errorf("load OpenAPI document: %w", err)
	}
	router, err := gorillamux.NewRouter(t)
	if err != nil {
		return nil, fmt.Errorf("route OpenAPI document: %w", err)
	}
	return &Validator{doc: t, router: router}, nil
}

func schemaKey(name string) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(name)
}

func rewriteRefs(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			if s, ok := sub.(string); ok && k == "$ref" && strings.HasPrefix(s, "#/components/schemas/") {
				x[k] = "#/components/schemas/" + schemaKey(strings.TrimPrefix(s, "#/components/schemas/"))
				continue
			}
			rewriteRefs(sub)
		}
	case []any:
		for _, sub := range x {
			rewriteRefs(sub)
		}
	}
}

// Doc is the loaded document.
func (v *Validator) Doc() *openapi3.T { return v.doc }

// Operation is one documented operation.
type Operation struct {
	Method, Path string // "GET", "/api/v1/me/chats/{id}"
	Op           *openapi3.Operation
	Item         *openapi3.PathItem
}

// Operations lists every operation of the document, sorted by path and
// method.
func (v *Validator) Operations() []Operation {
	var ops []Operation
	for path, item := range v.doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, Operation{Method: method, Path: path, Op: op, Item: item})
		}
	}
	slices.SortFunc(ops, func(a, b Operation) int {
		return strings.Compare(a.Path+" "+a.Method, b.Path+" "+b.Method)
	})
	return ops
}

// Documented reports whether the document has an operation for method and path.
func (v *Validator) Documented(method, path string) bool {
	_, _, err := v.find(method, path)
	return err == nil
}

func (v *Validator) find(method, path string) (*routers.Route, map[string]string, error) {
	req, err := http.NewRequest(method, "http://localhost"+path, nil)
	if err != nil {
		return nil, nil, err
	}
	return v.router.FindRoute(req)
}

// ValidateResponse checks a response to method path (a concrete path, such
// as /api/v1/me/agents/0190…). For a documented operation the status must be
// documented, the body must match its schema, and an error's code must be
// one the document lists for that status. A request no operation matches
// must be refused: under /api/ or for a documented path, with 404 or 405;
// elsewhere (the web app's files) only errors are checked.
func (v *Validator) ValidateResponse(method, path string, status int, body []byte) error {
	route, _, err := v.find(method, path)
	if err != nil {
		return v.validateUnrouted(method, path, status, body)
	}
	where := method + " " + route.Path
	ref := route.Operation.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("%s: status %d is not documented (body %q)", where, status, body)
	}
	resp := ref.Value
	if status >= 400 {
		if err := checkErrorCode(resp, body); err != nil {
			return fmt.Errorf("%s %d: %w", where, status, err)
		}
	}
	if resp.Content == nil || len(resp.Content) == 0 {
		if len(bytes.TrimSpace(body)) != 0 {
			return fmt.Errorf("%s %d: documented without a body, got %q", where, status, body)
		}
		return nil
	}
	media := resp.Content["application/json"] // not Get, which would match a file's */*
	if media == nil || media.Schema == nil {
		return nil // a file: the body is whatever was stored
	}
	if err := visit(media.Schema.Value, body); err != nil {
		return fmt.Errorf("%s %d: %w", where, status, err)
	}
	return nil
}

// validateUnrouted checks the answer to a request no operation matches: the
// router's 404 and 405 in the envelope, or a web app file.
func (v *Validator) validateUnrouted(method, path string, status int, body []byte) error {
	api := strings.HasPrefix(path, "/api/") || v.pathDocumented(path)
	if api && status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
		return fmt.Errorf("%s %s: no documented operation, yet answered %d %q", method, path, status, body)
	}
	if status >= 400 {
		return v.validateError(status, body)
	}
	return nil
}

// pathDocumented reports whether any method of path is documented.
func (v *Validator) pathDocumented(path string) bool {
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if v.Documented(m, path) {
			return true
		}
	}
	return false
}

// checkErrorCode holds an error body's code to the response's x-error-codes.
func checkErrorCode(resp *openapi3.Response, body []byte) error {
	code, err := ErrorCodeOf(body)
	if err != nil {
		return err
	}
	codes := ErrorCodes(resp)
	if !slices.Contains(codes, code) {
		return fmt.Errorf("error code %q is not among the documented %v", code, codes)
	}
	return nil
}

// ErrorCodeOf reads the code of an error body: the envelope's
// {"error": {"code": …}}, or, from the OAuth endpoints, OAuth's
// {"error": "…"} (IsOAuthError).
func ErrorCodeOf(body []byte) (string, error) {
	var generic struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &generic); err != nil {
		return "", fmt.Errorf("error body is not JSON: %q", body)
	}
	var code string
	if json.Unmarshal(generic.Error, &code) == nil {
		return code, nil
	}
	var env struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(generic.Error, &env)
	return env.Code, nil
}

// IsOAuthError reports whether an error body is in OAuth's error format
// (RFC 6749 §5.2), which chatd's OAuth endpoints answer instead of the
// envelope.
func IsOAuthError(body []byte) bool {
	var generic struct {
		Error json.RawMessage `json:"error"`
	}
	var code string
	return json.Unmarshal(body, &generic) == nil && json.Unmarshal(generic.Error, &code) == nil
}

// ErrorCodes returns a response's x-error-codes.
func ErrorCodes(resp *openapi3.Response) []string {
	var codes []string
	switch raw := resp.Extensions["x-error-codes"].(type) {
	case []any:
		for _, c := range raw {
			codes = append(codes, fmt.Sprint(c))
		}
	case []string:
		codes = raw
	}
	return codes
}

// ErrorStatuses returns an operation's documented error statuses with their
// codes.
func ErrorStatuses(op *openapi3.Operation) map[int][]string {
	out := map[int][]string{}
	for status, ref := range op.Responses.Map() {
		n, err := strconv.Atoi(status)
		if err == nil && n >= 400 && ref.Value != nil {
			out[n] = ErrorCodes(ref.Value)
		}
	}
	return out
}

// ValidateSchema checks a JSON body against a named component schema (as
// named in the document, e.g. "UserDetails").
func (v *Validator) ValidateSchema(name string, body []byte) error {
	ref := v.doc.Components.Schemas[schemaKey(name)]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("no schema %q in the document", name)
	}
	return visit(ref.Value, body)
}

// validateError checks the error envelope; a 422 must carry details.
func (v *Validator) validateError(status int, body []byte) error {
	name := "Error"
	if status == http.StatusUnprocessableEntity {
		name = "ValidationError"
	}
	if err := v.ValidateSchema(name, body); err != nil {
		return fmt.Errorf("status %d is not the %s envelope: %w", status, name, err)
	}
	return nil
}

func visit(schema *openapi3.Schema, body []byte) error {
	var value any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&value); err != nil {
		return fmt.Errorf("body is not JSON: %w (%q)", err, body)
	}
	value = numbersToFloat(value)
	return schema.VisitJSON(value,
		openapi3.EnableJSONSchema2020(),
		openapi3.EnableFormatValidation(),
		openapi3.WithStringFormatValidators(formats),
		openapi3.VisitAsResponse(),
		openapi3.MultiErrors(),
	)
}

// formats adds the string formats the documents use beyond kin-openapi's
// built-in date and date-time (UUIDs of any RFC 9562 version: chatd's are v7).
var formats = map[string]openapi3.StringFormatValidator{
	"uuid":  openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562),
	"email": openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForEmail),
}

// numbersToFloat converts json.Number to float64, the number type the schema
// visitor expects.
func numbersToFloat(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			x[k] = numbersToFloat(sub)
		}
	case []any:
		for i, sub := range x {
			x[i] = numbersToFloat(sub)
		}
	case json.Number:
		f, _ := x.Float64()
		return f
	}
	return v
}
