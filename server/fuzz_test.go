package server

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chatd/chatd/store"
)

// FuzzByteRange: whatever the Range header, the answer is the whole file
// (200, 0..size-1), a span inside the file (206, 0 <= first <= last < size)
// or unsatisfiable (416), and a span asked for plainly is the span given.
func FuzzByteRange(f *testing.F) {
	for _, seed := range []struct {
		header string
		size   int64
	}{
		{"", 10}, {"bytes=0-0", 10}, {"bytes=2-", 10}, {"bytes=-3", 10}, {"bytes=-30", 10}, {"bytes=10-", 10},
		{"bytes=5-2", 10}, {"bytes=0-1,4-5", 10}, {"items=0-1", 10}, {"bytes=-0", 10}, {"bytes=0-", 0}, {"bytes=-1", 0},
		{"bytes=99999999999999999999-", 10}, {"bytes=0-99999999999999999999", 10}, {" BYTES = 1-2 ", 10}, {"bytes=+1-2", 10},
		{"bytes=1--2", 10}, {"bytes=0-0", math.MaxInt64},
	} {
		f.Add(seed.header, seed.size)
	}
	f.Fuzz(func(t *testing.T, header string, size int64) {
		if size < 0 {
			return // sizes come from the database and are never negative
		}
		first, last, status := byteRange(header, size)
		switch status {
		case http.StatusOK:
			if first != 0 || last != size-1 {
				t.Fatalf("byteRange(%q, %d) = %d-%d with 200, not the whole file", header, size, first, last)
			}
		case http.StatusPartialContent:
			if first < 0 || first > last || last >= size {
				t.Fatalf("byteRange(%q, %d) = %d-%d with 206, outside [0,%d)", header, size, first, last, size)
			}
		case http.StatusRequestedRangeNotSatisfiable:
		default:
			t.Fatalf("byteRange(%q, %d): status %d", header, size, status)
		}
		if a, b, ok := plainSpan(header); ok && a <= b && a < size && (status != http.StatusPartialContent || first != a || last != min(b, size-1)) {
			t.Fatalf("byteRange(%q, %d) = %d-%d with %d, want %d-%d with 206", header, size, first, last, status, a, min(b, size-1))
		}
	})
}

// plainSpan reads a Range header spelled exactly "bytes=a-b", a and b digits.
func plainSpan(header string) (a, b int64, ok bool) {
	spec, ok1 := strings.CutPrefix(header, "bytes=")
	from, to, ok2 := strings.Cut(spec, "-")
	a, ok3 := rangeNumber(from)
	b, ok4 := rangeNumber(to)
	return a, b, ok1 && ok2 && ok3 && ok4
}

// FuzzDecodeCursor: a cursor round-trips; any change to it (one byte
// altered, cut short, lengthened) or use in another listing is refused; and
// no string, however made, panics the decoder or is accepted unless it is
// exactly the cursor the server would issue for what it decodes to.
func FuzzDecodeCursor(f *testing.F) {
	ts := newTestServer(f)
	s := ts.srv
	real := *s.encodeCursor("messages:desc", &store.Keyset{Int: 42, ID: "0190a000-0000-7000-8000-000000000001"})
	for _, seed := range []string{real, "", ".", "e30.", "e30.AAAAAAAAAAAAAAAAAAAAAA", real + "=", strings.ToUpper(real), strings.Repeat("A", 2000)} {
		f.Add("messages:desc", int64(42), "", "0190a000-0000-7000-8000-000000000001", seed, uint(3), byte('x'))
	}
	f.Add("rooms", int64(0), "a title\x00", "not an id", real, uint(0), byte(0))
	f.Fuzz(func(t *testing.T, scope string, i int64, str, id, raw string, at uint, to byte) {
		if !utf8.ValidString(scope) || !utf8.ValidString(str) {
			return // scopes are constants; JSON would make both valid UTF-8 and so not round-trip
		}
		if pos, ok := s.decodeCursor(scope, raw); ok {
			if again := *s.encodeCursor(scope, pos); again != raw {
				t.Fatalf("accepted %q, which is not the cursor %q issued for %+v", raw, again, *pos)
			}
		}
		want := store.Keyset{Int: i, Str: str, ID: id}
		c := *s.encodeCursor(scope, &want)
		got, ok := s.decodeCursor(scope, c)
		if ok != store.ValidID(id) && len(c) <= maxCursorLen {
			t.Fatalf("cursor %q for %+v: accepted %v, valid id %v", c, want, ok, store.ValidID(id))
		}
		if !ok {
			return
		}
		if *got != want {
			t.Fatalf("cursor %q decodes to %+v, want %+v", c, *got, want)
		}
		if _, ok := s.decodeCursor(scope+"x", c); ok {
			t.Fatalf("cursor %q for %q accepted for %q", c, scope, scope+"x")
		}
		tampered := []string{c[:len(c)-1], c + "A", "A" + c}
		if b := []byte(c); b[at%uint(len(b))] != to {
			b[at%uint(len(b))] = to
			tampered = append(tampered, string(b))
		}
		for _, bad := range tampered {
			if _, ok := s.decodeCursor(scope, bad); ok {
				t.Fatalf("tampered cursor %q (from %q) accepted", bad, c)
			}
		}
	})
}

// FuzzDecodeBody: whatever the body, decoding it into a real request type is
// a success or a client error (400 invalid_json or unknown_field, 413, 422),
// never a 500; a UTF-8 JSON object with a field the type does not declare is
// 400 unknown_field (one that is not UTF-8, invalid_json); and what it accepts, encoding/json accepts too with unknown
// fields disallowed, to the same value once its ids are in lower case, with
// no U+FFFD the body did not hold.
func FuzzDecodeBody(f *testing.F) {
	ts := newTestServerWith(f, func(c *Config) { c.MaxBodyBytes = 4096 })
	s := ts.srv
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `{"message":{"content":"hi","mentions":[{"handle":"bob"}]}}`, `{"message":{"content":"hi","id":"x"}}`,
		`{"message":{"content":1}}`, `{"message":{"mentions":[{"kind":null}]}}`, `{"Message":{}}`, `{"message":{"content":"a"}} {}`,
		`{"message":{"metadata":{"anything":[1,{"goes":true}]}}}`, `{"organization_id":"x"}`, `{"message":{"attachment_ids":[1]}}`,
		`{"message":{"content":"\ud800"}}`, `{"message":null}`, `{"a":` + strings.Repeat("[", 5000),
		`{"message":{"mentions":[{"id":"x","username":"y","extra":1}]}}`, `{"message":{"content":"x"},"message":{"id":1}}`,
		"{\"\":{\"\xc2\":[]}}", "{\"message\":{\"content\":\"caf\xe9\"}}",
		`{"message":{"content":"\ud83d\ude00"}}`, `{"\udc00":1}`, `{"message":{"content":"\\ud800"}}`, `{"x\uDBFF":{}}`,
	} {
		f.Add([]byte(seed))
	}
	known := jsonFields(reflect.TypeOf(sendMessageRequest{}))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req sendMessageRequest
		r := httptest.NewRequest("POST", "/api/v1/agent/chats/x/messages", bytes.NewReader(body))
		err := s.decodeBody(httptest.NewRecorder(), r, &req)
		e, _ := asHTTPError(err)
		if err != nil && e == nil {
			t.Fatalf("decoding %q: %v is not a client error", body, err)
		}
		if err != nil {
			status, ok := statusOf[e.Code]
			if !ok || status >= 500 {
				t.Fatalf("decoding %q: %s answers %d", body, e.Code, status)
			}
		}
		var top map[string]json.RawMessage
		if int64(len(body)) <= s.maxBody && utf8.Valid(body) && !surrogateEscape.Match(body) && json.Unmarshal(body, &top) == nil && oneValue(body) {
			for k := range top {
				if _, ok := known[k]; !ok && (e == nil || e.Code != codeUnknownField) {
					t.Fatalf("decoding %q with the field %q: %v, not unknown_field", body, k, err)
				}
			}
		}
		if int64(len(body)) <= s.maxBody && !utf8.Valid(body) && (e == nil || e.Code != codeInvalidJSON) {
			t.Fatalf("decoding %q, not UTF-8: %v, not invalid_json", body, err)
		}
		if err != nil || len(bytes.TrimSpace(body)) == 0 {
			return
		}
		// What is accepted is kept: no character turns into U+FFFD on the way.
		if bytes.Contains(mustJSON(t, req), []byte("\ufffd")) && !bytes.Contains(body, []byte("\ufffd")) && !replacementEscape.Match(body) {
			t.Fatalf("decoding %q made a U+FFFD of something: %s", body, mustJSON(t, req))
		}
		var strict sendMessageRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&strict); err != nil {
			t.Fatalf("decodeBody accepted %q, which encoding/json refuses: %v", body, err)
		}
		normalizeIDs(reflect.ValueOf(&strict), false)
		if a, b := mustJSON(t, req), mustJSON(t, strict); !bytes.Equal(a, b) {
			t.Fatalf("decoding %q: decodeBody gives %s, encoding/json %s", body, a, b)
		}
	})
}

// surrogateEscape matches what may be a \uD800–\uDFFF escape (the body
// may still pair it, or escape its backslash); replacementEscape an
// escaped U+FFFD.
var (
	surrogateEscape   = regexp.MustCompile(`\\u[dD][89a-fA-F]`)
	replacementEscape = regexp.MustCompile(`\\u[fF][fF][fF][dD]`)
)

// oneValue reports whether b holds exactly one JSON value.
func oneValue(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	var v any
	if dec.Decode(&v) != nil {
		return false
	}
	_, err := dec.Token()
	return err != nil
}

// FuzzRequestHead: whatever request line and header block a client sends,
// and whatever follows them, over a real connection to a server started as
// chatd serve starts it, every final answer carries a request id, is never
// a 500, and is either a success or the error envelope in JSON (never
// text/plain); or the connection closes without an answer. In the input,
// $KEY and $UKEY stand for an agent's and a person's key and $ROOM for a
// room of theirs, so that the fuzzer reaches past authentication.
func FuzzRequestHead(f *testing.F) {
	ts := newTestServerWith(f, func(c *Config) { c.DisableRateLimit = true })
	u, userKey := ts.user("alice")
	_, agentKey := ts.agent(u, "Helper")
	room := ts.room(f, agentKey, u.ID)
	addr := ts.serveOnSocket(f)
	expand := strings.NewReplacer("$KEY", agentKey, "$UKEY", userKey, "$ROOM", room)
	const host, auth = "Host: chatd", "Host: chatd\r\nX-API-Key: $KEY"
	for _, seed := range [][3]string{
		{"GET /healthz HTTP/1.1", host, ""},
		{"GET /api/v1/agent/chats/%zz HTTP/1.1", host, ""},
		{"GET /api/v1/agent/me HTTP/1.1", auth, ""},
		{"GET /api/v1/agent/chats/$ROOM/messages?limit=5 HTTP/1.1", auth, ""},
		{"POST /api/v1/agent/chats/$ROOM/messages HTTP/1.1", auth + "\r\nContent-Type: application/json\r\nContent-Length: 60",
			`{"message":{"content":"hi","mentions":[{"handle":"alice"}]}}`},
		{"POST /api/v1/agent/chats HTTP/1.1", auth + "\r\nTransfer-Encoding: chunked", "2\r\n{}\r\n0\r\n\r\n"},
		{"POST /api/v1/agent/chats HTTP/1.1", auth + "\r\nExpect: 100-continue\r\nContent-Length: 2", "{}"},
		{"GET /api/v1/socket/websocket?vsn=2.0.0 HTTP/1.1", auth + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", ""},
		{"GET /api/v1/socket/websocket HTTP/1.1", host, ""},
		{"GET /api/v1/me/chats/$ROOM HTTP/1.0", "X-API-Key: $UKEY", ""},
		{"HEAD /api/v1/nothing HTTP/1.1", host, ""},
		{"PRI * HTTP/2.0", "", "SM\r\n\r\n"},
		{"OPTIONS * HTTP/1.1", host, ""},
		{"GET / HTTP/1.1", "", ""},
		{"GET / HTTP/1.1", "Host: a b", ""},
		{"GET / HTTP/1.1", host + "\r\nBad Name: x", ""},
		{"GET / HTTP/1.1", host + "\r\nExpect: a-miracle", ""},
		{"POST /api/v1/agent/chats HTTP/1.1", host + "\r\nTransfer-Encoding: gzip", ""},
		{"GET / HTTP/3.0", host, ""},
		{"GARBAGE", "", ""},
		{"GET /healthz HTTP/1.1", host, "GET /healthz HTTP/1.1\r\nHost: chatd\r\n\r\nBAD\r\n\r\n"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, line, header, tail string) {
		raw := expand.Replace(line + "\r\n" + header + "\r\n\r\n" + tail)
		responses, seen, err := exchange(addr, raw, 10*time.Second)
		if err != nil {
			t.Fatalf("sent %q: %v; read %q", raw, err, seen)
		}
		methods, _ := requestMethods(raw)
		plain := 0 // text/plain successes (a file download may be one)
		for i, r := range responses {
			if r.status == http.StatusSwitchingProtocols {
				continue
			}
			// 501 and 505 are the client's doing; 503 a full write queue.
			if r.status >= 500 && r.status != 501 && r.status != 503 && r.status != 505 {
				t.Fatalf("sent %q: %d; read %q", raw, r.status, seen)
			}
			if r.status < 300 || r.status == http.StatusNotModified {
				if r.header.Get("X-Request-Id") == "" {
					t.Fatalf("sent %q: no x-request-id; read %q", raw, seen)
				}
				if strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
					plain++
				}
				continue
			}
			head := i < len(methods) && methods[i] == http.MethodHead
			if p := envelopeProblem(r, head); p != "" {
				t.Fatalf("sent %q: %d: %s; read %q", raw, r.status, p, seen)
			}
		}
		// A response cut short by the server closing is not among those
		// read whole: it must not be text/plain either.
		if n := bytes.Count(seen, []byte("Content-Type: text/plain")); n > plain {
			t.Fatalf("sent %q: text/plain on the wire; read %q", raw, seen)
		}
	})
}
