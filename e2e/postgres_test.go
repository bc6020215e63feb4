package e2e

import (
	"encoding/json"
	neturl "net/url"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
)

// chatd on a PostgreSQL database: the commands make a person and an agent,
// a server started on it serves them (a message posted, then taken by the
// agent from /next, and still there after a restart), a second server is
// refused, and the commands that work on the SQLite file itself say what
// to use instead.
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
	agent := parseCreated(t, run("register-agent", "--name", "Helper", "--json").ok(t).stdout)

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
	second := runChatd(t, env, "serve", "--addr", "127.0.0.1:0")
	second.failsWithOneLine(t, "another chatd serve is using")
	runChatd(t, append(env, "CHATD_SYNC=normal"), "serve", "--addr", "127.0.0.1:0").failsWithOneLine(t, "--sync tunes a SQLite database")

	srv.stop(t)
	srv = startServer(t, "unused.db", "--database-url", url)
	if ids := b.messageIDs(t, srv); !ids[posted] {
		t.Fatalf("after a restart the room holds %v, not %s", ids, posted)
	}
	run("stats").ok(t)
	srv.stop(t)
	if strings.Contains(srv.stderr.String(), "s3cret") {
		t.Fatalf("serve logged the URL's password:\n%s", srv.stderr)
	}
	for want, args := range map[string][]string{"pg_dump": {"backup", "copy.db"}, "pg_restore": {"restore", "copy.db"}, "autovacuum": {"vacuum"}} {
		run(args...).failsWithOneLine(t, want)
	}
}
