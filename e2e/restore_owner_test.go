package e2e

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// serviceUID is the user the service runs as in these tests (User=chatd);
// it needs no entry in /etc/passwd.
const serviceUID = 4242

// asService runs the binary at bin with args as serviceUID, as systemd
// would run the service.
func asService(t *testing.T, bin string, args ...string) commandResult {
	t.Helper()
	cmd := chatdCommand(nil, args...)
	cmd.Path = bin
	cmd.Dir = filepath.Dir(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: serviceUID, Gid: serviceUID}}
	return runCommand(t, cmd)
}

// serviceSetup is a folder other users may enter, with a copy of the
// binary they may run and a data folder owned by the service's user.
func serviceSetup(t *testing.T) (bin, data string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running chatd as another user needs root")
	}
	dir, err := os.MkdirTemp("", "chatd-service-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin = filepath.Join(dir, "chatd")
	binary, err := os.ReadFile(chatdBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	data = filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, serviceUID, serviceUID); err != nil {
		t.Fatal(err)
	}
	return bin, data
}

// The documented restore: the service stopped, chatd restore run as root,
// the service started again as its own user, which can still write the
// database and take its lock.
func TestRestoreAsRootKeepsTheServiceUsersDatabase(t *testing.T) {
	bin, data := serviceSetup(t)
	db := filepath.Join(data, "chatd.db")
	asService(t, bin, "migrate", "--db", db).ok(t)
	asService(t, bin, "create-user", "--db", db, "--handle", "alice", "--name", "Alice").ok(t)
	backup := filepath.Join(filepath.Dir(data), "backup.db")
	runChatd(t, nil, "backup", "--db", db, backup).ok(t) // as root
	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup: %v %v, want mode 0600", fi.Mode(), err)
	}
	os.Remove(db + ".lock") // as on a service that has not run yet

	runChatd(t, nil, "restore", "--db", db, "--force", backup).ok(t) // as root
	asService(t, bin, "create-user", "--db", db, "--handle", "bob", "--name", "Bob").ok(t)
	asService(t, bin, "vacuum", "--db", db).ok(t) // takes the server lock
	if n := countRows(t, db, "users"); n != 2 {
		t.Fatalf("users = %d, want 2", n)
	}
}

// Run by a user who cannot give the restored file the old one's owner,
// restore refuses and changes nothing.
func TestRestoreRefusesWhatItCannotGiveBack(t *testing.T) {
	bin, data := serviceSetup(t)
	db := filepath.Join(data, "chatd.db")
	runChatd(t, nil, "migrate", "--db", db).ok(t) // root's database in the service's folder
	runChatd(t, nil, "create-user", "--db", db, "--handle", "alice", "--name", "Alice").ok(t)
	os.Chmod(db, 0o666) // so that the service's user may even write it
	backup := filepath.Join(filepath.Dir(data), "backup.db")
	runChatd(t, nil, "backup", "--db", db, backup).ok(t)
	os.Chmod(backup, 0o644)
	// The lock file a service that ran leaves (a refused restore may create
	// one, harmless, but not replace one).
	os.WriteFile(db+".lock", nil, 0o600)
	os.Chown(db+".lock", serviceUID, serviceUID)
	before := folderDigest(t, data)

	asService(t, bin, "restore", "--db", db, "--force", backup).failsWithOneLine(t, "run chatd restore as root or as that user")
	if after := folderDigest(t, data); after != before {
		t.Fatalf("a refused restore changed files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// folderDigest is each file in dir with its mode, owner and a hash of its
// contents.
func folderDigest(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		data, _ := os.ReadFile(path)
		fmt.Fprintf(&b, "%s %v %d:%d %x\n", e.Name(), fi.Mode(), st.Uid, st.Gid, sha256.Sum256(data))
	}
	return b.String()
}

// A backup file its user may not read is refused as that, before anything
// is done, and so is a folder named as the backup.
func TestRestoreSaysWhyItCannotReadTheBackup(t *testing.T) {
	bin, data := serviceSetup(t)
	db := filepath.Join(data, "chatd.db")
	backup := filepath.Join(filepath.Dir(data), "backup.db")
	runChatd(t, nil, "migrate", "--db", backup).ok(t) // root's, 0600
	asService(t, bin, "restore", "--db", db, backup).failsWithOneLine(t, "cannot read the backup file: open "+backup+": permission denied")
	asService(t, bin, "restore", "--db", db, data).failsWithOneLine(t, data+" is not a file, so not a backup")
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused restore made %s: %v", db, err)
	}
}
