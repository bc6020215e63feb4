package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MigrationPlan is what migrating a database would do, read from the
// database without changing it (PlanMigration): chatd migrate --dry-run.
type MigrationPlan struct {
	// Database names the database: a SQLite file's absolute path, or a
	// PostgreSQL URL without its password.
	Database string
	// From is the schema version found (0: no database yet, or one without
	// a schema); To is the version migrating reaches.
	From, To int
	// Create says that migrating would create the whole schema, at version
	// To: in a new file, an empty one, or an empty PostgreSQL database.
	Create bool
	// Exists is false for a SQLite file that is not there yet: migrating
	// would create it, and its directory if need be.
	Exists bool
	// Steps are the upgrades migrating would run, in order and in one
	// transaction: to From+1, and so on up to To.
	Steps []MigrationStep
}

// MigrationStep is the upgrade to one schema version: what its statements
// create, alter or write, in the order they run. The statement that sets
// the schema version, which each step ends with, is not listed.
type MigrationStep struct {
	Version    int
	Statements []PlannedStatement
}

// PlannedStatement is one statement of an upgrade step, by its head: the
// object it creates or alters ("CREATE TABLE leases", "ALTER TABLE files
// ADD COLUMN expired_at", "CREATE INDEX files_expired ON files"), or the
// table whose rows it writes ("INSERT OR IGNORE INTO read_markers"), which
// Data marks.
type PlannedStatement struct {
	Head string
	Data bool
}

// PlanMigration reads what Open would do to the schema of the database at
// location (a SQLite file's path or a PostgreSQL URL, as Open takes) and
// changes nothing: no file or directory is created, a SQLite file is read
// through a read-only connection, a PostgreSQL database in a READ ONLY
// transaction. The plan is made of the same steps the migration runs
// (decideMigration), and a database that migrating refuses (a newer
// chatd's, or something else's) is refused with the same error. Only
// opts.Schema and, for a URL, opts.PostgresSchema are used.
func PlanMigration(ctx context.Context, location string, opts Options) (*MigrationPlan, error) {
	if strings.TrimSpace(location) == "" {
		return nil, errors.New("database path is empty")
	}
	target, err := schemaVersion(opts.Schema)
	if err != nil {
		return nil, err
	}
	if IsDatabaseURL(location) {
		plan, err := planPostgres(ctx, location, opts.PostgresSchema, target)
		if err != nil {
			return nil, fmt.Errorf("database %s: %w", RedactedURL(location), err)
		}
		return plan, nil
	}
	abs, err := filepath.Abs(location)
	if err != nil {
		return nil, err
	}
	plan, err := planSQLite(ctx, abs, opts.Schema, target)
	if err != nil {
		return nil, describeOpenError(abs, err)
	}
	return plan, nil
}

func planSQLite(ctx context.Context, path, schema string, target int) (*MigrationPlan, error) {
	upgrades, err := upgradeSteps(schema)
	if err != nil {
		return nil, err
	}
	exists := true
	var from int
	var objects bool
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		exists = false
	} else if err != nil {
		return nil, err
	} else if from, objects, err = sqliteFoundReadOnly(ctx, path); err != nil {
		return nil, err
	}
	m, err := decideMigration(from, objects, target, upgrades, "file")
	if err != nil {
		return nil, err
	}
	return m.plan(path, exists), nil
}

// sqliteFoundReadOnly reads sqliteFound from the file at path, creating
// nothing beside it. Opened read-only, a database in WAL mode that no
// process has open (so without its -wal file) gets a -wal and a -shm file
// that SQLite cannot remove when the connection closes, so such a file is
// read as immutable: without locks or WAL, which it does not need then. A
// process that opened it meanwhile shows by its -wal file, and the file is
// then read again, through that WAL.
func sqliteFoundReadOnly(ctx context.Context, path string) (version int, objects bool, err error) {
	alone := func() bool {
		for _, beside := range []string{"-wal", "-journal"} {
			if _, err := os.Lstat(path + beside); !errors.Is(err, fs.ErrNotExist) {
				return false
			}
		}
		return true
	}
	if alone() {
		version, objects, err = sqliteFoundIn(ctx, fileURI(path)+"?mode=ro&immutable=1&_pragma=query_only(1)")
		if alone() {
			return version, objects, err
		}
	}
	return sqliteFoundIn(ctx, fileURI(path)+fmt.Sprintf("?mode=ro&_pragma=busy_timeout(%d)&_pragma=query_only(1)", busyTimeout.Milliseconds()))
}

// sqliteFoundIn reads sqliteFound in one read-only transaction on dsn.
func sqliteFoundIn(ctx context.Context, dsn string) (version int, objects bool, err error) {
	conn, err := sql.Open("sqlite", dsn)
	if err != nil {
		return 0, false, err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback()
	return sqliteFound(ctx, tx)
}

func planPostgres(ctx context.Context, location, schema string, target int) (*MigrationPlan, error) {
	if err := checkPostgresSchema(schema, target); err != nil {
		return nil, err
	}
	conn, err := sql.Open(postgresDialect.driver, location)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	from, tables, err := postgresFound(ctx, tx)
	if err != nil {
		return nil, err
	}
	m, err := decideMigration(from, tables, target, postgresUpgrades(schema), "database")
	if err != nil {
		return nil, err
	}
	return m.plan(RedactedURL(location), true), nil
}

// plan describes m, migrating the database named database.
func (m migration) plan(database string, exists bool) *MigrationPlan {
	p := &MigrationPlan{Database: database, From: m.from, To: m.target, Create: m.create, Exists: exists}
	for _, step := range m.steps {
		s := MigrationStep{Version: step.version}
		for _, st := range splitStatements(step.sql) {
			if !st.setsVersion() {
				s.Statements = append(s.Statements, st.planned())
			}
		}
		p.Steps = append(p.Steps, s)
	}
	return p
}
