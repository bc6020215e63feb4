package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The webhook workload: the same REST posts (each mentioning its lane's
// worker agent) for d on four servers (sync normal) started alike, every
// webhook at a receiver in this process that answers 204:
//
//   - none: no webhook registered;
//   - registered elsewhere: n webhooks on n agents the posts never
//     mention, so that what registering them costs a post shows apart from
//     what sending costs;
//   - one per agent: n webhooks on n agents, one each, the lanes' workers
//     among them, so that each post queues one delivery;
//   - fan-out: the n webhooks all on the lanes' workers, so that each post
//     queues n/clients deliveries.
//
// It reports the posts' latency on each (what writing the outbox with each
// message, and sending it meanwhile, costs the poster), and how fast the
// server delivered: from its first post until the receiver had every
// request, and how long the queue took to drain after the last post.

// hookCounter is the receiver: it counts each webhook-id once and notes
// when the last new one arrived.
type hookCounter struct {
	mu       sync.Mutex
	seen     map[string]bool
	requests int
	last     time.Time
}

func (h *hookCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	h.mu.Lock()
	h.requests++
	if id := r.Header.Get("webhook-id"); !h.seen[id] {
		h.seen[id] = true
		h.last = time.Now()
	}
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookCounter) delivered() (unique, requests int, last time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen), h.requests, h.last
}

func webhookWorkload(bin string, clients int, d time.Duration, rate float64, endpoints int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hooks := &hookCounter{seen: map[string]bool{}}
	receiver := &http.Server{Handler: hooks}
	go receiver.Serve(ln)
	defer receiver.Close()

	pace := "as fast as each is acknowledged"
	if rate > 0 {
		pace = fmt.Sprintf("%.0f posts/s in all", rate)
	}
	fmt.Printf("webhooks: %d clients posting over REST for %s (%s), each post mentioning one agent, sync normal\n", clients, d, pace)
	fmt.Printf("%-34s %10s %9s %9s %8s\n", "webhooks registered", "posts/s", "p50", "p99", "errors")
	setups := []webhookSetup{{"none%.0d", 0, spread}, {"%d, on agents never mentioned", endpoints, elsewhere},
		{"%d, one per agent", endpoints, spread}, {"%d, all on the mentioned agents", endpoints, onWorkers}}
	// Twice, the second time in reverse, so that a machine busier in one
	// part of the run weighs on every setup alike.
	order := []int{0, 1, 2, 3, 3, 2, 1, 0}
	p99s := make([]time.Duration, len(setups))
	for _, i := range order {
		srv, err := startBenchServer(bin)
		if err != nil {
			return err
		}
		hooks.reset()
		res, wantDeliveries, err := setups[i].post(srv, clients, d, rate, "http://"+ln.Addr().String())
		if err == nil && setups[i].endpoints > 0 && setups[i].mode != elsewhere {
			err = reportDeliveries(hooks, wantDeliveries, res)
		}
		srv.stop()
		if err != nil {
			return err
		}
		p99s[i] += res.res.p(0.99)
	}
	fmt.Printf("post p99 against none, both runs of each summed: %.2f (registered, never sent), %.2f (one per agent), %.2f (fan-out)\n",
		float64(p99s[1])/float64(p99s[0]), float64(p99s[2])/float64(p99s[0]), float64(p99s[3])/float64(p99s[0]))
	return nil
}

// webhookSetup is how a server's webhooks are registered.
type webhookSetup struct {
	name      string
	endpoints int
	mode      webhookSpread
}

// webhookSpread is where a setup's webhooks go.
type webhookSpread int

const (
	spread    webhookSpread = iota // one per agent: the lanes' workers, then agents registered for the purpose
	onWorkers                      // all on the lanes' workers
	elsewhere                      // one per agent registered for the purpose, which no post mentions
)

func (h *hookCounter) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen, h.requests, h.last = map[string]bool{}, 0, time.Time{}
}

// hookedPosts is a post run and when it began.
type hookedPosts struct {
	res   result
	start time.Time
}

// post sets up clients lanes on srv, registers the webhooks, posts for d
// and prints the line. It answers how many deliveries the posts queued.
func (w webhookSetup) post(srv *benchServer, clients int, d time.Duration, rate float64, receiver string) (hookedPosts, int, error) {
	c := newClient(srv.base, 2*clients)
	f, err := c.setup(srv.personKey, clients)
	if err != nil {
		return hookedPosts{}, 0, fmt.Errorf("setup: %w", err)
	}
	perWorker := make([]int, clients)
	for e := range w.endpoints {
		key := f.lanes[e%clients].workerKey
		switch {
		case w.mode == onWorkers || w.mode == spread && e < clients:
			perWorker[e%clients]++
		default:
			if _, key, err = registerAgent(c, srv.personKey, fmt.Sprintf("listener %d", e)); err != nil {
				return hookedPosts{}, 0, err
			}
		}
		if _, err := c.call("POST", "/api/v1/agent/webhooks", key, map[string]any{"webhook": map[string]any{
			"url": fmt.Sprintf("%s/hook/%d", receiver, e)}}, nil, 201); err != nil {
			return hookedPosts{}, 0, err
		}
	}
	okPerLane := make([]atomic.Int64, clients)
	posts := hookedPosts{start: time.Now()}
	posts.res = c.runAt(clients, d, rate, func(i int) error {
		err := f.post(i)
		if err == nil {
			okPerLane[i].Add(1)
		}
		return err
	})
	queued := 0
	for i := range okPerLane {
		queued += int(okPerLane[i].Load()) * perWorker[i]
	}
	fmt.Printf("%-34s %10.0f %9s %9s %8d\n", fmt.Sprintf(w.name, w.endpoints), posts.res.rate(),
		ms(posts.res.p(0.5)), ms(posts.res.p(0.99)), posts.res.errors)
	if posts.res.firstErr != nil {
		fmt.Printf("  first error: %v\n", posts.res.firstErr)
	}
	return posts, queued, nil
}

// reportDeliveries waits until the receiver has every delivery queued
// (for up to 5 minutes) and prints how fast they came.
func reportDeliveries(hooks *hookCounter, want int, posts hookedPosts) error {
	deadline := time.Now().Add(5 * time.Minute)
	unique, requests, last := hooks.delivered()
	for ; unique < want && time.Now().Before(deadline); unique, requests, last = hooks.delivered() {
		time.Sleep(50 * time.Millisecond)
	}
	took := last.Sub(posts.start)
	fmt.Printf("  delivered %d of %d (%d requests made) in %s from the first post: %.0f/s; the queue drained %s after the last post\n",
		unique, want, requests, took.Round(time.Millisecond), float64(unique)/took.Seconds(),
		(took - posts.res.elapsed).Round(time.Millisecond))
	if unique < want {
		return fmt.Errorf("webhooks: %d of %d delivered after 5 minutes", unique, want)
	}
	return nil
}

// runAt is run with the calls paced at rate per second in all (0: each
// client calls again as soon as its call returns).
func (c *client) runAt(n int, d time.Duration, rate float64, op func(int) error) result {
	if rate <= 0 {
		return c.run(n, d, op)
	}
	turns := make(chan time.Time, 4*n)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for {
			select {
			case t := <-tick.C:
				turns <- t
			case <-stop:
				return
			}
		}
	}()
	return c.runTurns(n, d, turns, op)
}
