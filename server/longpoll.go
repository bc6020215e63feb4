package server

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/chatd/chatd/store"
)

// A long-poll (GET …/messages/next?wait=N, inbox/next?wait=N) is held at
// little more than the cost of its place among the waiters. A handler
// waiting in its goroutine keeps that goroutine's stack, net/http's
// background reader and the connection's buffers: about 48 KB a request.
// So once the first look finds nothing, the poll takes the connection over
// from net/http (hijacks it) and its handler returns. What stays is a
// longPoll: the agent's waiter, a timer and the connection. Each wake-up
// looks again on a goroutine that ends with the look; the answer, the
// spec's 200 with the message or its 204, is written on the connection,
// which then closes (Connection: close), since net/http cannot take a
// connection back.
//
// A poll whose connection cannot be taken over (an in-process call) is
// held by its handler instead; the answer is the same.
//
// A held poll ends when a message comes, when its wait is over (204), when
// the server stops (204), when its credential ends (401), and when its
// client leaves (noticed before each look, so that no message is claimed
// for a client that is gone). Polls are bounded in all and per credential
// (Config.MaxHeldPolls, MaxHeldPollsPerKey).
type longPoll struct {
	s          *Server
	r          *http.Request // what its answer and log line need of the request (pollRequest)
	agentID    string
	limitKey   string
	held       heldCredential
	take       func(context.Context) (*store.Message, error)
	header     http.Header // what the response had before the handler: the request id, ...
	timer      *time.Timer
	unregister func()

	mu      sync.Mutex
	looking bool // a look is under way: an end waits for it
	again   bool // woken during the look: look again
	ended   bool // ended during the look: answer ending if it finds nothing
	ending  *bufferedResponse
	done    bool
	answer  *bufferedResponse       // nil: the client left, nothing to send
	deliver func(*bufferedResponse) // set once the poll is held
	conn    net.Conn                // set once taken over
}

// answerNext answers a request for the calling agent's next message, as
// take finds it: at once, or held for up to wait.
func (s *Server) answerNext(w http.ResponseWriter, r *http.Request, wait time.Duration,
	take func(context.Context) (*store.Message, error)) error {
	if wait > 0 {
		p, err := s.newLongPoll(w, r, wait, take)
		if err != nil {
			return err
		}
		if p != nil {
			return p.run(w, r)
		}
	}
	msg, err := take(r.Context())
	return replyNext(w, msg, callerAgent(r).ID, err)
}

// replyNext answers with the message as the agent sees it, or 204 for none.
func replyNext(w http.ResponseWriter, msg *store.Message, agentID string, err error) error {
	if err != nil {
		return err
	}
	if msg == nil {
		return noContent(w)
	}
	return reply(w, http.StatusOK, newMessageView(msg, agentReader(agentID)))
}

// newLongPoll registers a poll for r, looking already: it is nil, without
// an error, when the server is stopping (the request is answered at once).
func (s *Server) newLongPoll(w http.ResponseWriter, r *http.Request, wait time.Duration,
	take func(context.Context) (*store.Message, error)) (*longPoll, error) {
	caller := principal(r)
	p := &longPoll{s: s, r: pollRequest(r), agentID: caller.Agent.ID, limitKey: credentialLimitKey(caller),
		held: heldBy(caller),
		take: take, header: w.Header().Clone(), looking: true}
	unregister, ok, err := s.waiters.registerPoll(p)
	if !ok {
		return nil, err
	}
	p.unregister = unregister
	p.timer = time.AfterFunc(wait, func() { p.end(p.noContent()) })
	return p, nil
}

// pollRequest keeps of r what a held poll's answer and log line need (its
// method, path, protocol, request id and log note), in a context of its
// own: the poll outlives the request's, and a held poll should not keep
// the request's headers, parameters and contexts.
func pollRequest(r *http.Request) *http.Request {
	ctx := context.WithValue(context.Background(), requestIDKey, requestID(r))
	ctx = context.WithValue(ctx, callerKey, r.Context().Value(callerKey))
	return (&http.Request{Method: r.Method, URL: &url.URL{Path: r.URL.Path}, Proto: r.Proto}).WithContext(ctx)
}

// run makes the first look and answers with what it found, or holds the
// poll.
func (p *longPoll) run(w http.ResponseWriter, r *http.Request) error {
	p.look()
	p.mu.Lock()
	if p.done {
		answer := p.answer
		p.mu.Unlock()
		answer.copyTo(w)
		p.unregister()
		return nil
	}
	p.mu.Unlock()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return p.holdHere(w, r)
	}
	// Bytes net/http had read beyond the request (a pipelined one) are
	// dropped with the buffers: the connection closes after the answer,
	// and a client retries what it pipelined.
	if caller, _ := r.Context().Value(callerKey).(*callerNote); caller != nil {
		caller.handedOver = true
	}
	p.mu.Lock()
	p.conn = conn
	p.mu.Unlock()
	p.handOver(func(answer *bufferedResponse) { p.writeOn(conn, answer) })
	return nil
}

// holdHere holds the poll in its handler, until it is answered or its
// client leaves.
func (p *longPoll) holdHere(w http.ResponseWriter, r *http.Request) error {
	answered := make(chan *bufferedResponse, 1)
	p.handOver(func(answer *bufferedResponse) { answered <- answer })
	select {
	case answer := <-answered:
		if answer != nil {
			answer.copyTo(w)
		}
	case <-r.Context().Done():
		p.end(nil)
	}
	return nil
}

// handOver sets what delivers the answer, and delivers it now if the poll
// was answered meanwhile.
func (p *longPoll) handOver(deliver func(*bufferedResponse)) {
	p.mu.Lock()
	if !p.done {
		p.deliver = deliver
		p.mu.Unlock()
		return
	}
	answer := p.answer
	p.mu.Unlock()
	deliver(answer)
	p.unregister()
}

// writeOn writes the answer on the connection taken over, closes it, and
// logs the request's line.
func (p *longPoll) writeOn(conn net.Conn, answer *bufferedResponse) {
	defer conn.Close()
	if answer == nil {
		noteErrorCode(p.r, codeClientClosed)
		p.s.logRequest(p.r, statusClientClosed, 0)
		return
	}
	answer.header.Set("Connection", "close")
	_ = conn.SetWriteDeadline(time.Now().Add(p.s.transferTimeout))
	_, _ = conn.Write(answer.wire(p.r.Proto))
	p.s.logRequest(p.r, answer.status, int64(answer.body.Len()))
}

// look takes a message, again as long as the poll is woken meanwhile, and
// answers the poll with it, or with an end that came meanwhile. With
// neither, the poll goes on waiting.
func (p *longPoll) look() {
	for {
		if p.clientLeft() {
			p.settle(nil)
			return
		}
		msg, err := p.take(p.r.Context())
		var found *bufferedResponse
		if msg != nil || err != nil {
			found = p.render(msg, err)
		}
		p.mu.Lock()
		switch {
		case found != nil:
			p.mu.Unlock()
			p.settle(found)
			return
		case p.ended:
			p.mu.Unlock()
			p.settle(p.ending)
			return
		case p.again:
			p.again = false
			p.mu.Unlock()
		default:
			p.looking = false
			p.mu.Unlock()
			return
		}
	}
}

// clientLeft reports whether the client of a poll taken over closed its
// connection.
func (p *longPoll) clientLeft() bool {
	p.mu.Lock()
	conn := p.conn
	p.mu.Unlock()
	return conn != nil && peerClosed(conn)
}

// settle answers the poll, from the look under way: it delivers the answer
// if the poll is held already, and stops the poll's timer and waiter.
func (p *longPoll) settle(answer *bufferedResponse) {
	p.mu.Lock()
	p.done, p.answer, p.looking = true, answer, false
	deliver := p.deliver
	p.mu.Unlock()
	p.timer.Stop()
	if deliver != nil {
		deliver(answer)
		p.unregister()
	}
}

// wake looks again: work may have arrived. It runs under the waiters'
// lock, so the look has a goroutine of its own.
func (p *longPoll) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.done:
	case p.looking:
		p.again = true
	default:
		p.looking = true
		go p.look()
	}
}

// stop answers 204: the server is stopping. It runs under the waiters'
// lock, and the answer takes that lock to unregister.
func (p *longPoll) stop() { go p.end(p.noContent()) }

// end answers the poll with answer (nil: the client left), or, while a
// look is under way, with what the look finds, or else with answer.
func (p *longPoll) end(answer *bufferedResponse) {
	p.mu.Lock()
	if p.done || p.ended {
		p.mu.Unlock()
		return
	}
	if p.looking {
		p.ended, p.ending = true, answer
		p.mu.Unlock()
		return
	}
	p.looking = true // settle ends it
	p.mu.Unlock()
	p.settle(answer)
}

// render is the answer for what a look found: a message, or an error.
func (p *longPoll) render(msg *store.Message, err error) *bufferedResponse {
	b := &bufferedResponse{header: p.header.Clone()}
	if err := replyNext(b, msg, p.agentID, err); err != nil {
		p.s.writeError(b, p.r, err)
	}
	return b
}

// noContent is the answer of a wait that ended with nothing: 204.
func (p *longPoll) noContent() *bufferedResponse { return p.render(nil, nil) }

// refusal is the answer that refuses the poll with err.
func (p *longPoll) refusal(err error) *bufferedResponse { return p.render(nil, err) }

var (
	errPollCredentialEnded = &store.Error{Code: store.CodeUnauthorized,
		Message: "the credential this long-poll was made with ended (a key deleted or replaced, a session ended)"}
	errPollAgentDeleted = &store.Error{Code: store.CodeUnauthorized, Message: "the agent was deleted"}
)

// endPollsOfEndedCredentials answers 401 to the held polls whose key or
// session no longer authenticates.
func (s *Server) endPollsOfEndedCredentials() {
	endWithCredentials(s, "held long-polls", s.waiters.heldPolls(""),
		func(p *longPoll) heldCredential { return p.held },
		func(p *longPoll) { go p.end(p.refusal(errPollCredentialEnded)) })
}

// endPollsOfAgent answers 401 to the held polls of a deleted agent.
func (s *Server) endPollsOfAgent(agentID string) {
	for _, p := range s.waiters.heldPolls(agentID) {
		go p.end(p.refusal(errPollAgentDeleted))
	}
}
