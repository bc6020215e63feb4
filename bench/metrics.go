package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The metrics workload: what the metrics cost a post. Three servers take
// the same posts (the post workload's) from the same number of clients:
// one with --metrics-addr, and two without, whose difference is what the
// measurement reads when nothing differs (this machine is shared, and its
// other work comes and goes). They take turns in rounds of a second, each
// round in a rotated order: a drift in the machine's load or in the
// databases' size then weighs on all alike, and the median of the rounds'
// ratios shrugs off a burst of other work that a total would keep. The
// server with its metrics on is scraped every 15 s of its rounds, as
// Prometheus would be set to, the scrape's work counting in its CPU.

// metricsRound is how long one round posts to one server.
const metricsRound = time.Second

// scrapeEvery is how often the server with its metrics on is scraped.
const scrapeEvery = 15 * time.Second

// metricsSide is one of the two servers, and what it did over its rounds.
type metricsSide struct {
	name    string
	srv     *benchServer
	c       *client
	f       *fixture
	run     cpuRun
	rates   []float64 // posts/s of each round
	ran     time.Duration
	scrapes int
	scraped time.Duration // time the scrapes took, at the scraper
}

func metricsWorkload(bin string, clients []int, d time.Duration) error {
	servers := make([]*benchServer, 3)
	for i := range servers {
		var flags []string
		if i == 0 {
			flags = []string{"--metrics-addr", "127.0.0.1:0"}
		}
		srv, err := startBenchServer(bin, flags...)
		if err != nil {
			return err
		}
		defer srv.stop()
		servers[i] = srv
	}
	rounds := max(3, int(d/metricsRound))
	fmt.Printf("metrics: the same posts to a server with its metrics on and two without, sync normal, %d rounds of %s each\n",
		rounds, metricsRound)
	fmt.Printf("%-12s %7s %10s %9s %9s %8s %12s %10s\n", "server", "clients", "posts/s", "p50", "p99", "errors", "server CPU", "scrapes")
	for _, n := range clients {
		sides := []*metricsSide{{name: "metrics on", srv: servers[0]}, {name: "metrics off", srv: servers[1]},
			{name: "metrics off'", srv: servers[2]}}
		for _, s := range sides {
			s.c = newClient(s.srv.base, n)
			var err error
			if s.f, err = s.c.setup(s.srv.personKey, n); err != nil {
				return fmt.Errorf("setup: %w", err)
			}
			s.round(n) // a first round, not counted: cold caches, small files
			s.run, s.rates, s.ran, s.scrapes, s.scraped = cpuRun{}, nil, 0, 0, 0
		}
		for r := 0; r < rounds; r++ {
			for i := range sides {
				sides[(r+i)%len(sides)].round(n)
			}
		}
		reportMetricsCost(n, sides)
	}
	return nil
}

// round posts from n clients for a round, with a scrape during it if one
// is due.
func (s *metricsSide) round(n int) {
	var scraped chan time.Duration
	if s.srv.metricsURL != "" && time.Duration(s.scrapes)*scrapeEvery <= s.ran {
		scraped = make(chan time.Duration, 1)
		go func(start time.Time) {
			if res, err := http.Get(s.srv.metricsURL); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			scraped <- time.Since(start)
		}(time.Now())
	}
	r := timeCPU(s.srv.pid, func() result { return s.c.run(n, metricsRound, s.f.post) })
	if scraped != nil {
		s.scraped += <-scraped
		s.scrapes++
	}
	s.rates = append(s.rates, r.res.rate())
	s.run = s.run.merge(r)
	s.ran += metricsRound
}

func reportMetricsCost(n int, sides []*metricsSide) {
	for _, s := range sides {
		res := s.run.res
		scrapes := "-"
		if s.scrapes > 0 {
			scrapes = fmt.Sprintf("%d, %s", s.scrapes, ms(s.scraped/time.Duration(s.scrapes)))
		}
		fmt.Printf("%-12s %7d %10.0f %9s %9s %8d %12s %10s\n", s.name, n, res.rate(), ms(res.p(0.50)), ms(res.p(0.99)),
			res.errors, s.run.perRequest(s.run.server), scrapes)
		if res.firstErr != nil {
			fmt.Printf("  first error: %v\n", res.firstErr)
		}
	}
	off := sides[1]
	for _, s := range []*metricsSide{sides[0], sides[2]} {
		ratios := make([]float64, len(s.rates))
		for i := range s.rates {
			ratios[i] = s.rates[i] / off.rates[i]
		}
		slices.Sort(ratios)
		fmt.Printf("%-12s %7d posts/s %.3fx (median round %.3fx), server CPU per post %.3fx\n", strings.TrimPrefix(s.name, "metrics ")+" / off",
			n, s.run.res.rate()/off.run.res.rate(), ratios[len(ratios)/2], s.run.serverPerRequest()/off.run.serverPerRequest())
	}
}
