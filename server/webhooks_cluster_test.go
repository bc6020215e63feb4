package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
)

// Two chatd nodes on one PostgreSQL database each run a webhook
// dispatcher over the same outbox: an endpoint's sends are claimed by one
// node at a time (webhooks.go), so a receiver gets every message once, in
// the order they were posted, whichever node each was posted on.
func TestPostgresWebhookSendsAreClaimedByOneNodeAtATime(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, _ := startServerAt(t, url, nil)
	b, _ := startServerAt(t, url, nil)
	w := &hookWorld{team: newTeam(t, a)}
	h := newHookReceiver(t)
	hook := w.register(t, w.helperKey, h, "/hook")
	const n = 40
	var want []string
	for i := range n {
		// Posted on each node in turn: each queues its deliveries and
		// wakes its own dispatcher.
		w.ts = []*testServer{a, b}[i%2]
		want = append(want, fmt.Sprint("m", i))
		w.post(t, want[i], w.helper)
	}
	eventually(t, "every message delivered", func() bool { return len(h.accepted()) >= n })
	eventually(t, "the log to show every delivery", func() bool { return allDelivered(w.log(t, w.helperKey, hook)) })
	// Nothing is pending any more, so nothing more can be sent.
	got := h.snapshot()
	if contents(got) != strings.Join(want, ",") {
		t.Fatalf("the receiver got %s", contents(got))
	}
	seen := map[string]bool{}
	for i, r := range got {
		if r.signature != nil || seen[r.id] {
			t.Fatalf("request %d: %v, webhook-id %s seen before: %v", i+1, r.signature, r.id, seen[r.id])
		}
		seen[r.id] = true
	}
	for _, line := range w.log(t, w.helperKey, hook) {
		if line["attempts"] != float64(1) {
			t.Fatalf("a delivery took %v attempts: %v", line["attempts"], line)
		}
	}
}

// A node that stops in the middle of an attempt cuts it short, records
// nothing and gives up its claim: another node makes the attempt again,
// with the same webhook-id, and sends the rest in order.
func TestPostgresWebhookAttemptCutByAStoppingNodeIsMadeByAnother(t *testing.T) {
	url := pgtest.NewDatabase(t)
	// A node learns of what the other queued by its scan, every Poll.
	quickScan := func(c *Config) { c.Webhooks.Poll = 100 * time.Millisecond }
	a, stopA := startServerAt(t, url, quickScan)
	b, stopB := startServerAt(t, url, quickScan)
	w := &hookWorld{team: newTeam(t, a)}
	h := newHookReceiver(t)
	hook := w.register(t, w.helperKey, h, "/hook")
	hold := make(chan struct{})
	h.hold = hold
	for _, c := range []string{"k1", "k2", "k3"} {
		w.post(t, c, w.helper)
	}
	eventually(t, "an attempt at the first message", func() bool { return h.arrived.Load() == 1 })
	// The node making it holds the claim; the other waits.
	var stop func()
	switch {
	case a.db.LeasesHeld()["webhook"] == 1:
		stop, w.ts = stopA, b
	case b.db.LeasesHeld()["webhook"] == 1:
		stop, w.ts = stopB, a
	default:
		t.Fatal("an attempt under way, and no node holds the endpoint's claim")
	}
	stop()
	close(hold)
	eventually(t, "every message delivered by the other node", func() bool { return len(h.accepted()) == 3 })
	got := h.snapshot()
	if contents(got) != "k1,k2,k3" {
		t.Fatalf("the receiver got %s", contents(got))
	}
	if n := h.arrived.Load(); n != 4 {
		t.Fatalf("%d requests arrived, want the cut one and three", n)
	}
	eventually(t, "the log to show every delivery", func() bool { return allDelivered(w.log(t, w.helperKey, hook)) })
	if log := w.log(t, w.helperKey, hook); got[0].id != log[0]["id"] {
		t.Fatalf("the attempt made again has webhook-id %s, the delivery's is %s", got[0].id, log[0]["id"])
	}
}
