// Package e2e drives chatd with real clients in their own runtimes: the
// phoenix JS client (over the ws transport, as the Band TypeScript SDK uses
// it) against a real `chatd serve`, across a server restart; an agent on
// the official TypeScript MCP client (mcp_test.go); the web app in
// headless Chromium (web_test.go); `chatd dev` and the lines it prints,
// pasted into a shell (dev_test.go); and the sample agents of examples/
// (samples_test.go).
//
// It needs Node and the packages of package.json (`npm ci` in this folder;
// .ci/run does it), Chromium for the web app, Python 3 and the packages of
// examples/node for the sample agents. Without them the tests are skipped,
// unless CHATD_E2E_REQUIRED is set, as it is in CI.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

func TestPhoenixJSAgentAcrossARestart(t *testing.T) {
	if _, err := os.Stat("node_modules/phoenix"); err != nil {
		if os.Getenv("CHATD_E2E_REQUIRED") != "" {
			t.Fatal("e2e/node_modules is missing: run npm ci in e2e/")
		}
		t.Skip("e2e/node_modules is missing: run npm ci in e2e/ to run the JS client test")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	bin := buildChatd(t)
	db := filepath.Join(t.TempDir(), "chatd.db")
	if out, err := exec.Command(bin, "migrate", "--db", db).CombinedOutput(); err != nil {
		t.Fatalf("chatd migrate: %v\n%s", err, out)
	}
	alice := cli(t, bin, "create-user", "--db", db, "--handle", "alice", "--name", "Alice", "--json")
	poster := cli(t, bin, "register-agent", "--db", db, "--name", "Poster", "--json")
	worker := cli(t, bin, "register-agent", "--db", db, "--name", "Worker", "--json")

	addr := freeAddr(t)
	base := "http://" + addr
	srv := serve(t, bin, db, addr)

	agent := exec.Command(node, "agent.mjs")
	agent.Env = append(os.Environ(), "CHATD_URL="+base, "AGENT_KEY="+worker["api_key"], "AGENT_ID="+worker["id"])
	out := &lines{ch: make(chan map[string]any, 1000)}
	stdout, _ := agent.StdoutPipe()
	agent.Stderr = os.Stderr
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	go out.read(stdout)

	out.await(t, "agent_control joined", func(e map[string]any) bool {
		return e["event"] == "joined" && e["topic"] == "agent_control:"+worker["id"]
	})
	out.await(t, "agent_rooms joined", func(e map[string]any) bool {
		return e["event"] == "joined" && e["topic"] == "agent_rooms:"+worker["id"]
	})

	// The poster opens a room with the worker in it: room_added, then the
	// worker joins the room.
	room := call(t, base, poster["api_key"], "POST", "/api/v1/agent/chats", map[string]any{})["id"].(string)
	call(t, base, poster["api_key"], "POST", "/api/v1/agent/chats/"+room+"/participants",
		map[string]any{"participant": map[string]any{"participant_id": worker["id"]}})
	added := out.await(t, "room_added", func(e map[string]any) bool { return e["event"] == "room_added" && e["id"] == room })
	if _, ok := added["status"].(string); !ok {
		t.Fatalf("room_added without a string status: %v", added)
	}
	out.await(t, "chat_room joined", func(e map[string]any) bool { return e["event"] == "joined" && e["topic"] == "chat_room:"+room })

	// A live message: pushed, worked on, processed.
	first := call(t, base, poster["api_key"], "POST", "/api/v1/agent/chats/"+room+"/messages",
		map[string]any{"message": map[string]any{"content": "first task", "mentions": []map[string]string{{"id": worker["id"]}}}})["id"].(string)
	out.await(t, "message_created", func(e map[string]any) bool { return e["event"] == "message_created" && e["id"] == first })
	out.await(t, "first processed", func(e map[string]any) bool { return e["event"] == "processed" && e["id"] == first })

	// The server restarts: clients are told (1012) and reconnect. A message
	// sent while it was down (written to the database directly) is not
	// pushed; the worker catches up with /next when it rejoins.
	srv.stop(t)
	out.await(t, "close 1012", func(e map[string]any) bool { return e["event"] == "close" && e["code"] == float64(1012) })
	second := postWhileDown(t, db, poster["api_key"], room, worker["id"])
	srv = serve(t, bin, db, addr)
	out.await(t, "reopened", func(e map[string]any) bool { return e["event"] == "open" })
	got := out.await(t, "second processed", func(e map[string]any) bool { return e["event"] == "processed" && e["id"] == second })
	if got["via"] != "next" {
		t.Fatalf("the message sent while the server was down arrived via %v, want next", got["via"])
	}

	// What the worker did is what a person reading the room sees.
	msgs := callList(t, base, alice["api_key"], "GET", "/api/v1/me/chats/"+room+"/messages")
	for _, m := range msgs {
		msg := m.(map[string]any)
		status := msg["metadata"].(map[string]any)["delivery_status"].(map[string]any)[worker["id"]].(map[string]any)["status"]
		if status != "processed" {
			t.Fatalf("message %v is %v, want processed", msg["id"], status)
		}
	}
	srv.stop(t)
}

// lines collects the JSON lines the agent prints.
type lines struct {
	ch   chan map[string]any
	seen []map[string]any
}

func (l *lines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			l.ch <- e
		}
	}
	close(l.ch)
}

// await waits for a line satisfying match (lines seen before count too).
func (l *lines) await(t *testing.T, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	for _, e := range l.seen {
		if match(e) {
			return e
		}
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-l.ch:
			if !ok {
				t.Fatalf("the agent exited before %s", what)
			}
			l.seen = append(l.seen, e)
			if match(e) {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s; the agent printed %v", what, l.seen)
		}
	}
}

func buildChatd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "chatd")
	build := exec.Command("go", "build", "-o", bin, "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func cli(t *testing.T, bin string, args ...string) map[string]string {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("chatd %v: %v", args, err)
	}
	var v map[string]string
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type server struct {
	cmd    *exec.Cmd
	done   <-chan struct{}
	stdout *output
}

// output keeps what a process prints, for tests that read it while it runs.
type output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// serve starts chatd serve and waits until it answers. What it prints on
// stdout is kept in stdout.
func serve(t *testing.T, bin, db, addr string) *server {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--db", db, "--addr", addr, "--log-level", "warn")
	s := &server{cmd: cmd, stdout: &output{}}
	cmd.Stdout = s.stdout
	cmd.Stderr = os.Stderr
	s.done = start(t, cmd)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
			res.Body.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatal("chatd serve did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// start starts cmd and returns a channel closed once it has exited. A
// process still running when the test ends is killed.
func start(t *testing.T, cmd *exec.Cmd) <-chan struct{} {
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

func (s *server) stop(t *testing.T) {
	t.Helper()
	terminate(t, s.cmd, s.done, "chatd serve", 30*time.Second)
}

// terminate sends SIGTERM to what start started and wants it to exit 0
// within the time given.
func terminate(t *testing.T, cmd *exec.Cmd, done <-chan struct{}, what string, within time.Duration) {
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

// postWhileDown writes a message straight into the database of a stopped
// server, as the poster agent.
func postWhileDown(t *testing.T, db, posterKey, room, workerID string) string {
	t.Helper()
	schema, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(db, store.Options{Schema: string(schema)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	p, err := st.Authenticate(ctx, posterKey)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.SendText(ctx, p.Actor(), room, store.TextInput{Content: "sent while the server was down",
		Mentions: []store.MentionInput{{ID: &workerID}}})
	if err != nil {
		t.Fatal(err)
	}
	return msg.ID
}

func request(t *testing.T, base, key, method, path string, body any) map[string]any {
	t.Helper()
	return requestWith(t, base, "X-API-Key", key, method, path, body)
}

// requestWith makes a request authenticated by one header (an API key, a
// bearer token), wants a 2xx answer and returns its decoded body.
func requestWith(t *testing.T, base, header, credential, method, path string, body any) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set(header, credential)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, b)
	}
	return v
}

func call(t *testing.T, base, key, method, path string, body any) map[string]any {
	t.Helper()
	d, ok := request(t, base, key, method, path, body)["data"].(map[string]any)
	if !ok {
		t.Fatalf("%s %s: no data object", method, path)
	}
	return d
}

func callList(t *testing.T, base, key, method, path string) []any {
	t.Helper()
	d, ok := request(t, base, key, method, path, nil)["data"].([]any)
	if !ok {
		t.Fatalf("%s %s: no data array", method, path)
	}
	return d
}
