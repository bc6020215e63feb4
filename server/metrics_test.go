package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/apitest"
)

// scrape fetches the metrics text from url, and checks it is Prometheus'
// text format, chatd's families keeping Prometheus' naming conventions.
func scrape(t *testing.T, url string) (string, map[string]*apitest.Family) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, res.Header.Get("Content-Type"))
	}
	families, err := apitest.ParsePrometheusText(string(b))
	if err != nil {
		t.Fatalf("not Prometheus text: %v", err)
	}
	if err := apitest.CheckChatdConventions(families, "chatd_"); err != nil {
		t.Fatal(err)
	}
	return string(b), families
}

// sampleOf returns the value of the sample name{labels} (labels in pairs,
// all of the sample's), or -1 when there is none.
func sampleOf(families map[string]*apitest.Family, name string, labels ...string) float64 {
	for _, f := range families {
		for _, s := range f.Samples {
			if s.Name != name || len(s.Labels) != len(labels)/2 {
				continue
			}
			match := true
			for i := 0; i+1 < len(labels); i += 2 {
				match = match && s.Labels[labels[i]] == labels[i+1]
			}
			if match {
				return s.Value
			}
		}
	}
	return -1
}

// metricsWorld is a server with its metrics on, and its scraper.
type metricsWorld struct {
	ts                  *testServer
	scrapeURL           string
	aliceKey, agentKey  string
	workerID, workerKey string
	room                string
}

func newMetricsWorld(t *testing.T) *metricsWorld {
	// A burst of 30 a credential, refilled hardly at all, so that one
	// credential can be rate limited cheaply.
	ts := newTestServerWith(t, func(c *Config) {
		c.Metrics, c.Commit, c.RateLimit, c.RateBurst = true, "0123456789ab", 0.001, 30
	})
	scraper := httptest.NewServer(ts.srv.MetricsHandler())
	t.Cleanup(scraper.Close)
	alice, aliceKey := ts.user("alice")
	_, agentKey := ts.agent(alice, "Helper")
	worker, workerKey := ts.agent(alice, "Worker")
	return &metricsWorld{ts: ts, scrapeURL: scraper.URL + "/metrics", aliceKey: aliceKey, agentKey: agentKey,
		workerID: worker.ID, workerKey: workerKey, room: ts.room(t, agentKey, worker.ID)}
}

// The requests a dashboard shows: by the route pattern, never the raw
// path, with the status class, the latency as a real Prometheus histogram,
// the refusals by code and the 429s by why.
func TestMetricsOfRequests(t *testing.T) {
	w := newMetricsWorld(t)
	ts := w.ts
	for i := 0; i < 3; i++ {
		expect(t, ts.do(t, "GET", "/api/v1/agent/chats/"+w.room, apiKey(w.agentKey), nil), 200, "")
	}
	expect(t, ts.do(t, "GET", "/api/v1/agent/chats/00000000-0000-0000-0000-000000000001", apiKey(w.agentKey), nil), 404, "not_found")
	expect(t, ts.do(t, "POST", "/api/v1/me/agents/bulk-delete", apiKey(w.aliceKey),
		map[string]any{"ids": []string{"00000000-0000-0000-0000-000000000000"}}), 202, "")
	// Paths no route matched all share one series, whatever they are.
	expect(t, ts.do(t, "GET", "/api/v1/nothing/here/1", noCred, nil), 404, "not_found")
	expect(t, ts.do(t, "DELETE", "/api/v1/nothing/here/2", noCred, nil), 404, "not_found")
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey("ak_nonsense"), nil), 401, "unauthorized")
	expect(t, ts.do(t, "GET", "/api/v1/me", noCred, nil), 401, "unauthorized")
	if res, err := http.Get(ts.http.URL + "/"); err != nil || res.StatusCode != 200 {
		t.Fatalf("the web app: %v %v", res, err)
	}
	_, spender := ts.agent(mustUserByHandle(t, ts, "alice"), "Spender")
	for i := 0; i < 30; i++ {
		expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(spender), nil), 200, "")
	}
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(spender), nil), 429, "rate_limited")
	release := ts.fillWriteQueue(t)
	expect(t, ts.do(t, "PUT", "/api/v1/me/profile", apiKey(w.aliceKey),
		map[string]any{"user": map[string]any{"first_name": "Al"}}), 503, "service_unavailable")
	expect(t, ts.do(t, "GET", "/readyz", noCred, nil), 503, "service_unavailable")
	release()

	text, f := scrape(t, w.scrapeURL)
	const chat = "/api/v1/agent/chats/:chat_id"
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"chatd_http_requests_total", []string{"method", "GET", "route", chat, "status_class", "2xx"}, 3},
		{"chatd_http_requests_total", []string{"method", "GET", "route", chat, "status_class", "4xx"}, 1},
		{"chatd_http_requests_total", []string{"method", "POST", "route", "/api/v1/agent/chats", "status_class", "2xx"}, 1},
		{"chatd_http_requests_total", []string{"method", "POST", "route", "/api/v1/me/agents/bulk-delete", "status_class", "2xx"}, 1},
		{"chatd_http_requests_total", []string{"method", "GET", "route", "unmatched", "status_class", "4xx"}, 1},
		{"chatd_http_requests_total", []string{"method", "DELETE", "route", "unmatched", "status_class", "4xx"}, 1},
		{"chatd_http_requests_total", []string{"method", "GET", "route", "/api/v1/me", "status_class", "4xx"}, 2},
		{"chatd_http_requests_total", []string{"method", "GET", "route", "web", "status_class", "2xx"}, 1},
		{"chatd_http_requests_total", []string{"method", "GET", "route", "/api/v1/agent/me", "status_class", "4xx"}, 1},
		{"chatd_http_request_duration_seconds_count", []string{"method", "GET", "route", chat}, 4},
		{"chatd_http_request_duration_seconds_bucket", []string{"method", "GET", "route", chat, "le", "+Inf"}, 4},
		{"chatd_http_errors_total", []string{"code", "not_found"}, 3},
		{"chatd_http_errors_total", []string{"code", "unauthorized"}, 2},
		{"chatd_http_errors_total", []string{"code", "rate_limited"}, 1},
		{"chatd_http_errors_total", []string{"code", "validation_error"}, 0},
		{"chatd_http_retry_later_total", []string{"status", "429", "reason", "rate_limit"}, 1},
		{"chatd_http_retry_later_total", []string{"status", "503", "reason", "write_queue_full"}, 1},
		{"chatd_http_retry_later_total", []string{"status", "503", "reason", "not_ready"}, 1},
		{"chatd_http_retry_later_total", []string{"status", "503", "reason", "other"}, 0},
		{"chatd_http_errors_total", []string{"code", "service_unavailable"}, 2},
		{"chatd_auth_failures_total", []string{"credential", "api_key"}, 1},
		{"chatd_auth_failures_total", []string{"credential", "none"}, 1},
		{"chatd_auth_failures_total", []string{"credential", "bearer"}, 0},
	} {
		if got := sampleOf(f, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	for _, s := range f["chatd_http_retry_later_total"].Samples {
		if status := s.Labels["status"]; status != "429" && status != "503" {
			t.Errorf("retry later with status %q", status)
		}
	}

	// The latency is a Prometheus histogram: every bound, as le.
	h := f["chatd_http_request_duration_seconds"]
	if h.Type != "histogram" || strings.Contains(text, "vmrange") {
		t.Fatalf("latency family %s, vmrange in the text: %v", h.Type, strings.Contains(text, "vmrange"))
	}
	var bounds []string
	for _, s := range h.Samples {
		if s.Name == h.Name+"_bucket" && s.Labels["route"] == chat {
			bounds = append(bounds, s.Labels["le"])
		}
	}
	if want := len(requestBuckets) + 1; len(bounds) != want || bounds[0] != "0.0005" || bounds[want-1] != "+Inf" {
		t.Errorf("buckets %v, want %d from 0.0005 to +Inf", bounds, want)
	}

	// Route labels are patterns, never a raw path or id.
	uuid := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-`)
	for _, s := range f["chatd_http_requests_total"].Samples {
		if route := s.Labels["route"]; route != "unmatched" && route != "web" && !strings.HasPrefix(route, "/") || uuid.MatchString(route) {
			t.Errorf("route label %q", route)
		}
	}
	if strings.Contains(text, "nothing/here") || strings.Contains(text, w.room) || strings.Contains(text, "ak_nonsense") {
		t.Error("a raw path, id or credential reached the metrics")
	}
}

// What happens to messages and deliveries, and on sockets, is counted as it
// happens; the backlog and the file's pages are read when scraped.
func TestMetricsOfWorkSocketsAndTheDatabase(t *testing.T) {
	w := newMetricsWorld(t)
	ts := w.ts
	l := newListener(t, ts, w.workerKey, "chat_room:"+w.room)
	msg := ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/messages", apiKey(w.agentKey),
		msgOf("content", "please look", "mentions", []any{map[string]any{"id": w.workerID}}))
	expect(t, msg, 201, "")
	msgID := msg.data(t)["id"].(string)
	expect(t, ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/events", apiKey(w.agentKey),
		eventOf("content", "thinking", "message_type", "thought")), 201, "")
	l.await(t, "chat_room:"+w.room, "message_created", nil)

	_, f := scrape(t, w.scrapeURL)
	wantSamples(t, f, map[string]float64{
		`chatd_messages_total{type="text"}`:            1,
		`chatd_messages_total{type="thought"}`:         1,
		`chatd_messages_total{type="tool_call"}`:       0,
		`chatd_deliveries_total{state="pending"}`:      1,
		`chatd_deliveries_total{state="processing"}`:   0,
		`chatd_deliveries_backlog{state="pending"}`:    1,
		`chatd_deliveries_backlog{state="processing"}`: 0,
		`chatd_deliveries_backlog_limit`:               backlogLimit,
		`chatd_socket_connects_total`:                  1,
		`chatd_sockets_open`:                           1,
		`chatd_channels_joined`:                        1,
		`chatd_database_page_size_bytes`:               map[bool]float64{false: 4096, true: 8192}[onPostgres],
		`chatd_write_queue_capacity`:                   1024,
		`chatd_build_info{version="test",commit="0123456789ab",goversion="` + runtime.Version() + `"}`: 1,
	})
	if age := sampleOf(f, "chatd_deliveries_oldest_pending_age_seconds"); age < 0 || age > 600 {
		t.Errorf("oldest pending age %v", age)
	}
	if sent := sampleOf(f, "chatd_socket_pushes_sent_total"); sent < 1 {
		t.Errorf("pushes sent %v", sent)
	}
	for _, name := range []string{"chatd_database_pages", "chatd_writer_commit_jobs_count", "chatd_writer_commit_duration_seconds_count"} {
		if v := sampleOf(f, name); v < 1 {
			t.Errorf("%s = %v", name, v)
		}
	}

	for _, step := range []string{"processing", "processed"} {
		expect(t, ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/messages/"+msgID+"/"+step, apiKey(w.workerKey), map[string]any{}), 200, "")
	}
	l.raw.conn.Close()
	f = scrapeUntil(t, w.scrapeURL, "the socket's end", func(f map[string]*apitest.Family) bool {
		return sampleOf(f, "chatd_sockets_open") == 0
	})
	wantSamples(t, f, map[string]float64{
		`chatd_deliveries_total{state="processing"}`:               1,
		`chatd_deliveries_total{state="processed"}`:                1,
		`chatd_deliveries_backlog{state="pending"}`:                0,
		`chatd_deliveries_oldest_pending_age_seconds`:              0,
		`chatd_socket_disconnects_total{reason="connection_lost"}`: 1,
		`chatd_socket_disconnects_total{reason="slow_consumer"}`:   0,
		`chatd_socket_pushes_dropped_total`:                        0,
	})
	// This one server holds the leases of both jobs, and claims no
	// webhook endpoint: it has none.
	f = scrapeUntil(t, w.scrapeURL, "both jobs' leases", func(f map[string]*apitest.Family) bool {
		return sampleOf(f, "chatd_leases_held", "kind", "bulk") == 1 && sampleOf(f, "chatd_leases_held", "kind", "purge") == 1
	})
	wantSamples(t, f, map[string]float64{`chatd_leases_held{kind="webhook"}`: 0})
	for _, family := range []string{"chatd_checkpoint_duration_seconds", "chatd_checkpoints_total", "chatd_wal_bytes",
		"chatd_bulk_jobs", "chatd_leases_held", "chatd_purged_total", "chatd_purged_bytes_total", "chatd_purge_passes_total", "go_goroutines", "go_gc_duration_seconds", "process_resident_memory_bytes", "process_open_fds"} {
		if f[family] == nil {
			t.Errorf("no family %s", family)
		}
	}
}

// wantSamples checks samples given as they are written, name{labels}.
func wantSamples(t *testing.T, f map[string]*apitest.Family, want map[string]float64) {
	t.Helper()
	series := make([]string, 0, len(want))
	for s := range want {
		series = append(series, s)
	}
	sort.Strings(series)
	for _, s := range series {
		name, rest, _ := strings.Cut(s, "{")
		var labels []string
		for _, pair := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			if k, v, ok := strings.Cut(pair, "="); ok {
				labels = append(labels, k, strings.Trim(v, `"`))
			}
		}
		if got := sampleOf(f, name, labels...); got != want[s] {
			t.Errorf("%s = %v, want %v", s, got, want[s])
		}
	}
}

// scrapeUntil scrapes until ok accepts what it reads; it fails after a
// generous deadline, never as a timing assertion.
func scrapeUntil(t *testing.T, url, what string, ok func(map[string]*apitest.Family) bool) map[string]*apitest.Family {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, f := scrape(t, url)
		if ok(f) {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the metrics", what)
		}
	}
}

// The metrics' own listener serves them and the runtime's profiles; the
// API's listener serves neither.
func TestMetricsListener(t *testing.T) {
	w := newMetricsWorld(t)
	base := strings.TrimSuffix(w.scrapeURL, "/metrics")
	if res, err := http.Get(base + "/debug/pprof/heap?gc=1"); err != nil || res.StatusCode != 200 {
		t.Fatalf("metrics listener, heap profile: %v %v", res, err)
	}
	expect(t, w.ts.do(t, "GET", "/metrics", noCred, nil), 404, "not_found")
	expect(t, w.ts.do(t, "GET", "/debug/pprof/heap", noCred, nil), 404, "not_found")
	if res, err := http.Get(base + "/other"); err != nil || res.StatusCode != 404 {
		t.Fatalf("metrics listener, other path: %v %v", res, err)
	}
}

func TestMetricsOff(t *testing.T) {
	ts := newTestServer(t)
	if ts.srv.MetricsHandler() != nil {
		t.Fatal("a metrics handler without Config.Metrics")
	}
}

// The cost metrics add to every request (go test ./server -run '^$' -bench Observe).
func BenchmarkObserveRequest(b *testing.B) {
	ts := newTestServerWith(b, func(c *Config) { c.Metrics = true })
	m := ts.srv.metrics
	rs := m.routes[0]
	b.RunParallel(func(pb *testing.PB) {
		n := &callerNote{route: rs}
		for pb.Next() {
			m.observeRequest("POST", n, 201, 3*time.Millisecond)
		}
	})
}
