package store

import (
	"os"
	"path/filepath"
)

// companionSuffixes name the files beside a database that belong to it:
// SQLite's WAL, its shared-memory index and its rollback journal, and
// chatd's server lock (LockPath). Replacing one of them under a running
// server corrupts the database or defeats the lock.
var companionSuffixes = []string{"-wal", "-shm", "-journal", ".lock"}

// databaseFileAt tells whether the path p is the database at db or one of
// its companion files, by whatever path it is reached: relative or through
// a symbolic link (to the file or to a folder above it), or as a hard link.
// It answers what p is ("the database itself", "the database's -wal file",
// ...), or "" when p is none of them. Both paths must be absolute.
//
// Existing files are compared with os.SameFile; names are compared too, with
// their folders' symbolic links resolved, because a companion (a WAL, the
// lock file) may not exist yet and be created under p later. SQLite keeps a
// database's companions beside the file its path resolves to, chatd its
// lock beside the path as given, so both places count.
func databaseFileAt(db, p string) string {
	pNames := resolvedNames(p)
	pInfo, pErr := os.Stat(p)
	for _, suffix := range append([]string{""}, companionSuffixes...) {
		for _, name := range resolvedNames(db) {
			file := name + suffix
			same := false
			for _, q := range pNames {
				same = same || q == file
			}
			if !same && pErr == nil {
				if fi, err := os.Stat(file); err == nil && os.SameFile(fi, pInfo) {
					same = true
				}
			}
			if same {
				if suffix == "" {
					return "the database itself"
				}
				if suffix == ".lock" {
					return "the database's server lock file (" + filepath.Base(db) + ".lock)"
				}
				return "the database's " + suffix + " file"
			}
		}
	}
	return ""
}

// resolvedNames are the names of the absolute path p: as given, with its
// folder's symbolic links resolved, and wholly resolved (when it exists).
func resolvedNames(p string) []string {
	names := []string{filepath.Clean(p)}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		names = append(names, filepath.Join(dir, filepath.Base(p)))
	}
	if full, err := filepath.EvalSymlinks(p); err == nil {
		names = append(names, full)
	}
	return names
}

// createPrivate creates the empty file path, readable and writable by its
// owner only, for VACUUM INTO to fill (SQLite writes into an existing empty
// file and keeps its mode; left to itself it would create the file 0644).
// It fails if path exists.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}
