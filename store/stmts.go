package store

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"
)

// SQLite spends a large share of a short query parsing and planning it, so
// every query is prepared once and reused: the writer keeps its own
// statements (see writer.stmt), and the read pool shares this cache, where
// database/sql prepares each statement once per pooled connection.

// maxReadStmts bounds the cache; listings build a bounded set of query texts
// (one per combination of filters), far below it.
const maxReadStmts = 2048

type stmtCache struct {
	pool    *sql.DB
	bind    func(query string) string
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	pending map[string]bool
	closed  bool
	// preparing counts the prepares in flight, and stop ends those still
	// waiting for a connection: close waits for them, since a prepare holds
	// a connection the pool's Close would leave open behind it.
	preparing sync.WaitGroup
	stop      context.Context
	stopNow   context.CancelFunc
}

func newStmtCache(pool *sql.DB, bind func(string) string) *stmtCache {
	stop, stopNow := context.WithCancel(context.Background())
	return &stmtCache{pool: pool, bind: bind, m: map[string]*sql.Stmt{}, pending: map[string]bool{}, stop: stop, stopNow: stopNow}
}

// get returns the prepared statement for query, or nil when it is not
// prepared yet: the caller then runs the query unprepared this once.
// Preparing goes through the pool, which needs a free connection; a caller
// inside a read transaction already holds one, so preparing synchronously
// could wait forever for a connection that every other holder is waiting
// for too. So a miss prepares in the background.
func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st
	}
	if c.closed || c.pending[query] || len(c.m)+len(c.pending) >= maxReadStmts {
		return nil
	}
	c.pending[query] = true
	c.preparing.Add(1)
	go c.prepare(query)
	return nil
}

func (c *stmtCache) prepare(query string) {
	defer c.preparing.Done()
	st, err := c.pool.PrepareContext(c.stop, c.bind(query))
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, query)
	switch {
	case err != nil:
		// A query that does not prepare reports its error where it runs.
	case c.closed:
		st.Close()
	default:
		c.m[query] = st
	}
}

// close closes the statements, once no prepare is in flight: the pool is
// closed next, and must have every connection back by then.
func (c *stmtCache) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stopNow()
	c.preparing.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// readQ runs queries in one read transaction with the cached statements.
type readQ struct {
	ctx   context.Context
	tx    *sql.Tx
	cache *stmtCache
}

func (r readQ) QueryRow(query string, args ...any) *sql.Row {
	if st := r.cache.get(query); st != nil {
		return r.tx.StmtContext(r.ctx, st).QueryRowContext(r.ctx, args...)
	}
	return r.tx.QueryRowContext(r.ctx, r.cache.bind(query), args...)
}

func (r readQ) Query(query string, args ...any) (*sql.Rows, error) {
	if st := r.cache.get(query); st != nil {
		return r.tx.StmtContext(r.ctx, st).QueryContext(r.ctx, args...)
	}
	return r.tx.QueryContext(r.ctx, r.cache.bind(query), args...)
}

// queryRow runs a one-row query on the read pool, outside a transaction.
func (db *DB) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := db.readStmts.get(query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return db.read.QueryRowContext(ctx, db.readStmts.bind(query), args...)
}

// query runs a query on the read pool, outside a transaction.
func (db *DB) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := db.readStmts.get(query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return db.read.QueryContext(ctx, db.readStmts.bind(query), args...)
}

// scanStrings reads the one text column of rows, as a query returned them
// (so that it wraps the call: scanStrings(db.query(…))), and closes rows
// before it returns: on the writer's connection a next statement may
// follow at once.
func scanStrings(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// byKey indexes rows that a follow-up query enriches, and returns their
// keys, in order, as that query's arguments.
func byKey[K comparable, T any](rows []T, key func(T) K) (map[K]T, []any) {
	index := make(map[K]T, len(rows))
	args := make([]any, 0, len(rows))
	for _, r := range rows {
		index[key(r)] = r
		args = append(args, key(r))
	}
	return index, args
}

// scanAll reads every row with scan and closes rows, so that a caller in a
// transaction may query again on the same connection.
func scanAll[T any](rows *sql.Rows, scan func(interface{ Scan(...any) error }) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		item, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, rows.Err()
}

// inList is the placeholder list "(?,?,…)" of an IN clause with n > 0
// arguments.
func inList(n int) string { return "(?" + strings.Repeat(",?", n-1) + ")" }

// literalList is the list "('a', 'b', …)" of an IN clause written into the
// query text, sorted: for chatd's own constants only (message types), never
// input, so that a query over them stays one fixed text the planner sees
// whole.
func literalList(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range slices.Sorted(slices.Values(values)) {
		quoted[i] = "'" + v + "'"
	}
	return "(" + strings.Join(quoted, ", ") + ")"
}
