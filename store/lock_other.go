//go:build !unix

package store

import "errors"

// ErrServerRunning is returned by LockServer while another process holds the
// server lock of the same database.
var ErrServerRunning = errors.New("a chatd server is using the database")

// ServerLock is a held server lock. Without flock(2) (Windows, wasm) there
// is none: restore cannot tell whether a server runs, and says so in its
// help.
type ServerLock struct{}

// LockPath is the lock file of the database at dbPath.
func LockPath(dbPath string) string { return dbPath + ".lock" }

// LockServer does nothing on systems without flock(2).
func LockServer(string) (*ServerLock, error) { return &ServerLock{}, nil }

// Release does nothing.
func (*ServerLock) Release() error { return nil }

// Created reports false: there is no lock file.
func (*ServerLock) Created() bool { return false }

// Discard does nothing.
func (*ServerLock) Discard() error { return nil }
