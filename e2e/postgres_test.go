package e2e

import (
	"encoding/json"
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
	url := pgtest.NewDatabase(t)
	env := []string{"CHATD_DATABASE_URL=" + url}
	run := func(args ...string) commandResult { t.Helper(); return runChatd(t, env, args...) }
	migrated := run("migrate").ok(t)
	if strings.Contains(migrated.stderr, "@") && strings.Contains(migrated.stderr, "password") {
		t.Fatalf("the URL's password is printed: %s", migrated.stderr)
	}
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
	for want, args := range map[string][]string{"pg_dump": {"backup", "copy.db"}, "pg_restore": {"restore", "copy.db"}, "autovacuum": {"vacuum"}} {
		run(args...).failsWithOneLine(t, want)
	}
}
