// Package pgtest gives tests a throwaway PostgreSQL: one cluster per test
// process, started on first use in a temporary directory and reached only
// through a Unix socket there, and a fresh, empty database per test. It is
// imported only by tests.
//
// A package whose tests use it runs them through Main, which stops the
// cluster and removes its directory once they are done:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// and each test asks for a database of its own, dropped when it ends:
//
//	url := pgtest.NewDatabase(t) // postgres://chatd@/test_1?host=/tmp/…
//
// A database is UTF-8 with the C locale, and owned by chatd, a role that
// may log in and create objects in its own databases but is no superuser:
// a schema that needs more than a database's owner may do fails here
// first. The cluster trades durability for speed (fsync,
// synchronous_commit and full_page_writes are off); a crash would lose
// it, which a test can afford.
//
// The server's programs are looked for in CHATD_PG_BIN (a bin directory),
// then in `pg_config --bindir`, then in the newest /usr/lib/postgresql/*/bin
// (Debian's layout), then beside the initdb on PATH. Without them a test
// that asks for a database is skipped, saying what is missing, unless
// CHATD_PG_REQUIRED is set, as it is in CI: then it fails. PostgreSQL
// refuses to run as root, so under root the cluster runs as the postgres
// user. A test process that dies before Main returns takes its server with
// it on Linux, but leaves the directory behind.
//
// The server logs every failed statement with its text. CHATD_PG_LOG=FILE
// writes that log to FILE, which outlives the cluster: the place to read
// the statement behind an "current transaction is aborted" error.
package pgtest

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

// appRole owns the test databases and is who tests connect as.
const appRole = "chatd"

var (
	startOnce sync.Once
	started   *cluster
	startErr  error
	databases atomic.Int64 // numbers the test databases
	// skipped counts the tests skipped for want of PostgreSQL, and
	// missing says what was missing, for Main's one line.
	skipped atomic.Int64
	missing atomic.Value
)

// shared is the process's cluster, started by the first call.
func shared(bin string) (*cluster, error) {
	startOnce.Do(func() { started, startErr = startCluster(bin) })
	return started, startErr
}

// Main runs a package's tests, then stops the cluster if one of them
// started it (a fast shutdown) and removes its directory. It returns the
// tests' exit code, for os.Exit.
//
// When tests were skipped for want of PostgreSQL, Main prints one line
// saying how many and why, after the tests. (go test shows it when run in
// the package's folder, or with -v: listing packages, it keeps a passing
// package's output to itself.)
func Main(m *testing.M) int {
	code := m.Run()
	if n := skipped.Load(); n > 0 {
		fmt.Printf("SKIP: %d tests that need PostgreSQL: %v\n", n, missing.Load())
	}
	startOnce.Do(func() {}) // waits for a start still under way; none begins after
	if started != nil {
		if err := started.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stopping PostgreSQL: %v\n", err)
		}
	}
	return code
}

// Available reports whether PostgreSQL's server programs were found. It
// starts nothing.
func Available() bool {
	_, err := binDir()
	return err == nil
}

// NewDatabase creates a fresh, empty database and returns a URL to connect
// to it as its owner, for pgx (pgx.Connect, or database/sql through
// pgx/v5/stdlib). The database is dropped when the test ends, closing
// whatever connections to it are still open. Without PostgreSQL the test
// is skipped (failed under CHATD_PG_REQUIRED).
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	c := running(tb)
	name := fmt.Sprintf("test_%d", databases.Add(1))
	err := c.exec(fmt.Sprintf(`CREATE DATABASE %s OWNER %s TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`,
		name, appRole))
	if err != nil {
		tb.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if err := c.exec(`DROP DATABASE ` + name + ` WITH (FORCE)`); err != nil {
			tb.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return c.url(appRole, name)
}

// running is the process's cluster, started if need be. A test is skipped
// when PostgreSQL is not installed, and fails when it is but cannot start.
func running(tb testing.TB) *cluster {
	tb.Helper()
	bin, err := binDir()
	if err != nil {
		if os.Getenv("CHATD_PG_REQUIRED") != "" {
			tb.Fatalf("%v; CHATD_PG_REQUIRED is set, so this fails rather than skips", err)
		}
		skipped.Add(1)
		missing.Store(err.Error())
		tb.Skip(err)
	}
	c, err := shared(bin)
	if err != nil {
		tb.Fatalf("pgtest: starting PostgreSQL from %s: %v", bin, err)
	}
	return c
}
