package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/server"
	"github.com/chatd/chatd/store"
)

func newServeCmd() *cobra.Command {
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
		RunE: runServe,
	}
	f := cmd.Flags()
	f.String("addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	f.Int("write-queue", 1024, "writes that may wait for the database; beyond this, writes answer 503 and clients retry")
	f.String("sync", "full", `commit durability: "full" (an answered write survives power loss) or "normal" (faster; the last writes may be lost on power loss, never on a crash)`)
	f.Int64("max-body", 1<<20, "largest JSON request body in bytes")
	f.Int64("max-file-size", server.DefaultMaxFileBytes, "largest uploaded file in bytes (413 payload_too_large beyond)")
	f.Int("max-agents-per-user", store.DefaultLimits.AgentsPerUser, "quota: agents one person may own")
	f.Int("max-tags-per-agent", store.DefaultLimits.TagsPerAgent, "quota: tags on one agent")
	f.Int("max-chats-per-user", store.DefaultLimits.ChatsPerUser, "quota: rooms created by one person and the agents they own")
	f.Int("max-participants-per-room", store.DefaultLimits.ParticipantsPerRoom, "quota: participants in one room")
	f.Int("max-messages-per-room", store.DefaultLimits.MessagesPerRoom, "quota: messages and events in one room")
	f.Int("max-memories-per-agent", store.DefaultLimits.MemoriesPerAgent, "quota: memories one agent may store")
	f.Int("max-tasks-per-room", store.DefaultLimits.TasksPerRoom, "quota: tasks on one room's board")
	f.Bool("memories", true, "serve the memory routes (--memories=false makes them answer 403 feature_disabled)")
	f.Bool("room-tasks", true, "serve the room task board (--room-tasks=false removes its routes and reports ff_room_tasks false)")
	f.Int("bulk-queue", 64, "bulk deletion jobs that may be open (queued or running) at once; beyond this, new ones answer 503")
	f.Int("ws-max-conns", 20000, "real-time connections the server holds at most (beyond: 429 too_many_requests)")
	f.Int("ws-max-per-key", 100, "real-time connections one API key or token may hold at most")
	f.Float64("rate-limit", server.DefaultRateLimit, "requests per second one credential may make, sustained (beyond: 429 rate_limited); 0 switches the limit off")
	f.Int("rate-burst", server.DefaultRateBurst, "requests one credential may make at once")
	f.Float64("auth-failure-rate", server.DefaultAuthFailureRate, "failed authentications per second one client address may make (beyond: 429 instead of 401); 0 switches the limit off")
	f.Int("auth-failure-burst", server.DefaultAuthFailureBurst, "failed authentications one client address may make at once")
	f.Duration("attempt-timeout", 10*time.Minute, "how long an agent's processing attempt stays live; a new /processing after it starts a fresh attempt")
	f.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics on a listener of its own (host:port; off when empty); keep it private")
	f.String("checkpoints", "full", `WAL checkpoints: "full" (chatd also truncates the WAL when idle and on shutdown) or "passive" (never truncates it: for Litestream, which checkpoints itself)`)
	f.String("log-format", "text", `log format: "text" or "json"`)
	f.String("log-level", "info", `log level: "debug", "info", "warn" or "error"`)
	f.Duration("shutdown-grace", 30*time.Second, "how long a shutdown waits for requests in flight")
	f.Duration("header-timeout", server.DefaultHeaderTimeout, "how long a client may take to send a request's headers before its connection is closed")
	f.Duration("transfer-timeout", server.DefaultTransferTimeout, "minimum transfer rate: each 16 KiB of a request body must arrive, and of a response be taken by the client, within this, or the connection is cut (408 request_timeout for a body)")
	for flag, env := range map[string]string{
		"addr": "CHATD_ADDR", "write-queue": "CHATD_WRITE_QUEUE", "sync": "CHATD_SYNC", "max-body": "CHATD_MAX_BODY",
		"max-agents-per-user": "CHATD_MAX_AGENTS_PER_USER", "max-tags-per-agent": "CHATD_MAX_TAGS_PER_AGENT",
		"max-chats-per-user": "CHATD_MAX_CHATS_PER_USER", "max-participants-per-room": "CHATD_MAX_PARTICIPANTS_PER_ROOM",
		"max-messages-per-room": "CHATD_MAX_MESSAGES_PER_ROOM", "attempt-timeout": "CHATD_ATTEMPT_TIMEOUT",
		"max-memories-per-agent": "CHATD_MAX_MEMORIES_PER_AGENT", "max-tasks-per-room": "CHATD_MAX_TASKS_PER_ROOM",
		"memories": "CHATD_MEMORIES", "room-tasks": "CHATD_ROOM_TASKS", "max-file-size": "CHATD_MAX_FILE_SIZE",
		"bulk-queue":   "CHATD_BULK_QUEUE",
		"ws-max-conns": "CHATD_WS_MAX_CONNS", "ws-max-per-key": "CHATD_WS_MAX_PER_KEY",
		"rate-limit": "CHATD_RATE_LIMIT", "rate-burst": "CHATD_RATE_BURST",
		"auth-failure-rate": "CHATD_AUTH_FAILURE_RATE", "auth-failure-burst": "CHATD_AUTH_FAILURE_BURST",
		"metrics-addr": "CHATD_METRICS_ADDR", "checkpoints": "CHATD_CHECKPOINTS",
		"log-format": "CHATD_LOG_FORMAT", "log-level": "CHATD_LOG_LEVEL", "shutdown-grace": "CHATD_SHUTDOWN_GRACE",
		"header-timeout": "CHATD_HEADER_TIMEOUT", "transfer-timeout": "CHATD_TRANSFER_TIMEOUT",
	} {
		envFlag(f, flag, env)
	}
	return cmd
}

func runServe(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	addr, _ := f.GetString("addr")
	queue, _ := f.GetInt("write-queue")
	syncMode, _ := f.GetString("sync")
	maxBody, _ := f.GetInt64("max-body")
	maxFile, _ := f.GetInt64("max-file-size")
	limits := store.Limits{}
	limits.AgentsPerUser, _ = f.GetInt("max-agents-per-user")
	limits.TagsPerAgent, _ = f.GetInt("max-tags-per-agent")
	limits.ChatsPerUser, _ = f.GetInt("max-chats-per-user")
	limits.ParticipantsPerRoom, _ = f.GetInt("max-participants-per-room")
	limits.MessagesPerRoom, _ = f.GetInt("max-messages-per-room")
	limits.MemoriesPerAgent, _ = f.GetInt("max-memories-per-agent")
	limits.TasksPerRoom, _ = f.GetInt("max-tasks-per-room")
	memories, _ := f.GetBool("memories")
	roomTasks, _ := f.GetBool("room-tasks")
	attemptTimeout, _ := f.GetDuration("attempt-timeout")
	bulkQueue, _ := f.GetInt("bulk-queue")
	maxSockets, _ := f.GetInt("ws-max-conns")
	maxSocketsPerKey, _ := f.GetInt("ws-max-per-key")
	rateLimit, _ := f.GetFloat64("rate-limit")
	rateBurst, _ := f.GetInt("rate-burst")
	authFailureRate, _ := f.GetFloat64("auth-failure-rate")
	authFailureBurst, _ := f.GetInt("auth-failure-burst")
	grace, _ := f.GetDuration("shutdown-grace")
	metricsAddr, _ := f.GetString("metrics-addr")
	checkpoints, _ := f.GetString("checkpoints")
	headerTimeout, _ := f.GetDuration("header-timeout")
	transferTimeout, _ := f.GetDuration("transfer-timeout")
	switch {
	case queue < 1 || queue > 1_000_000:
		return usageError{fmt.Errorf("--write-queue must be from 1 to 1000000, not %d", queue)}
	case syncMode != string(store.SyncFull) && syncMode != string(store.SyncNormal):
		return usageError{fmt.Errorf(`--sync must be "full" or "normal", not %q`, syncMode)}
	case maxBody < 1024:
		return usageError{fmt.Errorf("--max-body must be at least 1024 bytes")}
	case maxFile < 1:
		return usageError{fmt.Errorf("--max-file-size must be at least 1 byte")}
	case min(limits.AgentsPerUser, limits.TagsPerAgent, limits.ChatsPerUser, limits.ParticipantsPerRoom, limits.MessagesPerRoom,
		limits.MemoriesPerAgent, limits.TasksPerRoom) < 1:
		return usageError{fmt.Errorf("quotas must be at least 1")}
	case attemptTimeout <= 0:
		return usageError{fmt.Errorf("--attempt-timeout must be positive")}
	case bulkQueue < 1 || bulkQueue > 100_000:
		return usageError{fmt.Errorf("--bulk-queue must be from 1 to 100000, not %d", bulkQueue)}
	case maxSockets < 1 || maxSocketsPerKey < 1:
		return usageError{fmt.Errorf("--ws-max-conns and --ws-max-per-key must be at least 1")}
	case rateLimit < 0 || authFailureRate < 0 || math.IsNaN(rateLimit) || math.IsNaN(authFailureRate):
		return usageError{fmt.Errorf("--rate-limit and --auth-failure-rate must be 0 (off) or positive")}
	case rateBurst < 1 || authFailureBurst < 1:
		return usageError{fmt.Errorf("--rate-burst and --auth-failure-burst must be at least 1")}
	case grace <= 0:
		return usageError{fmt.Errorf("--shutdown-grace must be positive")}
	case checkpoints != "full" && checkpoints != "passive":
		return usageError{fmt.Errorf(`--checkpoints must be "full" or "passive", not %q`, checkpoints)}
	case headerTimeout <= 0:
		return usageError{fmt.Errorf("--header-timeout must be positive")}
	case transferTimeout <= 0:
		return usageError{fmt.Errorf("--transfer-timeout must be positive")}
	}
	logger, err := newLogger(cmd)
	if err != nil {
		return err
	}

	// Listen before opening the database, so a taken or bad address fails
	// without touching the file.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	var metricsLn net.Listener
	if metricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", metricsAddr); err != nil {
			ln.Close()
			return fmt.Errorf("listen on %s for metrics: %w", metricsAddr, err)
		}
	}
	closeListeners := func() {
		ln.Close()
		if metricsLn != nil {
			metricsLn.Close()
		}
	}
	// The server lock tells `chatd restore` (and a second serve) that this
	// process has the database open; the kernel drops it if we die.
	// Taken before the database is opened: a second server must not even
	// migrate it or discard the first one's unfinished uploads.
	dbPath, err := databasePath(cmd)
	if err != nil {
		closeListeners()
		return err
	}
	lock, err := lockServer(dbPath)
	if err != nil {
		closeListeners()
		return err
	}
	defer lock.Release()
	db, err := openStoreAt(dbPath, store.Options{
		Sync: store.Sync(syncMode), QueueSize: queue, Logger: logger, Limits: limits, AttemptTimeout: attemptTimeout,
		BulkQueue: bulkQueue, PassiveCheckpointsOnly: checkpoints == "passive",
	})
	if err != nil {
		closeListeners()
		return err
	}
	closeDB := func() {
		if err := db.Close(); err != nil {
			logger.Error("closing the database", "err", err)
		}
	}
	if db.MigratedFrom() != db.SchemaVersion() {
		logger.Info("database schema ready", "from_version", db.MigratedFrom(), "to_version", db.SchemaVersion())
	}
	// Only the server takes uploads, so an 'uploading' file found before it
	// listens was left by a server that stopped mid-upload.
	if n, err := db.DiscardUnfinishedUploads(context.Background()); err != nil {
		closeListeners()
		closeDB()
		return err
	} else if n > 0 {
		logger.Info("removed uploads left unfinished by the last run", "files", n)
	}
	srv, err := server.New(server.Config{DB: db, Web: webFS(), Logger: logger, MaxBodyBytes: maxBody, MaxFileBytes: maxFile, HeaderTimeout: headerTimeout, TransferTimeout: transferTimeout, Version: version,
		MaxSockets: maxSockets, MaxSocketsPerKey: maxSocketsPerKey, DisableMemories: !memories, DisableRoomTasks: !roomTasks,
		RateLimit: rateLimit, RateBurst: rateBurst, DisableRateLimit: rateLimit == 0,
		AuthFailureRate: authFailureRate, AuthFailureBurst: authFailureBurst, DisableAuthFailureLimit: authFailureRate == 0,
		Metrics: metricsLn != nil})
	if err != nil {
		closeListeners()
		closeDB()
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	url := "http://" + openableAddr(ln.Addr().(*net.TCPAddr))
	fmt.Fprintf(cmd.OutOrStdout(), "chatd %s listening on %s (database %s, schema v%d, sync %s)\n",
		version, url, db.Path(), db.SchemaVersion(), syncMode)
	if n, err := db.CountUsers(ctx); err == nil && n == 0 {
		// The link carries the token in its fragment, which the browser
		// keeps to itself: the web app's setup page reads it there and
		// sends it in a request body, so it never reaches the server's or a
		// proxy's access logs. The curl line does the same without a browser.
		if token, err := db.CreateSetupToken(ctx); err != nil {
			logger.Error("creating the setup link", "err", err)
		} else {
			fmt.Fprintf(cmd.OutOrStdout(), "Open this link within %d minutes to create the first account: %s/#/setup/%s\n",
				int(store.SetupTokenTTL.Minutes()), url, token)
			fmt.Fprintf(cmd.OutOrStdout(), "or without a browser:  curl -X POST %s/api/v1/auth/setup -d '{\"token\": \"%s\", \"handle\": \"you\", \"name\": \"Your Name\", \"password\": \"12 or more characters\"}'\n",
				url, token)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "or with  chatd create-user --db %s --handle you --name \"Your Name\" --password-stdin\n", db.Path())
	}
	logger.Info("serving", "url", url, "db", db.Path())
	var metricsSrv *http.Server
	if metricsLn != nil {
		metricsURL := "http://" + metricsLn.Addr().String() + "/metrics"
		fmt.Fprintf(cmd.OutOrStdout(), "metrics at %s\n", metricsURL)
		metricsSrv = &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		go func() {
			if err := metricsSrv.Serve(metricsLn); !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics listener failed", "err", err)
			}
		}()
	}

	serveErr := srv.Serve(ctx, ln, grace)
	if metricsSrv != nil {
		metricsSrv.Close()
	}
	logger.Info("shutting down: writing what was accepted and checkpointing")
	closeDB()
	if serveErr != nil {
		return serveErr
	}
	logger.Info("stopped cleanly")
	return nil
}

// lockServer takes the server lock of the database at path, creating its
// directory as store.Open would.
func lockServer(path string) (*store.ServerLock, error) {
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
	return lock, err
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
