package server

import (
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of the tests' own connections

	"github.com/chatd/chatd/internal/pgtest"
)

// TestMain stops the PostgreSQL cluster the tests on PostgreSQL started
// (internal/pgtest), once every test is done.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
