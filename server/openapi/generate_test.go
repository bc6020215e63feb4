package openapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/oasdiff/yaml"
)

var update = flag.Bool("update", false, "rewrite openapi.json from the YAML sources")

// TestGenerated keeps the committed openapi.json (what the binary embeds
// and serves) equal to what the YAML sources make.
func TestGenerated(t *testing.T) {
	got, err := generate(".")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("openapi.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(got, JSON) {
		t.Fatal("openapi.json is stale: run go test ./server/openapi -run TestGenerated -update")
	}
}

// generate merges the YAML sources of dir into one document.
func generate(dir string) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	doc := map[string]any{}
	for _, f := range files {
		part, err := readYAML(f)
		if err != nil {
			return nil, err
		}
		if err := merge(doc, part, filepath.Base(f)); err != nil {
			return nil, err
		}
	}
	if err := check(doc); err != nil {
		return nil, err
	}
	render(doc)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func readYAML(path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber() // integers stay integers in the output
	var part map[string]any
	if err := dec.Decode(&part); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return part, nil
}

// merge adds part (from file) to doc. Paths may be spread over files, but
// an operation (path and method), a component (section and name) and any
// other top-level key may be defined only once: two files defining the same
// thing is a conflict to resolve, never a silent override.
func merge(doc, part map[string]any, file string) error {
	for key, val := range part {
		switch key {
		case "paths":
			if err := mergeTwoLevels(doc, key, val, file, "operation"); err != nil {
				return err
			}
		case "components":
			if err := mergeTwoLevels(doc, key, val, file, "component"); err != nil {
				return err
			}
		default:
			if _, dup := doc[key]; dup {
				return fmt.Errorf("%s: %q is already defined by another file", file, key)
			}
			doc[key] = val
		}
	}
	return nil
}

// mergeTwoLevels merges val into doc[key] two levels deep (path, method or
// section, name), refusing a second definition of the same pair.
func mergeTwoLevels(doc map[string]any, key string, val any, file, what string) error {
	dst, _ := doc[key].(map[string]any)
	if dst == nil {
		dst = map[string]any{}
		doc[key] = dst
	}
	src, ok := val.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: %s is not a mapping", file, key)
	}
	for outer, inner := range src {
		innerMap, ok := inner.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %s %s is not a mapping", file, key, outer)
		}
		d, _ := dst[outer].(map[string]any)
		if d == nil {
			d = map[string]any{}
			dst[outer] = d
		}
		for name, v := range innerMap {
			if _, dup := d[name]; dup {
				return fmt.Errorf("%s: %s %s %s is defined twice", file, what, outer, name)
			}
			d[name] = v
		}
	}
	return nil
}

var methods = []string{"get", "put", "post", "delete", "patch", "head"}

// operations calls f for every operation of doc, in a stable order.
func operations(doc map[string]any, f func(path, method string, op map[string]any)) {
	paths, _ := doc["paths"].(map[string]any)
	names := make([]string, 0, len(paths))
	for p := range paths {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		item, _ := paths[p].(map[string]any)
		for _, m := range methods {
			if op, ok := item[m].(map[string]any); ok {
				f(p, m, op)
			}
		}
	}
}

// check holds every operation to the document's conventions: an
// operationId of its own, a summary, declared tags, and for every error
// status the envelope codes it can carry.
func check(doc map[string]any) error {
	declared := map[string]bool{}
	tags, _ := doc["tags"].([]any)
	for _, tg := range tags {
		name, _ := tg.(map[string]any)["name"].(string)
		declared[name] = true
	}
	used := map[string]bool{}
	ids := map[string]string{}
	var problems []string
	operations(doc, func(path, method string, op map[string]any) {
		where := strings.ToUpper(method) + " " + path
		id, _ := op["operationId"].(string)
		if id == "" {
			problems = append(problems, where+": no operationId")
		} else if other, dup := ids[id]; dup {
			problems = append(problems, fmt.Sprintf("%s: operationId %s is also %s's", where, id, other))
		}
		ids[id] = where
		if s, _ := op["summary"].(string); s == "" {
			problems = append(problems, where+": no summary")
		}
		opTags, _ := op["tags"].([]any)
		if len(opTags) == 0 {
			problems = append(problems, where+": no tag")
		}
		for _, tg := range opTags {
			name, _ := tg.(string)
			if !declared[name] {
				problems = append(problems, fmt.Sprintf("%s: tag %q is not declared in openapi.yaml", where, name))
			}
			used[name] = true
		}
		responses, _ := op["responses"].(map[string]any)
		if len(responses) == 0 {
			problems = append(problems, where+": no responses")
		}
		for status, resp := range responses {
			if n, err := strconv.Atoi(status); err == nil && n >= 400 && len(errorCodes(doc, resp)) == 0 {
				problems = append(problems, fmt.Sprintf("%s: response %s lists no x-error-codes", where, status))
			}
		}
	})
	for name := range declared {
		if !used[name] {
			problems = append(problems, fmt.Sprintf("tag %q is declared but no operation uses it", name))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("the OpenAPI sources break the document's conventions:\n%s", strings.Join(problems, "\n"))
	}
	return nil
}

// errorCodes returns a response's x-error-codes, following a $ref to
// components/responses.
func errorCodes(doc map[string]any, resp any) []any {
	r, _ := resp.(map[string]any)
	if ref, ok := r["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/responses/")
		comps, _ := doc["components"].(map[string]any)
		all, _ := comps["responses"].(map[string]any)
		r, _ = all[name].(map[string]any)
	}
	codes, _ := r["x-error-codes"].([]any)
	return codes
}

// extensionNote tells readers of the reference that an operation is chatd's
// own; x-chatd-extension says it to programs.
const extensionNote = "**chatd extension**: not part of the Band API."

// render writes the extensions into the descriptions a reader sees: the
// error codes of each error response, and the extension note.
func render(doc map[string]any) {
	withCodes := func(r map[string]any) {
		codes, _ := r["x-error-codes"].([]any)
		if len(codes) == 0 {
			return
		}
		var names []string
		for _, c := range codes {
			names = append(names, "`"+fmt.Sprint(c)+"`")
		}
		desc, _ := r["description"].(string)
		r["description"] = strings.TrimSpace(desc + " Error codes: " + strings.Join(names, ", ") + ".")
	}
	comps, _ := doc["components"].(map[string]any)
	responses, _ := comps["responses"].(map[string]any)
	for _, r := range responses {
		withCodes(r.(map[string]any))
	}
	operations(doc, func(_, _ string, op map[string]any) {
		if ext, _ := op["x-chatd-extension"].(bool); ext {
			desc, _ := op["description"].(string)
			op["description"] = strings.TrimSpace(extensionNote + "\n\n" + desc)
		}
		for status, r := range op["responses"].(map[string]any) {
			if rm, ok := r.(map[string]any); ok && rm["$ref"] == nil {
				withEnvelope(status, rm)
				withCodes(rm)
			}
		}
	})
}

// withEnvelope gives an error response written inline with only its codes
// (and perhaps a description) the envelope it is answered with and a
// description of its status, so the sources need not repeat them.
func withEnvelope(status string, r map[string]any) {
	n, err := strconv.Atoi(status)
	if err != nil || n < 400 {
		return
	}
	if _, ok := r["description"]; !ok {
		r["description"] = http.StatusText(n) + "."
	}
	if _, ok := r["content"]; !ok {
		schema := "Error"
		if n == http.StatusUnprocessableEntity {
			schema = "ValidationError"
		}
		r["content"] = map[string]any{"application/json": map[string]any{
			"schema": map[string]any{"$ref": "#/components/schemas/" + schema}}}
	}
}
