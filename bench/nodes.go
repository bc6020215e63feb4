package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"
)

// nodesWorkload measures chatd on PostgreSQL with one node against two on
// the same database, in one run: the posts/s and p99 of n closed-loop
// clients all on node A, then spread over nodes A and B; and, for agents
// whose sockets are on node B, how long a post made on node A takes to
// reach them (the push crosses nodes through the database), beside the same
// with the sockets on node A.
func nodesWorkload(bin string, n int, d time.Duration, rate float64, agents int) error {
	dir, err := os.MkdirTemp("", "chatd-bench-nodes-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, drop, err := benchDatabase(postgresMode, dir)
	if err != nil {
		return err
	}
	defer drop()
	if err := exec.Command(bin, append([]string{"migrate"}, databaseArgs(db)...)...).Run(); err != nil {
		return fmt.Errorf("chatd migrate: %w", err)
	}
	person, err := benchPerson(bin, db)
	if err != nil {
		return err
	}
	var bases [2]string
	for i := range bases {
		srv, url, _, err := startServerArgs(bin, db, "--ws-max-conns", "100000", "--ws-max-per-key", "100000",
			"--max-participants-per-room", "100000", "--max-agents-per-user", "100000", "--max-chats-per-user", "100000",
			"--max-messages-per-room", "100000000", "--rate-limit", "0")
		if err != nil {
			return err
		}
		defer func() {
			_ = srv.Process.Signal(os.Interrupt)
			_ = srv.Wait()
		}()
		bases[i] = url
	}

	fmt.Printf("nodes: chatd on PostgreSQL, %d closed-loop clients posting\n", n)
	fmt.Printf("%-10s %10s %9s %9s %8s\n", "nodes", "posts/s", "p50", "p99", "errors")
	one, err := postOn(bases[:1], person.APIKey, n, d)
	if err != nil {
		return err
	}
	two, err := postOn(bases[:], person.APIKey, n, d)
	if err != nil {
		return err
	}
	for _, r := range []struct {
		label string
		res   result
	}{{"1 (A)", one}, {"2 (A, B)", two}} {
		fmt.Printf("%-10s %10.0f %9s %9s %8d\n", r.label, r.res.rate(), ms(r.res.p(0.50)), ms(r.res.p(0.99)), r.res.errors)
	}
	fmt.Printf("%-10s %10.3f (two nodes' posts/s over one's)\n", "ratio", two.rate()/one.rate())

	c := newClient(bases[0], 64)
	rooms := max(1, agents/10)
	all, err := targetedAgents(c, person.APIKey, agents, rooms)
	if err != nil {
		return err
	}
	fmt.Printf("nodes: posts on node A at %.0f/s, each mentioning one of %d agents\n", rate, agents)
	if err := targetedRun("A → A", c, person.APIKey, bases[0], all, rooms, 4, rate, d, nil); err != nil {
		return err
	}
	return targetedRun("A → B", c, person.APIKey, bases[1], all, rooms, 4, rate, d, nil)
}

// postOn runs n closed-loop posting clients for d, spread evenly over the
// nodes at bases, each on lanes of its own, and merges what they measured.
func postOn(bases []string, personKey string, n int, d time.Duration) (result, error) {
	fixtures := make([]*fixture, len(bases))
	for i, base := range bases {
		lanes := n / len(bases)
		if i < n%len(bases) {
			lanes++
		}
		f, err := newClient(base, lanes).setup(personKey, lanes)
		if err != nil {
			return result{}, fmt.Errorf("setup on %s: %w", base, err)
		}
		fixtures[i] = f
	}
	results := make([]result, len(fixtures))
	var wg sync.WaitGroup
	for i, f := range fixtures {
		wg.Go(func() { results[i] = f.c.run(len(f.lanes), d, f.post) })
	}
	wg.Wait()
	var all result
	for _, r := range results {
		all.lat = append(all.lat, r.lat...)
		all.elapsed = max(all.elapsed, r.elapsed)
		all.errors += r.errors
	}
	slices.Sort(all.lat)
	return all, nil
}
