package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveOnSocket serves ts's server as chatd serve does, with Serve on a
// real listener, and returns its address.
func (ts *testServer) serveOnSocket(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ts.srv.Serve(ctx, ln, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// wireResponse is one response read off a connection.
type wireResponse struct {
	status int
	header http.Header
	body   []byte
}

// exchange sends raw on a new connection to addr and reads the responses,
// waiting up to timeout: as many as raw holds whole requests; then, if
// anything follows those, it half-closes the connection and reads what
// comes until the server closes it. It stops early after a 101. It also
// returns every byte read. A response cut short by the server closing is
// not an error: what was read of it is in the bytes. The half-close waits
// for the answers to the whole requests: net/http cancels the context of a
// request whose client half-closes while it is served.
func exchange(addr, raw string, timeout time.Duration) ([]wireResponse, []byte, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, raw); err != nil && !isReset(err) {
		return nil, nil, err
	}
	var seen bytes.Buffer
	br := bufio.NewReader(io.TeeReader(conn, &seen))
	methods, more := requestMethods(raw)
	var out []wireResponse
	for {
		if len(out) >= len(methods) {
			if !more {
				return out, seen.Bytes(), nil
			}
			_ = conn.(*net.TCPConn).CloseWrite()
		}
		if _, err := br.Peek(1); err != nil {
			if err == io.EOF || isReset(err) {
				return out, seen.Bytes(), nil
			}
			return out, seen.Bytes(), fmt.Errorf("%d responses of %d: %w", len(out), len(methods), err)
		}
		req := &http.Request{Method: "GET"}
		if len(out) < len(methods) {
			req.Method = methods[len(out)]
		}
		res, err := http.ReadResponse(br, req)
		if err != nil {
			if isReset(err) || errors.Is(err, io.ErrUnexpectedEOF) {
				return out, seen.Bytes(), nil
			}
			return out, seen.Bytes(), fmt.Errorf("not an HTTP response: %v", err)
		}
		if res.StatusCode == http.StatusSwitchingProtocols {
			return append(out, wireResponse{status: res.StatusCode, header: res.Header}), seen.Bytes(), nil
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if req.Method == http.MethodHead && res.Close && err == nil {
			// The request may not have been read as HEAD at all (a
			// refusal has a body whatever the method): what follows the
			// head until the server closes is this response's.
			body, err = io.ReadAll(br)
		}
		if err != nil && !isReset(err) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return out, seen.Bytes(), err
		}
		if res.StatusCode >= 200 {
			out = append(out, wireResponse{status: res.StatusCode, header: res.Header, body: body})
		}
	}
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// requestMethods reads the methods of the whole requests in raw, as the
// server will (a response to HEAD has no body, whatever its length says),
// and whether anything follows them. A request whose body is cut short is
// not counted: the server waits for the rest of it.
func requestMethods(raw string) (methods []string, more bool) {
	r := strings.NewReader(raw)
	br := bufio.NewReader(r)
	for len(methods) < 100 {
		req, err := http.ReadRequest(br)
		if err != nil {
			break
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			break
		}
		methods = append(methods, req.Method)
		if r.Len()+br.Buffered() == 0 {
			return methods, false
		}
	}
	return methods, len(raw) > 0
}

// envelopeProblem says what keeps r from being an error answer as every
// chatd error is ("" if nothing does): the envelope in JSON, its request id
// in x-request-id.
func envelopeProblem(r wireResponse, head bool) string {
	id := r.header.Get("X-Request-Id")
	switch {
	case id == "":
		return "no x-request-id"
	case r.header.Get("Content-Type") != "application/json":
		return fmt.Sprintf("content type %q", r.header.Get("Content-Type"))
	case head:
		return ""
	}
	var env struct {
		Error *struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || env.Error == nil {
		return fmt.Sprintf("body is not the envelope: %q", r.body)
	}
	if env.Error.Code == "" || env.Error.Message == "" || env.Error.RequestID != id {
		return fmt.Sprintf("envelope %q lacks a code or message, or its request id is not %s", r.body, id)
	}
	return ""
}

func (r wireResponse) code(t testing.TB) string {
	t.Helper()
	var env struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil {
		t.Fatalf("not JSON: %q", r.body)
	}
	code, _ := env.Error["code"].(string)
	return code
}

// Every request net/http refuses before a handler runs is answered in the
// envelope, with its status and a code of its own, then the connection
// closes; nothing is changed.
func TestEarlyRefusalsAnswerInTheEnvelope(t *testing.T) {
	ts := newTestServer(t)
	addr := ts.serveOnSocket(t)
	const host = "Host: chatd\r\n"
	for _, tc := range []struct {
		name, request string
		status        int
		code          string
	}{
		{"an invalid escape in the path", "GET /api/v1/agent/chats/%zz HTTP/1.1\r\n" + host + "\r\n", 400, "malformed_request"},
		{"an invalid escape in the query", "GET /healthz?a=%zz%%% HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n", 200, ""},
		{"a request line of one word", "GARBAGE\r\n" + host + "\r\n", 400, "malformed_request"},
		{"a request line without a version", "GET /healthz\r\n" + host + "\r\n", 400, "malformed_request"},
		{"a space in the target", "GET /a b HTTP/1.1\r\n" + host + "\r\n", 400, "malformed_request"},
		{"a target that is not a path", "GET healthz HTTP/1.1\r\n" + host + "\r\n", 400, "malformed_request"},
		{"headers over the limit", "GET /healthz HTTP/1.1\r\n" + host + "X-Pad: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", 431, "headers_too_large"},
		{"many headers over the limit", "GET /healthz HTTP/1.1\r\n" + host + strings.Repeat("X-Pad: "+strings.Repeat("a", 1000)+"\r\n", 80) + "\r\n", 431, "headers_too_large"},
		{"a header line without a colon", "GET /healthz HTTP/1.1\r\n" + host + "no colon here\r\n\r\n", 400, "malformed_request"},
		{"a header name with a space", "GET /healthz HTTP/1.1\r\n" + host + "Bad Name: x\r\n\r\n", 400, "invalid_header"},
		{"a header value with a control character", "GET /healthz HTTP/1.1\r\n" + host + "X-A: a\x01b\r\n\r\n", 400, "malformed_request"},
		{"a line folded into Host", "GET /healthz HTTP/1.1\r\n" + host + " folded\r\n\r\n", 400, "invalid_host"},
		{"a folded first header line", "GET /healthz HTTP/1.1\r\n folded\r\n" + host + "\r\n", 400, "malformed_request"},
		{"no Host", "GET /healthz HTTP/1.1\r\n\r\n", 400, "host_required"},
		{"a malformed Host", "GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "invalid_host"},
		{"two Hosts", "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "malformed_request"},
		{"the HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "http_version_not_supported"},
		{"HTTP/3.0", "GET /healthz HTTP/3.0\r\n" + host + "\r\n", 505, "http_version_not_supported"},
		{"HTTP/0.9", "GET /healthz HTTP/0.9\r\n" + host + "\r\n", 505, "http_version_not_supported"},
		{"a version that is no version", "GET /healthz HTTP/1.x\r\n" + host + "\r\n", 400, "malformed_request"},
		{"Transfer-Encoding gzip", "POST /api/v1/agent/chats HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip\r\n\r\n", 501, "unsupported_transfer_encoding"},
		{"Transfer-Encoding chunked twice", "POST /api/v1/agent/chats HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked, chunked\r\n\r\n", 501, "unsupported_transfer_encoding"},
		{"a Content-Length that is no number", "POST /api/v1/agent/chats HTTP/1.1\r\n" + host + "Content-Length: two\r\n\r\n", 400, "malformed_request"},
		{"two Content-Lengths", "POST /api/v1/agent/chats HTTP/1.1\r\n" + host + "Content-Length: 1\r\nContent-Length: 2\r\n\r\n{}", 400, "malformed_request"},
		{"a negative Content-Length", "POST /api/v1/agent/chats HTTP/1.1\r\n" + host + "Content-Length: -1\r\n\r\n", 400, "malformed_request"},
		{"an Expect other than 100-continue", "GET /healthz HTTP/1.1\r\n" + host + "Expect: a-miracle\r\n\r\n", 417, "expectation_failed"},
		{"an Expect over HTTP/1.0", "GET /healthz HTTP/1.0\r\nExpect: a-miracle\r\n\r\n", 417, "expectation_failed"},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n", 405, "method_not_allowed"},
		{"a bad request after a good one on the same connection", "GET /healthz HTTP/1.1\r\n" + host + "\r\nGARBAGE\r\n\r\n", 400, "malformed_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.snapshot(t)
			responses, raw, err := exchange(addr, tc.request, 10*time.Second)
			if err != nil {
				t.Fatalf("%v; read %q", err, raw)
			}
			if len(responses) == 0 {
				t.Fatalf("no response; read %q", raw)
			}
			last := responses[len(responses)-1]
			if last.status != tc.status {
				t.Fatalf("status %d, want %d; read %q", last.status, tc.status, raw)
			}
			if tc.status < 300 {
				return
			}
			if p := envelopeProblem(last, false); p != "" {
				t.Fatalf("%s; read %q", p, raw)
			}
			if code := last.code(t); code != tc.code {
				t.Fatalf("code %q, want %q; read %q", code, tc.code, raw)
			}
			if bytes.Contains(raw, []byte("text/plain")) {
				t.Fatalf("text/plain on the wire: %q", raw)
			}
			ts.unchanged(t, before)
		})
	}
}

// What a handler writes is never taken for a refusal, even bytes that are
// exactly one: a file holding net/http's 400 downloads as it is, on a new
// connection and on one that served a request before.
func TestHandlerOutputIsNeverRewritten(t *testing.T) {
	ts := newTestServer(t)
	u, _ := ts.user("alice")
	_, agentKey := ts.agent(u, "Helper")
	room := ts.room(t, agentKey)
	addr := ts.serveOnSocket(t)
	content := "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"
	up := ts.do(t, "POST", "/api/v1/agent/chats/"+room+"/files",
		fileHeaders(agentKey, "refusal.txt", hexDigest([]byte(content)), "text/plain"), []byte(content))
	expect(t, up, 201, "")
	get := "GET /api/v1/agent/chats/" + room + "/files/" + up.data(t)["id"].(string) + " HTTP/1.1\r\nHost: chatd\r\nX-API-Key: " + agentKey + "\r\n\r\n"
	responses, raw, err := exchange(addr, get+strings.Replace(get, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(responses) != 2 {
		t.Fatalf("%d responses; read %q", len(responses), raw)
	}
	for _, r := range responses {
		if r.status != 200 || string(r.body) != content {
			t.Fatalf("download: %d %q", r.status, r.body)
		}
	}
}

// The WebSocket upgrade works through the wrapped connections: the upgrade
// hijacks them, and a heartbeat gets its reply.
func TestSocketUpgradesOnTheServedListener(t *testing.T) {
	ts := newTestServer(t)
	u, _ := ts.user("alice")
	a, agentKey := ts.agent(u, "Helper")
	addr := ts.serveOnSocket(t)
	target := "ws://" + addr + "/api/v1/socket/websocket?" + url.Values{"vsn": {"2.0.0"}, "api_key": {agentKey}}.Encode()
	s, err := dialRaw(t, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.send(t, `["1","1","agent_rooms:`+a.ID+`","phx_join",{}]`)
	if msg := s.next(t); msg[3] != "phx_reply" || msg[4].(map[string]any)["status"] != "ok" {
		t.Fatalf("join: %v", msg)
	}
	s.send(t, `[null,"2","phoenix","heartbeat",{}]`)
	if msg := s.next(t); msg[1] != "2" || msg[3] != "phx_reply" {
		t.Fatalf("heartbeat: %v", msg)
	}
}

// A refusal written in pieces is still recognized, and anything else
// written outside a handler goes out as it was, in pieces or not, as does
// everything written while a handler owns the connection.
func TestRefusalConnWritesInPieces(t *testing.T) {
	ts := newTestServer(t)
	l := &refusalListener{s: ts.srv, maxHeader: 64 << 10}
	const tooLarge = "HTTP/1.1 431 Request Header Fields Too Large\r\n" + plainRefusalHead + "431 Request Header Fields Too Large"
	const notFound = "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n404 page not found"
	for _, tc := range []struct {
		name     string
		written  string
		piece    int
		handling bool
		want     string // "" for the envelope
	}{
		{"a refusal at once", tooLarge, len(tooLarge), false, ""},
		{"a refusal a byte at a time", tooLarge, 1, false, ""},
		{"a refusal in three pieces", tooLarge, 40, false, ""},
		{"a refusal followed by more", tooLarge + "!", len(tooLarge) + 1, false, tooLarge + "!"},
		{"a refusal cut short", tooLarge[:60], 7, false, tooLarge[:60]},
		{"another answer", notFound, 5, false, notFound},
		{"a success", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 3, false, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
		{"not HTTP", "hello", 2, false, "hello"},
		{"a handler's bytes", tooLarge, 1, true, tooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, client := net.Pipe()
			c := &refusalConn{Conn: server, l: l}
			c.handling.Store(tc.handling)
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(client)
				got <- b
			}()
			for rest := tc.written; rest != ""; {
				n := min(tc.piece, len(rest))
				if w, err := c.Write([]byte(rest[:n])); w != n || err != nil {
					t.Fatalf("Write = %d, %v", w, err)
				}
				rest = rest[n:]
			}
			c.Close()
			b := <-got
			if tc.want != "" {
				if string(b) != tc.want {
					t.Fatalf("sent %q, want %q", b, tc.want)
				}
				return
			}
			res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
			if err != nil {
				t.Fatalf("%v: %q", err, b)
			}
			body, _ := io.ReadAll(res.Body)
			r := wireResponse{status: res.StatusCode, header: res.Header, body: body}
			if p := envelopeProblem(r, false); p != "" || r.status != 431 || r.code(t) != "headers_too_large" {
				t.Fatalf("%s: %q", p, b)
			}
		})
	}
}
