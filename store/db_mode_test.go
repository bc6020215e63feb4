//go:build unix

package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A database Open creates is readable by its owner only, and so are its
// -wal and -shm files: it holds the token-signing secret and the digests
// of every key. A file that was there keeps its mode.
func TestOpenCreatesTheFileForItsOwnerOnly(t *testing.T) {
	sqliteOnly(t)
	for _, tc := range []struct {
		name     string
		existing os.FileMode // 0: no file before Open
		want     os.FileMode
	}{
		{"new file", 0, 0o600},
		{"existing empty file", 0o644, 0o644},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "data", "chatd.db")
			if tc.existing != 0 {
				os.MkdirAll(filepath.Dir(path), 0o750)
				if err := os.WriteFile(path, nil, tc.existing); err != nil {
					t.Fatal(err)
				}
				os.Chmod(path, tc.existing) // whatever the umask
			}
			db, err := Open(path, Options{Schema: testSchema})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, _, err := db.CreateUser(context.Background(), NewUser{Handle: "alice", Name: "Alice"}); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{path, path + "-wal", path + "-shm"} {
				fi, err := os.Stat(name)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != tc.want {
					t.Errorf("%s: mode %v, want %v", filepath.Base(name), got, tc.want)
				}
			}
		})
	}
}
