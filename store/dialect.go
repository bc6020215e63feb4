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
	name string
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
	// search is how full-text search finds and marks messages and
	// memories: SQLite's FTS5 tables, which the store indexes, or
	// PostgreSQL's tsvector columns, which the database keeps.
	search searchEngine
}

var sqliteDialect = dialect{
	name:   "sqlite",
	driver: "sqlite",
	bind:   func(q string) string { return q },
	begin:  []string{"BEGIN IMMEDIATE"},
	// SQLite's read transactions are snapshots at every isolation level.
	snapshot: sql.TxOptions{ReadOnly: true},
	upkeep:   (*writer).sqliteUpkeep,
	search:   fts5Search,
}

// writeLockKey is the key of the PostgreSQL advisory lock that stands for
// the database's one writer ("chatd" in ASCII).
const writeLockKey = 0x6368617464

var postgresDialect = dialect{
	name:     "postgres",
	driver:   "pgx",
	bind:     numberPlaceholders,
	begin:    []string{"BEGIN ISOLATION LEVEL READ COMMITTED", "SELECT pg_advisory_xact_lock(" + strconv.Itoa(writeLockKey) + ")"},
	snapshot: sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead},
	upkeep:   noUpkeep,
	search:   postgresSearch,
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
