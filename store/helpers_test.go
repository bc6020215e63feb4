package store

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
)

var testSchema = func() string {
	b, err := os.ReadFile("../schema.sql")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// testBackend is the database the store's tests run on: SQLite, or
// PostgreSQL when CHATD_TEST_BACKEND=postgres (a throwaway cluster of
// internal/pgtest).
var testBackend = os.Getenv("CHATD_TEST_BACKEND")

// postgresFor holds the PostgreSQL database that stands for each SQLite
// path a test opened, so that a test reopening a path reopens its database.
var postgresFor sync.Map

// testLocation is where the test database at path lives on the backend
// under test: path itself, or a PostgreSQL database of its own.
func testLocation(t testing.TB, path string) string {
	if testBackend != "postgres" || IsDatabaseURL(path) {
		return path
	}
	if url, ok := postgresFor.Load(path); ok {
		return url.(string)
	}
	url := pgtest.NewDatabase(t)
	postgresFor.Store(path, url)
	return url
}

// sqliteOnly skips a test of SQLite's own machinery (the WAL and its
// checkpoints, files of older schema versions, query plans) when the suite
// runs on PostgreSQL.
func sqliteOnly(t testing.TB) {
	t.Helper()
	if testBackend == "postgres" {
		t.Skip("a test of SQLite's own machinery")
	}
}

// openSQLiteDB opens a fresh SQLite database whatever the backend under
// test, for tests that compare the two.
func openSQLiteDB(t testing.TB) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "chatd.db"), Options{Schema: testSchema,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openTestDB opens a fresh database in a temp directory and closes it when
// the test ends.
func openTestDB(t testing.TB, opts Options) *DB {
	t.Helper()
	return openTestDBAt(t, filepath.Join(t.TempDir(), "chatd.db"), opts)
}

func openTestDBAt(t testing.TB, path string, opts Options) *DB {
	t.Helper()
	opts.Schema, opts.PostgresSchema = testSchema, testPostgresSchema
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	db, err := Open(testLocation(t, path), opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rawCount counts rows with a separate connection, bypassing the store.
func rawCount(t testing.TB, db *DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.read.QueryRow(db.dialect.bind(query), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// waitFor polls cond until it holds; it fails the test after a generous
// deadline (a hung writer), never as a timing assertion.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// blockWriter occupies the writer with a job that waits for release, so a
// test can fill the queue deterministically.
func blockWriter(t testing.TB, db *DB) (release func()) {
	t.Helper()
	started, gate := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.Write(context.Background(), func(*Tx) error { close(started); <-gate; return nil })
	}()
	<-started
	return func() {
		close(gate)
		if err := <-done; err != nil {
			t.Errorf("gate job: %v", err)
		}
	}
}

// rawExec runs a statement through the writer, for the states no store
// function writes and the tables only a test has.
func rawExec(t testing.TB, db *DB, query string, args ...any) {
	t.Helper()
	err := db.Write(context.Background(), func(tx *Tx) error {
		_, err := tx.Exec(query, args...)
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// openTableDB opens a test database with the table t (k, v) that the
// writer's tests write their rows to (see insertRow).
func openTableDB(t testing.TB, opts Options) *DB {
	t.Helper()
	db := openTestDB(t, opts)
	rawExec(t, db, `CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v INTEGER)`)
	return db
}

// queueRows writes rows 0 to n-1 at once behind a writer that blockWriter
// holds, and returns when all n wait in the queue; wait waits for the
// writes, failing the test if any of them failed.
func queueRows(t testing.TB, db *DB, n int) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			if err := db.Write(context.Background(), insertRow(fmt.Sprint(i), i)); err != nil {
				t.Errorf("queued write %d: %v", i, err)
			}
		})
	}
	waitFor(t, "writes to queue", func() bool { return db.WriterStats().QueueDepth == n })
	return wg.Wait
}

func insertRow(k string, v int) func(*Tx) error {
	return func(tx *Tx) error {
		_, err := tx.Exec(`INSERT INTO t (k, v) VALUES (?, ?)`, k, v)
		return err
	}
}
