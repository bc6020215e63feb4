// Package server is chatd's HTTP surface: the Agent API (/api/v1/agent), the
// Human API (/api/v1/me), health probes and the embedded web app.
//
// Handlers decode and validate the request, call the store, and render the
// result; they write no SQL and decide no visibility (the store's queries
// do). Every refusal is a *store.Error rendered in the one error envelope
// {"error":{"code","message","request_id","details"?}}; statusOf maps each
// code to its HTTP status.
//
// Files are split by endpoint group (server_<group>.go), each with its own
// scenario tests.
package server

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gobwas/ws"
	"github.com/julienschmidt/httprouter"

	"github.com/chatd/chatd/store"
)

// Config configures a Server.
type Config struct {
	DB *store.DB
	// Web holds the static files of the web app, served at /.
	Web fs.FS
	// Logger receives one line per request; default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds JSON request bodies; default 1 MiB.
	MaxBodyBytes int64
	// Version is reported by /healthz.
	Version string
	// MaxSockets bounds open real-time connections; default 20000.
	MaxSockets int
	// MaxSocketsPerKey bounds the connections of one credential; default 100.
	MaxSocketsPerKey int
}

// Server serves the chatd HTTP API.
type Server struct {
	db        *store.DB
	log       *slog.Logger
	web       fs.FS
	maxBody   int64
	version   string
	tokenKey  []byte
	cursorKey []byte
	router    *httprouter.Router
	handler   http.Handler
	activity  *activityTracker
	rt        *realtime
	upgrader  ws.HTTPUpgrader

	maxSockets, maxSocketsPerKey int
	// registered lists the routes, for the tests that walk them all.
	registered []registeredRoute
}

type registeredRoute struct {
	method, path string
	aud          audience
}

// New returns a Server for cfg.DB.
func New(cfg Config) (*Server, error) {
	if cfg.DB == nil {
		return nil, errors.New("server: no database")
	}
	s := &Server{db: cfg.DB, log: cfg.Logger, web: cfg.Web, maxBody: cfg.MaxBodyBytes, version: cfg.Version,
		activity: newActivityTracker(), maxSockets: cfg.MaxSockets, maxSocketsPerKey: cfg.MaxSocketsPerKey,
		upgrader: ws.HTTPUpgrader{Timeout: 10 * time.Second}}
	if s.maxSockets <= 0 {
		s.maxSockets = 20000
	}
	if s.maxSocketsPerKey <= 0 {
		s.maxSocketsPerKey = 100
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.maxBody <= 0 {
		s.maxBody = 1 << 20
	}
	secret, err := cfg.DB.ServerSecret(context.Background())
	if err != nil {
		return nil, err
	}
	s.tokenKey = deriveKey(secret, "chatd/jwt/v1")
	s.cursorKey = deriveKey(secret, "chatd/cursor/v1")

	s.router = httprouter.New()
	s.router.RedirectTrailingSlash = false
	s.router.RedirectFixedPath = false
	s.router.HandleOPTIONS = false
	s.router.HandleMethodNotAllowed = true
	s.router.NotFound = http.HandlerFunc(s.notFound)
	s.router.MethodNotAllowed = http.HandlerFunc(s.methodNotAllowed)
	s.routes()
	s.handler = s.withRequestScope(s.router)
	s.rt = newRealtime(s)
	cfg.DB.SetPublisher(s.rt.publish)
	return s, nil
}

// Close closes the real-time connections (telling clients the server
// restarts) and stops publishing changes.
func (s *Server) Close() {
	s.db.SetPublisher(nil)
	s.rt.close()
}

// routes registers every endpoint. The chat id segment is named :chat_id on
// every route: httprouter requires one name per position.
func (s *Server) routes() {
	s.handle("GET", "/healthz", public, s.healthz)
	s.handle("GET", "/readyz", public, s.readyz)
	s.handle("GET", "/api/v1/socket/websocket", public, s.socket)

	s.handle("GET", "/api/v1/agent/me", agentsOnly, s.getAgentMe)
	s.handle("GET", "/api/v1/agent/peers", agentsOnly, s.listPeers)
	s.handle("GET", "/api/v1/agent/chats", agentsOnly, s.listAgentRooms)
	s.handle("POST", "/api/v1/agent/chats", agentsOnly, s.createRoom)
	s.handle("GET", "/api/v1/agent/chats/:chat_id", agentsOnly, s.getRoom)
	s.handle("PATCH", "/api/v1/agent/chats/:chat_id", agentsOnly, s.renameRoom)
	s.handle("GET", "/api/v1/agent/chats/:chat_id/participants", agentsOnly, s.listParticipants)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/participants", agentsOnly, s.addParticipant)
	s.handle("DELETE", "/api/v1/agent/chats/:chat_id/participants/:id", agentsOnly, s.removeParticipant)
	s.handle("GET", "/api/v1/agent/chats/:chat_id/messages", agentsOnly, s.listAgentMessages)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages", agentsOnly, s.sendMessage)
	s.handle("GET", "/api/v1/agent/chats/:chat_id/messages/next", agentsOnly, s.nextMessage)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages/:id/processing", agentsOnly, s.markProcessing)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages/:id/processed", agentsOnly, s.markProcessed)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/messages/:id/failed", agentsOnly, s.markFailed)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/events", agentsOnly, s.postEvent)
	s.handle("GET", "/api/v1/agent/chats/:chat_id/context", agentsOnly, s.listContext)
	s.handle("POST", "/api/v1/agent/chats/:chat_id/activity", agentsOnly, s.reportActivity)
	s.handle("GET", "/api/v1/agent/chats/:chat_id/board", agentsOnly, s.getBoard)
	s.handle("PUT", "/api/v1/agent/chats/:chat_id/board", agentsOnly, s.putBoard)

	s.handle("GET", "/api/v1/me", humansOnly, s.getMe)
	s.handle("GET", "/api/v1/me/profile", humansOnly, s.getMe)
	s.handle("PUT", "/api/v1/me/profile", humansOnly, s.updateProfile)
	s.handle("GET", "/api/v1/me/agents", humansOnly, s.listMyAgents)
	s.handle("POST", "/api/v1/me/agents/register", humansOnly, s.registerAgent)
	s.handle("DELETE", "/api/v1/me/agents/:id", humansOnly, s.deleteAgent)
	s.handle("GET", "/api/v1/me/peers", humansOnly, s.listPeers)
	s.handle("GET", "/api/v1/me/chats", humansOnly, s.listMyRooms)
	s.handle("POST", "/api/v1/me/chats", humansOnly, s.createRoom)
	s.handle("GET", "/api/v1/me/chats/:chat_id", humansOnly, s.getRoom)
	s.handle("PATCH", "/api/v1/me/chats/:chat_id", humansOnly, s.renameRoom)
	s.handle("DELETE", "/api/v1/me/chats/:chat_id", humansOnly, s.deleteRoom)
	s.handle("GET", "/api/v1/me/chats/:chat_id/participants", humansOnly, s.listParticipants)
	s.handle("POST", "/api/v1/me/chats/:chat_id/participants", humansOnly, s.addParticipant)
	s.handle("PATCH", "/api/v1/me/chats/:chat_id/participants/:id", humansOnly, s.updateParticipant)
	s.handle("DELETE", "/api/v1/me/chats/:chat_id/participants/:id", humansOnly, s.removeParticipant)
	s.handle("GET", "/api/v1/me/chats/:chat_id/messages", humansOnly, s.listHistory)
	s.handle("POST", "/api/v1/me/chats/:chat_id/messages", humansOnly, s.sendMessage)
	s.handle("GET", "/api/v1/me/chats/:chat_id/board", humansOnly, s.getBoard)
	s.handle("PUT", "/api/v1/me/chats/:chat_id/board", humansOnly, s.putBoard)
}

// handlerFunc is an endpoint: it writes a success response or returns the
// error to answer.
type handlerFunc func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error

func (s *Server) handle(method, path string, aud audience, h handlerFunc) {
	s.registered = append(s.registered, registeredRoute{method, path, aud})
	s.router.Handle(method, path, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if aud != public {
			p, err := s.authenticate(r, aud)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), principalKey, p))
		}
		if err := h(w, r, ps); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// Handler is the whole HTTP surface.
func (s *Server) Handler() http.Handler { return s.handler }

// methodNotAllowed answers 405 with the methods the path does take.
// httprouter always lists OPTIONS, which chatd does not serve, so it is
// dropped from the Allow header.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range strings.Split(w.Header().Get("Allow"), ",") {
		if m = strings.TrimSpace(m); m != "" && m != http.MethodOptions {
			allowed = append(allowed, m)
		}
	}
	allow := strings.Join(allowed, ", ")
	w.Header().Set("Allow", allow)
	s.writeError(w, r, errorf(codeMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
}

// Serve serves on ln until ctx ends, then shuts down gracefully:
// it stops accepting connections and waits (up to grace) for requests in
// flight, whose writes the store then drains.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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
