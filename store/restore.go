package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Restore puts a copy of the chatd database at src (a file written by
// Backup, or any chatd database) where dest is, for a server to start on.
//
// It refuses, changing nothing, while a server holds dest's server lock (see
// LockServer), when dest exists and overwrite is not set, and when src fails
// SQLite's integrity check, is not a chatd database, or has a schema newer
// than schema's (an older one is fine: serve upgrades it on start). The
// lock is held until Restore returns, so no server starts halfway.
//
// The copy is written with VACUUM INTO to a temporary file beside dest,
// checked again, synced, and renamed over dest, so dest is at every moment
// either the old database or the complete new one. The old database's -wal
// and -shm files are removed just before the rename: SQLite would otherwise
// replay the old WAL's frames onto the new file. Whatever the old WAL held
// is first checkpointed into the old file, so an interrupted restore loses
// nothing of it.
func Restore(ctx context.Context, src, dest, schema string, overwrite bool) error {
	supported, err := schemaVersion(schema)
	if err != nil {
		return err
	}
	if src, dest, err = restorePaths(src, dest); err != nil {
		return err
	}
	lock := &destLock{dest: dest}
	defer lock.release()
	if err := lock.takeIfDirExists(); err != nil {
		return err
	}
	if err := refuseToReplace(dest, overwrite); err != nil {
		return err
	}
	srcConn, version, err := openBackup(ctx, src, supported)
	if err != nil {
		return err
	}
	defer srcConn.Close()
	if err := lock.takeCreatingDir(); err != nil {
		return err
	}
	tmp := tempBeside(dest)
	if err := createPrivate(tmp); err != nil {
		return err
	}
	defer os.Remove(tmp) // a no-op once renamed
	if err := copyBackup(ctx, srcConn, src, tmp, version); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := takeOwnership(tmp, dest); err != nil {
		return err
	}
	if err := lock.giveToOwnerOf(tmp); err != nil {
		return err
	}
	return swapIn(tmp, dest)
}

// takeOwnership gives the restored copy at tmp the owner, group and mode of
// the database at dest it is about to replace, so that a restore run as
// root (between systemctl stop and start) leaves a file the service's user
// can still open and write. It refuses, changing nothing, when it cannot
// (a user other than root restoring over someone else's database): the
// server would not open the result. A new database is readable by its
// owner only (0600, as the temporary file was created); restored by root,
// it gets the owner and group of its folder, the service's own when the
// folder is the service's.
func takeOwnership(tmp, dest string) error {
	old, err := os.Stat(dest)
	switch {
	case err == nil:
		if err := chownLike(tmp, old); err != nil {
			return fmt.Errorf("give the restored database the owner of the one it replaces (%s): %w; run chatd restore as root or as that user", ownerOf(old), err)
		}
		return os.Chmod(tmp, old.Mode().Perm())
	case errors.Is(err, fs.ErrNotExist):
		if !runningAsRoot() {
			return nil
		}
		dir, err := os.Stat(filepath.Dir(dest))
		if err != nil {
			return err
		}
		return chownLike(tmp, dir)
	default:
		return err
	}
}

// restorePaths makes src and dest absolute and checks that src is a file
// other than dest.
func restorePaths(src, dest string) (string, string, error) {
	src, err := filepath.Abs(src)
	if err != nil {
		return "", "", err
	}
	if dest, err = filepath.Abs(dest); err != nil {
		return "", "", err
	}
	if src == dest {
		return "", "", errors.New("the backup file is the database itself")
	}
	fi, err := os.Stat(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", fmt.Errorf("no backup file at %s", src)
	case err != nil:
		return "", "", fmt.Errorf("cannot read the backup file: %w", err)
	case !fi.Mode().IsRegular():
		return "", "", fmt.Errorf("%s is not a file, so not a backup", src)
	}
	// Read before anything else is done, so that a file this user may
	// not read is said to be that, not a database that cannot be opened.
	f, err := os.Open(src)
	if err != nil {
		return "", "", fmt.Errorf("cannot read the backup file: %w", err)
	}
	f.Close()
	return src, dest, nil
}

// destLock is the server lock Restore holds on dest while it works.
type destLock struct {
	dest string
	held *ServerLock
}

// takeIfDirExists takes the lock when dest's directory exists: before
// anything slow, so that a running server is reported at once.
func (l *destLock) takeIfDirExists() error {
	if _, err := os.Stat(filepath.Dir(l.dest)); err != nil {
		return nil
	}
	return l.take()
}

// takeCreatingDir takes the lock if it is not held yet, creating dest's
// directory first.
func (l *destLock) takeCreatingDir() error {
	if l.held != nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(l.dest), 0o750); err != nil {
		return fmt.Errorf("create database directory: %w", err)
	}
	return l.take()
}

func (l *destLock) take() error {
	lock, err := LockServer(l.dest)
	if errors.Is(err, ErrServerRunning) {
		return fmt.Errorf("a chatd server is using %s; stop it before restoring", l.dest)
	}
	l.held = lock
	return err
}

// giveToOwnerOf gives a lock file this restore created the owner and group
// of the file at path (the restored database), so that the server, run as
// that user, can open it: created by root, it would be root's, 0600. A
// lock file that was there before is left as it is.
func (l *destLock) giveToOwnerOf(path string) error {
	if !l.held.Created() {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := chownLike(LockPath(l.dest), fi); err != nil {
		return fmt.Errorf("give the lock file the database's owner (%s): %w", ownerOf(fi), err)
	}
	return nil
}

func (l *destLock) release() { _ = l.held.Release() }

// copyBackup writes the backup open on srcConn to tmp, checked and synced.
// It closes srcConn once the copy is made.
func copyBackup(ctx context.Context, srcConn *sql.DB, src, tmp string, version int) error {
	if _, err := srcConn.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	srcConn.Close()
	if err := verify(ctx, tmp, version); err != nil {
		return err
	}
	return syncFile(tmp)
}

// swapIn renames tmp over dest, after folding dest's WAL into it and
// removing its -wal and -shm files: SQLite would otherwise replay the old
// WAL's frames onto the new file.
func swapIn(tmp, dest string) error {
	if _, err := os.Stat(dest + "-wal"); err == nil {
		foldWAL(dest)
	}
	for _, side := range []string{dest + "-wal", dest + "-shm"} {
		if err := os.Remove(side); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the old database's %s: %w", filepath.Base(side), err)
		}
	}
	if err := os.Rename(tmp, dest); err != nil {
		return err
	}
	return syncFile(filepath.Dir(dest))
}

// openBackup opens src read-only and checks that it is a whole chatd
// database this chatd can serve. It returns the connection (for the copy)
// and the schema version.
func openBackup(ctx context.Context, src string, supported int) (*sql.DB, int, error) {
	conn, err := openFile(src, readOnly)
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*sql.DB, int, error) {
		conn.Close()
		return nil, 0, err
	}
	var result string
	if err := conn.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&result); err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CORRUPT {
			return fail(fmt.Errorf("%s failed its integrity check: %v", src, err))
		}
		return fail(describeOpenError(src, err))
	}
	if result != "ok" {
		return fail(fmt.Errorf("%s failed its integrity check: %s", src, result))
	}
	version, err := userVersion(ctx, conn)
	if err != nil {
		return fail(describeOpenError(src, err))
	}
	var tables int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table'
		AND name IN ('users', 'agents', 'api_keys', 'rooms', 'messages')`).Scan(&tables); err != nil {
		return fail(describeOpenError(src, err))
	}
	switch {
	case version == 0 || tables < 5:
		return fail(fmt.Errorf("%s is not a chatd database", src))
	case version > supported:
		return fail(fmt.Errorf("%s is at schema version %d, newer than this chatd supports (%d); use a newer chatd", src, version, supported))
	}
	return conn, version, nil
}

// foldWAL checkpoints the WAL of the database at path into its file, so
// that removing the WAL afterwards loses nothing. It is best effort: a
// database too damaged to open is being replaced anyway.
func foldWAL(path string) {
	conn, err := openFile(path, readWrite)
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = conn.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
}
