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

// migrate brings the database to target inside one write transaction, so two
// processes starting at once cannot both upgrade, and a failed upgrade leaves
// the file as it was. It returns the version found.
// userVersion reads the schema version a database file records in its
// header (0 for a file without chatd's schema).
func userVersion(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}

func migrate(conn *sql.DB, schema string, target int) (from int, err error) {
	ctx := context.Background()
	tx, err := conn.BeginTx(ctx, nil) // BEGIN IMMEDIATE
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if from, err = userVersion(ctx, tx); err != nil {
		return 0, err
	}
	switch {
	case from > target:
		return from, &ErrSchemaTooNew{Found: from, Supported: target}
	case from == target:
		return from, tx.Commit()
	case from == 0:
		var objects int
		if err = tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&objects); err != nil {
			return 0, err
		}
		if objects > 0 {
			return 0, errors.New("the file holds tables but no chatd schema version; it is not a chatd database")
		}
		if _, err = tx.ExecContext(ctx, schema); err != nil {
			return 0, fmt.Errorf("create schema: %w", err)
		}
	default:
		var upgrades map[int]string
		if upgrades, err = upgradeSteps(schema); err != nil {
			return from, err
		}
		for v := from + 1; v <= target; v++ {
			step, ok := upgrades[v]
			if !ok {
				return from, fmt.Errorf("no upgrade step to schema version %d", v)
			}
			if _, err = tx.ExecContext(ctx, step); err != nil {
				return from, fmt.Errorf("upgrade to schema version %d: %w", v, err)
			}
		}
	}
	got, err := userVersion(ctx, tx)
	if err != nil {
		return from, err
	}
	if got != target {
		return from, fmt.Errorf("schema ended at version %d, want %d", got, target)
	}
	return from, tx.Commit()
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
