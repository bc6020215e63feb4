package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// A new database runs schema.sql whole: it is always the whole current
// schema. An older database is upgraded from the same file: the objects added
// in version N follow a line "-- Version N ..." near its end, so the text from
// that line to the next such line (or to the final PRAGMA) upgrades version
// N-1 to N. One text serves both paths, so they cannot drift apart (a test
// compares their results).
var versionLine = regexp.MustCompile(`(?m)^-- Version (\d+)\b.*$`)

// upgradeSteps returns the step that upgrades to each version v > 1.
func upgradeSteps(schema string) (map[int]string, error) {
	end := userVersionLine.FindAllStringIndex(schema, -1)
	if len(end) == 0 {
		return nil, errors.New("schema has no PRAGMA user_version line")
	}
	steps := versionSections(schema, end[len(end)-1][0])
	for v, step := range steps {
		steps[v] = step + fmt.Sprintf("\nPRAGMA user_version = %d;\n", v)
	}
	return steps, nil
}

// versionSections cuts schema[:end] at its "-- Version N" lines: the text
// of each, up to the next one or to end, by N.
func versionSections(schema string, end int) map[int]string {
	sections := map[int]string{}
	marks := versionLine.FindAllStringSubmatchIndex(schema[:end], -1)
	for i, m := range marks {
		v, _ := strconv.Atoi(schema[m[2]:m[3]])
		stop := end
		if i+1 < len(marks) {
			stop = marks[i+1][0]
		}
		sections[v] = schema[m[0]:stop]
	}
	return sections
}

var userVersionLine = regexp.MustCompile(`(?im)^\s*PRAGMA\s+user_version\s*=\s*(\d+)\s*;`)

// SchemaVersionOf reads the version a schema text creates: its last
// "PRAGMA user_version" line.
func SchemaVersionOf(schema string) (int, error) { return schemaVersion(schema) }

// schemaVersion reads the target version from the last "PRAGMA user_version"
// line of schema.sql.
func schemaVersion(schema string) (int, error) {
	m := userVersionLine.FindAllStringSubmatch(schema, -1)
	if len(m) == 0 {
		return 0, errors.New("schema has no PRAGMA user_version line")
	}
	v, err := strconv.Atoi(m[len(m)-1][1])
	if err != nil || v < 1 {
		return 0, fmt.Errorf("schema version %q is not a positive integer", m[len(m)-1][1])
	}
	return v, nil
}

// ErrSchemaTooNew is returned when the database was written by a newer chatd.
type ErrSchemaTooNew struct{ Found, Supported int }

func (e *ErrSchemaTooNew) Error() string {
	return fmt.Sprintf("the database is at schema version %d but this chatd supports up to version %d; upgrade chatd (the database was not changed)", e.Found, e.Supported)
}

// ErrSchemaTooOld is returned, when the database is opened as it is
// (Options.Existing), for a database at an older schema version than this
// chatd's: only chatd migrate and chatd serve upgrade a schema.
type ErrSchemaTooOld struct{ Found, Needed int }

func (e *ErrSchemaTooOld) Error() string {
	return fmt.Sprintf("the database is at schema version %d but this chatd needs version %d; "+
		"upgrade it with chatd migrate, or use the chatd that serves it (the database was not changed)", e.Found, e.Needed)
}

// checkExisting refuses, for Options.Existing, a database found at version
// from (0: no chatd schema, holding other objects or not) that is not at
// target; what names it in the refusal ("file", "database"). A newer
// chatd's database and another program's are refused in decideMigration's
// words.
func checkExisting(from int, objects bool, target int, what string) error {
	switch {
	case from > target:
		return &ErrSchemaTooNew{Found: from, Supported: target}
	case from == 0 && objects:
		return fmt.Errorf("the %s holds tables but no chatd schema version; it is not a chatd database", what)
	case from == 0:
		return fmt.Errorf("the %s is empty, not a chatd database (chatd migrate or chatd serve creates one in it)", what)
	case from < target:
		return &ErrSchemaTooOld{Found: from, Needed: target}
	}
	return nil
}

// requireSchema checks, for Options.Existing, that the SQLite database is
// at version target, in a read transaction that writes nothing; a file it
// refuses is left as it was. A file at target is chatd's, and put in WAL
// mode if it is not yet (a no-op on a file chatd made). It returns the
// version found.
func requireSchema(conn *sql.DB, target int) (int, error) {
	ctx := context.Background()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	from, objects, err := sqliteFound(ctx, tx)
	_ = tx.Rollback()
	if err != nil {
		return 0, err
	}
	if err := checkExisting(from, objects, target, "file"); err != nil {
		return from, err
	}
	return from, walMode(ctx, conn)
}

// requirePostgresSchema checks, for Options.Existing, that the database is
// at version target, in a READ ONLY transaction: one it refuses is left as
// it was.
func (db *DB) requirePostgresSchema(schema string, target int) error {
	if err := checkPostgresSchema(schema, target); err != nil {
		return err
	}
	ctx := context.Background()
	tx, err := db.write.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	from, tables, err := postgresFound(ctx, tx)
	_ = tx.Rollback()
	if err != nil {
		return err
	}
	if err := checkExisting(from, tables, target, "database"); err != nil {
		return err
	}
	db.migratedFrom, db.version = from, target
	return ensureSecret(db.write, db.dialect.bind)
}

// rowQuerier is what reads one row: a connection, a pool or a transaction.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// userVersion reads the schema version a database file records in its
// header (0 for a file without chatd's schema).
func userVersion(ctx context.Context, q rowQuerier) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}

// sqliteFound reads what migrating a SQLite database depends on: its
// schema version and, when it has none, whether it holds anything.
func sqliteFound(ctx context.Context, q rowQuerier) (version int, objects bool, err error) {
	if version, err = userVersion(ctx, q); err != nil || version != 0 {
		return version, false, err
	}
	var n int
	err = q.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n)
	return 0, n > 0, err
}

// upgradeStep is the text that upgrades a database to version from the
// version before it.
type upgradeStep struct {
	version int
	sql     string
}

// migration is what migrating a database does to bring it to target:
// nothing, the whole schema (create), or the upgrade steps in order. It is
// decided once (decideMigration) from what the database holds; migrate and
// migratePostgres run it, PlanMigration describes it, so that a dry run
// lists exactly what the real one runs.
type migration struct {
	from, target int
	create       bool
	steps        []upgradeStep
}

// decideMigration decides the migration of a database found at version
// from (0: no chatd schema, holding other objects or not) to target, with
// upgrades, a backend's steps by version. A database of a newer chatd, or
// one that holds something else, is refused; what names it in the refusal
// ("file", "database").
func decideMigration(from int, objects bool, target int, upgrades map[int]string, what string) (migration, error) {
	m := migration{from: from, target: target}
	switch {
	case from > target:
		return m, &ErrSchemaTooNew{Found: from, Supported: target}
	case from == target:
	case from == 0 && objects:
		return m, fmt.Errorf("the %s holds tables but no chatd schema version; it is not a chatd database", what)
	case from == 0:
		m.create = true
	default:
		for v := from + 1; v <= target; v++ {
			step, ok := upgrades[v]
			if !ok {
				return m, fmt.Errorf("no upgrade step to schema version %d", v)
			}
			m.steps = append(m.steps, upgradeStep{version: v, sql: step})
		}
	}
	return m, nil
}

// run runs m in tx: the whole schema, or each upgrade step.
func (m migration) run(ctx context.Context, tx *sql.Tx, schema string) error {
	if m.create {
		if _, err := tx.ExecContext(ctx, schema); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	for _, step := range m.steps {
		if _, err := tx.ExecContext(ctx, step.sql); err != nil {
			return fmt.Errorf("upgrade to schema version %d: %w", step.version, err)
		}
	}
	return nil
}

// migrate brings the database to target inside one write transaction, so two
// processes starting at once cannot both upgrade, and a failed upgrade leaves
// the file as it was. A file it refuses is left as it was too: the refusal
// comes from a read transaction, before the file is switched to WAL, a
// change SQLite records in the file and cannot make inside a transaction.
// It returns the version found.
func migrate(conn *sql.DB, schema string, target int) (from int, err error) {
	ctx := context.Background()
	upgrades, err := upgradeSteps(schema)
	if err != nil {
		return 0, err
	}
	if m, err := readMigration(ctx, conn, target, upgrades); err != nil {
		return m.from, err
	}
	if err := walMode(ctx, conn); err != nil {
		return 0, err
	}
	tx, err := conn.BeginTx(ctx, nil) // BEGIN IMMEDIATE
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	// Decided again under the write lock: another process may have
	// migrated the file since it was read.
	m, err := sqliteMigration(ctx, tx, target, upgrades)
	if err != nil {
		return m.from, err
	}
	if err = m.run(ctx, tx, schema); err != nil {
		return m.from, err
	}
	got, err := userVersion(ctx, tx)
	if err != nil {
		return m.from, err
	}
	if got != target {
		return m.from, fmt.Errorf("schema ended at version %d, want %d", got, target)
	}
	return m.from, tx.Commit()
}

// readMigration decides the migration of the file in a read transaction,
// which writes nothing to it (a read-only transaction is a plain BEGIN, not
// the DSN's BEGIN IMMEDIATE).
func readMigration(ctx context.Context, conn *sql.DB, target int, upgrades map[int]string) (migration, error) {
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return migration{}, err
	}
	defer tx.Rollback()
	return sqliteMigration(ctx, tx, target, upgrades)
}

// sqliteMigration decides the migration of the SQLite file q reads.
func sqliteMigration(ctx context.Context, q rowQuerier, target int, upgrades map[int]string) (migration, error) {
	from, objects, err := sqliteFound(ctx, q)
	if err != nil {
		return migration{}, err
	}
	return decideMigration(from, objects, target, upgrades, "file")
}

// walMode switches the file to WAL, the mode every connection of the store
// expects (doc.go); the file keeps it, so a connection the pool reopens
// finds it. It is a no-op on a file already in WAL.
func walMode(ctx context.Context, conn *sql.DB) error {
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("switch to WAL: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("the file stays in journal mode %q: SQLite cannot put it in WAL mode here", mode)
	}
	return nil
}

// secretName is the settings row holding the server secret, from which the
// token-signing and cursor-signing keys are derived.
const secretName = "server_secret"

func ensureSecret(conn *sql.DB, bind func(string) string) error {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	_, err := conn.Exec(bind("INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"), secretName, secret)
	return err
}

// ServerSecret returns the 32-byte secret generated when the database was
// created. Keys derived from it sign bearer tokens and paging cursors, so
// they stay valid across restarts and travel with a backup.
func (db *DB) ServerSecret(ctx context.Context) ([]byte, error) {
	var secret []byte
	err := db.queryRow(ctx, "SELECT value FROM settings WHERE name = ?", secretName).Scan(&secret)
	if err != nil {
		return nil, fmt.Errorf("read server secret: %w", err)
	}
	if len(secret) < 32 {
		return nil, errors.New("server secret is damaged")
	}
	return secret, nil
}
