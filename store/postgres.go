package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// On PostgreSQL the store keeps the shape it has on SQLite: one writer
// goroutine with one connection that group-commits every write, and a pool
// of connections for reads. Several chatd processes may share one
// PostgreSQL database; their writers take turns through one advisory lock
// (postgresDialect.begin), so the rules SQLite's single writer keeps (quotas,
// attempt numbers, the order of a board's history, message numbers that
// grow in commit order) hold across all of them.

// IsDatabaseURL reports whether location names a PostgreSQL database
// (postgres:// or postgresql://) rather than a SQLite file.
func IsDatabaseURL(location string) bool {
	return strings.HasPrefix(location, "postgres://") || strings.HasPrefix(location, "postgresql://")
}

// RedactedURL is location with any password in it replaced, for logs and
// messages: the one in its user part, and those libpq reads from its query
// (password, and sslpassword for the client key).
func RedactedURL(location string) string {
	u, err := url.Parse(location)
	if err != nil {
		return "postgres://…"
	}
	if q := u.Query(); q.Has("password") || q.Has("sslpassword") {
		for _, k := range []string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// openPostgres takes db from a URL to a running database: the write
// connection (which creates the schema, or checks it, before anything else
// reads it), the read pool, the writer, the listener for other processes'
// writes.
func (db *DB) openPostgres(location string, opts Options, target int) error {
	dsn := dsns{driver: db.dialect.driver, write: location, read: location}
	if err := db.openWriteConn(dsn); err != nil {
		return err
	}
	migrate := db.migratePostgres
	if opts.Existing {
		migrate = db.requirePostgresSchema
	}
	if err := migrate(opts.PostgresSchema, target); err != nil {
		return fmt.Errorf("database %s: %w", RedactedURL(location), err)
	}
	if err := db.openReadPool(dsn, opts.ReadConns); err != nil {
		return err
	}
	// The pool's one connection is the writer's, for the store's life.
	var ownPID uint32
	if err := db.write.QueryRow(`SELECT pg_backend_pid()`).Scan(&ownPID); err != nil {
		return err
	}
	if err := db.startWriter(opts); err != nil {
		return err
	}
	f, err := newFollower(db, strconv.FormatUint(uint64(ownPID), 10))
	if err != nil {
		return err
	}
	db.listenForOtherWriters(location, ownPID, f)
	return nil
}

// migratePostgres creates the schema in an empty database, or checks that
// the database's is the one this chatd knows. Writers of other nodes wait
// for it (it holds their lock), so two nodes that start at once create the
// schema once.
func (db *DB) migratePostgres(schema string, target int) (err error) {
	if err = checkPostgresSchema(schema, target); err != nil {
		return err
	}
	ctx := context.Background()
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err = tx.ExecContext(ctx, postgresWriteLock); err != nil {
		return err
	}
	from, tables, err := postgresFound(ctx, tx)
	if err != nil {
		return err
	}
	m, err := decideMigration(from, tables, target, postgresUpgrades(schema), "database")
	if err != nil {
		return err
	}
	if err = m.run(ctx, tx, schema); err != nil {
		return err
	}
	got, err := postgresVersionIn(ctx, tx)
	if err != nil {
		return err
	}
	if got != target {
		return fmt.Errorf("schema ended at version %d, want %d", got, target)
	}
	if err = tx.Commit(); err != nil {
		return err
	}
	db.migratedFrom, db.version = from, target
	return ensureSecret(db.write, db.dialect.bind)
}

// postgresVersionIn reads the schema version of the database tx is in: 0
// when it has no chatd schema.
func postgresVersionIn(ctx context.Context, tx *sql.Tx) (int, error) {
	var present bool
	if err := tx.QueryRowContext(ctx, `SELECT to_regclass('schema_version') IS NOT NULL`).Scan(&present); err != nil || !present {
		return 0, err
	}
	var v int
	err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	return v, err
}

// checkPostgresSchema checks that schema_postgres.sql creates the version
// schema.sql does, target.
func checkPostgresSchema(schema string, target int) error {
	version, err := postgresSchemaVersion(schema)
	if err != nil {
		return err
	}
	if version != target {
		return fmt.Errorf("the PostgreSQL schema is at version %d, the SQLite one at %d", version, target)
	}
	return nil
}

// postgresFound reads what migrating a PostgreSQL database depends on:
// its schema version and, when it has none, whether it holds tables.
func postgresFound(ctx context.Context, tx *sql.Tx) (version int, tables bool, err error) {
	if version, err = postgresVersionIn(ctx, tx); err != nil || version != 0 {
		return version, false, err
	}
	var n int
	err = tx.QueryRowContext(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&n)
	return 0, n > 0, err
}

// postgresUpgrades are the steps of schema_postgres.sql by version: its
// "-- Version N" sections, each of which sets the version row itself.
func postgresUpgrades(schema string) map[int]string { return versionSections(schema, len(schema)) }

// postgresVersionLine is where schema_postgres.sql sets its version: the
// first one's INSERT, and each later one's UPDATE.
var postgresVersionLine = regexp.MustCompile(`(?im)^\s*(?:INSERT\s+INTO\s+schema_version\s*\(version\)\s*VALUES\s*\(|UPDATE\s+schema_version\s+SET\s+version\s*=\s*)(\d+)\)?\s*;`)

// postgresSchemaVersion reads the version schema_postgres.sql creates: the
// last one it sets.
func postgresSchemaVersion(schema string) (int, error) {
	m := postgresVersionLine.FindAllStringSubmatch(schema, -1)
	if len(m) == 0 {
		return 0, errors.New("the PostgreSQL schema has no schema_version line")
	}
	return strconv.Atoi(m[len(m)-1][1])
}

// postgresError returns err's PostgreSQL error, if it is one.
func postgresError(err error) (*pgconn.PgError, bool) {
	var pe *pgconn.PgError
	ok := errors.As(err, &pe)
	return pe, ok
}
