// Package apitest checks chatd's HTTP responses against the official Band
// OpenAPI document. It is imported only by tests, so kin-openapi never ends
// up in the chatd binary.
package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Validator validates responses against the OpenAPI document.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
}

var (
	loadOnce sync.Once
	shared   *Validator
	loadErr  error
)

// SpecPath is where the document lives: in the shared spec folder beside the
// repository (CI checks the repository out next to it).
func SpecPath() string {
	if p := os.Getenv("CHATD_OPENAPI"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "spec", "band-openapi.json")
}

// Load returns the validator for the document at SpecPath, loading it once.
func Load() (*Validator, error) {
	loadOnce.Do(func() { shared, loadErr = load(SpecPath()) })
	return shared, loadErr
}

func load(path string) (*Validator, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read OpenAPI document: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	// The document's schema names hold "/" and spaces ("Agent API/Identity_…"),
	// which a JSON Pointer resolver splits; rename them consistently.
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

// ValidateResponse checks a response to method path (a concrete path, such as
// /api/v1/me/agents/0190…): a documented status must match its schema; an
// undocumented error status must still be the error envelope. Responses of
// operations the document lacks are checked only when they are errors.
func (v *Validator) ValidateResponse(method, path string, status int, body []byte) error {
	route, _, err := v.find(method, path)
	if err != nil {
		if status >= 400 {
			return v.validateError(status, body)
		}
		return nil
	}
	resp := route.Operation.Responses.Status(status)
	if status == http.StatusNoContent && resp == nil && strings.Contains(route.Operation.Description, "204") {
		// /messages/next documents its 204 in prose only.
		if len(bytes.TrimSpace(body)) != 0 {
			return fmt.Errorf("%s %s: 204 with a body %q", method, route.Path, body)
		}
		return nil
	}
	if resp == nil || resp.Value == nil {
		if status >= 400 {
			return v.validateError(status, body)
		}
		return fmt.Errorf("%s %s: status %d is not documented", method, route.Path, status)
	}
	media := resp.Value.Content.Get("application/json")
	if media == nil || media.Schema == nil {
		if len(bytes.TrimSpace(body)) != 0 {
			return fmt.Errorf("%s %s %d: documented without a body, got %q", method, route.Path, status, body)
		}
		return nil
	}
	if err := visit(media.Schema.Value, body); err != nil {
		return fmt.Errorf("%s %s %d: %w", method, route.Path, status, err)
	}
	return nil
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

// formats adds the string formats the document uses beyond kin-openapi's
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
