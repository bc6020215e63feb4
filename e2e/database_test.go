package e2e

import (
	"crypto/sha256"
	"database/sql"
	"os"
	"testing"

	_ "modernc.org/sqlite"
)

// The database file read directly, read-only, behind the server's back:
// what a refusal, a crash or a restart left there is what counts, not what
// the server says about it.

// queryValue is the one value query reads from a database file.
func queryValue[T any](t testing.TB, db, query string) T {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var v T
	if err := conn.QueryRow(query).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// countRows counts rows in a table of a database file (a table name may
// carry a WHERE clause).
func countRows(t testing.TB, db, table string) int {
	t.Helper()
	return queryValue[int](t, db, `SELECT count(*) FROM `+table)
}

// integrityCheck is what SQLite's integrity check says of a database file:
// "ok", or what is wrong.
func integrityCheck(t testing.TB, db string) string {
	t.Helper()
	return queryValue[string](t, db, "PRAGMA integrity_check")
}

// sqliteFile writes a SQLite database at path, running stmts in it.
func sqliteFile(t testing.TB, path string, stmts ...string) {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, s := range stmts {
		if _, err := conn.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// fileDigest is the SHA-256 of a file, to show that a refused command left
// it as it was.
func fileDigest(t testing.TB, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
