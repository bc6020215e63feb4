package phx_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/chatd/chatd/server/phx"
)

// openTopics lets anyone join any topic.
type openTopics struct{}

func (openTopics) Authorize(*phx.Conn, string) string { return "" }
func (openTopics) Joined(*phx.Conn, string)           {}
func (openTopics) Closed(*phx.Conn)                   {}

// serveHub serves a hub with opts on a local listener and returns the hub
// and the listener's address. With small, its connections have kernel
// buffers as small as can be, so that what a client does not read piles up
// in the hub rather than in the kernel.
func serveHub(t *testing.T, opts phx.Options, small bool) (*phx.Hub, string) {
	t.Helper()
	hub := phx.NewHub(openTopics{}, opts)
	lc := net.ListenConfig{}
	if small {
		lc.Control = smallBuffer(syscall.SO_SNDBUF)
	}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ln.Close()
		hub.Close(phx.CloseRestart, "test over")
	})
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if _, err := ws.Upgrade(nc); err != nil {
				nc.Close()
				continue
			}
			hub.Serve(nc, nil, nil, nil)
		}
	}()
	return hub, "ws://" + ln.Addr().String() + "/"
}

// dial connects to addr; with small, with as small a kernel receive buffer
// as can be, set before connecting so that the window it offers is small
// from the start.
func dial(t *testing.T, addr string, small bool) net.Conn {
	t.Helper()
	d := ws.Dialer{Timeout: 10 * time.Second}
	if small {
		d.NetDial = (&net.Dialer{Control: smallBuffer(syscall.SO_RCVBUF)}).DialContext
	}
	nc, _, _, err := d.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// smallBuffer sets a socket's buffer option to the least the kernel allows.
func smallBuffer(option int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, option, 1) }); cerr != nil {
			return cerr
		}
		return err
	}
}

// call sends a client message and returns the reply's status and response.
func call(t *testing.T, nc net.Conn, message string) (string, map[string]any) {
	t.Helper()
	if err := wsutil.WriteClientText(nc, []byte(message)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := wsutil.ReadServerText(nc)
	if err != nil {
		t.Fatal(err)
	}
	var reply []json.RawMessage
	var body struct {
		Status   string
		Response map[string]any
	}
	if json.Unmarshal(b, &reply) != nil || len(reply) != 5 || json.Unmarshal(reply[4], &body) != nil {
		t.Fatalf("not a reply: %s", b)
	}
	return body.Status, body.Response
}

// A client that reads nothing is cut off once what is queued for it, or
// being written to it, reaches SendQueueBytes, however few frames that is.
func TestHubCutsOffAClientHoldingTooManyBytes(t *testing.T) {
	const bound, push = 64 << 10, 8 << 10
	hub, addr := serveHub(t, phx.Options{SendQueue: 1 << 20, SendQueueBytes: bound}, true)
	nc := dial(t, addr, true)
	if status, _ := call(t, nc, `["1","1","news","phx_join",{}]`); status != "ok" {
		t.Fatalf("join: %s", status)
	}
	payload := []byte(`{"text":"` + strings.Repeat("x", push-64) + `"}`)
	sent := 0
	for hub.Broadcast("news", "item", payload, nil) == 1 {
		sent++
		if sent == bound/push {
			// Let the writer take the whole queue and block on the client:
			// what it is writing still counts.
			time.Sleep(100 * time.Millisecond)
		}
		if sent > 1000 {
			t.Fatalf("%d pushes of %d bytes queued for a client that reads nothing", sent, push)
		}
	}
	t.Logf("cut off after %d pushes", sent)
	if s := hub.Stats(); s.SlowConsumers != 1 || s.PushesDropped < 1 {
		t.Fatalf("slow consumers: %d, pushes dropped: %d", s.SlowConsumers, s.PushesDropped)
	}
	waitStats(t, hub, "a slow consumer's end", func(s phx.Stats) bool {
		return s.Disconnects["slow_consumer"] == 1 && s.Connections == 0
	})
	// Besides the queue, the kernel's buffers may have taken a few pushes.
	if held := sent * push; held > bound+32<<10 {
		t.Fatalf("the client was cut off after %d pushes (%d KiB), over the bound of %d KiB", sent, held>>10, bound>>10)
	}
}

// A connection joins at most MaxJoins topics; joining one of them again,
// or a new one after leaving another, is fine.
func TestHubRefusesJoinsBeyondMaxJoins(t *testing.T) {
	_, addr := serveHub(t, phx.Options{MaxJoins: 2}, false)
	nc := dial(t, addr, false)
	for _, step := range []struct{ message, status, reason string }{
		{`["1","1","a","phx_join",{}]`, "ok", ""},
		{`["2","2","b","phx_join",{}]`, "ok", ""},
		{`["3","3","c","phx_join",{}]`, "error", "too many joined topics"},
		{`["4","4","a","phx_join",{}]`, "ok", ""},
		{`["2","5","b","phx_leave",{}]`, "ok", ""},
	} {
		status, response := call(t, nc, step.message)
		if status != step.status || (step.reason != "" && response["reason"] != step.reason) {
			t.Fatalf("%s: %s %v, want %s %q", step.message, status, response, step.status, step.reason)
		}
	}
	// phx_leave is followed by phx_close.
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := wsutil.ReadServerText(nc); err != nil || !strings.Contains(string(b), "phx_close") {
		t.Fatalf("after the leave: %s %v", b, err)
	}
	if status, _ := call(t, nc, `["6","6","c","phx_join",{}]`); status != "ok" {
		t.Fatalf("a join after leaving: %s", status)
	}
}

// waitStats polls the hub's counters until ok accepts them; it fails after a
// generous deadline, never as a timing assertion.
func waitStats(t *testing.T, hub *phx.Hub, what string, ok func(phx.Stats) bool) phx.Stats {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := hub.Stats()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: stats %+v", what, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// The hub counts connections served, pushes written, and each connection
// that ended by why it ended.
func TestHubCountsConnectionsPushesAndWhyConnectionsEnd(t *testing.T) {
	hub, addr := serveHub(t, phx.Options{IdleTimeout: 2 * time.Second}, false)
	reader := dial(t, addr, false)
	if status, _ := call(t, reader, `["1","1","news","phx_join",{}]`); status != "ok" {
		t.Fatalf("join: %s", status)
	}
	for i := 0; i < 3; i++ {
		if hub.Broadcast("news", "item", []byte(`{}`), nil) != 1 {
			t.Fatal("broadcast reached no one")
		}
		if _, err := wsutil.ReadServerText(reader); err != nil {
			t.Fatal(err)
		}
	}
	// Replies (the join's) are not pushes.
	waitStats(t, hub, "3 pushes sent", func(s phx.Stats) bool { return s.PushesSent == 3 && s.PushesDropped == 0 })

	// The client says goodbye; another just goes; a third stays silent.
	if err := wsutil.WriteClientMessage(reader, ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, "")); err != nil {
		t.Fatal(err)
	}
	dial(t, addr, false).Close()
	dial(t, addr, false)
	s := waitStats(t, hub, "three ended", func(s phx.Stats) bool {
		return s.Disconnects["client_closed"]+s.Disconnects["connection_lost"]+s.Disconnects["idle_timeout"] == 3
	})
	if s.Connects != 3 || s.Connections != 0 || s.Disconnects["client_closed"] != 1 ||
		s.Disconnects["connection_lost"] != 1 || s.Disconnects["idle_timeout"] != 1 {
		t.Fatalf("stats %+v", s)
	}
	if len(s.Disconnects) != len(phx.DisconnectReasons) {
		t.Fatalf("disconnects %v, want every reason of %v", s.Disconnects, phx.DisconnectReasons)
	}

	// One more, closed by the server as it stops.
	dial(t, addr, false)
	waitStats(t, hub, "a fourth connection", func(s phx.Stats) bool { return s.Connections == 1 })
	hub.Close(phx.CloseRestart, "bye")
	waitStats(t, hub, "a restart", func(s phx.Stats) bool { return s.Disconnects["server_restart"] == 1 })
}
