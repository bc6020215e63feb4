package server

import (
	"context"
	"sync"
	"time"

	"github.com/chatd/chatd/store"
)

// Callers without a socket wait for work (a long-poll, MCP's
// wait_for_message) without polling: a waiter registers under its agent,
// tries to take a message, and sleeps until the change feed that drives the
// socket pushes says that something for that agent may have arrived.
// Registering before the take means a message committed between the two
// still wakes it.
type deliveryWaiters struct {
	mu      sync.Mutex
	byAgent map[string]map[waiter]struct{}
	// polls counts the long-polls held, in all and per credential, against
	// Config.MaxHeldPolls and MaxHeldPollsPerKey.
	polls                 slots
	maxPolls, maxPollsKey int
	closed                chan struct{} // closed at shutdown: every wait ends
	// answered is made at shutdown, and closed once every poll held then
	// has been answered.
	answered chan struct{}
}

// A waiter is told when work may have arrived for its agent (wake), and
// when the server stops (stop). Neither may block, nor call back into the
// deliveryWaiters: both run under its lock.
type waiter interface {
	wake()
	stop()
}

// wakeChan is the waiter of a goroutine that sleeps on it (waitFor); it
// watches deliveryWaiters.closed for the stop.
type wakeChan chan struct{}

func (c wakeChan) wake() {
	select {
	case c <- struct{}{}:
	default: // already told
	}
}

func (c wakeChan) stop() {}

func newDeliveryWaiters(maxPolls, maxPollsPerKey int) *deliveryWaiters {
	return &deliveryWaiters{byAgent: map[string]map[waiter]struct{}{}, closed: make(chan struct{}),
		polls: newSlots(), maxPolls: maxPolls, maxPollsKey: maxPollsPerKey}
}

// register adds w to the agent's waiters and returns the function that
// removes it.
func (dw *deliveryWaiters) register(agentID string, w waiter) func() {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	dw.addLocked(agentID, w)
	return func() {
		dw.mu.Lock()
		defer dw.mu.Unlock()
		dw.removeLocked(agentID, w)
	}
}

func (dw *deliveryWaiters) addLocked(agentID string, w waiter) {
	if dw.byAgent[agentID] == nil {
		dw.byAgent[agentID] = map[waiter]struct{}{}
	}
	dw.byAgent[agentID][w] = struct{}{}
}

func (dw *deliveryWaiters) removeLocked(agentID string, w waiter) {
	delete(dw.byAgent[agentID], w)
	if len(dw.byAgent[agentID]) == 0 {
		delete(dw.byAgent, agentID)
	}
}

// errTooManyPolls refuses a long-poll beyond the bounds on held polls.
var errTooManyPolls = &httpError{Code: codeTooManyRequests,
	Message: "too many long-polls held for this credential or in all; answer or close some, or retry later"}

// registerPoll adds a long-poll to its agent's waiters, within the bounds
// on held polls, and returns the function that removes it. ok is false,
// and nothing registered, once the server is stopping.
func (dw *deliveryWaiters) registerPoll(p *longPoll) (unregister func(), ok bool, err error) {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	select {
	case <-dw.closed:
		return nil, false, nil
	default:
	}
	if !dw.polls.take(p.limitKey, dw.maxPolls, dw.maxPollsKey) {
		return nil, false, errTooManyPolls
	}
	dw.addLocked(p.agentID, p)
	return func() {
		dw.mu.Lock()
		defer dw.mu.Unlock()
		dw.removeLocked(p.agentID, p)
		dw.polls.give(p.limitKey)
		if dw.answered != nil && dw.polls.total == 0 {
			close(dw.answered)
		}
	}, true, nil
}

// held is how many long-polls are held now.
func (dw *deliveryWaiters) held() int {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	return dw.polls.total
}

// wake tells the agent's waiters that work may have arrived.
func (dw *deliveryWaiters) wake(agentID string) {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	for w := range dw.byAgent[agentID] {
		w.wake()
	}
}

// wakeAll wakes every waiter: another process wrote, and the server cannot
// tell for whom.
func (dw *deliveryWaiters) wakeAll() {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	for _, ws := range dw.byAgent {
		for w := range ws {
			w.wake()
		}
	}
}

// heldPolls returns the long-polls held, of one agent or ("") of all.
func (dw *deliveryWaiters) heldPolls(agentID string) []*longPoll {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	var out []*longPoll
	for id, ws := range dw.byAgent {
		if agentID != "" && id != agentID {
			continue
		}
		for w := range ws {
			if p, ok := w.(*longPoll); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// close ends every wait, at shutdown.
func (dw *deliveryWaiters) close() {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	select {
	case <-dw.closed:
		return
	default:
		close(dw.closed)
	}
	dw.answered = make(chan struct{})
	if dw.polls.total == 0 {
		close(dw.answered)
	}
	for _, ws := range dw.byAgent {
		for w := range ws {
			w.stop()
		}
	}
}

// awaitAnswers waits, up to limit, until every long-poll held at shutdown
// has been answered; close must have run.
func (dw *deliveryWaiters) awaitAnswers(limit time.Duration) bool {
	dw.mu.Lock()
	answered := dw.answered
	dw.mu.Unlock()
	select {
	case <-answered:
		return true
	case <-time.After(limit):
		return false
	}
}

// route wakes the waiters a change concerns: the agents a new message is
// addressed to, an agent that joined a room (its open messages there are
// claimable again), everyone after another process's write.
func (dw *deliveryWaiters) route(c store.Change) {
	switch c.Kind {
	case store.MessageCreated:
		for _, d := range c.Message.Deliveries {
			dw.wake(d.AgentID)
		}
	case store.ParticipantAdded:
		if c.Member.Type == store.PartyAgent {
			dw.wake(c.Member.ID)
		}
	case store.OtherProcessWrote:
		dw.wakeAll()
	}
}

// claimWithin claims a message for the agent in roomID ("" for any of its
// rooms), waiting up to wait for one to arrive. It returns nil when none
// came in time, when ended is closed (the caller's session or credential
// ended), or when the server is shutting down.
func (s *Server) claimWithin(ctx context.Context, agent store.Actor, roomID string, wait time.Duration,
	ended <-chan struct{}) (*store.Message, error) {
	return s.waitFor(ctx, agent.ID, wait, ended, func() (*store.Message, error) {
		return s.db.ClaimMessage(ctx, agent, roomID)
	})
}

// waitFor calls take until it gives a message, sleeping between calls until
// work may have arrived for the agent, for up to wait in all. It returns
// nil when nothing came in time, when ended is closed, or at shutdown.
func (s *Server) waitFor(ctx context.Context, agentID string, wait time.Duration, ended <-chan struct{},
	take func() (*store.Message, error)) (*store.Message, error) {
	if wait <= 0 {
		return take()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		woken := make(wakeChan, 1)
		unregister := s.waiters.register(agentID, woken)
		msg, err := take()
		if err != nil || msg != nil {
			unregister()
			return msg, err
		}
		over := true
		select {
		case <-woken:
			over = false
		case <-timer.C:
		case <-s.waiters.closed:
		case <-ended:
		case <-ctx.Done():
			err = ctx.Err()
		}
		unregister()
		if over {
			return nil, err
		}
	}
}
