package server

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/chatd/chatd/server/phx"
)

// backlogLimit bounds the deliveries a scrape counts (store.DeliveryBacklog:
// each costs a row lookup, some 5 µs): a backlog past it reads as the
// limit, which is itself worth an alert.
const backlogLimit = 10_000

// writeTo writes every family: chatd's own, then the runtime's and the
// process's.
func (m *serverMetrics) writeTo(ctx context.Context, p *promText) {
	m.writeHTTP(p)
	m.writeWriter(p)
	m.writeRealtime(p)
	m.writeWork(p)
	m.writePurge(p)
	m.writeLeases(p)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m.writeDatabase(ctx, p)
	p.family("chatd_build_info", "gauge", "The running chatd: its version, the commit it was built from, and the Go release that built it; always 1.")
	p.sample("chatd_build_info", m.build, 1)
	writeRuntimeMetrics(p)
}

func (m *serverMetrics) writeHTTP(p *promText) {
	p.family("chatd_http_requests_total", "counter", "HTTP requests answered, by method, route pattern (never the raw path: "+
		"unmatched for paths no route took, web for the web app's files) and status class.")
	for _, rs := range m.routes {
		for class := 1; class <= 5; class++ {
			if n := rs.classes[class].Load(); n > 0 {
				p.sample("chatd_http_requests_total", labelSet("method", rs.method, "route", rs.route,
					"status_class", string(rune('0'+class))+"xx"), float64(n))
			}
		}
	}
	p.family("chatd_http_request_duration_seconds", "histogram", "Time from a request's arrival to its answer, by method and route pattern.")
	for _, rs := range m.routes {
		if rs.latency.count() > 0 {
			p.histogram("chatd_http_request_duration_seconds", labelSet("method", rs.method, "route", rs.route), rs.latency)
		}
	}
	p.family("chatd_http_errors_total", "counter", "Refusals answered, by the code of the error envelope "+
		"(on the OAuth endpoints, the OAuth error code; client_closed: the client left before its answer).")
	m.errors.write(p, "chatd_http_errors_total", "code")
	p.family("chatd_http_retry_later_total", "counter", "Answers of 429 or 503, each with Retry-After, by status and why.")
	for _, key := range m.retries.values {
		status, reason, _ := strings.Cut(key, " ")
		p.sample("chatd_http_retry_later_total", labelSet("status", status, "reason", reason), float64(m.retries.counts[key].Load()))
	}
	p.family("chatd_auth_failures_total", "counter", "Credentials refused, by kind: a request's API key, bearer token or none, "+
		"a sign-in's or setup's secret, an OAuth code, refresh token or client.")
	m.authFailures.write(p, "chatd_auth_failures_total", "credential")
}

func (m *serverMetrics) writeWriter(p *promText) {
	st := m.s.db.WriterStats()
	p.one("chatd_write_queue_depth", "gauge", "Writes waiting for the writer now.", float64(st.QueueDepth))
	p.one("chatd_write_queue_capacity", "gauge", "The bound of the write queue (--write-queue).", float64(st.QueueCapacity))
	p.one("chatd_write_refused_total", "counter", "Writes refused at once because the write queue was full: the 503s of load shedding.", float64(st.Refused))
	p.one("chatd_writer_jobs_total", "counter", "Writes run by the writer, committed or failed.", float64(st.Jobs))
	p.one("chatd_writer_failed_jobs_total", "counter", "Writes whose own work failed and was rolled back.", float64(st.FailedJobs))
	p.one("chatd_writer_commits_total", "counter", "Transactions the writer committed (each holds one write or more).", float64(st.Commits))
	p.family("chatd_writer_commit_jobs", "histogram", "Writes per committed transaction (group commit).")
	p.histogram("chatd_writer_commit_jobs", "", m.commitJobs)
	p.family("chatd_writer_commit_duration_seconds", "histogram", "Time of each committed transaction, from BEGIN to COMMIT.")
	p.histogram("chatd_writer_commit_duration_seconds", "", m.commitSeconds)
	p.family("chatd_checkpoints_total", "counter", "WAL checkpoints completed: truncate by the writer (idle, past the WAL bound, "+
		"at shutdown), catchup by the writer so the WAL can start over under load, passive in the background.")
	p.sample("chatd_checkpoints_total", labelSet("mode", "truncate"), float64(st.Checkpoints))
	p.sample("chatd_checkpoints_total", labelSet("mode", "catchup"), float64(st.CatchUpCheckpoints))
	p.sample("chatd_checkpoints_total", labelSet("mode", "passive"), float64(st.BackgroundCheckpoints))
	p.family("chatd_checkpoint_duration_seconds", "histogram", "Time of each completed checkpoint; a truncate one holds up the writer meanwhile.")
	for _, mode := range []string{"truncate", "catchup", "passive"} {
		p.histogram("chatd_checkpoint_duration_seconds", labelSet("mode", mode), m.checkpoints[mode])
	}
	p.one("chatd_wal_bytes", "gauge", "The size of the -wal file now.", float64(st.WALBytes))
}

func (m *serverMetrics) writeRealtime(p *promText) {
	hub := m.s.rt.hub.Stats()
	p.one("chatd_sockets_open", "gauge", "Real-time (WebSocket) connections open now.", float64(hub.Connections))
	p.one("chatd_channels_joined", "gauge", "Channel subscriptions, across all open connections.", float64(hub.Subscriptions))
	p.one("chatd_socket_connects_total", "counter", "Real-time connections accepted (upgraded and served).", float64(hub.Connects))
	p.family("chatd_socket_disconnects_total", "counter", "Real-time connections ended, by why: "+
		strings.Join(phx.DisconnectReasons[:], ", ")+" (docs/operations.md).")
	for _, reason := range phx.DisconnectReasons {
		p.sample("chatd_socket_disconnects_total", labelSet("reason", reason), float64(hub.Disconnects[reason]))
	}
	p.one("chatd_socket_pushes_sent_total", "counter", "Pushes written to real-time connections (replies and heartbeats aside).", float64(hub.PushesSent))
	p.one("chatd_socket_pushes_dropped_total", "counter", "Pushes never written: refused by a full send queue or a closing connection, "+
		"or dropped with a slow consumer's backlog or a broken connection.", float64(hub.PushesDropped))
	p.one("chatd_slow_consumers_dropped_total", "counter", "Connections closed for not reading their pushes fast enough.", float64(hub.SlowConsumers))
	p.one("chatd_realtime_changes_dropped_total", "counter", "Committed changes never pushed because routing them fell a whole queue behind.",
		float64(m.s.rt.dropped.Load()))
	p.one("chatd_longpolls_held", "gauge", "Long-polls (…/next?wait=) held now.", float64(m.s.waiters.held()))
}

func (m *serverMetrics) writeWork(p *promText) {
	p.family("chatd_messages_total", "counter", "Messages posted (committed), by type: text, or the event's type.")
	m.messages.write(p, "chatd_messages_total", "type")
	p.family("chatd_deliveries_total", "counter", "Deliveries (an agent's copy of a text mentioning it) entering each state: "+
		"pending when posted, processing when an agent takes it, then processed or failed.")
	m.deliveries.write(p, "chatd_deliveries_total", "state")
}

// writeDatabase writes what is read from the database at scrape time. A
// read that fails leaves its families out, and is logged.
// writePurge writes what the retention purge deleted since the server
// started.
func (m *serverMetrics) writePurge(p *promText) {
	purged := m.s.db.PurgeStats()
	p.family("chatd_purged_total", "counter", "Items the retention purge deleted, by kind: text messages, events, files.")
	for _, k := range []struct {
		kind string
		n    int64
	}{{"text", purged.Texts}, {"event", purged.Events}, {"file", purged.Files}} {
		p.sample("chatd_purged_total", labelSet("kind", k.kind), float64(k.n))
	}
	p.one("chatd_purged_bytes_total", "counter", "Bytes of the messages and files the retention purge deleted.", float64(purged.Bytes))
	p.one("chatd_purge_passes_total", "counter", "Retention purge passes completed.", float64(purged.Passes))
}

// leaseKinds are the kinds of lease a chatd process takes: the bulk
// deletion worker's, the retention purge's, and the claims on webhook
// endpoints (one per endpoint, counted together so the series stay few).
var leaseKinds = []string{"bulk", "purge", "webhook"}

// writeLeases writes the leases this process holds, by kind: with several
// nodes on one database, which of them runs each job now.
func (m *serverMetrics) writeLeases(p *promText) {
	held := m.s.db.LeasesHeld()
	p.family("chatd_leases_held", "gauge", "Leases this process holds now, by kind: bulk and purge (1 on the node running "+
		"the bulk deletion worker, the retention purge), webhook (endpoints whose sends it has claimed).")
	for _, kind := range leaseKinds {
		p.sample("chatd_leases_held", labelSet("kind", kind), float64(held[kind]))
	}
}

func (m *serverMetrics) writeDatabase(ctx context.Context, p *promText) {
	log := m.s.log
	if b, err := m.s.db.DeliveryBacklog(ctx, backlogLimit); err == nil {
		p.family("chatd_deliveries_backlog", "gauge", "Deliveries not processed yet, by state, counted up to "+
			"chatd_deliveries_backlog_limit in all.")
		for _, state := range []string{"pending", "processing", "failed"} {
			p.sample("chatd_deliveries_backlog", labelSet("state", state), float64(b.Open[state]))
		}
		p.one("chatd_deliveries_backlog_limit", "gauge", "Where counting the backlog stops: past it, the backlog's figures are lower bounds.", backlogLimit)
		age := 0.0
		if !b.OldestPending.IsZero() {
			age = max(0, time.Since(b.OldestPending).Seconds())
		}
		p.one("chatd_deliveries_oldest_pending_age_seconds", "gauge", "Age of the message of the oldest delivery no agent has taken yet; 0 when none waits.", age)
	} else {
		log.Warn("metrics: reading the delivery backlog", "err", err)
	}
	if pages, err := m.s.db.Pages(ctx); err == nil {
		p.one("chatd_database_pages", "gauge", "Pages in the database file (free ones included).", float64(pages.Count))
		p.one("chatd_database_free_pages", "gauge", "Pages on the free list, left by deletions, reused by later writes.", float64(pages.Free))
		p.one("chatd_database_page_size_bytes", "gauge", "The database's page size.", float64(pages.Size))
	} else {
		log.Warn("metrics: reading the page counts", "err", err)
	}
	if counts, err := m.s.db.BulkJobCounts(ctx); err == nil {
		statuses := make([]string, 0, len(counts))
		for status := range counts {
			statuses = append(statuses, status)
		}
		sort.Strings(statuses)
		p.family("chatd_bulk_jobs", "gauge", "Bulk deletion jobs, by status: queued, processing (open), completed, failed.")
		for _, status := range statuses {
			p.sample("chatd_bulk_jobs", labelSet("status", status), float64(counts[status]))
		}
	} else {
		log.Warn("metrics: counting bulk jobs", "err", err)
	}
}

// writeRuntimeMetrics writes the Go runtime's and the process's series as
// VictoriaMetrics/metrics does, with a help text in each "# HELP" line,
// which that library leaves empty.
func writeRuntimeMetrics(p *promText) {
	var b bytes.Buffer
	metrics.WriteProcessMetrics(&b)
	metrics.WriteFDMetrics(&b)
	for line := range strings.Lines(b.String()) {
		name, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "# HELP ")
		if !ok || strings.ContainsRune(name, ' ') {
			p.WriteString(line)
			continue
		}
		help := runtimeHelp[name]
		switch {
		case help != "":
		case strings.HasPrefix(name, "process_"):
			help = "The process, as the operating system reports it (VictoriaMetrics/metrics)."
		default:
			help = "The Go runtime, as runtime/metrics and runtime.MemStats report it (VictoriaMetrics/metrics)."
		}
		p.WriteString("# HELP " + name + " " + help + "\n")
	}
}

// runtimeHelp is the help of the runtime's and process's series a
// dashboard is most likely to show.
var runtimeHelp = map[string]string{
	"go_goroutines":                          "Goroutines that exist now.",
	"go_memstats_heap_alloc_bytes":           "Bytes of allocated heap objects.",
	"go_memstats_heap_inuse_bytes":           "Bytes in in-use heap spans.",
	"go_memstats_sys_bytes":                  "Bytes of memory obtained from the operating system.",
	"go_gc_duration_seconds":                 "Durations of the garbage collector's stop-the-world pauses.",
	"go_gc_cpu_seconds_total":                "CPU time spent by the garbage collector.",
	"process_cpu_seconds_total":              "CPU time (user and system) the process used.",
	"process_resident_memory_bytes":          "Resident memory of the process.",
	"process_open_fds":                       "File descriptors open now: sockets, the database and its WAL.",
	"process_max_fds":                        "The limit on open file descriptors.",
	"process_start_time_seconds":             "When the process started, in seconds since the Unix epoch.",
	"process_virtual_memory_bytes":           "Virtual memory of the process.",
	"process_io_storage_read_bytes_total":    "Bytes the process read from storage.",
	"process_io_storage_written_bytes_total": "Bytes the process wrote to storage.",
}
