package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// chatdBin is the chatd binary built once for the process-level tests.
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
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newDatabase creates an empty database at path with chatd migrate (the
// commands that add people and agents do not create one) and returns path.
func newDatabase(t testing.TB, path string) string {
	t.Helper()
	chatd(t, nil, "migrate", "--db", path).ok(t)
	return path
}

type result struct {
	stdout, stderr string
	code           int
}

// chatd runs the binary with args and an environment without CHATD_*
// variables (unless given in env), and returns what it printed.
func chatd(t testing.TB, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(chatdBin, args...)
	cmd.Env = append(cleanEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
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

// ok fails the test unless the command succeeded.
func (r result) ok(t testing.TB) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return r
}

// failsWithOneLine fails the test unless the command failed with exactly one
// line on stderr containing want, besides the line naming the database.
func (r result) failsWithOneLine(t testing.TB, want string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("succeeded; stdout: %s", r.stdout)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) > 1 && strings.HasPrefix(lines[0], "chatd: database /") {
		lines = lines[1:]
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "chatd: ") {
		t.Fatalf("stderr is not one chatd: line: %q", r.stderr)
	}
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr %q does not mention %q", r.stderr, want)
	}
}

// created is the --json output of create-user and register-agent.
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

// serverProc is a running `chatd serve`.
type serverProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *bytes.Buffer
	done   chan error
	// metrics receives the metrics URL if the server prints one.
	metrics chan string
	// setup receives the first-run setup link and its curl alternative if
	// the server prints them.
	setup chan setupPrint
}

// setupPrint is what serve prints for an empty database: the link (and the
// minutes it works) and the curl command that spends the same token.
type setupPrint struct {
	minutes, link       string
	curlBase, curlToken string
}

var (
	listening = regexp.MustCompile(`listening on (http://\S+)`)
	metricsAt = regexp.MustCompile(`^metrics at (http://\S+)`)
	setupAt   = regexp.MustCompile(`^Open this link within (\d+) minutes to create the first account: (\S+)$`)
	setupCurl = regexp.MustCompile(`^or without a browser:  curl -X POST (http://\S+)/api/v1/auth/setup -d '\{"token": "(band_s_\w+)"`)
)

// startServer runs `chatd serve --addr 127.0.0.1:0` on db and waits until it
// listens. The process is killed when the test ends if it is still running.
func startServer(t testing.TB, db string, extra ...string) *serverProc {
	t.Helper()
	args := append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(chatdBin, args...)
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1), metrics: make(chan string, 1), setup: make(chan setupPrint, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		var setup setupPrint
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
			if m := metricsAt.FindStringSubmatch(sc.Text()); m != nil {
				p.metrics <- m[1]
			}
			if m := setupAt.FindStringSubmatch(sc.Text()); m != nil {
				setup.minutes, setup.link = m[1], m[2]
			}
			if m := setupCurl.FindStringSubmatch(sc.Text()); m != nil && setup.link != "" {
				setup.curlBase, setup.curlToken = m[1], m[2]
				p.setup <- setup
			}
		}
		close(urls)
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("chatd serve exited before listening: %s", p.stderr)
		}
		p.url = u
	case <-time.After(60 * time.Second):
		t.Fatalf("chatd serve did not start: %s", p.stderr)
	}
	return p
}

// stop sends sig and returns the exit code.
func (p *serverProc) stop(t testing.TB, sig syscall.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("chatd serve did not stop")
	}
	return p.cmd.ProcessState.ExitCode()
}

// call makes one request to a running server.
func (p *serverProc) call(t testing.TB, method, path, key string, body any) (int, []byte) {
	t.Helper()
	status, b, err := p.try(method, path, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, b
}

// eachItem pages through a cursor-paged listing (path without a cursor,
// with its own query) and hands each item's JSON to fn.
func (p *serverProc) eachItem(t testing.TB, path, key string, fn func(item json.RawMessage)) {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	cursor := ""
	for {
		page := path
		if cursor != "" {
			page += sep + "cursor=" + url.QueryEscape(cursor)
		}
		status, body := p.call(t, "GET", page, key, nil)
		var out struct {
			Data     []json.RawMessage
			Metadata struct {
				HasMore    bool    `json:"has_more"`
				NextCursor *string `json:"next_cursor"`
			}
		}
		if status != 200 || json.Unmarshal(body, &out) != nil {
			t.Fatalf("GET %s: %d %s", page, status, body)
		}
		for _, item := range out.Data {
			fn(item)
		}
		if !out.Metadata.HasMore || out.Metadata.NextCursor == nil {
			return
		}
		cursor = *out.Metadata.NextCursor
	}
}

func (p *serverProc) try(method, path, key string, body any) (int, []byte, error) {
	h := map[string]string{}
	if key != "" {
		h["X-API-Key"] = key
	}
	return p.send(method, path, h, body)
}

// tryWith makes a body-less request with the given headers.
func (p *serverProc) tryWith(method, path string, headers map[string]string) (int, []byte, error) {
	return p.send(method, path, headers, nil)
}

func (p *serverProc) send(method, path string, headers map[string]string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, p.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// wsReadWriter is a dialled WebSocket for wsutil's readers (which answer
// control frames): the connection, read after what the dialer buffered.
func wsReadWriter(conn net.Conn, br *bufio.Reader) io.ReadWriter {
	rd := io.Reader(conn)
	if br != nil {
		rd = io.MultiReader(br, conn)
	}
	return struct {
		io.Reader
		io.Writer
	}{rd, conn}
}

// writeStorm is writers concurrent loops of write(w, i) against a server,
// keeping the ids it acknowledged; a writer ends when write says so (the
// server is gone, or refused).
type writeStorm struct {
	mu    sync.Mutex
	acked []string
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startWriteStorm(writers int, write func(w, i int) (id string, ok bool)) *writeStorm {
	s := &writeStorm{stop: make(chan struct{})}
	for w := 0; w < writers; w++ {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-s.stop:
					return
				default:
				}
				id, ok := write(w, i)
				if !ok {
					return
				}
				s.mu.Lock()
				s.acked = append(s.acked, id)
				s.mu.Unlock()
			}
		}()
	}
	return s
}

// ackedSoFar is a copy of the ids acknowledged until now.
func (s *writeStorm) ackedSoFar() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.acked...)
}

// waitFor waits until n writes were acknowledged, or a minute passed.
func (s *writeStorm) waitFor(n int) {
	deadline := time.Now().Add(60 * time.Second)
	for len(s.ackedSoFar()) < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// halt stops the writers and waits for them.
func (s *writeStorm) halt() {
	close(s.stop)
	s.wg.Wait()
}
