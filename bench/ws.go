package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// The real-time workloads. Each starts its own server (sync normal) with
// connection limits raised for the load.

// wsClient is a minimal Phoenix client: it joins one topic and then counts
// message_created pushes, noting for each the delay from the message's
// inserted_at (its commit) to its arrival.
type wsClient struct {
	conn net.Conn
	rd   io.Reader
}

func dialSocket(base, key string) (*wsClient, error) {
	u := strings.Replace(base, "http", "ws", 1) + "/api/v1/socket/websocket?vsn=2.0.0&api_key=" + key
	d := ws.Dialer{Timeout: 30 * time.Second}
	conn, br, _, err := d.Dial(context.Background(), u)
	if err != nil {
		return nil, err
	}
	c := &wsClient{conn: conn, rd: conn}
	if br != nil {
		c.rd = io.MultiReader(br, conn)
	}
	return c, nil
}

func (c *wsClient) join(topic string) error {
	if err := wsutil.WriteClientText(c.conn, []byte(`["1","1","`+topic+`","phx_join",{}]`)); err != nil {
		return err
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	reply, err := wsutil.ReadServerText(readWriter{c.rd, c.conn})
	if err != nil {
		return err
	}
	if !bytes.Contains(reply, []byte(`"status":"ok"`)) {
		return fmt.Errorf("join %s: %s", topic, reply)
	}
	_ = c.conn.SetReadDeadline(time.Time{})
	return nil
}

// readWriter reads from r (what arrived with the upgrade, then the
// connection) and writes to the connection (control frame replies).
type readWriter struct {
	io.Reader
	io.Writer
}

var insertedAt = []byte(`"inserted_at":"`)

// receive reads pushes until the connection closes, calling got with each
// message_created frame's commit-to-arrival delay and the frame.
func (c *wsClient) receive(got func(delay time.Duration, frame []byte)) {
	// Buffered: a frame header is read in pieces, and a syscall per piece
	// would make this client, not the server, the bottleneck.
	rd := bufio.NewReaderSize(c.rd, 16<<10)
	buf := make([]byte, 0, 4096)
	for {
		hdr, err := ws.ReadHeader(rd)
		if err != nil {
			return
		}
		if int64(cap(buf)) < hdr.Length {
			buf = make([]byte, hdr.Length)
		}
		frame := buf[:hdr.Length]
		if _, err := io.ReadFull(rd, frame); err != nil {
			return
		}
		if hdr.OpCode != ws.OpText || !bytes.Contains(frame, []byte(`"message_created"`)) {
			continue
		}
		now := time.Now()
		i := bytes.Index(frame, insertedAt)
		if i < 0 || len(frame) < i+len(insertedAt)+27 {
			continue
		}
		at, err := time.Parse("2006-01-02T15:04:05.000000Z", string(frame[i+len(insertedAt):i+len(insertedAt)+27]))
		if err != nil {
			continue
		}
		got(now.Sub(at), frame)
	}
}

// wsServer starts a server for a real-time workload and a person in it.
func wsServer(bin string) (base, personKey, personID string, stop func(), pid int, err error) {
	srv, err := startBenchServer(bin)
	if err != nil {
		return
	}
	return srv.base, srv.personKey, srv.personID, srv.stop, srv.pid, nil
}

// benchServer is a server started for a workload, with a person in it.
type benchServer struct {
	base, metricsURL    string // metricsURL: when started with --metrics-addr
	personKey, personID string
	pid                 int
	stop                func()
}

// startBenchServer starts a server (sync normal) on a fresh database, with
// connection limits and quotas raised for the load, the rate limit off and
// extra flags, and creates a person in it.
func startBenchServer(bin string, extra ...string) (*benchServer, error) {
	dir, err := os.MkdirTemp("", "chatd-bench-ws-")
	if err != nil {
		return nil, err
	}
	db := dir + "/chatd.db"
	if err := exec.Command(bin, "migrate", "--db", db).Run(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var person struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	if err := runJSON(bin, &person, "create-user", "--db", db, "--handle", "bench", "--name", "Bench Person", "--json"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := append([]string{"--sync", "normal", "--ws-max-conns", "100000", "--ws-max-per-key", "100000",
		"--max-participants-per-room", "100000", "--max-agents-per-user", "100000", "--max-messages-per-room", "100000000",
		"--rate-limit", "0"}, extra...)
	cmd, url, metricsURL, err := startServerArgs(bin, db, args...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &benchServer{base: url, metricsURL: metricsURL, personKey: person.APIKey, personID: person.ID, pid: cmd.Process.Pid,
		stop: func() {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
			os.RemoveAll(dir)
		}}, nil
}

// rssKB reads a process's resident memory.
func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// idleSockets opens n connections, each joined to the person's own topic,
// and reports the server's memory per connection.
func idleSockets(bin string, n int) error {
	base, key, personID, stop, pid, err := wsServer(bin)
	if err != nil {
		return err
	}
	defer stop()
	time.Sleep(500 * time.Millisecond)
	before := rssKB(pid)
	conns := make([]*wsClient, 0, n)
	defer func() {
		for _, c := range conns {
			c.conn.Close()
		}
	}()
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	start := time.Now()
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := dialSocket(base, key)
			if err == nil {
				err = c.join("user_rooms:" + personID)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			conns = append(conns, c)
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	connected := time.Since(start)
	time.Sleep(3 * time.Second) // let the server settle
	after := rssKB(pid)
	fmt.Printf("idle sockets: %d connected and joined in %s; server RSS %d MiB -> %d MiB: %.1f KB per connection\n",
		len(conns), connected.Round(time.Millisecond), before/1024, after/1024, float64(after-before)/float64(len(conns)))
	return nil
}

// fanOut has subs connections of one person in one room while posters
// (agents) post for d; every post reaches every subscriber.
func fanOut(bin string, subs, posters int, rate float64, d time.Duration) error {
	base, key, personID, stop, _, err := wsServer(bin)
	if err != nil {
		return err
	}
	defer stop()
	c := newClient(base, posters)
	room, posterKeys, err := fanOutRoom(c, key, personID, posters)
	if err != nil {
		return err
	}
	clients, err := joinAll(base, key, "chat_room:"+room, subs)
	if err != nil {
		return err
	}
	defer closeAll(clients)
	lat := newLatencies(len(clients))
	var frames atomic.Int64
	var last atomic.Int64 // unix nanoseconds of the latest frame
	for i, cl := range clients {
		go cl.receive(func(delay time.Duration, _ []byte) {
			frames.Add(1)
			last.Store(time.Now().UnixNano())
			lat.add(i, delay)
		})
	}
	start := time.Now()
	posted := postFor(c, posterKeys, room, personID, rate, d)
	time.Sleep(time.Second) // let the last frames arrive
	elapsed := time.Unix(0, last.Load()).Sub(start)
	all := lat.sorted()
	offered := "as fast as acknowledged"
	if rate > 0 {
		offered = fmt.Sprintf("at %.0f posts/s", rate)
	}
	fmt.Printf("fan-out: %d subscribers, %d posts in %s (%s): %d frames delivered (%.0f frames/s); commit-to-frame p50 %s p99 %s\n",
		len(clients), posted, d, offered, frames.Load(), float64(frames.Load())/elapsed.Seconds(), ms(pct(all, 0.5)), ms(pct(all, 0.99)))
	if want := int64(posted) * int64(len(clients)); frames.Load() != want {
		fmt.Printf("  delivered %d of %d frames\n", frames.Load(), want)
	}
	return nil
}

// fanOutRoom: the person's room, with poster agents that may post in it.
func fanOutRoom(c *client, personKey, personID string, posters int) (string, []string, error) {
	var room struct{ Data struct{ ID string } }
	if _, err := c.call("POST", "/api/v1/me/chats", personKey, map[string]any{}, &room, 201); err != nil {
		return "", nil, err
	}
	keys := make([]string, posters)
	for i := range keys {
		id, key, err := registerAgent(c, personKey, fmt.Sprintf("poster %d %s", i, strconv.FormatInt(time.Now().UnixNano(), 36)))
		if err != nil {
			return "", nil, err
		}
		if _, err := c.call("POST", "/api/v1/me/chats/"+room.Data.ID+"/participants", personKey,
			map[string]any{"participant": map[string]any{"participant_id": id}}, nil, 201); err != nil {
			return "", nil, err
		}
		keys[i] = key
	}
	return room.Data.ID, keys, nil
}

// registerAgent registers an agent of the person's through the API.
func registerAgent(c *client, personKey, name string) (id, key string, err error) {
	var out struct {
		Data struct {
			Agent       struct{ ID string }
			Credentials struct {
				APIKey string `json:"api_key"`
			}
		}
	}
	_, err = c.call("POST", "/api/v1/me/agents/register", personKey,
		map[string]any{"agent": map[string]any{"name": name, "description": "load generator"}}, &out, 201)
	return out.Data.Agent.ID, out.Data.Credentials.APIKey, err
}

// postFor posts from every poster key for d, each message mentioning
// mention, at rate posts/s in all (0: each poster as fast as its posts are
// acknowledged), and returns how many were acknowledged.
func postFor(c *client, keys []string, room, mention string, rate float64, d time.Duration) int {
	var posted atomic.Int64
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for k, key := range keys {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline); n++ {
				if rate > 0 { // post i of all posters is due at start + i/rate
					due := start.Add(time.Duration(float64(n*len(keys)+k) / rate * float64(time.Second)))
					time.Sleep(time.Until(due))
				}
				_, err := c.call("POST", "/api/v1/agent/chats/"+room+"/messages", key, map[string]any{
					"message": map[string]any{"content": fmt.Sprintf("update %d", n), "mentions": []map[string]string{{"id": mention}}},
				}, nil, 201)
				if err == nil {
					posted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(posted.Load())
}

// targetedAgent is an agent of the targeted workload and its room.
type targetedAgent struct{ id, key, room string }

// targeted has agents in rooms (perRoom each); the person posts in random
// rooms mentioning one agent there; only that agent may receive it. With
// rate, the posts are due at that rate in all (an open loop), and each is
// timed from its due time to its answer and to its frame's arrival.
func targeted(bin, mode string, agents, rooms, posters int, rate float64, d time.Duration) error {
	srv, err := startBenchServer(bin, append([]string{"--sync", mode}, profileFlags(*profileDir)...)...)
	if err != nil {
		return err
	}
	defer srv.stop()
	base, key := srv.base, srv.personKey
	c := newClient(base, max(posters, 64))
	all, err := targetedAgents(c, key, agents, rooms)
	if err != nil {
		return err
	}
	fmt.Printf("targeted: --sync %s\n", mode)
	profile := func() func() { return startProfile(*profileDir, srv.metricsURL, d) }
	return targetedRun("targeted", c, key, base, all, rooms, posters, rate, d, profile)
}

// targetedRun connects each agent's socket to socketBase, joined to its
// room, and has the person post through c, each post mentioning one agent,
// with posters in a closed loop or at rate in an open loop; it prints how
// long each frame took, with label in its lines' first column. profile,
// when not nil, runs as the posts start, and what it returns as they end.
func targetedRun(label string, c *client, key, socketBase string, all []targetedAgent, rooms, posters int, rate float64, d time.Duration,
	profile func() (stop func())) error {
	agents := len(all)
	lat := newLatencies(agents)
	var frames, misdelivered atomic.Int64
	// due[n]: when post n was due (unix nanoseconds), for the open loop.
	due := make([]atomic.Int64, int(rate*d.Seconds())+2)
	var conns []*wsClient
	defer func() { closeAll(conns) }()
	for i, a := range all {
		cl, err := dialSocket(socketBase, a.key)
		if err == nil {
			err = cl.join("chat_room:" + a.room)
		}
		if err != nil {
			return err
		}
		conns = append(conns, cl)
		go cl.receive(func(delay time.Duration, frame []byte) {
			frames.Add(1)
			if !bytes.Contains(frame, []byte(`"id":"`+a.id+`","handle"`)) {
				misdelivered.Add(1)
			}
			if rate > 0 {
				if n := taskNumber(frame); n >= 0 && n < len(due) && due[n].Load() != 0 {
					delay = time.Since(time.Unix(0, due[n].Load()))
				}
			}
			lat.add(i, delay)
		})
	}
	post := func(n int) error {
		a := all[(n*7919)%agents]
		_, err := c.call("POST", "/api/v1/me/chats/"+a.room+"/messages", key, map[string]any{
			"message": map[string]any{"content": fmt.Sprintf("task#%d", n), "mentions": []map[string]string{{"id": a.id}}},
		}, nil, 201)
		return err
	}
	if profile != nil {
		defer profile()()
	}
	if rate > 0 {
		return targetedOpen(label, rate, d, post, due, lat, &frames, &misdelivered, agents, rooms)
	}
	posted := postClosed(posters, d, post)
	time.Sleep(time.Second)
	sorted := lat.sorted()
	fmt.Printf("%s: %d agents in %d rooms, %d posts in %s: %d frames (%.0f/s), %d to an agent not mentioned; commit-to-frame p50 %s p99 %s\n",
		label, agents, rooms, posted, d, frames.Load(), float64(frames.Load())/(d+time.Second).Seconds(), misdelivered.Load(),
		ms(pct(sorted, 0.5)), ms(pct(sorted, 0.99)))
	return nil
}

// targetedOpen posts at rate for d, each post n due at its slot, and
// prints the POST's latency and the frame's, both from the due time.
func targetedOpen(label string, rate float64, d time.Duration, post func(int) error, due []atomic.Int64, lat *latencies,
	frames, misdelivered *atomic.Int64, agents, rooms int) error {
	res := openLoop(rate, d, func(n int, at time.Time) error {
		due[n].Store(at.UnixNano())
		return post(n)
	})
	time.Sleep(time.Second) // let the last frames arrive
	fmt.Printf("%s: %d agents in %d rooms, open loop, %d posts due in %s: %d frames, %d to an agent not mentioned; latency from each post's due time:\n",
		label, agents, rooms, res.due, d, frames.Load(), misdelivered.Load())
	openHeader("")
	openLine(label, "POST answered", res, res.lat)
	openLine(label, "POST → frame", res, lat.sorted())
	return nil
}

// postClosed has posters goroutines call post, each as soon as its last
// call returned, for d; it returns the calls that succeeded.
func postClosed(posters int, d time.Duration, post func(int) error) int {
	var posted atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for p := 0; p < posters; p++ {
		wg.Go(func() {
			for n := p; time.Now().Before(deadline); n += posters {
				if post(n) == nil {
					posted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(posted.Load())
}

var taskMark = []byte("task#")

// taskNumber reads n from the "task#n" a targeted post's frame carries, or -1.
func taskNumber(frame []byte) int {
	i := bytes.Index(frame, taskMark)
	if i < 0 {
		return -1
	}
	n, seen := 0, false
	for _, b := range frame[i+len(taskMark):] {
		if b < '0' || b > '9' {
			break
		}
		n, seen = n*10+int(b-'0'), true
	}
	if !seen {
		return -1
	}
	return n
}

// targetedAgents registers agents spread over rooms of the person's.
func targetedAgents(c *client, key string, agents, rooms int) ([]targetedAgent, error) {
	all := make([]targetedAgent, agents)
	roomIDs := make([]string, rooms)
	for r := range roomIDs {
		var room struct{ Data struct{ ID string } }
		if _, err := c.call("POST", "/api/v1/me/chats", key, map[string]any{}, &room, 201); err != nil {
			return nil, err
		}
		roomIDs[r] = room.Data.ID
	}
	for i := range all {
		id, k, err := registerAgent(c, key, fmt.Sprintf("agent %d %s", i, strconv.FormatInt(time.Now().UnixNano(), 36)))
		if err != nil {
			return nil, err
		}
		room := roomIDs[i%rooms]
		if _, err := c.call("POST", "/api/v1/me/chats/"+room+"/participants", key,
			map[string]any{"participant": map[string]any{"participant_id": id}}, nil, 201); err != nil {
			return nil, err
		}
		all[i] = targetedAgent{id, k, room}
	}
	return all, nil
}

func joinAll(base, key, topic string, n int) ([]*wsClient, error) {
	out := make([]*wsClient, 0, n)
	for i := 0; i < n; i++ {
		cl, err := dialSocket(base, key)
		if err == nil {
			err = cl.join(topic)
		}
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

func closeAll(cs []*wsClient) {
	for _, c := range cs {
		c.conn.Close()
	}
}

// latencies collects per-goroutine samples without sharing a lock.
type latencies struct {
	mu  []sync.Mutex
	per [][]time.Duration
}

func newLatencies(n int) *latencies {
	return &latencies{mu: make([]sync.Mutex, n), per: make([][]time.Duration, n)}
}

func (l *latencies) add(i int, d time.Duration) {
	l.mu[i].Lock()
	l.per[i] = append(l.per[i], d)
	l.mu[i].Unlock()
}

func (l *latencies) sorted() []time.Duration {
	var all []time.Duration
	for i := range l.per {
		l.mu[i].Lock()
		all = append(all, l.per[i]...)
		l.mu[i].Unlock()
	}
	slices.Sort(all)
	return all
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
