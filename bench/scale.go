package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// The scale workload: what the paths of every day cost as the database
// grows. One database is grown to each size in turn (so the largest costs
// what filling it costs once), a copy of the file kept at each size; then a
// chatd serve on each copy (its cold start timed) answers each path in an
// open loop at a modest rate, from lanes spread over the whole database,
// old rooms and new, the sizes taking turns so that they are compared
// under the same load from the rest of the machine.

// scalePaths are the paths measured, in the order they run.
var scalePaths = []string{"post", "/next", "agent listing", "human history", "/me/chats"}

// scaleLanes is how many rooms (with their owner and agents) the requests
// go round.
const scaleLanes = 64

// scaleFigures is one size's measurements.
type scaleFigures struct {
	messages     int
	rooms        int
	seedRate     float64 // messages per second of this step's seeding
	bytesPerMsg  float64
	coldStart    time.Duration
	p99          map[string]time.Duration
	seedDuration time.Duration
}

// scaleWorkloadFlags is scaleWorkload with its sizes as -sizes spells them.
func scaleWorkloadFlags(bin, mode, sizeList string, rate float64, d time.Duration) error {
	sizes, err := parseInts(sizeList)
	if err != nil {
		return err
	}
	return scaleWorkload(bin, mode, sizes, rate, d)
}

func scaleWorkload(bin, mode string, sizes []int, rate float64, d time.Duration) error {
	if rate <= 0 {
		rate = 100
	}
	dir, err := os.MkdirTemp("", "chatd-bench-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Printf("scale: sync %s, each path in an open loop at %.0f requests/s for %s in all, in turns of %s, over %d rooms spread through the database\n",
		mode, rate, d, min(d, scaleTurn), scaleLanes)
	all, err := seedSizes(bin, dir, sizes)
	if err != nil {
		return err
	}
	for _, z := range all {
		srv, base, cold, err := coldStart(bin, z.path, "--sync", mode, "--rate-limit", "0", "--max-messages-per-room", "100000000")
		if err != nil {
			return err
		}
		defer func() {
			_ = srv.Process.Signal(os.Interrupt)
			_ = srv.Wait()
		}()
		z.coldStart, z.c = cold, newClient(base, scaleLanes)
		fmt.Printf("%d messages: cold start %s\n", z.messages, ms(cold))
	}
	measureSizes(all, rate, d)
	for _, z := range all {
		fmt.Println()
		openHeader("messages")
		for _, p := range scalePaths {
			r := z.res[p]
			slices.Sort(r.lat)
			openLine(fmt.Sprint(z.messages), p, *r, r.lat)
			z.p99[p] = pct(r.lat, 0.99)
		}
	}
	printScale(all)
	return nil
}

// scaleTurn is how long one path runs on one size before the next takes
// its turn: a busy moment of a shared machine then falls on every size
// alike, rather than on whichever was being measured.
const scaleTurn = 2 * time.Second

// scaleSize is the database at one size: a copy of the file as it stood
// then (the largest is the file itself), and the server measuring it.
type scaleSize struct {
	scaleFigures
	path  string
	lanes []scaleLane
	c     *client
	res   map[string]*openResult
}

// seedSizes grows one database through sizes, keeping a copy at each.
func seedSizes(bin, dir string, sizes []int) ([]*scaleSize, error) {
	path := filepath.Join(dir, "chatd.db")
	if err := exec.Command(bin, "migrate", "--db", path).Run(); err != nil {
		return nil, fmt.Errorf("chatd migrate: %w", err)
	}
	s, err := openSeeder(path)
	if err != nil {
		return nil, err
	}
	defer s.db.Close()
	var all []*scaleSize
	for i, size := range sizes {
		z := &scaleSize{scaleFigures: scaleFigures{messages: size, p99: map[string]time.Duration{}}, path: path,
			res: map[string]*openResult{}}
		before, start := s.messages, time.Now()
		if err := s.grow(size); err != nil {
			return nil, fmt.Errorf("seeding: %w", err)
		}
		z.seedDuration = time.Since(start)
		z.seedRate = float64(s.messages-before) / z.seedDuration.Seconds()
		z.rooms, z.lanes = len(s.rooms), s.lanes(scaleLanes)
		if z.bytesPerMsg, err = s.bytesPerMessage(); err != nil {
			return nil, err
		}
		fmt.Printf("%d messages in %d rooms, %d people, %d agents: seeded %d more in %s (%.0f messages/s); %.0f bytes per message\n",
			s.messages, len(s.rooms), len(s.people), len(s.agents), s.messages-before, z.seedDuration.Round(time.Second), z.seedRate, z.bytesPerMsg)
		if i < len(sizes)-1 {
			z.path = filepath.Join(dir, fmt.Sprintf("chatd-%d.db", size))
			if err := copyFile(path, z.path); err != nil {
				return nil, err
			}
		}
		all = append(all, z)
	}
	return all, nil
}

// measureSizes runs each path on each size in turns, the sizes of a path
// one after the other, for d in all per path and size.
func measureSizes(all []*scaleSize, rate float64, d time.Duration) {
	turn := min(d, scaleTurn)
	for round := 0; time.Duration(round)*turn < d; round++ {
		for _, p := range scalePaths {
			for k := range all {
				z := all[k]
				if round%2 == 1 { // and in the other order every other round
					z = all[len(all)-1-k]
				}
				r := openLoop(rate, turn, func(n int, _ time.Time) error { return z.lanes[n%len(z.lanes)].call(z.c, p, n) })
				z.add(p, r)
			}
		}
	}
}

func (z *scaleSize) add(path string, r openResult) {
	acc := z.res[path]
	if acc == nil {
		acc = &openResult{rate: r.rate}
		z.res[path] = acc
	}
	acc.d += r.d
	acc.lat = append(acc.lat, r.lat...)
	acc.due += r.due
	acc.missed += r.missed
	acc.errors += r.errors
	if acc.firstErr == nil {
		acc.firstErr = r.firstErr
	}
}

func (s *seeder) bytesPerMessage() (float64, error) {
	var pages, pageSize int64
	if err := s.db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		return 0, err
	}
	if err := s.db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		return 0, err
	}
	return float64(pages*pageSize) / float64(s.messages), nil
}

// copyFile copies a database whose WAL was checkpointed and emptied.
func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// scaleLane is a seeded room with the keys of its owner and agents.
type scaleLane struct {
	room                           string
	ownerKey, posterKey, workerKey string
	workerID                       string
}

// lanes picks n rooms spread evenly over those seeded so far.
func (s *seeder) lanes(n int) []scaleLane {
	out := make([]scaleLane, n)
	for i := range out {
		r := s.rooms[(i*len(s.rooms)/n+s.rng.IntN(max(1, len(s.rooms)/n)))%len(s.rooms)]
		out[i] = scaleLane{room: r.id, ownerKey: seedKey("band_u_", s.people[r.owner].id),
			posterKey: seedKey("band_a_", s.agents[r.first].id), workerKey: seedKey("band_a_", s.agents[r.second].id),
			workerID: s.agents[r.second].id}
	}
	return out
}

// call makes the request of path for the lane.
func (l scaleLane) call(c *client, path string, n int) error {
	var err error
	switch path {
	case "post":
		_, err = c.call("POST", "/api/v1/agent/chats/"+l.room+"/messages", l.posterKey, map[string]any{"message": map[string]any{
			"content": fmt.Sprintf("please look at item %d", n), "mentions": []map[string]string{{"id": l.workerID}}}}, nil, 201)
	case "/next":
		_, err = c.call("GET", "/api/v1/agent/chats/"+l.room+"/messages/next", l.workerKey, nil, nil, 200, 204)
	case "agent listing":
		_, err = c.call("GET", "/api/v1/agent/chats/"+l.room+"/messages", l.workerKey, nil, nil, 200)
	case "human history":
		_, err = c.call("GET", "/api/v1/me/chats/"+l.room+"/messages?limit=50", l.ownerKey, nil, nil, 200)
	case "/me/chats":
		_, err = c.call("GET", "/api/v1/me/chats", l.ownerKey, nil, nil, 200)
	default:
		err = fmt.Errorf("unknown path %q", path)
	}
	return err
}

// coldStart starts chatd serve and returns it once /readyz answers 200,
// with the time from the process's start to that answer.
func coldStart(bin, db string, extra ...string) (*exec.Cmd, string, time.Duration, error) {
	cmd := exec.Command(bin, append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--log-level", "warn"}, extra...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, "", 0, err
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	var base string
	select {
	case base = <-found:
	case <-time.After(5 * time.Minute):
		_ = cmd.Process.Kill()
		return nil, "", 0, errors.New("chatd serve did not start")
	}
	for {
		res, err := http.Get(base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return cmd, base, time.Since(start), nil
			}
		}
		if time.Since(start) > 5*time.Minute {
			_ = cmd.Process.Kill()
			return nil, "", 0, errors.New("chatd serve never answered /readyz 200")
		}
		time.Sleep(time.Millisecond)
	}
}

// printScale prints each size's p99 per path, and each against the size
// of 100,000 messages (the first size when there is none).
func printScale(all []*scaleSize) {
	ref := all[0]
	for _, f := range all {
		if f.messages == 100000 {
			ref = f
		}
	}
	fmt.Printf("\n%-10s", "messages")
	for _, p := range scalePaths {
		fmt.Printf(" %14s", p+" p99")
	}
	fmt.Printf(" %10s %11s %12s\n", "bytes/msg", "cold start", "seed msg/s")
	for _, f := range all {
		fmt.Printf("%-10d", f.messages)
		for _, p := range scalePaths {
			fmt.Printf(" %14s", ms(f.p99[p]))
		}
		fmt.Printf(" %10.0f %11s %12.0f\n", f.bytesPerMsg, ms(f.coldStart), f.seedRate)
	}
	last := all[len(all)-1]
	fmt.Printf("%-10s", fmt.Sprintf("%dk/%dk", last.messages/1000, ref.messages/1000))
	for _, p := range scalePaths {
		fmt.Printf(" %13.2fx", float64(last.p99[p])/float64(max(1, ref.p99[p])))
	}
	next := last.messages * 10
	fmt.Printf("\nseeding %d messages would take about %s more at the last step's rate\n",
		next, (time.Duration(float64(next-last.messages)/last.seedRate) * time.Second).Round(time.Minute))
}
