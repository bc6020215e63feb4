package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestPostgresDatabasesAreIndependent(t *testing.T) {
	ctx := context.Background()
	a, b := connect(t, NewDatabase(t)), connect(t, NewDatabase(t))
	if _, err := a.Exec(ctx, `CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('in a')`); err != nil {
		t.Fatal(err)
	}
	var body string
	if err := a.QueryRow(ctx, `SELECT body FROM notes`).Scan(&body); err != nil || body != "in a" {
		t.Fatalf("a's row: %q, %v", body, err)
	}
	var table *string
	if err := b.QueryRow(ctx, `SELECT to_regclass('notes')::text`).Scan(&table); err != nil || table != nil {
		t.Fatalf("b sees a's table: %v, %v", table, err)
	}
}

func TestPostgresDatabaseIsUTF8WithTheCLocaleAndOwnedByANonSuperuser(t *testing.T) {
	var encoding, collate, ctype, role string
	var super bool
	err := connect(t, NewDatabase(t)).QueryRow(context.Background(), `SELECT pg_encoding_to_char(encoding), datcollate, datctype,
		current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
		FROM pg_database WHERE datname = current_database() AND datdba = (SELECT oid FROM pg_roles WHERE rolname = current_user)`).
		Scan(&encoding, &collate, &ctype, &role, &super)
	if err != nil {
		t.Fatal(err)
	}
	if encoding != "UTF8" || collate != "C" || ctype != "C" || role != appRole || super {
		t.Errorf("database: %s, collate %s, ctype %s, role %s, superuser %v", encoding, collate, ctype, role, super)
	}
}

func TestPostgresDatabaseIsDroppedWhenItsTestEnds(t *testing.T) {
	var name string
	t.Run("owner", func(t *testing.T) {
		conn := connect(t, NewDatabase(t)) // left open: the drop ends it
		if err := conn.QueryRow(context.Background(), `SELECT current_database()`).Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	var n int
	err := connect(t, NewDatabase(t)).QueryRow(context.Background(), `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n)
	if err != nil || n != 0 {
		t.Fatalf("%s still there: %d, %v", name, n, err)
	}
}

func TestPostgresFromCHATD_PG_BIN(t *testing.T) {
	bin, err := binDir()
	if err != nil {
		t.Skip(err)
	}
	t.Setenv("CHATD_PG_BIN", bin)
	if got, err := findBinDir(); got != bin || err != nil {
		t.Errorf("CHATD_PG_BIN=%s: found %q, %v", bin, got, err)
	}
	empty := t.TempDir()
	t.Setenv("CHATD_PG_BIN", empty)
	if got, err := findBinDir(); err == nil {
		t.Errorf("CHATD_PG_BIN=%s (empty): found %q", empty, got)
	}
	if !Available() {
		t.Error("Available is false with PostgreSQL found")
	}
}
