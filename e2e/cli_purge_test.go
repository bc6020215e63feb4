package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// purgeTotals is the "total" of chatd purge --json.
type purgeTotals struct {
	DryRun bool `json:"dry_run"`
	Rooms  []struct {
		ID string `json:"id"`
	} `json:"rooms"`
	Total map[string]struct {
		Count int64 `json:"count"`
		Bytes int64 `json:"bytes"`
	} `json:"total"`
}

func parsePurge(t testing.TB, stdout string) purgeTotals {
	t.Helper()
	var p purgeTotals
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatalf("purge --json printed %q: %v", stdout, err)
	}
	return p
}

// rowsOf renders a database's messages, files and chunks, to show that a
// command changed none of them.
func rowsOf(t testing.TB, db string) string {
	t.Helper()
	return queryValue[string](t, db, `SELECT coalesce(group_concat(x, ';'), '') FROM (
		SELECT seq || ',' || id || ',' || inserted_at || ',' || content AS x FROM messages
		UNION ALL SELECT id || ',' || size || ',' || coalesce(expired_at, '-') FROM files
		UNION ALL SELECT file_id || ',' || n FROM file_chunks
		UNION ALL SELECT agent_id || ',' || message_seq FROM deliveries ORDER BY 1)`)
}

// chatd retention shows an organization's periods, sets the kinds given
// and leaves the others, and refuses a period that is not one.
func TestRetentionCommand(t *testing.T) {
	db, _ := newDatabaseWithAlice(t)
	if out := runChatd(t, nil, "retention", "--db", db).ok(t).stdout; !strings.Contains(out, "text messages  kept forever") {
		t.Fatalf("retention: %s", out)
	}
	out := runChatd(t, nil, "retention", "--db", db, "--text-days", "30", "--event-days", "7", "--file-days", "10").ok(t).stdout
	if !strings.Contains(out, "text messages  30 days") || !strings.Contains(out, "files          10 days") {
		t.Fatalf("retention: %s", out)
	}
	runChatd(t, nil, "retention", "--db", db, "--event-days", "forever").ok(t)
	var r struct {
		Text  *int `json:"text_days"`
		Event *int `json:"event_days"`
		File  *int `json:"file_days"`
	}
	if err := json.Unmarshal([]byte(runChatd(t, nil, "retention", "--db", db, "--json").ok(t).stdout), &r); err != nil {
		t.Fatal(err)
	}
	if r.Text == nil || *r.Text != 30 || r.Event != nil || r.File == nil || *r.File != 10 {
		t.Fatalf("retention --json: %+v", r)
	}
	for _, bad := range []string{"soon", "0", "36501"} {
		runChatd(t, nil, "retention", "--db", db, "--event-days", bad).failsWithOneLine(t, "--event-days")
	}
	runChatd(t, nil, "retention", "--db", db, "--org", "nobody", "--text-days", "1").failsWithOneLine(t, `no organization is named "nobody"`)
}

// purgeBacklog is a database whose room holds what a purge must take (a
// text message and a file 40 days old, 2,999 thoughts as old) and what it
// must leave (a new text message, and the newest message of the database,
// an old thought), with the retention that puts them out of time.
type purgeBacklog struct {
	db, room, aliceKey string
	oldText, newText   string
	helperID           string
}

func newPurgeBacklog(t *testing.T) *purgeBacklog {
	t.Helper()
	db, alice := newDatabaseWithAlice(t)
	helper := registerAgent(t, db, "--name", "Helper", "--description", "Answers questions")
	srv := startServer(t, db, "--purge-interval", "0")
	b := &purgeBacklog{db: db, aliceKey: alice.APIKey, helperID: helper.ID, room: srv.createRoom(t, alice.APIKey, helper.ID)}
	b.oldText, b.newText = b.post(t, srv, "an old plan"), b.post(t, srv, "a new plan")
	content := strings.Repeat("x", 3000)
	sum := sha256.Sum256([]byte(content))
	res, err := srv.upload(alice.APIKey, b.room, strings.NewReader(content), hex.EncodeToString(sum[:]))
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("upload: %v %v", res, err)
	}
	res.Body.Close()
	srv.stop(t)

	old := time.Now().Add(-40 * 24 * time.Hour).UnixMicro()
	stmts := []string{
		fmt.Sprintf(`UPDATE messages SET inserted_at = %d WHERE id = '%s'`, old, b.oldText),
		fmt.Sprintf(`UPDATE files SET inserted_at = %d`, old),
		fmt.Sprintf(`UPDATE rooms SET message_count = message_count + 3000 WHERE id = '%s'`, b.room),
	}
	for i := range 3000 {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type,
			content, inserted_at, updated_at) VALUES ('%s', '%s', '%s', 'Agent', 'Helper', 'thought', '%s %d', %d, %d)`,
			fmt.Sprintf("0190a0a0-0000-7000-8000-%012d", i), b.room, helper.ID, strings.Repeat("thinking ", 60), i, old, old))
	}
	sqliteFile(t, db, stmts...)
	runChatd(t, nil, "retention", "--db", db, "--text-days", "30", "--event-days", "7", "--file-days", "10").ok(t)
	return b
}

// post is a text message of alice's in the room, mentioning the helper.
func (b *purgeBacklog) post(t *testing.T, srv *serverProc, content string) string {
	t.Helper()
	status, body := srv.call(t, "POST", "/api/v1/me/chats/"+b.room+"/messages", b.aliceKey,
		map[string]any{"message": map[string]any{"content": content, "mentions": []any{map[string]any{"id": b.helperID}}}})
	id, ok := createdID(body)
	if status != 201 || !ok {
		t.Fatalf("post: %d %s", status, body)
	}
	return id
}

// chatd purge --dry-run tells what would go and changes nothing; chatd
// purge, beside a running server, deletes exactly that (nothing newer, the
// files' chunks too; the newest message of the database only once a newer
// one exists).
func TestPurgeCommandDeletesWhatTheDryRunShows(t *testing.T) {
	b := newPurgeBacklog(t)
	before := rowsOf(t, b.db)
	preview := parsePurge(t, runChatd(t, nil, "purge", "--db", b.db, "--dry-run", "--json").ok(t).stdout)
	if !preview.DryRun || preview.Total["text"].Count != 1 || preview.Total["event"].Count != 2999 || preview.Total["file"].Count != 1 ||
		preview.Total["file"].Bytes != 3000 || len(preview.Rooms) != 1 || preview.Rooms[0].ID != b.room {
		t.Fatalf("dry run: %+v", preview)
	}
	if rowsOf(t, b.db) != before {
		t.Fatal("purge --dry-run changed the database")
	}
	if out := runChatd(t, nil, "purge", "--db", b.db, "--dry-run").ok(t).stdout; !strings.Contains(out, "Would delete") ||
		!strings.Contains(out, "In all: 1 text message, 2,999 events, 1 file") {
		t.Fatalf("dry run: %s", out)
	}

	srv := startServer(t, b.db, "--purge-interval", "0")
	done := parsePurge(t, runChatd(t, nil, "purge", "--db", b.db, "--json").ok(t).stdout)
	if done.DryRun || done.Total["text"] != preview.Total["text"] || done.Total["event"] != preview.Total["event"] ||
		done.Total["file"] != preview.Total["file"] {
		t.Fatalf("purge: %+v, after the dry run %+v", done, preview)
	}
	status, body := srv.call(t, "GET", "/api/v1/me/chats/"+b.room+"/messages", b.aliceKey, nil)
	if status != 200 || strings.Contains(string(body), b.oldText) || !strings.Contains(string(body), b.newText) {
		t.Fatalf("the room after the purge: %d %s", status, body)
	}
	if n := countRows(t, b.db, "files") + countRows(t, b.db, "file_chunks"); n != 0 {
		t.Fatalf("%d file rows left", n)
	}
	// The newest message of the database, an old thought, stays until a
	// newer one comes.
	if again := parsePurge(t, runChatd(t, nil, "purge", "--db", b.db, "--json").ok(t).stdout); len(again.Rooms) != 0 {
		t.Fatalf("a second purge: %+v", again)
	}
	b.post(t, srv, "newer")
	if again := parsePurge(t, runChatd(t, nil, "purge", "--db", b.db, "--json").ok(t).stdout); again.Total["event"].Count != 1 {
		t.Fatalf("a purge after a newer message: %+v", again)
	}
}

// chatd stats reads the database beside a server; chatd vacuum is refused
// beside it and, once it is stopped, shrinks the purged file and leaves it
// whole.
func TestStatsAndVacuumAfterAPurge(t *testing.T) {
	b := newPurgeBacklog(t)
	runChatd(t, nil, "purge", "--db", b.db).ok(t)
	srv := startServer(t, b.db, "--purge-interval", "0")
	var stats struct {
		Database struct {
			Bytes     int64            `json:"bytes"`
			FreeBytes int64            `json:"free_bytes"`
			Tables    map[string]int64 `json:"tables"`
		} `json:"database"`
		Messages int64 `json:"messages"`
	}
	if err := json.Unmarshal([]byte(runChatd(t, nil, "stats", "--db", b.db, "--json").ok(t).stdout), &stats); err != nil {
		t.Fatal(err)
	}
	// What is left: the new text message and the newest thought.
	if stats.Database.Tables["messages"] != 2 || stats.Messages != 2 || stats.Database.FreeBytes < 1<<20 {
		t.Fatalf("stats: %+v", stats)
	}
	if out := runChatd(t, nil, "stats", "--db", b.db).ok(t).stdout; !strings.Contains(out, "Messages per day (UTC)") {
		t.Fatalf("stats: %s", out)
	}

	runChatd(t, nil, "vacuum", "--db", b.db).failsWithOneLine(t, "stop it before vacuuming")
	srv.stop(t)
	size := func() int64 {
		fi, err := os.Stat(b.db)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	beforeVacuum := size()
	if out := runChatd(t, nil, "vacuum", "--db", b.db).ok(t).stdout; !strings.Contains(out, "vacuumed") {
		t.Fatalf("vacuum: %s", out)
	}
	if after := size(); after >= beforeVacuum-1<<20 {
		t.Fatalf("the file went from %d to %d bytes", beforeVacuum, after)
	}
	if check := integrityCheck(t, b.db); check != "ok" {
		t.Fatalf("integrity_check = %s", check)
	}
	runChatd(t, nil, "vacuum", "--db", filepath.Join(t.TempDir(), "none.db")).failsWithOneLine(t, "no database")
}
