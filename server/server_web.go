package server

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/chatd/chatd/store"
)

// The web app's static files, served for GET and HEAD outside /api/. They
// are embedded in the binary and cannot change while it runs, so everything
// about each file (its bytes, content type and ETag) is worked out once, when
// the Server is built, and a request is a map lookup.

// webFile is one file of the web app, ready to serve.
type webFile struct {
	body  []byte
	ctype string
	etag  string // strong: a digest of body

	// The gzip form of a text file, made the first time a browser that
	// takes gzip asks for it (not at start: servers start often in tests,
	// and most never serve a file), kept when it is smaller. Its ETag is
	// the file's with "-gz": a strong validator names one representation.
	gzipOnce sync.Once
	gz       []byte
}

// gzipMinSize is the size under which a file is sent as it is: below it,
// compressing saves less than the bytes it adds.
const gzipMinSize = 1024

// compressible reports whether a content type is text that gzip shrinks
// (images and fonts are compressed already).
func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || strings.HasPrefix(ctype, "application/json") ||
		strings.HasPrefix(ctype, "image/svg") || strings.HasPrefix(ctype, "application/manifest")
}

// gzipped answers the file's gzip form, or nil when it has none.
func (f *webFile) gzipped() []byte {
	if len(f.body) < gzipMinSize || !compressible(f.ctype) {
		return nil
	}
	f.gzipOnce.Do(func() {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		_, _ = zw.Write(f.body)
		if zw.Close() == nil && b.Len() < len(f.body) {
			f.gz = b.Bytes()
		}
	})
	return f.gz
}

// quality is the q of a coding's parameters (1 when absent or unreadable).
func quality(params string) float64 {
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return q
			}
		}
	}
	return 1
}

// acceptsGzip reports whether a request's Accept-Encoding takes gzip: it
// names gzip (or *) without q=0.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "*" {
				continue
			}
			return quality(params) > 0
		}
	}
	return false
}

// webCSP is the Content-Security-Policy of every web file: the web app loads
// only its own files (images may also be blob: and data: URLs, for previews
// of uploads), talks only to this server, runs no inline script or style,
// and may not be framed.
const webCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; " +
	"font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// webTypes are the content types by extension. A fixed table rather than
// mime.TypeByExtension, which also reads the host's mime.types: the same
// binary would label its files differently from one machine to the next.
// Text types name their charset; JSON needs none (it is UTF-8 by definition).
var webTypes = map[string]string{
	".html":        "text/html; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".mjs":         "text/javascript; charset=utf-8",
	".txt":         "text/plain; charset=utf-8",
	".json":        "application/json",
	".map":         "application/json",
	".webmanifest": "application/manifest+json",
	".svg":         "image/svg+xml",
	".png":         "image/png",
	".ico":         "image/x-icon",
	".jpg":         "image/jpeg",
	".jpeg":        "image/jpeg",
	".gif":         "image/gif",
	".webp":        "image/webp",
	".woff2":       "font/woff2",
	".woff":        "font/woff",
}

// webContentType is the content type of a file name. An unknown extension is
// application/octet-stream, never a guess from the content: with nosniff,
// a browser then downloads the file rather than run it as something else.
func webContentType(name string) string {
	if t, ok := webTypes[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	return "application/octet-stream"
}

// loadWebFiles reads every regular file of fsys once.
func loadWebFiles(fsys fs.FS) (map[string]*webFile, error) {
	files := map[string]*webFile{}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		files[name] = newWebFile(name, body)
		return nil
	})
	return files, err
}

// newWebFile prepares body, served under name, with its content type and a
// strong ETag.
func newWebFile(name string, body []byte) *webFile {
	sum := sha256.Sum256(body)
	return &webFile{body: body, ctype: webContentType(name), etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
}

// notFound answers every path no route matched: the web app's files for
// browsers (GET/HEAD), and the JSON envelope otherwise.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if f := s.webFileAt(r.URL.Path); f != nil {
			noteRoute(r, s.metrics.fixedRoute(r.Method, routeWeb))
			serveWebFile(w, r, f)
			return
		}
	}
	s.writeError(w, r, store.Errorf(store.CodeNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
}

// webFileAt returns the web file a request path names, or nil. "/" is
// index.html; other directories, and any path ending in "/", are no file.
// The path is cleaned first, so dot segments cannot climb out of the web
// app's files, and nothing under /api/ is ever a file, however the path
// spells it: an unknown API path stays a JSON 404.
func (s *Server) webFileAt(urlPath string) *webFile {
	name := strings.TrimPrefix(path.Clean("/"+urlPath), "/")
	switch {
	case strings.HasPrefix(urlPath, "/api/") || name == "api" || strings.HasPrefix(name, "api/"):
		return nil
	case name == "":
		name = "index.html"
	case strings.HasSuffix(urlPath, "/"):
		return nil
	}
	if page, ok := webPages[name]; ok {
		name = page
	}
	return s.webFiles[name]
}

// webPages are the pages served at a path of their own rather than at their
// file's name.
var webPages = map[string]string{"docs/api": "docs/api/index.html"}

// serveWebFile answers with f, or 304 when the client holds it already.
// no-cache has the browser check every time, which costs a 304 when nothing
// changed, and a new build's files are picked up at once. X-Content-Type-
// Options: nosniff is set on every response (withRequestScope).
// A text file is sent gzipped to a browser that takes it (Vary says so to
// caches).
func serveWebFile(w http.ResponseWriter, r *http.Request, f *webFile) {
	h := w.Header()
	h.Set("Content-Security-Policy", webCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	body, etag := f.body, f.etag
	gz := f.gzipped()
	if gz != nil {
		h.Set("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			body, etag = gz, strings.TrimSuffix(f.etag, `"`)+`-gz"`
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("ETag", etag)
	if etagListed(strings.Join(r.Header.Values("If-None-Match"), ","), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", f.ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// etagListed reports whether an If-None-Match value matches etag: "*", or
// a list holding it. If-None-Match compares weakly (RFC 9110, 13.1.2), so
// W/"x" matches "x".
func etagListed(ifNoneMatch, etag string) bool {
	for _, candidate := range strings.Split(ifNoneMatch, ",") {
		candidate = strings.TrimSpace(candidate)
		if candidate == "*" || strings.TrimPrefix(candidate, "W/") == etag {
			return true
		}
	}
	return false
}
