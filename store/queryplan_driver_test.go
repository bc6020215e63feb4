package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
)

// The plan-recording driver wraps SQLite's: while a planLog records, every
// statement the store runs is first explained (EXPLAIN QUERY PLAN, with the
// statement's own arguments, on the same connection), so a test can hold
// what a request really ran to the indexes, whatever path built the SQL.

// planLog is what was run while recording: each distinct statement's text
// and its plan, one detail line per step.
type planLog struct {
	mu        sync.Mutex
	recording bool
	plans     map[string][]string
	order     []string
}

func (l *planLog) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recording, l.plans, l.order = true, map[string][]string{}, nil
}

// stop ends the recording and returns the statements in the order first run.
func (l *planLog) stop() (order []string, plans map[string][]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recording = false
	return l.order, l.plans
}

func (l *planLog) wants(query string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.recording {
		return false
	}
	if _, seen := l.plans[query]; seen {
		return false
	}
	head := strings.ToUpper(strings.TrimSpace(query))
	for _, verb := range []string{"SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "REPLACE"} {
		if strings.HasPrefix(head, verb) {
			return true
		}
	}
	return false // transaction control, savepoints, pragmas
}

func (l *planLog) add(query string, plan []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A statement of the store's own (the search indexer's) may finish
	// after the recording stopped, while the test reads what it returned.
	if !l.recording {
		return
	}
	if _, seen := l.plans[query]; !seen {
		l.plans[query] = plan
		l.order = append(l.order, query)
	}
}

var (
	planDrivers   sync.Mutex
	planDriverSeq int
)

// registerPlanDriver registers a driver that records into log and returns
// its name, for Options.driver.
func registerPlanDriver(log *planLog) string {
	probe, err := sql.Open("sqlite", "")
	if err != nil {
		panic(err)
	}
	defer probe.Close()
	planDrivers.Lock()
	defer planDrivers.Unlock()
	planDriverSeq++
	name := fmt.Sprintf("sqlite-plans-%d", planDriverSeq)
	sql.Register(name, planDriver{base: probe.Driver(), log: log})
	return name
}

type planDriver struct {
	base driver.Driver
	log  *planLog
}

func (d planDriver) Open(name string) (driver.Conn, error) {
	c, err := d.base.Open(name)
	if err != nil {
		return nil, err
	}
	return &planConn{base: c, log: d.log}, nil
}

// planConn passes everything to SQLite's connection, explaining first.
type planConn struct {
	base driver.Conn
	log  *planLog
}

func (c *planConn) explain(ctx context.Context, query string, args []driver.NamedValue) {
	if !c.log.wants(query) {
		return
	}
	rows, err := c.base.(driver.QueryerContext).QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args)
	if err != nil {
		c.log.add(query, []string{"EXPLAIN failed: " + err.Error()})
		return
	}
	defer rows.Close()
	var plan []string
	row := make([]driver.Value, len(rows.Columns()))
	for rows.Next(row) == nil {
		plan = append(plan, fmt.Sprint(row[len(row)-1]))
	}
	c.log.add(query, plan)
}

func (c *planConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *planConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.base.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &planStmt{base: s, conn: c, query: query}, nil
}

func (c *planConn) Close() error { return c.base.Close() }

func (c *planConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *planConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.base.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *planConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.explain(ctx, query, args)
	return c.base.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *planConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.explain(ctx, query, args)
	return c.base.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *planConn) ResetSession(ctx context.Context) error {
	return c.base.(driver.SessionResetter).ResetSession(ctx)
}

func (c *planConn) IsValid() bool { return c.base.(driver.Validator).IsValid() }

type planStmt struct {
	base  driver.Stmt
	conn  *planConn
	query string
}

func (s *planStmt) Close() error  { return s.base.Close() }
func (s *planStmt) NumInput() int { return s.base.NumInput() }

func (s *planStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *planStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *planStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.conn.explain(ctx, s.query, args)
	return s.base.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *planStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.conn.explain(ctx, s.query, args)
	return s.base.(driver.StmtQueryContext).QueryContext(ctx, args)
}

func named(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}
