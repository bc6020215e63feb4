package phx

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gobwas/ws"
)

// Close codes, as the clients read them: 1000/1001 normal (no reconnect),
// 1008 policy (terminal: superseded, revoked, or a message over the field
// caps), 1011 server error, 1012 service restart (reconnect soon), 1013 try
// again later (a slow consumer). A client that breaks RFC 6455 gets 1002
// (unmasked, fragmented or over-long control frames, bad continuations),
// 1003 (binary frames) or 1009 (a message over 64 KiB).
const (
	CloseNormal      = ws.StatusNormalClosure
	ClosePolicy      = ws.StatusPolicyViolation
	CloseServerError = ws.StatusInternalServerError
	CloseRestart     = ws.StatusCode(1012)
	CloseTryLater    = ws.StatusCode(1013)
	closeTooBig      = ws.StatusMessageTooBig
	closeProtocol    = ws.StatusProtocolError
	closeUnsupported = ws.StatusUnsupportedData
)

// closeCause is why a connection ended, as Stats.Disconnects counts it:
// decided by the first of the server's close, the client's close frame, or
// a read or write that failed.
type closeCause uint8

const (
	causeConnectionLost closeCause = iota // broke, or the client left without a close frame
	causeIdleTimeout                      // silent past Options.IdleTimeout
	causeClientClosed                     // the client sent a close frame
	causeSlowConsumer                     // its send queue filled, or a write timed out
	causePolicy                           // superseded, its credential ended, an oversize field
	causeProtocolError                    // a frame RFC 6455 forbids, binary, too large
	causeServerRestart                    // the server is stopping
	causeServerError                      // a serializer the server does not speak
	numCauses
)

// DisconnectReasons names each cause, as Stats.Disconnects keys them.
var DisconnectReasons = [numCauses]string{"connection_lost", "idle_timeout", "client_closed", "slow_consumer",
	"policy", "protocol_error", "server_restart", "server_error"}

// causeOfCode is the cause of a close the server decided with code.
func causeOfCode(code ws.StatusCode) closeCause {
	switch code {
	case CloseNormal:
		return causeClientClosed // the server answers a client's close with it, and never closes with it itself
	case ClosePolicy:
		return causePolicy
	case CloseRestart:
		return causeServerRestart
	case CloseTryLater:
		return causeSlowConsumer
	case closeTooBig, closeProtocol, closeUnsupported:
		return causeProtocolError
	}
	return causeServerError
}

func readErrorCause(err error) closeCause {
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		return causeIdleTimeout
	}
	return causeConnectionLost
}

func writeErrorCause(err error) closeCause {
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		return causeSlowConsumer
	}
	return causeConnectionLost
}

// decideCauseLocked records why c ends, unless that is decided already.
func (c *Conn) decideCauseLocked(cause closeCause) {
	if !c.closing {
		c.cause = cause
	}
}

// writeTimeout bounds one write to a client; a client that cannot take a
// frame in this long is cut off.
const writeTimeout = 10 * time.Second

// Conn is one client connection. Pushes go through a bounded queue that a
// writer goroutine drains; the goroutine exists only while there is
// something to send, so an idle connection costs one blocked reader.
type Conn struct {
	hub *Hub
	nc  net.Conn
	rd  io.Reader // nc, or bytes that arrived with the upgrade followed by nc

	// Value is the server's own state for the connection (who it is).
	Value any

	mu    sync.Mutex
	queue [][]byte
	// Frames and bytes queued or being written, held to Options.SendQueue
	// and SendQueueBytes: a batch being written is in memory as much as the
	// queue is.
	pendingFrames, pendingBytes int
	writing                     bool
	closing                     bool // no more pushes; the queue ends with a close frame
	closed                      bool // the network connection is closed
	// queuedPushes counts the pushes (Push, Broadcast) among the queued
	// frames, so that each can be counted sent or dropped.
	queuedPushes int
	// cause is why the connection ends, decided by the first close.
	cause closeCause

	// joins maps joined topics to their join_ref; guarded by hub.mu.
	joins map[string]string
}

// push queues one already-framed message. A full queue (in frames, or in
// bytes queued and being written) means the client cannot keep up, or does
// not read: it is disconnected rather than allowed to hold memory or slow
// anyone else, and it can reconnect and catch up over REST.
func (c *Conn) push(frame []byte) bool { return c.enqueue(frame, false) }

// pushEvent queues a push, a message the server sends of its own accord
// (Push, Broadcast), which the hub counts sent or dropped.
func (c *Conn) pushEvent(frame []byte) bool { return c.enqueue(frame, true) }

func (c *Conn) enqueue(frame []byte, event bool) bool {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		c.hub.countDropped(event, 1)
		return false
	}
	if c.pendingFrames >= c.hub.opts.SendQueue || c.pendingBytes+len(frame) > c.hub.opts.SendQueueBytes {
		c.mu.Unlock()
		c.hub.countDropped(event, 1)
		c.hub.slowConsumers.Add(1)
		c.Close(CloseTryLater, "too slow: reconnect and catch up")
		// A write blocked on this client gets a second to finish (and the
		// close frame to follow it), no more.
		_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
		return false
	}
	if event {
		c.queuedPushes++
	}
	c.enqueueUnlock(frame)
	return true
}

// enqueueUnlock queues frame, releases c.mu (held by the caller) and starts
// the writer unless one is running.
func (c *Conn) enqueueUnlock(frame []byte) {
	c.enqueueLocked(frame)
	start := !c.writing
	c.writing = true
	c.mu.Unlock()
	if start {
		go c.writeLoop()
	}
}

func (c *Conn) enqueueLocked(frame []byte) {
	c.queue = append(c.queue, frame)
	c.pendingFrames++
	c.pendingBytes += len(frame)
}

// dropQueueLocked forgets what is queued and not yet being written.
func (c *Conn) dropQueueLocked() {
	for _, f := range c.queue {
		c.pendingBytes -= len(f)
	}
	c.pendingFrames -= len(c.queue)
	c.queue = nil
	c.hub.countDropped(true, c.queuedPushes)
	c.queuedPushes = 0
}

// Push sends a message on topic with the given join_ref.
func (c *Conn) Push(joinRef, topic, event string, payload []byte) bool {
	return c.pushEvent(ws.MustCompileFrame(ws.NewTextFrame(Encode(joinRef, "", topic, event, payload))))
}

func (c *Conn) writeLoop() {
	sentFrames, sentBytes := 0, 0 // the batch written last, pending until now
	for {
		c.mu.Lock()
		c.pendingFrames -= sentFrames
		c.pendingBytes -= sentBytes
		frames, pushes := c.queue, c.queuedPushes
		c.queue, c.queuedPushes = nil, 0
		if len(frames) == 0 {
			c.writing = false
			closing := c.closing
			c.mu.Unlock()
			if closing {
				c.shutdown()
			}
			return
		}
		c.mu.Unlock()
		sentFrames, sentBytes = len(frames), 0
		for _, f := range frames {
			sentBytes += len(f)
		}
		_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		bufs := net.Buffers(frames)
		if _, err := bufs.WriteTo(c.nc); err != nil {
			c.mu.Lock()
			c.decideCauseLocked(writeErrorCause(err))
			c.hub.countDropped(true, pushes+c.queuedPushes)
			c.closing, c.queue, c.writing = true, nil, false
			c.pendingFrames, c.pendingBytes, c.queuedPushes = 0, 0, 0
			c.mu.Unlock()
			c.shutdown()
			return
		}
		c.hub.pushesSent.Add(int64(pushes))
	}
}

// Close sends a close frame with code and reason after what is queued, then
// closes the connection. It is safe to call more than once.
func (c *Conn) Close(code ws.StatusCode, reason string) {
	frame := ws.MustCompileFrame(ws.NewCloseFrame(ws.NewCloseFrameBody(code, reason)))
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing, c.cause = true, causeOfCode(code)
	if code == CloseTryLater {
		c.dropQueueLocked() // a slow consumer's backlog is dropped, not delivered
	}
	c.enqueueUnlock(frame)
}

// abort stops pushes and closes the connection at once, sending nothing
// more, for cause (unless the connection was closing for another already).
func (c *Conn) abort(cause closeCause) {
	c.mu.Lock()
	c.decideCauseLocked(cause)
	c.closing = true
	c.dropQueueLocked()
	writing := c.writing
	c.mu.Unlock()
	if !writing {
		c.shutdown()
		return
	}
	// The writer closes the connection when it finishes; make it finish now.
	_ = c.nc.SetWriteDeadline(time.Now())
}

// shutdown closes the network connection once.
func (c *Conn) shutdown() {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if !already {
		c.nc.Close()
	}
}

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }
