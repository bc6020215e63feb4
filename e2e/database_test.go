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

// countRows counts rows in a table of a database file (a table name may
// carry a WHERE clause).
func countRows(t testing.TB, db, table string) int {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// integrityCheck is what SQLite's integrity check says of a database file:
// "ok", or what is wrong.
func integrityCheck(t testing.TB, db string) string {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var check string
	if err := conn.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil {
		t.Fatal(err)
	}
	return check
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
