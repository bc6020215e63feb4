package store

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenCreatesSchemaOnceAndReopens(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "nested", "dir", "chatd.db")
	db, err := Open(path, Options{Schema: testSchema})
	if err != nil {
		t.Fatal(err)
	}
	current, _ := schemaVersion(testSchema)
	if db.MigratedFrom() != 0 || db.SchemaVersion() != current {
		t.Fatalf("from %d to %d, want 0 to %d", db.MigratedFrom(), db.SchemaVersion(), current)
	}
	wantWAL(t, db)
	secret, err := db.ServerSecret(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = Open(path, Options{Schema: testSchema})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.MigratedFrom() != current {
		t.Fatalf("reopen migrated from %d, want %d (nothing to do)", db.MigratedFrom(), current)
	}
	again, _ := db.ServerSecret(t.Context())
	if string(again) != string(secret) {
		t.Fatal("the server secret changed on reopen")
	}
	wantWAL(t, db)

	// An empty file (one an installer touched, say) is a new database too.
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = Open(empty, Options{Schema: testSchema})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.MigratedFrom() != 0 || db.SchemaVersion() != current {
		t.Fatalf("an empty file: from %d to %d, want 0 to %d", db.MigratedFrom(), db.SchemaVersion(), current)
	}
	wantWAL(t, db)
}

// wantWAL fails the test unless db's file is in WAL mode.
func wantWAL(t *testing.T, db *DB) {
	t.Helper()
	var mode string
	if err := db.read.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q (%v), want wal", mode, err)
	}
}

func TestOpenRefusesANewerSchemaAndLeavesItAlone(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "chatd.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("CREATE TABLE future (x); PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	_, err = Open(path, Options{Schema: testSchema})
	var tooNew *ErrSchemaTooNew
	current, _ := schemaVersion(testSchema)
	if !errors.As(err, &tooNew) || tooNew.Found != 99 || tooNew.Supported != current {
		t.Fatalf("err = %v, want ErrSchemaTooNew{99, %d}", err, current)
	}
	if !strings.Contains(err.Error(), "upgrade chatd") {
		t.Fatalf("message does not say what to do: %v", err)
	}
	raw, _ = sql.Open("sqlite", path)
	defer raw.Close()
	var v, tables int
	raw.QueryRow("PRAGMA user_version").Scan(&v)
	raw.QueryRow("SELECT count(*) FROM sqlite_schema").Scan(&tables)
	if v != 99 || tables != 1 {
		t.Fatalf("database changed: version %d, %d objects", v, tables)
	}
}

func TestOpenRefusesFilesThatAreNotChatdDatabases(t *testing.T) {
	sqliteOnly(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 100)), 0o600)
	if _, err := Open(garbage, Options{Schema: testSchema}); err == nil || !strings.Contains(err.Error(), "not a SQLite database") {
		t.Fatalf("garbage file: err = %v", err)
	}

	foreign := filepath.Join(dir, "foreign.db")
	raw, _ := sql.Open("sqlite", foreign)
	raw.Exec("CREATE TABLE someone_elses (x)")
	raw.Close()
	if _, err := Open(foreign, Options{Schema: testSchema}); err == nil || !strings.Contains(err.Error(), "not a chatd database") {
		t.Fatalf("foreign database: err = %v", err)
	}
}

func TestSchemaVersionIsReadFromTheSchema(t *testing.T) {
	for _, tc := range []struct {
		schema string
		want   int
		ok     bool
	}{
		{"CREATE TABLE a (x);\nPRAGMA user_version = 3;\n", 3, true},
		{"pragma USER_VERSION=12;", 12, true},
		{"CREATE TABLE a (x);", 0, false},
		{"PRAGMA user_version = 0;", 0, false},
	} {
		got, err := schemaVersion(tc.schema)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("schemaVersion(%q) = %d, %v; want %d, ok=%v", tc.schema, got, err, tc.want, tc.ok)
		}
	}
}

// schemaAsOf is the schema as version v shipped it: schema.sql up to the
// section that version v+1 added.
func schemaAsOf(t *testing.T, v int) string {
	t.Helper()
	i := strings.Index(testSchema, fmt.Sprintf("\n-- Version %d ", v+1))
	if i < 0 {
		t.Fatalf("schema.sql has no section for version %d", v+1)
	}
	return testSchema[:i] + fmt.Sprintf("\nPRAGMA user_version = %d;\n", v)
}

// schemaObjects lists a database's schema objects with their SQL.
func schemaObjects(t *testing.T, path string) string {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query(`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out strings.Builder
	for rows.Next() {
		var typ, name, table, text string
		if err := rows.Scan(&typ, &name, &table, &text); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "%s %s on %s: %s\n", typ, name, table, text)
	}
	return out.String()
}

// A database from every earlier version upgrades, keeping its rows, to
// exactly the schema a fresh database gets.
func TestUpgradeFromEveryVersionMatchesAFreshDatabase(t *testing.T) {
	sqliteOnly(t)
	current, _ := schemaVersion(testSchema)
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh.db")
	openTestDBAt(t, fresh, Options{}).Close()
	want := schemaObjects(t, fresh)

	for v := 1; v < current; v++ {
		path := filepath.Join(dir, fmt.Sprintf("v%d.db", v))
		raw, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(schemaAsOf(t, v)); err != nil {
			t.Fatalf("version %d schema: %v", v, err)
		}
		if _, err := raw.Exec(`INSERT INTO organizations (id, name, inserted_at) VALUES ('0190a0a0-0000-7000-8000-000000000001', 'Old', 1)`); err != nil {
			t.Fatal(err)
		}
		raw.Close()

		db, err := Open(path, Options{Schema: testSchema})
		if err != nil {
			t.Fatalf("upgrade from %d: %v", v, err)
		}
		if db.MigratedFrom() != v || db.SchemaVersion() != current {
			t.Errorf("upgrade from %d: from %d to %d", v, db.MigratedFrom(), db.SchemaVersion())
		}
		wantWAL(t, db) // the file was written in rollback-journal mode
		var name string
		if err := db.read.QueryRow(`SELECT name FROM organizations`).Scan(&name); err != nil || name != "Old" {
			t.Errorf("upgrade from %d lost rows: %q %v", v, name, err)
		}
		db.Close()
		if got := schemaObjects(t, path); got != want {
			t.Errorf("upgrade from %d ends in another schema:\n got %s\nwant %s", v, got, want)
		}
	}
}

// Upgrading to version 5 marks everything already in a room read, for its
// people and for the owners of its agents (who read it through them), so
// that no room lights up with a backlog nobody missed; what comes after
// counts as usual.
// v4 names what versionFourDatabase holds: Alice in the busy room, Bob
// reading it through his agent Helper, Carol in no room, and a room that
// has no messages.
var v4 = struct{ org, alice, bob, carol, helper, busy, empty string }{
	org:    "0190a0a0-0000-7000-8000-000000000001",
	alice:  "0190a0a0-0000-7000-8000-0000000000a1",
	bob:    "0190a0a0-0000-7000-8000-0000000000b1",
	carol:  "0190a0a0-0000-7000-8000-0000000000c1",
	helper: "0190a0a0-0000-7000-8000-0000000000b2",
	busy:   "0190a0a0-0000-7000-8000-0000000000f1",
	empty:  "0190a0a0-0000-7000-8000-0000000000f2",
}

// versionFourDatabase writes a database of schema version 4 holding v4,
// with two messages in the busy room, and returns its path.
func versionFourDatabase(t *testing.T) string {
	t.Helper()
	return databaseAsOf(t, 4)
}

// databaseAsOf writes a database of schema version v (4 or later) holding
// what versionFourDatabase holds, and returns its path.
func databaseAsOf(t *testing.T, v int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("v%d.db", v))
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	org, alice, bob, carol, helper, busy, empty := v4.org, v4.alice, v4.bob, v4.carol, v4.helper, v4.busy, v4.empty
	for _, stmt := range []string{
		schemaAsOf(t, v),
		`INSERT INTO organizations (id, name, inserted_at) VALUES ('` + org + `', 'Old', 1)`,
		`INSERT INTO users (id, organization_id, handle, first_name, role, inserted_at, updated_at) VALUES
			('` + alice + `', '` + org + `', 'alice', 'Alice', 'admin', 1, 1),
			('` + bob + `', '` + org + `', 'bob', 'Bob', 'user', 1, 1),
			('` + carol + `', '` + org + `', 'carol', 'Carol', 'user', 1, 1)`,
		`INSERT INTO agents (id, owner_id, organization_id, slug, handle, name, inserted_at, updated_at) VALUES
			('` + helper + `', '` + bob + `', '` + org + `', 'helper', 'bob/helper', 'Helper', 1, 1)`,
		`INSERT INTO rooms (id, organization_id, creator_id, creator_type, quota_owner_id, inserted_at, updated_at) VALUES
			('` + busy + `', '` + org + `', '` + alice + `', 'User', '` + alice + `', 1, 1),
			('` + empty + `', '` + org + `', '` + alice + `', 'User', '` + alice + `', 1, 1)`,
		`INSERT INTO participants (room_id, member_id, user_id, agent_id, role, inserted_at, updated_at) VALUES
			('` + busy + `', '` + alice + `', '` + alice + `', NULL, 'owner', 1, 1),
			('` + busy + `', '` + helper + `', NULL, '` + helper + `', 'member', 1, 1),
			('` + empty + `', '` + alice + `', '` + alice + `', NULL, 'owner', 1, 1)`,
		`INSERT INTO messages (seq, id, room_id, sender_id, sender_type, sender_name, message_type, content, inserted_at, updated_at) VALUES
			(7, '0190a0a0-0000-7000-8000-000000000007', '` + busy + `', '` + helper + `', 'Agent', 'Helper', 'text', 'one', 1, 1),
			(9, '0190a0a0-0000-7000-8000-000000000009', '` + busy + `', '` + helper + `', 'Agent', 'Helper', 'thought', 'two', 2, 2)`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatalf("version %d database: %v", v, err)
		}
	}
	if v >= 8 {
		// From version 8 an insert queues its message for the search index,
		// which the writer indexes before it commits: a database of that
		// version never holds a committed message still queued.
		if _, err := raw.Exec(`INSERT INTO messages_fts (rowid, content) SELECT m.seq, m.content
			FROM messages_fts_queue q JOIN messages m ON m.seq = q.seq; DELETE FROM messages_fts_queue`); err != nil {
			t.Fatalf("version %d database: %v", v, err)
		}
	}
	return path
}

func TestUpgradeToVersion5MarksExistingMessagesRead(t *testing.T) {
	sqliteOnly(t)
	db := openTestDBAt(t, versionFourDatabase(t), Options{})
	if db.MigratedFrom() != 4 {
		t.Fatalf("migrated from %d, want 4", db.MigratedFrom())
	}
	ctx := t.Context()
	aliceActor := Actor{ID: v4.alice, Type: PartyUser, OwnerID: v4.alice, OrganizationID: v4.org}

	t.Run("the messages already there are read", func(t *testing.T) {
		rows, err := db.read.Query(`SELECT user_id, room_id, last_read_seq FROM read_markers ORDER BY user_id, room_id`)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var user, room string
			var seq int
			rows.Scan(&user, &room, &seq)
			got = append(got, fmt.Sprintf("%s %s %d", user, room, seq))
		}
		rows.Close()
		// Alice is in the busy room, Bob reads it through his agent; the
		// empty room has nothing to mark and Carol is in no room.
		want := []string{v4.alice + " " + v4.busy + " 9", v4.bob + " " + v4.busy + " 9"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("read markers after the upgrade:\n got %v\nwant %v", got, want)
		}
		if room, err := db.Room(ctx, aliceActor, v4.busy); err != nil || room.Unread != 0 {
			t.Fatalf("after the upgrade: %v unread, %v", room, err)
		}
	})

	t.Run("a new message is unread", func(t *testing.T) {
		if _, err := db.PostEvent(ctx, Actor{ID: v4.helper, Type: PartyAgent, Name: "Helper", OwnerID: v4.bob, OrganizationID: v4.org}, v4.busy,
			EventInput{Content: "new", Type: "error"}); err != nil {
			t.Fatal(err)
		}
		page, err := db.ListRooms(ctx, aliceActor, RoomFilter{}, PageRequest{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		unread := map[string]int{}
		for _, r := range page.Items {
			unread[r.ID] = r.Unread
		}
		if unread[v4.busy] != 1 || unread[v4.empty] != 0 || len(unread) != 2 {
			t.Fatalf("unread after a new message: %v", unread)
		}
	})
}

// Upgrading to version 8 indexes the messages already there for search,
// those of live rooms only, so that they are found at once.
func TestUpgradeToVersion8IndexesExistingMessages(t *testing.T) {
	sqliteOnly(t)
	path := databaseAsOf(t, 6)
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	gone := "0190a0a0-0000-7000-8000-0000000000f3"
	for _, stmt := range []string{
		`INSERT INTO rooms (id, organization_id, creator_id, creator_type, quota_owner_id, inserted_at, updated_at, deleted_at) VALUES
			('` + gone + `', '` + v4.org + `', '` + v4.alice + `', 'User', '` + v4.alice + `', 1, 1, 5)`,
		`INSERT INTO participants (room_id, member_id, user_id, role, inserted_at, updated_at) VALUES
			('` + gone + `', '` + v4.alice + `', '` + v4.alice + `', 'owner', 1, 1)`,
		`INSERT INTO messages (seq, id, room_id, sender_id, sender_type, sender_name, message_type, content, inserted_at, updated_at) VALUES
			(11, '0190a0a0-0000-7000-8000-000000000011', '` + gone + `', '` + v4.alice + `', 'User', 'Alice', 'text', 'one more, deleted', 3, 3)`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	db := openTestDBAt(t, path, Options{})
	if db.MigratedFrom() != 6 {
		t.Fatalf("migrated from %d, want 6", db.MigratedFrom())
	}
	indexIntact(t, db)
	alice := Actor{ID: v4.alice, Type: PartyUser, OwnerID: v4.alice, OrganizationID: v4.org}
	bob := Actor{ID: v4.bob, Type: PartyUser, OwnerID: v4.bob, OrganizationID: v4.org}
	helper := Actor{ID: v4.helper, Type: PartyAgent, Name: "Helper", OwnerID: v4.bob, OrganizationID: v4.org}
	for _, c := range []struct {
		who   string
		actor Actor
		q     string
		want  int
	}{
		{"alice", alice, "one", 1}, // not the deleted room's
		{"bob, through his agent", bob, "two", 1},
		{"the agent, what it sent", helper, "one", 1},
	} {
		page, err := db.Search(t.Context(), c.actor, SearchFilter{Query: c.q}, PageRequest{Limit: 10})
		if err != nil || len(page.Items) != c.want {
			t.Errorf("%s searching %q: %v, %v; want %d hits", c.who, c.q, page, err, c.want)
		}
	}
}

// Upgrading to version 9 adds OAuth sign-in to the people and agents already
// there: a client registers, a person consents for an agent they had before
// the upgrade, and the token works as that agent.
func TestUpgradeToVersion9SignsInExistingAgents(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "v6.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		schemaAsOf(t, 6),
		`INSERT INTO organizations (id, name, inserted_at) VALUES ('` + v4.org + `', 'Old', 1)`,
		`INSERT INTO users (id, organization_id, handle, first_name, role, inserted_at, updated_at) VALUES
			('` + v4.bob + `', '` + v4.org + `', 'bob', 'Bob', 'user', 1, 1)`,
		`INSERT INTO agents (id, owner_id, organization_id, slug, handle, name, inserted_at, updated_at) VALUES
			('` + v4.helper + `', '` + v4.bob + `', '` + v4.org + `', 'helper', 'bob/helper', 'Helper', 1, 1)`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			raw.Close()
			t.Fatalf("version 6 database: %v", err)
		}
	}
	raw.Close()

	db := openTestDBAt(t, path, Options{})
	if db.MigratedFrom() != 6 {
		t.Fatalf("migrated from %d, want 6", db.MigratedFrom())
	}
	ctx := t.Context()
	bob, err := db.UserByID(ctx, v4.bob)
	if err != nil {
		t.Fatal(err)
	}
	client, err := db.RegisterOAuthClient(ctx, NewOAuthClient{Name: "Claude Code", RedirectURIs: []string{"http://localhost/cb"}})
	if err != nil {
		t.Fatal(err)
	}
	code, err := db.AuthorizeOAuthClient(ctx, bob, OAuthAuthorization{ClientID: client.ID, RedirectURI: "http://localhost:9/cb",
		CodeChallenge: s256(testVerifier), Scope: "mcp", Resource: "http://chatd.test/mcp", AgentID: v4.helper})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := db.ExchangeOAuthCode(ctx, OAuthCodeExchange{ClientID: client.ID, Code: code,
		RedirectURI: "http://localhost:9/cb", Challenge: s256(testVerifier), Resource: "http://chatd.test/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := db.AuthenticateOAuth(ctx, tokens.Access)
	if err != nil || p.Agent == nil || p.Agent.ID != v4.helper || p.OAuthGrantID != tokens.GrantID {
		t.Fatalf("the token authenticates %+v, %v; want bob/helper", p, err)
	}
}

// Upgrading to version 12 deletes nothing: retention starts as keep
// forever, so a purge after the upgrade finds nothing to do, however old
// the messages and files are; once an organization sets periods, the purge
// applies them to what was there before the upgrade.
func TestUpgradeToVersion12KeepsEverythingUntilRetentionIsSet(t *testing.T) {
	sqliteOnly(t)
	path := databaseAsOf(t, 9)
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	file := "0190a0a0-0000-7000-8000-0000000000e1"
	for _, stmt := range []string{
		`INSERT INTO files (id, room_id, uploader_id, uploader_type, name, content_type, size, sha256, chunk_size, status, inserted_at)
			VALUES ('` + file + `', '` + v4.busy + `', '` + v4.alice + `', 'User', 'old.txt', 'text/plain', 3, 'x', 4, 'ready', 1)`,
		`INSERT INTO file_chunks (file_id, n, data) VALUES ('` + file + `', 0, x'6f6c64')`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	db := openTestDBAt(t, path, Options{})
	if db.MigratedFrom() != 9 {
		t.Fatalf("migrated from %d, want 9", db.MigratedFrom())
	}
	ctx := t.Context()
	alice := Actor{ID: v4.alice, Type: PartyUser, OwnerID: v4.alice, OrganizationID: v4.org}
	if _, err := db.RoomFile(ctx, alice, v4.busy, file); err != nil {
		t.Fatalf("a file from before the upgrade: %v", err)
	}
	report, err := db.Purge(ctx, PurgeOptions{})
	if err != nil || len(report.Lines) != 0 || rawCount(t, db, `SELECT count(*) FROM messages`) != 2 {
		t.Fatalf("a purge right after the upgrade: %+v, %v", report, err)
	}
	if _, err := db.SetOrganizationRetentionByName(ctx, "Old", Periods{TextDays: days(1), FileDays: days(1)}); err != nil {
		t.Fatal(err)
	}
	if report, err = db.Purge(ctx, PurgeOptions{}); err != nil {
		t.Fatal(err)
	}
	texts, _ := report.Total(KindText)
	files, _ := report.Total(KindFile)
	if texts != 1 || files != 1 || rawCount(t, db, `SELECT count(*) FROM messages WHERE message_type = 'thought'`) != 1 ||
		rawCount(t, db, `SELECT count(*) FROM files`)+rawCount(t, db, `SELECT count(*) FROM file_chunks`) != 0 {
		t.Fatalf("the purge once set: %+v", report)
	}
	indexIntact(t, db)
}
