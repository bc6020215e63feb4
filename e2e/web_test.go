package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// webTimeout bounds the whole browser run (one to three minutes when it
// works, on two busy cores); past it the script and the Chromium it started
// are killed.
const webTimeout = 6 * time.Minute

// TestWebAppInChromium drives the embedded web app in headless Chromium
// (web.mjs, with playwright-core) against a real `chatd serve` on a new
// database: first-run setup from the link the server prints, sign-out,
// sign-in, and what a person does next; last, the link chatd dev prints
// opens it signed in. Screenshots land in e2e/screenshots/.
//
// It needs Node, the packages of package.json and Chromium (CHATD_CHROMIUM,
// else /usr/bin/chromium or chromium on the PATH). Without them the test is
// skipped, unless CHATD_E2E_REQUIRED is set, as it is in CI.
func TestWebAppInChromium(t *testing.T) {
	node := nodeWith(t, "node_modules/playwright-core", "e2e/node_modules/playwright-core is missing: run npm ci in e2e/")
	chromium := findChromium()
	if chromium == "" {
		skipWithout(t, "chromium is not installed (apt-get install chromium, or set CHATD_CHROMIUM)")
	}

	shots, err := filepath.Abs("screenshots")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(shots); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	started := time.Now()
	srv := startServer(t, filepath.Join(t.TempDir(), "chatd.db"))
	setupURL := srv.awaitSetup(t).link
	t.Logf("setup link: %s", setupURL)
	// chatd dev's link, for the step that opens the web app signed in.
	dev := startDev(t, nil, "--addr", "127.0.0.1:0", "--agents", "1")

	// Chromium's profile is a directory of the test's own, so that whatever
	// still runs with it after a timeout can be found and ended.
	profile := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), webTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "web.mjs")
	cmd.Env = append(os.Environ(), "CHATD_URL="+srv.url, "SETUP_URL="+setupURL, "CHROMIUM="+chromium,
		"SCREENSHOTS="+shots, "PROFILE_DIR="+profile, "DEV_LINK="+dev.link)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// On timeout: SIGTERM to the script's process group (playwright-core
	// closes its browser on it), then SIGKILL to the group and to every
	// process using the profile (Chromium runs in a process group of its
	// own).
	cmd.Cancel = func() error {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		time.Sleep(3 * time.Second)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		killUsing(profile)
		return nil
	}
	cmd.WaitDelay = 10 * time.Second
	out := &testLog{t: t}
	cmd.Stdout = out
	cmd.Stderr = out
	err = cmd.Run()
	out.flush()
	killUsing(profile)
	t.Logf("browser test took %s; screenshots in %s", time.Since(started).Round(100*time.Millisecond), shots)
	if ctx.Err() != nil {
		t.Fatalf("web.mjs did not finish within %s; it printed:\n%s", webTimeout, out.all())
	}
	if err != nil {
		t.Fatalf("node web.mjs: %v; it printed:\n%s", err, out.all())
	}
	srv.stop(t)
	dev.stop(t)
}

func findChromium() string {
	if p := os.Getenv("CHATD_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		return ""
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// killUsing ends the processes whose command line names dir: the Chromium
// of one test run, found by its own profile directory.
func killUsing(dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte(dir)) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// testLog passes a process's output to t.Log a line at a time, as it comes,
// and keeps all of it for the failure message.
type testLog struct {
	t       *testing.T
	mu      sync.Mutex
	partial []byte
	lines   []string
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.emit(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
}

func (l *testLog) emit(line string) {
	l.lines = append(l.lines, line)
	l.t.Log(line)
}

func (l *testLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.emit(string(l.partial))
		l.partial = nil
	}
}

func (l *testLog) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
