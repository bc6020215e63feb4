package store

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenCreatesSchemaOnceAndReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "dir", "chatd.db")
	db, err := Open(path, Options{Schema: testSchema})
	if err != nil {
		t.Fatal(err)
	}
	if db.MigratedFrom() != 0 || db.SchemaVersion() != 1 {
		t.Fatalf("from %d to %d, want 0 to 1", db.MigratedFrom(), db.SchemaVersion())
	}
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
	if db.MigratedFrom() != 1 {
		t.Fatalf("reopen migrated from %d, want 1 (nothing to do)", db.MigratedFrom())
	}
	again, _ := db.ServerSecret(t.Context())
	if string(again) != string(secret) {
		t.Fatal("the server secret changed on reopen")
	}
	var mode string
	if err := db.read.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q (%v), want wal", mode, err)
	}
}

func TestOpenRefusesANewerSchemaAndLeavesItAlone(t *testing.T) {
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
	if !errors.As(err, &tooNew) || tooNew.Found != 99 || tooNew.Supported != 1 {
		t.Fatalf("err = %v, want ErrSchemaTooNew{99, 1}", err)
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
