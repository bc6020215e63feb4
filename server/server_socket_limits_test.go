package server

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	chatdphx "github.com/chatd/chatd/server/phx"
)

// maxReplyFrame is what one frame the server sends in answer to a client
// message may weigh at most (docs/api/realtime.md, Limits and close codes):
// the fields it echoes are capped, and JSON makes each byte of them six at
// most.
const maxReplyFrame = 4 << 10

// worstEscaped is n bytes that JSON escapes to six bytes each.
func worstEscaped(n int) string { return strings.Repeat("<", n) }

// A message with a field over its cap is not answered with an echo of it:
// the connection is closed with 1008 and a reason naming the field. At the
// caps, it is answered as usual.
func TestSocketFieldsOverTheCapsClose(t *testing.T) {
	w := newSocketWorld(t)
	ref, topic, event := chatdphx.MaxRefLen, chatdphx.MaxTopicLen, chatdphx.MaxEventLen
	for _, tc := range []struct {
		field                          string
		joinRef, ref, topic, eventName string
	}{
		{"join_ref", worstEscaped(ref + 1), "1", "phoenix", "heartbeat"},
		{"ref", "", worstEscaped(ref + 1), "phoenix", "heartbeat"},
		{"topic", "1", "1", worstEscaped(topic + 1), "phx_leave"},
		{"event", "1", "1", "phoenix", worstEscaped(event + 1)},
	} {
		s := w.dial(t, w.workerKey)
		atCaps := phxMessage(worstEscaped(ref), worstEscaped(ref), "phoenix", "heartbeat")
		s.send(t, atCaps)
		if m := s.next(t); m[1] != worstEscaped(ref) || m[4].(map[string]any)["status"] != "ok" {
			t.Fatalf("a heartbeat with refs at the caps: %v", m)
		}
		s.send(t, phxMessage(tc.joinRef, tc.ref, tc.topic, tc.eventName))
		code, reason, frames := s.awaitClose(t)
		if code != 1008 || reason != tc.field+" too long" || frames != 0 {
			t.Fatalf("%s over its cap: close %d %q after %d frames, want 1008 %q and no reply", tc.field, code, reason, frames, tc.field+" too long")
		}
	}
}

// Whatever a client sends within the caps, no frame of the answer is larger
// than maxReplyFrame: not the echo of an unknown event, a refused join, the
// two frames of phx_leave, or a heartbeat's.
func TestSocketRepliesAreSmall(t *testing.T) {
	w := newSocketWorld(t)
	s := w.dial(t, w.workerKey)
	ref, topic := worstEscaped(chatdphx.MaxRefLen), worstEscaped(chatdphx.MaxTopicLen)
	for _, tc := range []struct {
		what    string
		message string
		frames  int
	}{
		{"an unknown event", phxMessage(ref, ref, topic, worstEscaped(chatdphx.MaxEventLen)), 1},
		{"a refused join", phxMessage(ref, ref, topic, "phx_join"), 1},
		{"a join with the ref as join_ref", phxMessage("", ref, "agent_rooms:"+w.workerID, "phx_join"), 1},
		{"a leave", phxMessage(ref, ref, topic, "phx_leave"), 2},
		{"a heartbeat", phxMessage(ref, ref, "phoenix", "heartbeat"), 1},
	} {
		s.send(t, tc.message)
		for i := 0; i < tc.frames; i++ {
			_ = s.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			b, err := wsutil.ReadServerText(s.reader())
			if err != nil {
				t.Fatalf("%s: %v", tc.what, err)
			}
			if len(b) > maxReplyFrame {
				t.Errorf("%s: a frame of %d bytes, over %d", tc.what, len(b), maxReplyFrame)
			}
		}
	}
}

// RFC 6455's limits on control frames hold, so that a pong (which echoes
// its ping) is small: a ping of 125 bytes is answered, one of 126 or a
// fragmented one closes the connection with 1002. A fragmented text message
// with a ping between its fragments is answered as one message.
func TestSocketControlFramesAreSmall(t *testing.T) {
	w := newSocketWorld(t)
	s := w.dial(t, w.workerKey)
	payload := bytes.Repeat([]byte("p"), 125)
	s.write(t, ws.NewPingFrame(payload))
	_ = s.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if f, err := ws.ReadFrame(s.reader()); err != nil || f.Header.OpCode != ws.OpPong || !bytes.Equal(f.Payload, payload) {
		t.Fatalf("a ping of 125 bytes: %v %v", f.Header, err)
	}

	heartbeat := []byte(`["","7","phoenix","heartbeat",{}]`)
	s.write(t, ws.NewFrame(ws.OpText, false, heartbeat[:10]))
	s.write(t, ws.NewPingFrame([]byte("between")))
	s.write(t, ws.NewFrame(ws.OpContinuation, false, heartbeat[10:20]))
	s.write(t, ws.NewFrame(ws.OpContinuation, true, heartbeat[20:]))
	if m := s.next(t); m[1] != "7" || m[3] != "phx_reply" {
		t.Fatalf("a fragmented heartbeat: %v", m)
	}

	for _, tc := range []struct {
		what  string
		frame ws.Frame
	}{
		{"a ping of 126 bytes", ws.NewPingFrame(bytes.Repeat([]byte("p"), 126))},
		{"a fragmented ping", ws.NewFrame(ws.OpPing, false, []byte("p"))},
		{"a continuation of nothing", ws.NewFrame(ws.OpContinuation, true, heartbeat)},
	} {
		s := w.dial(t, w.workerKey)
		s.write(t, tc.frame)
		if code, reason, _ := s.awaitClose(t); code != 1002 {
			t.Fatalf("%s: close %d %q, want 1002", tc.what, code, reason)
		}
	}
}

// phxMessage is a client message with an empty payload; "" refs are null.
func phxMessage(joinRef, ref, topic, event string) string {
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	b, _ := json.Marshal([]any{orNull(joinRef), orNull(ref), topic, event, map[string]any{}})
	return string(b)
}

func (w *socketWorld) dial(t *testing.T, key string) *rawSocket {
	t.Helper()
	s, err := dialRaw(t, w.ts.socketURL(url.Values{"vsn": {"2.0.0"}, "api_key": {key}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// write sends one frame, masked as a client's must be.
func (r *rawSocket) write(t *testing.T, f ws.Frame) {
	t.Helper()
	if err := ws.WriteFrame(r.conn, ws.MaskFrame(f)); err != nil {
		t.Fatal(err)
	}
}

// awaitClose reads until the server's close frame and returns its code and
// reason, and how many other frames came before it. It does not answer the
// close: the server may have reset the connection already.
func (r *rawSocket) awaitClose(t *testing.T) (ws.StatusCode, string, int) {
	t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for frames := 0; ; frames++ {
		f, err := ws.ReadFrame(r.reader())
		if err != nil {
			t.Fatalf("no close frame: %v", err)
		}
		if f.Header.OpCode == ws.OpClose {
			code, reason := ws.ParseCloseFrameData(f.Payload)
			return code, reason, frames
		}
	}
}
