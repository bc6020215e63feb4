package store

import (
	"crypto/sha256"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
)

// untouched records a directory's files and their digests, to show that
// a dry run, or a refused migration, wrote nothing there: no byte of the database or its WAL, and
// no file beside them. A -shm file already there is not compared: it is
// the memory the connections to a database in WAL mode share, where every
// reader, read-only or not, marks what it reads.
func untouched(t *testing.T, dir string) func() {
	t.Helper()
	before := dirDigests(t, dir)
	return func() {
		t.Helper()
		if after := dirDigests(t, dir); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s changed:\nbefore %v\n after %v", dir, before, after)
		}
	}
}

func dirDigests(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string][32]byte{}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "-shm") {
			digests[e.Name()] = [32]byte{}
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		digests[e.Name()] = sha256.Sum256(b)
	}
	return digests
}

func planOf(t *testing.T, location string) (*MigrationPlan, error) {
	t.Helper()
	return PlanMigration(t.Context(), location, Options{Schema: testSchema, PostgresSchema: testPostgresSchema})
}

// stepVersions and heads read a plan back for comparisons.
func stepVersions(p *MigrationPlan) []int {
	var vs []int
	for _, s := range p.Steps {
		vs = append(vs, s.Version)
	}
	return vs
}

func heads(s MigrationStep) []string {
	var hs []string
	for _, st := range s.Statements {
		h := st.Head
		if st.Data {
			h += " (data)"
		}
		hs = append(hs, h)
	}
	return hs
}

// rawSQLite writes a SQLite database at path, in WAL mode as chatd leaves
// its files, running stmts in it.
func rawSQLite(t *testing.T, path string, stmts ...string) {
	t.Helper()
	rawSQLiteIn(t, path, "wal", stmts...)
}

// rawSQLiteIn writes a SQLite database at path in journal mode ("wal",
// or "delete" as most programs leave their files), running stmts in it.
func rawSQLiteIn(t *testing.T, path, mode string, stmts ...string) {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, s := range append([]string{"PRAGMA journal_mode = " + mode}, stmts...) {
		if _, err := raw.Exec(s); err != nil {
			t.Fatalf("%.60s: %v", s, err)
		}
	}
}

// The plan for a database of every earlier version lists the upgrades to
// each later version, in order, and reading it changes nothing: the file
// is byte for byte as it was, at its version, with nothing beside it.
func TestPlanMigrationFromEveryVersion(t *testing.T) {
	sqliteOnly(t)
	current, _ := schemaVersion(testSchema)
	upgrades, err := upgradeSteps(testSchema)
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v < current; v++ {
		dir := t.TempDir()
		path := filepath.Join(dir, "chatd.db")
		rawSQLite(t, path, schemaAsOf(t, v))
		check := untouched(t, dir)
		plan, err := planOf(t, path)
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		check()
		var want []int
		for w := v + 1; w <= current; w++ {
			want = append(want, w)
		}
		if plan.From != v || plan.To != current || plan.Create || !plan.Exists || plan.Database != path ||
			!slices.Equal(stepVersions(plan), want) {
			t.Fatalf("version %d: plan %+v, want steps %v", v, plan, want)
		}
		for _, step := range plan.Steps {
			// Every statement of the step's text is listed, but the one
			// that sets the version.
			if got, want := len(step.Statements), len(splitStatements(upgrades[step.Version]))-1; got != want || got == 0 {
				t.Errorf("version %d: the step to %d lists %d statements, want %d: %v", v, step.Version, got, want, heads(step))
			}
		}
		if got := versionOf(t, path); got != v {
			t.Fatalf("version %d: user_version is %d after the dry run", v, got)
		}
	}

	// What the steps say, for a few of them.
	plan, err := planOf(t, databaseAsOf(t, 4))
	if err != nil {
		t.Fatal(err)
	}
	for version, want := range map[int][]string{
		5:  {"CREATE TABLE read_markers", "INSERT OR IGNORE INTO read_markers (data)"},
		8:  {"CREATE VIRTUAL TABLE messages_fts", "CREATE TABLE messages_fts_queue", "CREATE TRIGGER messages_fts_insert ON messages", "CREATE TRIGGER messages_fts_update ON messages", "CREATE TRIGGER messages_fts_delete ON messages", "INSERT INTO messages_fts (data)"},
		11: {"ALTER TABLE users ADD COLUMN removed_at"},
		12: {"CREATE TABLE organization_retention", "CREATE TABLE room_retention", "CREATE TABLE retention_marks", "ALTER TABLE files ADD COLUMN expired_at", "CREATE INDEX files_expired ON files", "CREATE INDEX webhook_deliveries_message ON webhook_deliveries"},
		13: {"CREATE TABLE leases"},
	} {
		if got := heads(plan.Steps[version-5]); !slices.Equal(got, want) {
			t.Errorf("the step to %d:\n got %q\nwant %q", version, got, want)
		}
	}
}

// versionOf reads the schema version of the file at path.
func versionOf(t *testing.T, path string) int {
	t.Helper()
	conn, err := openFile(path, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	v, err := userVersion(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A database another process has open (a running server: its -wal file is
// there) is read through that WAL, and left as it was: the database file
// and its WAL.
func TestPlanMigrationBesideAnOpenDatabase(t *testing.T) {
	sqliteOnly(t)
	current, _ := schemaVersion(testSchema)
	dir := t.TempDir()
	path := filepath.Join(dir, "chatd.db")
	rawSQLite(t, path, schemaAsOf(t, current-1))
	holder, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	holder.SetMaxOpenConns(1)
	// The last commit is in the WAL only, not yet in the database file.
	if _, err := holder.Exec(`PRAGMA wal_autocheckpoint = 0; INSERT INTO organizations (id, name, inserted_at) VALUES ('0190a0a0-0000-7000-8000-000000000001', 'Old', 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("no WAL beside an open database: %v", err)
	}
	check := untouched(t, dir)
	plan, err := planOf(t, path)
	if err != nil {
		t.Fatal(err)
	}
	check()
	if plan.From != current-1 || !slices.Equal(stepVersions(plan), []int{current}) {
		t.Fatalf("plan %+v", plan)
	}

	// A store's own (it checkpoints by itself, so its files are not
	// compared).
	db := openTestDBAt(t, filepath.Join(t.TempDir(), "current.db"), Options{})
	if plan, err = planOf(t, db.Path()); err != nil || plan.From != current || plan.To != current || len(plan.Steps) != 0 || plan.Create {
		t.Fatalf("a current database, open: %+v, %v", plan, err)
	}
}

// A current database has nothing to do; no file, or an empty one, would
// get the whole schema, and the dry run creates neither the file nor its
// directory.
func TestPlanMigrationOfACurrentOrMissingDatabase(t *testing.T) {
	sqliteOnly(t)
	current, _ := schemaVersion(testSchema)
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh.db")
	openTestDBAt(t, fresh, Options{}).Close()
	check := untouched(t, dir)
	plan, err := planOf(t, fresh)
	if err != nil || plan.From != current || plan.To != current || plan.Create || len(plan.Steps) != 0 {
		t.Fatalf("a current database: %+v, %v", plan, err)
	}

	missing := filepath.Join(dir, "not", "yet", "chatd.db")
	plan, err = planOf(t, missing)
	if err != nil || !plan.Create || plan.Exists || plan.From != 0 || plan.To != current || len(plan.Steps) != 0 || plan.Database != missing {
		t.Fatalf("no file: %+v, %v", plan, err)
	}
	check()

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	check = untouched(t, dir)
	plan, err = planOf(t, empty)
	if err != nil || !plan.Create || !plan.Exists || plan.From != 0 || len(plan.Steps) != 0 {
		t.Fatalf("an empty file: %+v, %v", plan, err)
	}
	check()
}

// What migrating refuses, the dry run refuses with the same words, and
// both leave the file as it was: byte for byte, in its journal mode, with
// nothing beside it.
func TestPlanMigrationRefusesWhatMigrateRefuses(t *testing.T) {
	sqliteOnly(t)
	notChatd := "the file holds tables but no chatd schema version; it is not a chatd database"
	for _, tc := range []struct {
		name  string
		mode  string // the file's journal mode; "" for a file that is not SQLite
		write func(path string)
		want  string // the refusal
	}{
		{"a newer chatd's", "wal", func(path string) { rawSQLite(t, path, "CREATE TABLE future (x)", "PRAGMA user_version = 99") },
			"the database is at schema version 99 but this chatd supports up to version"},
		{"a newer chatd's, in rollback-journal mode", "delete", func(path string) {
			rawSQLiteIn(t, path, "delete", "CREATE TABLE future (x)", "PRAGMA user_version = 99")
		}, "the database is at schema version 99 but this chatd supports up to version"},
		{"another program's", "wal", func(path string) { rawSQLite(t, path, "CREATE TABLE someone_elses (x)") }, notChatd},
		{"another program's, in rollback-journal mode", "delete", func(path string) {
			rawSQLiteIn(t, path, "delete", "CREATE TABLE notes (x)", "INSERT INTO notes VALUES ('kept')")
		}, notChatd},
		{"not SQLite", "", func(path string) {
			os.WriteFile(path, []byte(strings.Repeat("not a database ", 100)), 0o600)
		}, "is not a SQLite database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "chatd.db")
			tc.write(path)
			check := untouched(t, dir)
			_, planErr := planOf(t, path)
			check()
			_, openErr := Open(path, Options{Schema: testSchema})
			check()
			if planErr == nil || openErr == nil || planErr.Error() != openErr.Error() || !strings.Contains(openErr.Error(), tc.want) {
				t.Fatalf("the dry run says %v; migrating says %v; want %q", planErr, openErr, tc.want)
			}
			if tc.mode != "" {
				if got := journalModeOf(t, path); got != tc.mode {
					t.Fatalf("journal mode %q after the refusal, want %q", got, tc.mode)
				}
			}
		})
	}
	path := filepath.Join(t.TempDir(), "chatd.db")
	rawSQLite(t, path, "PRAGMA user_version = 99")
	var tooNew *ErrSchemaTooNew
	if _, err := planOf(t, path); !errors.As(err, &tooNew) || tooNew.Found != 99 {
		t.Fatalf("a newer schema: %v, want ErrSchemaTooNew", err)
	}
}

// journalModeOf reads the journal mode of the file at path.
func journalModeOf(t *testing.T, path string) string {
	t.Helper()
	conn, err := openFile(path, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var mode string
	if err := conn.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

// splitStatements cuts the whole schema at the right places: run one by
// one, its statements make the schema that runs whole.
func TestSplitStatementsCutsTheSchemaWhereSQLiteDoes(t *testing.T) {
	dir := t.TempDir()
	whole, pieces := filepath.Join(dir, "whole.db"), filepath.Join(dir, "pieces.db")
	rawSQLite(t, whole, testSchema)
	var stmts []string
	for _, s := range splitStatements(testSchema) {
		stmts = append(stmts, s.text)
	}
	rawSQLite(t, pieces, stmts...)
	if got, want := schemaObjects(t, pieces), schemaObjects(t, whole); got != want {
		t.Fatalf("run statement by statement:\n%s\nrun whole:\n%s", got, want)
	}
}

func TestPostgresSplitStatementsCutsTheSchemaWherePostgresDoes(t *testing.T) {
	whole, pieces := rawPostgres(t, pgtest.NewDatabase(t)), rawPostgres(t, pgtest.NewDatabase(t))
	if _, err := whole.Exec(testPostgresSchema); err != nil {
		t.Fatal(err)
	}
	for _, s := range splitStatements(testPostgresSchema) {
		if _, err := pieces.Exec(s.text); err != nil {
			t.Fatalf("%.60s: %v", s.text, err)
		}
	}
	if got, want := postgresShape(t, pieces), postgresShape(t, whole); !reflect.DeepEqual(got, want) {
		t.Fatalf("run statement by statement:\n%v\nrun whole:\n%v", got, want)
	}
}

func TestStatementHeads(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   []string
	}{
		{"-- a; comment\nCREATE TABLE IF NOT EXISTS a (x TEXT DEFAULT ';'); /* b; */ CREATE TABLE \"b;c\" (y);",
			[]string{"CREATE TABLE IF NOT EXISTS a", `CREATE TABLE "b;c"`}},
		{"CREATE UNIQUE INDEX i ON t (x) WHERE y = 'z;'; CREATE INDEX ON public.t (x); CREATE INDEX CONCURRENTLY IF NOT EXISTS j ON s.t (x)",
			[]string{"CREATE UNIQUE INDEX i ON t", "CREATE INDEX ON public.t", "CREATE INDEX CONCURRENTLY IF NOT EXISTS j ON s.t"}},
		{"CREATE TRIGGER tr AFTER UPDATE OF c ON t WHEN new.c <> old.c BEGIN\n  UPDATE u SET n = CASE WHEN new.c THEN 1 ELSE 0 END;\n  DELETE FROM v;\nEND; SELECT 1",
			[]string{"CREATE TRIGGER tr ON t", "SELECT 1"}},
		{"CREATE FUNCTION f(x TEXT) RETURNS BOOLEAN LANGUAGE plpgsql AS $$ BEGIN RETURN x = ';'; END $$; CREATE FUNCTION g() AS $body$ ; $body$;",
			[]string{"CREATE FUNCTION f", "CREATE FUNCTION g"}},
		{"ALTER TABLE files ADD COLUMN expired_at INTEGER; ALTER TABLE ONLY s.t DROP CONSTRAINT IF EXISTS k; ALTER TABLE t RENAME TO u;",
			[]string{"ALTER TABLE files ADD COLUMN expired_at", "ALTER TABLE ONLY s.t DROP CONSTRAINT IF EXISTS k", "ALTER TABLE t RENAME TO u"}},
		{"INSERT OR IGNORE INTO a (x) SELECT 1; UPDATE OR IGNORE b SET x = 1; DELETE FROM c WHERE 1; DROP INDEX IF EXISTS d; INSERT INTO s.e VALUES (';')",
			[]string{"INSERT OR IGNORE INTO a (data)", "UPDATE OR IGNORE b (data)", "DELETE FROM c (data)", "DROP INDEX IF EXISTS d", "INSERT INTO s.e (data)"}},
		{"PRAGMA foreign_keys = 1; DO $$ BEGIN " + strings.Repeat("PERFORM 1; ", 20) + "END $$;",
			[]string{"PRAGMA foreign_keys = 1", "DO $$ BEGIN PERFORM 1; PERFORM 1; PERFORM 1; PERFORM 1; PERFORM 1; PERFO …"}},
	} {
		var got []string
		for _, s := range splitStatements(tc.script) {
			got = append(got, heads(MigrationStep{Statements: []PlannedStatement{s.planned()}})...)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q:\n got %q\nwant %q", tc.script, got, tc.want)
		}
	}
}

// On PostgreSQL: an empty database would get the whole schema, one of
// version 12 the step to 13, a current one nothing; a newer one and one of
// another application's are refused as migrating refuses them. Nothing is
// changed, whatever the plan.
func TestPostgresPlanMigration(t *testing.T) {
	current, _ := schemaVersion(testSchema)
	t.Run("an empty database", func(t *testing.T) {
		url := pgtest.NewDatabase(t)
		plan, err := planOf(t, url)
		if err != nil || !plan.Create || !plan.Exists || plan.From != 0 || plan.To != current || len(plan.Steps) != 0 ||
			plan.Database != RedactedURL(url) {
			t.Fatalf("plan %+v, %v", plan, err)
		}
		if n := countOn(t, url, `SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace`); n != 0 {
			t.Fatalf("%d relations after the dry run", n)
		}
	})
	t.Run("every earlier version", func(t *testing.T) {
		for v := firstPostgresVersion; v < current; v++ {
			url := pgtest.NewDatabase(t)
			execOn(t, url, postgresSchemaAsOf(t, v))
			before := postgresShape(t, rawPostgres(t, url))
			plan, err := planOf(t, url)
			if err != nil {
				t.Fatal(err)
			}
			var want []int
			for w := v + 1; w <= current; w++ {
				want = append(want, w)
			}
			if plan.From != v || plan.To != current || plan.Create || !slices.Equal(stepVersions(plan), want) {
				t.Fatalf("version %d: plan %+v, want steps %v", v, plan, want)
			}
			if got := postgresShape(t, rawPostgres(t, url)); !reflect.DeepEqual(got, before) {
				t.Fatalf("version %d: the dry run changed the schema", v)
			}
			if got := countOn(t, url, `SELECT version FROM schema_version`); got != v {
				t.Fatalf("version %d: the version row reads %d after the dry run", v, got)
			}
		}
		url := pgtest.NewDatabase(t)
		execOn(t, url, postgresSchemaAsOf(t, 12))
		plan, err := planOf(t, url)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"CREATE TABLE leases", "CREATE TABLE cluster_changes", "CREATE INDEX cluster_changes_at ON cluster_changes"}
		if got := heads(plan.Steps[0]); plan.Steps[0].Version != 13 || !slices.Equal(got, want) {
			t.Fatalf("the step to 13: %d %q, want %q", plan.Steps[0].Version, got, want)
		}
	})
	t.Run("a current database", func(t *testing.T) {
		url := pgtest.NewDatabase(t)
		db, err := openPostgresStore(t, url)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		plan, err := planOf(t, url)
		if err != nil || plan.From != current || plan.To != current || plan.Create || len(plan.Steps) != 0 {
			t.Fatalf("plan %+v, %v", plan, err)
		}
	})
	for name, prepare := range map[string]string{
		"a newer schema":              `UPDATE schema_version SET version = 99`,
		"another application's table": `DROP TABLE schema_version; CREATE TABLE invoices (id BIGINT PRIMARY KEY)`,
	} {
		t.Run(name, func(t *testing.T) {
			url := pgtest.NewDatabase(t)
			execOn(t, url, postgresSchemaAsOf(t, firstPostgresVersion))
			execOn(t, url, prepare)
			before := postgresShape(t, rawPostgres(t, url))
			_, planErr := planOf(t, url)
			if got := postgresShape(t, rawPostgres(t, url)); !reflect.DeepEqual(got, before) {
				t.Fatal("the dry run changed the schema")
			}
			_, openErr := openPostgresStore(t, url)
			if planErr == nil || openErr == nil || planErr.Error() != openErr.Error() {
				t.Fatalf("the dry run says %v; migrating says %v", planErr, openErr)
			}
		})
	}
}
