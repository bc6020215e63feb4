package store

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// Vacuum gives the free pages inside the database file at path back to the
// file system: SQLite reuses the pages a deletion frees (a purge, a deleted
// room's files) for what is written later, but never shrinks the file by
// itself. First it compacts the search indexes: FTS5 records a deletion as
// a tombstone beside what it deletes, and drops both only when it merges
// the segments holding them, so after a large purge the index is larger
// than before it ('optimize' merges every segment into one). Then VACUUM
// rewrites the whole file. Both hold the write lock for as long as they
// take (seconds per GB) and VACUUM needs as much free disk again as the
// database takes, so Vacuum runs only while no server has the database
// open: it takes the server lock (LockServer) for its whole run, and
// refuses with ErrServerRunning while a server holds it. It returns the
// database's size (with its WAL) before and after.
func Vacuum(ctx context.Context, path string) (before, after int64, err error) {
	if _, err := os.Stat(path); err != nil {
		return 0, 0, fmt.Errorf("database %s: %w", path, errors.Unwrap(err))
	}
	lock, err := LockServer(path)
	if err != nil {
		return 0, 0, err
	}
	defer lock.Release()
	before = fileSize(path) + fileSize(path+"-wal")
	conn, err := openFile(path, readWrite)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	version, err := userVersion(ctx, conn)
	if err != nil {
		return 0, 0, describeOpenError(path, err)
	}
	if version == 0 {
		return 0, 0, fmt.Errorf("%s is not a chatd database", path)
	}
	for _, stmt := range []string{"PRAGMA wal_checkpoint(TRUNCATE)",
		"INSERT INTO messages_fts (messages_fts) VALUES ('optimize')", "INSERT INTO memories_fts (memories_fts) VALUES ('optimize')",
		"VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)"} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return before, 0, fmt.Errorf("%s: %w", stmt, err)
		}
	}
	if err := conn.Close(); err != nil {
		return before, 0, err
	}
	return before, fileSize(path) + fileSize(path+"-wal"), nil
}
