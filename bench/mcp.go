package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
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
	base, personKey, _, stop, _, err := wsServer(bin)
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

	fmt.Println("mcp: the same post over REST and as the send_message tool, sync normal")
	fmt.Printf("%-22s %7s %10s %9s %9s %8s\n", "via", "clients", "req/s", "p50", "p99", "errors")
	for _, n := range clients {
		// Each for d in all, in halves ordered REST, MCP, MCP, REST: a
		// drift in the machine's load (it is shared) or in the database's
		// size then weighs on both alike.
		postREST := func() result { return c.run(n, d/2, f.post) }
		postMCP := func() result { return c.run(n, d/2, func(i int) error { return f.sendMessage(sessions[i], i) }) }
		rest, overMCP := postREST(), postMCP()
		overMCP = merge(overMCP, postMCP())
		rest = merge(rest, postREST())
		for _, row := range []struct {
			name string
			res  result
		}{{"REST POST messages", rest}, {"MCP send_message", overMCP}} {
			fmt.Printf("%-22s %7d %10.0f %9s %9s %8d\n", row.name, n, row.res.rate(), ms(row.res.p(0.50)), ms(row.res.p(0.99)), row.res.errors)
			if row.res.firstErr != nil {
				fmt.Printf("  first error: %v\n", row.res.firstErr)
			}
		}
		fmt.Printf("%-22s %7d %9.2fx\n", "MCP / REST", n, overMCP.rate()/rest.rate())
	}
	return wakeLatency(c, personKey, rounds)
}

// merge is the result of two runs, as if one.
func merge(a, b result) result {
	a.lat = append(a.lat, b.lat...)
	slices.Sort(a.lat)
	a.elapsed += b.elapsed
	a.errors += b.errors
	a.drained += b.drained
	if a.firstErr == nil {
		a.firstErr = b.firstErr
	}
	return a
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

	type taken struct {
		at  time.Time
		res *mcp.CallToolResult
		err error
	}
	var fromStart, fromCommit, fromAnswer []time.Duration
	errs := 0
	var firstErr error
	fail := func(err error) {
		errs++
		if firstErr == nil {
			firstErr = err
		}
	}
	for range rounds {
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
			"message": map[string]any{"content": "wake up", "mentions": []map[string]string{{"id": waiter.Data.ID}}},
		}, &posted, 201)
		answered := time.Now()
		t := <-got
		if err != nil {
			fail(err)
			continue
		}
		if err := toolFailed(t.res, t.err); err != nil {
			fail(err)
			continue
		}
		var out struct {
			Message *struct {
				ID         string `json:"id"`
				InsertedAt string `json:"inserted_at"`
			} `json:"message"`
		}
		if err := remarshal(t.res.StructuredContent, &out); err != nil || out.Message == nil || out.Message.ID != posted.Data.ID {
			fail(fmt.Errorf("wait_for_message returned %v, want message %s", t.res.StructuredContent, posted.Data.ID))
			continue
		}
		inserted, err := time.Parse("2006-01-02T15:04:05.000000Z", out.Message.InsertedAt)
		if err != nil {
			fail(err)
			continue
		}
		fromStart = append(fromStart, t.at.Sub(started))
		fromCommit = append(fromCommit, t.at.Sub(inserted))
		fromAnswer = append(fromAnswer, t.at.Sub(answered))
		// Finished, so that every round's wait finds nothing before the post.
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mark_processed",
			Arguments: map[string]any{"room_id": room, "message_id": posted.Data.ID}})
		if err := toolFailed(res, err); err != nil {
			return err
		}
	}
	for _, s := range [][]time.Duration{fromStart, fromCommit, fromAnswer} {
		slices.Sort(s)
	}
	fmt.Printf("mcp: wait_for_message woken by a REST post, %d rounds, %d errors\n", len(fromStart), errs)
	fmt.Printf("%-22s %9s %9s\n", "from", "p50", "p99")
	for _, row := range []struct {
		from string
		lat  []time.Duration
	}{{"the post's start", fromStart}, {"inserted_at", fromCommit}, {"the poster's 201", fromAnswer}} {
		fmt.Printf("%-22s %9s %9s\n", row.from, ms(pct(row.lat, 0.5)), ms(pct(row.lat, 0.99)))
	}
	if firstErr != nil {
		fmt.Printf("  first error: %v\n", firstErr)
	}
	return nil
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
