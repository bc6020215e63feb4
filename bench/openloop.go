package main

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The open-loop mode: requests are due at a fixed offered rate, whatever
// the server answers, and each latency counts from when its request was
// due, not from when it went out. A closed loop waits for an answer before
// it sends the next request, so a slow answer also delays the requests
// behind it, which are then never timed as late (coordinated omission):
// its tail is the server's on its good moments. Here a request the client
// could not send on time (every in-flight slot taken, or the scheduler
// itself late) is as late as a user would find it.

// lateAfter is how far behind its slot a request may go out before it
// counts as having missed it.
const lateAfter = time.Millisecond

// maxInFlight bounds the requests outstanding at once: beyond it the
// client queues them, and their wait counts in their latency.
const maxInFlight = 512

// openResult is what an open-loop run measured.
type openResult struct {
	rate     float64       // offered, per second
	d        time.Duration // how long requests were due
	lat      []time.Duration
	due      int // requests scheduled
	missed   int // sent later than lateAfter past their slot
	errors   int
	firstErr error
}

// openLoop schedules request n at start + n/rate for d, runs op(n, due)
// for each, and times each from its due time to op's return. op may
// instead report its own end (a frame's arrival) with latencies.add, and
// return errNotTimed.
func openLoop(rate float64, d time.Duration, op func(n int, due time.Time) error) openResult {
	res := openResult{rate: rate, d: d}
	var mu sync.Mutex
	var missed atomic.Int64
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for n := 0; ; n++ {
		due := start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
		if due.Sub(start) >= d {
			break
		}
		time.Sleep(time.Until(due))
		sem <- struct{}{}
		res.due++
		wg.Go(func() {
			defer func() { <-sem }()
			if time.Since(due) > lateAfter {
				missed.Add(1)
			}
			err := op(n, due)
			took := time.Since(due)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == errNotTimed:
			case err != nil:
				res.errors++
				if res.firstErr == nil {
					res.firstErr = err
				}
			default:
				res.lat = append(res.lat, took)
			}
		})
	}
	wg.Wait()
	res.missed = int(missed.Load())
	slices.Sort(res.lat)
	return res
}

// errNotTimed is returned by an open-loop op whose latency ends elsewhere.
var errNotTimed = fmt.Errorf("timed by its receiver")

// openHeader and openLine print open-loop results as a table.
func openHeader(first string) {
	fmt.Printf("%-12s %-18s %8s %8s %9s %9s %9s %9s %8s %7s\n",
		first, "measure", "offered", "done", "p50", "p99", "p99.9", "max", "missed", "errors")
}

func openLine(first, measure string, r openResult, lat []time.Duration) {
	fmt.Printf("%-12s %-18s %7.0f/s %8d %9s %9s %9s %9s %8d %7d\n", first, measure, r.rate, len(lat),
		ms(pct(lat, 0.50)), ms(pct(lat, 0.99)), ms(pct(lat, 0.999)), ms(maxOf(lat)), r.missed, r.errors)
	if r.firstErr != nil {
		fmt.Printf("             first error: %v\n", r.firstErr)
	}
}

func maxOf(sorted []time.Duration) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)-1]
}
