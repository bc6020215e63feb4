package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/chatd/chatd/store"
)

func TestCreateUserAndRegisterAgent(t *testing.T) {
	db := newDatabase(t, filepath.Join(t.TempDir(), "sub", "dir", "chatd.db"))

	text := runChatd(t, nil, "create-user", "--db", db, "--handle", "alice", "--name", "Alice Liddell").ok(t)
	if !strings.Contains(text.stdout, "band_u_") || !strings.Contains(text.stdout, "shown only now") {
		t.Fatalf("text output: %s", text.stdout)
	}
	// With exactly one person, --owner may be left out.
	agent := registerAgent(t, db, "--name", "Research Helper", "--description", "Finds sources")
	if agent.Handle != "alice/research-helper" || !strings.HasPrefix(agent.APIKey, "band_a_") {
		t.Fatalf("agent = %+v", agent)
	}
	bob := parseCreated(t, runChatd(t, []string{"CHATD_DB=" + db}, "create-user", "--handle", "bob", "--name", "Bob", "--email", "bob@example.com", "--json").ok(t).stdout)
	if bob.Handle != "bob" || !strings.HasPrefix(bob.APIKey, "band_u_") {
		t.Fatalf("bob = %+v", bob)
	}
	helper := registerAgent(t, db, "--owner", "@BOB", "--name", "Helper", "--description", "Answers questions", "--slug", "h1", "--tag", "one", "--tag", "two")
	if helper.Handle != "bob/h1" {
		t.Fatalf("helper = %+v", helper)
	}

	users, agents, keys := countRows(t, db, "users"), countRows(t, db, "agents"), countRows(t, db, "api_keys")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
		exit int
	}{
		{"duplicate handle", nil, []string{"create-user", "--handle", "ALICE", "--name", "Other"}, "handle ALICE is already taken", 1},
		{"bad handle", nil, []string{"create-user", "--handle", "a b", "--name", "X"}, "--handle may contain only", 2},
		{"bad email", nil, []string{"create-user", "--handle", "carol", "--name", "C", "--email", "nope"}, "--email is not a valid email", 2},
		{"missing name", nil, []string{"create-user", "--handle", "carol"}, "--name is required", 2},
		{"unknown flag", nil, []string{"create-user", "--handle", "carol", "--name", "C", "--admin"}, "unknown flag: --admin", 2},
		{"stray argument", nil, []string{"create-user", "carol"}, "takes 0 argument", 2},
		{"owner needed", nil, []string{"register-agent", "--name", "Another", "--description", "Another agent"}, "name the owner with --owner", 2},
		{"unknown owner", nil, []string{"register-agent", "--owner", "zed", "--name", "Another", "--description", "Another agent"}, `no person has the handle "zed"`, 1},
		{"duplicate agent handle", nil, []string{"register-agent", "--owner", "alice", "--name", "Research Helper", "--description", "Finds sources"}, "alice/research-helper is already taken", 1},
		{"agent name too short", nil, []string{"register-agent", "--owner", "alice", "--name", "X", "--description", "Too short a name"}, "--name must be at least 3", 2},
		// The Band Python SDK refuses to start an agent without a description.
		{"agent description missing", nil, []string{"register-agent", "--owner", "alice", "--name", "Quiet"}, "--description is required", 2},
		{"agent description blank", nil, []string{"register-agent", "--owner", "alice", "--name", "Quiet", "--description", "  \t "}, "--description is required", 2},
		{"agent description invisible", nil, []string{"register-agent", "--owner", "alice", "--name", "Quiet", "--description", "\u200b"}, "--description can't be blank", 2},
		{"adopted key without a description", nil, []string{"register-agent", "--owner", "alice", "--name", "Keyed", "--api-key", "band_a_" + strings.Repeat("k", 40)}, "--description is required", 2},
		{"wrong key kind adopted", nil, []string{"register-agent", "--owner", "alice", "--name", "Keyed", "--description", "Brings its own key", "--api-key", "band_u_" + strings.Repeat("k", 40)}, "--api-key must start with band_a_", 2},
		{"bad env value", []string{"CHATD_WRITE_QUEUE=lots"}, []string{"serve"}, "CHATD_WRITE_QUEUE", 2},
		{"refused env value", []string{"CHATD_SYNC=bogus"}, []string{"serve"}, `--sync (set by CHATD_SYNC) must be "full" or "normal"`, 2},
		{"empty backup file", nil, []string{"backup", ""}, "FILE is empty", 2},
		{"refused env range", []string{"CHATD_WEBHOOK_DENY=garbage"}, []string{"serve"}, "--webhook-deny (set by CHATD_WEBHOOK_DENY)", 2},
		{"bad webhook range", nil, []string{"serve", "--webhook-deny", "10.0.0.0/8,ten"}, `--webhook-deny: "ten" is not an address or a CIDR range`, 2},
		{"bad webhook range in the environment", []string{"CHATD_WEBHOOK_ALLOW=fe80::1%eth0"}, []string{"serve"}, "--webhook-allow", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runChatd(t, tc.env, append(tc.args, "--db", db)...)
			r.failsWithOneLine(t, tc.want)
			if r.code != tc.exit {
				t.Fatalf("exit %d, want %d", r.code, tc.exit)
			}
			if countRows(t, db, "users") != users || countRows(t, db, "agents") != agents || countRows(t, db, "api_keys") != keys {
				t.Fatal("a refused command left rows behind")
			}
		})
	}

	legacy := "thnv_a_1712345678_" + strings.Repeat("q", 32)
	old := registerAgent(t, db, "--owner", "alice", "--name", "Old Timer", "--description", "Still uses a thnv_ key", "--api-key", legacy)
	if old.APIKey != legacy {
		t.Fatalf("adopted key = %q", old.APIKey)
	}
}

// keyDigests renders the api_keys table, to show that a refused command
// changed no key.
func keyDigests(t testing.TB, db string) string {
	t.Helper()
	return queryValue[string](t, db, `SELECT group_concat(hex(digest), ',') FROM (SELECT digest FROM api_keys ORDER BY digest)`)
}

func TestRotateAgentKey(t *testing.T) {
	db := newDatabase(t, filepath.Join(t.TempDir(), "chatd.db"))
	runChatd(t, nil, "create-user", "--db", db, "--handle", "alice", "--name", "Alice").ok(t)
	runChatd(t, nil, "create-user", "--db", db, "--handle", "bob", "--name", "Bob").ok(t)
	helper := registerAgent(t, db, "--owner", "alice", "--name", "Helper", "--description", "Answers questions")
	runChatd(t, nil, "register-agent", "--db", db, "--owner", "bob", "--name", "Rover", "--description", "Fetches what it is asked for").ok(t)

	before := keyDigests(t, db)
	for _, tc := range []struct {
		name string
		args []string
		want string
		exit int
	}{
		{"no agent", nil, "--agent is required", 2},
		{"a person's handle", []string{"--agent", "alice"}, "--agent must be an agent's handle", 2},
		{"a malformed handle", []string{"--agent", "alice/Bad Slug"}, "--agent must be an agent's handle", 2},
		{"stray argument", []string{"--agent", "alice/helper", "now"}, "takes 0 argument", 2},
		{"unknown person", []string{"--agent", "zed/helper"}, `no person has the handle "zed"`, 1},
		{"unknown agent", []string{"--agent", "alice/rover"}, "@alice has no agent with the handle alice/rover", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runChatd(t, nil, append([]string{"rotate-agent-key", "--db", db}, tc.args...)...)
			r.failsWithOneLine(t, tc.want)
			if r.code != tc.exit {
				t.Fatalf("exit %d, want %d", r.code, tc.exit)
			}
			if keyDigests(t, db) != before {
				t.Fatal("a refused command changed the keys")
			}
		})
	}

	text := runChatd(t, nil, "rotate-agent-key", "--db", db, "--agent", "alice/helper").ok(t).stdout
	if !strings.Contains(text, "Replaced the key of Helper (@alice/helper, id "+helper.ID+")") || !strings.Contains(text, "shown only now") {
		t.Fatalf("text output: %s", text)
	}
	rotated := parseCreated(t, runChatd(t, nil, "rotate-agent-key", "--db", db, "--agent", "@alice/helper", "--json").ok(t).stdout)
	if rotated.ID != helper.ID || rotated.Handle != "alice/helper" || !strings.HasPrefix(rotated.APIKey, "band_a_") ||
		rotated.APIKey == helper.APIKey || strings.Contains(text, rotated.APIKey) {
		t.Fatalf("rotated = %+v", rotated)
	}
	if n := countRows(t, db, "api_keys"); n != 4 { // two people's, two agents'
		t.Fatalf("%d keys after rotating twice, want 4", n)
	}
}

// Rotating from the command line while a server runs: the server refuses
// the old key within a second or so, even though it had cached it, and
// closes the agent's socket opened with it.
func TestRotateAgentKeyAgainstARunningServer(t *testing.T) {
	db := filepath.Join(t.TempDir(), "chatd.db")
	srv := startServer(t, db)
	runChatd(t, nil, "create-user", "--db", db, "--handle", "alice", "--name", "Alice").ok(t)
	agent := registerAgent(t, db, "--name", "Helper", "--description", "Answers questions")
	if status, body := srv.call(t, "GET", "/api/v1/agent/me", agent.APIKey, nil); status != 200 {
		t.Fatalf("agent/me: %d %s", status, body)
	}
	closed := watchSocket(t, srv, "api_key="+url.QueryEscape(agent.APIKey))

	rotated := parseCreated(t, runChatd(t, nil, "rotate-agent-key", "--db", db, "--agent", "alice/helper", "--json").ok(t).stdout)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		status, _ := srv.call(t, "GET", "/api/v1/agent/me", agent.APIKey, nil)
		if status == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still answers the old key with %d", status)
		}
	}
	if status, body := srv.call(t, "GET", "/api/v1/agent/me", rotated.APIKey, nil); status != 200 {
		t.Fatalf("the new key: %d %s", status, body)
	}
	awaitSocketClose(t, closed, 1008, "the old key's socket")
}

// A password set with the CLI, while the server runs, signs the person out
// everywhere: the socket opened with their session token closes.
func TestSetPasswordAgainstARunningServerClosesSessionSockets(t *testing.T) {
	db := filepath.Join(t.TempDir(), "chatd.db")
	srv := startServer(t, db)
	runChatd(t, nil, "create-user", "--db", db, "--handle", "alice", "--name", "Alice").ok(t)
	runChatdWithInput(t, "first long password\n", "set-password", "--db", db, "--user", "alice").ok(t)
	status, body, err := send(srv.url, "POST", "/api/v1/auth/sign-in", nil, map[string]any{"handle": "alice", "password": "first long password"})
	if err != nil || status != 200 {
		t.Fatalf("sign-in: %d %s %v", status, body, err)
	}
	var signedIn struct {
		Data struct {
			AccessToken string `json:"access_token"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &signedIn); err != nil {
		t.Fatal(err)
	}
	closed := watchSocket(t, srv, "token="+url.QueryEscape(signedIn.Data.AccessToken))

	runChatdWithInput(t, "second long password\n", "set-password", "--db", db, "--user", "alice").ok(t)
	awaitSocketClose(t, closed, 1008, "the session's socket")
}

// watchSocket opens a socket to srv with the credential in query and
// reports the code the server closes it with.
func watchSocket(t *testing.T, srv *serverProc, query string) <-chan ws.StatusCode {
	t.Helper()
	conn, err := srv.dialSocket(query)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	closed := make(chan ws.StatusCode, 1)
	go func() {
		for {
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := wsutil.ReadServerText(conn); err != nil {
				var c wsutil.ClosedError
				errors.As(err, &c)
				closed <- c.Code
				return
			}
		}
	}()
	return closed
}

// awaitSocketClose fails the test unless the socket closes with code within
// the few seconds a change by another process takes to be noticed.
func awaitSocketClose(t *testing.T, closed <-chan ws.StatusCode, code ws.StatusCode, what string) {
	t.Helper()
	select {
	case got := <-closed:
		if got != code {
			t.Fatalf("%s closed with %d, want %d", what, got, code)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s stayed open", what)
	}
}

func TestCommandsRefuseUnusableDatabasePaths(t *testing.T) {
	dir := t.TempDir()
	notADir := filepath.Join(dir, "file")
	os.WriteFile(notADir, []byte("x"), 0o600)
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte(strings.Repeat("garbage ", 1000)), 0o600)
	for _, tc := range []struct{ db, wantUse, wantMigrate string }{
		{filepath.Join(notADir, "chatd.db"), "not a directory", "create database directory"},
		{garbage, "not a SQLite database", "not a SQLite database"},
	} {
		runChatd(t, nil, "create-user", "--db", tc.db, "--handle", "alice", "--name", "A").failsWithOneLine(t, tc.wantUse)
		runChatd(t, nil, "migrate", "--db", tc.db).failsWithOneLine(t, tc.wantMigrate)
	}
	if os.Getuid() != 0 { // root can write anywhere
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o500)
		runChatd(t, nil, "create-user", "--db", filepath.Join(ro, "chatd.db"), "--handle", "alice", "--name", "A").failsWithOneLine(t, "chatd.db")
	}
}

func TestMigrate(t *testing.T) {
	db := filepath.Join(t.TempDir(), "chatd.db")
	schema, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	current, err := store.SchemaVersionOf(string(schema))
	if err != nil {
		t.Fatal(err)
	}
	at := fmt.Sprintf("schema version %d", current)
	if out := runChatd(t, nil, "migrate", "--db", db).ok(t).stdout; !strings.Contains(out, "created") || !strings.Contains(out, at) {
		t.Fatalf("first migrate: %s", out)
	}
	if out := runChatd(t, nil, "migrate", "--db", db).ok(t).stdout; !strings.Contains(out, "already at "+at) {
		t.Fatalf("second migrate: %s", out)
	}

	sqliteFile(t, db, "PRAGMA user_version = 42")
	runChatd(t, nil, "migrate", "--db", db).failsWithOneLine(t, "schema version 42")
	r := runChatd(t, nil, "serve", "--db", db, "--addr", "127.0.0.1:0")
	r.failsWithOneLine(t, "upgrade chatd")
	if strings.Contains(r.stdout, "listening") {
		t.Fatal("serve started on a newer schema")
	}
}

func TestBackup(t *testing.T) {
	dir := t.TempDir()
	db := newDatabase(t, filepath.Join(dir, "chatd.db"))
	runChatd(t, nil, "create-user", "--db", db, "--handle", "alice", "--name", "Alice").ok(t)
	copyPath := filepath.Join(dir, "backups", "copy.db")
	os.Mkdir(filepath.Dir(copyPath), 0o700)

	if out := runChatd(t, nil, "backup", "--db", db, copyPath).ok(t).stdout; !strings.Contains(out, "integrity check ok") {
		t.Fatalf("backup: %s", out)
	}
	if n := countRows(t, copyPath, "users"); n != 1 {
		t.Fatalf("users in the copy = %d", n)
	}
	runChatd(t, nil, "backup", "--db", db, copyPath).failsWithOneLine(t, "already exists")
	runChatd(t, nil, "create-user", "--db", db, "--handle", "bob", "--name", "Bob").ok(t)
	runChatd(t, nil, "backup", "--db", db, "--force", copyPath).ok(t)
	if n := countRows(t, copyPath, "users"); n != 2 {
		t.Fatalf("users in the replaced copy = %d", n)
	}
	runChatd(t, nil, "backup", "--db", filepath.Join(dir, "missing.db"), filepath.Join(dir, "x.db")).failsWithOneLine(t, "no database")
	// A folder that does not exist yet is created.
	runChatd(t, nil, "backup", "--db", db, filepath.Join(dir, "new", "dir", "x.db")).ok(t)
	if n := countRows(t, filepath.Join(dir, "new", "dir", "x.db"), "users"); n != 2 {
		t.Fatalf("users in the copy in a new folder = %d", n)
	}
	runChatd(t, nil, "backup", "--db", db).failsWithOneLine(t, "takes 1 argument")
	entries, _ := os.ReadDir(filepath.Dir(copyPath))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file left behind: %s", e.Name())
		}
	}
}

// The CLI works on the same file while a server runs, and the server sees
// what it wrote.
func TestCommandsAgainstARunningServer(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "chatd.db")
	srv := startServer(t, db)

	alice := createUser(t, db, "alice", "Alice")
	agent := registerAgent(t, db, "--name", "Helper", "--description", "Answers questions")
	status, body := srv.call(t, "GET", "/api/v1/agent/me", agent.APIKey, nil)
	if status != 200 || !strings.Contains(string(body), `"handle":"alice/helper"`) {
		t.Fatalf("agent/me: %d %s", status, body)
	}
	for i := 0; i < 20; i++ {
		status, body := srv.call(t, "POST", "/api/v1/me/agents/register", alice.APIKey,
			map[string]any{"agent": map[string]any{"name": "Bot " + string(rune('a'+i)), "description": "made over HTTP"}})
		if status != 201 {
			t.Fatalf("register over HTTP: %d %s", status, body)
		}
	}
	runChatd(t, nil, "migrate", "--db", db).ok(t)
	copyPath := filepath.Join(dir, "live-copy.db")
	runChatd(t, nil, "backup", "--db", db, copyPath).ok(t)
	if n := countRows(t, copyPath, "agents"); n != 21 {
		t.Fatalf("agents in the live copy = %d, want 21", n)
	}
	tok := strings.TrimSpace(runChatd(t, nil, "token", "--db", db, "--user", "alice", "--ttl", "10m").ok(t).stdout)
	if s, body, err := send(srv.url, "GET", "/api/v1/me", bearer(tok), nil); err != nil || s != 200 {
		t.Fatalf("token from the CLI: %d %s %v", s, body, err)
	}
	runChatd(t, nil, "token", "--db", db, "--user", "alice", "--ttl", "9999h").failsWithOneLine(t, "--ttl")

	srv.stop(t)
	if !strings.Contains(srv.stderr.String(), "stopped cleanly") {
		t.Fatalf("no clean stop: %s", srv.stderr)
	}
	// The clean stop checkpointed: the WAL is empty and the file is whole.
	if fi, err := os.Stat(db + "-wal"); err == nil && fi.Size() != 0 {
		t.Fatalf("WAL holds %d bytes after a clean stop", fi.Size())
	}
	if check := integrityCheck(t, db); check != "ok" {
		t.Fatalf("integrity_check = %s", check)
	}
}

func TestServeFlagsAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--sync", "sometimes"}, "--sync"},
		{[]string{"serve", "--write-queue", "0"}, "--write-queue"},
		{[]string{"serve", "--max-file-size", "0"}, "--max-file-size"},
		{[]string{"serve", "--bulk-queue", "0"}, "--bulk-queue"},
		{[]string{"serve", "--log-format", "xml"}, "--log-format"},
		{[]string{"serve", "--addr", "256.0.0.1:99999"}, "listen"},
		{[]string{"serve", "--rate-limit", "-1"}, "--rate-limit"},
		{[]string{"serve", "--auth-failure-burst", "0"}, "--auth-failure-burst"},
		{[]string{"serve", "--header-timeout", "0s"}, "--header-timeout"},
		{[]string{"serve", "--transfer-timeout", "0s"}, "--transfer-timeout"},
		{[]string{"serve", "--purge-interval", "500ms"}, "--purge-interval must be 0 (off) or at least 1s, not 500ms"},
		{[]string{"serve", "--purge-interval", "-1h"}, "--purge-interval must be 0 (off) or at least 1s, not -1h0m0s"},
	} {
		runChatd(t, nil, append(tc.args, "--db", filepath.Join(dir, "chatd.db"))...).failsWithOneLine(t, tc.want)
	}
	runChatd(t, []string{"CHATD_RATE_BURST=0"}, "serve", "--db", filepath.Join(dir, "chatd.db")).failsWithOneLine(t, "--rate-burst")
	runChatd(t, []string{"CHATD_PURGE_INTERVAL=10ms"}, "serve", "--db", filepath.Join(dir, "chatd.db")).failsWithOneLine(t, "--purge-interval")
	// CHATD_DB and CHATD_ADDR stand in for the flags.
	db := filepath.Join(dir, "env.db")
	runChatd(t, []string{"CHATD_DB=" + db}, "migrate").ok(t)
	runChatd(t, []string{"CHATD_DB=" + db}, "create-user", "--handle", "alice", "--name", "A").ok(t)
	if n := countRows(t, db, "users"); n != 1 {
		t.Fatal("CHATD_DB was not used")
	}
	out := runChatd(t, nil, "serve", "--help").ok(t).stdout
	for _, want := range []string{"CHATD_ADDR", "127.0.0.1:8080", "--write-queue", "--sync", "CHATD_DB", "CHATD_RATE_LIMIT"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
}

func TestServeRateLimitFlags(t *testing.T) {
	db, alice := newDatabaseWithAlice(t)
	statuses := func(srv *serverProc, n int) string {
		var out []string
		for range n {
			status, _ := srv.call(t, "GET", "/api/v1/me", alice.APIKey, nil)
			out = append(out, fmt.Sprint(status))
		}
		return strings.Join(out, " ")
	}
	srv := startServer(t, db, "--rate-limit", "0.01", "--rate-burst", "2")
	if got := statuses(srv, 3); got != "200 200 429" {
		t.Fatalf("with a burst of 2: %s", got)
	}
	srv.signal(t, syscall.SIGTERM)
	srv = startServer(t, db, "--rate-limit", "0", "--rate-burst", "1")
	if got := statuses(srv, 5); got != "200 200 200 200 200" {
		t.Fatalf("with the limit off: %s", got)
	}
}

// --metrics-addr serves /metrics on a listener of its own; the API's
// listener does not.
func TestServeMetricsListener(t *testing.T) {
	db, alice := newDatabaseWithAlice(t)
	dir := filepath.Dir(db)
	srv := startServer(t, db, "--metrics-addr", "127.0.0.1:0")
	metricsURL := srv.awaitMetrics(t)
	for i := 0; i < 2; i++ {
		if status, body := srv.call(t, "GET", "/api/v1/me", alice.APIKey, nil); status != 200 {
			t.Fatalf("me: %d %s", status, body)
		}
	}
	body := scrapeMetrics(t, metricsURL)
	for _, want := range []string{`chatd_http_requests_total{method="GET",route="/api/v1/me",status_class="2xx"} 2`,
		"chatd_write_queue_depth 0", "chatd_wal_bytes ", "chatd_build_info{version=\"dev\",commit=\"", "go_goroutines ",
		"process_cpu_seconds_total "} {
		if !strings.Contains(body, want) {
			t.Fatalf("no %q in\n%s", want, body)
		}
	}
	if status, _ := srv.call(t, "GET", "/metrics", "", nil); status != 404 {
		t.Fatalf("/metrics on the API listener: %d", status)
	}
	runChatd(t, nil, "serve", "--db", filepath.Join(dir, "x.db"), "--addr", "127.0.0.1:0", "--metrics-addr", "nonsense").failsWithOneLine(t, "for metrics")
	runChatd(t, nil, "serve", "--db", filepath.Join(dir, "x.db"), "--checkpoints", "sometimes").failsWithOneLine(t, "--checkpoints")
}

// A new database: serve prints one setup link for the web app, with the
// token in its fragment, and the curl command that spends the same token;
// the token creates the first person once; set-password then replaces their
// password from stdin.
func TestSetupLinkAndSetPassword(t *testing.T) {
	db := filepath.Join(t.TempDir(), "chatd.db")
	srv := startServer(t, db)
	printed := srv.awaitSetup(t)
	if want := strconv.Itoa(int(store.SetupTokenTTL.Minutes())); printed.minutes != want {
		t.Fatalf("the link works for %s minutes, says serve; want %s", printed.minutes, want)
	}
	link, err := url.Parse(printed.link)
	if err != nil || link.Scheme+"://"+link.Host != srv.url || link.Path != "/" || link.RawQuery != "" {
		t.Fatalf("setup link %q (%v): want the web app at %s/", printed.link, err, srv.url)
	}
	// Only the fragment holds the token: a browser never sends it.
	token, ok := strings.CutPrefix(link.Fragment, "/setup/")
	if !ok || !strings.HasPrefix(token, "band_s_") {
		t.Fatalf("setup link %q: no #/setup/<token>", printed.link)
	}
	if printed.curlBase != srv.url || printed.curlToken != token {
		t.Fatalf("the curl alternative spends %q at %s, the link %q", printed.curlToken, printed.curlBase, token)
	}
	// What the browser asks for when it opens the link is the web app.
	if s, b := srv.call(t, "GET", link.Path, "", nil); s != 200 || !strings.Contains(strings.ToLower(string(b)), "<!doctype html") {
		t.Fatalf("GET %s: %d %.80s", link.Path, s, b)
	}
	setup := map[string]any{"token": token, "handle": "ada", "name": "Ada Lovelace", "password": "first long password"}
	if s, b, err := send(srv.url, "POST", "/api/v1/auth/setup", nil, setup); err != nil || s != 201 {
		t.Fatalf("setup: %d %s %v", s, b, err)
	}
	if s, _, _ := send(srv.url, "POST", "/api/v1/auth/setup", nil, setup); s != 401 {
		t.Fatalf("setup link used twice: %d", s)
	}
	if s := signIn(t, srv.url, "ada", "first long password"); s != 200 {
		t.Fatalf("sign-in after setup: %d", s)
	}

	runChatdWithInput(t, "second long password\n", "set-password", "--db", db, "--user", "ada").ok(t)
	if s := signIn(t, srv.url, "ada", "second long password"); s != 200 {
		t.Fatalf("sign-in with the new password: %d", s)
	}
	if s := signIn(t, srv.url, "ada", "first long password"); s != 401 {
		t.Fatalf("sign-in with the old password: %d", s)
	}
	runChatdWithInput(t, "too short\n", "set-password", "--db", db, "--user", "ada").failsWithOneLine(t, "12 to 256 characters")
	runChatdWithInput(t, "", "set-password", "--db", db, "--user", "ada").failsWithOneLine(t, "no password on standard input")
	runChatdWithInput(t, "a long enough password\n", "set-password", "--db", db, "--user", "nobody").failsWithOneLine(t, "nobody")
	runChatdWithInput(t, "", "set-password", "--db", db).failsWithOneLine(t, "--user")
	if help := runChatd(t, nil, "set-password", "--help").ok(t).stdout; !strings.Contains(help, "standard input") {
		t.Fatalf("set-password --help: %s", help)
	}
}

// The first hour's sharp edges: usage mistakes exit 2, the version names
// its commit, commands say which database they use and refuse to start a
// new one by accident, register-agent lists whom to choose from, a person
// can get a web app password at creation, and serve prints links that open.
func TestFirstHourEdges(t *testing.T) {
	t.Run("usage mistakes exit 2", func(t *testing.T) {
		for _, args := range [][]string{{"foo"}, {"create-user", "--nope"}, {"version", "extra"}} {
			r := runChatd(t, nil, args...)
			if r.code != 2 {
				t.Errorf("chatd %v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
			}
		}
	})
	t.Run("version", func(t *testing.T) {
		line := runChatd(t, nil, "version").ok(t).stdout
		if !regexp.MustCompile(`^chatd \S+, commit \S+.*, go1\.\S+ \w+/\w+\n$`).MatchString(line) {
			t.Fatalf("chatd version: %q", line)
		}
		if flag := runChatd(t, nil, "--version").ok(t).stdout; flag != line {
			t.Fatalf("--version %q differs from version %q", flag, line)
		}
	})
	t.Run("no database created by accident", func(t *testing.T) {
		dir := t.TempDir()
		db := filepath.Join(dir, "chatd.db")
		for _, args := range [][]string{
			{"create-user", "--handle", "alice", "--name", "Alice"},
			{"register-agent", "--name", "Helper", "--description", "Answers questions"},
			{"rotate-agent-key", "--agent", "alice/helper"},
			{"token", "--user", "alice"},
			{"backup", filepath.Join(dir, "copy.db")},
		} {
			runChatd(t, nil, append(args, "--db", db)...).failsWithOneLine(t, "no database at "+db)
		}
		runChatdWithInput(t, "a long enough password\n", "set-password", "--db", db, "--user", "alice").
			failsWithOneLine(t, "no database at "+db)
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("the refused commands left %v behind", entries)
		}
	})
	t.Run("commands name their database", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "chatd.db")
		for _, args := range [][]string{{"migrate"}, {"create-user", "--handle", "alice", "--name", "Alice"}, {"backup", db + ".copy"}} {
			r := runChatd(t, nil, append(args, "--db", db)...).ok(t)
			if first, _, _ := strings.Cut(r.stderr, "\n"); first != "chatd: database "+db {
				t.Errorf("chatd %s: stderr %q does not name the database", args[0], r.stderr)
			}
		}
	})
	t.Run("register-agent names the people to choose from", func(t *testing.T) {
		db := newDatabase(t, filepath.Join(t.TempDir(), "chatd.db"))
		runChatd(t, nil, "create-user", "--db", db, "--handle", "bob", "--name", "Bob").ok(t)
		runChatd(t, nil, "create-user", "--db", db, "--handle", "alice", "--name", "Alice").ok(t)
		r := runChatd(t, nil, "register-agent", "--db", db, "--name", "Helper", "--description", "Answers questions")
		r.failsWithOneLine(t, "there is more than one person: alice, bob; name the owner with --owner")
		if r.code != 2 {
			t.Fatalf("exit %d, want 2", r.code)
		}
	})
	t.Run("create-user --password-stdin", func(t *testing.T) {
		db := newDatabase(t, filepath.Join(t.TempDir(), "chatd.db"))
		runChatdWithInput(t, "too short\n", "create-user", "--db", db, "--handle", "ada", "--name", "Ada", "--password-stdin").
			failsWithOneLine(t, "12 to 256 characters")
		if n := countRows(t, db, "users"); n != 0 {
			t.Fatalf("a refused password left %d people behind", n)
		}
		runChatdWithInput(t, "a long enough password\n", "create-user", "--db", db, "--handle", "ada", "--name", "Ada", "--password-stdin").ok(t)
		srv := startServer(t, db)
		if status := signIn(t, srv.url, "ada", "a long enough password"); status != 200 {
			t.Fatalf("sign-in with the password given at creation: %d", status)
		}
	})
	t.Run("serve on every interface prints a link that opens", func(t *testing.T) {
		srv := startServer(t, filepath.Join(t.TempDir(), "chatd.db"), "--addr", "0.0.0.0:0")
		if !strings.HasPrefix(srv.url, "http://127.0.0.1:") {
			t.Fatalf("serve printed %s", srv.url)
		}
		// It says it listens on every interface, not only on 127.0.0.1.
		port := strings.TrimPrefix(srv.url, "http://127.0.0.1:")
		if srv.bound != "0.0.0.0:"+port {
			t.Fatalf("serve says it is bound to %q, want 0.0.0.0:%s", srv.bound, port)
		}
		eventually(t, "a log line saying serve listens on 0.0.0.0", func() bool {
			return strings.Contains(srv.stderr.String(), "addr=0.0.0.0:"+port)
		})
		if status, _ := srv.call(t, "GET", "/healthz", "", nil); status != 200 {
			t.Fatalf("GET %s/healthz: %d", srv.url, status)
		}
	})
}
