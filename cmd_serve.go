package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/chatd/chatd/server"
	"github.com/chatd/chatd/server/webhook"
	"github.com/chatd/chatd/store"
)

func newServeCmd() *cobra.Command {
	var cfg serveConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the chat server",
		Long: `Run the chat server: the Agent API under /api/v1/agent, the Human API under
/api/v1/me, health probes at /healthz and /readyz, and the web page at /.

It creates the database (or upgrades its schema) on start. It listens on
127.0.0.1 only unless told otherwise; put it behind a TLS reverse proxy before
exposing it.

SIGINT or SIGTERM stops it cleanly: it stops accepting connections, finishes
the requests in flight, writes everything already accepted, checkpoints the
database and exits 0.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd, cfg) },
	}
	f := cmd.Flags()
	cfg.bindFlags(f)
	addLogFlags(f)
	for flag, env := range map[string]string{
		"addr": "CHATD_ADDR", "write-queue": "CHATD_WRITE_QUEUE", "sync": "CHATD_SYNC", "max-body": "CHATD_MAX_BODY",
		"max-agents-per-user": "CHATD_MAX_AGENTS_PER_USER", "max-tags-per-agent": "CHATD_MAX_TAGS_PER_AGENT",
		"max-chats-per-user": "CHATD_MAX_CHATS_PER_USER", "max-participants-per-room": "CHATD_MAX_PARTICIPANTS_PER_ROOM",
		"max-messages-per-room": "CHATD_MAX_MESSAGES_PER_ROOM", "attempt-timeout": "CHATD_ATTEMPT_TIMEOUT",
		"max-memories-per-agent": "CHATD_MAX_MEMORIES_PER_AGENT", "max-tasks-per-room": "CHATD_MAX_TASKS_PER_ROOM",
		"memories": "CHATD_MEMORIES", "room-tasks": "CHATD_ROOM_TASKS", "max-file-size": "CHATD_MAX_FILE_SIZE",
		"bulk-queue": "CHATD_BULK_QUEUE", "purge-interval": "CHATD_PURGE_INTERVAL",
		"ws-max-conns": "CHATD_WS_MAX_CONNS", "ws-max-per-key": "CHATD_WS_MAX_PER_KEY",
		"poll-max-held": "CHATD_POLL_MAX_HELD", "poll-max-per-key": "CHATD_POLL_MAX_PER_KEY",
		"rate-limit": "CHATD_RATE_LIMIT", "rate-burst": "CHATD_RATE_BURST",
		"auth-failure-rate": "CHATD_AUTH_FAILURE_RATE", "auth-failure-burst": "CHATD_AUTH_FAILURE_BURST",
		"metrics-addr": "CHATD_METRICS_ADDR", "public-url": "CHATD_PUBLIC_URL", "checkpoints": "CHATD_CHECKPOINTS", "shutdown-grace": "CHATD_SHUTDOWN_GRACE",
		"header-timeout": "CHATD_HEADER_TIMEOUT", "transfer-timeout": "CHATD_TRANSFER_TIMEOUT",
		"webhook-allow": "CHATD_WEBHOOK_ALLOW", "webhook-deny": "CHATD_WEBHOOK_DENY",
	} {
		envFlag(f, flag, env)
	}
	return cmd
}

func runServe(cmd *cobra.Command, cfg serveConfig) error {
	if err := cfg.settle(); err != nil {
		return err
	}
	logger, err := newLogger(cmd)
	if err != nil {
		return err
	}
	if cfg.dbPath, err = databasePath(cmd); err != nil {
		return err
	}
	if err := cfg.refuseSQLiteSettings(); err != nil {
		return err
	}
	p, err := startProgram(cfg, logger)
	if err != nil {
		return err
	}
	defer p.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := cmd.OutOrStdout()
	bound := boundAddr(cfg.addr, p.ln.Addr().(*net.TCPAddr))
	fmt.Fprintf(out, "chatd %s listening on %s (database %s, schema v%d, sync %s)\n",
		version, listeningOn(bound, p.ln.Addr().(*net.TCPAddr), p.url), shownName(p.db.Path()), p.db.SchemaVersion(), cfg.store.Sync)
	if n, err := p.db.CountUsers(ctx); err == nil && n == 0 {
		printSetupLink(ctx, out, p)
	}
	logger.Info("serving", "addr", bound, "url", p.url, "db", shownName(p.db.Path()))
	if p.metricsLn != nil {
		fmt.Fprintf(out, "metrics at http://%s/metrics\n", p.metricsLn.Addr())
	}
	return p.Run(ctx)
}

// printSetupLink prints how to create the first account on a database with
// nobody in it.
func printSetupLink(ctx context.Context, out io.Writer, p *program) {
	// The link carries the token in its fragment, which the browser keeps
	// to itself: the web app's setup page reads it there and sends it in a
	// request body, so it never reaches the server's or a proxy's access
	// logs. The curl line does the same without a browser.
	if token, err := p.db.CreateSetupToken(ctx); err != nil {
		p.log.Error("creating the setup link", "err", err)
	} else {
		fmt.Fprintf(out, "Open this link within %d minutes to create the first account: %s/#/setup/%s\n",
			int(store.SetupTokenTTL.Minutes()), p.url, token)
		fmt.Fprintf(out, "or without a browser:  curl -X POST %s/api/v1/auth/setup -d '{\"token\": \"%s\", \"handle\": \"you\", \"name\": \"Your Name\", \"password\": \"12 or more characters\"}'\n",
			p.url, token)
	}
	database := "--db " + p.db.Path()
	if store.IsDatabaseURL(p.db.Path()) {
		database = "--database-url '" + shownName(p.db.Path()) + "'"
	}
	fmt.Fprintf(out, "or with  chatd create-user %s --handle you --name \"Your Name\" --password-stdin\n", database)
}

// serveConfig is what running a server takes: serve binds its flags to it,
// dev sets the few it needs and leaves the rest to the defaults of
// store.Open and server.New.
type serveConfig struct {
	addr, metricsAddr, dbPath string
	// checkpoints, sync, memories and roomTasks are serve's flags as
	// given; settle turns them into store and server options.
	checkpoints, sync   string
	memories, roomTasks bool
	// webhookAllow and webhookDeny are the ranges as given.
	webhookAllow, webhookDeny []string
	// store and server are completed by startProgram: the schema, the
	// logger, the database, the web app and the version.
	store  store.Options
	server server.Config
	grace  time.Duration
	// prepare, when set, runs while the server lock is held and before the
	// database is opened: the moment to look at or replace the file.
	prepare func() error
}

// bindFlags declares serve's flags, each setting its part of c.
func (c *serveConfig) bindFlags(f *pflag.FlagSet) {
	st, l, s := &c.store, &c.store.Limits, &c.server
	f.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	f.IntVar(&st.QueueSize, "write-queue", 1024, "writes that may wait for the database; beyond this, writes answer 503 and clients retry")
	f.StringVar(&c.sync, "sync", "full", `commit durability: "full" (an answered write survives power loss) or "normal" (faster; the last writes may be lost on power loss, never on a crash)`)
	f.Int64Var(&s.MaxBodyBytes, "max-body", 1<<20, "largest JSON request body in bytes")
	f.Int64Var(&s.MaxFileBytes, "max-file-size", server.DefaultMaxFileBytes, "largest uploaded file in bytes (413 payload_too_large beyond)")
	f.IntVar(&l.AgentsPerUser, "max-agents-per-user", store.DefaultLimits.AgentsPerUser, "quota: agents one person may own")
	f.IntVar(&l.TagsPerAgent, "max-tags-per-agent", store.DefaultLimits.TagsPerAgent, "quota: tags on one agent")
	f.IntVar(&l.ChatsPerUser, "max-chats-per-user", store.DefaultLimits.ChatsPerUser, "quota: rooms created by one person and the agents they own")
	f.IntVar(&l.ParticipantsPerRoom, "max-participants-per-room", store.DefaultLimits.ParticipantsPerRoom, "quota: participants in one room")
	f.IntVar(&l.MessagesPerRoom, "max-messages-per-room", store.DefaultLimits.MessagesPerRoom, "quota: messages and events in one room")
	f.IntVar(&l.MemoriesPerAgent, "max-memories-per-agent", store.DefaultLimits.MemoriesPerAgent, "quota: memories one agent may store")
	f.IntVar(&l.TasksPerRoom, "max-tasks-per-room", store.DefaultLimits.TasksPerRoom, "quota: tasks on one room's board")
	f.BoolVar(&c.memories, "memories", true, "serve the memory routes (--memories=false makes them answer 403 feature_disabled)")
	f.BoolVar(&c.roomTasks, "room-tasks", true, "serve the room task board (--room-tasks=false removes its routes and reports ff_room_tasks false)")
	f.DurationVar(&s.PurgeInterval, "purge-interval", server.DefaultPurgeInterval, "how often the retention purge runs, besides at start and when a retention setting changes; 0 switches it off (chatd purge then does it)")
	f.IntVar(&st.BulkQueue, "bulk-queue", 64, "bulk deletion jobs that may be open (queued or running) at once; beyond this, new ones answer 503")
	f.IntVar(&s.MaxSockets, "ws-max-conns", 20000, "real-time connections the server holds at most (beyond: 429 too_many_requests)")
	f.IntVar(&s.MaxSocketsPerKey, "ws-max-per-key", 100, "real-time connections one API key or token may hold at most")
	f.IntVar(&s.MaxHeldPolls, "poll-max-held", server.DefaultMaxHeldPolls, "long-polls (…/next?wait=) the server holds at once at most (beyond: 429 too_many_requests)")
	f.IntVar(&s.MaxHeldPollsPerKey, "poll-max-per-key", server.DefaultMaxHeldPollsPerKey, "long-polls one API key may hold at once at most")
	f.Float64Var(&s.RateLimit, "rate-limit", server.DefaultRateLimit, "requests per second one credential may make, sustained (beyond: 429 rate_limited); 0 switches the limit off")
	f.IntVar(&s.RateBurst, "rate-burst", server.DefaultRateBurst, "requests one credential may make at once")
	f.Float64Var(&s.AuthFailureRate, "auth-failure-rate", server.DefaultAuthFailureRate, "failed authentications per second one client address may make (beyond: 429 instead of 401); 0 switches the limit off")
	f.IntVar(&s.AuthFailureBurst, "auth-failure-burst", server.DefaultAuthFailureBurst, "failed authentications one client address may make at once")
	f.DurationVar(&st.AttemptTimeout, "attempt-timeout", 10*time.Minute, "how long an agent's processing attempt stays live; a new /processing after it starts a fresh attempt")
	f.StringVar(&s.PublicURL, "public-url", "", "the URL clients reach the server at (scheme://host[:port], no path), as OAuth sign-in names it to MCP clients; empty: the host each request came to, over http. Set it behind a TLS reverse proxy")
	f.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics on a listener of its own (host:port; off when empty); keep it private")
	f.StringVar(&c.checkpoints, "checkpoints", "full", `WAL checkpoints: "full" (chatd also truncates the WAL when idle and on shutdown) or "passive" (never truncates it: for Litestream, which checkpoints itself)`)
	f.DurationVar(&c.grace, "shutdown-grace", 30*time.Second, "how long a shutdown waits for requests in flight")
	f.DurationVar(&s.HeaderTimeout, "header-timeout", server.DefaultHeaderTimeout, "how long a client may take to send a request's headers before its connection is closed")
	f.DurationVar(&s.TransferTimeout, "transfer-timeout", server.DefaultTransferTimeout, "minimum transfer rate: each 16 KiB of a request body must arrive, and of a response be taken by the client, within this, or the connection is cut (408 request_timeout for a body)")
	f.StringSliceVar(&c.webhookDeny, "webhook-deny", nil, "address ranges webhooks may not reach, besides link-local and cloud metadata addresses (CIDR ranges or addresses, comma-separated; e.g. 10.0.0.0/8)")
	f.StringSliceVar(&c.webhookAllow, "webhook-allow", nil, "address ranges webhooks may reach even where refused otherwise, --webhook-deny included (CIDR ranges or addresses, comma-separated)")
}

// settle sets the options that serve's flags set only indirectly, and
// checks them all.
func (c *serveConfig) settle() error {
	c.store.Sync, c.store.PassiveCheckpointsOnly = store.Sync(c.sync), c.checkpoints == "passive"
	s := &c.server
	s.DisableMemories, s.DisableRoomTasks = !c.memories, !c.roomTasks
	s.DisableRateLimit, s.DisableAuthFailureLimit = s.RateLimit == 0, s.AuthFailureRate == 0
	s.DisablePurge = s.PurgeInterval == 0
	var err error
	if s.Webhooks.Allow, err = webhook.ParsePrefixes(c.webhookAllow); err != nil {
		return usageError{fmt.Errorf("--webhook-allow: %v", err)}
	}
	if s.Webhooks.Deny, err = webhook.ParsePrefixes(c.webhookDeny); err != nil {
		return usageError{fmt.Errorf("--webhook-deny: %v", err)}
	}
	return c.check()
}

// check refuses settings serve's flags may not take, as usage errors.
func (c serveConfig) check() error {
	st, s, l := c.store, c.server, c.store.Limits
	switch {
	case c.checkpoints != "full" && c.checkpoints != "passive":
		return usageError{fmt.Errorf(`--checkpoints must be "full" or "passive", not %q`, c.checkpoints)}
	case st.QueueSize < 1 || st.QueueSize > 1_000_000:
		return usageError{fmt.Errorf("--write-queue must be from 1 to 1000000, not %d", st.QueueSize)}
	case st.Sync != store.SyncFull && st.Sync != store.SyncNormal:
		return usageError{fmt.Errorf(`--sync must be "full" or "normal", not %q`, st.Sync)}
	case s.MaxBodyBytes < 1024:
		return usageError{fmt.Errorf("--max-body must be at least 1024 bytes")}
	case s.MaxFileBytes < 1:
		return usageError{fmt.Errorf("--max-file-size must be at least 1 byte")}
	case min(l.AgentsPerUser, l.TagsPerAgent, l.ChatsPerUser, l.ParticipantsPerRoom, l.MessagesPerRoom,
		l.MemoriesPerAgent, l.TasksPerRoom) < 1:
		return usageError{fmt.Errorf("quotas must be at least 1")}
	case st.AttemptTimeout <= 0:
		return usageError{fmt.Errorf("--attempt-timeout must be positive")}
	case s.PurgeInterval != 0 && s.PurgeInterval < time.Second:
		return usageError{fmt.Errorf("--purge-interval must be 0 (off) or at least 1s, not %s", s.PurgeInterval)}
	case st.BulkQueue < 1 || st.BulkQueue > 100_000:
		return usageError{fmt.Errorf("--bulk-queue must be from 1 to 100000, not %d", st.BulkQueue)}
	case s.MaxSockets < 1 || s.MaxSocketsPerKey < 1:
		return usageError{fmt.Errorf("--ws-max-conns and --ws-max-per-key must be at least 1")}
	case s.MaxHeldPolls < 1 || s.MaxHeldPollsPerKey < 1:
		return usageError{fmt.Errorf("--poll-max-held and --poll-max-per-key must be at least 1")}
	case s.RateLimit < 0 || s.AuthFailureRate < 0 || math.IsNaN(s.RateLimit) || math.IsNaN(s.AuthFailureRate):
		return usageError{fmt.Errorf("--rate-limit and --auth-failure-rate must be 0 (off) or positive")}
	case s.RateBurst < 1 || s.AuthFailureBurst < 1:
		return usageError{fmt.Errorf("--rate-burst and --auth-failure-burst must be at least 1")}
	case c.grace <= 0:
		return usageError{fmt.Errorf("--shutdown-grace must be positive")}
	case !validPublicURL(s.PublicURL):
		return usageError{fmt.Errorf("--public-url must be http:// or https:// with a host and no path, query or fragment, not %q", s.PublicURL)}
	case s.HeaderTimeout <= 0:
		return usageError{fmt.Errorf("--header-timeout must be positive")}
	case s.TransferTimeout <= 0:
		return usageError{fmt.Errorf("--transfer-timeout must be positive")}
	}
	return nil
}

// program is a started server: listening, holding the server lock of its
// database, the database open. Run serves; Close lets go of whatever is
// still held, so a caller may stop after startProgram without running.
type program struct {
	cfg           serveConfig
	log           *slog.Logger
	ln, metricsLn net.Listener
	lock          *store.ServerLock
	db            *store.DB
	srv           *server.Server
	// url is where a browser or client on this machine reaches the server.
	url string
}

// startProgram listens, locks and opens the database, and builds the
// server; on failure it has released everything again.
func startProgram(cfg serveConfig, logger *slog.Logger) (*program, error) {
	p := &program{cfg: cfg, log: logger}
	if err := p.start(); err != nil {
		p.close(true)
		return nil, err
	}
	return p, nil
}

func (p *program) start() error {
	var err error
	// Listen before opening the database, so a taken or bad address fails
	// without touching the file.
	if p.ln, err = net.Listen("tcp", p.cfg.addr); err != nil {
		return fmt.Errorf("listen on %s: %w", p.cfg.addr, err)
	}
	p.url = "http://" + openableAddr(p.ln.Addr().(*net.TCPAddr))
	if p.cfg.metricsAddr != "" {
		if p.metricsLn, err = net.Listen("tcp", p.cfg.metricsAddr); err != nil {
			return fmt.Errorf("listen on %s for metrics: %w", p.cfg.metricsAddr, err)
		}
	}
	// The server lock tells `chatd restore` (and a second serve) that this
	// process has the SQLite file open; the kernel drops it if we die.
	// Taken before the database is opened: a second server must not even
	// migrate it or discard the first one's unfinished uploads. PostgreSQL
	// takes any number of servers (nodes), and has no such lock.
	if p.lock, err = lockServer(p.cfg.dbPath); err != nil {
		return err
	}
	if p.cfg.prepare != nil {
		if err := p.cfg.prepare(); err != nil {
			return err
		}
	}
	opts := p.cfg.store
	opts.Logger = p.log
	if p.db, err = openStoreAt(p.cfg.dbPath, opts); err != nil {
		return err
	}
	if p.db.MigratedFrom() != p.db.SchemaVersion() {
		p.log.Info("database schema ready", "from_version", p.db.MigratedFrom(), "to_version", p.db.SchemaVersion())
	}
	// Only servers take uploads, so an 'uploading' file found before this
	// one listens was left by a server that stopped mid-upload, or, on
	// PostgreSQL, is being taken by another node: there, only those begun
	// longer ago than any upload lasts.
	startedBefore := time.Now()
	if store.IsDatabaseURL(p.cfg.dbPath) {
		startedBefore = startedBefore.Add(-abandonedUploadAge)
	}
	if n, err := p.db.DiscardUnfinishedUploads(context.Background(), startedBefore); err != nil {
		return err
	} else if n > 0 {
		p.log.Info("removed uploads left unfinished by the last run", "files", n)
	}
	sc := p.cfg.server
	sc.DB, sc.Web, sc.Logger, sc.Version, sc.Metrics = p.db, webFS(), p.log, version, p.metricsLn != nil
	sc.Commit, _ = buildCommit()
	p.srv, err = server.New(sc)
	return err
}

// Run serves until ctx ends, then stops: requests in flight get the grace
// period, and everything already accepted is written and checkpointed.
func (p *program) Run(ctx context.Context) error {
	stopMetrics := func() {}
	if p.metricsLn != nil {
		metricsSrv := &http.Server{Handler: p.srv.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelWarn)}
		go func() {
			if err := metricsSrv.Serve(p.metricsLn); !errors.Is(err, http.ErrServerClosed) {
				p.log.Error("metrics listener failed", "err", err)
			}
		}()
		stopMetrics = func() { p.stopMetrics(metricsSrv) }
	}
	serveErr := p.srv.Serve(ctx, p.ln, p.cfg.grace)
	// A scrape reads the database: the metrics stop before it closes,
	// rather than answer (and log) its reads failing. They go on until the
	// server has stopped, for whoever watches it drain.
	stopMetrics()
	p.log.Info("shutting down: writing what was accepted and checkpointing")
	p.closeDB()
	if serveErr != nil {
		return serveErr
	}
	p.log.Info("stopped cleanly")
	return nil
}

// stopMetrics stops the metrics listener, letting the scrapes in flight
// finish, as long as requests in flight get.
func (p *program) stopMetrics(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.grace)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
	}
}

func (p *program) closeDB() {
	if p.db == nil {
		return
	}
	if err := p.db.Close(); err != nil {
		p.log.Error("closing the database", "err", err)
	}
	p.db = nil
}

// Close releases the listeners, the database and then the server lock, as
// far as Run has not already; calling it twice is harmless.
func (p *program) Close() { p.close(false) }

// close releases what the program holds. refused says that it did not
// start (the database was refused, say): the lock file is then removed
// too if this process created it, so that a refused serve leaves nothing
// beside the file it refused.
func (p *program) close(refused bool) {
	for _, ln := range []net.Listener{p.ln, p.metricsLn} {
		if ln != nil {
			ln.Close()
		}
	}
	p.closeDB()
	if p.lock == nil {
		return
	}
	if refused {
		p.lock.Discard()
	} else {
		p.lock.Release()
	}
}

// refuseSQLiteSettings refuses, on a PostgreSQL database, a setting of the
// flags that tune SQLite's file away from their defaults (by flag or by
// environment): PostgreSQL's own settings (synchronous_commit, its
// checkpoints) govern there, and a setting that did nothing would mislead.
func (c serveConfig) refuseSQLiteSettings() error {
	if !store.IsDatabaseURL(c.dbPath) {
		return nil
	}
	for name, value := range map[string]string{"sync": c.sync, "checkpoints": c.checkpoints} {
		if value != "full" {
			return usageError{fmt.Errorf("--%s tunes a SQLite database; on PostgreSQL the server's own settings govern", name)}
		}
	}
	return nil
}

// abandonedUploadAge is when, on PostgreSQL, an unfinished upload is taken
// for one its node stopped in: past any upload's longest, a file of the
// default largest size at the slowest transfer rate allowed (under 7 h).
const abandonedUploadAge = 24 * time.Hour

// lockServer takes the server lock of the SQLite database at path, creating
// its directory as store.Open would; a PostgreSQL database has none.
func lockServer(path string) (*store.ServerLock, error) {
	if store.IsDatabaseURL(path) {
		return nil, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("create database directory: %w", err)
	}
	lock, err := store.LockServer(abs)
	if errors.Is(err, store.ErrServerRunning) {
		return nil, fmt.Errorf("another chatd serve (or a restore) is using %s", abs)
	}
	if err != nil {
		return nil, err
	}
	return lock, nil
}

// addLogFlags declares the flags newLogger reads.
func addLogFlags(f *pflag.FlagSet) {
	f.String("log-format", "text", `log format: "text" or "json"`)
	f.String("log-level", "info", `log level: "debug", "info", "warn" or "error"`)
	envFlag(f, "log-format", "CHATD_LOG_FORMAT")
	envFlag(f, "log-level", "CHATD_LOG_LEVEL")
}

func newLogger(cmd *cobra.Command) (*slog.Logger, error) {
	format, _ := cmd.Flags().GetString("log-format")
	levelName, _ := cmd.Flags().GetString("log-level")
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(levelName))); err != nil {
		return nil, usageError{fmt.Errorf(`--log-level must be "debug", "info", "warn" or "error", not %q`, levelName)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), opts)), nil
	}
	return nil, usageError{fmt.Errorf(`--log-format must be "text" or "json", not %q`, format)}
}

// openableAddr is the listening address as a browser on this machine can
// open it: an unspecified address (0.0.0.0, [::]) listens on every
// interface, loopback included, but is no address to open.
func openableAddr(a *net.TCPAddr) string {
	if a.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port))
	}
	return a.String()
}

// boundAddr is the address the server is bound to, as --addr names it
// with the port it got: Go reports a listener on 0.0.0.0 as [::], which
// is not what the operator wrote.
func boundAddr(flag string, ln *net.TCPAddr) string {
	host, _, err := net.SplitHostPort(flag)
	if err != nil || host == "" {
		return ln.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(ln.Port))
}

// listeningOn says where the server listens: its URL, or for an
// unspecified address the address it is bound to (bound), every
// interface, and the URL that opens it from this machine (url, from
// openableAddr). Printing only http://127.0.0.1:… would hide that the
// server is reachable from other machines.
func listeningOn(bound string, ln *net.TCPAddr, url string) string {
	if ln.IP.IsUnspecified() {
		return fmt.Sprintf("%s (all interfaces); open %s", bound, url)
	}
	return url
}

// validPublicURL reports whether u is empty or a URL clients can be told to
// prefix paths with: http or https, a host, nothing after it but a slash.
func validPublicURL(u string) bool {
	if u == "" {
		return true
	}
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" && (p.Path == "" || p.Path == "/") &&
		p.RawQuery == "" && p.Fragment == "" && p.User == nil
}
