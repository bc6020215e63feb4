package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/chatd/chatd/store"
)

// writeJSON writes v as the JSON body of a response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only a programming error (an unencodable type) gets here.
		http.Error(w, `{"error":{"code":"internal_error","message":"response encoding failed","request_id":""}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// data wraps a resource as the API's success body {"data": ...}.
func data(v any) map[string]any { return map[string]any{"data": v} }

// decodeBody reads the JSON request body into dst, a pointer to a struct.
//
// An empty body reads as {} (clients send no body to endpoints whose fields
// are all optional). A body that is not exactly one JSON value is 400
// invalid_json; a field dst does not declare is 400 unknown_field, with the
// JSON Pointer of each such field; a value of the wrong type is 422
// validation_error at its pointer. A body over the size limit is 413.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errorf(codePayloadTooLarge, "request body is larger than %d bytes", s.maxBody)
		}
		return errorf(store.CodeBadRequest, "could not read the request body")
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
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
	if p := unknownFields(generic, reflect.TypeOf(dst), "", store.Problems{}); len(p) > 0 {
		e := p.Err(codeUnknownField).(*store.Error)
		e.Message = "request body has an unknown field: " + e.Message
		return e
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			ptr := "/" + strings.ReplaceAll(typeErr.Field, ".", "/")
			if typeErr.Field == "" {
				ptr = ""
			}
			return store.Problems{ptr: {"must be " + jsonKind(typeErr.Type)}}.Err(store.CodeValidation)
		}
		return errorf(codeInvalidJSON, "request body is not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// unknownFields records, under their JSON Pointers, the object keys in v that
// type t does not declare, descending into nested structs, slices and maps.
func unknownFields(v any, t reflect.Type, at string, p store.Problems) store.Problems {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for k, sub := range val {
				ft, ok := fields[k]
				if !ok {
					p.Add(at+store.Pointer(k), "is not a recognised field")
					continue
				}
				unknownFields(sub, ft, at+store.Pointer(k), p)
			}
		case reflect.Map:
			for k, sub := range val {
				unknownFields(sub, t.Elem(), at+store.Pointer(k), p)
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, sub := range val {
				unknownFields(sub, t.Elem(), at+store.Pointer(i), p)
			}
		}
	}
	return p
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

// timestamp renders a time as the API does: RFC 3339 in UTC with microseconds.
func timestamp(t time.Time) string { return store.FormatTime(t) }
