//go:build !unix

package store

import "os"

// chownLike does nothing where files have no Unix owner and group.
func chownLike(string, os.FileInfo) error { return nil }

// ownerOf has nothing to name where files have no Unix owner.
func ownerOf(os.FileInfo) string { return "?" }

// runningAsRoot is false where there is no root to give files away.
func runningAsRoot() bool { return false }
