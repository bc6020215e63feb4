package server

import (
	"context"
	"sync"
	"time"

	"github.com/chatd/chatd/store"
)

// Callers without a socket wait for work (MCP's wait_for_message) without
// polling: a waiter registers under its agent, tries to claim a message,
// and sleeps until the change feed that drives the socket pushes says that
// something for that agent may have arrived. Registering before the claim
// means a message committed between the two still wakes it.
type deliveryWaiters struct {
	mu      sync.Mutex
	byAgent map[string]map[chan struct{}]struct{}
	closed  chan struct{} // closed at shutdown: every wait ends
}

func newDeliveryWaiters() *deliveryWaiters {
	return &deliveryWaiters{byAgent: map[string]map[chan struct{}]struct{}{}, closed: make(chan struct{})}
}

// register returns a channel that receives when work may have arrived for
// the agent, and the function that unregisters it.
func (dw *deliveryWaiters) register(agentID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	dw.mu.Lock()
	defer dw.mu.Unlock()
	if dw.byAgent[agentID] == nil {
		dw.byAgent[agentID] = map[chan struct{}]struct{}{}
	}
	dw.byAgent[agentID][ch] = struct{}{}
	return ch, func() {
		dw.mu.Lock()
		defer dw.mu.Unlock()
		delete(dw.byAgent[agentID], ch)
		if len(dw.byAgent[agentID]) == 0 {
			delete(dw.byAgent, agentID)
		}
	}
}

// wake tells the agent's waiters that work may have arrived.
func (dw *deliveryWaiters) wake(agentID string) {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	for ch := range dw.byAgent[agentID] {
		select {
		case ch <- struct{}{}:
		default: // already told
		}
	}
}

// wakeAll wakes every waiter: another process wrote, and the server cannot
// tell for whom.
func (dw *deliveryWaiters) wakeAll() {
	dw.mu.Lock()
	agents := make([]string, 0, len(dw.byAgent))
	for id := range dw.byAgent {
		agents = append(agents, id)
	}
	dw.mu.Unlock()
	for _, id := range agents {
		dw.wake(id)
	}
}

// close ends every wait, at shutdown.
func (dw *deliveryWaiters) close() {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	select {
	case <-dw.closed:
	default:
		close(dw.closed)
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
		woken, unregister := s.waiters.register(agentID)
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
