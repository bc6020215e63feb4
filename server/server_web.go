package server

import (
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/chatd/chatd/store"
)

// notFound answers every path no route matched: the web app's files for
// browsers (GET/HEAD outside /api/), and the JSON envelope otherwise.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if s.web != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) && !strings.HasPrefix(r.URL.Path, "/api/") {
		if s.serveWebFile(w, r) {
			return
		}
	}
	s.writeError(w, r, errorf(store.CodeNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
}

// serveWebFile serves a file of the web app ("/" is index.html) and reports
// whether one existed.
func (s *Server) serveWebFile(w http.ResponseWriter, r *http.Request) bool {
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	if !fs.ValidPath(name) {
		return false
	}
	b, err := fs.ReadFile(s.web, name)
	if err != nil {
		return false
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = http.DetectContentType(b)
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
	return true
}
