package store

import (
	"database/sql"
	"strconv"
	"strings"
)

// chatd's SQL is written once, in SQLite's dialect with ? placeholders, and
// the same text runs on PostgreSQL. What differs between the two databases
// is named here, one field per difference, so that no query asks which
// database it runs on and a new difference has one obvious home.
type dialect struct {
	// driver is the database/sql driver of the dialect's connections.
	driver string
	// bind turns a query's ? placeholders into the database's own.
	bind func(query string) string
	// begin starts the writer's transaction. Both take the database's one
	// write lock for the transaction's life, so that every check a write
	// makes (a quota, the next attempt number, a board's history) still
	// holds when it commits, whichever process or node wrote before it:
	// SQLite's BEGIN IMMEDIATE, and on PostgreSQL a transaction-scoped
	// advisory lock that every chatd node's writer takes.
	begin []string
	// snapshot opens a read transaction that sees one committed state
	// throughout.
	snapshot sql.TxOptions
	// upkeep is the care the database's files need from the writer.
	upkeep func(*writer) upkeep
	// clockMicros is the SQL of the database's clock, in µs since the
	// epoch, which times leases (leases.go): nodes whose own clocks
	// disagree still agree on when a lease expires.
	clockMicros string
	// jsonText is the SQL of the text at the top-level key of the JSON
	// object held in the TEXT column: SQLite reads it with json_extract,
	// PostgreSQL has no json_extract and reads the text as jsonb.
	jsonText func(column, key string) string
	// jsonTextRows is a FROM item naming one row, in a column value, for
	// each string of the JSON array bound to its one ? parameter: a list
	// of ids of any length passed as one argument. SQLite's json_each
	// yields more columns than PostgreSQL's json_array_elements_text,
	// whose one column has to be named.
	jsonTextRows string
	// indexHint is what follows a table's name in FROM to make the planner
	// read it through index: SQLite's INDEXED BY, for the plans its planner
	// misjudges without statistics; PostgreSQL has no hints (ANALYZE keeps
	// its statistics), so nothing there.
	indexHint func(index string) string
	// readStorage fills in the storage figures of a stats report: SQLite's
	// file, its WAL and the free pages inside it; PostgreSQL's database
	// size and block size. PostgreSQL has no free list a vacuum gives back
	// (autovacuum reuses the space), so it reports none.
	readStorage func(db *DB, q readQ, s *Stats) error
	// tablesQuery lists chatd's tables by name: neither the database's own
	// catalog nor, on SQLite, the search index's tables.
	tablesQuery string
	// search is how full-text search finds and marks messages and
	// memories: SQLite's FTS5 tables, which the store indexes, or
	// PostgreSQL's tsvector columns, which the database keeps.
	search searchEngine
	// pagesQuery reads the page size, the pages in use and the free pages:
	// SQLite's from its file header; PostgreSQL's blocks of the whole
	// database, which keeps no free list of its own to report.
	pagesQuery string
	// shareChanges: other processes may serve the database, so the writer
	// records the changes each batch published for them (cluster.go), and
	// background jobs and webhook sends run under leases (leases.go).
	// PostgreSQL's nodes share the database; a SQLite file's one server
	// holds its server lock (lock_unix.go), so its work is its own.
	shareChanges bool
}

var sqliteDialect = dialect{
	driver: "sqlite",
	bind:   func(q string) string { return q },
	begin:  []string{"BEGIN IMMEDIATE"},
	// SQLite's read transactions are snapshots at every isolation level.
	snapshot:     sql.TxOptions{ReadOnly: true},
	upkeep:       (*writer).sqliteUpkeep,
	clockMicros:  "CAST(unixepoch('subsec') * 1000000 AS INTEGER)",
	jsonText:     func(column, key string) string { return "json_extract(" + column + ", '$." + key + "')" },
	jsonTextRows: "json_each(?)",
	indexHint:    func(index string) string { return " INDEXED BY " + index },
	readStorage:  (*DB).sqliteStorage,
	tablesQuery: `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
		AND name NOT LIKE '%_fts' AND name NOT LIKE '%_fts_%' ORDER BY name`,
	search:     fts5Search,
	pagesQuery: `SELECT page_size, page_count, freelist_count FROM pragma_page_size, pragma_page_count, pragma_freelist_count`,
}

// writeLockKey is the key of the PostgreSQL advisory lock that stands for
// the database's one writer ("chatd" in ASCII).
const writeLockKey = 0x6368617464

// postgresWriteLock takes the writer's lock until the transaction ends.
var postgresWriteLock = "SELECT pg_advisory_xact_lock(" + strconv.Itoa(writeLockKey) + ")"

var postgresDialect = dialect{
	driver: "pgx",
	bind:   numberPlaceholders,
	// One round trip after BEGIN takes the lock and queues the notification
	// the other processes hear at the commit (postgres_listen.go).
	begin:        []string{"BEGIN ISOLATION LEVEL READ COMMITTED", postgresWriteLock + ", pg_notify('" + writesChannel + "', '')"},
	snapshot:     sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead},
	upkeep:       postgresUpkeep,
	clockMicros:  "CAST(extract(epoch FROM clock_timestamp()) * 1000000 AS BIGINT)",
	jsonText:     func(column, key string) string { return "(" + column + "::jsonb ->> '" + key + "')" },
	jsonTextRows: "json_array_elements_text(CAST(? AS json)) AS ids(value)",
	indexHint:    func(string) string { return "" },
	readStorage:  (*DB).postgresStorage,
	tablesQuery:  `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`,
	search:       postgresSearch,
	pagesQuery: `SELECT current_setting('block_size')::bigint,
		pg_database_size(current_database()) / current_setting('block_size')::bigint, 0`,
	shareChanges: true,
}

// numberPlaceholders rewrites the ? placeholders of query as $1, $2, …,
// leaving string literals, quoted names and comments as they are.
func numberPlaceholders(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var out strings.Builder
	out.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '?':
			// ?NNN names its parameter; a bare ? takes the one after the
			// largest named so far, as in SQLite.
			digits := len(query[i+1:]) - len(strings.TrimLeft(query[i+1:], "0123456789"))
			if digits == 0 {
				n++
				out.WriteByte('$')
				out.WriteString(strconv.Itoa(n))
				continue
			}
			k, _ := strconv.Atoi(query[i+1 : i+1+digits])
			n = max(n, k)
			out.WriteByte('$')
			out.WriteString(query[i+1 : i+1+digits])
			i += digits
			continue
		case c == '\'' || c == '"':
			end := strings.IndexByte(query[i+1:], c)
			if end < 0 {
				out.WriteString(query[i:])
				return out.String()
			}
			out.WriteString(query[i : i+end+2])
			i += end + 1
			continue
		case c == '-' && strings.HasPrefix(query[i:], "--"):
			end := strings.IndexByte(query[i:], '\n')
			if end < 0 {
				end = len(query) - i
			}
			out.WriteString(query[i : i+end])
			i += end - 1
			continue
		}
		out.WriteByte(c)
	}
	return out.String()
}
