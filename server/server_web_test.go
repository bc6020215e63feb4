package server

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// The web app's static files: content types, the security headers, ETags
// and revalidation, HEAD, and what is never served (paths that climb out of
// the web app's folder, the API's paths, directories, missing files).

// webTestFS is a build of the web app beside a file it must never serve,
// handed to the server as the web folder, as main does with the embedded
// one.
func webTestFS(t testing.TB) fs.FS {
	t.Helper()
	root := fstest.MapFS{
		"schema.sql":                {Data: []byte("CREATE TABLE secrets (x);")},
		"web/index.html":            {Data: []byte("<!doctype html><title>chatd</title><script src=\"/app.js\"></script>")},
		"web/app.js":                {Data: []byte("import './chat.mjs';")},
		"web/chat.mjs":              {Data: []byte("export const chat = 1;")},
		"web/style.css":             {Data: []byte("body { margin: 0 }")},
		"web/config.json":           {Data: []byte(`{"name":"chatd"}`)},
		"web/icon.svg":              {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)},
		"web/logo.png":              {Data: []byte("\x89PNG\r\n\x1a\n")},
		"web/favicon.ico":           {Data: []byte("\x00\x00\x01\x00")},
		"web/manifest.webmanifest":  {Data: []byte(`{"name":"chatd"}`)},
		"web/NOTICE":                {Data: []byte("<html><script>alert(1)</script>")}, // no extension: never sniffed into HTML
		"web/assets/fonts/ui.woff2": {Data: []byte("wOF2")},
		"web/api/notes.txt":         {Data: []byte("shadowing the API")},
		"web/docs/api/index.html":   {Data: []byte("<!doctype html><title>chatd API reference</title>")},
	}
	web, err := fs.Sub(root, "web")
	if err != nil {
		t.Fatal(err)
	}
	return web
}

func newWebTestServer(t *testing.T) *testServer {
	return newTestServerWith(t, func(c *Config) { c.Web = webTestFS(t) })
}

// withHeader sends a request header (no credentials: the web app's files
// need none).
func withHeader(name string, values ...string) cred {
	return func(h http.Header) {
		for _, v := range values {
			h.Add(name, v)
		}
	}
}

var strongETag = regexp.MustCompile(`^"[0-9a-f]{32}"$`)

func TestWebFiles(t *testing.T) {
	ts := newWebTestServer(t)
	for _, tc := range []struct {
		path, ctype, body string
	}{
		{"/", "text/html; charset=utf-8", "<!doctype html><title>chatd</title><script src=\"/app.js\"></script>"},
		{"/index.html", "text/html; charset=utf-8", ""},
		{"/app.js", "text/javascript; charset=utf-8", "import './chat.mjs';"},
		{"/chat.mjs", "text/javascript; charset=utf-8", ""},
		{"/style.css", "text/css; charset=utf-8", "body { margin: 0 }"},
		{"/config.json", "application/json", ""},
		{"/icon.svg", "image/svg+xml", ""},
		{"/logo.png", "image/png", "\x89PNG\r\n\x1a\n"},
		{"/favicon.ico", "image/x-icon", ""},
		{"/manifest.webmanifest", "application/manifest+json", ""},
		{"/NOTICE", "application/octet-stream", ""},
		{"/assets/fonts/ui.woff2", "font/woff2", ""},
		{"/assets/./fonts/../fonts/ui.woff2", "font/woff2", "wOF2"},
		{"/docs/api", "text/html; charset=utf-8", "<!doctype html><title>chatd API reference</title>"}, // the page at its own path
		{"/docs/api/index.html", "text/html; charset=utf-8", ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := ts.do(t, "GET", tc.path, noCred, nil)
			expect(t, r, 200, "")
			for name, want := range map[string]string{
				"Content-Type": tc.ctype,
				"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; " +
					"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
				"X-Content-Type-Options": "nosniff",
				"Referrer-Policy":        "no-referrer",
				"X-Frame-Options":        "DENY",
				"Cache-Control":          "no-cache",
				"Content-Length":         strconv.Itoa(len(r.body)),
			} {
				if got := r.header.Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			if tc.body != "" && string(r.body) != tc.body {
				t.Errorf("body = %q, want %q", r.body, tc.body)
			}
			if etag := r.header.Get("ETag"); !strongETag.MatchString(etag) {
				t.Errorf("ETag = %q, want a strong digest", etag)
			}
		})
	}
}

func TestWebFilesRevalidate(t *testing.T) {
	ts := newWebTestServer(t)
	first := ts.do(t, "GET", "/app.js", noCred, nil)
	expect(t, first, 200, "")
	etag := first.header.Get("ETag")
	if again := ts.do(t, "GET", "/app.js", noCred, nil).header.Get("ETag"); again != etag {
		t.Fatalf("ETag changed between requests: %s then %s", etag, again)
	}
	other := ts.do(t, "GET", "/style.css", noCred, nil).header.Get("ETag")
	if other == etag {
		t.Fatal("two files share an ETag")
	}
	if root, index := ts.do(t, "GET", "/", noCred, nil).header.Get("ETag"), ts.do(t, "GET", "/index.html", noCred, nil).header.Get("ETag"); root != index {
		t.Fatalf("/ and /index.html differ: %s, %s", root, index)
	}

	for _, tc := range []struct {
		name, method string
		ifNoneMatch  []string
		status       int
	}{
		{"its ETag", "GET", []string{etag}, 304},
		{"its ETag, weak", "GET", []string{"W/" + etag}, 304},
		{"a list holding it", "GET", []string{`"0000", ` + etag}, 304},
		{"in a second header", "GET", []string{`"0000"`, etag}, 304},
		{"any", "GET", []string{"*"}, 304},
		{"its ETag on HEAD", "HEAD", []string{etag}, 304},
		{"another file's ETag", "GET", []string{other}, 200},
		{"a stale ETag", "GET", []string{`"0123456789abcdef0123456789abcdef"`}, 200},
		{"its ETag unquoted", "GET", []string{etag[1 : len(etag)-1]}, 200},
		{"none", "GET", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.do(t, tc.method, "/app.js", withHeader("If-None-Match", tc.ifNoneMatch...), nil)
			expect(t, r, tc.status, "")
			if got := r.header.Get("ETag"); got != etag {
				t.Errorf("ETag = %q, want %q", got, etag)
			}
			if got := r.header.Get("Cache-Control"); got != "no-cache" {
				t.Errorf("Cache-Control = %q", got)
			}
			if tc.status == 304 && len(r.body) != 0 {
				t.Errorf("304 with a body %q", r.body)
			}
			if tc.status == 200 && string(r.body) != "import './chat.mjs';" {
				t.Errorf("body = %q", r.body)
			}
		})
	}
}

func TestWebFilesHead(t *testing.T) {
	ts := newWebTestServer(t)
	get := ts.do(t, "GET", "/style.css", noCred, nil)
	head := ts.do(t, "HEAD", "/style.css", noCred, nil)
	expect(t, head, 200, "")
	if len(head.body) != 0 {
		t.Fatalf("HEAD answered a body %q", head.body)
	}
	for _, name := range []string{"Content-Type", "Content-Length", "ETag", "Cache-Control", "Content-Security-Policy"} {
		if head.header.Get(name) == "" || head.header.Get(name) != get.header.Get(name) {
			t.Errorf("HEAD %s = %q, GET %q", name, head.header.Get(name), get.header.Get(name))
		}
	}

	// HEAD of what is not there is the 404 of GET, without its body.
	req, _ := http.NewRequest("HEAD", ts.http.URL+"/missing.js", nil)
	res, err := ts.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 || res.Header.Get("Content-Type") != "application/json" || res.Header.Get("ETag") != "" {
		t.Fatalf("HEAD /missing.js: %d %v", res.StatusCode, res.Header)
	}
}

// What is not a file of the web app is the JSON 404, whichever way the path
// is spelled: paths that climb out of the web folder, anything under /api/,
// directories, missing files, and methods other than GET and HEAD.
func TestWebFilesNotServed(t *testing.T) {
	ts := newWebTestServer(t)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/../schema.sql"},
		{"GET", "/%2e%2e/schema.sql"},
		{"GET", "/%2E%2E/%2e%2e/schema.sql"},
		{"GET", "/assets/../../schema.sql"},
		{"GET", "/..%2fschema.sql"},
		{"GET", "/schema.sql"},
		{"GET", "/api/notes.txt"},
		{"GET", "/x/../api/notes.txt"},
		{"GET", "//api/notes.txt"},
		{"GET", "/%61pi/notes.txt"},
		{"GET", "/api/v1/nothing-here"},
		{"GET", "/api"},
		{"GET", "/assets"},
		{"GET", "/assets/"},
		{"GET", "/assets/fonts/"},
		{"GET", "/missing.js"},
		{"GET", "/index.html/"},
		{"GET", "/docs/api/"},
		{"GET", "/docs"},
		{"POST", "/index.html"},
		{"PUT", "/app.js"},
		{"DELETE", "/"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := ts.do(t, tc.method, tc.path, noCred, nil)
			expect(t, r, 404, "not_found")
			if r.header.Get("ETag") != "" || r.header.Get("Content-Security-Policy") != "" {
				t.Errorf("a 404 carries a web file's headers: %v", r.header)
			}
		})
	}

	// Dot segments that stay inside the web folder land on its files.
	for _, p := range []string{"/%2e%2e/", "/../", "/assets/.."} {
		r := ts.do(t, "GET", p, noCred, nil)
		expect(t, r, 200, "")
		if r.header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("GET %s: %s, want index.html", p, r.header.Get("Content-Type"))
		}
	}
}

// TestWebFilesGzip: a text file over a kilobyte goes gzipped to a client
// that takes gzip, with its own ETag and Vary; others get it as it is, and
// so does everyone for a small file or an image.
func TestWebFilesGzip(t *testing.T) {
	script := strings.Repeat("export const line = 'the web app';\n", 200)
	ts := newTestServerWith(t, func(c *Config) {
		c.Web = fstest.MapFS{
			"app.js":   {Data: []byte(script)},
			"tiny.css": {Data: []byte("body { margin: 0 }")},
			"big.png":  {Data: []byte(strings.Repeat("\x89PNG", 1000))},
		}
	})
	// Go's client asks for gzip by itself unless told otherwise.
	plain := ts.do(t, "GET", "/app.js", withHeader("Accept-Encoding", "identity"), nil)
	expect(t, plain, 200, "")
	if plain.header.Get("Content-Encoding") != "" || string(plain.body) != script || plain.header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("without gzip: %v, %d bytes", plain.header, len(plain.body))
	}
	for _, accept := range []string{"gzip", "gzip, deflate, br", "br;q=1, gzip;q=0.5", "*"} {
		r := ts.do(t, "GET", "/app.js", withHeader("Accept-Encoding", accept), nil)
		expect(t, r, 200, "")
		if r.header.Get("Content-Encoding") != "gzip" || r.header.Get("Content-Length") != strconv.Itoa(len(r.body)) {
			t.Fatalf("Accept-Encoding %q: %v", accept, r.header)
		}
		zr, err := gzip.NewReader(bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || string(got) != script {
			t.Fatalf("Accept-Encoding %q: the body does not unzip to the file (%v)", accept, err)
		}
		if etag := r.header.Get("ETag"); etag == plain.header.Get("ETag") || !strings.HasSuffix(etag, `-gz"`) {
			t.Fatalf("the gzip form's ETag %q is not its own (the file's is %q)", etag, plain.header.Get("ETag"))
		}
		// Its ETag revalidates it.
		again := ts.do(t, "GET", "/app.js", both(withHeader("Accept-Encoding", accept), withHeader("If-None-Match", r.header.Get("ETag"))), nil)
		expect(t, again, 304, "")
	}
	for _, accept := range []string{"gzip;q=0", "br", "identity"} {
		r := ts.do(t, "GET", "/app.js", withHeader("Accept-Encoding", accept), nil)
		if r.header.Get("Content-Encoding") != "" || string(r.body) != script {
			t.Fatalf("Accept-Encoding %q was sent %v", accept, r.header)
		}
	}
	for _, path := range []string{"/tiny.css", "/big.png"} {
		r := ts.do(t, "GET", path, withHeader("Accept-Encoding", "gzip"), nil)
		if r.header.Get("Content-Encoding") != "" || r.header.Get("Vary") != "" {
			t.Fatalf("%s was sent %v", path, r.header)
		}
	}
	head := ts.do(t, "HEAD", "/app.js", withHeader("Accept-Encoding", "gzip"), nil)
	if head.header.Get("Content-Encoding") != "gzip" || len(head.body) != 0 {
		t.Fatalf("HEAD: %v, %d bytes", head.header, len(head.body))
	}
}
