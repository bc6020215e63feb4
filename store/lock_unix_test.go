//go:build unix

package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Discard removes the lock file only when LockServer created it, and the
// lock can be taken again afterwards; Release leaves the file in place.
func TestServerLockDiscardRemovesOnlyTheFileItCreated(t *testing.T) {
	for _, tc := range []struct {
		name       string
		existed    bool
		discard    bool
		wantExists bool
	}{
		{"created, discarded", false, true, false},
		{"existed, discarded", true, true, true},
		{"created, released", false, false, true},
		{"existed, released", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "chatd.db")
			if tc.existed {
				if err := os.WriteFile(LockPath(db), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			lock, err := LockServer(db)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := LockServer(db); !errors.Is(err, ErrServerRunning) {
				t.Fatalf("a second lock: err = %v, want ErrServerRunning", err)
			}
			if tc.discard {
				err = lock.Discard()
			} else {
				err = lock.Release()
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(LockPath(db)); (err == nil) != tc.wantExists {
				t.Fatalf("lock file: stat err = %v, want it there: %v", err, tc.wantExists)
			}
			again, err := LockServer(db)
			if err != nil {
				t.Fatalf("locking again: %v", err)
			}
			again.Release()
		})
	}
}
