package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dirDigest is every entry under dir (recursively, links not followed) with
// its kind and, for a regular file, a hash of its contents: equal digests
// mean that nothing there was created, removed, replaced or written.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v", path, fi.Mode())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			fmt.Fprintf(&b, " -> %s", target)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A backup is refused, even with overwrite and whatever path names it, when
// its file is the database itself or one of the files that belong to it
// (the WAL, the shared-memory index, the journal, the server lock), and the
// refusal touches nothing: the server keeps its data and its lock.
func TestBackupRefusesTheDatabaseFiles(t *testing.T) {
	sqliteOnly(t)
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "chatd.db")
	db := openTestDBAt(t, path, Options{})
	rawExec(t, db, `CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)`)
	if err := db.Write(context.Background(), insertRow("before", 1)); err != nil {
		t.Fatal(err)
	}
	lock, err := LockServer(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	for _, side := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + side); err != nil {
			t.Fatalf("the open database has no %s file: %v", side, err)
		}
	}
	// Other names for the same folder and files.
	linkedDir := filepath.Join(root, "linked")
	must(t, os.Symlink("data", linkedDir))
	must(t, os.Symlink("chatd.db", filepath.Join(dir, "link-to-db")))
	must(t, os.Symlink("chatd.db-wal", filepath.Join(dir, "link-to-wal")))
	must(t, os.Link(path, filepath.Join(root, "hard-link.db")))
	must(t, os.Link(path+"-wal", filepath.Join(root, "hard-link-wal")))
	t.Chdir(root)
	// The writer checkpoints on its own once idle; wait for it, so that
	// what the digests compare changes only if Backup changes it.
	waitFor(t, "the idle checkpoint", func() bool {
		fi, err := os.Stat(path + "-wal")
		return err == nil && fi.Size() == 0
	})
	settled(t, root)

	for _, tc := range []struct {
		name, src, dest, want string
	}{
		{"same path", path, path, "the database itself"},
		{"relative path", path, "data/../data/chatd.db", "the database itself"},
		{"through a linked folder", path, filepath.Join(linkedDir, "chatd.db"), "the database itself"},
		{"database through a linked folder", filepath.Join(linkedDir, "chatd.db"), path, "the database itself"},
		{"symbolic link", path, filepath.Join(dir, "link-to-db"), "the database itself"},
		{"hard link", path, filepath.Join(root, "hard-link.db"), "the database itself"},
		{"wal", path, path + "-wal", "the database's -wal file"},
		{"relative wal", path, "data/chatd.db-wal", "the database's -wal file"},
		{"wal through a linked folder", path, filepath.Join(linkedDir, "chatd.db-wal"), "the database's -wal file"},
		{"wal of the database through a linked folder", filepath.Join(linkedDir, "chatd.db"), path + "-wal", "the database's -wal file"},
		{"symbolic link to the wal", path, filepath.Join(dir, "link-to-wal"), "the database's -wal file"},
		{"hard link to the wal", path, filepath.Join(root, "hard-link-wal"), "the database's -wal file"},
		{"shm", path, path + "-shm", "the database's -shm file"},
		{"journal, not there yet", path, path + "-journal", "the database's -journal file"},
		{"journal through a linked folder", path, filepath.Join(linkedDir, "chatd.db-journal"), "the database's -journal file"},
		{"lock", path, path + ".lock", "server lock file"},
		{"lock through a linked folder", path, filepath.Join(linkedDir, "chatd.db.lock"), "server lock file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dirDigest(t, root)
			err := Backup(context.Background(), tc.src, tc.dest, true)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("backup to %s: %v, want an error saying %q", tc.dest, err, tc.want)
			}
			if after := dirDigest(t, root); after != before {
				t.Fatalf("a refused backup changed files:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}

	// The server's lock and data are intact: a second lock is refused, and
	// a write after the refusals is there.
	if _, err := LockServer(path); err != ErrServerRunning {
		t.Fatalf("the server lock after the refusals: %v", err)
	}
	if err := db.Write(context.Background(), insertRow("after", 2)); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM t`); n != 2 {
		t.Fatalf("rows after the refusals = %d, want 2", n)
	}
	// A file beside the database that merely starts with its name is fine.
	if err := Backup(context.Background(), path, path+"-wal.backup", false); err != nil {
		t.Fatalf("backup beside the database: %v", err)
	}
}

// Backups hold the token-signing secret and every key hash: they are
// created readable by their owner only, whatever the umask, also when
// --force replaces a world-readable file.
func TestBackupIsPrivate(t *testing.T) {
	sqliteOnly(t)
	db := openTableDB(t, Options{})
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		setup func(dest string)
	}{
		{"new file", func(string) {}},
		{"new folder", func(string) {}},
		{"replacing a 0644 file", func(dest string) { must(t, os.WriteFile(dest, []byte("old"), 0o644)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"), "copy.db")
			if tc.name != "new folder" {
				must(t, os.MkdirAll(filepath.Dir(dest), 0o755))
			}
			tc.setup(dest)
			if err := Backup(context.Background(), db.Path(), dest, true); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(dest)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Fatalf("backup mode %v, want 0600", fi.Mode().Perm())
			}
			entries, _ := os.ReadDir(filepath.Dir(dest))
			if len(entries) != 1 {
				t.Fatalf("leftovers beside the copy: %v", entries)
			}
		})
	}
}

// settled waits until nothing under dir changes for longer than the
// background checkpointer's period.
func settled(t *testing.T, dir string) {
	t.Helper()
	last := dirDigest(t, dir)
	for i := 0; i < 100; i++ {
		time.Sleep(2 * checkpointEvery)
		now := dirDigest(t, dir)
		if now == last {
			return
		}
		last = now
	}
	t.Fatal("the files never settled")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
