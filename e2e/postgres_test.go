package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/chatd/chatd/internal/pgtest"
)

// chatd on a PostgreSQL database: the commands make a person and an agent,
// a server started on it serves them (a message posted, then taken by the
// agent from /next, and still there after a restart), and the commands
// that work on the SQLite file itself say what to use instead.
func TestServeAndCommandsOnPostgreSQL(t *testing.T) {
	u, err := neturl.Parse(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(u.User.Username(), "s3cret") // the test cluster trusts its socket
	url := u.String()
	env := []string{"CHATD_DATABASE_URL=" + url}
	run := func(args ...string) commandResult {
		t.Helper()
		r := runChatd(t, env, args...)
		if strings.Contains(r.stdout+r.stderr, "s3cret") {
			t.Fatalf("chatd %s printed the URL's password:\n%s%s", args[0], r.stdout, r.stderr)
		}
		return r
	}
	run("migrate").ok(t)
	alice := parseCreated(t, run("create-user", "--handle", "alice", "--name", "Alice", "--json").ok(t).stdout)
	agent := parseCreated(t, run("register-agent", "--name", "Helper", "--description", "Answers questions", "--json").ok(t).stdout)

	srv := startServer(t, "unused.db", "--database-url", url)
	room := srv.createRoom(t, alice.APIKey, agent.ID)
	b := busyRoom{aliceKey: alice.APIKey, agentID: agent.ID, roomID: room}
	posted, ok := b.post(t, srv, "on postgres")
	if !ok {
		t.Fatal("the post did not reach the server")
	}
	status, body := srv.call(t, "GET", "/api/v1/agent/chats/"+room+"/messages/next", agent.APIKey, nil)
	var next struct{ Data struct{ ID string } }
	if json.Unmarshal(body, &next); status != 200 || next.Data.ID != posted {
		t.Fatalf("/next: %d %s, want the message %s", status, body, posted)
	}
	runChatd(t, append(env, "CHATD_SYNC=normal"), "serve", "--addr", "127.0.0.1:0").failsWithOneLine(t, "--sync (set by CHATD_SYNC) tunes a SQLite database")

	srv.stop(t)
	srv = startServer(t, "unused.db", "--database-url", url)
	if ids := b.messageIDs(t, srv); !ids[posted] {
		t.Fatalf("after a restart the room holds %v, not %s", ids, posted)
	}
	if out := run("stats").ok(t).stdout; !strings.Contains(out, "PostgreSQL's autovacuum") || strings.Contains(out, "chatd vacuum") {
		t.Fatalf("stats on PostgreSQL points to what does not work there:\n%s", out)
	}
	srv.stop(t)
	if strings.Contains(srv.stderr.String(), "s3cret") {
		t.Fatalf("serve logged the URL's password:\n%s", srv.stderr)
	}
	for want, args := range map[string][]string{"pg_dump": {"backup", "copy.db"}, "pg_restore": {"restore", "copy.db"}, "autovacuum": {"vacuum"}} {
		run(args...).failsWithOneLine(t, want)
	}
}

// Two chatd nodes on one PostgreSQL database: a long-poll held on node B
// returns what was posted on node A; node A killed (SIGKILL) in the middle
// of a stream of posts loses none it acknowledged, and node B serves them
// all and goes on taking posts.
func TestTwoNodesOnPostgreSQL(t *testing.T) {
	url := pgtest.NewDatabase(t)
	env := []string{"CHATD_DATABASE_URL=" + url}
	runChatd(t, env, "migrate").ok(t) // the commands below set up no schema
	alice := parseCreated(t, runChatd(t, env, "create-user", "--handle", "alice", "--name", "Alice", "--json").ok(t).stdout)
	agent := parseCreated(t, runChatd(t, env, "register-agent", "--name", "Helper", "--description", "Answers questions", "--json").ok(t).stdout)
	a := startServer(t, "unused.db", "--database-url", url)
	b := startServer(t, "unused.db", "--database-url", url)
	room := busyRoom{aliceKey: alice.APIKey, agentID: agent.ID, roomID: a.createRoom(t, alice.APIKey, agent.ID)}

	polled := make(chan string, 1)
	go func() {
		status, body, err := b.try("GET", "/api/v1/agent/chats/"+room.roomID+"/messages/next?wait=30", agent.APIKey, nil)
		var next struct{ Data struct{ ID string } }
		if err == nil && status == 200 && json.Unmarshal(body, &next) == nil {
			polled <- next.Data.ID
		}
		close(polled)
	}()
	first, ok := room.post(t, a, "posted on A")
	if !ok {
		t.Fatal("node A did not take the post")
	}
	if got := <-polled; got != first {
		t.Fatalf("/next on node B returned %q, want %s", got, first)
	}

	acknowledged := map[string]bool{first: true}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for n := 0; ; n++ {
				id, ok := room.post(t, a, fmt.Sprintf("stream %d/%d", i, n))
				if !ok {
					return // node A is gone
				}
				mu.Lock()
				acknowledged[id] = true
				mu.Unlock()
			}
		})
	}
	for {
		mu.Lock()
		n := len(acknowledged)
		mu.Unlock()
		if n > 100 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.kill(t)
	wg.Wait()

	stored := room.messageIDs(t, b)
	for id := range acknowledged {
		if !stored[id] {
			t.Fatalf("node A acknowledged %s, which node B does not have (%d acknowledged, %d stored)", id, len(acknowledged), len(stored))
		}
	}
	if _, ok := room.post(t, b, "node B goes on"); !ok {
		t.Fatal("node B stopped taking posts when node A died")
	}
	t.Logf("%d posts acknowledged by node A before SIGKILL, all served by node B", len(acknowledged))
}

// postgresConn connects to the database url names, for a test to look at
// what chatd left there, and returns the connection with count, which runs
// a query of one integer.
func postgresConn(t *testing.T, url string) (conn *sql.DB, count func(query string) int) {
	t.Helper()
	conn, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, func(q string) (n int) {
		t.Helper()
		if err := conn.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
}
