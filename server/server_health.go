package server

import (
	"context"
	"net/http"
	"time"

	"github.com/chatd/chatd/store"
)

// The probes also answer HEAD, which some load balancers and monitors
// send: the same checks, with the body left out.
func (s *Server) healthRoutes() {
	for _, method := range []string{"GET", "HEAD"} {
		s.handle(method, "/healthz", public, s.healthz)
		s.handle(method, "/readyz", public, s.readyz)
	}
}

// healthz says the process is alive and serving HTTP; it touches nothing else,
// so a slow disk never gets a healthy server restarted.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.version})
	return nil
}

// The refusals of /readyz.
var (
	errNotWriting     = &store.Error{Code: store.CodeUnavailable, Message: "the database is not accepting writes"}
	errQueueSaturated = &store.Error{Code: store.CodeUnavailable, Message: "the write queue is saturated"}
)

// readyz says the server can take writes: the database answers a read and a
// commit through the writer, and the write queue is not saturated.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		if store.ErrorCode(err) == store.CodeInternal {
			s.log.Error("readiness check failed", "err", err)
		}
		return errNotWriting
	}
	st := s.db.WriterStats()
	if st.QueueDepth*10 >= st.QueueCapacity*9 {
		return errQueueSaturated
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"status":         "ready",
		"schema_version": s.db.SchemaVersion(),
		"write_queue":    map[string]int{"depth": st.QueueDepth, "capacity": st.QueueCapacity},
		"wal_bytes":      st.WALBytes,
	})
	return nil
}
