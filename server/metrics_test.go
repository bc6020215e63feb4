package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape fetches the metrics text from url.
func scrape(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, res.Header.Get("Content-Type"))
	}
	return string(b)
}

// sample returns the value of the series named exactly series, or -1.
func sample(text, series string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func TestMetrics(t *testing.T) {
	ts := newTestServerWith(t, func(c *Config) { c.Metrics = true })
	metricsSrv := httptest.NewServer(ts.srv.MetricsHandler())
	defer metricsSrv.Close()

	alice, aliceKey := ts.user("alice")
	_, agentKey := ts.agent(alice, "Helper")
	room := ts.room(t, agentKey)
	for i := 0; i < 3; i++ {
		expect(t, ts.do(t, "GET", "/api/v1/agent/chats/"+room, apiKey(agentKey), nil), 200, "")
	}
	expect(t, ts.do(t, "GET", "/api/v1/agent/chats/no-such-room", apiKey(agentKey), nil), 404, "")
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey(aliceKey), nil), 200, "")
	expect(t, ts.do(t, "POST", "/api/v1/me/agents/bulk-delete", apiKey(aliceKey),
		map[string]any{"ids": []string{"00000000-0000-0000-0000-000000000000"}}), 202, "")
	// Paths no route matched all share one series, whatever they are.
	expect(t, ts.do(t, "GET", "/api/v1/nothing/here/1", noCred, nil), 404, "")
	expect(t, ts.do(t, "GET", "/api/v1/nothing/here/2", noCred, nil), 404, "")

	text := scrape(t, metricsSrv.URL+"/metrics")
	for series, want := range map[string]float64{
		`chatd_http_requests_total{method="GET",route="/api/v1/agent/chats/:chat_id",status="200"}`:    3,
		`chatd_http_requests_total{method="GET",route="/api/v1/agent/chats/:chat_id",status="404"}`:    1,
		`chatd_http_requests_total{method="POST",route="/api/v1/agent/chats",status="201"}`:            1,
		`chatd_http_requests_total{method="GET",route="/api/v1/me",status="200"}`:                      1,
		`chatd_http_requests_total{method="POST",route="/api/v1/me/agents/bulk-delete",status="202"}`:  1,
		`chatd_http_requests_total{method="GET",route="unmatched",status="404"}`:                       2,
		`chatd_http_request_duration_seconds_count{method="GET",route="/api/v1/agent/chats/:chat_id"}`: 4,
		`chatd_write_queue_capacity`:         1024,
		`chatd_write_refused_total`:          0,
		`chatd_sockets_open`:                 0,
		`chatd_channels_joined`:              0,
		`chatd_slow_consumers_dropped_total`: 0,
		`chatd_longpolls_held`:               0,
	} {
		if got := sample(text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	for _, series := range []string{"chatd_write_queue_depth", "chatd_wal_bytes", "chatd_writer_commits_total",
		`chatd_checkpoints_total{mode="truncate"}`, `chatd_bulk_jobs{status="queued"}`, `chatd_bulk_jobs{status="failed"}`,
		`chatd_purged_total{kind="event"}`, "chatd_purged_bytes_total", "chatd_purge_passes_total",
		"chatd_writer_commit_jobs_count", "chatd_writer_commit_duration_seconds_sum",
		"go_goroutines", "process_resident_memory_bytes"} {
		if sample(text, series) < 0 {
			t.Errorf("no %s in\n%s", series, text)
		}
	}
	if n := sample(text, "chatd_writer_commit_jobs_count"); n < 1 {
		t.Errorf("commits observed = %v", n)
	}
	if strings.Contains(text, "nothing/here") || strings.Contains(text, room) {
		t.Error("a raw path reached the metrics")
	}
	jobs := sample(text, `chatd_bulk_jobs{status="queued"}`) + sample(text, `chatd_bulk_jobs{status="processing"}`) +
		sample(text, `chatd_bulk_jobs{status="completed"}`) + sample(text, `chatd_bulk_jobs{status="failed"}`)
	if jobs != 1 {
		t.Errorf("bulk jobs in all statuses = %v, want 1", jobs)
	}

	// The runtime's profiles are there too, and the API's own listener
	// serves neither.
	if res, err := http.Get(metricsSrv.URL + "/debug/pprof/heap?gc=1"); err != nil || res.StatusCode != 200 {
		t.Fatalf("metrics listener, heap profile: %v %v", res, err)
	}
	expect(t, ts.do(t, "GET", "/metrics", noCred, nil), 404, "not_found")
	expect(t, ts.do(t, "GET", "/debug/pprof/heap", noCred, nil), 404, "not_found")
	if res, err := http.Get(metricsSrv.URL + "/other"); err != nil || res.StatusCode != 404 {
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
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.observeRequest("POST", "/api/v1/agent/chats/:chat_id/messages", 201, 3*time.Millisecond)
		}
	})
}
