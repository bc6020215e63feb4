package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
)

// openPostgresStore opens the store on the PostgreSQL database at url.
func openPostgresStore(t *testing.T, url string) (*DB, error) {
	t.Helper()
	db, err := Open(url, Options{Schema: testSchema, PostgresSchema: testPostgresSchema,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		t.Cleanup(func() { db.Close() })
	}
	return db, err
}

// An empty database gets the schema once; opened again, it is as it was,
// server secret included.
func TestPostgresCreatesTheSchemaOnceAndReopens(t *testing.T) {
	url := pgtest.NewDatabase(t)
	target, _ := schemaVersion(testSchema)
	first, err := openPostgresStore(t, url)
	if err != nil {
		t.Fatal(err)
	}
	if first.MigratedFrom() != 0 || first.SchemaVersion() != target {
		t.Fatalf("created: from %d to %d, want 0 to %d", first.MigratedFrom(), first.SchemaVersion(), target)
	}
	secret, err := first.ServerSecret(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	first.Close()

	again, err := openPostgresStore(t, url)
	if err != nil {
		t.Fatal(err)
	}
	if again.MigratedFrom() != target {
		t.Fatalf("reopened from version %d, want %d", again.MigratedFrom(), target)
	}
	if s, err := again.ServerSecret(context.Background()); err != nil || !bytes.Equal(s, secret) {
		t.Fatalf("the server secret changed on reopening: %v", err)
	}
}

// A database holding something else, or a newer chatd's schema, is refused
// and left as it was.
func TestPostgresRefusesWhatIsNotItsSchema(t *testing.T) {
	t.Run("another application's tables", func(t *testing.T) {
		url := pgtest.NewDatabase(t)
		execOn(t, url, `CREATE TABLE invoices (id BIGINT PRIMARY KEY)`)
		if _, err := openPostgresStore(t, url); err == nil || !strings.Contains(err.Error(), "not a chatd database") {
			t.Fatalf("open: %v, want a refusal", err)
		}
		if n := countOn(t, url, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`); n != 1 {
			t.Fatalf("%d tables after the refusal, want the 1 that was there", n)
		}
	})
	t.Run("a newer schema", func(t *testing.T) {
		url := pgtest.NewDatabase(t)
		db, err := openPostgresStore(t, url)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		execOn(t, url, `UPDATE schema_version SET version = version + 1`)
		var tooNew *ErrSchemaTooNew
		if _, err := openPostgresStore(t, url); !errors.As(err, &tooNew) {
			t.Fatalf("open: %v, want ErrSchemaTooNew", err)
		}
	})
}

// Two stores on one database (two chatd nodes) each group-commit their own
// writes, and their transactions still take turns: read-modify-write
// updates from both lose nothing, as with SQLite's single writer.
func TestPostgresWritersOfTwoStoresTakeTurns(t *testing.T) {
	a, b := twoNodes(t)
	nodes := []*DB{a, b}
	rawExec(t, nodes[0], `CREATE TABLE counter (n BIGINT NOT NULL)`)
	rawExec(t, nodes[0], `INSERT INTO counter (n) VALUES (0)`)
	const perNode = 200
	var wg sync.WaitGroup
	for _, db := range nodes {
		for range perNode {
			wg.Go(func() {
				err := db.Write(context.Background(), func(tx *Tx) error {
					var n int
					if err := tx.QueryRow(`SELECT n FROM counter`).Scan(&n); err != nil {
						return err
					}
					_, err := tx.Exec(`UPDATE counter SET n = ?`, n+1)
					return err
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if n := rawCount(t, a, `SELECT n FROM counter`); n != 2*perNode {
		t.Fatalf("counter at %d after %d increments from two stores", n, 2*perNode)
	}
}

// execOn and countOn reach the database at url directly, not as a store.
func execOn(t *testing.T, url, query string) {
	t.Helper()
	conn := rawPostgres(t, url)
	if _, err := conn.Exec(query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func countOn(t *testing.T, url, query string) int {
	t.Helper()
	var n int
	if err := rawPostgres(t, url).QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func rawPostgres(t *testing.T, url string) *sql.DB {
	t.Helper()
	conn, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// A PostgreSQL database of every earlier version (12 was the first) is
// upgraded in place, keeping its rows, to the schema a fresh database gets.
func TestPostgresUpgradeFromEveryVersionMatchesAFreshDatabase(t *testing.T) {
	current, _ := schemaVersion(testSchema)
	fresh, err := sql.Open("pgx", pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := fresh.Exec(testPostgresSchema); err != nil {
		t.Fatal(err)
	}
	want := postgresShape(t, fresh)

	for v := firstPostgresVersion; v < current; v++ {
		url := pgtest.NewDatabase(t)
		execOn(t, url, postgresSchemaAsOf(t, v))
		execOn(t, url, `INSERT INTO organizations (id, name, inserted_at) VALUES ('0190a0a0-0000-7000-8000-000000000001', 'Old', 1)`)
		db, err := openPostgresStore(t, url)
		if err != nil {
			t.Fatalf("upgrade from %d: %v", v, err)
		}
		if db.MigratedFrom() != v || db.SchemaVersion() != current {
			t.Errorf("upgrade from %d: from %d to %d", v, db.MigratedFrom(), db.SchemaVersion())
		}
		var name string
		if err := db.read.QueryRow(`SELECT name FROM organizations`).Scan(&name); err != nil || name != "Old" {
			t.Errorf("upgrade from %d lost rows: %q %v", v, name, err)
		}
		db.Close()
		if got := postgresShape(t, rawPostgres(t, url)); !reflect.DeepEqual(got, want) {
			t.Errorf("upgrade from %d ends in another schema:\n got %v\nwant %v", v, got, want)
		}
	}
}

// firstPostgresVersion is the schema version of the first chatd that ran
// on PostgreSQL: no PostgreSQL database is older.
const firstPostgresVersion = 12

// postgresSchemaAsOf is schema_postgres.sql as version v created it.
func postgresSchemaAsOf(t *testing.T, v int) string {
	t.Helper()
	if i := strings.Index(testPostgresSchema, fmt.Sprintf("\n-- Version %d ", v+1)); i >= 0 {
		return testPostgresSchema[:i]
	}
	t.Fatalf("schema_postgres.sql has no version %d", v+1)
	return ""
}
