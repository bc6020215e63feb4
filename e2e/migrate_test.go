package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// currentVersion is the schema version this chatd creates.
func currentVersion(t *testing.T) int {
	t.Helper()
	schema, err := os.ReadFile(repoFile("schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := store.SchemaVersionOf(string(schema))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// schemaBefore is the schema file name as version v created it: its text
// up to the section of version v+1.
func schemaBefore(t *testing.T, name string, v int) string {
	t.Helper()
	schema, err := os.ReadFile(repoFile(name))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(schema), fmt.Sprintf("\n-- Version %d ", v+1))
	if i < 0 {
		t.Fatalf("%s has no section for version %d", name, v+1)
	}
	return string(schema[:i])
}

// stepsFrom is how the dry run lists the upgrades from version v: a line
// per version, each followed by its statements.
func stepsFrom(v, current int) []string {
	var lines []string
	for w := v + 1; w <= current; w++ {
		lines = append(lines, fmt.Sprintf("  version %d:\n    ", w))
	}
	return lines
}

// containsInOrder says whether s holds each of parts, in that order.
func containsInOrder(s string, parts ...string) bool {
	for _, p := range parts {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}

// chatd migrate --dry-run on a SQLite file: what it would do to a file
// that is not there, an old one and a current one, and the refusals of
// migrate, word for word; and it writes nothing, not even a directory.
// A refused migrate writes nothing either.
func TestMigrateDryRun(t *testing.T) {
	current := currentVersion(t)
	dir := t.TempDir()

	missing := filepath.Join(dir, "new", "chatd.db")
	out := runChatd(t, nil, "migrate", "--dry-run", "--db", missing).ok(t).stdout
	if want := fmt.Sprintf("no database at %s; chatd migrate would create it, with the whole schema at version %d\ndry run: nothing was changed\n", missing, current); out != want {
		t.Fatalf("no file:\n got %q\nwant %q", out, want)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
		t.Fatalf("the dry run made the directory: %v", err)
	}

	db := filepath.Join(dir, "chatd.db")
	sqliteFile(t, db, "PRAGMA journal_mode = WAL", schemaBefore(t, "schema.sql", 12)+"\nPRAGMA user_version = 12;")
	before := dirDigests(t, dir)
	out = runChatd(t, nil, "migrate", "--dry-run", "--db", db).ok(t).stdout
	lines := append([]string{fmt.Sprintf("%s is at schema version 12; chatd migrate would upgrade it to version %d, in one transaction:\n", db, current)},
		stepsFrom(12, current)...)
	if !containsInOrder(out, lines...) || !strings.Contains(out, "  version 13:\n    CREATE TABLE leases\n") ||
		!strings.HasSuffix(out, "\ndry run: nothing was changed\n") {
		t.Fatalf("version 12:\n%s", out)
	}
	if after := dirDigests(t, dir); !reflect.DeepEqual(after, before) {
		t.Fatalf("the dry run changed the directory:\nbefore %v\n after %v", before, after)
	}
	if v := queryValue[int](t, db, "PRAGMA user_version"); v != 12 {
		t.Fatalf("user_version %d after the dry run", v)
	}

	out = runChatd(t, nil, "migrate", "--db", db).ok(t).stdout
	if want := fmt.Sprintf("upgraded %s from schema version 12 to %d\n", db, current); out != want {
		t.Fatalf("migrate:\n got %q\nwant %q", out, want)
	}
	out = runChatd(t, nil, "migrate", "--dry-run", "--db", db).ok(t).stdout
	if want := fmt.Sprintf("%s is already at schema version %d; nothing to do\n", db, current); out != want {
		t.Fatalf("current:\n got %q\nwant %q", out, want)
	}

	// In rollback-journal mode, as most programs leave their files.
	newer := filepath.Join(dir, "newer.db")
	sqliteFile(t, newer, "CREATE TABLE future (x)", "PRAGMA user_version = 42")
	foreign := filepath.Join(dir, "foreign.db")
	sqliteFile(t, foreign, "CREATE TABLE someone_elses (x)")
	for path, refusal := range map[string]string{
		newer:   fmt.Sprintf("the database is at schema version 42 but this chatd supports up to version %d; upgrade chatd (the database was not changed)", current),
		foreign: "the file holds tables but no chatd schema version; it is not a chatd database",
	} {
		digest := fileDigest(t, path)
		dry := runChatd(t, nil, "migrate", "--dry-run", "--db", path)
		if fileDigest(t, path) != digest {
			t.Fatalf("the dry run changed %s", path)
		}
		real := runChatd(t, nil, "migrate", "--db", path)
		if dry.code != 1 || dry.code != real.code || dry.stderr != real.stderr || dry.stdout != "" || !strings.Contains(real.stderr, refusal) {
			t.Fatalf("%s: the dry run exits %d saying %q; migrate exits %d saying %q", path, dry.code, dry.stderr, real.code, real.stderr)
		}
		if fileDigest(t, path) != digest {
			t.Fatalf("the refused migrate changed %s", path)
		}
		for _, beside := range []string{"-wal", "-shm", "-journal"} {
			if _, err := os.Stat(path + beside); !os.IsNotExist(err) {
				t.Fatalf("the refused migrate left %s%s: %v", path, beside, err)
			}
		}
		if mode := queryValue[string](t, path, "PRAGMA journal_mode"); mode != "delete" {
			t.Fatalf("%s is in journal mode %q after the refused migrate", path, mode)
		}
	}
}

// dirDigests are the digests of a directory's files.
func dirDigests(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string][32]byte{}
	for _, e := range entries {
		if !e.IsDir() {
			digests[e.Name()] = fileDigest(t, filepath.Join(dir, e.Name()))
		}
	}
	return digests
}

// chatd migrate, with and without --dry-run, on PostgreSQL: an empty
// database, one of version 12, a current one, a newer one; the dry run
// changes nothing, and no password is printed.
func TestMigrateDryRunOnPostgreSQL(t *testing.T) {
	current := currentVersion(t)
	u, err := url.Parse(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "s3cret") // the test cluster trusts its socket
	env := []string{"CHATD_DATABASE_URL=" + u.String()}
	shown := u.Redacted()
	conn, query := postgresConn(t, u.String())
	run := func(args ...string) commandResult {
		t.Helper()
		r := runChatd(t, env, args...)
		if strings.Contains(r.stdout+r.stderr, "s3cret") {
			t.Fatalf("the password is printed:\n%s%s", r.stdout, r.stderr)
		}
		return r
	}

	out := run("migrate", "--dry-run").ok(t).stdout
	if want := fmt.Sprintf("%s holds no chatd schema yet; chatd migrate would create the whole schema in it, at version %d\ndry run: nothing was changed\n", shown, current); out != want {
		t.Fatalf("empty:\n got %q\nwant %q", out, want)
	}
	if n := query(`SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`); n != 0 {
		t.Fatalf("%d tables after the dry run", n)
	}

	if _, err := conn.Exec(schemaBefore(t, "schema_postgres.sql", 12)); err != nil {
		t.Fatal(err)
	}
	out = run("migrate", "--dry-run").ok(t).stdout
	lines := append([]string{fmt.Sprintf("%s is at schema version 12; chatd migrate would upgrade it to version %d, in one transaction:\n", shown, current)},
		stepsFrom(12, current)...)
	if !containsInOrder(out, lines...) ||
		!strings.Contains(out, "  version 13:\n    CREATE TABLE leases\n    CREATE TABLE cluster_changes\n    CREATE INDEX cluster_changes_at ON cluster_changes\n") ||
		!strings.HasSuffix(out, "\ndry run: nothing was changed\n") {
		t.Fatalf("version 12:\n%s", out)
	}
	if v, leases := query(`SELECT version FROM schema_version`), query(`SELECT count(*) FROM pg_tables WHERE tablename = 'leases'`); v != 12 || leases != 0 {
		t.Fatalf("after the dry run: version %d, %d leases tables", v, leases)
	}

	out = run("migrate").ok(t).stdout
	if want := fmt.Sprintf("upgraded %s from schema version 12 to %d\n", shown, current); out != want {
		t.Fatalf("migrate:\n got %q\nwant %q", out, want)
	}
	out = run("migrate", "--dry-run").ok(t).stdout
	if want := fmt.Sprintf("%s is already at schema version %d; nothing to do\n", shown, current); out != want {
		t.Fatalf("current:\n got %q\nwant %q", out, want)
	}

	if _, err := conn.Exec(`UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	dry, real := run("migrate", "--dry-run"), run("migrate")
	if dry.code != 1 || dry.code != real.code || dry.stderr != real.stderr || !strings.Contains(dry.stderr, "schema version 99") {
		t.Fatalf("newer: the dry run exits %d saying %q; migrate exits %d saying %q", dry.code, dry.stderr, real.code, real.stderr)
	}
}
