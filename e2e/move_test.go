package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
)

// chatd move, as an operator runs it: refused while the server runs on the
// SQLite file and when pointed at PostgreSQL with --database-url; once the
// server is stopped, it copies the database and says what to change; a
// server started on the PostgreSQL database serves the moved message to
// alice and to the agent it mentions, with the same keys; a second move
// into the now full database is refused.
func TestMoveToPostgreSQLThenServe(t *testing.T) {
	url := pgtest.NewDatabase(t)
	db, alice := newDatabaseWithAlice(t)
	agent := registerAgent(t, db, "--name", "Helper", "--description", "Answers questions")
	srv := startServer(t, db)
	room := srv.createRoom(t, alice.APIKey, agent.ID)
	b := busyRoom{aliceKey: alice.APIKey, agentID: agent.ID, roomID: room}
	posted, ok := b.post(t, srv, "written on SQLite")
	if !ok {
		t.Fatal("the post did not reach the server")
	}

	runChatd(t, nil, "move", "--db", db, "--to", url).failsWithOneLine(t, "stop it before moving")
	srv.stop(t)
	runChatd(t, []string{"CHATD_DATABASE_URL=" + url}, "move", "--db", db, "--to", url).failsWithOneLine(t, "--to")

	moved := runChatd(t, nil, "move", "--db", db, "--to", url).ok(t)
	for _, want := range []string{"moved " + db, "messages", "checksum match", "Environment=CHATD_DATABASE_URL=" + url, "left as it was"} {
		if !strings.Contains(moved.stdout, want) {
			t.Errorf("the move's output lacks %q:\n%s", want, moved.stdout)
		}
	}

	srv = startServer(t, "unused.db", "--database-url", url)
	if ids := b.messageIDs(t, srv); !ids[posted] || len(ids) != 1 {
		t.Fatalf("on PostgreSQL the room holds %v, want %s", ids, posted)
	}
	status, body := srv.call(t, "GET", "/api/v1/agent/chats/"+room+"/messages/next", agent.APIKey, nil)
	var next struct{ Data struct{ ID, Content string } }
	if json.Unmarshal(body, &next); status != 200 || next.Data.ID != posted {
		t.Fatalf("/next on PostgreSQL: %d %s, want the moved message %s", status, body, posted)
	}
	again, ok := b.post(t, srv, "written on PostgreSQL")
	if !ok || again == posted {
		t.Fatalf("a post after the move: %q, %v", again, ok)
	}
	srv.stop(t)

	runChatd(t, nil, "move", "--db", db, "--to", url).failsWithOneLine(t, "already holds a chatd database")
}
