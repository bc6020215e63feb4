//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// The server lock tells `chatd restore` (and a second `chatd serve`) that a
// server has the database open. It is an flock(2) on a file beside the
// database, not a lock on the database itself: SQLite's own locks are POSIX
// record locks that come and go with transactions, while this one is held
// for the server's whole life. The kernel drops an flock when the process
// that holds it dies, however it dies, so a server killed with SIGKILL leaves
// no stale lock behind; the lock file itself is left in place and harmless.

// ErrServerRunning is returned by LockServer while another process holds the
// server lock of the same database.
var ErrServerRunning = errors.New("a chatd server is using the database")

// ServerLock is a held server lock.
type ServerLock struct{ f *os.File }

// LockPath is the lock file of the database at dbPath.
func LockPath(dbPath string) string { return dbPath + ".lock" }

// LockServer takes the server lock of the database at dbPath without
// waiting: ErrServerRunning if another process holds it. The database's
// directory must exist.
func LockServer(dbPath string) (*ServerLock, error) {
	f, err := os.OpenFile(LockPath(dbPath), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrServerRunning
		}
		return nil, fmt.Errorf("lock %s: %w", LockPath(dbPath), err)
	}
	return &ServerLock{f: f}, nil
}

// Release drops the lock.
func (l *ServerLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the only descriptor releases the flock
	l.f = nil
	return err
}
