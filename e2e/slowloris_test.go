package e2e

import (
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A client that sends its headers one byte a second (slowloris) has its
// connection closed once --header-timeout has passed, long before it is
// done; a client that sends them at once is served as usual.
func TestServeClosesConnectionsThatTrickleHeaders(t *testing.T) {
	const timeout = 2 * time.Second
	srv := startServer(t, filepath.Join(t.TempDir(), "chatd.db"), "--header-timeout", timeout.String())
	if status, _ := srv.call(t, "GET", "/healthz", "", nil); status != 200 {
		t.Fatalf("GET /healthz: %d", status)
	}
	request := "GET /healthz HTTP/1.1\r\nHost: chatd\r\nUser-Agent: slow\r\nAccept: */*\r\n\r\n"
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	sent := make(chan int, 1)
	go func() {
		n := 0
		for ; n < len(request); n++ {
			if _, err := conn.Write([]byte{request[n]}); err != nil {
				break
			}
			time.Sleep(time.Second)
		}
		sent <- n
	}()
	// The server may say 400 (the request it has is incomplete), and then
	// closes the connection; the read ends there.
	conn.SetReadDeadline(start.Add(time.Duration(len(request)) * time.Second))
	got, err := io.ReadAll(conn)
	closedAfter := time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection was still open after %v of trickled headers", closedAfter)
	}
	if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 400 ") {
		t.Fatalf("the server answered a request it has not received: %q", got)
	}
	if closedAfter < timeout-time.Second/2 || closedAfter > timeout+3*time.Second {
		t.Fatalf("the connection closed after %v (%v), want about --header-timeout %v", closedAfter, err, timeout)
	}
	conn.Close()
	if n := <-sent; n >= len(request) {
		t.Fatalf("the whole request (%d bytes) was sent before the connection closed", n)
	}
}
