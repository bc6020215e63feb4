package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chatd/chatd/store"
)

// writeJSON writes v as the JSON body of a response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only a programming error (an unencodable type) gets here; the
		// answer is still the envelope, with the id withRequestScope set.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, `{"error":{"code":"internal_error","message":"response encoding failed","request_id":%s}}`+"\n",
			strconv.Quote(w.Header().Get("X-Request-Id")))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// reply answers v as the data of a response with status: {"data": v}.
func reply(w http.ResponseWriter, status int, v any) error {
	writeJSON(w, status, map[string]any{"data": v})
	return nil
}

// replyPage answers a page of a listing: its items as data, with its
// metadata.
func replyPage(w http.ResponseWriter, items, metadata any) error {
	writeJSON(w, http.StatusOK, map[string]any{"data": items, "metadata": metadata})
	return nil
}

// noContent answers 204, with no body.
func noContent(w http.ResponseWriter) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// viewsOf renders each of items with view.
func viewsOf[T, V any](items []T, view func(T) V) []V {
	out := make([]V, len(items))
	for i, it := range items {
		out[i] = view(it)
	}
	return out
}

// decodeBody reads the JSON request body into dst, a pointer to a struct.
//
// An empty body reads as {} (clients send no body to endpoints whose fields
// are all optional). A body that is not exactly one JSON value, not UTF-8,
// or with a string that is not (an unpaired surrogate escape), is 400
// invalid_json; a field dst does not declare is 400 unknown_field, with the
// JSON Pointer of each such field; a value of the wrong type is 422
// validation_error at its pointer, as is a field tagged chatd:"required"
// that is absent or null (missingFields). A body over the size limit is 413,
// one that arrives too slowly 408. The ids in dst's id fields are normalized
// (normalizeIDs).
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	raw, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	// JSON text is UTF-8; decoding would turn other bytes into U+FFFD and
	// store the text damaged without a word.
	if !utf8.Valid(raw) {
		return errorf(codeInvalidJSON, "request body is not valid UTF-8, which JSON text must be")
	}
	if at := loneSurrogate(raw); at >= 0 {
		return errorf(codeInvalidJSON, "request body is not JSON text chatd can keep: its unpaired surrogate escape %s at byte %d names no character", raw[at:at+6], at)
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return errorf(codeInvalidJSON, "request body is not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(codeInvalidJSON, "request body must hold exactly one JSON value")
	}
	unknown, wrongType := store.Problems{}, store.Problems{}
	checkShape(generic, reflect.TypeOf(dst), "", unknown, wrongType)
	if len(unknown) > 0 {
		return &httpError{Code: codeUnknownField, Message: "request body has an unknown field: " + unknown.Summary(""), Details: unknown}
	}
	if len(wrongType) > 0 {
		return wrongType.Err(store.CodeValidation)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		// checkShape catches what encoding/json would refuse; this is a
		// safety net with a less precise pointer.
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return store.Problems{"/" + strings.ReplaceAll(typeErr.Field, ".", "/"): {"must be " + jsonKind(typeErr.Type)}}.Err(store.CodeValidation)
		}
		return errorf(codeInvalidJSON, "request body is not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	normalizeIDs(reflect.ValueOf(dst), false)
	missing := store.Problems{}
	missingFields(reflect.ValueOf(dst), "", missing)
	return missing.Err(store.CodeValidation)
}

// loneSurrogate returns the offset of the first \uD800–\uDFFF escape in
// raw that is not half of a pair (a high one followed at once by a low
// one), or -1. encoding/json would decode it to U+FFFD: the same silent
// damage as bytes that are not UTF-8. Every backslash outside a string
// makes the body invalid JSON anyway, so raw is scanned whole.
func loneSurrogate(raw []byte) int {
	for i := 0; i < len(raw)-1; i++ {
		if raw[i] != '\\' {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // an escaped character, a backslash among them
			continue
		}
		r, ok := escapedUnit(raw, i)
		switch {
		case !ok || r < 0xD800 || r > 0xDFFF:
		case r >= 0xDC00:
			return i // a low surrogate with no high one before it
		default:
			if low, ok := escapedUnit(raw, i+6); !ok || low < 0xDC00 || low > 0xDFFF {
				return i
			}
			i += 6 // the pair's low half
		}
		i += 5
	}
	return -1
}

// escapedUnit reads the UTF-16 unit of a \uXXXX escape at raw[i:].
func escapedUnit(raw []byte, i int) (rune, bool) {
	if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
	return rune(n), err == nil
}

// bodyHandler is an endpoint that takes a JSON body, decoded into req.
type bodyHandler[T any] func(w http.ResponseWriter, r *http.Request, req T) error

// withBody serves h with the request's body decoded into h's request type
// by decodeBody, whose refusals are answered before h runs.
func withBody[T any](s *Server, h bodyHandler[T]) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req T
		if err := s.decodeBody(w, r, &req); err != nil {
			return err
		}
		return h(w, r, req)
	}
}

// emptyBody is the request of an endpoint that takes none: no body, or {}.
type emptyBody struct{}

// readBody reads a request body whole, within the body limit (413 beyond)
// and the minimum transfer rate (408).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	tooLarge := s.bodyTooLarge()
	// A declared length over the limit is refused before the body is read:
	// otherwise a client could make the server wait for, and read, the
	// limit's worth of a body that will be refused anyway.
	if r.ContentLength > s.maxBody {
		return nil, tooLarge
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		return nil, s.bodyReadError(err, tooLarge)
	}
	return raw, nil
}

// bodyTooLarge refuses a body over the limit.
func (s *Server) bodyTooLarge() *httpError {
	return errorf(codePayloadTooLarge, "request body is larger than %d bytes", s.maxBody)
}

// bodyReadError answers a request body that could not be read to its end:
// tooLarge past its size limit, 408 request_timeout when it came slower than
// the minimum rate, 400 otherwise (a broken chunked encoding, a client gone).
func (s *Server) bodyReadError(err, tooLarge error) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return tooLarge
	case errors.Is(err, errBodyTooSlow):
		return errorf(codeRequestTimeout, "the request body arrived too slowly: less than %d KiB in %s", transferUnit>>10, s.transferTimeout)
	}
	return store.Errorf(store.CodeBadRequest, "could not read the request body")
}

// normalizeIDs puts the UUIDs a decoded body holds in its id fields into
// the lower case chatd stores (store.NormalizeID). An id field is one whose
// JSON name is id or ids or ends in _id or _ids, unless it is tagged
// chatd:"verbatim" (an id of the client's own, echoed as sent); it holds a
// string, a pointer to one, or a list of either. isID says whether v is
// (inside) such a field.
func normalizeIDs(v reflect.Value, isID bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			normalizeIDs(v.Elem(), isID)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // json.RawMessage: the client's own JSON, kept as sent
		}
		for i := 0; i < v.Len(); i++ {
			normalizeIDs(v.Index(i), isID)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() && !f.Anonymous || name == "-" {
				continue
			}
			id := name == "id" || name == "ids" || strings.HasSuffix(name, "_id") || strings.HasSuffix(name, "_ids")
			normalizeIDs(v.Field(i), id && f.Tag.Get("chatd") != "verbatim")
		}
	case reflect.String:
		if isID && v.CanSet() {
			v.SetString(store.NormalizeID(v.String()))
		}
	}
}

// missingFields records, under their JSON Pointers, the pointer fields
// tagged chatd:"required" that a decoded body v lacks (absent or null). The
// fields of an object that is itself absent are not looked at: the object
// is what is missing.
func missingFields(v reflect.Value, at string, missing store.Problems) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		field := v.Field(i)
		if f.Tag.Get("chatd") == "required" && field.Kind() == reflect.Pointer && field.IsNil() {
			missing.Add(at+store.Pointer(name), "is required")
			continue
		}
		missingFields(field, at+store.Pointer(name), missing)
	}
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// checkShape walks a decoded JSON value beside the Go type it will be
// decoded into, recording under their JSON Pointers the object keys the type
// does not declare (unknown) and the values of the wrong JSON type
// (wrongType). JSON null is accepted anywhere, as encoding/json accepts it.
func checkShape(v any, t reflect.Type, at string, unknown, wrongType store.Problems) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil || t == rawMessageType || t.Kind() == reflect.Interface {
		return
	}
	mismatch := func() { wrongType.Add(at, "must be %s", jsonKind(t)) }
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for k, sub := range val {
				ft, ok := fields[k]
				if !ok {
					unknown.Add(at+store.Pointer(k), "is not a recognised field; accepted here: %s", acceptedFields(fields))
					continue
				}
				checkShape(sub, ft, at+store.Pointer(k), unknown, wrongType)
			}
		case reflect.Map:
			for k, sub := range val {
				checkShape(sub, t.Elem(), at+store.Pointer(k), unknown, wrongType)
			}
		default:
			mismatch()
		}
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			mismatch()
			return
		}
		for i, sub := range val {
			checkShape(sub, t.Elem(), at+store.Pointer(i), unknown, wrongType)
		}
	case string:
		if t.Kind() != reflect.String {
			mismatch()
		}
	case bool:
		if t.Kind() != reflect.Bool {
			mismatch()
		}
	case json.Number:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if _, err := strconv.ParseInt(string(val), 10, t.Bits()); err != nil {
				mismatch()
			}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if _, err := strconv.ParseUint(string(val), 10, t.Bits()); err != nil {
				mismatch()
			}
		case reflect.Float32, reflect.Float64:
		default:
			mismatch()
		}
	}
}

// jsonFields maps the JSON names of a struct's fields to their types,
// following embedded structs as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// acceptedFields lists the field names of an object, in order, for a
// refusal that tells the client what it could have sent instead.
func acceptedFields(fields map[string]reflect.Type) string {
	names := slices.Sorted(maps.Keys(fields))
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "of another type"
}

// shownHistory is a record's history as include=history shows it: [] when
// there is none, where an absent history is left out.
func shownHistory[E any](events []E) *[]E {
	if events == nil {
		events = []E{}
	}
	return &events
}

// timestamp renders a time as the API does: RFC 3339 in UTC with microseconds.
func timestamp(t time.Time) string { return store.FormatTime(t) }

// optionalTimestamp renders a time that may be unset as a string or null.
func optionalTimestamp(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := timestamp(*t)
	return &s
}
