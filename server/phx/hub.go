package phx

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
)

// Handler is the server's side of the protocol.
type Handler interface {
	// Authorize decides whether c may join topic; it returns "" to allow, or
	// the reason given to the client ("unauthorized"). It runs before the
	// subscription is made and again right after, so that a right revoked
	// while the join was being decided does not leave a subscription behind.
	Authorize(c *Conn, topic string) (refusal string)
	// Joined is called after c joined topic.
	Joined(c *Conn, topic string)
	// Closed is called once when c is gone.
	Closed(c *Conn)
}

// Options bound what one connection may cost.
type Options struct {
	SendQueue int // frames queued per connection before it counts as too slow; default 256
	// SendQueueBytes bounds the bytes queued for one connection or being
	// written to it; beyond, it counts as too slow. Default 2 MiB: a few
	// of the largest pushes there are (a message of 32768 characters, each
	// escaped by JSON to six bytes, is about 200 KB), and with the read
	// buffers well under 8 MiB of memory per connection.
	SendQueueBytes int
	IdleTimeout    time.Duration // a connection silent this long is closed; default 60s
	MaxMessage     int64         // largest message a client may send; default 64 KiB
	// MaxJoins bounds the topics one connection holds joined, each about
	// 400 bytes; a join beyond is refused. Default 4096 (about 1.6 MiB): an
	// agent's SDK joins two topics for each of its rooms.
	MaxJoins int
}

// Hub holds the open connections and who joined which topic.
type Hub struct {
	handler Handler
	opts    Options

	mu     sync.RWMutex
	topics map[string]map[*Conn]string // topic -> connection -> join_ref
	conns  map[*Conn]struct{}
	closed bool

	slowConsumers atomic.Int64
	connects      atomic.Int64
	disconnects   [numCauses]atomic.Int64
	pushesSent    atomic.Int64
	pushesDropped atomic.Int64
}

// NewHub returns an empty hub.
func NewHub(h Handler, opts Options) *Hub {
	if opts.SendQueue <= 0 {
		opts.SendQueue = 256
	}
	if opts.SendQueueBytes <= 0 {
		opts.SendQueueBytes = 2 << 20
	}
	if opts.MaxJoins <= 0 {
		opts.MaxJoins = 4096
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 60 * time.Second
	}
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = 64 << 10
	}
	return &Hub{handler: h, opts: opts, topics: map[string]map[*Conn]string{}, conns: map[*Conn]struct{}{}}
}

// Stats are the hub's counters.
type Stats struct {
	Connections   int
	Subscriptions int
	SlowConsumers int64 // connections cut off for not keeping up
	Connects      int64 // connections served since the start
	// Disconnects counts the connections that ended, by why (see
	// DisconnectReasons).
	Disconnects map[string]int64
	// PushesSent are the pushes (Push, Broadcast) written to clients;
	// PushesDropped those never written: refused by a full send queue or a
	// closing connection, or dropped with a slow consumer's backlog or a
	// connection that broke.
	PushesSent, PushesDropped int64
}

// Stats returns the hub's counters.
func (h *Hub) Stats() Stats {
	h.mu.RLock()
	defer h.mu.RUnlock()
	s := Stats{Connections: len(h.conns), SlowConsumers: h.slowConsumers.Load(), Connects: h.connects.Load(),
		Disconnects: make(map[string]int64, numCauses), PushesSent: h.pushesSent.Load(), PushesDropped: h.pushesDropped.Load()}
	for cause, name := range DisconnectReasons {
		s.Disconnects[name] = h.disconnects[cause].Load()
	}
	for _, subs := range h.topics {
		s.Subscriptions += len(subs)
	}
	return s
}

// countDropped counts n frames dropped, if they are pushes.
func (h *Hub) countDropped(pushes bool, n int) {
	if pushes && n > 0 {
		h.pushesDropped.Add(int64(n))
	}
}

// Serve takes over an upgraded connection. buffered holds bytes the client
// sent along with the upgrade request, if any. ready, if not nil, runs
// before the connection is read, so that what the server records about it
// (which connection of an agent is the newest, say) comes before anything
// the client does. Serve returns at once: the connection is read by a
// goroutine of its own. With ok false the hub is closing and nc was closed.
func (h *Hub) Serve(nc net.Conn, buffered *bufio.Reader, value any, ready func(*Conn)) (c *Conn, ok bool) {
	c = &Conn{hub: h, nc: nc, rd: nc, Value: value}
	if buffered != nil && buffered.Buffered() > 0 {
		// Keep only what arrived with the upgrade, not the reader and its
		// buffer: an idle connection should hold as little as possible.
		early, _ := buffered.Peek(buffered.Buffered())
		c.rd = io.MultiReader(bytes.NewReader(append([]byte(nil), early...)), nc)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		nc.Close()
		return nil, false
	}
	h.conns[c] = struct{}{}
	h.mu.Unlock()
	h.connects.Add(1)
	if ready != nil {
		ready(c)
	}
	go c.readLoop()
	return c, true
}

// Close closes every connection with code (1012: the server is restarting,
// so clients reconnect) and refuses new ones; it returns once they are gone,
// or after closeFlush.
func (h *Hub) Close(code ws.StatusCode, reason string) {
	h.mu.Lock()
	h.closed = true
	conns := make([]*Conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.Close(code, reason)
	}
	// A process that exits right after would cut the close frames short
	// and leave its clients with 1006 instead of the code that says to
	// reconnect: give the writers a moment to send them.
	for deadline := time.Now().Add(closeFlush); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		h.mu.RLock()
		open := len(h.conns)
		h.mu.RUnlock()
		if open == 0 {
			return
		}
	}
}

// closeFlush bounds how long Close waits for the connections to be gone.
const closeFlush = 2 * time.Second

// Each calls f for every subscriber of topic with its join_ref. f must not
// block; pushing is fine.
func (h *Hub) Each(topic string, f func(c *Conn, joinRef string)) {
	h.mu.RLock()
	subs := h.topics[topic]
	list := make([]subscriber, 0, len(subs))
	for c, jr := range subs {
		list = append(list, subscriber{c, jr})
	}
	h.mu.RUnlock()
	for _, s := range list {
		f(s.c, s.joinRef)
	}
}

type subscriber struct {
	c       *Conn
	joinRef string
}

// Broadcast pushes the same payload to every subscriber of topic for which
// only returns true (nil: all). Subscribers that joined with the same
// join_ref share one encoded frame.
func (h *Hub) Broadcast(topic, event string, payload []byte, only func(*Conn) bool) int {
	frames := map[string][]byte{}
	sent := 0
	h.Each(topic, func(c *Conn, joinRef string) {
		if only != nil && !only(c) {
			return
		}
		f, ok := frames[joinRef]
		if !ok {
			f = ws.MustCompileFrame(ws.NewTextFrame(Encode(joinRef, "", topic, event, payload)))
			frames[joinRef] = f
		}
		if c.pushEvent(f) {
			sent++
		}
	})
	return sent
}

// Leave ends c's subscription to topic on the server's initiative (the
// client lost access): the client gets phx_close for that join.
func (h *Hub) Leave(c *Conn, topic string) {
	h.mu.Lock()
	joinRef, ok := c.joins[topic]
	if ok {
		h.unsubscribeLocked(c, topic)
	}
	h.mu.Unlock()
	if ok {
		c.Push(joinRef, topic, "phx_close", []byte("{}"))
	}
}

// JoinRef returns the join_ref with which c joined topic, if it did.
func (h *Hub) JoinRef(c *Conn, topic string) (string, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	jr, ok := c.joins[topic]
	return jr, ok
}

func (h *Hub) subscribe(c *Conn, topic, joinRef string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, open := h.conns[c]; !open {
		return
	}
	subs := h.topics[topic]
	if subs == nil {
		subs = map[*Conn]string{}
		h.topics[topic] = subs
	}
	subs[c] = joinRef
	if c.joins == nil {
		c.joins = map[string]string{}
	}
	c.joins[topic] = joinRef
}

func (h *Hub) unsubscribeLocked(c *Conn, topic string) {
	if subs := h.topics[topic]; subs != nil {
		delete(subs, c)
		if len(subs) == 0 {
			delete(h.topics, topic)
		}
	}
	delete(c.joins, topic)
}

func (h *Hub) remove(c *Conn) {
	h.mu.Lock()
	_, open := h.conns[c]
	delete(h.conns, c)
	for topic := range c.joins {
		h.unsubscribeLocked(c, topic)
	}
	h.mu.Unlock()
	if open {
		c.mu.Lock()
		cause := c.cause
		c.mu.Unlock()
		h.disconnects[cause].Add(1)
		h.handler.Closed(c)
	}
}

// readLoop reads the client's frames until the connection ends. A client
// that went silent past the idle timeout, or whose connection broke, is
// dropped without a close frame: a close code would tell a live client not
// to reconnect. A client the server closed on gets its close frame.
func (c *Conn) readLoop() {
	defer c.hub.remove(c)
	if err := c.readMessages(); err != nil {
		c.abort(readErrorCause(err))
	}
}

// readMessages answers the client's messages until reading fails (the
// error) or the server closes the connection for what the client sent
// (nil).
func (c *Conn) readMessages() error {
	state := ws.StateServerSide
	var message []byte // a text message being assembled from fragments
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.hub.opts.IdleTimeout))
		hdr, err := ws.ReadHeader(c.rd)
		if err != nil {
			return err
		}
		// RFC 6455's rules, which also bound what a frame can make the
		// server hold: masked frames only, control frames of at most 125
		// bytes (a pong echoes them) and never fragmented.
		if err := ws.CheckHeader(hdr, state); err != nil {
			c.Close(closeProtocol, err.Error())
			return nil
		}
		if hdr.Length > c.hub.opts.MaxMessage || int64(len(message))+hdr.Length > c.hub.opts.MaxMessage {
			c.Close(closeTooBig, "message too large")
			return nil
		}
		payload := make([]byte, hdr.Length)
		if _, err := io.ReadFull(c.rd, payload); err != nil {
			return err
		}
		ws.Cipher(payload, hdr.Mask, 0)
		switch hdr.OpCode {
		case ws.OpClose:
			c.Close(CloseNormal, "")
			return nil
		case ws.OpPing:
			c.push(ws.MustCompileFrame(ws.NewPongFrame(payload)))
			continue
		case ws.OpPong:
			continue
		case ws.OpBinary:
			c.Close(closeUnsupported, "this socket speaks JSON text frames")
			return nil
		case ws.OpText:
			message = payload
		case ws.OpContinuation:
			message = append(message, payload...)
		}
		if !hdr.Fin {
			state = state.Set(ws.StateFragmented)
			continue
		}
		state = state.Clear(ws.StateFragmented)
		if !c.handle(message) {
			return nil
		}
		message = nil
	}
}

// handle answers one client message; false means it closed the connection.
func (c *Conn) handle(raw []byte) bool {
	m, err := Decode(raw)
	if err != nil {
		return true // nothing to reply to: no ref
	}
	if field := m.fieldOverCap(); field != "" {
		// No real client sends one, and echoing it would make a large
		// reply of a small message.
		c.Close(ClosePolicy, field+" too long")
		return false
	}
	switch {
	case m.Topic == "phoenix" && m.Event == "heartbeat":
		c.reply(m, "ok", struct{}{})
	case m.Event == "phx_join":
		c.join(m)
	case m.Event == "phx_leave":
		h := c.hub
		h.mu.Lock()
		h.unsubscribeLocked(c, m.Topic)
		h.mu.Unlock()
		c.reply(m, "ok", struct{}{})
		c.push(ws.MustCompileFrame(ws.NewTextFrame(Encode(m.JoinRef, m.JoinRef, m.Topic, "phx_close", []byte("{}")))))
	default:
		// Every channel is read-only for clients.
		c.reply(m, "error", map[string]string{"reason": "unsupported event " + m.Event})
	}
	return true
}

func (c *Conn) reply(to Message, status string, response any) {
	c.push(ws.MustCompileFrame(ws.NewTextFrame(Reply(to, status, response))))
}

// join subscribes c to m.Topic if the handler allows it and c has not
// joined too many topics already.
func (c *Conn) join(m Message) {
	h := c.hub
	if m.JoinRef == "" {
		m.JoinRef = m.Ref // the join's own ref is its join_ref
	}
	if h.joinsFull(c, m.Topic) {
		c.reply(m, "error", map[string]string{"reason": "too many joined topics"})
		return
	}
	if reason := h.handler.Authorize(c, m.Topic); reason != "" {
		c.reply(m, "error", map[string]string{"reason": reason})
		return
	}
	h.subscribe(c, m.Topic, m.JoinRef)
	if reason := h.handler.Authorize(c, m.Topic); reason != "" {
		h.mu.Lock()
		h.unsubscribeLocked(c, m.Topic)
		h.mu.Unlock()
		c.reply(m, "error", map[string]string{"reason": reason})
		return
	}
	c.reply(m, "ok", struct{}{})
	h.handler.Joined(c, m.Topic)
}

// joinsFull says whether joining topic would take c past Options.MaxJoins;
// joining a topic again does not.
func (h *Hub) joinsFull(c *Conn, topic string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	_, again := c.joins[topic]
	return !again && len(c.joins) >= h.opts.MaxJoins
}
