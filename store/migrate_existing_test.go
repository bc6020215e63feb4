package store

import (
	"crypto/sha256"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
)

// fileState is what a refused open must leave as it was: the digest of
// every file in the database's directory.
func fileState(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	state := map[string][32]byte{}
	for _, e := range entries {
		if e.IsDir() {
			state[e.Name()+"/"] = [32]byte{}
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		state[e.Name()] = sha256.Sum256(b)
	}
	return state
}

// Options.Existing opens a SQLite database as it is: it creates no file and
// no schema, upgrades none, and refuses, leaving every byte as it was, what
// Open without it would create, upgrade or refuse.
func TestOpenExistingRefusesWhatItWouldHaveToSetUp(t *testing.T) {
	sqliteOnly(t)
	current, _ := schemaVersion(testSchema)
	raw := func(path string, stmts ...string) {
		t.Helper()
		conn, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, s := range stmts {
			if _, err := conn.Exec(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		make func(path string)
		want func(err error) bool
	}{
		{"older schema", func(path string) { raw(path, "PRAGMA journal_mode = WAL", schemaAsOf(t, 12)) }, func(err error) bool {
			var old *ErrSchemaTooOld
			return errors.As(err, &old) && old.Found == 12 && old.Needed == current && strings.Contains(err.Error(), "chatd migrate")
		}},
		{"empty file", func(path string) { os.WriteFile(path, nil, 0o600) }, func(err error) bool {
			return strings.Contains(err.Error(), "empty, not a chatd database")
		}},
		{"another program's file", func(path string) { raw(path, "CREATE TABLE someone_elses (x)") }, func(err error) bool {
			return strings.Contains(err.Error(), "not a chatd database")
		}},
		{"newer schema", func(path string) { raw(path, "CREATE TABLE future (x)", "PRAGMA user_version = 99") }, func(err error) bool {
			var tooNew *ErrSchemaTooNew
			return errors.As(err, &tooNew) && tooNew.Found == 99
		}},
		{"no file", func(string) {}, func(err error) bool { return strings.Contains(err.Error(), "no database at") }},
		{"a directory", func(path string) { os.Mkdir(path, 0o700) }, func(err error) bool {
			return strings.Contains(err.Error(), "is a directory")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "chatd.db")
			tc.make(path)
			before := fileState(t, dir)
			_, err := Open(path, Options{Schema: testSchema, Existing: true})
			if err == nil || !tc.want(err) {
				t.Fatalf("err = %v", err)
			}
			if after := fileState(t, dir); len(after) != len(before) || func() bool {
				for k, v := range before {
					if after[k] != v {
						return true
					}
				}
				return false
			}() {
				t.Fatalf("the refused open changed the directory:\nbefore %v\n after %v", before, after)
			}
		})
	}

	// A database at this chatd's version opens, and works.
	path := filepath.Join(t.TempDir(), "chatd.db")
	created, err := Open(path, Options{Schema: testSchema})
	if err != nil {
		t.Fatal(err)
	}
	created.Close()
	db, err := Open(path, Options{Schema: testSchema, Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.MigratedFrom() != current || db.SchemaVersion() != current {
		t.Fatalf("versions %d -> %d, want %d", db.MigratedFrom(), db.SchemaVersion(), current)
	}
	if _, _, err := db.CreateUser(t.Context(), NewUser{Handle: "alice", Name: "Alice"}); err != nil {
		t.Fatal(err)
	}
}

// The same rule on PostgreSQL: an empty database, an older schema and a
// newer one are refused and left as they were.
func TestOpenExistingOnPostgreSQL(t *testing.T) {
	url := pgtest.NewDatabase(t)
	conn, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tables := func() (n int) {
		t.Helper()
		if err := conn.QueryRow(`SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	version := func() (v int) {
		t.Helper()
		if err := conn.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	open := func() error {
		db, err := Open(url, Options{Schema: testSchema, PostgresSchema: testPostgresSchema, Existing: true})
		if err == nil {
			db.Close()
		}
		return err
	}

	if err := open(); err == nil || !strings.Contains(err.Error(), "empty, not a chatd database") {
		t.Fatalf("empty: err = %v", err)
	}
	if n := tables(); n != 0 {
		t.Fatalf("%d tables after the refused open", n)
	}

	i := strings.Index(testPostgresSchema, "\n-- Version 13 ")
	if i < 0 {
		t.Fatal("schema_postgres.sql has no section for version 13")
	}
	if _, err := conn.Exec(testPostgresSchema[:i]); err != nil {
		t.Fatal(err)
	}
	n := tables()
	var old *ErrSchemaTooOld
	if err := open(); !errors.As(err, &old) || old.Found != 12 {
		t.Fatalf("version 12: err = %v", err)
	}
	if v, m := version(), tables(); v != 12 || m != n {
		t.Fatalf("after the refused open: version %d, %d tables (was 12, %d)", v, m, n)
	}

	current, _ := schemaVersion(testSchema)
	if _, err := conn.Exec(`UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	var tooNew *ErrSchemaTooNew
	if err := open(); !errors.As(err, &tooNew) || tooNew.Found != 99 || tooNew.Supported != current {
		t.Fatalf("version 99: err = %v", err)
	}
}
