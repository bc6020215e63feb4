package pgtest

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// errNotFound is PostgreSQL not installed: tests skip rather than fail.
var errNotFound = errors.New("PostgreSQL not found (install Debian's postgresql package, " +
	"or set CHATD_PG_BIN to the directory holding initdb and postgres)")

// binDir is the directory holding PostgreSQL's initdb and postgres.
var binDir = sync.OnceValues(findBinDir)

func findBinDir() (string, error) {
	if dir := os.Getenv("CHATD_PG_BIN"); dir != "" {
		if hasServer(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%w: CHATD_PG_BIN=%s holds no initdb and postgres", errNotFound, dir)
	}
	for _, dir := range likelyBinDirs() {
		if hasServer(dir) {
			return dir, nil
		}
	}
	return "", errNotFound
}

// likelyBinDirs lists where PostgreSQL's programs may be, best first.
// pg_config may come without the server (Debian's libpq-dev has it), so
// every place is checked for the server's programs in turn.
func likelyBinDirs() []string {
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	dirs = append(dirs, debianBinDirs()...)
	if initdb, err := exec.LookPath("initdb"); err == nil {
		// Often a symlink into the installation (Debian's /usr/local/bin
		// links, Homebrew): postgres is beside the file it points to.
		if real, err := filepath.EvalSymlinks(initdb); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	return dirs
}

// debianBinDirs lists /usr/lib/postgresql/<major>/bin, newest first.
func debianBinDirs() []string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(bin string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
		return n
	}
	slices.SortFunc(dirs, func(a, b string) int { return cmp.Compare(major(b), major(a)) })
	return dirs
}

// hasServer says whether dir holds the programs a cluster needs.
func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}
