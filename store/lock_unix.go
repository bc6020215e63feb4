//go:build unix

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// The server lock tells `chatd restore` (and a second `chatd serve`) that a
// server has the database open. It is an flock(2) on a file beside the
// database, not a lock on the database itself: SQLite's own locks are POSIX
// record locks that come and go with transactions, while this one is held
// for the server's whole life. The kernel drops an flock when the process
// that holds it dies, however it dies, so a server killed with SIGKILL leaves
// no stale lock behind; the lock file itself is left in place and harmless,
// except by a process that refused the database (Discard), which removes
// the lock file it created.

// ErrServerRunning is returned by LockServer while another process holds the
// server lock of the same database.
var ErrServerRunning = errors.New("a chatd server is using the database")

// ServerLock is a held server lock.
type ServerLock struct {
	f       *os.File
	path    string
	created bool // LockServer created the lock file
}

// LockPath is the lock file of the database at dbPath.
func LockPath(dbPath string) string { return dbPath + ".lock" }

// LockServer takes the server lock of the database at dbPath without
// waiting: ErrServerRunning if another process holds it. The database's
// directory must exist.
func LockServer(dbPath string) (*ServerLock, error) {
	path := LockPath(dbPath)
	for {
		f, created, err := openLockFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed (Discard) between trying to create it and opening it
		}
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
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		// A process that discarded the lock file between our opening it and
		// our locking it left us a lock on a file no longer at path, which
		// nobody else would see: take the one at path instead.
		if fi, err := f.Stat(); err == nil {
			if at, err := os.Stat(path); err == nil && os.SameFile(fi, at) {
				return &ServerLock{f: f, path: path, created: created}, nil
			}
		}
		f.Close()
	}
}

// openLockFile opens the lock file at path, creating it if missing, and
// says whether it created it.
func openLockFile(path string) (f *os.File, created bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, false, err
	}
	f, err = os.OpenFile(path, os.O_RDWR, 0o600)
	return f, false, err
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

// Created reports whether LockServer created the lock file, rather than
// finding one a server left.
func (l *ServerLock) Created() bool { return l != nil && l.created }

// Discard drops the lock and removes the lock file if LockServer created
// it: for a process that refused the database, which should leave nothing
// beside it. The file is removed while the lock is still held, so no other
// process can be holding a lock on it (LockServer checks that the file it
// locked is still the one at the path).
func (l *ServerLock) Discard() error {
	if l == nil || l.f == nil {
		return nil
	}
	var err error
	if l.created {
		if err = os.Remove(l.path); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	return errors.Join(err, l.Release())
}
