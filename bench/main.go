// Command bench drives a real chatd server over loopback and prints
// throughput and latency for the workloads that matter most:
//
//   - post:    agents posting text messages that mention another agent;
//     closed-loop, it is preceded by the same requests to a bare net/http
//     handler (ceiling.go), and its ratio to that ceiling is printed
//   - work:    agents draining their messages: /next → /processing → /processed
//   - history: people reading room history, newest first
//
// For each --sync mode it starts its own `chatd serve` on a fresh database
// in a temp directory (so both modes are measured in one run, on the same
// machine, with the load generator running beside the server), sets up a
// person, agents and rooms through the API, and runs each workload for
// --duration at each client count.
//
// and, over the real-time socket:
//
//   - idle:     many idle, joined connections: the server's memory per connection
//
//   - fanout:   one room with many subscribers while agents post
//
//   - targeted: agents spread over rooms, each message mentioning one of them
//
// and over MCP (/mcp, the official Go SDK's client):
//
//   - mcp:      send_message tool calls against the same post over REST, at
//     each --clients count; then wait_for_message wake-up latency
//
// and over long-poll (GET …/messages/next?wait=, GET /agent/inbox/next?wait=):
//
//   - longpoll: the server's memory while it holds many polls at once; then
//     how soon a held poll answers a post
//
// and with the metrics on and off:
//
//   - metrics:  the same posts to a server with --metrics-addr and to one
//     without, in alternating rounds: what the metrics cost a post
//
// and with webhooks (a receiver in this process):
//
//   - webhooks: the same posts with no webhook and with -endpoints of them
//     registered; then how fast the server delivered
//
// and as the database grows:
//
//   - scale:    one database grown through -sizes messages; at each size
//     its bytes per message, a server's cold start on it, and the p99 of a
//     post, /next, an agent's listing, a person's history and /me/chats,
//     the sizes taking turns
//
// and with a backlog for retention to purge:
//
//   - retention: posting without and during the purge of -messages old
//     messages and -files old files; the purge's rate; the file's size
//     seeded, after the purge, and after chatd vacuum; and a check that the
//     purge deleted all that was out of time and nothing else
//
// and on PostgreSQL, with one node and with two on the same database:
//
//   - nodes:    posts/s of -clients closed-loop clients on one node, then
//     spread over two; then post on node A → frame on node B's sockets
//     (-agents of them, posts at -rate, 200/s if not set), beside A → A
//
//     go run ./bench                          # builds chatd from this repository
//     go run ./bench -clients 16,64 -duration 10s -sync normal,full
//     go run ./bench -workloads idle,fanout,targeted
//     go run ./bench -workloads mcp -clients 16 -duration 5s -rounds 1000
//     go run ./bench -workloads longpoll -held-polls 1000 -rounds 1000
//     go run ./bench -workloads metrics -clients 16 -duration 30s
//     go run ./bench -workloads webhooks -clients 16 -duration 10s -endpoints 100 -rate 500
//     go run ./bench -workloads searchindex -clients 16 -duration 10s -sync normal
//     go run ./bench -workloads post,targeted -rate 1000 -duration 10s
//     go run ./bench -workloads targeted -rate 1000 -sync full -profile /tmp/prof
//     go run ./bench -workloads scale -sizes 10000,100000,1000000 -rate 100 -duration 10s -sync normal
//     go run ./bench -workloads retention -clients 16 -duration 30s -sync full -messages 1000000 -files 100
//     go run ./bench -workloads move -messages 1000000 -postgres 'postgres://postgres@/postgres?host=/run/postgresql'
//     go run ./bench -workloads nodes -postgres 'postgres://postgres@/postgres?host=/run/postgresql' -clients 16 -agents 200
//
// With -rate, post, targeted and scale run in an open loop: requests are
// due at that rate whatever the server answers, and each is timed from its
// due time (openloop.go says why).
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	serveCeilingIfAsked()
	chatdPath := flag.String("chatd", "", "chatd binary to run (default: build this repository)")
	clientList := flag.String("clients", "16,64", "comma-separated concurrent client counts")
	duration := flag.Duration("duration", 10*time.Second, "how long each workload runs at each client count")
	syncList := flag.String("sync", "normal,full", "comma-separated --sync modes to run the server with (targeted, searchindex, scale, retention: the first)")
	workloads := flag.String("workloads", "post,work,history", "comma-separated workloads: post, work, history (HTTP); idle, fanout, targeted (socket); mcp; longpoll; metrics; webhooks; searchindex; scale; retention; move, nodes (need -postgres)")
	idleConns := flag.Int("idle-conns", 10000, "idle: connections to open")
	subscribers := flag.Int("subscribers", 1000, "fanout: subscribers in the room")
	posters := flag.Int("posters", 4, "fanout, targeted: concurrent posters")
	rate := flag.Float64("rate", 0, "post, fanout, targeted, webhooks, scale: posts (scale: requests) per second in all (0: as fast as they are acknowledged; scale: 100); post, targeted and scale then run in an open loop, timed from each request's due time")
	agents := flag.Int("agents", 1000, "targeted: agents")
	rooms := flag.Int("rooms", 100, "targeted: rooms")
	rounds := flag.Int("rounds", 1000, "mcp, longpoll: wake-ups to time (longpoll: of each kind of poll)")
	heldPolls := flag.Int("held-polls", 1000, "longpoll: polls the server holds at once while its memory is measured")
	endpoints := flag.Int("endpoints", 100, "webhooks: endpoints registered on the server that sends them")
	sizeList := flag.String("sizes", "10000,100000,1000000", "scale: comma-separated message counts the database grows through")
	messages := flag.Int("messages", 1000000, "retention: old messages to seed for the purge; move: messages in the SQLite database moved to PostgreSQL")
	files := flag.Int("files", 100, "retention: old files of 1 MiB to seed for the purge (at most a fifth of -messages)")
	seeded := flag.String("seeded", "", "retention: a directory to keep the seeded database in, and to start from it when a run with the same -messages, -files and -clients left it there")
	flag.Parse()

	clients, err := parseInts(*clientList)
	if err != nil {
		fail(err)
	}
	bin, cleanup, err := chatdBinary(*chatdPath)
	if err != nil {
		fail(err)
	}
	defer cleanup()

	var httpLoads []string
	for _, w := range strings.Split(*workloads, ",") {
		var err error
		switch w {
		case "post", "work", "history":
			httpLoads = append(httpLoads, w)
		case "idle":
			err = idleSockets(bin, *idleConns)
		case "fanout":
			err = fanOut(bin, *subscribers, *posters, *rate, *duration)
		case "targeted":
			err = targeted(bin, strings.Split(*syncList, ",")[0], *agents, *rooms, *posters, *rate, *duration)
		case "mcp":
			err = mcpWorkload(bin, clients, *duration, *rounds)
		case "longpoll":
			err = longPollWorkload(bin, *rounds, *heldPolls)
		case "metrics":
			err = metricsWorkload(bin, clients, *duration)
		case "webhooks":
			err = webhookWorkload(bin, clients[0], *duration, *rate, *endpoints)
		case "searchindex":
			err = searchIndexWorkload(bin, strings.Split(*syncList, ",")[0], clients[0], *duration)
		case "scale":
			err = scaleWorkloadFlags(bin, strings.Split(*syncList, ",")[0], *sizeList, *rate, *duration)
		case "move":
			err = moveWorkload(bin, *messages)
		case "nodes":
			err = nodesWorkload(bin, clients[0], *duration, cmp.Or(*rate, 200), *agents)
		case "retention":
			err = retentionWorkload(bin, strings.Split(*syncList, ",")[0], clients[0], *duration, *messages, *files, *seeded)
		default:
			err = fmt.Errorf("unknown workload %q", w)
		}
		if err != nil {
			fail(err)
		}
	}
	if len(httpLoads) > 0 {
		runHTTPWorkloads(bin, strings.Split(*syncList, ","), clients, *duration, *rate, httpLoads)
	}
}

// runHTTPWorkloads runs the HTTP workloads at every sync mode and client
// count, under one header.
func runHTTPWorkloads(bin string, modes []string, clients []int, d time.Duration, rate float64, workloads []string) {
	fmt.Printf("%-8s %-8s %7s %10s %9s %9s %8s\n", "sync", "workload", "clients", "req/s", "p50", "p99", "errors")
	for _, mode := range modes {
		for _, n := range clients {
			if err := runMode(bin, mode, n, d, rate, workloads); err != nil {
				fail(err)
			}
		}
	}
}

// chatdBinary is the chatd binary to run: path, or else one built from
// this repository into a temporary directory that cleanup removes.
func chatdBinary(path string) (bin string, cleanup func(), err error) {
	if path != "" {
		return path, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "chatd-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "chatd")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("building chatd: %v\n%s", err, out)
	}
	return bin, cleanup, nil
}

// runMode starts a server in the given sync mode, sets up n clients and runs
// each workload; post in an open loop at rate when rate is not 0.
func runMode(bin, mode string, n int, d time.Duration, rate float64, workloads []string) error {
	return runModeOn(bin, mode, "", n, d, rate, workloads, nil)
}

// runModeOn is runMode on a database that prepare (when not nil) changes
// before the server starts, with label in the lines' first column ("": the
// sync mode).
func runModeOn(bin, mode, label string, n int, d time.Duration, rate float64, workloads []string, prepare func(db string) error) error {
	dir, err := os.MkdirTemp("", "chatd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, drop, err := benchDatabase(mode, dir)
	if err != nil {
		return err
	}
	defer drop()
	if err := exec.Command(bin, append([]string{"migrate"}, databaseArgs(db)...)...).Run(); err != nil {
		return fmt.Errorf("chatd migrate: %w", err)
	}
	if prepare != nil {
		if err := prepare(db); err != nil {
			return err
		}
	}
	if label == "" {
		label = mode
	}
	person, err := benchPerson(bin, db)
	if err != nil {
		return err
	}
	srv, url, metricsURL, err := startServerArgs(bin, db, append(append(syncArgs(mode),
		"--max-messages-per-room", "100000000", "--max-agents-per-user", "100000", "--max-chats-per-user", "100000",
		"--rate-limit", "0"), profileFlags(*profileDir)...)...)
	if err != nil {
		return err
	}
	defer func() {
		_ = srv.Process.Signal(os.Interrupt)
		_ = srv.Wait()
	}()

	c := newClient(url, n)
	setup, err := c.setup(person.APIKey, n)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	for _, w := range workloads {
		var res result
		switch {
		case w == "post" && rate > 0:
			res := openLoop(rate, d, func(i int, _ time.Time) error { return setup.post(i % n) })
			fmt.Printf("         open loop, %d lanes, latency from each post's due time:\n", n)
			openHeader("")
			openLine(label, w, res, res.lat)
			continue
		case w == "post" && prepare == nil:
			ceiling, err := measureCeiling(n, d)
			if err != nil {
				return err
			}
			fmt.Printf("%-8s %-8s %7d %10.0f %9s %9s %8d\n", "net/http", "ceiling", n, ceiling.rate(), ms(ceiling.p(0.50)), ms(ceiling.p(0.99)), ceiling.errors)
			wait := startProfile(*profileDir, metricsURL, d)
			res = c.run(n, d, setup.post)
			wait()
			defer fmt.Printf("%-8s %-8s %7d %10.3f (posts/s over the ceiling's req/s)\n", label, "ratio", n, res.rate()/ceiling.rate())
		case w == "post":
			res = c.run(n, d, setup.post)
		case w == "work":
			res = c.run(n, d, setup.work)
		case w == "history":
			res = c.run(n, d, setup.history)
		default:
			return fmt.Errorf("unknown workload %q", w)
		}
		fmt.Printf("%-8s %-8s %7d %10.0f %9s %9s %8d\n", label, w, n, res.rate(), ms(res.p(0.50)), ms(res.p(0.99)), res.errors)
		if res.firstErr != nil {
			fmt.Printf("         first error: %v\n", res.firstErr)
		}
	}
	return nil
}

// benchPerson creates the person the workloads act as, through the
// command line, in the database at db.
func benchPerson(bin, db string) (person struct {
	ID     string `json:"id"`
	APIKey string `json:"api_key"`
}, err error) {
	err = runJSON(bin, &person, append(append([]string{"create-user"}, databaseArgs(db)...),
		"--handle", "bench", "--name", "Bench Person", "--json")...)
	return person, err
}

// profileDir, when set, receives the server's CPU profile and runtime
// trace of a targeted run or of each closed-loop post run (profile.go).
var profileDir = flag.String("profile", "", "targeted, post: a directory to write the server's CPU profile (cpu.pprof) and runtime trace (trace.out) of the run into (post: of the last run)")

var (
	listening = regexp.MustCompile(`listening on (http://\S+)`)
	metricsAt = regexp.MustCompile(`metrics at (http://\S+)`)
)

// startServerArgs starts chatd serve on a free port with extra flags and
// returns it with its URL and, when extra has --metrics-addr, the URL of
// its metrics.
func startServerArgs(bin, db string, extra ...string) (cmd *exec.Cmd, url, metricsURL string, err error) {
	cmd = exec.Command(bin, append(append(append([]string{"serve"}, databaseArgs(db)...), "--addr", "127.0.0.1:0", "--log-level", "warn"), extra...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	found, foundMetrics := make(chan string, 1), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			} else if m := metricsAt.FindStringSubmatch(sc.Text()); m != nil {
				foundMetrics <- m[1]
			}
		}
	}()
	select {
	case url = <-found:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, "", "", errors.New("chatd serve did not start")
	}
	if !slices.Contains(extra, "--metrics-addr") {
		return cmd, url, "", nil
	}
	select {
	case metricsURL = <-foundMetrics:
		return cmd, url, metricsURL, nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, "", "", errors.New("chatd serve did not say where its metrics are")
	}
}

// runJSON runs a chatd command and decodes its --json output into v.
func runJSON(bin string, v any, args ...string) error {
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		return fmt.Errorf("chatd %s: %w", args[0], err)
	}
	return json.Unmarshal(out, v)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
