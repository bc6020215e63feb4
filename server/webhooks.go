package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chatd/chatd/server/webhook"
	"github.com/chatd/chatd/store"
)

// The webhook dispatcher sends the store's webhook outbox (store/webhooks.go):
// each new message addressed to an agent, to each endpoint the agent
// registered, signed as Standard Webhooks describes (server/webhook).
//
// One scheduler goroutine keeps, in memory, when each endpoint with
// pending deliveries is next due, and starts a worker for each due endpoint
// that has none, up to WebhookConfig.Workers at once. What it knows comes
// from the store telling it which endpoints had deliveries queued or were
// resumed, and from each worker, which says when it stops when its
// endpoint is due again (now, after a burst; at the retry time, after a
// failure; never, with nothing left). It reads every endpoint's due time
// from the database only at start and every WebhookConfig.Poll, which also
// catches what another process changed: one scan per message would cost
// the writer's machine more than sending the message does.
//
// A worker sends its endpoint's due deliveries one at a time, in order,
// recording each attempt, until one fails or it has sent a burst (then the
// endpoint waits its turn again); so an endpoint has at most one request in
// flight, and its deliveries arrive in message order, while a slow or dead
// endpoint holds one worker and no more: it never delays the other
// endpoints while workers remain.
//
// Several chatd processes may share the database (PostgreSQL). Each runs a
// dispatcher over the same outbox, so a worker first claims its endpoint
// with a lease, "webhook:<endpoint id>" (store/leases.go), and sends only
// while it holds it: an endpoint's deliveries are sent by one process at a
// time, one at a time, in order, and no two processes send the same one.
// The claim lasts webhookClaimAttempts attempt timeouts and is renewed
// before an attempt that might outlast what is left of it, so an attempt
// and its record always end within it; the worker releases it after its
// burst. A process that finds an endpoint claimed by another looks again
// when that claim runs out. A process killed mid-attempt leaves its
// attempt unrecorded and its claim to run out: then another process makes
// the attempt again, with the same webhook-id (at least once).
//
// A failed attempt is retried with exponential backoff and jitter (about 5
// s, then ×4 each time up to 2 h), for 24 h from when the message was sent;
// then the delivery is given up as failed. An endpoint whose attempts fail
// WebhookConfig.PauseAfter times in a row, or that answers 410 Gone, is
// paused with the reason, keeping its queue, until it is resumed.

// WebhookConfig tunes the webhook dispatcher; zero fields take the defaults.
type WebhookConfig struct {
	// Workers bounds the requests in flight at once, all endpoints
	// together; default 8.
	Workers int
	// Timeout bounds one attempt, from connecting to the answer's end;
	// default 15 s.
	Timeout time.Duration
	// RetryBase is the wait before the first retry, RetryMax the longest
	// wait between two attempts; defaults 5 s and 2 h.
	RetryBase, RetryMax time.Duration
	// RetryFor is how long after its message a delivery is still tried;
	// default 24 h.
	RetryFor time.Duration
	// PauseAfter pauses an endpoint after this many failed attempts in a
	// row; default 20 (with the default schedule, about a day of failures).
	PauseAfter int
	// Poll is the longest the dispatcher sleeps without looking for due
	// deliveries, which catches those it was not told about (queued by
	// another process); default 30 s.
	Poll time.Duration
	// Allow lists ranges webhooks may reach even where they are refused
	// (link-local, metadata, Deny); Deny lists ranges refused besides
	// those (see webhook.Guard).
	Allow, Deny []netip.Prefix
}

func (c WebhookConfig) withDefaults() WebhookConfig {
	orDefault := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.PauseAfter <= 0 {
		c.PauseAfter = 20
	}
	orDefault(&c.Timeout, 15*time.Second)
	orDefault(&c.RetryBase, 5*time.Second)
	orDefault(&c.RetryMax, 2*time.Hour)
	orDefault(&c.RetryFor, 24*time.Hour)
	orDefault(&c.Poll, 30*time.Second)
	return c
}

type webhookDispatcher struct {
	db     *store.DB
	log    *slog.Logger
	cfg    WebhookConfig
	sender *webhook.Sender

	ctx    context.Context // ends at close: cuts attempts short
	cancel context.CancelFunc
	done   chan struct{} // closed when the scheduler and its workers ended

	slots   chan struct{} // one per worker running
	workers sync.WaitGroup
	idle    chan struct{} // a worker ended (holds one wake-up)
	mu      sync.Mutex
	busy    map[string]bool      // the endpoints a worker is on
	due     map[string]time.Time // when each endpoint with pending deliveries is next due
}

func newWebhookDispatcher(db *store.DB, log *slog.Logger, cfg WebhookConfig, guard *webhook.Guard) *webhookDispatcher {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &webhookDispatcher{db: db, log: log, cfg: cfg, sender: webhook.NewSender(guard, cfg.Timeout),
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		slots: make(chan struct{}, cfg.Workers), idle: make(chan struct{}, 1), busy: map[string]bool{},
		due: map[string]time.Time{}}
}

// start starts the scheduler; what an earlier run left pending is due at
// once.
func (d *webhookDispatcher) start() { go d.run() }

// close cuts the attempts in flight short (they are not recorded, so each
// is made again, with the same webhook-id, by the next run) and waits for
// the dispatcher to end.
func (d *webhookDispatcher) close() {
	d.cancel()
	<-d.done
	d.sender.Close()
}

func (d *webhookDispatcher) run() {
	defer close(d.done)
	defer d.workers.Wait()
	var scanned time.Time
	for {
		if time.Since(scanned) >= d.cfg.Poll {
			if d.scan() {
				scanned = time.Now()
			}
		}
		now := time.Now()
		for _, id := range d.db.QueuedWebhookEndpoints() {
			d.schedule(id, now)
		}
		wait := min(d.dispatchDue(), d.cfg.Poll-time.Since(scanned))
		if scanned.IsZero() {
			wait = time.Second // the scan failed: try it again soon
		}
		// With every worker busy, news of more deliveries changes nothing
		// until one is free, which wakes the scheduler anyway.
		queued := d.db.WebhooksQueued()
		if len(d.slots) == cap(d.slots) {
			queued = nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-d.ctx.Done():
			timer.Stop()
			return
		case <-queued:
		case <-d.idle:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// scan reads when every endpoint with pending deliveries is due from the
// database, which knows of them all, also those another process queued or
// resumed. It reports whether it could.
func (d *webhookDispatcher) scan() bool {
	due, err := d.db.WebhooksDue(d.ctx)
	if err != nil {
		if d.ctx.Err() == nil {
			d.log.Warn("webhooks: reading what is due failed; retrying", "err", err)
		}
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.due)
	for _, e := range due {
		d.due[e.EndpointID] = e.At
	}
	return true
}

// schedule notes that the endpoint is due at, or sooner if it was already.
func (d *webhookDispatcher) schedule(endpointID string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.scheduleLocked(endpointID, at)
}

func (d *webhookDispatcher) scheduleLocked(endpointID string, at time.Time) {
	if old, ok := d.due[endpointID]; !ok || at.Before(old) {
		d.due[endpointID] = at
	}
}

// dispatchDue starts a worker for each due endpoint that has none, while
// workers are free, and returns how long to sleep before looking again.
func (d *webhookDispatcher) dispatchDue() time.Duration {
	now := time.Now()
	wait := d.cfg.Poll
	for _, id := range d.dueBy(now, &wait) {
		// dueBy took no more than the free slots, and only this goroutine
		// takes any: this never waits.
		d.slots <- struct{}{}
		d.workers.Add(1)
		go d.work(id)
	}
	return wait
}

// dueBy takes the endpoints due by now that no worker is on, marking them
// busy, in the order they fell due; it lowers wait to when the next of the
// others falls due.
func (d *webhookDispatcher) dueBy(now time.Time, wait *time.Duration) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ready []string
	for id, at := range d.due {
		switch {
		case d.busy[id]:
		case at.After(now):
			*wait = min(*wait, at.Sub(now))
		default:
			ready = append(ready, id)
		}
	}
	slices.SortFunc(ready, func(a, b string) int { return d.due[a].Compare(d.due[b]) })
	if free := cap(d.slots) - len(d.slots); len(ready) > free {
		ready = ready[:free]
	}
	for _, id := range ready {
		d.busy[id] = true
		delete(d.due, id)
	}
	return ready
}

// workerBurst is how many deliveries a worker sends to its endpoint in a
// row before it lets the scheduler give its slot to another: enough to
// spare the scheduler a look for each one, few enough that a backlog at
// one endpoint waits its turn behind others.
const workerBurst = 16

// work sends the endpoint's due deliveries, one at a time in message
// order, up to workerBurst of them, and records each attempt, while it
// holds the endpoint's claim. It stops at the first that is not delivered:
// the endpoint's next one waits for it. Then it tells the scheduler when
// the endpoint is due again.
func (d *webhookDispatcher) work(endpointID string) {
	next := d.claimAndSend(endpointID)
	d.mu.Lock()
	delete(d.busy, endpointID)
	if !next.IsZero() {
		d.scheduleLocked(endpointID, next)
	}
	d.mu.Unlock()
	<-d.slots
	d.workers.Done()
	select {
	case d.idle <- struct{}{}:
	default:
	}
}

// webhookClaimAttempts is how many attempt timeouts an endpoint's claim
// lasts: one for the attempt, one left for recording it (whose write may
// wait in the queue and be retried), and one so that a claim is renewed
// about once per attempt that runs long, not before every attempt.
const webhookClaimAttempts = 3

// webhookClaimPrefix starts the name of an endpoint's claim.
const webhookClaimPrefix = "webhook:"

// webhookClaim is a worker's claim on its endpoint.
type webhookClaim struct {
	lease store.Lease
	until time.Time // when it runs out at the latest, by this clock
}

// claim takes or renews the endpoint's claim. When another process holds
// it, it returns false and when to look again: when that claim runs out.
// The one server of a SQLite file sends every webhook there is, so it
// claims without writing: a claim and a release per run of sends would
// be two fsync'd writes, and frames for Litestream to ship, for nothing.
func (d *webhookDispatcher) claim(c *webhookClaim) (bool, time.Time) {
	if !d.db.SharesChanges() {
		c.until = time.Now().Add(c.lease.TTL)
		return true, time.Time{}
	}
	st, err := d.db.TakeLease(context.Background(), c.lease)
	switch {
	case err != nil:
		if d.ctx.Err() == nil {
			d.log.Warn("webhooks: claiming an endpoint failed", "endpoint", strings.TrimPrefix(c.lease.Name, webhookClaimPrefix), "err", err)
		}
		return false, time.Now().Add(time.Second)
	case !st.Held:
		return false, time.Now().Add(st.Left + time.Millisecond)
	}
	c.until = st.Until
	return true, time.Time{}
}

// release gives up the claim c, so that another process may send at once.
func (d *webhookDispatcher) release(c *webhookClaim) {
	if !d.db.SharesChanges() {
		return
	}
	if err := d.db.ReleaseLease(context.Background(), c.lease.Name, c.lease.Holder); err != nil {
		d.log.Warn("webhooks: releasing an endpoint's claim failed; it runs out instead",
			"endpoint", strings.TrimPrefix(c.lease.Name, webhookClaimPrefix), "err", err)
	}
}

// claimAndSend claims the endpoint and sends its due deliveries, then
// releases it, and returns when the endpoint is due again: as sendBurst
// does, or when another process's claim runs out.
func (d *webhookDispatcher) claimAndSend(endpointID string) time.Time {
	c := &webhookClaim{lease: store.Lease{Name: webhookClaimPrefix + endpointID, Holder: d.db.NodeID(),
		TTL: webhookClaimAttempts * d.cfg.Timeout}}
	if held, retry := d.claim(c); !held {
		return retry
	}
	next := d.sendBurst(endpointID, c)
	d.release(c)
	if !next.IsZero() || d.ctx.Err() != nil {
		return next
	}
	// Nothing was left when the burst ended, but another process may
	// have queued a delivery since, and been refused the claim: look once
	// more, now that the claim is free, so that it does not wait for the
	// next scan.
	send, due, err := d.db.NextWebhookSend(d.ctx, endpointID, time.Now())
	switch {
	case err != nil:
		return time.Now().Add(time.Second)
	case send != nil:
		return time.Now()
	}
	return due
}

// sendBurst sends the endpoint's due deliveries, up to workerBurst, while
// it holds the claim c, and returns when its next one is due: the zero
// time when it has none (or is paused or gone).
func (d *webhookDispatcher) sendBurst(endpointID string, c *webhookClaim) time.Time {
	for range workerBurst {
		// An attempt and its record end within the claim.
		if time.Until(c.until) < (webhookClaimAttempts-1)*d.cfg.Timeout {
			if held, retry := d.claim(c); !held {
				return retry
			}
		}
		send, due, err := d.db.NextWebhookSend(d.ctx, endpointID, time.Now())
		if err != nil {
			if d.ctx.Err() == nil {
				d.log.Warn("webhooks: reading a delivery failed", "endpoint", endpointID, "err", err)
			}
			return time.Now().Add(time.Second)
		}
		if send == nil {
			return due
		}
		if next, sent := d.sendOne(send); !sent {
			return next
		}
	}
	return time.Now() // a burst sent: more may be due, after the others' turn
}

// sendOne makes one attempt at a due delivery and records it. It reports
// whether it was delivered, and if not, when the endpoint is due again: the
// retry time, at once when the delivery was given up (the next one is due),
// or a second from now when the attempt could not be made or recorded (it
// is made again, with the same webhook-id). An endpoint the attempt paused
// is looked at, and found with nothing due, once more.
func (d *webhookDispatcher) sendOne(send *store.WebhookSend) (next time.Time, delivered bool) {
	body, err := webhookBody(send)
	if err != nil {
		d.log.Error("webhooks: rendering a delivery failed", "delivery", send.DeliveryID, "err", err)
		return time.Now().Add(time.Minute), false
	}
	started := time.Now()
	res := d.sender.Send(d.ctx, webhook.Request{URL: send.URL, ID: send.DeliveryID, Secret: send.Secret, Body: body, At: started})
	if errors.Is(res.Err, context.Canceled) {
		return time.Time{}, false // shutting down: the next run makes this attempt again
	}
	a := d.outcome(send, started, res)
	switch {
	case !d.record(a):
		return time.Now().Add(time.Second), false
	case res.Err == nil:
		return time.Time{}, true
	case a.RetryAt.IsZero():
		return time.Now(), false
	default:
		return a.RetryAt, false
	}
}

// outcome is what an attempt's result means for its delivery: done, retried
// later, or given up, and whether its endpoint is paused.
func (d *webhookDispatcher) outcome(send *store.WebhookSend, started time.Time, res webhook.Result) store.WebhookAttempt {
	a := store.WebhookAttempt{DeliveryID: send.DeliveryID, EndpointID: send.EndpointID, MessageSeq: send.MessageSeq, At: started, Latency: res.Latency,
		StatusCode: res.StatusCode, PauseAfter: d.cfg.PauseAfter}
	if res.Err == nil {
		return a
	}
	a.Error = res.Err.Error()
	if res.StatusCode == http.StatusGone {
		a.PauseNow = "the receiver answered 410 Gone: it wants no more deliveries; resume the webhook to send again"
	}
	wait := webhook.Backoff(send.Attempts+1, d.cfg.RetryBase, d.cfg.RetryMax, rand.Float64())
	if res.RetryAfter > wait {
		wait = min(res.RetryAfter, d.cfg.RetryMax)
	}
	if retryAt := time.Now().Add(wait); retryAt.Before(send.InsertedAt.Add(d.cfg.RetryFor)) {
		a.RetryAt = retryAt
	}
	return a
}

// record stores an attempt's outcome. A write refused because the writer
// is busy is tried again for a while; an attempt left unrecorded is made
// again later, with the same webhook-id, so the log never misses one that
// succeeded.
// It reports whether the attempt was recorded.
func (d *webhookDispatcher) record(a store.WebhookAttempt) bool {
	pause := 50 * time.Millisecond
	for try := 1; ; try++ {
		err := d.db.RecordWebhookAttempt(context.Background(), a)
		if err == nil {
			return true
		}
		if store.ErrorCode(err) != store.CodeUnavailable || try == 8 || d.ctx.Err() != nil {
			d.log.Warn("webhooks: an attempt was not recorded; it will be made again", "delivery", a.DeliveryID, "err", err)
			return false
		}
		select {
		case <-time.After(pause):
			pause *= 2
		case <-d.ctx.Done():
		}
	}
}

// webhookPayload is the body of a webhook request, in the shape Standard
// Webhooks recommends: the event's type, when it happened, and its data.
type webhookPayload struct {
	Type      string             `json:"type"`
	Timestamp string             `json:"timestamp"`
	Data      webhookMessageData `json:"data"`
}

// webhookMessageData is a message.created event's data: which agent it is
// for (one URL may serve several) and the message as that agent reads it
// (GET …/messages/next), with its own delivery state at the time of the
// attempt.
type webhookMessageData struct {
	AgentID string      `json:"agent_id"`
	Message messageView `json:"message"`
}

// webhookBody renders a delivery's body as the API renders JSON (without
// HTML escapes), on one line.
func webhookBody(send *store.WebhookSend) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(webhookPayload{Type: "message.created", Timestamp: timestamp(send.Message.InsertedAt),
		Data: webhookMessageData{AgentID: send.AgentID, Message: newMessageView(send.Message, agentReader(send.AgentID))}})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}
