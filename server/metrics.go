package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Metrics are Prometheus text for an operator's scraper, served by
// MetricsHandler on a listener of its own (never the API's: they describe
// every user's traffic). Requests are counted at the request middleware by
// the route pattern they matched, never the raw path, so the series stay as
// few as the routes; commits are observed through the store's commit hook;
// everything else (queue depth, WAL size, sockets, bulk jobs, the purge) is
// read when scraped. The library's counters and histograms are atomic or take a short
// lock of their own, so the hot path gains a map lookup and an add.

// routeUnmatched labels requests no route matched (404, 405), so that
// scanners probing random paths cannot grow the series.
const routeUnmatched = "unmatched"

type serverMetrics struct {
	set      *metrics.Set
	requests sync.Map // requestKey -> *metrics.Counter
	latency  sync.Map // latencyKey -> *metrics.Histogram

	commitJobs, commitSeconds *metrics.Histogram
}

type requestKey struct {
	method, route string
	status        int
}

type latencyKey struct{ method, route string }

func newServerMetrics(s *Server) *serverMetrics {
	m := &serverMetrics{set: metrics.NewSet()}
	m.commitJobs = m.set.NewHistogram("chatd_writer_commit_jobs")
	m.commitSeconds = m.set.NewHistogram("chatd_writer_commit_duration_seconds")
	m.set.RegisterMetricsWriter(func(w io.Writer) { s.writePulledMetrics(w) })
	return m
}

// observeCommit is the store's commit hook.
func (m *serverMetrics) observeCommit(jobs int, took time.Duration) {
	m.commitJobs.Update(float64(jobs))
	m.commitSeconds.Update(took.Seconds())
}

// observeRequest counts one finished request of route (a registered
// pattern, or routeUnmatched).
func (m *serverMetrics) observeRequest(method, route string, status int, took time.Duration) {
	if route == "" {
		route = routeUnmatched
	}
	if !knownMethod(method) {
		method = "other"
	}
	rk := requestKey{method, route, status}
	c, ok := m.requests.Load(rk)
	if !ok {
		c, _ = m.requests.LoadOrStore(rk, m.set.GetOrCreateCounter(fmt.Sprintf(
			`chatd_http_requests_total{method=%q,route=%q,status="%d"}`, method, route, status)))
	}
	c.(*metrics.Counter).Inc()
	lk := latencyKey{method, route}
	h, ok := m.latency.Load(lk)
	if !ok {
		h, _ = m.latency.LoadOrStore(lk, m.set.GetOrCreateHistogram(fmt.Sprintf(
			`chatd_http_request_duration_seconds{method=%q,route=%q}`, method, route)))
	}
	h.(*metrics.Histogram).Update(took.Seconds())
}

// knownMethod bounds the method label: a client may send any token.
func knownMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

// writePulledMetrics writes the values read at scrape time.
func (s *Server) writePulledMetrics(w io.Writer) {
	st := s.db.WriterStats()
	metrics.WriteGaugeUint64(w, "chatd_write_queue_depth", uint64(st.QueueDepth))
	metrics.WriteGaugeUint64(w, "chatd_write_queue_capacity", uint64(st.QueueCapacity))
	metrics.WriteCounterUint64(w, "chatd_write_refused_total", uint64(st.Refused))
	metrics.WriteCounterUint64(w, "chatd_writer_jobs_total", uint64(st.Jobs))
	metrics.WriteCounterUint64(w, "chatd_writer_failed_jobs_total", uint64(st.FailedJobs))
	metrics.WriteCounterUint64(w, "chatd_writer_commits_total", uint64(st.Commits))
	metrics.WriteCounterUint64(w, `chatd_checkpoints_total{mode="truncate"}`, uint64(st.Checkpoints))
	metrics.WriteCounterUint64(w, `chatd_checkpoints_total{mode="passive"}`, uint64(st.BackgroundCheckpoints))
	metrics.WriteGaugeUint64(w, "chatd_wal_bytes", uint64(st.WALBytes))

	hub := s.rt.hub.Stats()
	metrics.WriteGaugeUint64(w, "chatd_sockets_open", uint64(hub.Connections))
	metrics.WriteGaugeUint64(w, "chatd_channels_joined", uint64(hub.Subscriptions))
	metrics.WriteCounterUint64(w, "chatd_slow_consumers_dropped_total", uint64(hub.SlowConsumers))
	metrics.WriteGaugeUint64(w, "chatd_longpolls_held", uint64(s.waiters.held()))

	purged := s.db.PurgeStats()
	metrics.WriteCounterUint64(w, `chatd_purged_total{kind="text"}`, uint64(purged.Texts))
	metrics.WriteCounterUint64(w, `chatd_purged_total{kind="event"}`, uint64(purged.Events))
	metrics.WriteCounterUint64(w, `chatd_purged_total{kind="file"}`, uint64(purged.Files))
	metrics.WriteCounterUint64(w, "chatd_purged_bytes_total", uint64(purged.Bytes))
	metrics.WriteCounterUint64(w, "chatd_purge_passes_total", uint64(purged.Passes))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if counts, err := s.db.BulkJobCounts(ctx); err == nil {
		statuses := make([]string, 0, len(counts))
		for status := range counts {
			statuses = append(statuses, status)
		}
		sort.Strings(statuses)
		for _, status := range statuses {
			metrics.WriteGaugeUint64(w, `chatd_bulk_jobs{status=`+strconv.Quote(status)+`}`, uint64(counts[status]))
		}
	} else {
		s.log.Warn("metrics: counting bulk jobs", "err", err)
	}
}

// MetricsHandler serves GET /metrics: chatd's metrics, then the Go runtime's
// and the process's; and, under /debug/pprof/, the Go runtime's profiles
// (net/http/pprof), to see where time and memory go in a running server.
// It is nil unless Config.Metrics is set. Serve it on a listener of its
// own, reachable only by the operator and the scraper.
func (s *Server) MetricsHandler() http.Handler {
	if s.metrics == nil {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.metrics.set.WritePrometheus(w)
		metrics.WriteProcessMetrics(w)
	})
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// noteRoute records the route pattern r matched, for its metrics.
func noteRoute(r *http.Request, route string) {
	if n, _ := r.Context().Value(callerKey).(*callerNote); n != nil {
		n.route = route
	}
}
