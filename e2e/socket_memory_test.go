package e2e

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/chatd/chatd/server/phx"
)

// socketMemoryBound is what one real-time connection may make the server
// hold, at most, whatever its client sends and however little it reads
// (docs/security.md, Real-time memory): the outgoing queue's byte bound, the
// read buffers, and the garbage collector's slack on top of both.
const socketMemoryBound = 8 << 20

// socketAttackConns connections run each attack at once, so that what one
// connection costs stands out from the noise of the process.
const socketAttackConns = 8

// A client that writes and never reads makes the server queue what it
// answers. For each way of making the answers large or many (a field the
// reply echoes, a ping's payload, large pushes, many small replies, a
// message that never ends), a running `chatd serve` is
// attacked by socketAttackConns connections until it has hung up on all of
// them, and its resident memory may not have grown by more than
// socketMemoryBound per connection at its peak.
func TestSocketMemoryPerConnectionIsBounded(t *testing.T) {
	skipIfShort(t, "attacks a running server")
	huge := strings.Repeat("<", 60000) // JSON-escaped as \u003c: six bytes for one
	for _, a := range []socketAttack{
		{name: "unknown event", frame: func(w *attackTarget) []byte {
			return textFrame(`["1","1","phoenix",` + quote(huge) + `,{}]`)
		}},
		{name: "heartbeat", frame: func(w *attackTarget) []byte {
			return textFrame(`[null,` + quote(huge) + `,"phoenix","heartbeat",{}]`)
		}},
		{name: "join", frame: func(w *attackTarget) []byte { // the ref is the join_ref: echoed twice, and kept
			return textFrame(`[null,` + quote(huge) + `,"user_rooms:` + w.alice.ID + `","phx_join",{}]`)
		}},
		{name: "leave", frame: func(w *attackTarget) []byte { // the join_ref is echoed three times in two frames
			return textFrame(`[` + quote(huge) + `,null,"phoenix","phx_leave",{}]`)
		}},
		{name: "leave within the caps", frame: func(w *attackTarget) []byte { // many small frames
			ref, topic := quote(huge[:phx.MaxRefLen]), quote(huge[:phx.MaxTopicLen])
			return textFrame(`[` + ref + `,` + ref + `,` + topic + `,"phx_leave",{}]`)
		}},
		{name: "fragments", frame: func(w *attackTarget) []byte { // a message that never ends
			return ws.MustCompileFrame(ws.MaskFrame(ws.NewFrame(ws.OpContinuation, false, []byte(huge[:4096]))))
		}, opening: ws.MustCompileFrame(ws.MaskFrame(ws.NewFrame(ws.OpText, false, []byte(`[null,"1",`))))},
		{name: "ping", frame: func(w *attackTarget) []byte {
			return ws.MustCompileFrame(ws.MaskFrame(ws.NewPingFrame([]byte(huge))))
		}},
		{name: "large pushes", join: true, drive: postLargeMessages},
	} {
		t.Run(a.name, func(t *testing.T) { a.run(t) })
	}
}

// socketAttack is one way of making a server answer a silent client with
// much: each connection sends frame over and over, or, with join, joins the
// room and lets drive make the server push to it. What drive costs the
// server without any connection (its database page cache filling, say) is
// not the connections' doing: it runs alone for a while before the
// baseline is taken.
type socketAttack struct {
	name    string
	frame   func(w *attackTarget) []byte
	opening []byte // sent once before frame
	join    bool
	drive   func(t *testing.T, w *attackTarget, stop <-chan struct{})
}

// attackTarget is a running server with a person, an agent, and a room of
// both.
type attackTarget struct {
	srv          *serverProc
	alice, agent created
	room         string
	metrics      string
}

func newAttackTarget(t *testing.T) *attackTarget {
	db, alice := newDatabaseWithAlice(t)
	w := &attackTarget{alice: alice, agent: registerAgent(t, db, "--name", "Echo Agent", "--description", "Echoes what it hears")}
	w.srv = startServer(t, db, "--rate-limit", "0", "--metrics-addr", "127.0.0.1:0")
	w.metrics = w.srv.awaitMetrics(t)
	w.room = w.srv.createRoom(t, w.alice.APIKey, w.agent.ID)
	return w
}

func (a socketAttack) run(t *testing.T) {
	w := newAttackTarget(t)
	// One connection first, so that what any connection needs (code paged
	// in, pools warmed) is in the baseline.
	first := w.dial(t)
	first.Write(textFrame(`[null,"1","phoenix","heartbeat",{}]`))
	first.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := ws.ReadFrame(first); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	first.Close()
	w.awaitSockets(t, 0, 10*time.Second)
	if a.drive != nil {
		stop := make(chan struct{})
		time.AfterFunc(10*time.Second, func() { close(stop) })
		a.drive(t, w, stop)
	}

	pid := w.srv.cmd.Process.Pid
	baseline := residentKiB(t, pid, "VmRSS")
	resetPeakResident(t, pid)
	conns := make([]net.Conn, socketAttackConns)
	for i := range conns {
		conns[i] = w.dial(t)
		if a.join { // each its own join_ref, so none shares a frame with another
			conns[i].Write(textFrame(fmt.Sprintf(`["%d","%d","chat_room:%s","phx_join",{}]`, i+1, i+1, w.room)))
		}
		conns[i].Write(a.opening)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range conns {
		if a.frame != nil {
			frame := a.frame(w)
			wg.Add(1)
			go func() {
				defer wg.Done()
				sendUntilRefused(c, frame, stop)
			}()
		}
	}
	if a.drive != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.drive(t, w, stop)
		}()
	}
	hungUp := w.awaitSockets(t, 0, 90*time.Second)
	close(stop)
	wg.Wait()

	peak := residentKiB(t, pid, "VmHWM")
	perConn := float64(peak-baseline) / 1024 / socketAttackConns
	summary := fmt.Sprintf("socket memory, %s: %d connections grew the server from %d to %d KiB at its peak: %.1f MiB per connection",
		a.name, socketAttackConns, baseline, peak, perConn)
	t.Log(summary)
	fmt.Println(summary)
	if !hungUp {
		t.Errorf("the server still holds connections that read nothing")
	}
	if perConn*(1<<20) > socketMemoryBound {
		t.Errorf("%.1f MiB per connection, over the bound of %d MiB", perConn, socketMemoryBound>>20)
	}
}

// sendUntilRefused writes frame over and over until the server stops
// taking it or stop closes.
func sendUntilRefused(c net.Conn, frame []byte, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(frame); err != nil {
			return
		}
	}
}

// postLargeMessages posts the largest text messages there are, every
// character escaped in JSON, until stop closes.
func postLargeMessages(t *testing.T, w *attackTarget, stop <-chan struct{}) {
	mention := "@" + w.agent.Handle + " "
	content := mention + strings.Repeat("<", 32768-len(mention))
	body := map[string]any{"message": map[string]any{"content": content, "mentions": []map[string]string{{"id": w.agent.ID}}}}
	for {
		select {
		case <-stop:
			return
		default:
		}
		if status, b, err := w.srv.try("POST", "/api/v1/me/chats/"+w.room+"/messages", w.alice.APIKey, body); err != nil || status != 201 {
			t.Errorf("post: %d %s %v", status, b, err)
			return
		}
	}
}

// dial opens a raw connection as alice that reads nothing unless asked.
func (w *attackTarget) dial(t *testing.T) net.Conn {
	t.Helper()
	conn, err := w.srv.dialSocket("api_key=" + url.QueryEscape(w.alice.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// awaitSockets waits until the server holds n real-time connections, and
// says whether it did in time.
func (w *attackTarget) awaitSockets(t *testing.T, n int, limit time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if realtimeSockets(t, w.metrics) == n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// realtimeSockets is the number of open real-time connections the server
// reports at metricsURL.
func realtimeSockets(t *testing.T, metricsURL string) int {
	t.Helper()
	body := scrapeMetrics(t, metricsURL)
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "chatd_sockets_open "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatalf("no chatd_sockets_open in\n%s", body)
	return 0
}

// residentKiB reads a memory figure of process pid (VmRSS: now; VmHWM: its
// peak) in KiB.
func residentKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc to measure memory with: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// resetPeakResident makes VmHWM start again from the current VmRSS, so that
// it measures the attack, not the server's start.
func resetPeakResident(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident size: %v", err)
	}
}

// textFrame is a masked client text frame.
func textFrame(s string) []byte {
	return ws.MustCompileFrame(ws.MaskFrame(ws.NewTextFrame([]byte(s))))
}

func quote(s string) string { return strconv.Quote(s) }
