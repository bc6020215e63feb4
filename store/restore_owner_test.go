package store

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// ownerAndMode is a file's owner, group and permission bits.
type ownerAndMode struct {
	uid, gid uint32
	mode     os.FileMode
}

func ownerAndModeOf(t *testing.T, path string) ownerAndMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return ownerAndMode{st.Uid, st.Gid, fi.Mode().Perm()}
}

// backupOfNewDatabase is a backup file of a fresh chatd database.
func backupOfNewDatabase(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db := openTestDBAt(t, filepath.Join(dir, "source.db"), Options{})
	backup := filepath.Join(dir, "backup.db")
	if err := Backup(context.Background(), db.Path(), backup, false); err != nil {
		t.Fatal(err)
	}
	return backup
}

// A restore run as root (systemctl stop chatd; chatd restore; systemctl
// start chatd, the service running as its own user) leaves a database, and
// a lock file, that the service's user owns: the replaced database's owner,
// group and mode, or for a new database its folder's owner and group. A
// lock file that was there is left as it was.
func TestRestoreKeepsOwnerAndMode(t *testing.T) {
	sqliteOnly(t)
	if os.Geteuid() != 0 {
		t.Skip("giving files to another user needs root")
	}
	const svcUID, svcGID = 4242, 4343 // the service's user, not in /etc/passwd
	backup := backupOfNewDatabase(t)
	for _, tc := range []struct {
		name string
		// prepare sets up the folder (and the database) before the restore;
		// it returns the database's path.
		prepare  func(t *testing.T, dir string) string
		db, lock ownerAndMode
	}{
		{
			name: "replacing a 0640 database, no lock file",
			prepare: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "chatd.db")
				must(t, copyFile(backup, path))
				must(t, os.Chown(path, svcUID, svcGID))
				must(t, os.Chmod(path, 0o640))
				return path
			},
			db:   ownerAndMode{svcUID, svcGID, 0o640},
			lock: ownerAndMode{svcUID, svcGID, 0o600},
		},
		{
			name: "replacing a 0660 database beside its lock file",
			prepare: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "chatd.db")
				must(t, copyFile(backup, path))
				must(t, os.Chown(path, svcUID, svcGID))
				must(t, os.Chmod(path, 0o660))
				must(t, os.WriteFile(LockPath(path), nil, 0o644))
				must(t, os.Chown(LockPath(path), svcUID+1, svcGID+1))
				return path
			},
			db:   ownerAndMode{svcUID, svcGID, 0o660},
			lock: ownerAndMode{svcUID + 1, svcGID + 1, 0o644},
		},
		{
			name: "a new database in the service's folder",
			prepare: func(t *testing.T, dir string) string {
				must(t, os.Chown(dir, svcUID, svcGID))
				return filepath.Join(dir, "chatd.db")
			},
			db:   ownerAndMode{svcUID, svcGID, 0o600},
			lock: ownerAndMode{svcUID, svcGID, 0o600},
		},
		{
			name: "a new database in a folder the restore creates",
			prepare: func(t *testing.T, dir string) string {
				return filepath.Join(dir, "new", "chatd.db")
			},
			db:   ownerAndMode{0, 0, 0o600},
			lock: ownerAndMode{0, 0, 0o600},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.prepare(t, t.TempDir())
			if err := Restore(context.Background(), backup, path, testSchema, true); err != nil {
				t.Fatal(err)
			}
			if got := ownerAndModeOf(t, path); got != tc.db {
				t.Errorf("restored database: %+v, want %+v", got, tc.db)
			}
			if got := ownerAndModeOf(t, LockPath(path)); got != tc.lock {
				t.Errorf("lock file: %+v, want %+v", got, tc.lock)
			}
			entries, _ := os.ReadDir(filepath.Dir(path))
			for _, e := range entries {
				if e.Name() != "chatd.db" && e.Name() != "chatd.db.lock" {
					t.Errorf("left beside the database: %s", e.Name())
				}
			}
		})
	}
}

// Replacing a database of one's own keeps its mode, root or not.
func TestRestoreKeepsMode(t *testing.T) {
	sqliteOnly(t)
	backup := backupOfNewDatabase(t)
	path := filepath.Join(t.TempDir(), "chatd.db")
	must(t, copyFile(backup, path))
	must(t, os.Chmod(path, 0o640))
	before := ownerAndModeOf(t, path)
	if err := Restore(context.Background(), backup, path, testSchema, true); err != nil {
		t.Fatal(err)
	}
	if got := ownerAndModeOf(t, path); got != before {
		t.Fatalf("restored database: %+v, want %+v", got, before)
	}
}

func copyFile(src, dest string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dest, data, 0o600)
}
