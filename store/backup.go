package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the database at src to dest while other
// processes (a running server) keep reading and writing it. The copy is made
// with VACUUM INTO into a temporary file beside dest, checked with
// integrity_check, synced, and only then renamed into place, so dest is either
// absent, the previous file, or a complete verified copy. The copy holds the
// token-signing secret and every key hash, so it is created readable and
// writable by its owner only (0600), whatever the umask. dest's folder is
// created (0750) if missing.
//
// It refuses, changing nothing, to replace an existing dest unless overwrite
// is set, and always when dest is the database itself or one of its -wal,
// -shm, -journal or .lock companions, by whatever path (relative, through a
// symbolic link, a hard link): renaming a file over one of those under a
// running server corrupts the database, loses its writes or defeats its
// server lock. It does not change the schema of src, whatever its version.
func Backup(ctx context.Context, src, dest string, overwrite bool) error {
	src, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	dest, err = filepath.Abs(dest)
	if err != nil {
		return err
	}
	if src == dest {
		return errors.New("the backup file must not be the database itself")
	}
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("database %s: %w", src, errors.Unwrap(err))
	}
	if what := databaseFileAt(src, dest); what != "" {
		return fmt.Errorf("the backup file %s is %s; write the backup to another file", dest, what)
	}
	if err := refuseToReplace(dest, overwrite); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o750); err != nil {
		return fmt.Errorf("create the backup's folder: %w", err)
	}
	tmp := tempBeside(dest)
	if err := createPrivate(tmp); err != nil {
		return err
	}
	defer os.Remove(tmp) // a no-op once renamed

	conn, err := openFile(src, readWrite)
	if err != nil {
		return err
	}
	defer conn.Close()
	version, err := userVersion(ctx, conn)
	if err != nil {
		return describeOpenError(src, err)
	}
	if version == 0 {
		return fmt.Errorf("%s is not a chatd database", src)
	}
	if _, err := conn.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		return fmt.Errorf("copy database: %w", err)
	}
	if err := verify(ctx, tmp, version); err != nil {
		return err
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return err
	}
	return syncFile(filepath.Dir(dest))
}

// refuseToReplace refuses an existing dest unless overwrite is set.
func refuseToReplace(dest string, overwrite bool) error {
	if overwrite {
		return nil
	}
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("%s already exists (use --force to replace it)", dest)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// tempBeside names a temporary file in dest's directory, where renaming it
// over dest is atomic.
func tempBeside(dest string) string {
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	return dest + ".tmp-" + hex.EncodeToString(suffix)
}

// verify opens a copy read-only and checks its integrity and version.
func verify(ctx context.Context, path string, wantVersion int) error {
	c, err := openFile(path, readOnly)
	if err != nil {
		return err
	}
	defer c.Close()
	var result string
	if err := c.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&result); err != nil {
		return fmt.Errorf("check copy: %w", err)
	}
	if result != "ok" {
		return fmt.Errorf("the copy failed its integrity check: %s", result)
	}
	version, err := userVersion(ctx, c)
	if err != nil {
		return err
	}
	if version != wantVersion {
		return fmt.Errorf("the copy is at schema version %d, want %d", version, wantVersion)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
