package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// serverProc is a running `chatd serve`.
type serverProc struct {
	cmd  *exec.Cmd
	done <-chan struct{}
	url  string
	// bound is the address serve says it is bound to when that is every
	// interface (0.0.0.0:port, [::]:port); url is then the one to open.
	bound  string
	stderr *liveOutput
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
	listening = regexp.MustCompile(`listening on (?:(\S+) \(all interfaces\); open )?(http://\S+)`)
	metricsAt = regexp.MustCompile(`^metrics at (http://\S+)`)
	setupAt   = regexp.MustCompile(`^Open this link within (\d+) minutes to create the first account: (\S+)$`)
	setupCurl = regexp.MustCompile(`^or without a browser:  curl -X POST (http://\S+)/api/v1/auth/setup -d '\{"token": "(band_s_\w+)"`)
)

// startServer runs `chatd serve --addr 127.0.0.1:0` on db with flags (an
// --addr among them wins) and waits until it listens. The process is
// killed when the test ends if it is still running.
func startServer(t testing.TB, db string, flags ...string) *serverProc {
	t.Helper()
	cmd := chatdCommand(nil, append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, flags...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, stderr: &liveOutput{}, metrics: make(chan string, 1), setup: make(chan setupPrint, 1)}
	cmd.Stderr = p.stderr
	p.done = start(t, cmd)
	urls := make(chan string, 1)
	go p.read(stdout, urls)
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

// read hands what the server prints to the channels that wait for it.
func (p *serverProc) read(stdout io.Reader, urls chan<- string) {
	sc := bufio.NewScanner(stdout)
	var setup setupPrint
	for sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			p.bound = m[1]
			urls <- m[2]
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
}

// awaitSetup waits for the setup link serve prints for an empty database.
func (p *serverProc) awaitSetup(t testing.TB) setupPrint {
	t.Helper()
	return awaitPrinted(t, p.setup, "setup link for an empty database")
}

// awaitMetrics waits for the URL of the metrics listener (--metrics-addr).
func (p *serverProc) awaitMetrics(t testing.TB) string {
	t.Helper()
	return awaitPrinted(t, p.metrics, "metrics URL")
}

// awaitPrinted waits for what the server printed and read passed on.
func awaitPrinted[T any](t testing.TB, printed <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-printed:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s printed", what)
		var none T
		return none
	}
}

// stop ends the server with SIGTERM, as a service manager does, and wants
// it to exit 0.
func (p *serverProc) stop(t testing.TB) {
	t.Helper()
	if code := p.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("chatd serve exited %d on SIGTERM: %s", code, p.stderr)
	}
}

// kill ends the server with SIGKILL: no shutdown, no checkpoint.
func (p *serverProc) kill(t testing.TB) {
	t.Helper()
	p.signal(t, syscall.SIGKILL)
}

// signal sends sig, waits for the server to exit and returns its exit code.
func (p *serverProc) signal(t testing.TB, sig syscall.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("chatd serve did not stop on %v", sig)
	}
	return p.cmd.ProcessState.ExitCode()
}

// send makes one request to base+path with headers and, unless nil, body
// as JSON, and returns the answer's status and body.
func send(base, method, path string, headers map[string]string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, base+path, rd)
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

// apiKey is the header of a request made with an API key; none for "".
func apiKey(key string) map[string]string {
	if key == "" {
		return nil
	}
	return map[string]string{"X-API-Key": key}
}

// bearer is the header of a request made with a person's session token.
func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// try makes one request to the server with an API key (none for ""); an
// error means the server did not answer.
func (p *serverProc) try(method, path, key string, body any) (int, []byte, error) {
	return send(p.url, method, path, apiKey(key), body)
}

// call makes one request to the server, which must answer.
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

// createRoom creates a room of the person with key, with the participants
// (agent or person ids) in it, and returns its id.
func (p *serverProc) createRoom(t testing.TB, key string, participants ...string) string {
	t.Helper()
	status, body := p.call(t, "POST", "/api/v1/me/chats", key, map[string]any{})
	id, ok := createdID(body)
	if status != 201 || !ok {
		t.Fatalf("create room: %d %s", status, body)
	}
	for _, participant := range participants {
		if status, body := p.call(t, "POST", "/api/v1/me/chats/"+id+"/participants", key,
			map[string]any{"participant": map[string]any{"participant_id": participant}}); status != 201 {
			t.Fatalf("add %s: %d %s", participant, status, body)
		}
	}
	return id
}

// createdID is the id of what an answer's data object describes.
func createdID(body []byte) (string, bool) {
	var out struct{ Data struct{ ID string } }
	if json.Unmarshal(body, &out) != nil || out.Data.ID == "" {
		return "", false
	}
	return out.Data.ID, true
}

// upload sends a file to a room as the person with key, named big.bin and
// declaring sha as its SHA-256, and returns the answer unread.
func (p *serverProc) upload(key, room string, body io.Reader, sha string) (*http.Response, error) {
	req, err := http.NewRequest("POST", p.url+"/api/v1/me/chats/"+room+"/files", body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", key)
	req.Header.Set("X-File-Name", "big.bin")
	req.Header.Set("X-File-Sha256", sha)
	return http.DefaultClient.Do(req)
}

// scrapeMetrics reads what the metrics listener at metricsURL serves.
func scrapeMetrics(t testing.TB, metricsURL string) string {
	t.Helper()
	res, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return string(body)
}

// answer makes a request with headers that must succeed (2xx) and returns
// its decoded body.
func answer(t testing.TB, base string, headers map[string]string, method, path string, body any) map[string]any {
	t.Helper()
	status, b, err := send(base, method, path, headers, body)
	if err != nil {
		t.Fatal(err)
	}
	if status >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, status, b)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, b)
	}
	return v
}

// dataObject is the data object of a request that must succeed.
func dataObject(t testing.TB, base string, headers map[string]string, method, path string, body any) map[string]any {
	t.Helper()
	d, ok := answer(t, base, headers, method, path, body)["data"].(map[string]any)
	if !ok {
		t.Fatalf("%s %s: no data object", method, path)
	}
	return d
}

// dataArray is the data array of a listing that must succeed.
func dataArray(t testing.TB, base string, headers map[string]string, path string) []any {
	t.Helper()
	d, ok := answer(t, base, headers, "GET", path, nil)["data"].([]any)
	if !ok {
		t.Fatalf("GET %s: no data array", path)
	}
	return d
}

// signIn signs in with a handle and password and returns the status.
func signIn(t testing.TB, base, handle, password string) int {
	t.Helper()
	status, _, err := send(base, "POST", "/api/v1/auth/sign-in", nil, map[string]string{"handle": handle, "password": password})
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// dialSocket opens the server's real-time socket with the credential in
// query (api_key=… or token=…).
func (p *serverProc) dialSocket(query string) (net.Conn, error) {
	return dialWebSocket(strings.Replace(p.url, "http", "ws", 1)+"/api/v1/socket/websocket?vsn=2.0.0&"+query, nil)
}

// dialWebSocket opens a WebSocket at u with header. Reading the connection
// returns first what the dialer read past the handshake, so that no frame
// the server sent at once is lost.
func dialWebSocket(u string, header http.Header) (net.Conn, error) {
	conn, br, _, err := ws.Dialer{Header: ws.HandshakeHeaderHTTP(header), Timeout: 10 * time.Second}.Dial(context.Background(), u)
	if err != nil {
		return nil, err
	}
	if br != nil {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

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
