package server

import (
	"sync"
	"time"
)

// activityTTL is how long an agent's "working" report lasts: agents re-send
// it every few seconds while they work, so a crashed agent's indicator
// clears by itself.
const activityTTL = 10 * time.Second

// activityTracker remembers which agents reported that they are working in
// which rooms. It lives in memory on purpose: the state is seconds long, a
// restart rightly forgets it, and keeping it out of the database keeps a
// keep-alive every 3 seconds per agent off the write path.
type activityTracker struct {
	mu      sync.Mutex
	until   map[[2]string]time.Time // {room, agent} -> expiry
	sweepAt int                     // size at which expired entries are dropped
	now     func() time.Time
}

func newActivityTracker() *activityTracker {
	return &activityTracker{until: map[[2]string]time.Time{}, sweepAt: 1024, now: time.Now}
}

func (t *activityTracker) set(room, agent string, working bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := [2]string{room, agent}
	if !working {
		delete(t.until, key)
		return
	}
	now := t.now()
	t.until[key] = now.Add(activityTTL)
	if len(t.until) >= t.sweepAt { // drop what expired, so memory follows live reports
		for k, exp := range t.until {
			if now.After(exp) {
				delete(t.until, k)
			}
		}
		t.sweepAt = max(1024, 2*len(t.until))
	}
}

func (t *activityTracker) working(room, agent string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	exp, ok := t.until[[2]string{room, agent}]
	return ok && t.now().Before(exp)
}
