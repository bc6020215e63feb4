package server

import (
	"strings"
	"testing"

	"github.com/chatd/chatd/store"
)

func TestHealthAndReadiness(t *testing.T) {
	ts := newTestServer(t)
	r := ts.do(t, "GET", "/healthz", noCred, nil)
	expect(t, r, 200, "")
	if j := r.json(t); j["status"] != "ok" || j["version"] != "test" {
		t.Fatalf("healthz = %s", r.body)
	}
	r = ts.do(t, "GET", "/readyz", noCred, nil)
	expect(t, r, 200, "")
	j := r.json(t)
	current, _ := store.SchemaVersionOf(testSchema)
	if j["status"] != "ready" || j["schema_version"] != float64(current) {
		t.Fatalf("readyz = %s", r.body)
	}
	if q := j["write_queue"].(map[string]any); q["capacity"] != float64(1024) {
		t.Fatalf("write_queue = %v", q)
	}
	expect(t, ts.do(t, "POST", "/healthz", noCred, nil), 405, "method_not_allowed")
	for _, path := range []string{"/healthz", "/readyz"} {
		r, _ := ts.send(t, "HEAD", path, noCred, nil)
		if r.status != 200 || len(r.body) != 0 {
			t.Errorf("HEAD %s: %d %q", path, r.status, r.body)
		}
	}
}

func TestWebPage(t *testing.T) {
	ts := newTestServer(t)
	r := ts.do(t, "GET", "/", noCred, nil)
	expect(t, r, 200, "")
	if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.body), "chatd") {
		t.Fatalf("index: %s %s", r.header.Get("Content-Type"), r.body)
	}
	if r.header.Get("Content-Security-Policy") == "" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("security headers missing: %v", r.header)
	}
	// The web app never shadows the API: unknown API paths stay JSON 404s.
	expect(t, ts.do(t, "GET", "/api/v1/index.html", noCred, nil), 404, "not_found")
	expect(t, ts.do(t, "GET", "/../index.html", noCred, nil), 200, "")
	expect(t, ts.do(t, "GET", "/missing.js", noCred, nil), 404, "not_found")
}
