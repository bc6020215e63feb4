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
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

var testSchema = func() string {
	b, err := os.ReadFile("../schema.sql")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

var testPostgresSchema = func() string {
	b, err := os.ReadFile("../schema_postgres.sql")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// onPostgres: CHATD_TEST_BACKEND=postgres runs the server's tests on
// PostgreSQL, each on a database of its own in a throwaway cluster
// (internal/pgtest).
var onPostgres = os.Getenv("CHATD_TEST_BACKEND") == "postgres"

// testLocation is a fresh database for one test: a SQLite file in its
// temp directory, or a PostgreSQL database.
func testLocation(t testing.TB) string {
	if onPostgres {
		return pgtest.NewDatabase(t)
	}
	return filepath.Join(t.TempDir(), "chatd.db")
}

// The room routes of the agent and the human API.
const (
	agentChatsPath = "/api/v1/agent/chats"
	humanChatsPath = "/api/v1/me/chats"
)

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
	return newTestServerAt(t, testLocation(t), configure, opts...)
}

// newTestServerAt starts a server on the database at location.
func newTestServerAt(t testing.TB, location string, configure func(*Config), opts ...func(*store.Options)) *testServer {
	t.Helper()
	o := store.Options{Schema: testSchema, PostgresSchema: testPostgresSchema, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Sync: store.SyncNormal}
	for _, f := range opts {
		f(&o)
	}
	db, err := store.Open(location, o)
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
	r := ts.do(t, "POST", agentChatsPath, apiKey(agentKey), map[string]any{})
	expect(t, r, 201, "")
	id := r.data(t)["id"].(string)
	for _, m := range members {
		expect(t, ts.do(t, "POST", agentChatsPath+"/"+id+"/participants", apiKey(agentKey), participantBody(m, "")), 201, "")
	}
	return id
}

// participantBody is the body that adds id to a room, with role ("" for
// the default).
func participantBody(id, role string) map[string]any {
	p := map[string]any{"participant_id": id}
	if role != "" {
		p["role"] = role
	}
	return map[string]any{"participant": p}
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

// team is the cast the board, task and file tests share: alice owns the
// agents helper, scout and loner; helper created room, with scout and alice
// in it; loner is in no room, and bob is a stranger.
type team struct {
	ts                            *testServer
	alice, bob                    *store.User
	aliceKey, bobKey              string
	helper, scout, loner          *store.Agent
	helperKey, scoutKey, lonerKey string
	room                          string
}

func newTeam(t testing.TB, ts *testServer) team {
	t.Helper()
	k := team{ts: ts}
	k.alice, k.aliceKey = ts.user("alice")
	k.bob, k.bobKey = ts.user("bob")
	k.helper, k.helperKey = ts.agent(k.alice, "Helper")
	k.scout, k.scoutKey = ts.agent(k.alice, "Scout")
	k.loner, k.lonerKey = ts.agent(k.alice, "Loner")
	k.room = k.newRoom(t, k.scout.ID, k.alice.ID)
	return k
}

// newRoom creates a room as helper and adds the members.
func (k *team) newRoom(t testing.TB, members ...string) string {
	t.Helper()
	return k.ts.room(t, k.helperKey, members...)
}

// roomPath is what is under room (its board, its files) in the API of key:
// the people's for alice's and bob's keys, the agents' for the others.
func (k *team) roomPath(key, room, under string) string {
	if key == k.aliceKey || key == k.bobKey {
		return humanChatsPath + "/" + room + "/" + under
	}
	return agentChatsPath + "/" + room + "/" + under
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
	return topLevel[map[string]any](t, r, "data", "data object")
}

// list returns the body's "data" array.
func (r *response) list(t testing.TB) []any {
	t.Helper()
	return topLevel[[]any](t, r, "data", "data array")
}

// meta returns the body's "metadata" object.
func (r *response) meta(t testing.TB) map[string]any {
	t.Helper()
	return topLevel[map[string]any](t, r, "metadata", "metadata object")
}

// topLevel returns the body's member key as a T, and fails the test (naming
// what was missing) when the body has none.
func topLevel[T any](t testing.TB, r *response, key, what string) T {
	t.Helper()
	v, ok := r.json(t)[key].(T)
	if !ok {
		t.Fatalf("no %s in %s", what, r.body)
	}
	return v
}

// idLabels names the ids a test made, so that listings compare as readable
// names.
type idLabels map[string]string

// listed is the labels of a listing's items, in order, comma-separated, with
// "?id" for an id the test did not name.
func (l idLabels) listed(t testing.TB, r *response) string {
	t.Helper()
	var out []string
	for _, it := range r.list(t) {
		id := it.(map[string]any)["id"].(string)
		name, ok := l[id]
		if !ok {
			name = "?" + id
		}
		out = append(out, name)
	}
	return strings.Join(out, ",")
}

// listedValues is one field of each item of a listing, in order,
// comma-separated.
func listedValues(t testing.TB, r *response, field string) string {
	t.Helper()
	var out []string
	for _, it := range r.list(t) {
		out = append(out, it.(map[string]any)[field].(string))
	}
	return strings.Join(out, ",")
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

// errorCode returns the envelope's code, or the error of OAuth's error
// format ("" when the body is neither).
func (r *response) errorCode(t testing.TB) string {
	t.Helper()
	code, _ := apitest.ErrorCodeOf(r.body)
	return code
}

// do sends a request and validates the response against chatd's OpenAPI
// document (server/openapi) (and, for errors, the envelope and its request id). body may be
// nil, a string or []byte (sent as is), an io.Reader (streamed, with no
// declared length) or a value (sent as JSON).
func (ts *testServer) do(t testing.TB, method, path string, c cred, body any) *response {
	t.Helper()
	r, sentPath := ts.send(t, method, path, c, body)
	ts.checkResponse(t, method, sentPath, r)
	return r
}

// doNoContent is do for a route whose 204 the OpenAPI document gives a body
// that no 204 has: a 204 must have no body and a request id; any other
// answer is checked as do checks it.
func (ts *testServer) doNoContent(t testing.TB, method, path string, c cred) *response {
	t.Helper()
	r, sentPath := ts.send(t, method, path, c, nil)
	if r.status != http.StatusNoContent {
		ts.checkResponse(t, method, sentPath, r)
		return r
	}
	if len(r.body) != 0 {
		t.Errorf("%s %s: 204 with a body %q", method, path, r.body)
	}
	if r.header.Get("X-Request-Id") == "" {
		t.Errorf("%s %s: 204 without x-request-id", method, path)
	}
	return r
}

// send sends a request as do does and reads the response whole, checking
// nothing; it returns the path as sent (without the query).
func (ts *testServer) send(t testing.TB, method, path string, c cred, body any) (*response, string) {
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
	return &response{status: res.StatusCode, header: res.Header, body: b}, req.URL.Path
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
	if r.status >= 400 && apitest.IsOAuthError(r.body) {
		checkOAuthError(t, method, path, r)
	} else if r.status >= 400 {
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

// checkOAuthError holds a refusal in OAuth's error format to what such a
// refusal must be: from an OAuth endpoint, with a description, as JSON
// that is never cached.
func checkOAuthError(t testing.TB, method, path string, r *response) {
	t.Helper()
	if !strings.HasPrefix(path, "/oauth/") {
		t.Errorf("%s %s: an error in OAuth's format outside the OAuth endpoints: %s", method, path, r.body)
	}
	var body struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.Error == "" || body.Description == "" {
		t.Errorf("%s %s: OAuth error %s lacks its code or description", method, path, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: error content type %q", method, path, ct)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("%s %s: OAuth error with Cache-Control %q, want no-store", method, path, cc)
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

// scenario is one request and what must come of it: the unit of the
// server's table tests. A refusal (status 400 or more) must also leave the
// database as it was, whatever else the scenario checks.
type scenario struct {
	name   string
	method string
	path   string
	cred   cred // nil: no credentials
	body   any  // as do sends it
	status int
	code   string // the error envelope's code; "" checks none
	// pointers are JSON Pointers that error.details must name, each with
	// at least one message.
	pointers []string
	// check looks further at the answer, after the status and code.
	check func(t testing.TB, r *response)
	// same renders what must read the same after the request as before it,
	// beyond the database (which a refusal never changes).
	same func(t testing.TB) string
}

// refusalCase is a scenario written in one line, for tables of refusals.
func refusalCase(name string, c cred, method, path string, body any, status int, code string, pointers ...string) scenario {
	return scenario{name: name, cred: c, method: method, path: path, body: body, status: status, code: code, pointers: pointers}
}

// run runs each scenario as a sub-test of its name.
func (ts *testServer) run(t *testing.T, scenarios []scenario) {
	t.Helper()
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) { ts.try(t, s) })
	}
}

// try sends the scenario's request, checks what it promises, and returns
// the answer.
func (ts *testServer) try(t testing.TB, s scenario) *response {
	t.Helper()
	refusal := s.status >= 400
	var before, sameBefore string
	if refusal {
		before = ts.snapshot(t)
	}
	if s.same != nil {
		sameBefore = s.same(t)
	}
	c := s.cred
	if c == nil {
		c = noCred
	}
	r := ts.do(t, s.method, s.path, c, s.body)
	expect(t, r, s.status, s.code)
	if len(s.pointers) > 0 {
		details := errorDetails(t, r)
		for _, p := range s.pointers {
			if msgs, ok := details[p].([]any); !ok || len(msgs) == 0 {
				t.Errorf("details %v lack %s", details, p)
			}
		}
	}
	if s.check != nil {
		s.check(t, r)
	}
	if refusal {
		ts.unchanged(t, before)
	}
	if s.same != nil {
		if after := s.same(t); after != sameBefore {
			t.Errorf("%s %s changed what it must not:\nbefore:\n%s\nafter:\n%s", s.method, s.path, sameBefore, after)
		}
	}
	return r
}

// refused sends a request that must be refused with status and code, with a
// problem at pointer in details (unless pointer is ""), and must leave the
// database as it was.
func (ts *testServer) refused(t testing.TB, method, path string, c cred, body any, status int, code, pointer string) *response {
	t.Helper()
	if status < 400 {
		t.Fatalf("refused %s %s: status %d is no refusal", method, path, status)
	}
	s := scenario{method: method, path: path, cred: c, body: body, status: status, code: code}
	if pointer != "" {
		s.pointers = []string{pointer}
	}
	return ts.try(t, s)
}

// errorDetails returns the error envelope's details (nil when it has none).
func errorDetails(t testing.TB, r *response) map[string]any {
	t.Helper()
	env, _ := r.json(t)["error"].(map[string]any)
	d, _ := env["details"].(map[string]any)
	return d
}

// remarshal decodes what from encodes to as JSON into to.
func remarshal(t testing.TB, from, to any) {
	t.Helper()
	if err := json.Unmarshal(mustJSON(t, from), to); err != nil {
		t.Fatal(err)
	}
}

// jsonEqual is whether a and b encode to the same JSON.
func jsonEqual(t testing.TB, a, b any) bool {
	return string(mustJSON(t, a)) == string(mustJSON(t, b))
}

// sameJSON fails the test when got and want encode to different JSON.
func sameJSON(t testing.TB, what string, got, want any) {
	t.Helper()
	if g, w := string(mustJSON(t, got)), string(mustJSON(t, want)); g != w {
		t.Fatalf("%s = %s\nwant %s", what, g, w)
	}
}

// keysOf is the sorted key set of an object.
func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// offsetMetaJSON is an offsetMeta (the metadata of a page/page_size
// listing) as the test decodes it.
func offsetMetaJSON(page, size, total, pages int) map[string]any {
	return map[string]any{"page": float64(page), "page_size": float64(size), "total_count": float64(total), "total_pages": float64(pages)}
}

// snapshot renders every row of every table (except the last-use time of
// keys, delegations and OAuth grants, which authenticated requests update
// on their own, the search index, which the store writes a moment after
// the messages, the leases, which the background jobs renew on their
// own, and on PostgreSQL the changes shared with other nodes, to which
// presence adds its snapshots on its own), so a test can show that a
// refused request changed nothing.
func (ts *testServer) snapshot(t testing.TB) string {
	t.Helper()
	conn := ts.readConn(t)
	tables := `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
		AND name NOT LIKE 'messages_fts%' ORDER BY name`
	if onPostgres {
		tables = `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`
	}
	rows, err := conn.Query(tables)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	rows.Close()
	var out strings.Builder
	for _, table := range names {
		if table == "leases" || table == "cluster_changes" {
			continue
		}
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
				if (table == "api_keys" || table == "delegations" || table == "oauth_grants") && c == "last_used_at" {
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
		driver, dsn := "sqlite", "file:"+ts.db.Path()+"?mode=ro"
		if onPostgres {
			driver, dsn = "pgx", ts.db.Path()+"&default_transaction_read_only=on"
		}
		conn, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetMaxOpenConns(1)
		ts.t.Cleanup(func() { conn.Close() })
		ts.reader = conn
	}
	return ts.reader
}

// queryRow runs a query on the test's own read-only connection and scans
// its one row into dest.
func (ts *testServer) queryRow(t testing.TB, query string, args []any, dest ...any) {
	t.Helper()
	if err := ts.readConn(t).QueryRow(ts.db.Rebind(query), args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// count is what a SELECT count(*) query answers.
func (ts *testServer) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	ts.queryRow(t, query, args, &n)
	return n
}

// exec runs one SQL statement through the writer, to set up what the API
// cannot (global and organization-shared agents, room status and type,
// expired grants, failing triggers).
func (ts *testServer) exec(t testing.TB, query string, args ...any) {
	t.Helper()
	if err := ts.db.Write(t.Context(), func(tx *store.Tx) error {
		_, err := tx.Exec(query, args...)
		return err
	}); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// failRoomDeletion makes the deletion of one room fail as a storage error
// would, with a trigger in the database's own syntax.
func (ts *testServer) failRoomDeletion(t testing.TB, roomID string) {
	t.Helper()
	if !onPostgres {
		ts.exec(t, `CREATE TRIGGER fail_room_deletion BEFORE UPDATE OF deleted_at ON rooms WHEN NEW.id = '`+roomID+`'
			BEGIN SELECT RAISE(ABORT, 'simulated storage failure'); END`)
		return
	}
	ts.exec(t, `CREATE FUNCTION fail_room_deletion() RETURNS trigger LANGUAGE plpgsql
		AS $$ BEGIN RAISE EXCEPTION 'simulated storage failure'; END $$`)
	ts.exec(t, `CREATE TRIGGER fail_room_deletion BEFORE UPDATE OF deleted_at ON rooms
		FOR EACH ROW WHEN (NEW.id = '`+roomID+`') EXECUTE FUNCTION fail_room_deletion()`)
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
	return func() {
		close(gate)
		// Returns once the queue drained, so that the next write is not
		// refused for the fillers still in it (the writer takes them in
		// order: a write of ours accepted and done comes after them).
		deadline := time.Now().Add(10 * time.Second)
		for ts.db.Write(context.Background(), func(*store.Tx) error { return nil }) != nil {
			if time.Now().After(deadline) {
				t.Fatal("the write queue did not drain")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
