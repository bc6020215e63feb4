// Package server is chatd's HTTP surface: the Agent API (/api/v1/agent), the
// Human API (/api/v1/me), the real-time socket, the MCP endpoint (/mcp),
// health probes and the embedded web app.
//
// Handlers decode and validate the request, call the store, and render the
// result; they write no SQL and decide no visibility (the store's queries
// do). Every refusal is a *store.Error (the store's domain codes) or an
// *httpError (the transport codes only this package decides, errors.go),
// rendered in the one error envelope
// {"error":{"code","message","request_id","details"?}}; statusOf maps each
// code to its HTTP status.
//
// Files are split by endpoint group: server_<group>.go registers the
// group's routes (its <group>Routes, called from routes.go) next to their
// handlers, request types, views and helpers, and has its own scenario
// tests beside it. What all groups share lives in files of its own: routing
// and authentication (routes.go, auth.go), bodies (body.go), paging
// (paging.go), errors (errors.go), the socket's connections and limits
// (server_socket.go), the pushes (realtime.go), and the waits of callers
// without a socket for an agent's next message (waiters.go). The MCP tools
// (mcp_*.go) are the REST routes called in-process (mcp_call.go), so the
// two cannot disagree.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gobwas/ws"
	"github.com/julienschmidt/httprouter"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatd/chatd/server/webhook"
	"github.com/chatd/chatd/store"
)

// Config configures a Server.
type Config struct {
	DB *store.DB
	// Web holds the static files of the web app, served at /. They are read
	// once, by New: changes to them later are not seen.
	Web fs.FS
	// Logger receives one line per request; default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds JSON request bodies; default 1 MiB.
	MaxBodyBytes int64
	// MaxFileBytes bounds an uploaded file; default DefaultMaxFileBytes.
	MaxFileBytes int64
	// HeaderTimeout bounds how long a client may take to send a request's
	// headers, so that a client trickling them (slowloris) cannot hold a
	// connection open; default DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// TransferTimeout is the minimum transfer rate: each 16 KiB of a request
	// body must arrive, and each 16 KiB of a response be taken by the
	// client, within it (transfer.go); default DefaultTransferTimeout.
	TransferTimeout time.Duration
	// Version is reported by /healthz; Version and Commit (the commit the
	// binary was built from) by the metrics' chatd_build_info.
	Version, Commit string
	// MaxSockets bounds open real-time connections; default 20000.
	MaxSockets int
	// MaxSocketsPerKey bounds the connections of one credential; default 100.
	MaxSocketsPerKey int
	// MaxHeldPolls bounds the long-polls held at once, default 20000;
	// MaxHeldPollsPerKey those of one credential, default 1000.
	MaxHeldPolls, MaxHeldPollsPerKey int
	// DisableMemories switches the memory routes off: they answer 403
	// feature_disabled, as the hosted API does where memories are gated.
	DisableMemories bool
	// DisableRoomTasks switches the room task board off: its routes are
	// absent (404) and /agent/me reports ff_room_tasks false.
	DisableRoomTasks bool
	// RateLimit is the requests a second one credential may make, sustained;
	// RateBurst how many it may make at once. Defaults DefaultRateLimit and
	// DefaultRateBurst; DisableRateLimit switches the limit off.
	RateLimit        float64
	RateBurst        int
	DisableRateLimit bool
	// AuthFailureRate and AuthFailureBurst bound the failed authentications
	// of one client address (beyond: 429 instead of 401). Defaults
	// DefaultAuthFailureRate and DefaultAuthFailureBurst;
	// DisableAuthFailureLimit switches the limit off.
	AuthFailureRate         float64
	AuthFailureBurst        int
	DisableAuthFailureLimit bool
	// Metrics collects request, writer and socket metrics for
	// MetricsHandler; off, the request path does not pay for them.
	Metrics bool
	// Webhooks tunes the sending of messages to agents' webhooks.
	Webhooks WebhookConfig
	// PurgeInterval is how often the retention purge runs (besides at
	// start and after a retention setting changes); default
	// DefaultPurgeInterval. DisablePurge leaves it to `chatd purge`.
	PurgeInterval time.Duration
	DisablePurge  bool
	// PublicURL is the URL clients reach the server at (scheme, host and
	// port, no path), as OAuth's metadata, issuer and resource name it
	// (server_oauth.go); empty, each request's own host over http.
	PublicURL string

	// now is the rate limits' clock; tests set a fake one.
	now func() time.Time
	// memberRooms stands in for the store's MemberRoomIDs in the presence
	// pushes: a test holds it to catch the presence loop mid-read.
	memberRooms func(ctx context.Context, id string) ([]string, error)
}

// Server serves the chatd HTTP API.
type Server struct {
	db            *store.DB
	log           *slog.Logger
	webFiles      map[string]*webFile // by name; nil serves none
	maxBody       int64
	headerTimeout time.Duration
	maxFile       int64
	version       string
	tokenKey      []byte
	cursorKey     []byte
	delegationKey []byte
	router        *httprouter.Router
	handler       http.Handler
	activity      *activityTracker
	rt            *realtime
	upgrader      ws.HTTPUpgrader
	// waiters are the requests waiting for an agent's next message
	// (waiters.go); mcp the open MCP sessions (server_mcp.go).
	waiters    *deliveryWaiters
	mcp        *mcpSessions
	mcpSchemas *mcp.SchemaCache
	// webhooks sends the webhook outbox (webhooks.go); webhookGuard checks
	// where a webhook leads, when it is registered and when it is sent.
	webhooks     *webhookDispatcher
	webhookGuard *webhook.Guard

	// transferTimeout is Config.TransferTimeout (transfer.go).
	transferTimeout time.Duration

	maxSockets, maxSocketsPerKey int
	memories, roomTasks          bool
	// requests is the per-credential rate limit, authFailures the limit on
	// failed authentications per client address, registrations the limit
	// on OAuth client registrations per address; nil when switched off.
	requests, authFailures, registrations *limiter
	// publicURL is Config.PublicURL, without a trailing slash.
	publicURL string
	metrics   *serverMetrics // nil unless Config.Metrics
	now       func() time.Time
	// registered lists the routes, for the tests that walk them all.
	registered []registeredRoute
	// handlers are the routes registered with handle, by "METHOD path",
	// for the MCP tools' in-process calls (mcp_call.go).
	handlers map[string]registeredRoute
	// named holds the names handleNamed dispatches, by method and path.
	named map[string]map[string]namedRoute
}

// New returns a Server for cfg.DB.
func New(cfg Config) (*Server, error) {
	if cfg.DB == nil {
		return nil, errors.New("server: no database")
	}
	s := &Server{db: cfg.DB, log: cfg.Logger, maxBody: cfg.MaxBodyBytes, maxFile: cfg.MaxFileBytes, version: cfg.Version,
		activity: newActivityTracker(), maxSockets: cfg.MaxSockets, maxSocketsPerKey: cfg.MaxSocketsPerKey,
		upgrader: ws.HTTPUpgrader{Timeout: 10 * time.Second},
		memories: !cfg.DisableMemories, roomTasks: !cfg.DisableRoomTasks}
	s.now = cfg.now
	if s.now == nil {
		s.now = time.Now
	}
	if !cfg.DisableRateLimit {
		s.requests = newLimiter(cmp.Or(cfg.RateLimit, DefaultRateLimit), cmp.Or(cfg.RateBurst, DefaultRateBurst))
		s.registrations = newLimiter(registrationRate, registrationBurst)
	}
	s.publicURL = strings.TrimSuffix(cfg.PublicURL, "/")
	if !cfg.DisableAuthFailureLimit {
		s.authFailures = newLimiter(cmp.Or(cfg.AuthFailureRate, DefaultAuthFailureRate),
			cmp.Or(cfg.AuthFailureBurst, DefaultAuthFailureBurst))
	}
	if s.maxSockets <= 0 {
		s.maxSockets = 20000
	}
	if s.maxSocketsPerKey <= 0 {
		s.maxSocketsPerKey = 100
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.headerTimeout = cfg.HeaderTimeout; s.headerTimeout <= 0 {
		s.headerTimeout = DefaultHeaderTimeout
	}
	if s.transferTimeout = cfg.TransferTimeout; s.transferTimeout <= 0 {
		s.transferTimeout = DefaultTransferTimeout
	}
	if s.maxBody <= 0 {
		s.maxBody = 1 << 20
	}
	if s.maxFile <= 0 {
		s.maxFile = DefaultMaxFileBytes
	}
	if cfg.Web != nil {
		files, err := loadWebFiles(cfg.Web)
		if err != nil {
			return nil, fmt.Errorf("server: read the web app's files: %w", err)
		}
		s.webFiles = files
	}
	secret, err := cfg.DB.ServerSecret(context.Background())
	if err != nil {
		return nil, err
	}
	s.tokenKey = deriveKey(secret, "chatd/jwt/v1")
	s.cursorKey = deriveKey(secret, "chatd/cursor/v1")
	s.delegationKey = deriveKey(secret, "chatd/delegation/v1")

	s.waiters = newDeliveryWaiters(cmp.Or(max(cfg.MaxHeldPolls, 0), DefaultMaxHeldPolls),
		cmp.Or(max(cfg.MaxHeldPollsPerKey, 0), DefaultMaxHeldPollsPerKey))
	s.webhookGuard = &webhook.Guard{Allow: cfg.Webhooks.Allow, Deny: cfg.Webhooks.Deny}
	s.webhooks = newWebhookDispatcher(cfg.DB, s.log, cfg.Webhooks, s.webhookGuard)
	s.mcpSchemas = mcp.NewSchemaCache()
	s.mcp = newMCPSessions(s)
	if cfg.Metrics {
		// Before the routes, which are each given their counters.
		s.metrics = newServerMetrics(s, cfg.Commit)
	}
	s.buildRouter()
	s.handler = s.withRequestScope(s.router)
	s.rt = newRealtime(s, cfg.memberRooms)
	s.observeStore(cfg.DB)
	// After the publisher, so that the pushes of jobs resumed from an
	// earlier run reach their subscribers.
	cfg.DB.StartBulkWorker()
	if !cfg.DisablePurge {
		cfg.DB.StartPurgeWorker(cmp.Or(cfg.PurgeInterval, DefaultPurgeInterval))
	}
	s.webhooks.start()
	return s, nil
}

// observeStore installs what the store tells the server of: each committed
// change, pushed (and with the metrics on, counted first), and with the
// metrics on, each commit and checkpoint.
func (s *Server) observeStore(db *store.DB) {
	publish := s.rt.publish
	if m := s.metrics; m != nil {
		db.SetCommitObserver(m.observeCommit)
		db.SetCheckpointObserver(m.observeCheckpoint)
		publish = func(c store.Change) {
			m.observeChange(c)
			s.rt.publish(c)
		}
	}
	db.SetPublisher(publish)
}

// Close stops sending webhooks (what is pending is sent by the next start),
// stops the bulk deletion worker (open jobs resume on the next start) and
// the retention purge (the next start's pass goes on from there), ends
// the waits for messages (a held long-poll is answered 204) and the MCP
// sessions, closes the real-time connections (telling clients the server
// restarts; presence is pushed no more) and stops publishing changes. The
// loops it stops are done with the database when it returns, since the
// caller closes the database next (requests in flight are Serve's to
// wait for).
func (s *Server) Close() {
	s.webhooks.close()
	s.db.SetCommitObserver(nil)
	s.db.SetCheckpointObserver(nil)
	s.db.StopBulkWorker()
	s.db.StopPurgeWorker()
	s.db.SetPublisher(nil)
	s.waiters.close()
	s.mcp.closeAll()
	s.rt.close()
	if !s.waiters.awaitAnswers(s.transferTimeout) {
		s.log.Warn("long-polls still unanswered when the server stopped")
	}
}

// DefaultPurgeInterval is the default of Config.PurgeInterval.
const DefaultPurgeInterval = time.Hour

// DefaultMaxHeldPolls and DefaultMaxHeldPollsPerKey are the defaults of
// Config.MaxHeldPolls and MaxHeldPollsPerKey: a held poll costs a few KB
// and a file descriptor, and a credential's workers need a handful.
const (
	DefaultMaxHeldPolls       = 20000
	DefaultMaxHeldPollsPerKey = 1000
)

// Handler is the whole HTTP surface.
func (s *Server) Handler() http.Handler { return s.handler }

// DefaultHeaderTimeout is the default of Config.HeaderTimeout: ample for any
// client that means to send a request, short enough that connections held
// open by trickled headers do not pile up.
const DefaultHeaderTimeout = 10 * time.Second

// Serve serves on ln until ctx ends, then shuts down gracefully:
// it stops accepting connections and waits (up to grace) for requests in
// flight, whose writes the store then drains.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	// Neither ReadTimeout nor WriteTimeout: each bounds a whole body, which
	// a large file at an ordinary speed can exceed, while a trickle keeps a
	// connection for all of it. Every body and response has a minimum rate
	// instead (transfer.go); real-time sockets have their own deadlines.
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.headerTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.jsonRefusals(srv, ln)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Sockets first, so that clients start reconnecting (to the next server)
	// while requests in flight finish.
	s.Close()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("requests still running at the end of the grace period; closing them")
		err = srv.Close()
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
