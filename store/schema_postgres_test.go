package store

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/chatd/chatd/internal/pgtest"
)

var testPostgresSchema = func() string {
	b, err := os.ReadFile("../schema_postgres.sql")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// openPostgresSchema is a fresh PostgreSQL database with
// schema_postgres.sql applied, through pgx's database/sql driver.
func openPostgresSchema(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(testPostgresSchema); err != nil {
		t.Fatalf("schema_postgres.sql: %v", err)
	}
	return db
}

// column is what the two schemas must agree on about a column, its type
// named as PostgreSQL names it.
type column struct {
	Name, Type string
	NotNull    bool
}

// schemaShape is a schema's tables, each with its columns in order, and
// its index names, sorted. Indexes that only back a PRIMARY KEY or UNIQUE
// constraint are left out: each database names those its own way.
type schemaShape struct {
	Tables  map[string][]column
	Indexes []string
}

func TestSchemaPostgresMatchesSQLite(t *testing.T) {
	pg := openPostgresSchema(t)
	lite := openSQLiteDB(t)
	want := sqliteShape(t, lite.read)
	// What PostgreSQL has and SQLite has not: full-text search's own columns
	// and indexes (SQLite keeps its FTS5 tables apart, left out of its
	// shape), the version, which SQLite keeps in its file's header, and the
	// changes other nodes read (a single SQLite server has no other nodes).
	want.Tables["messages"] = append(want.Tables["messages"], column{"search", "tsvector", false})
	want.Tables["memories"] = append(want.Tables["memories"], column{"search", "tsvector", false})
	want.Tables["schema_version"] = []column{{"version", "bigint", true}}
	want.Tables["cluster_changes"] = []column{{"seq", "bigint", true}, {"origin", "text", true}, {"at", "bigint", true}, {"body", "text", true}}
	want.Indexes = slices.Sorted(slices.Values(append(want.Indexes, "messages_search", "memories_search", "cluster_changes_at")))
	got := postgresShape(t, pg)

	for _, name := range slices.Sorted(maps.Keys(want.Tables)) {
		if !slices.Equal(got.Tables[name], want.Tables[name]) {
			t.Errorf("table %s:\n  PostgreSQL %v\n  want       %v", name, got.Tables[name], want.Tables[name])
		}
	}
	for name := range got.Tables {
		if _, ok := want.Tables[name]; !ok {
			t.Errorf("table %s is in PostgreSQL only", name)
		}
	}
	if !slices.Equal(got.Indexes, want.Indexes) {
		t.Errorf("indexes:\n  PostgreSQL %v\n  want       %v", got.Indexes, want.Indexes)
	}
}

func TestSchemaPostgresComparesTextBytewise(t *testing.T) {
	others := queryColumn[string](t, openPostgresSchema(t), `SELECT c.relname || '.' || a.attname || ' ' || co.collname
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_collation co ON co.oid = a.attcollation
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND a.attnum > 0 AND co.collname != 'C'`)
	if len(others) > 0 {
		t.Errorf("text columns not COLLATE \"C\": %v", others)
	}
}

func TestSchemaPostgresVersionIsSQLites(t *testing.T) {
	want, err := SchemaVersionOf(testSchema)
	if err != nil {
		t.Fatal(err)
	}
	versions := queryColumn[int](t, openPostgresSchema(t), `SELECT version FROM schema_version`)
	if !slices.Equal(versions, []int{want}) {
		t.Errorf("schema_version holds %v, want [%d] as schema.sql", versions, want)
	}
	if got, err := userVersion(context.Background(), openSQLiteDB(t).read); got != want || err != nil {
		t.Errorf("a new SQLite database is at version %d (%v), want %d", got, err, want)
	}
}

// TestSchemaPostgresRefusesWhatSQLiteRefuses runs the same statements on
// both databases in turn: each must be accepted by both or refused by both.
// Then it reads PostgreSQL's rows back as chatd would: case-insensitive
// columns and the search column.
func TestSchemaPostgresRefusesWhatSQLiteRefuses(t *testing.T) {
	const (
		org     = `INSERT INTO organizations (id, name, inserted_at) VALUES `
		person  = `INSERT INTO users (id, organization_id, handle, email, first_name, role, inserted_at, updated_at) VALUES `
		room    = `INSERT INTO rooms (id, organization_id, creator_id, creator_type, quota_owner_id, inserted_at, updated_at) VALUES `
		message = `INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type, content, metadata,
			inserted_at, updated_at) VALUES `
		agent = `INSERT INTO agents (id, owner_id, organization_id, slug, handle, name, tags, inserted_at, updated_at) VALUES `
	)
	steps := []struct {
		what, sql string
		sqlstate  string // PostgreSQL's, for a refusal
	}{
		{"an organization", org + `('o1', 'Acme', 0)`, ""},
		{"its name in other case", org + `('o2', 'ACME', 0)`, "23505"},
		{"a person", person + `('u1', 'o1', 'Alice', 'alice@example.com', 'Alice', 'user', 0, 0)`, ""},
		{"their handle in other case", person + `('u2', 'o1', 'aLICE', NULL, 'A', 'user', 0, 0)`, "23505"},
		{"their email in other case", person + `('u3', 'o1', 'alice2', 'Alice@Example.COM', 'A', 'user', 0, 0)`, "23505"},
		{"a handle with a non-ASCII letter", person + `('u4', 'o1', 'émile', NULL, 'Émile', 'user', 0, 0)`, ""},
		{"the same in other case: only ASCII folds", person + `('u5', 'o1', 'Émile', NULL, 'Émile', 'user', 0, 0)`, ""},
		{"a room", room + `('r1', 'o1', 'u1', 'User', 'u1', 0, 0)`, ""},
		{"a message with JSON metadata", message + `('m1', 'r1', 'u1', 'User', 'Alice', 'text', 'Café?', '{"a": [1]}', 0, 0)`, ""},
		{"metadata that is not JSON", message + `('m2', 'r1', 'u1', 'User', 'Alice', 'text', 'hi', '{"a": [1}', 0, 0)`, "23514"},
		{"an agent with tags", agent + `('a1', 'u1', 'o1', 'helper', 'Alice/helper', 'Helper', '["x"]', 0, 0)`, ""},
		{"its handle in other case", agent + `('a2', 'u1', 'o1', 'helper2', 'alice/HELPER', 'Helper', '[]', 0, 0)`, "23505"},
		{"tags that are JSON but no array", agent + `('a3', 'u1', 'o1', 'h3', 'Alice/h3', 'H', '{"x": 1}', 0, 0)`, "23514"},
		{"tags that are not JSON", agent + `('a4', 'u1', 'o1', 'h4', 'Alice/h4', 'H', '[x]', 0, 0)`, "23514"},
	}
	ctx := context.Background()
	pg, lite := openPostgresSchema(t), openSQLiteDB(t)
	for _, s := range steps {
		_, pgErr := pg.Exec(s.sql)
		liteErr := lite.Write(ctx, func(tx *Tx) error { _, err := tx.Exec(s.sql); return err })
		var pgError *pgconn.PgError
		switch {
		case (pgErr == nil) != (liteErr == nil):
			t.Errorf("%s: PostgreSQL %v, SQLite %v", s.what, pgErr, liteErr)
		case s.sqlstate == "" && pgErr != nil:
			t.Errorf("%s: refused by both: %v", s.what, pgErr)
		case s.sqlstate != "" && (!errors.As(pgErr, &pgError) || pgError.Code != s.sqlstate):
			t.Errorf("%s: PostgreSQL answered %v, want SQLSTATE %s", s.what, pgErr, s.sqlstate)
		}
	}

	// Case-insensitive columns (citext) read as Go strings and take strings.
	var handle string
	if err := pg.QueryRow(`SELECT handle FROM users WHERE handle = $1`, "ALICE").Scan(&handle); err != nil || handle != "Alice" {
		t.Errorf("handle = 'ALICE': %q, %v", handle, err)
	}
	// Search folds ASCII case, and accents where unaccent is installed.
	var term string
	if err := pg.QueryRow(`SELECT CASE WHEN EXISTS (SELECT FROM pg_extension WHERE extname = 'unaccent')
		THEN 'CAFE' ELSE 'CAFé' END`).Scan(&term); err != nil {
		t.Fatal(err)
	}
	var found int
	err := pg.QueryRow(`SELECT count(*) FROM messages WHERE search @@ to_tsquery('simple', chatd_search_text($1))`, term).Scan(&found)
	if err != nil || found != 1 {
		t.Errorf("searching %q found %d messages (%v), want 'Café?'", term, found, err)
	}
}

// sqliteShape reads the shape of the schema of a SQLite database, without
// the search indexes' tables (FTS5's and its queue). Columns of a PRIMARY
// KEY are NOT NULL, as in every STRICT table; COLLATE NOCASE text reads as
// citext, what PostgreSQL has in its place.
func sqliteShape(t *testing.T, db *sql.DB) schemaShape {
	t.Helper()
	rows, err := db.Query(`SELECT m.name, m.sql, c.name, c.type, c."notnull" OR c.pk > 0
		FROM sqlite_schema m, pragma_table_info(m.name) c
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name NOT LIKE '%_fts' AND m.name NOT LIKE '%_fts_%'
		ORDER BY m.name, c.cid`)
	if err != nil {
		t.Fatal(err)
	}
	s := schemaShape{Tables: map[string][]column{}}
	types := map[string]string{"INTEGER": "bigint", "TEXT": "text", "BLOB": "bytea", "REAL": "double precision"}
	defer rows.Close()
	for rows.Next() {
		var table, create string
		var c column
		if err := rows.Scan(&table, &create, &c.Name, &c.Type, &c.NotNull); err != nil {
			t.Fatal(err)
		}
		if pg, ok := types[c.Type]; ok {
			c.Type = pg
		}
		if c.Type == "text" && nocaseColumn(create, c.Name) {
			c.Type = "citext"
		}
		s.Tables[table] = append(s.Tables[table], c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	s.Indexes = queryColumn[string](t, db, `SELECT name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL
		AND tbl_name NOT LIKE '%_fts' AND tbl_name NOT LIKE '%_fts_%' ORDER BY name`)
	return s
}

// nocaseColumn says whether the CREATE TABLE statement declares column
// COLLATE NOCASE (SQLite keeps no other record of a column's collation).
func nocaseColumn(create, column string) bool {
	return regexp.MustCompile(`(?i)[(,]\s*` + regexp.QuoteMeta(column) + `\s+TEXT\b[^,]*\bCOLLATE\s+NOCASE\b`).MatchString(create)
}

// postgresShape reads the shape of the schema of a PostgreSQL database.
func postgresShape(t *testing.T, db *sql.DB) schemaShape {
	t.Helper()
	rows, err := db.Query(`SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
		FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY c.relname, a.attnum`)
	if err != nil {
		t.Fatal(err)
	}
	s := schemaShape{Tables: map[string][]column{}}
	defer rows.Close()
	for rows.Next() {
		var table string
		var c column
		if err := rows.Scan(&table, &c.Name, &c.Type, &c.NotNull); err != nil {
			t.Fatal(err)
		}
		s.Tables[table] = append(s.Tables[table], c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	s.Indexes = queryColumn[string](t, db, `SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
		WHERE i.relnamespace = current_schema()::regnamespace
		AND NOT EXISTS (SELECT FROM pg_constraint k WHERE k.conindid = x.indexrelid AND k.contype IN ('p', 'u'))
		ORDER BY i.relname COLLATE "C"`)
	return s
}

// queryColumn is the one column of every row the query answers.
func queryColumn[T any](t *testing.T, db *sql.DB, query string) []T {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	values, err := scanAll(rows, func(row interface{ Scan(...any) error }) (T, error) {
		var v T
		err := row.Scan(&v)
		return v, err
	})
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return values
}
