package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The long-poll workload, against one server (sync normal) in a process of
// its own, so that what it holds is measured apart from the clients:
//
//   - held polls: n concurrent GET …/messages/next?wait=60, each on a
//     connection of its own, in one agent's room with nothing for it; the
//     server's memory before and while it holds them; then one post, which
//     answers them all, and a check that the server lets go of them;
//   - wake-ups: an agent holding …/messages/next?wait=30, then
//     inbox/next?wait=30&claim=true, another agent posting it a message
//     over REST, and the time until the held poll answers.

// longPollRoom is a person's room with two agents: a poster and a waiter
// that the poster's messages mention.
type longPollRoom struct {
	c *client
	// polls makes the held requests: with a timeout beyond the longest
	// wait, and no cap on connections, so that every held poll has one.
	polls                *http.Client
	room                 string
	posterKey, waiterKey string
	waiterID             string
}

func longPollWorkload(bin string, rounds, held int) error {
	srv, err := startBenchServer(bin, "--metrics-addr", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer srv.stop()
	c := newClient(srv.base, 4)
	room, keys, err := fanOutRoom(c, srv.personKey, "", 2)
	if err != nil {
		return err
	}
	r := &longPollRoom{c: c, room: room, posterKey: keys[0], waiterKey: keys[1],
		polls: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
			MaxIdleConns: held, MaxIdleConnsPerHost: held, IdleConnTimeout: time.Minute}}}
	defer r.polls.CloseIdleConnections()
	var waiter struct{ Data struct{ ID string } }
	if _, err := c.call("GET", "/api/v1/agent/me", r.waiterKey, nil, &waiter, 200); err != nil {
		return err
	}
	r.waiterID = waiter.Data.ID
	// Held polls first, on a server that has served next to nothing yet:
	// its memory then grows by what holding them costs, not less because
	// earlier load had already grown the heap.
	if err := r.holdPolls(srv, held); err != nil {
		return err
	}
	return r.wakeUps(rounds)
}

// pollAnswer is a held poll's answer: when its status line arrived, and
// the message it carried.
type pollAnswer struct {
	at      time.Time
	status  int
	message polledMessage
	err     error
}

type polledMessage struct {
	ID         string `json:"id"`
	InsertedAt string `json:"inserted_at"`
}

// poll makes one long-poll request; wrote, when not nil, counts it once it
// has been sent in full.
func (r *longPollRoom) poll(path string, wrote *atomic.Int64) pollAnswer {
	req, err := http.NewRequest("GET", r.c.base+path, nil)
	if err != nil {
		return pollAnswer{err: err}
	}
	req.Header.Set("X-API-Key", r.waiterKey)
	if wrote != nil {
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) }}))
	}
	res, err := r.polls.Do(req)
	a := pollAnswer{at: time.Now(), err: err}
	if err != nil {
		return a
	}
	defer res.Body.Close()
	a.status = res.StatusCode
	b, err := io.ReadAll(res.Body)
	switch {
	case err != nil:
		a.err = err
	case res.StatusCode == 200:
		var body struct{ Data *polledMessage }
		if a.err = json.Unmarshal(b, &body); a.err == nil && body.Data != nil {
			a.message = *body.Data
		}
	case res.StatusCode != 204:
		a.err = fmt.Errorf("GET %s: %d %s", path, res.StatusCode, b)
	}
	return a
}

// post is a message from the poster that mentions the waiter, with when it
// was sent and when its 201 had been read.
func (r *longPollRoom) post() (id string, started, answered time.Time, err error) {
	var posted struct{ Data struct{ ID string } }
	started = time.Now()
	_, err = r.c.call("POST", "/api/v1/agent/chats/"+r.room+"/messages", r.posterKey, map[string]any{
		"message": map[string]any{"content": "wake up", "mentions": []map[string]string{{"id": r.waiterID}}},
	}, &posted, 201)
	return posted.Data.ID, started, time.Now(), err
}

// holdPolls holds n polls at once and reports the server's memory before
// and while it holds them; then one post answers them all. So that what
// holding costs is not confused with what serving a burst of n requests
// costs (the heap a collector lets grow with them), the server first
// serves n polls at once that do not wait, and holding is measured
// against that as well as against the idle server.
func (r *longPollRoom) holdPolls(srv *benchServer, n int) error {
	time.Sleep(500 * time.Millisecond) // let the server settle after the setup
	idle, err := srv.memoryAfterGC()
	if err != nil {
		return err
	}
	if err := r.burst(n); err != nil {
		return err
	}
	if _, err := srv.settledBelow(idle.goroutines, 5*time.Second); err != nil {
		return err
	}
	served, err := srv.memoryAfterGC()
	if err != nil {
		return err
	}
	var wrote atomic.Int64
	answers := make(chan pollAnswer, n)
	start := time.Now()
	for range n {
		go func() { answers <- r.poll("/api/v1/agent/chats/"+r.room+"/messages/next?wait=60", &wrote) }()
	}
	for wrote.Load() < int64(n) && len(answers) == 0 && time.Since(start) < 30*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	sent := time.Since(start)
	steady, err := srv.settled(float64(n), time.Second, 30*time.Second)
	if err != nil {
		return err
	}
	holding, err := srv.memoryAfterGC()
	if err != nil {
		return err
	}
	early := len(answers) // answered before any message: refused or broken

	id, posted, _, err := r.post()
	if err != nil {
		return err
	}
	// Processed, so that the wake-ups after find nothing waiting.
	defer func() {
		base := "/api/v1/agent/chats/" + r.room + "/messages/" + id
		if _, err := r.c.call("POST", base+"/processing", r.waiterKey, nil, nil, 200); err == nil {
			_, _ = r.c.call("POST", base+"/processed", r.waiterKey, map[string]any{}, nil, 200)
		}
	}()
	rel := releaseOf(answers, n, id)
	// Keep-alive connections each keep a goroutine on the server (a held
	// poll's closes when it is answered): closed, the server should be
	// back to what it ran before the polls.
	r.polls.CloseIdleConnections()
	after, err := srv.settledBelow(idle.goroutines, 5*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("longpoll: %d held polls (messages/next?wait=60, one connection each, nothing to answer): sent in %s, the server's RSS steady from %s\n",
		n, sent.Round(time.Millisecond), steady.Sub(start).Round(time.Millisecond))
	printHeldMemory(n, idle, served, holding)
	fmt.Printf("released by one post: %d of %d answered 200 with it, the last %s after the post's start; %d errors, %d answered before it\n",
		rel.answered, n, ms(rel.last.Sub(posted)), rel.errs, early)
	fmt.Printf("after: server goroutines %.0f (%.0f before the polls), RSS %s\n", after.goroutines, idle.goroutines, mib(after.rssKB<<10))
	if rel.firstErr != nil {
		fmt.Printf("  first error: %v\n", rel.firstErr)
	}
	return nil
}

// burst makes n polls at once that do not wait (each answered 204 at
// once), each on a connection of its own, then closes the connections.
func (r *longPollRoom) burst(n int) error {
	answers := make(chan pollAnswer, n)
	for range n {
		go func() { answers <- r.poll("/api/v1/agent/chats/"+r.room+"/messages/next", nil) }()
	}
	var firstErr error
	for range n {
		if a := <-answers; a.err != nil || a.status != 204 {
			firstErr = cmp.Or(firstErr, a.err, fmt.Errorf("a poll without a wait answered %d", a.status))
		}
	}
	r.polls.CloseIdleConnections()
	return firstErr
}

// printHeldMemory prints the server's memory idle, after serving n polls
// at once, and holding n polls, and what each held poll costs.
func printHeldMemory(n int, idle, served, holding serverMemory) {
	fmt.Printf("%-26s %10s %12s %12s %12s %11s\n", "server", "RSS", "heap live", "heap in use", "stacks", "goroutines")
	for _, row := range []struct {
		name string
		m    serverMemory
	}{{"idle", idle}, {fmt.Sprintf("after serving %d at once", n), served}, {fmt.Sprintf("holding %d", n), holding}} {
		fmt.Printf("%-26s %10s %12s %12s %12s %11.0f\n", row.name, mib(row.m.rssKB<<10), mib(int64(row.m.heapAlloc)),
			mib(int64(row.m.heapInuse)), mib(int64(row.m.stackInuse)), row.m.goroutines)
	}
	for _, from := range []struct {
		name string
		m    serverMemory
	}{{"per held poll, from idle", idle}, {"per held poll, from served", served}} {
		per := func(b, a float64) string { return fmt.Sprintf("%.1f KB", (a-b)/float64(n)/1024) }
		b := from.m
		fmt.Printf("%-26s %10s %12s %12s %12s %11.2f\n", from.name, per(float64(b.rssKB<<10), float64(holding.rssKB<<10)),
			per(b.heapAlloc, holding.heapAlloc), per(b.heapInuse, holding.heapInuse),
			per(b.stackInuse, holding.stackInuse), (holding.goroutines-b.goroutines)/float64(n))
	}
	fmt.Printf("(heap live: what the heap holds right after a collection the bench asks for; RSS: what the process holds, collections' slack included)\n")
}

// release is how n held polls ended once message id was posted.
type release struct {
	answered, errs int
	firstErr       error
	last           time.Time // when the last poll with the message was answered
}

// releaseOf collects the n polls' answers.
func releaseOf(answers <-chan pollAnswer, n int, id string) release {
	var rel release
	fail := func(err error) {
		rel.errs++
		if rel.firstErr == nil {
			rel.firstErr = err
		}
	}
	for range n {
		a := <-answers
		switch {
		case a.err != nil:
			fail(a.err)
		case a.status == 200 && a.message.ID == id:
			rel.answered++
			rel.last = a.at
		default:
			fail(fmt.Errorf("a held poll answered %d with message %q, want 200 with %s", a.status, a.message.ID, id))
		}
	}
	return rel
}

// wakeUps times, round after round, a held poll woken by a post, for the
// room's messages/next and for the inbox (claiming).
func (r *longPollRoom) wakeUps(rounds int) error {
	fmt.Printf("longpoll: a held poll woken by a REST post sent %s after the poll, %d rounds each\n",
		wakeGap, rounds)
	fmt.Printf("%-36s %7s %-18s %-18s %-18s\n", "", "", "from the post's", "from the", "from the")
	fmt.Printf("%-36s %7s %-18s %-18s %-18s\n", "poll", "errors", "start", "inserted_at", "poster's 201")
	fmt.Printf("%-36s %7s %8s %9s %8s %9s %8s %9s\n", "", "", "p50", "p99", "p50", "p99", "p50", "p99")
	for _, w := range []struct {
		name, path string
		claims     bool
	}{
		{"messages/next?wait=30", "/api/v1/agent/chats/" + r.room + "/messages/next?wait=30", false},
		{"inbox/next?wait=30&claim=true", "/api/v1/agent/inbox/next?wait=30&claim=true", true},
	} {
		var fromStart, fromCommit, fromAnswer []time.Duration
		errs := 0
		var firstErr error
		for range rounds {
			got := make(chan pollAnswer, 1)
			go func() { got <- r.poll(w.path, nil) }()
			time.Sleep(wakeGap)
			id, started, answered, err := r.post()
			if err != nil {
				return err
			}
			a := <-got
			if a.err == nil && (a.status != 200 || a.message.ID != id) {
				a.err = fmt.Errorf("the poll answered %d with message %q, want 200 with %s", a.status, a.message.ID, id)
			}
			inserted, err := time.Parse("2006-01-02T15:04:05.000000Z", a.message.InsertedAt)
			if a.err == nil && err != nil {
				a.err = err
			}
			if a.err != nil {
				errs++
				if firstErr == nil {
					firstErr = a.err
				}
			} else {
				fromStart = append(fromStart, a.at.Sub(started))
				fromCommit = append(fromCommit, a.at.Sub(inserted))
				fromAnswer = append(fromAnswer, a.at.Sub(answered))
			}
			// Processed, so that the next round's poll finds nothing before
			// its post; a claim has already started the attempt.
			base := "/api/v1/agent/chats/" + r.room + "/messages/" + id
			if !w.claims {
				if _, err := r.c.call("POST", base+"/processing", r.waiterKey, nil, nil, 200); err != nil {
					return err
				}
			}
			if _, err := r.c.call("POST", base+"/processed", r.waiterKey, map[string]any{}, nil, 200); err != nil {
				return err
			}
		}
		for _, s := range [][]time.Duration{fromStart, fromCommit, fromAnswer} {
			slices.Sort(s)
		}
		fmt.Printf("%-36s %7d %8s %9s %8s %9s %8s %9s\n", w.name, errs,
			ms(pct(fromStart, 0.5)), ms(pct(fromStart, 0.99)), ms(pct(fromCommit, 0.5)), ms(pct(fromCommit, 0.99)),
			ms(pct(fromAnswer, 0.5)), ms(pct(fromAnswer, 0.99)))
		if firstErr != nil {
			fmt.Printf("  first error: %v\n", firstErr)
		}
	}
	return nil
}

// serverMemory is what the server process holds: its resident set from
// /proc, and the Go runtime's own figures and the held polls from its
// metrics.
type serverMemory struct {
	rssKB                            int64
	heapAlloc, heapInuse, stackInuse float64 // bytes
	goroutines, heldPolls            float64
}

// memoryAfterGC reads the server's memory right after a garbage
// collection, which a heap profile asks for (?gc=1): the heap then holds
// only what is live, not garbage the next collection would take.
func (s *benchServer) memoryAfterGC() (serverMemory, error) {
	res, err := http.Get(strings.TrimSuffix(s.metricsURL, "/metrics") + "/debug/pprof/heap?gc=1")
	if err != nil {
		return serverMemory{}, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		return serverMemory{}, fmt.Errorf("heap profile: %s", res.Status)
	}
	return s.memory()
}

// scrapeSamples reads the server's metrics, by series.
func scrapeSamples(url string) (map[string]float64, error) {
	res, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// memory reads the server's memory now.
func (s *benchServer) memory() (serverMemory, error) {
	gauges, err := scrapeSamples(s.metricsURL)
	if err != nil {
		return serverMemory{}, err
	}
	m := serverMemory{rssKB: rssKB(s.pid), heapAlloc: gauges["go_memstats_heap_alloc_bytes"],
		heapInuse: gauges["go_memstats_heap_inuse_bytes"], stackInuse: gauges["go_memstats_stack_inuse_bytes"],
		goroutines: gauges["go_goroutines"], heldPolls: gauges["chatd_longpolls_held"]}
	if m.rssKB == 0 || m.goroutines == 0 {
		return m, fmt.Errorf("could not read the server's memory (pid %d, %s)", s.pid, s.metricsURL)
	}
	return m, nil
}

// settled waits until the server holds polls long-polls and its RSS has
// not risen for quiet, for up to limit, and returns when the RSS last
// rose. The RSS is read from /proc while waiting: a metrics scrape
// allocates in the server, so scraping often would grow what is being
// measured.
func (s *benchServer) settled(polls float64, quiet, limit time.Duration) (time.Time, error) {
	start := time.Now()
	peak, rose := rssKB(s.pid), start
	for {
		time.Sleep(100 * time.Millisecond)
		if rss := rssKB(s.pid); rss > peak {
			peak, rose = rss, time.Now()
			continue
		}
		late := time.Since(start) > limit
		if time.Since(rose) < quiet && !late {
			continue
		}
		m, err := s.memory()
		if err != nil || m.heldPolls >= polls {
			return rose, err
		}
		if late {
			fmt.Fprintf(os.Stderr, "bench: the server holds %.0f long-polls after %s, expected %.0f\n", m.heldPolls, limit, polls)
			return rose, nil
		}
		rose = time.Now() // not all held yet: wait for another quiet spell
	}
}

// settledBelow waits until the server runs at most goroutines goroutines,
// for up to limit, and returns its memory then.
func (s *benchServer) settledBelow(goroutines float64, limit time.Duration) (serverMemory, error) {
	start := time.Now()
	for {
		m, err := s.memory()
		if err != nil || m.goroutines <= goroutines || time.Since(start) > limit {
			return m, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func mib(bytes int64) string { return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)) }
