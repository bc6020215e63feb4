package server

import (
	"cmp"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/chatd/chatd/store"
)

// Metrics are Prometheus text for an operator's scraper, served by
// MetricsHandler on a listener of its own (never the API's: they describe
// every user's traffic). Every label takes values from a set fixed when the
// server starts (the registered routes, the error catalogue, the message
// types), never from what a client sends, so the series stay as few as the
// routes and codes. What happens is counted where it happens: requests at
// the request middleware, against counters each route was given when it
// was registered (no map lookup, no lock: a few atomic adds per request);
// commits and checkpoints through the store's hooks; messages and
// deliveries from the committed changes the store publishes; sockets by
// the hub. The rest (queue depth, WAL and page counts, the delivery
// backlog, bulk jobs) is read when scraped, never per request.

// The route label of requests no registered route took: paths no route
// matched (404, 405), and the web app's files, so that scanners probing
// random paths cannot grow the series.
const (
	routeUnmatched = "unmatched"
	routeWeb       = "web"
)

// methodLabels bound the method label: a client may send any token.
var methodLabels = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}

func methodLabel(m string) string {
	for _, known := range methodLabels[:len(methodLabels)-1] {
		if m == known {
			return m
		}
	}
	return "other"
}

// routeStats are the counters of one method and route.
type routeStats struct {
	method, route string
	classes       [6]atomic.Uint64 // by status class: 1 for 1xx … 5 for 5xx
	latency       *histogram
}

func (rs *routeStats) observe(status int, took time.Duration) {
	rs.classes[min(max(status/100, 1), 5)].Add(1)
	rs.latency.observe(took.Seconds())
}

// labelledCounters are counters over a set of label values fixed up
// front, so that counting takes no lock. A value outside the set counts as
// "other" if that is one of the values, and is not counted otherwise.
type labelledCounters struct {
	values []string
	counts map[string]*atomic.Uint64
}

func newLabelledCounters(values ...string) *labelledCounters {
	c := &labelledCounters{counts: map[string]*atomic.Uint64{}}
	for _, v := range values {
		if _, dup := c.counts[v]; !dup {
			c.values = append(c.values, v)
			c.counts[v] = new(atomic.Uint64)
		}
	}
	return c
}

func (c *labelledCounters) add(value string, n int) {
	counter, ok := c.counts[value]
	if !ok {
		if counter, ok = c.counts["other"]; !ok {
			return
		}
	}
	counter.Add(uint64(n))
}

// write writes the family's samples, one per value, labelled label.
func (c *labelledCounters) write(p *promText, name, label string) {
	for _, v := range c.values {
		p.sample(name, labelSet(label, v), float64(c.counts[v].Load()))
	}
}

// retryReasons are why a request is answered 429 or 503 (each with
// Retry-After), with the status each answers.
var retryReasons = []struct{ status, reason string }{
	{"429", "rate_limit"},       // the credential's (or the address's) request rate
	{"429", "auth_failures"},    // the address spent its failed-authentication budget
	{"429", "registrations"},    // OAuth client registrations from the address
	{"429", "socket_limit"},     // open real-time connections, in all or of the credential
	{"429", "longpoll_limit"},   // held long-polls, in all or of the credential
	{"503", "write_queue_full"}, // load shedding: the writer's queue is full
	{"503", "bulk_queue_full"},  // too many bulk deletion jobs waiting
	{"503", "database_locked"},  // another process held the write lock
	{"503", "shutting_down"},    // the server is stopping
	{"503", "not_ready"},        // /readyz: the database does not take writes, or the queue is nearly full
}

// authCredentials are the kinds of credential whose failures are counted:
// a request's (credentialKind), a sign-in's or setup's secret, an OAuth
// code, refresh token or client.
var authCredentials = []string{"api_key", "bearer", "none", "sign_in", "oauth"}

type serverMetrics struct {
	s      *Server
	routes []*routeStats          // every route, registered or fixed, in the order written
	fixed  map[string]*routeStats // "METHOD route" for routeUnmatched and routeWeb

	errors, retries, authFailures, messages, deliveries *labelledCounters

	commitJobs, commitSeconds *histogram
	checkpoints               map[string]*histogram // by mode: truncate, passive
	build                     string                // chatd_build_info's labels
}

func newServerMetrics(s *Server, commit string) *serverMetrics {
	// The runtime's and the process's series (VictoriaMetrics/metrics)
	// come with their # TYPE lines only with this switched on.
	metrics.ExposeMetadata(true)
	m := &serverMetrics{s: s, fixed: map[string]*routeStats{},
		commitJobs: newHistogram(jobsBuckets), commitSeconds: newHistogram(commitBuckets),
		checkpoints: map[string]*histogram{"truncate": newHistogram(checkpointBuckets),
			"catchup": newHistogram(checkpointBuckets), "passive": newHistogram(checkpointBuckets)},
		build: labelSet("version", s.version, "commit", cmp.Or(commit, "unknown"), "goversion", runtime.Version())}
	for _, route := range []string{routeUnmatched, routeWeb} {
		for _, method := range methodLabels {
			m.fixed[method+" "+route] = m.routeStats(method, route)
		}
	}
	codes := []string{string(codeClientClosed)}
	for code := range statusOf {
		codes = append(codes, string(code))
	}
	sort.Strings(codes)
	// A code missing from statusOf is a bug (answered 500, and logged).
	m.errors = newLabelledCounters(append(codes, "other")...)
	reasons := make([]string, 0, len(retryReasons)+2)
	for _, r := range retryReasons {
		reasons = append(reasons, r.status+" "+r.reason)
	}
	m.retries = newLabelledCounters(append(reasons, "429 other", "503 other")...)
	m.authFailures = newLabelledCounters(authCredentials...)
	m.messages = newLabelledCounters(store.MessageTypes...)
	m.deliveries = newLabelledCounters("pending", "processing", "processed", "failed")
	return m
}

// routeStats returns new counters for a route as registered (or nil, with
// the metrics off), to be noted on each of its requests.
func (m *serverMetrics) routeStats(method, route string) *routeStats {
	if m == nil {
		return nil
	}
	rs := &routeStats{method: method, route: route, latency: newHistogram(requestBuckets)}
	m.routes = append(m.routes, rs)
	return rs
}

// fixedRoute is the counters of a request no registered route took.
func (m *serverMetrics) fixedRoute(method, route string) *routeStats {
	if m == nil {
		return nil
	}
	return m.fixed[methodLabel(method)+" "+route]
}

// observeRequest counts one answered request as noted while it was served.
func (m *serverMetrics) observeRequest(method string, n *callerNote, status int, took time.Duration) {
	rs := n.route
	if rs == nil {
		rs = m.fixedRoute(method, routeUnmatched)
	}
	rs.observe(status, took)
	if n.code != "" {
		m.errors.add(string(n.code), 1)
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		key := strconv.Itoa(status) + " " + n.retryReason
		if _, ok := m.retries.counts[key]; !ok {
			key = strconv.Itoa(status) + " other"
		}
		m.retries.add(key, 1)
	}
}

// observeRefusal counts a request the HTTP parser refused before any
// handler saw it.
func (m *serverMetrics) observeRefusal(status int, code errorCode) {
	m.observeRequest("", &callerNote{code: code}, status, 0)
}

// authFailed counts a credential (of a kind in authCredentials) refused.
func (m *serverMetrics) authFailed(credential string) {
	if m != nil {
		m.authFailures.add(credential, 1)
	}
}

// observeCommit is the store's commit hook.
func (m *serverMetrics) observeCommit(jobs int, took time.Duration) {
	m.commitJobs.observe(float64(jobs))
	m.commitSeconds.observe(took.Seconds())
}

// observeCheckpoint is the store's checkpoint hook.
func (m *serverMetrics) observeCheckpoint(mode string, took time.Duration) {
	if h := m.checkpoints[mode]; h != nil {
		h.observe(took.Seconds())
	}
}

// observeChange counts, from the changes the store publishes after each
// commit, the messages posted and each delivery's every new state: a
// text's deliveries start pending, and each transition publishes the
// delivery in its new state. What another node made, it counts.
func (m *serverMetrics) observeChange(c store.Change) {
	if c.Relayed {
		return
	}
	switch c.Kind {
	case store.MessageCreated:
		m.messages.add(c.Message.Type, 1)
		m.deliveries.add("pending", len(c.Message.Deliveries))
	case store.MessageUpdated:
		for _, d := range c.Message.Deliveries {
			m.deliveries.add(d.Status, 1)
		}
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
		var p promText
		s.metrics.writeTo(r.Context(), &p)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(p.Bytes())
	})
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// noteRoute records the counters of the route r matched.
func noteRoute(r *http.Request, rs *routeStats) {
	if n, _ := r.Context().Value(callerKey).(*callerNote); n != nil {
		n.route = rs
	}
}

// noteRetryReason records why r is answered 429 or 503.
func noteRetryReason(r *http.Request, reason string) {
	if n, _ := r.Context().Value(callerKey).(*callerNote); n != nil {
		n.retryReason = reason
	}
}
