package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
)

// Moving a SQLite database to PostgreSQL (chatd move). The copy is made
// from what the two databases say about themselves, not from a list kept
// here: the tables and columns SQLite holds, the PostgreSQL schema the
// store creates, the foreign keys and sequences in PostgreSQL's catalogs.
// A table or column added to both schemas later is moved without a change
// here, and one that SQLite has and PostgreSQL lacks stops the move rather
// than being left behind.
//
// Everything on the PostgreSQL side happens in one transaction: creating
// the schema, copying, setting the sequences, checking the copy. A failure
// anywhere (or an interrupt) rolls it all back, leaving the database as
// empty as it was, so the move can simply be run again. The SQLite file is
// only read.

// MoveReport is what a move copied.
type MoveReport struct {
	// SchemaVersion is the schema version of both databases.
	SchemaVersion int
	// Tables are the tables copied, in the order they were (each after
	// the tables its foreign keys point to).
	Tables []MovedTable
	// PostgresOnly are the tables of the PostgreSQL schema that SQLite has
	// no counterpart of, left as the schema created them.
	PostgresOnly []string
	// NotMoved are the tables whose rows are the SQLite server's own
	// state rather than data, left empty (notMoved).
	NotMoved []string
	// Sequences are the identity columns moved past the largest value
	// copied into them, as "table.column".
	Sequences []string
	// Elapsed is how long the move took, checks included.
	Elapsed time.Duration
}

// MovedTable is one table's copy: its rows and the checksum both
// databases gave for them.
type MovedTable struct {
	Name     string
	Rows     int64
	Checksum string
}

// MoveProgress is reported as a move goes: a table's copy or check under
// way (Rows so far, every MoveProgressRows rows) or done.
type MoveProgress struct {
	// Stage is "copy" or "verify".
	Stage string
	Table string
	Rows  int64
	Done  bool
}

// MoveProgressRows is how many rows pass between two progress reports.
const MoveProgressRows = 100_000

// ErrTargetNotEmpty is returned by Move for a PostgreSQL database that
// holds tables.
var ErrTargetNotEmpty = errors.New("the PostgreSQL database is not empty")

// Move copies the chatd SQLite database at sqlitePath into the empty
// PostgreSQL database at url, and checks the copy. opts supplies the
// schemas (Schema and PostgresSchema); progress, if not nil, is told how
// the copy goes.
//
// It refuses, changing nothing, while a server holds the SQLite file's
// server lock (ErrServerRunning; the lock is held until Move returns, so
// none starts halfway), when the file's schema is not this chatd's
// version (an older one must be upgraded with chatd migrate first), and
// when the PostgreSQL database holds any table (ErrTargetNotEmpty). The
// SQLite file is read in one read transaction, so the copy is of one
// committed state even if a command writes to it meanwhile.
func Move(ctx context.Context, sqlitePath, url string, opts Options, progress func(MoveProgress)) (*MoveReport, error) {
	began := time.Now()
	if progress == nil {
		progress = func(MoveProgress) {}
	}
	version, err := schemaVersion(opts.Schema)
	if err != nil {
		return nil, err
	}
	if pv, err := postgresSchemaVersion(opts.PostgresSchema); err != nil {
		return nil, err
	} else if pv != version {
		return nil, fmt.Errorf("the PostgreSQL schema is at version %d, the SQLite one at %d", pv, version)
	}
	if !IsDatabaseURL(url) {
		return nil, errors.New("the target must be a PostgreSQL URL (postgres://user@host/database)")
	}
	path, err := filepath.Abs(sqlitePath)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no database at %s", path)
	}
	lock, err := LockServer(path)
	if err != nil {
		return nil, err
	}
	defer lock.Release()

	src, err := openSource(ctx, path, version)
	if err != nil {
		return nil, err
	}
	defer src.close()
	dst, err := openTarget(ctx, url)
	if err != nil {
		return nil, err
	}
	defer dst.close()

	m := &mover{src: src, dst: dst, progress: progress, report: &MoveReport{SchemaVersion: version}}
	if err := m.run(ctx, opts.PostgresSchema); err != nil {
		if errors.Is(err, ErrTargetNotEmpty) {
			return nil, err
		}
		return nil, fmt.Errorf("%w (nothing was committed: %s is left empty)", err, RedactedURL(url))
	}
	if err := dst.tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	m.report.Elapsed = time.Since(began)
	return m.report, nil
}

// moveSource is the SQLite file, read in one read transaction.
type moveSource struct {
	conn *sql.DB
	tx   *sql.Tx
}

// openSource opens the SQLite file read-only and checks that it is a chatd
// database at version.
func openSource(ctx context.Context, path string, version int) (*moveSource, error) {
	conn, err := openFile(path, readOnly)
	if err != nil {
		return nil, err
	}
	s := &moveSource{conn: conn}
	if s.tx, err = conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}); err != nil {
		s.close()
		return nil, describeOpenError(path, err)
	}
	found, err := userVersion(ctx, s.tx)
	if err != nil {
		s.close()
		return nil, describeOpenError(path, err)
	}
	switch {
	case found == 0:
		err = fmt.Errorf("%s is not a chatd database", path)
	case found < version:
		err = fmt.Errorf("%s is at schema version %d and this chatd's is %d: upgrade it first with chatd migrate --db %s, then move it",
			path, found, version, path)
	case found > version:
		err = fmt.Errorf("%s is at schema version %d, newer than this chatd's (%d); move it with a newer chatd", path, found, version)
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *moveSource) close() {
	if s.tx != nil {
		_ = s.tx.Rollback()
	}
	s.conn.Close()
}

// moveTarget is the PostgreSQL database, on one connection, in the
// transaction the whole move runs in.
type moveTarget struct {
	url  string
	pool *sql.DB
	conn *sql.Conn
	tx   *sql.Tx
}

// openTarget connects to url and begins the move's transaction, holding
// the writers' lock, so that a chatd starting on the database meanwhile
// waits for the move and then finds its schema complete.
func openTarget(ctx context.Context, url string) (*moveTarget, error) {
	t := &moveTarget{url: url}
	var err error
	if t.pool, err = sql.Open("pgx", url); err != nil {
		return nil, err
	}
	t.pool.SetMaxOpenConns(1)
	fail := func(err error) (*moveTarget, error) {
		t.close()
		return nil, fmt.Errorf("database %s: %w", RedactedURL(url), err)
	}
	if t.conn, err = t.pool.Conn(ctx); err != nil {
		return fail(err)
	}
	if t.tx, err = t.conn.BeginTx(ctx, nil); err != nil {
		return fail(err)
	}
	if _, err = t.tx.ExecContext(ctx, postgresWriteLock); err != nil {
		return fail(err)
	}
	return t, nil
}

// close rolls back whatever was not committed.
func (t *moveTarget) close() {
	if t.tx != nil {
		_ = t.tx.Rollback()
	}
	if t.conn != nil {
		t.conn.Close()
	}
	t.pool.Close()
}

// mover is one move under way.
type mover struct {
	src      *moveSource
	dst      *moveTarget
	progress func(MoveProgress)
	report   *MoveReport
}

// moveTable is a table to copy and the columns it shares.
type moveTable struct {
	name    string
	columns []moveColumn
	rows    int64
	sum     rowSum
}

// moveColumn is a column copied, with PostgreSQL's type for it.
type moveColumn struct {
	name   string
	pgType string // pg_type.typname: int8, text, citext, bytea, …
}

func (m *mover) run(ctx context.Context, schema string) error {
	if err := m.refuseNonEmpty(ctx); err != nil {
		return err
	}
	// The schema as migrate creates it in an empty database.
	if err := (migration{create: true}).run(ctx, m.dst.tx, schema); err != nil {
		return err
	}
	tables, err := m.plan(ctx)
	if err != nil {
		return err
	}
	// COPY needs pgx's own connection; the transaction begun through
	// database/sql is the server's state of that same connection, so what
	// pgx does here is in it.
	return m.dst.conn.Raw(func(driverConn any) error {
		pg := driverConn.(*stdlib.Conn).Conn()
		if err := registerCitext(ctx, pg); err != nil {
			return err
		}
		for _, t := range tables {
			if err := m.copy(ctx, pg, t); err != nil {
				return fmt.Errorf("copy %s: %w", t.name, err)
			}
		}
		if err := m.setSequences(ctx, pg); err != nil {
			return err
		}
		for _, t := range tables {
			if err := m.verify(ctx, pg, t); err != nil {
				return err
			}
			m.report.Tables = append(m.report.Tables, MovedTable{Name: t.name, Rows: t.rows, Checksum: t.sum.String()})
		}
		return nil
	})
}

// refuseNonEmpty refuses a database holding any table in its schema,
// naming them: the move adds to nothing.
func (m *mover) refuseNonEmpty(ctx context.Context) error {
	names, err := queryStrings(ctx, m.dst.tx, postgresDialect.tablesQuery)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return nil
	}
	if slices.Contains(names, "schema_version") {
		return fmt.Errorf("%w: %s already holds a chatd database; move into an empty database (createdb)",
			ErrTargetNotEmpty, RedactedURL(m.dst.url))
	}
	shown := names
	more := ""
	if len(shown) > 10 {
		shown, more = shown[:10], fmt.Sprintf(" and %d more", len(names)-10)
	}
	return fmt.Errorf("%w: %s holds the tables %s%s; move into an empty database (createdb)",
		ErrTargetNotEmpty, RedactedURL(m.dst.url), strings.Join(shown, ", "), more)
}

// notMoved are the tables a move leaves empty. The leases are held by the
// SQLite server's process, which no PostgreSQL node is: copied, a job's
// would keep every node from the job until it expired.
var notMoved = []string{"leases"}

// plan lists the tables to copy, in an order that satisfies PostgreSQL's
// foreign keys, with the columns each shares with PostgreSQL.
func (m *mover) plan(ctx context.Context) ([]*moveTable, error) {
	sqliteTables, err := queryStrings(ctx, m.src.tx, sqliteDialect.tablesQuery)
	if err != nil {
		return nil, err
	}
	pgTables, err := queryStrings(ctx, m.dst.tx, postgresDialect.tablesQuery)
	if err != nil {
		return nil, err
	}
	for _, name := range pgTables {
		if !slices.Contains(sqliteTables, name) {
			m.report.PostgresOnly = append(m.report.PostgresOnly, name)
		}
	}
	tables := map[string]*moveTable{}
	for _, name := range sqliteTables {
		if slices.Contains(notMoved, name) {
			m.report.NotMoved = append(m.report.NotMoved, name)
			continue
		}
		if !slices.Contains(pgTables, name) {
			return nil, fmt.Errorf("the PostgreSQL schema has no table %s, which the SQLite file has", name)
		}
		t := &moveTable{name: name}
		if t.columns, err = m.sharedColumns(ctx, name); err != nil {
			return nil, err
		}
		tables[name] = t
	}
	return m.foreignKeyOrder(ctx, tables)
}

// sharedColumns are the columns of the SQLite table, in its order, with
// PostgreSQL's type of each; PostgreSQL's generated columns (the search
// vectors) are left for it to compute.
func (m *mover) sharedColumns(ctx context.Context, table string) ([]moveColumn, error) {
	names, err := queryStrings(ctx, m.src.tx, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
	if err != nil {
		return nil, err
	}
	rows, err := m.dst.tx.QueryContext(ctx, `SELECT a.attname, t.typname, a.attgenerated <> ''
		FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = to_regclass(quote_ident($1)) AND a.attnum > 0 AND NOT a.attisdropped`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type pgColumn struct {
		typ       string
		generated bool
	}
	pg := map[string]pgColumn{}
	for rows.Next() {
		var name string
		var c pgColumn
		if err := rows.Scan(&name, &c.typ, &c.generated); err != nil {
			return nil, err
		}
		pg[name] = c
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var cols []moveColumn
	for _, name := range names {
		c, ok := pg[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("the PostgreSQL table %s has no column %s, which the SQLite file has", table, name)
		case c.generated:
			continue
		}
		cols = append(cols, moveColumn{name: name, pgType: c.typ})
	}
	return cols, nil
}

// foreignKeyOrder orders tables so that each comes after every table its
// foreign keys (in PostgreSQL's catalog, which checks them) point to; a
// table pointing to itself (a reply to a message) is fine, since
// PostgreSQL checks a COPY's rows against each other at its end. Ties go
// by name, so every move copies in the same order.
func (m *mover) foreignKeyOrder(ctx context.Context, tables map[string]*moveTable) ([]*moveTable, error) {
	rows, err := m.dst.tx.QueryContext(ctx, `SELECT c.relname, r.relname
		FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
		WHERE k.contype = 'f' AND c.relnamespace = current_schema()::regnamespace`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	needs := map[string]map[string]bool{}
	for rows.Next() {
		var from, to string
		if err := rows.Scan(&from, &to); err != nil {
			return nil, err
		}
		if from == to || tables[from] == nil || tables[to] == nil {
			continue
		}
		if needs[from] == nil {
			needs[from] = map[string]bool{}
		}
		needs[from][to] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	left := make([]string, 0, len(tables))
	for name := range tables {
		left = append(left, name)
	}
	slices.Sort(left)
	var order []*moveTable
	done := map[string]bool{}
	for len(left) > 0 {
		i := slices.IndexFunc(left, func(name string) bool {
			for to := range needs[name] {
				if !done[to] {
					return false
				}
			}
			return true
		})
		if i < 0 {
			return nil, fmt.Errorf("the foreign keys of the tables %s form a cycle; no order copies them", strings.Join(left, ", "))
		}
		done[left[i]] = true
		order = append(order, tables[left[i]])
		left = slices.Delete(left, i, i+1)
	}
	return order, nil
}

// registerCitext tells pgx that citext travels as text: COPY sends every
// value in binary, and pgx knows only the types it was told of. citext's
// binary form is text's.
func registerCitext(ctx context.Context, pg *pgx.Conn) error {
	var oid uint32
	if err := pg.QueryRow(ctx, `SELECT oid FROM pg_type WHERE typname = 'citext'`).Scan(&oid); errors.Is(err, pgx.ErrNoRows) {
		return nil
	} else if err != nil {
		return err
	}
	pg.TypeMap().RegisterType(&pgtype.Type{Name: "citext", OID: oid, Codec: pgtype.TextCodec{}})
	return nil
}

// copy streams the table from SQLite into PostgreSQL with COPY, summing
// the rows as SQLite gave them.
func (m *mover) copy(ctx context.Context, pg *pgx.Conn, t *moveTable) error {
	names := make([]string, len(t.columns))
	for i, c := range t.columns {
		names[i] = c.name
	}
	rows, err := m.src.tx.QueryContext(ctx, "SELECT "+quotedList(names)+" FROM "+quoteName(t.name))
	if err != nil {
		return err
	}
	defer rows.Close()
	s := &copySource{rows: rows, table: t, raw: make([]any, len(names)), out: make([]any, len(names)),
		report: func(n int64) { m.progress(MoveProgress{Stage: "copy", Table: t.name, Rows: n}) }}
	s.ptrs = make([]any, len(names))
	for i := range s.raw {
		s.ptrs[i] = &s.raw[i]
	}
	n, err := pg.CopyFrom(ctx, pgx.Identifier{t.name}, names, s)
	if pe, ok := postgresError(err); ok && pe.Where != "" {
		// Where names the row and column PostgreSQL refused.
		return fmt.Errorf("%w, at %s", err, pe.Where)
	}
	if err != nil {
		return err
	}
	if n != t.rows {
		return fmt.Errorf("PostgreSQL took %d rows of the %d read", n, t.rows)
	}
	m.progress(MoveProgress{Stage: "copy", Table: t.name, Rows: t.rows, Done: true})
	return nil
}

// copySource feeds COPY the rows of a SQLite query, each converted to the
// Go type pgx encodes as the PostgreSQL column's type.
type copySource struct {
	rows      *sql.Rows
	table     *moveTable
	raw, ptrs []any
	out       []any
	err       error
	report    func(rows int64)
}

func (s *copySource) Next() bool {
	if s.err != nil || !s.rows.Next() {
		return false
	}
	if s.err = s.rows.Scan(s.ptrs...); s.err != nil {
		return false
	}
	for i, v := range s.raw {
		if s.out[i], s.err = toPostgres(v, s.table.columns[i].pgType); s.err != nil {
			s.err = fmt.Errorf("column %s: %w", s.table.columns[i].name, s.err)
			return false
		}
	}
	s.table.sum.add(s.raw)
	if s.table.rows++; s.table.rows%MoveProgressRows == 0 {
		s.report(s.table.rows)
	}
	return true
}

func (s *copySource) Values() ([]any, error) { return s.out, nil }

func (s *copySource) Err() error {
	if s.err != nil {
		return s.err
	}
	return s.rows.Err()
}

// toPostgres is v, as SQLite's driver read it (int64, float64, string,
// []byte or nil), as the Go type pgx encodes into the PostgreSQL type
// typ. A value SQLite holds that the column cannot take is an error, not
// a conversion that loses it.
func toPostgres(v any, typ string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case "int8", "int4", "int2":
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("%T %v where PostgreSQL wants an integer (%s)", v, v, typ)
		}
		if (typ == "int4" && n != int64(int32(n))) || (typ == "int2" && n != int64(int16(n))) {
			return nil, fmt.Errorf("%d does not fit PostgreSQL's %s", n, typ)
		}
		return n, nil
	case "text", "citext", "varchar", "bpchar":
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		}
	case "bytea":
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			return []byte(x), nil
		}
	case "float8":
		if x, ok := v.(float64); ok {
			return x, nil
		}
	case "bool":
		if n, ok := v.(int64); ok && (n == 0 || n == 1) {
			return n == 1, nil
		}
	default:
		return nil, fmt.Errorf("PostgreSQL's type %s is not one a move converts to", typ)
	}
	return nil, fmt.Errorf("%T where PostgreSQL wants %s", v, typ)
}

// setSequences moves every identity or serial column's sequence past the
// largest value copied into it: the rows came with their numbers, which
// leaves the sequences where the schema started them, and the next insert
// would take a number a copied row has.
func (m *mover) setSequences(ctx context.Context, pg *pgx.Conn) error {
	rows, err := pg.Query(ctx, `SELECT c.relname, a.attname, s.seq
		FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
		CROSS JOIN LATERAL (SELECT pg_get_serial_sequence(quote_ident(c.relname), a.attname) AS seq) s
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
			AND a.attnum > 0 AND NOT a.attisdropped AND s.seq IS NOT NULL
		ORDER BY c.relname, a.attname`)
	if err != nil {
		return err
	}
	type sequence struct{ table, column, name string }
	seqs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sequence, error) {
		var s sequence
		return s, r.Scan(&s.table, &s.column, &s.name)
	})
	if err != nil {
		return err
	}
	for _, s := range seqs {
		// No row leaves the sequence as it is: its first number is free.
		_, err := pg.Exec(ctx, "SELECT setval($1, max("+quoteName(s.column)+")) FROM "+quoteName(s.table)+
			" HAVING max("+quoteName(s.column)+") IS NOT NULL", s.name)
		if err != nil {
			return fmt.Errorf("set %s past %s.%s: %w", s.name, s.table, s.column, err)
		}
		m.report.Sequences = append(m.report.Sequences, s.table+"."+s.column)
	}
	return nil
}

// queryStrings runs a query of one text column.
func queryStrings(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, query string, args ...any) ([]string, error) {
	return scanStrings(q.QueryContext(ctx, query, args...))
}

// quoteName quotes an identifier for both databases.
func quoteName(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quoteName(n)
	}
	return strings.Join(q, ", ")
}
