package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/chatd/chatd/internal/apitest"
	"github.com/chatd/chatd/store"
)

var testSchema = func() string {
	b, err := os.ReadFile("../schema.sql")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// testServer is a chatd server on a temp database, reached over real HTTP.
type testServer struct {
	t      testing.TB
	db     *store.DB
	srv    *Server
	http   *httptest.Server
	oas    *apitest.Validator
	reader *sql.DB // snapshot's own read-only connection, opened on first use
}

// newTestServer starts a server; opts adjust the store options.
func newTestServer(t testing.TB, opts ...func(*store.Options)) *testServer {
	t.Helper()
	return newTestServerWith(t, nil, opts...)
}

// newTestServerWith starts a server whose configuration configure adjusts.
func newTestServerWith(t testing.TB, configure func(*Config), opts ...func(*store.Options)) *testServer {
	t.Helper()
	o := store.Options{Schema: testSchema, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Sync: store.SyncNormal}
	for _, f := range opts {
		f(&o)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "chatd.db"), o)
	if err != nil {
		t.Fatal(err)
	}
	// The per-credential limit keeps its default, which the tests must
	// never reach. The failed-authentication limit is off: the audience
	// tests send hundreds of bad credentials from 127.0.0.1 in a second or
	// two, the very traffic it exists to slow; its own tests switch it on.
	cfg := Config{DB: db, Logger: o.Logger, Version: "test", DisableAuthFailureLimit: true,
		Web: fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>chatd</title>")}}}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	oas, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, db: db, srv: srv, http: hs, oas: oas}
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		db.Close()
	})
	return ts
}

// user creates a human (with an email, as the OpenAPI UserDetails requires)
// and returns it with its API key.
func (ts *testServer) user(handle string, org ...string) (*store.User, string) {
	ts.t.Helper()
	nu := store.NewUser{Handle: handle, Name: strings.ToUpper(handle[:1]) + handle[1:] + " Tester", Email: handle + "@example.com"}
	if len(org) > 0 {
		nu.Organization = org[0]
	}
	u, key, err := ts.db.CreateUser(context.Background(), nu)
	if err != nil {
		ts.t.Fatalf("create user %s: %v", handle, err)
	}
	return u, key
}

// personWithoutEmail creates a human the way the quickstart does
// (docs/quickstart.md: chatd create-user --handle H --name N, no --email)
// and returns it with its API key.
func (ts *testServer) personWithoutEmail(handle, name string) (*store.User, string) {
	ts.t.Helper()
	u, key, err := ts.db.CreateUser(context.Background(), store.NewUser{Handle: handle, Name: name})
	if err != nil {
		ts.t.Fatalf("create user %s: %v", handle, err)
	}
	return u, key
}

// agent registers an agent owned by owner and returns it with its API key.
func (ts *testServer) agent(owner *store.User, name string) (*store.Agent, string) {
	ts.t.Helper()
	a, key, err := ts.db.RegisterAgent(context.Background(), store.NewAgent{OwnerID: owner.ID, Name: name, Description: name + " does things"})
	if err != nil {
		ts.t.Fatalf("register agent %s: %v", name, err)
	}
	return a, key
}

// room creates a room as the agent whose key is given and adds the members
// (people or agents, by id); it returns the room's id.
func (ts *testServer) room(t testing.TB, agentKey string, members ...string) string {
	t.Helper()
	r := ts.do(t, "POST", "/api/v1/agent/chats", apiKey(agentKey), map[string]any{})
	expect(t, r, 201, "")
	id := r.data(t)["id"].(string)
	for _, m := range members {
		expect(t, ts.do(t, "POST", "/api/v1/agent/chats/"+id+"/participants", apiKey(agentKey),
			map[string]any{"participant": map[string]any{"participant_id": m}}), 201, "")
	}
	return id
}

// token issues a bearer token for u.
func (ts *testServer) token(u *store.User, ttl time.Duration) string {
	ts.t.Helper()
	secret, err := ts.db.ServerSecret(context.Background())
	if err != nil {
		ts.t.Fatal(err)
	}
	tok, err := IssueUserToken(secret, u.ID, ttl, time.Now())
	if err != nil {
		ts.t.Fatal(err)
	}
	return tok
}

// cred sets the credentials of a request.
type cred func(h http.Header)

func noCred(http.Header) {}

func apiKey(k string) cred { return func(h http.Header) { h.Set("X-API-Key", k) } }

func bearer(tok string) cred { return func(h http.Header) { h.Set("Authorization", "Bearer "+tok) } }

func both(a, b cred) cred { return func(h http.Header) { a(h); b(h) } }

// response is a response read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic value.
func (r *response) json(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("body is not a JSON object: %v: %q", err, r.body)
	}
	return v
}

// data returns the body's "data" object.
func (r *response) data(t testing.TB) map[string]any {
	t.Helper()
	d, ok := r.json(t)["data"].(map[string]any)
	if !ok {
		t.Fatalf("no data object in %s", r.body)
	}
	return d
}

// list returns the body's "data" array.
func (r *response) list(t testing.TB) []any {
	t.Helper()
	d, ok := r.json(t)["data"].([]any)
	if !ok {
		t.Fatalf("no data array in %s", r.body)
	}
	return d
}

// meta returns the body's "metadata" object.
func (r *response) meta(t testing.TB) map[string]any {
	t.Helper()
	m, ok := r.json(t)["metadata"].(map[string]any)
	if !ok {
		t.Fatalf("no metadata object in %s", r.body)
	}
	return m
}

// walkPages pages through a cursor listing (query holds limit and the
// filters), renders each page with render, and returns the pages joined by
// "|". It fails the test when a page is refused or paging does not end.
func (ts *testServer) walkPages(t testing.TB, path, query string, c cred, render func(*response) string) string {
	t.Helper()
	var pages []string
	q := query
	for i := 0; ; i++ {
		if i > 50 {
			t.Fatalf("%s?%s: cursor paging does not end", path, query)
		}
		r := ts.do(t, "GET", path+"?"+q, c, nil)
		expect(t, r, 200, "")
		pages = append(pages, render(r))
		m := r.meta(t)
		if m["has_more"] != true {
			if m["next_cursor"] != nil {
				t.Fatalf("last page has a next_cursor: %v", m)
			}
			return strings.Join(pages, "|")
		}
		q = query + "&cursor=" + url.QueryEscape(m["next_cursor"].(string))
	}
}

// errorCode returns the envelope's code ("" when the body is no envelope).
func (r *response) errorCode(t testing.TB) string {
	t.Helper()
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &env)
	return env.Error.Code
}

// do sends a request and validates the response against chatd's OpenAPI
// document (server/openapi) (and, for errors, the envelope and its request id). body may be
// nil, a string or []byte (sent as is), an io.Reader (streamed, with no
// declared length) or a value (sent as JSON).
func (ts *testServer) do(t testing.TB, method, path string, c cred, body any) *response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = struct{ io.Reader }{b} // hides the length, so the body is chunked
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, ts.http.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c(req.Header)
	res, err := ts.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := &response{status: res.StatusCode, header: res.Header, body: b}
	ts.checkResponse(t, method, req.URL.Path, r)
	return r
}

// checkResponse holds for every response: a request id header, the error
// envelope (with that request id and a message that describes the problem
// its code names) for every error, and the documented shape.
func (ts *testServer) checkResponse(t testing.TB, method, path string, r *response) {
	t.Helper()
	rid := r.header.Get("X-Request-Id")
	if rid == "" {
		t.Errorf("%s %s: no x-request-id header", method, path)
	}
	if r.status >= 400 {
		var env struct {
			Error struct {
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.body, &env); err != nil || env.Error.RequestID != rid {
			t.Errorf("%s %s: error body %s does not carry the request id %s", method, path, r.body, rid)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: error content type %q", method, path, ct)
		}
		if err := apitest.CheckStory(r.status, r.body); err != nil {
			t.Errorf("%s %s: the error tells two stories: %v", method, path, err)
		}
	}
	if err := ts.oas.ValidateResponse(method, path, r.status, r.body); err != nil {
		t.Errorf("OpenAPI: %v\nbody: %s", err, r.body)
	}
}

// expect checks status and, for errors, the envelope code.
func expect(t testing.TB, r *response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	if code != "" {
		if got := r.errorCode(t); got != code {
			t.Fatalf("error code = %q, want %q; body %s", got, code, r.body)
		}
	}
}

// refused sends a request that must be refused with status and code, with a
// problem at pointer in details (unless pointer is ""), and must leave the
// database as it was.
func (ts *testServer) refused(t testing.TB, method, path string, c cred, body any, status int, code, pointer string) *response {
	t.Helper()
	before := ts.snapshot(t)
	r := ts.do(t, method, path, c, body)
	expect(t, r, status, code)
	if pointer != "" {
		details, _ := r.json(t)["error"].(map[string]any)["details"].(map[string]any)
		if _, ok := details[pointer]; !ok {
			t.Fatalf("details %v lack %s", details, pointer)
		}
	}
	ts.unchanged(t, before)
	return r
}

// snapshot renders every row of every table (except the last-use time of
// keys and delegations, which authenticated requests update on their own),
// so a test can show that a refused request changed nothing.
func (ts *testServer) snapshot(t testing.TB) string {
	t.Helper()
	conn := ts.readConn(t)
	rows, err := conn.Query(`SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var out strings.Builder
	for _, table := range tables {
		rows, err := conn.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rows.Scan(ptrs...)
			var line strings.Builder
			fmt.Fprintf(&line, "%s:", table)
			for i, c := range cols {
				if (table == "api_keys" || table == "delegations") && c == "last_used_at" {
					continue
				}
				fmt.Fprintf(&line, " %s=%v", c, vals[i])
			}
			lines = append(lines, line.String())
		}
		rows.Close()
		sort.Strings(lines)
		for _, l := range lines {
			out.WriteString(l + "\n")
		}
	}
	return out.String()
}

// readConn is a read-only connection of the test's own to the database, to
// look at what the server stored.
func (ts *testServer) readConn(t testing.TB) *sql.DB {
	t.Helper()
	if ts.reader == nil {
		conn, err := sql.Open("sqlite", "file:"+ts.db.Path()+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		conn.SetMaxOpenConns(1)
		ts.t.Cleanup(func() { conn.Close() })
		ts.reader = conn
	}
	return ts.reader
}

// unchanged fails the test when the database differs from before.
func (ts *testServer) unchanged(t testing.TB, before string) {
	t.Helper()
	if after := ts.snapshot(t); after != before {
		t.Fatalf("a refused request changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// fillWriteQueue occupies the writer and fills its queue, so that the next
// write is refused; the returned func frees it. The store must have been
// opened with a small QueueSize.
func (ts *testServer) fillWriteQueue(t testing.TB) (release func()) {
	t.Helper()
	started, gate := make(chan struct{}), make(chan struct{})
	go ts.db.Write(context.Background(), func(*store.Tx) error { close(started); <-gate; return nil })
	<-started
	for {
		if err := ts.db.WriteAsync(func(*store.Tx) error { return nil }); err != nil {
			break
		}
	}
	return func() { close(gate) }
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
