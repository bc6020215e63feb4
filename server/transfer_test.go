package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// The minimum transfer rate (transfer.go), with a transfer timeout of a
// second so that the tests are quick: a body that does not deliver 16 KiB
// in a second of waiting is cut with 408, a client that takes nothing of a
// response for a second is cut off, and a slow but steady transfer goes
// through however long it takes.

const testTransferTimeout = time.Second

// closeBound is how soon after the timeout a cut connection must be closed:
// generous, since the tests share a loaded machine, yet far below the time
// the trickles below would take to finish.
const closeBound = 10 * time.Second

func TestSlowRequestBodiesAreCut(t *testing.T) {
	k := newFilesWorld(t, func(c *Config) { c.TransferTimeout = testTransferTimeout })
	files := k.files(k.helperKey, k.room)
	upload := func(length string) string {
		return "POST " + files + " HTTP/1.1\r\nHost: chatd\r\nX-API-Key: " + k.helperKey +
			"\r\nX-File-Name: slow.bin\r\nX-File-Sha256: " + hexDigest(nil) + "\r\n" + length + "\r\n"
	}
	createRoom := func(key, length string) string {
		return "POST /api/v1/agent/chats HTTP/1.1\r\nHost: chatd\r\nX-API-Key: " + key +
			"\r\nContent-Type: application/json\r\n" + length + "\r\n"
	}
	for _, tc := range []struct {
		name   string
		head   string
		send   func(io.Writer)
		status int
		code   string
	}{
		{"a JSON body a byte every 100 ms", createRoom(k.helperKey, "Content-Length: 1000"), trickle(100*time.Millisecond, 1000), 408, "request_timeout"},
		{"a chunked JSON body that stops", createRoom(k.helperKey, "Transfer-Encoding: chunked"), sendThenStall([]byte("2\r\n{ \r\n")), 408, "request_timeout"},
		{"an upload a byte every 100 ms", upload("Content-Length: 1000"), trickle(100*time.Millisecond, 1000), 408, "request_timeout"},
		{"an upload that stops after 40 KiB", upload("Content-Length: 100000"), sendThenStall(make([]byte, 40<<10)), 408, "request_timeout"},
		{"a chunked upload that stops", upload("Transfer-Encoding: chunked"), sendThenStall([]byte("4\r\nabcd\r\n")), 408, "request_timeout"},
		// The handler answers without reading the body; net/http still
		// reads some of it, under the same limit, before answering.
		{"a body the handler refuses unread", createRoom("band_a_wrong", "Content-Length: 1000"), trickle(100*time.Millisecond, 1000), 401, "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := k.ts.snapshot(t)
			r, closing, closedAfter := k.ts.rawExchange(t, tc.head, tc.send)
			expect(t, r, tc.status, tc.code)
			if closedAfter < 0 {
				t.Fatalf("the connection was still open %v after the request", closeBound+testTransferTimeout)
			}
			if !closing {
				t.Errorf("the answer did not say Connection: close")
			}
			k.ts.unchanged(t, before) // an upload's row and chunks are gone too
		})
	}
}

func TestSlowButSteadyBodiesGoThrough(t *testing.T) {
	k := newFilesWorld(t, func(c *Config) { c.TransferTimeout = testTransferTimeout })
	// 16 KiB every quarter second: slower than anything real, above the
	// minimum rate, and twice as long as the timeout in all.
	const pieces = 8
	file := bytes.Repeat([]byte("0123456789abcdef"), pieces<<10)
	r := k.ts.do(t, "POST", k.files(k.helperKey, k.room), fileHeaders(k.helperKey, "steady.bin", hexDigest(file), ""),
		&pacedReader{data: file, every: 250 * time.Millisecond})
	expect(t, r, 201, "")
	d := k.download(t, k.scoutKey, k.room, r.data(t)["id"].(string), "")
	if !bytes.Equal(d.body, file) {
		t.Fatalf("downloaded %d bytes, not the %d uploaded", len(d.body), len(file))
	}
	// JSON allows any amount of white space around a value.
	body := append([]byte("{}"), bytes.Repeat([]byte(" "), pieces*transferUnit)...)
	expect(t, k.ts.do(t, "POST", "/api/v1/agent/chats", apiKey(k.helperKey), &pacedReader{data: body, every: 250 * time.Millisecond}), 201, "")
}

// A client that stops reading a response, a download or a page of a
// listing, is cut off once it has taken nothing for the transfer timeout;
// until it stopped, it got what it asked for.
func TestStalledResponsesAreCut(t *testing.T) {
	k := newFilesWorld(t, func(c *Config) { c.TransferTimeout = testTransferTimeout; c.MaxFileBytes = 4 << 20 })
	id := k.upload(t, k.helperKey, k.room, "big.bin", bytes.Repeat([]byte("stalled download"), 4<<20/16))["id"].(string)
	for range 20 { // about 640 KiB of JSON on a page
		expect(t, k.ts.do(t, "POST", "/api/v1/me/chats/"+k.room+"/messages", apiKey(k.aliceKey), map[string]any{"message": map[string]any{
			"content": "@Helper " + strings.Repeat("long message ", 2400), "mentions": []any{map[string]any{"id": k.helper.ID}}}}), 201, "")
	}
	// Small socket buffers on both ends, so that the kernel cannot hold the
	// response on the server's behalf.
	hs := httptest.NewUnstartedServer(k.ts.srv.Handler())
	hs.Listener = smallBuffers{hs.Listener}
	hs.Start()
	defer hs.Close()
	for _, tc := range []struct{ name, path, key string }{
		{"a file download", k.files(k.scoutKey, k.room) + "/" + id, k.scoutKey},
		{"a page of 20 long messages", "/api/v1/me/chats/" + k.room + "/messages?limit=20", k.aliceKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, key := tc.path, tc.key
			whole := k.ts.do(t, "GET", path, apiKey(key), nil)
			expect(t, whole, 200, "")
			conn, err := net.Dial("tcp", hs.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.(*net.TCPConn).SetReadBuffer(64 << 10)
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: chatd\r\nX-API-Key: %s\r\n\r\n", path, key)
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("GET: %v %v", res, err)
			}
			time.Sleep(3 * testTransferTimeout) // takes nothing
			_ = conn.SetReadDeadline(time.Now().Add(closeBound))
			got, err := io.ReadAll(res.Body)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the response was still open %v after its client stopped reading", 3*testTransferTimeout+closeBound)
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.HasPrefix(whole.body, got) {
				t.Fatalf("got %d bytes of %d (%v), want a true prefix of the response", len(got), len(whole.body), err)
			}
		})
	}
}

// rawExchange sends head (a request's header block, without the blank line
// that ends it) on a connection of its own, with the body that send writes
// in the background, and reads the answer. closing is whether the answer said
// Connection: close; closedAfter is how long after the request the server
// closed the connection, -1 if it stayed open past the timeout and closeBound.
func (ts *testServer) rawExchange(t *testing.T, head string, send func(io.Writer)) (r *response, closing bool, closedAfter time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", ts.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	go send(conn)
	_ = conn.SetReadDeadline(start.Add(testTransferTimeout + closeBound))
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	r = &response{status: res.StatusCode, header: res.Header}
	if r.body, err = io.ReadAll(res.Body); err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	method, path, _ := strings.Cut(strings.SplitN(head, " HTTP/", 2)[0], " ")
	ts.checkResponse(t, method, path, r)
	if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
		return r, res.Close, -1
	}
	return r, res.Close, time.Since(start)
}

// trickle sends n bytes of JSON white space, one every interval, until a
// write fails.
func trickle(every time.Duration, n int) func(io.Writer) {
	return func(w io.Writer) {
		for range n {
			if _, err := w.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(every)
		}
	}
}

// sendThenStall sends b and then nothing more, leaving the connection open.
func sendThenStall(b []byte) func(io.Writer) {
	return func(w io.Writer) { _, _ = w.Write(b) }
}

// pacedReader yields data one transfer unit at a time, one every interval.
type pacedReader struct {
	data  []byte
	every time.Duration
	sent  bool
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	if p.sent {
		time.Sleep(p.every)
	}
	p.sent = true
	n := copy(b[:min(len(b), transferUnit)], p.data)
	p.data = p.data[n:]
	return n, nil
}

// smallBuffers gives each connection it accepts a small send buffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}
