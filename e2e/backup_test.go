package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// busyRoom is a room of alice's with her agent in it, on a running server.
type busyRoom struct {
	aliceKey, agentID, roomID string
}

func newBusyRoom(t *testing.T, db string, srv *serverProc) busyRoom {
	t.Helper()
	alice := createUser(t, db, "alice", "Alice")
	agent := registerAgent(t, db, "--name", "Helper", "--description", "Answers questions")
	room := srv.createRoom(t, alice.APIKey, agent.ID)
	return busyRoom{aliceKey: alice.APIKey, agentID: agent.ID, roomID: room}
}

// post sends one message and returns its id once the server answered 201
// (committed); ok is false when the server could not be reached.
func (b busyRoom) post(t *testing.T, srv *serverProc, content string) (id string, ok bool) {
	status, body, err := srv.try("POST", "/api/v1/me/chats/"+b.roomID+"/messages", b.aliceKey, map[string]any{
		"message": map[string]any{"content": content, "mentions": []map[string]string{{"id": b.agentID}}}})
	if err != nil {
		return "", false
	}
	if status != 201 {
		t.Errorf("post: %d %s", status, body)
		return "", false
	}
	if id, ok = createdID(body); !ok {
		t.Errorf("201 without a message id: %s", body)
	}
	return id, ok
}

// messageIDs pages through the room's history over the API.
func (b busyRoom) messageIDs(t *testing.T, srv *serverProc) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	srv.eachItem(t, "/api/v1/me/chats/"+b.roomID+"/messages?limit=100", b.aliceKey, func(item json.RawMessage) {
		var m struct{ ID string }
		json.Unmarshal(item, &m)
		ids[m.ID] = true
	})
	return ids
}

// A backup taken while clients keep posting holds every message the server
// acknowledged before the backup began, and a server starts on it.
func TestBackupUnderWriteLoad(t *testing.T) {
	skipIfShort(t, "runs a write storm against a server")
	dir := t.TempDir()
	db := filepath.Join(dir, "chatd.db")
	srv := startServer(t, db, "--max-messages-per-room", "10000000", "--rate-limit", "0")
	room := newBusyRoom(t, db, srv)

	storm := startWriteStorm(8, func(w, i int) (string, bool) {
		return room.post(t, srv, fmt.Sprintf("writer %d message %d", w, i))
	})
	storm.waitFor(500)
	before := storm.ackedSoFar()
	copyPath := filepath.Join(dir, "backup.db")
	runChatd(t, nil, "backup", "--db", db, copyPath).ok(t)
	during := len(storm.ackedSoFar()) - len(before)
	storm.waitFor(len(before) + during + 100) // the load went on after the backup too
	storm.halt()
	srv.stop(t)

	restored := startServer(t, copyPath)
	present := room.messageIDs(t, restored)
	missing := 0
	for _, id := range before {
		if !present[id] {
			missing++
		}
	}
	t.Logf("acknowledged %d messages before the backup began, %d while it ran; the copy holds %d; missing %d",
		len(before), during, len(present), missing)
	if missing > 0 {
		t.Fatalf("%d messages acknowledged before the backup are not in it", missing)
	}
}

// restoreFixture is a database with alice in it and a backup of it.
func restoreFixture(t *testing.T) (dir, db, backup string) {
	t.Helper()
	dir = t.TempDir()
	db = newDatabase(t, filepath.Join(dir, "chatd.db"))
	runChatd(t, nil, "create-user", "--db", db, "--handle", "alice", "--name", "Alice").ok(t)
	backup = filepath.Join(dir, "backup.db")
	runChatd(t, nil, "backup", "--db", db, backup).ok(t)
	return dir, db, backup
}

func TestRestoreRefusals(t *testing.T) {
	dir, db, backup := restoreFixture(t)
	target := filepath.Join(dir, "restored", "chatd.db")

	notChatd := filepath.Join(dir, "other.db")
	sqliteFile(t, notChatd, "CREATE TABLE notes (body TEXT)", "PRAGMA user_version = 1")
	newer := filepath.Join(dir, "newer.db")
	runChatd(t, nil, "backup", "--db", db, newer).ok(t)
	sqliteFile(t, newer, "PRAGMA user_version = 999")
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 500)), 0o600)
	corrupt := filepath.Join(dir, "corrupt.db")
	runChatd(t, nil, "backup", "--db", db, corrupt).ok(t)
	corruptPages(t, corrupt)

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{filepath.Join(dir, "missing.db")}, "no backup file"},
		{"not SQLite", []string{garbage}, "not a SQLite database"},
		{"not chatd", []string{notChatd}, "not a chatd database"},
		{"newer schema", []string{newer}, "newer than this chatd supports"},
		{"corrupt", []string{corrupt}, "failed its integrity check"},
		{"onto itself", []string{"--db", backup, backup}, "the database itself"},
		{"exists", []string{"--db", db, backup}, "already exists (use --force"},
		{"no file argument", nil, "takes 1 argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"restore", "--db", target}, tc.args...)
			runChatd(t, nil, args...).failsWithOneLine(t, tc.want)
			if _, err := os.Stat(target); err == nil {
				t.Fatal("a refused restore created the database")
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file left behind: %s", e.Name())
		}
	}
}

// corruptPages overwrites the middle of a database file, past its header
// and schema page, so that it opens but fails the integrity check.
func corruptPages(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	junk := []byte(strings.Repeat("\xff\x00\x13", 4096))
	for off := int64(2 * 4096); off+int64(len(junk)) < fi.Size(); off += 4 * 4096 {
		f.WriteAt(junk[:4096], off+100)
	}
}

// restore refuses while a server runs on the database, not after that
// server was killed with SIGKILL, and the server starts on what it restored.
func TestRestoreAgainstAServer(t *testing.T) {
	dir, db, backup := restoreFixture(t)
	srv := startServer(t, db)
	bob := createUser(t, db, "bob", "Bob")
	if status, _ := srv.call(t, "GET", "/api/v1/me", bob.APIKey, nil); status != 200 {
		t.Fatalf("bob before the restore: %d", status)
	}

	runChatd(t, nil, "restore", "--db", db, "--force", backup).failsWithOneLine(t, "a chatd server is using")
	// A second server is refused too, by the same lock.
	second := runChatd(t, nil, "serve", "--db", db, "--addr", "127.0.0.1:0")
	second.failsWithOneLine(t, "another chatd serve")
	if status, _ := srv.call(t, "GET", "/api/v1/me", bob.APIKey, nil); status != 200 {
		t.Fatalf("the refused restore disturbed the server: %d", status)
	}

	// SIGKILL leaves a WAL behind and no checkpoint; the lock goes with the
	// process.
	srv.kill(t)
	if _, err := os.Stat(db + ".lock"); err != nil {
		t.Fatalf("lock file: %v", err)
	}
	out := runChatd(t, nil, "restore", "--db", db, "--force", backup).ok(t).stdout
	if !strings.Contains(out, "integrity check ok") {
		t.Fatalf("restore: %s", out)
	}
	for _, side := range []string{db + "-wal", db + "-shm"} {
		if _, err := os.Stat(side); err == nil {
			t.Fatalf("%s of the old database left beside the restored one", filepath.Base(side))
		}
	}

	restored := startServer(t, db)
	if status, _ := restored.call(t, "GET", "/api/v1/me", bob.APIKey, nil); status != 401 {
		t.Fatalf("bob (created after the backup) after the restore: %d, want 401", status)
	}
	if n := strings.TrimSpace(runChatd(t, nil, "token", "--db", db, "--user", "alice", "--ttl", "1m").ok(t).stdout); n == "" {
		t.Fatal("no token for alice")
	}
	restored.stop(t)
	// A restore into a directory that does not exist yet creates it.
	fresh := filepath.Join(dir, "new", "place", "chatd.db")
	runChatd(t, nil, "restore", "--db", fresh, backup).ok(t)
	if n := countRows(t, fresh, "users"); n != 1 {
		t.Fatalf("users in the fresh restore = %d", n)
	}
}
