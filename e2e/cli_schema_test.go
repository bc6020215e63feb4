package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
)

// usingCommands are commands that use a database rather than set one up,
// each as a user would run it (some would be refused anyway, for a person
// who does not exist: the database must be refused first, untouched).
var usingCommands = [][]string{
	{"stats"},
	{"stats", "--json"},
	{"purge", "--dry-run"},
	{"purge"},
	{"retention"},
	{"retention", "--text-days", "30"},
	{"token", "--user", "alice"},
	{"token", "--user", "nobody"},
	{"create-user", "--handle", "bob", "--name", "Bob"},
	{"register-agent", "--owner", "alice", "--name", "Helper", "--description", "Answers questions"},
	{"rotate-agent-key", "--agent", "alice/helper"},
	{"list-webhooks", "--agent", "alice/helper"},
	{"add-webhook", "--agent", "alice/helper", "--url", "http://127.0.0.1:9/hook"},
	{"set-password", "--user", "alice"},
}

// Only serve, dev and migrate create or upgrade a schema. Every other
// command opens the database as it is: run beside an older chatd still
// serving the file, it must not upgrade the schema under that server. An
// older schema, an empty file, another program's file and a newer chatd's
// are refused, with what to do, and left exactly as they were (no byte
// changed, no file left beside them).
func TestCommandsOpenTheDatabaseAsItIs(t *testing.T) {
	current := currentVersion(t)
	for _, tc := range []struct {
		name  string
		make  func(path string)
		wants []string
	}{
		{"older schema", func(path string) {
			sqliteFile(t, path, "PRAGMA journal_mode = WAL", schemaBefore(t, "schema.sql", 12)+"\nPRAGMA user_version = 12;",
				`INSERT INTO organizations (id, name, inserted_at) VALUES ('0190a0a0-0000-7000-8000-000000000001', 'default', 1)`,
				`INSERT INTO users (id, organization_id, handle, first_name, role, inserted_at, updated_at) VALUES
					('0190a0a0-0000-7000-8000-000000000002', '0190a0a0-0000-7000-8000-000000000001', 'alice', 'Alice', 'admin', 1, 1)`)
		}, []string{fmt.Sprintf("the database is at schema version 12 but this chatd needs version %d", current), "chatd migrate"}},
		{"empty file", func(path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, []string{"empty, not a chatd database"}},
		{"another program's file", func(path string) {
			sqliteFile(t, path, "CREATE TABLE someone_elses (x)")
		}, []string{"not a chatd database"}},
		{"newer schema", func(path string) {
			sqliteFile(t, path, "PRAGMA journal_mode = WAL", "CREATE TABLE future (x)", "PRAGMA user_version = 99")
		}, []string{fmt.Sprintf("schema version 99 but this chatd supports up to version %d", current)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "chatd.db")
			tc.make(db)
			before := dirDigests(t, dir)
			version := queryValue[int](t, db, "PRAGMA user_version")
			for _, args := range usingCommands {
				cmd := chatdCommand(nil, append(args, "--db", db)...)
				cmd.Stdin = strings.NewReader("a long enough password\n")
				r := runCommand(t, cmd)
				if r.code != 1 {
					t.Errorf("%v: exit %d, want 1; stderr %q", args, r.code, r.stderr)
				}
				for _, want := range tc.wants {
					if !strings.Contains(r.stderr, want) {
						t.Errorf("%v: stderr %q does not say %q", args, r.stderr, want)
					}
				}
				if after := dirDigests(t, dir); !reflect.DeepEqual(after, before) {
					t.Fatalf("%v changed the directory:\nbefore %v\n after %v", args, before, after)
				}
				if v := queryValue[int](t, db, "PRAGMA user_version"); v != version {
					t.Fatalf("%v: user_version %d, was %d", args, v, version)
				}
			}
		})
	}

	// migrate upgrades the older database; then the same commands use it.
	dir := t.TempDir()
	db := filepath.Join(dir, "chatd.db")
	sqliteFile(t, db, "PRAGMA journal_mode = WAL", schemaBefore(t, "schema.sql", 12)+"\nPRAGMA user_version = 12;")
	runChatd(t, nil, "migrate", "--db", db).ok(t)
	runChatd(t, nil, "create-user", "--db", db, "--handle", "alice", "--name", "Alice").ok(t)
	runChatd(t, nil, "stats", "--db", db).ok(t)
	runChatd(t, nil, "token", "--db", db, "--user", "alice").ok(t)
}

// A refused serve leaves nothing beside the file it refused: not the
// lock file it created to hold the database while it looked at it. A lock
// file that was there before stays.
func TestRefusedServeLeavesNoLockFile(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("garbage ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	sqliteFile(t, other, "CREATE TABLE someone_elses (x)")
	directory := filepath.Join(dir, "a-directory")
	if err := os.Mkdir(directory, 0o700); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, "newer.db")
	sqliteFile(t, newer, "CREATE TABLE future (x)", "PRAGMA user_version = 99")
	locked := filepath.Join(dir, "locked-before.db")
	sqliteFile(t, locked, "CREATE TABLE someone_elses (x)")
	if err := os.WriteFile(locked+".lock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for db, want := range map[string]string{
		garbage:   "not a SQLite database",
		other:     "not a chatd database",
		directory: "is a directory",
		newer:     "schema version 99",
		locked:    "not a chatd database",
	} {
		before := dirDigests(t, dir)
		r := runChatd(t, nil, "serve", "--db", db, "--addr", "127.0.0.1:0")
		r.failsWithOneLine(t, want)
		if after := dirDigests(t, dir); !reflect.DeepEqual(after, before) {
			t.Errorf("serve --db %s changed the directory:\nbefore %v\n after %v", filepath.Base(db), before, after)
		}
	}
}

// The database file chatd creates holds the token-signing secret and the
// digests of every key: migrate and serve create it readable by its owner
// only, and its -wal and -shm follow.
func TestNewDatabaseIsForItsOwnerOnly(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix file modes")
	}
	migrated := newDatabase(t, filepath.Join(t.TempDir(), "data", "chatd.db"))
	served := filepath.Join(t.TempDir(), "chatd.db")
	srv := startServer(t, served)
	defer srv.stop(t)
	for _, path := range []string{migrated, served, served + "-wal", served + "-shm"} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s: mode %v, want -rw-------", path, mode)
		}
	}
}

// The same rule on PostgreSQL (--database-url): a command that uses the
// database creates no schema in an empty one and upgrades no older one.
func TestCommandsOpenAPostgreSQLDatabaseAsItIs(t *testing.T) {
	current := currentVersion(t)
	url := pgtest.NewDatabase(t)
	env := []string{"CHATD_DATABASE_URL=" + url}
	conn, query := postgresConn(t, url)
	const tables = `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`

	for _, args := range [][]string{{"stats"}, {"token", "--user", "alice"}, {"purge", "--dry-run"}, {"retention"}} {
		runChatd(t, env, args...).failsWithOneLine(t, "empty, not a chatd database")
	}
	if n := query(tables); n != 0 {
		t.Fatalf("%d tables in the empty database after the refused commands", n)
	}

	if _, err := conn.Exec(schemaBefore(t, "schema_postgres.sql", 12)); err != nil {
		t.Fatal(err)
	}
	n := query(tables)
	for _, args := range [][]string{{"stats"}, {"token", "--user", "alice"}, {"create-user", "--handle", "bob", "--name", "Bob"}} {
		runChatd(t, env, args...).failsWithOneLine(t, fmt.Sprintf("schema version 12 but this chatd needs version %d", current))
	}
	if v, m := query(`SELECT version FROM schema_version`), query(tables); v != 12 || m != n {
		t.Fatalf("after the refused commands: version %d, %d tables (was 12, %d)", v, m, n)
	}
	runChatd(t, env, "migrate").ok(t)
	runChatd(t, env, "create-user", "--handle", "bob", "--name", "Bob").ok(t)
}
