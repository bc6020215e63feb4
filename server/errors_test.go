package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// Every code the source declares must have a status in the one table.
func TestEveryErrorCodeHasAStatus(t *testing.T) {
	declared := regexp.MustCompile(`(?m)^\s*(\w+)\s+(?:store\.|error)?Code\s*=\s*"([a-z_]+)"`)
	for _, file := range []string{"../store/errors.go", "errors.go", "oauth_errors.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		matches := declared.FindAllStringSubmatch(string(src), -1)
		if len(matches) == 0 {
			t.Fatalf("no codes found in %s", file)
		}
		for _, m := range matches {
			if _, ok := statusOf[errorCode(m[2])]; !ok {
				t.Errorf("%s (%s) in %s has no HTTP status", m[1], m[2], file)
			}
		}
	}
}

func TestUnknownRoutesAndMethodsAnswerInTheEnvelope(t *testing.T) {
	ts := newTestServer(t)
	_, key := ts.user("alice")
	// unknown is a request to a route or method there is none of; a 405
	// names the methods there are, OPTIONS not among them.
	unknown := func(method, path string, status int, code string) scenario {
		s := refusalCase(method+" "+path, apiKey(key), method, path, nil, status, code)
		if status == 405 {
			s.check = func(t testing.TB, r *response) {
				if allow := r.header.Get("Allow"); allow == "" || strings.Contains(allow, "OPTIONS") {
					t.Fatalf("Allow = %q", allow)
				}
			}
		}
		return s
	}
	ts.run(t, []scenario{
		unknown("GET", "/api/v1/nothing-here", 404, "not_found"),
		unknown("GET", "/api/v1/agent/me/", 404, "not_found"),
		unknown("POST", "/api/v1/me/nothing", 404, "not_found"),
		unknown("GET", "/no-such-page", 404, "not_found"),
		unknown("POST", "/api/v1/agent/me", 405, "method_not_allowed"),
		unknown("DELETE", "/api/v1/me/profile", 405, "method_not_allowed"),
		unknown("OPTIONS", "/api/v1/me", 405, "method_not_allowed"),
	})
}

func TestPanicsBecomeInternalErrorsAndAreLogged(t *testing.T) {
	ts := newTestServer(t)
	var logs bytes.Buffer
	ts.srv.log = slog.New(slog.NewTextHandler(&logs, nil))
	ts.srv.handle("GET", "/test/panic", public, func(http.ResponseWriter, *http.Request) error {
		panic("secret internals")
	})
	r := ts.do(t, "GET", "/test/panic", noCred, nil)
	expect(t, r, 500, "internal_error")
	if strings.Contains(string(r.body), "secret") {
		t.Fatalf("the panic value leaked to the client: %s", r.body)
	}
	if !strings.Contains(logs.String(), "secret internals") || !strings.Contains(logs.String(), r.header.Get("X-Request-Id")) {
		t.Fatalf("the panic was not logged with the request id:\n%s", logs.String())
	}
	// The server keeps serving.
	expect(t, ts.do(t, "GET", "/healthz", noCred, nil), 200, "")
}

func TestOversizeBodiesAre413(t *testing.T) {
	ts := newTestServer(t)
	_, key := ts.user("alice")
	ts.srv.maxBody = 1024
	before := ts.snapshot(t)
	body := `{"user": {"first_name": "` + strings.Repeat("a", 2000) + `"}}`
	expect(t, ts.do(t, "PUT", "/api/v1/me/profile", apiKey(key), body), 413, "payload_too_large")
	ts.unchanged(t, before)
}

func TestRequestIDs(t *testing.T) {
	ts := newTestServer(t)
	r := ts.do(t, "GET", "/healthz", func(h http.Header) { h.Set("X-Request-Id", "trace-123.abc") }, nil)
	if got := r.header.Get("X-Request-Id"); got != "trace-123.abc" {
		t.Fatalf("a well-formed caller id is kept for tracing; got %q", got)
	}
	r = ts.do(t, "GET", "/api/v1/me", func(h http.Header) { h.Set("X-Request-Id", "<script>") }, nil)
	if got := r.header.Get("X-Request-Id"); !strings.HasPrefix(got, "req_") {
		t.Fatalf("an unsafe caller id is replaced; got %q", got)
	}
	a := ts.do(t, "GET", "/healthz", noCred, nil).header.Get("X-Request-Id")
	b := ts.do(t, "GET", "/healthz", noCred, nil).header.Get("X-Request-Id")
	if a == b {
		t.Fatal("request ids repeat")
	}
}

// A response that cannot be encoded (a programming error) is still a 500
// in the envelope, with the request id.
func TestUnencodableResponseIsAnEnvelope(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "req_test")
	writeJSON(rec, http.StatusOK, map[string]any{"data": make(chan int)})
	r := wireResponse{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	if p := envelopeProblem(r, false); p != "" || r.status != 500 || r.code(t) != "internal_error" {
		t.Fatalf("%d %s: %s", r.status, p, r.body)
	}
}

// A refusal's request log line carries its envelope code, and an unknown
// field's refusal lists the fields the object accepts.
func TestRefusalsNameTheirCodeAndTheAcceptedFields(t *testing.T) {
	ts := newTestServer(t)
	_, key := ts.user("alice")
	var logs syncBuffer
	ts.srv.log = slog.New(slog.NewTextHandler(&logs, nil))
	r := ts.refused(t, "PUT", "/api/v1/me/profile", apiKey(key), map[string]any{"user": map[string]any{"nickname": "al"}},
		400, "unknown_field", "/user/nickname")
	details := errorDetails(t, r)
	if got := fmt.Sprint(details["/user/nickname"]); !strings.Contains(got, "accepted here: email, first_name, last_name") {
		t.Fatalf("the refusal does not list the accepted fields: %s", got)
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, r.header.Get("X-Request-Id")) {
			line = l
		}
	}
	if !strings.Contains(line, "status=400") || !strings.Contains(line, "error=unknown_field") {
		t.Fatalf("the request's log line does not name its code: %q", line)
	}
}

// A client that goes away while its write waits for the writer cuts the
// work short: that is logged as the client's doing (499 client_closed),
// never as an internal error. (Whether the server notices the client's
// going before the job runs is a race the client's side cannot settle; a
// job that ran anyway commits and is logged 201.)
func TestAClientThatLeavesIsNoInternalError(t *testing.T) {
	ts := newTestServer(t)
	alice, _ := ts.user("alice")
	_, key := ts.agent(alice, "Helper")
	room := ts.room(t, key)
	var logs syncBuffer
	ts.srv.log = slog.New(slog.NewTextHandler(&logs, nil))
	started, gate := make(chan struct{}), make(chan struct{})
	go ts.db.Write(context.Background(), func(*store.Tx) error { close(started); <-gate; return nil })
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.http.URL+agentChatsPath+"/"+room+"/events",
		strings.NewReader(`{"event": {"content": "thinking", "message_type": "thought"}}`))
	req.Header.Set("X-API-Key", key)
	req.Header.Set("X-Request-Id", "leaves-early")
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the request was answered while the writer was held")
	}
	time.Sleep(200 * time.Millisecond) // for the server to notice the connection's end
	close(gate)                        // the event's job now finds its request gone
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "request_id=leaves-early") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	out := logs.String()
	if strings.Contains(out, "internal error") || !strings.Contains(out, "status=499") && !strings.Contains(out, "status=201") {
		t.Fatalf("the log says:\n%s", out)
	}

	t.Run("the refusal itself", func(t *testing.T) {
		gone, end := context.WithCancel(context.Background())
		end()
		r := httptest.NewRequest("GET", "/", nil).WithContext(gone)
		w := httptest.NewRecorder()
		ts.srv.writeError(w, r, fmt.Errorf("reading: %w", context.Canceled))
		if w.Code != 499 || w.Body.Len() != 0 {
			t.Fatalf("answered %d %q", w.Code, w.Body)
		}
	})
}
