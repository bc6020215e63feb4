//go:build unix

package store

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// chownLike gives the file at path the owner and group of like, when they
// differ (so that a user who is not root, restoring a database of their
// own, needs no privilege). It leaves the mode to the caller: chown may
// clear set-id bits, so chmod comes after it.
func chownLike(path string, like os.FileInfo) error {
	want, ok := like.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if have, ok := fi.Sys().(*syscall.Stat_t); ok && have.Uid == want.Uid && have.Gid == want.Gid {
		return nil
	}
	return os.Chown(path, int(want.Uid), int(want.Gid))
}

// ownerOf names the owner and group of fi for a message: "chatd:chatd",
// or the numbers of those the system does not name.
func ownerOf(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "?"
	}
	uid, gid := strconv.FormatUint(uint64(st.Uid), 10), strconv.FormatUint(uint64(st.Gid), 10)
	if u, err := user.LookupId(uid); err == nil {
		uid = u.Username
	}
	if g, err := user.LookupGroupId(gid); err == nil {
		gid = g.Name
	}
	return fmt.Sprintf("%s:%s", uid, gid)
}

// runningAsRoot tells whether this process may give files away.
func runningAsRoot() bool { return os.Geteuid() == 0 }
