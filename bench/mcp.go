package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP workload, against one server (sync normal), with the official Go
// SDK's client on the Streamable HTTP transport:
//
//   - send_message tool calls, one session per client, against the same
//     post over REST (same lanes, same body): what the MCP layer costs;
//   - wait_for_message wake-ups: an agent waiting in the tool, a poster
//     posting over REST, and the time until the wait returns the message.

// wakeGap is how long each round lets the wait settle in before posting,
// so that the post wakes a waiting call rather than being found by its
// first look.
const wakeGap = 20 * time.Millisecond

func mcpWorkload(bin string, clients []int, d time.Duration, rounds int) error {
	base, personKey, _, stop, pid, err := wsServer(bin)
	if err != nil {
		return err
	}
	defer stop()
	most := slices.Max(clients)
	c := newClient(base, 2*most)
	f, err := c.setup(personKey, most)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	sessions := make([]*mcp.ClientSession, most)
	for i, l := range f.lanes {
		if sessions[i], err = connectMCP(c, l.posterKey); err != nil {
			return fmt.Errorf("connect MCP: %w", err)
		}
		defer sessions[i].Close()
	}

	// The load tool shares the machine with the server, so req/s alone
	// would charge the server for the client SDK's work too: the CPU each
	// side spent per request tells them apart.
	fmt.Println("mcp: the same post over REST and as the send_message tool, sync normal")
	fmt.Printf("%-22s %7s %10s %9s %9s %8s %12s %12s\n", "via", "clients", "req/s", "p50", "p99", "errors",
		"server CPU", "bench CPU")
	for _, n := range clients {
		// Each for d in all, in halves ordered REST, MCP, MCP, REST: a
		// drift in the machine's load (it is shared) or in the database's
		// size then weighs on both alike.
		postREST := func() cpuRun { return timeCPU(pid, func() result { return c.run(n, d/2, f.post) }) }
		postMCP := func() cpuRun {
			return timeCPU(pid, func() result {
				return c.run(n, d/2, func(i int) error { return f.sendMessage(sessions[i], i) })
			})
		}
		rest, overMCP := postREST(), postMCP()
		overMCP = overMCP.merge(postMCP())
		rest = rest.merge(postREST())
		for _, row := range []struct {
			name string
			run  cpuRun
		}{{"REST POST messages", rest}, {"MCP send_message", overMCP}} {
			res := row.run.res
			fmt.Printf("%-22s %7d %10.0f %9s %9s %8d %12s %12s\n", row.name, n, res.rate(), ms(res.p(0.50)), ms(res.p(0.99)),
				res.errors, row.run.perRequest(row.run.server), row.run.perRequest(row.run.bench))
			if res.firstErr != nil {
				fmt.Printf("  first error: %v\n", res.firstErr)
			}
		}
		fmt.Printf("%-22s %7d %9.2fx %28s %11.2fx %11.2fx\n", "MCP / REST", n, overMCP.res.rate()/rest.res.rate(), "",
			overMCP.serverPerRequest()/rest.serverPerRequest(), overMCP.benchPerRequest()/rest.benchPerRequest())
	}
	return wakeLatency(c, personKey, rounds)
}

// cpuRun is a run with the CPU time the server and the load tool spent
// in it.
type cpuRun struct {
	res           result
	server, bench time.Duration
}

func timeCPU(serverPID int, run func() result) cpuRun {
	server, bench := processCPU(serverPID), ownCPU()
	res := run()
	return cpuRun{res: res, server: processCPU(serverPID) - server, bench: ownCPU() - bench}
}

// merge is the two runs as if one.
func (a cpuRun) merge(b cpuRun) cpuRun {
	a.res.lat = append(a.res.lat, b.res.lat...)
	slices.Sort(a.res.lat)
	a.res.elapsed += b.res.elapsed
	a.res.errors += b.res.errors
	if a.res.firstErr == nil {
		a.res.firstErr = b.res.firstErr
	}
	a.server += b.server
	a.bench += b.bench
	return a
}

func (a cpuRun) serverPerRequest() float64 { return float64(a.server) / float64(len(a.res.lat)) }
func (a cpuRun) benchPerRequest() float64  { return float64(a.bench) / float64(len(a.res.lat)) }

// perRequest renders CPU time per acknowledged request.
func (a cpuRun) perRequest(cpu time.Duration) string {
	if len(a.res.lat) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fµs", float64(cpu.Microseconds())/float64(len(a.res.lat)))
}

// processCPU is the user and system CPU time a process has used, from
// /proc (in clock ticks of 10 ms, USER_HZ on Linux).
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is the first, utime the 12th, stime the 13th.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	user, _ := strconv.ParseInt(fields[11], 10, 64)
	system, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(user+system) * 10 * time.Millisecond
}

// ownCPU is the CPU time the load tool has used.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sendMessage is f.post as the send_message tool: the same room, mention
// and content.
func (f *fixture) sendMessage(cs *mcp.ClientSession, i int) error {
	l := f.lanes[i]
	n := f.posted.Add(1)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{
		"room_id":  l.room,
		"content":  fmt.Sprintf("please look at item %d of the load test", n),
		"mentions": []string{l.workerID},
	}})
	return toolFailed(res, err)
}

// wakeLatency has an agent wait in wait_for_message while a poster posts
// to it over REST, round after round, and reports how long the wait took
// to return the message: from the post's start, from the message's
// inserted_at (as the socket workloads measure), and from the moment the
// poster had its 201. The last can be below zero: the wait may return
// before the poster has read its answer.
func wakeLatency(c *client, personKey string, rounds int) error {
	room, keys, err := fanOutRoom(c, personKey, "", 2)
	if err != nil {
		return err
	}
	posterKey, waiterKey := keys[0], keys[1]
	var waiter struct{ Data struct{ ID string } }
	if _, err := c.call("GET", "/api/v1/agent/me", waiterKey, nil, &waiter, 200); err != nil {
		return err
	}
	cs, err := connectMCP(c, waiterKey)
	if err != nil {
		return fmt.Errorf("connect MCP: %w", err)
	}
	defer cs.Close()

	var fromStart, fromCommit, fromAnswer []time.Duration
	errs := 0
	var firstErr error
	for range rounds {
		r, err := wakeRound(c, cs, room, posterKey, waiter.Data.ID)
		if err != nil {
			errs++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		fromStart = append(fromStart, r.fromStart)
		fromCommit = append(fromCommit, r.fromCommit)
		fromAnswer = append(fromAnswer, r.fromAnswer)
	}
	fmt.Printf("mcp: wait_for_message woken by a REST post, %d rounds, %d errors\n", len(fromStart), errs)
	fmt.Printf("%-22s %9s %9s\n", "from", "p50", "p99")
	for _, row := range []struct {
		from string
		lat  []time.Duration
	}{{"the post's start", fromStart}, {"inserted_at", fromCommit}, {"the poster's 201", fromAnswer}} {
		slices.Sort(row.lat)
		fmt.Printf("%-22s %9s %9s\n", row.from, ms(pct(row.lat, 0.5)), ms(pct(row.lat, 0.99)))
	}
	if firstErr != nil {
		fmt.Printf("  first error: %v\n", firstErr)
	}
	return nil
}

// wake is one round's wake-up latency, from the post's start, from the
// message's inserted_at and from the poster's 201.
type wake struct{ fromStart, fromCommit, fromAnswer time.Duration }

// wakeRound starts a wait_for_message, posts to the waiter over REST a
// moment later, times the wait's return, and marks the message processed
// (so that the next round's wait finds nothing before its post).
func wakeRound(c *client, cs *mcp.ClientSession, room, posterKey, waiterID string) (wake, error) {
	type taken struct {
		at  time.Time
		res *mcp.CallToolResult
		err error
	}
	got := make(chan taken, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait_for_message",
			Arguments: map[string]any{"timeout_seconds": 10}})
		got <- taken{time.Now(), res, err}
	}()
	time.Sleep(wakeGap)
	var posted struct{ Data struct{ ID string } }
	started := time.Now()
	_, err := c.call("POST", "/api/v1/agent/chats/"+room+"/messages", posterKey, map[string]any{
		"message": map[string]any{"content": "wake up", "mentions": []map[string]string{{"id": waiterID}}},
	}, &posted, 201)
	answered := time.Now()
	t := <-got
	if err != nil {
		return wake{}, err
	}
	if err := toolFailed(t.res, t.err); err != nil {
		return wake{}, err
	}
	var out struct {
		Message *struct {
			ID         string `json:"id"`
			InsertedAt string `json:"inserted_at"`
		} `json:"message"`
	}
	if err := remarshal(t.res.StructuredContent, &out); err != nil || out.Message == nil || out.Message.ID != posted.Data.ID {
		return wake{}, fmt.Errorf("wait_for_message returned %v, want message %s", t.res.StructuredContent, posted.Data.ID)
	}
	inserted, err := time.Parse("2006-01-02T15:04:05.000000Z", out.Message.InsertedAt)
	if err != nil {
		return wake{}, err
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mark_processed",
		Arguments: map[string]any{"room_id": room, "message_id": posted.Data.ID}})
	if err := toolFailed(res, err); err != nil {
		return wake{}, err
	}
	return wake{t.at.Sub(started), t.at.Sub(inserted), t.at.Sub(answered)}, nil
}

// connectMCP opens an MCP session with an agent's key, over c's
// connections.
func connectMCP(c *client, key string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "chatd-bench", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.base + "/mcp",
		HTTPClient: &http.Client{Transport: keyTransport{base: c.http.Transport, key: key}}}, nil)
}

// keyTransport sends an agent's key with every request of its session.
type keyTransport struct {
	base http.RoundTripper
	key  string
}

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-API-Key", k.key)
	return k.base.RoundTrip(r)
}

// toolFailed is the error of a tool call: the protocol's, or the refusal's
// text.
func toolFailed(res *mcp.CallToolResult, err error) error {
	if err != nil {
		return err
	}
	if res.IsError {
		if len(res.Content) > 0 {
			if text, ok := res.Content[0].(*mcp.TextContent); ok {
				return errors.New(text.Text)
			}
		}
		return errors.New("tool error")
	}
	return nil
}

// remarshal decodes a tool's structured result, as the SDK hands it over
// (decoded into any), into out.
func remarshal(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
