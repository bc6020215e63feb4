// Package e2e holds every test that drives the built chatd binary, or a
// real client in its own runtime, as a user would: crashes (SIGKILL in the
// middle of writes, checkpoints and backups), overload, slow clients,
// socket memory, backup and restore, every command of the CLI, the
// manual's examples run with bash and curl, `chatd dev` and the lines it
// prints pasted into a shell, the phoenix JS client across a server
// restart, an agent on the official TypeScript MCP client, the sample
// agents of examples/, and the web app in headless Chromium.
//
// TestMain builds the binary once, from the module's root, for every test.
// Most tests need nothing more. Those of the phoenix JS client and the web
// app need Node and the packages of package.json (`npm ci` in this folder;
// .ci/run does it), the web app Chromium as well, and the sample agents
// Python 3 and the packages of examples/node; the manual's examples need
// bash, curl and jq. Without them those tests are skipped, unless
// CHATD_E2E_REQUIRED is set, as it is in CI.
package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
)

// chatdBin is the chatd binary every test runs, built once by TestMain.
var chatdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "chatd-bin-")
	if err != nil {
		panic(err)
	}
	chatdBin = filepath.Join(dir, "chatd")
	build := exec.Command("go", "build", "-o", chatdBin, ".")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building chatd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := pgtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// skipWithout skips a test that needs a runtime, a package or a tool that
// is not installed, saying which in why; under CHATD_E2E_REQUIRED, as in
// CI, it fails the test instead.
func skipWithout(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CHATD_E2E_REQUIRED") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// skipIfShort skips a long test under go test -short, saying what makes it
// long.
func skipIfShort(t *testing.T, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip(why)
	}
}

// nodeWith is the node binary, for a test that also needs the Node
// packages in dir; without either the test is skipped (see skipWithout),
// why saying how to install the packages.
func nodeWith(t *testing.T, dir, why string) string {
	t.Helper()
	if _, err := os.Stat(dir); err != nil {
		skipWithout(t, why)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skipWithout(t, "node is not installed")
	}
	return node
}

// chatdCommand is the binary with args, in an environment without CHATD_*
// variables but env, so that the settings of whoever runs the tests never
// reach it.
func chatdCommand(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(chatdBin, args...)
	cmd.Env = append(cleanEnv(), env...)
	return cmd
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHATD_") {
			env = append(env, kv)
		}
	}
	return env
}

// commandResult is what a command printed, and its exit code.
type commandResult struct {
	stdout, stderr string
	code           int
}

// runChatd runs the binary with args (see chatdCommand for env) and no
// standard input, and returns what it printed.
func runChatd(t testing.TB, env []string, args ...string) commandResult {
	t.Helper()
	return runCommand(t, chatdCommand(env, args...))
}

// runChatdWithInput runs the binary with stdin as its standard input.
func runChatdWithInput(t testing.TB, stdin string, args ...string) commandResult {
	t.Helper()
	cmd := chatdCommand(nil, args...)
	cmd.Stdin = strings.NewReader(stdin)
	return runCommand(t, cmd)
}

func runCommand(t testing.TB, cmd *exec.Cmd) commandResult {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return commandResult{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
}

// ok fails the test unless the command succeeded.
func (r commandResult) ok(t testing.TB) commandResult {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return r
}

// failsWithOneLine fails the test unless the command failed with exactly one
// line on stderr containing want, besides the line naming the database.
func (r commandResult) failsWithOneLine(t testing.TB, want string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("succeeded; stdout: %s", r.stdout)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) > 1 && strings.HasPrefix(lines[0], "chatd: database ") {
		lines = lines[1:]
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "chatd: ") {
		t.Fatalf("stderr is not one chatd: line: %q", r.stderr)
	}
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr %q does not mention %q", r.stderr, want)
	}
}

// newDatabase creates an empty database at path with chatd migrate (the
// commands that add people and agents do not create one) and returns path.
func newDatabase(t testing.TB, path string) string {
	t.Helper()
	runChatd(t, nil, "migrate", "--db", path).ok(t)
	return path
}

// newDatabaseWithAlice creates a database in a directory of its own with
// one person in it, @alice, and returns its path and her.
func newDatabaseWithAlice(t testing.TB) (string, created) {
	t.Helper()
	db := newDatabase(t, filepath.Join(t.TempDir(), "chatd.db"))
	return db, createUser(t, db, "alice", "Alice")
}

// created is the --json output of create-user, register-agent and
// rotate-agent-key.
type created struct {
	ID     string `json:"id"`
	Handle string `json:"handle"`
	APIKey string `json:"api_key"`
}

func parseCreated(t testing.TB, stdout string) created {
	t.Helper()
	var c created
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("--json output %q: %v", stdout, err)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); strings.TrimSpace(string(rest)) != "" {
		t.Fatalf("--json printed more than one object: %q", stdout)
	}
	if c.ID == "" || c.Handle == "" || c.APIKey == "" {
		t.Fatalf("--json output incomplete: %q", stdout)
	}
	return c
}

// createUser adds a person to the database with chatd create-user.
func createUser(t testing.TB, db, handle, name string) created {
	t.Helper()
	return parseCreated(t, runChatd(t, nil, "create-user", "--db", db, "--handle", handle, "--name", name, "--json").ok(t).stdout)
}

// registerAgent adds an agent to the database with chatd register-agent
// and its flags (--name and --description at least).
func registerAgent(t testing.TB, db string, flags ...string) created {
	t.Helper()
	args := append(append([]string{"register-agent", "--db", db}, flags...), "--json")
	return parseCreated(t, runChatd(t, nil, args...).ok(t).stdout)
}

// start starts cmd and returns a channel closed once it has exited. A
// process still running when the test ends is killed.
func start(t testing.TB, cmd *exec.Cmd) <-chan struct{} {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})
	return done
}

// terminate sends SIGTERM to what start started and wants it to exit 0
// within the time given.
func terminate(t testing.TB, cmd *exec.Cmd, done <-chan struct{}, what string, within time.Duration) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("%s did not stop within %s of SIGTERM", what, within)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("%s exited %d on SIGTERM", what, code)
	}
}

// liveOutput keeps what a process prints, for tests that read it while it
// runs.
type liveOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *liveOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *liveOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
