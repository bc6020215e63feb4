package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP endpoint, driven by the official Go SDK's client over Streamable
// HTTP against a real server.

// headerTransport adds a credential to every request of an MCP client.
type headerTransport struct {
	base http.RoundTripper
	cred cred
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	h.cred(r.Header)
	return h.base.RoundTrip(r)
}

// mcpSession connects an MCP client to ts with c.
func (ts *testServer) mcpSession(t testing.TB, c cred) *mcp.ClientSession {
	t.Helper()
	cs, err := ts.connectMCP(c)
	if err != nil {
		t.Fatalf("connect MCP: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func (ts *testServer) connectMCP(c cred) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "chatd-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.http.URL + "/mcp",
		HTTPClient: &http.Client{Transport: headerTransport{base: ts.http.Client().Transport, cred: c}}}, nil)
}

// callTool calls a tool and returns its result, failing on a protocol error.
func callTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// toolOK calls a tool that must succeed and returns its structured result,
// which must also be the text of its content.
func toolOK(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res := callTool(t, cs, name, args)
	text := toolText(t, res)
	if res.IsError {
		t.Fatalf("%s(%v) failed: %s", name, args, text)
	}
	var structured, fromText map[string]any
	remarshal(t, res.StructuredContent, &structured)
	if err := json.Unmarshal([]byte(text), &fromText); err != nil || !jsonEqual(t, structured, fromText) {
		t.Fatalf("%s: the text %s is not the structured result %v", name, text, structured)
	}
	return structured
}

// toolRefused calls a tool that must be refused and returns the envelope
// its error text carries.
func toolRefused(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, code string) map[string]any {
	t.Helper()
	res := callTool(t, cs, name, args)
	text := toolText(t, res)
	if !res.IsError {
		t.Fatalf("%s(%v) = %s, want a refusal with %s", name, args, text, code)
	}
	var env struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &env); err != nil || env.Error["code"] != code {
		t.Fatalf("%s(%v) refused with %s, want code %s", name, args, text, code)
	}
	return env.Error
}

func toolText(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("%d content items, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", res.Content[0])
	}
	return tc.Text
}

func toolNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

var (
	agentToolNames = []string{"add_contact", "add_participant", "archive_memory", "create_room", "get_board",
		"list_contacts", "list_memories", "list_participants", "list_peers", "list_rooms", "mark_failed",
		"mark_processed", "post_event", "read_messages", "rename_room", "respond_contact_request",
		"send_message", "set_board_goal", "store_memory", "wait_for_message", "whoami"}
	humanToolNames = []string{"add_participant", "create_room", "list_agents", "list_participants", "list_rooms",
		"message_status", "read_messages", "send_message", "whoami"}
)

// An agent's whole turn over MCP, seen by a person over REST and the socket.
func TestMCPAgentTurn(t *testing.T) {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	helper, helperKey := ts.agent(alice, "Helper")
	room := ts.room(t, helperKey, alice.ID)
	watching := newListener(t, ts, aliceKey, "chat_room:"+room)

	cs := ts.mcpSession(t, apiKey(helperKey))
	sameJSON(t, "agent tools", toolNames(t, cs), agentToolNames)
	if me := toolOK(t, cs, "whoami", nil)["agent"].(map[string]any); me["id"] != helper.ID {
		t.Fatalf("whoami = %v, want the helper", me)
	}

	waited := make(chan map[string]any, 1)
	go func() { waited <- toolOK(t, cs, "wait_for_message", map[string]any{"timeout_seconds": 20}) }()
	time.Sleep(100 * time.Millisecond) // let the wait begin before the message exists
	posted := ts.do(t, "POST", humanChatsPath+"/"+room+"/messages", apiKey(aliceKey),
		map[string]any{"message": map[string]any{"content": "@alice/helper what is 2+2?", "mentions": []any{map[string]any{"id": helper.ID}}}})
	expect(t, posted, 201, "")
	messageID := posted.data(t)["id"].(string)

	got := <-waited
	msg, _ := got["message"].(map[string]any)
	if msg == nil || msg["id"] != messageID || got["room_id"] != room || msg["metadata"].(map[string]any)["status"] != "processing" {
		t.Fatalf("wait_for_message = %v, want message %s in room %s, processing", got, messageID, room)
	}
	toolOK(t, cs, "post_event", map[string]any{"room_id": room, "message_type": "thought", "content": "Adding."})
	reply := toolOK(t, cs, "send_message", map[string]any{"room_id": room, "content": "@alice 4", "mentions": []any{"alice"}})
	if r := reply["message"].(map[string]any); r["success"] != true {
		t.Fatalf("send_message = %v", reply)
	}
	done := toolOK(t, cs, "mark_processed", map[string]any{"room_id": room, "message_id": messageID})
	if d := done["delivery"].(map[string]any); d["status"] != "processed" {
		t.Fatalf("mark_processed = %v", done)
	}

	watching.await(t, "chat_room:"+room, "event_created", func(p map[string]any) bool { return p["content"] == "Adding." })
	watching.await(t, "chat_room:"+room, "message_created", func(p map[string]any) bool { return p["content"] == "@alice 4" })
	watching.await(t, "chat_room:"+room, "message_updated", func(p map[string]any) bool {
		status, _ := p["metadata"].(map[string]any)["delivery_status"].(map[string]any)[helper.ID].(map[string]any)
		return p["id"] == messageID && status["status"] == "processed"
	})
	history := ts.do(t, "GET", humanChatsPath+"/"+room+"/messages", apiKey(aliceKey), nil)
	if n := len(history.list(t)); n != 3 {
		t.Fatalf("history has %d messages, want the question, the thought and the answer", n)
	}
}

// A person's key gets the human tools, acting as that person.
func TestMCPHumanTools(t *testing.T) {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	helper, _ := ts.agent(alice, "Helper")
	cs := ts.mcpSession(t, bearer(ts.token(alice, time.Hour)))
	sameJSON(t, "human tools", toolNames(t, cs), humanToolNames)

	room := toolOK(t, cs, "create_room", map[string]any{"title": "Plans"})["room"].(map[string]any)["id"].(string)
	toolOK(t, cs, "add_participant", map[string]any{"room_id": room, "participant": helper.Handle})
	sent := toolOK(t, cs, "send_message", map[string]any{"room_id": room, "content": "@" + helper.Handle + " plan it",
		"mentions": []any{helper.ID}})
	messageID := sent["message"].(map[string]any)["id"].(string)
	status := toolOK(t, cs, "message_status", map[string]any{"room_id": room, "message_id": messageID})
	deliveries := status["message"].(map[string]any)["metadata"].(map[string]any)["delivery_status"].(map[string]any)
	if d, _ := deliveries[helper.ID].(map[string]any); d["status"] != "pending" {
		t.Fatalf("message_status = %v, want the helper's delivery pending", status)
	}
	if agents := toolOK(t, cs, "list_agents", nil)["agents"].([]any); len(agents) != 1 {
		t.Fatalf("list_agents = %v", agents)
	}
	// What the tools did is what REST shows.
	rooms := ts.do(t, "GET", humanChatsPath, apiKey(aliceKey), nil).list(t)
	if len(rooms) != 1 || rooms[0].(map[string]any)["title"] != "Plans" {
		t.Fatalf("REST rooms = %v", rooms)
	}
	read := toolOK(t, cs, "read_messages", map[string]any{"room_id": room})
	if msgs := read["messages"].([]any); len(msgs) != 1 || read["metadata"] == nil {
		t.Fatalf("read_messages = %v", read)
	}
}

// wait_for_message ends with null at its timeout, and at once when the
// server shuts down.
func TestMCPWaitEnds(t *testing.T) {
	ts := newTestServer(t)
	alice, _ := ts.user("alice")
	_, helperKey := ts.agent(alice, "Helper")
	cs := ts.mcpSession(t, apiKey(helperKey))

	started := time.Now()
	if got := toolOK(t, cs, "wait_for_message", map[string]any{"timeout_seconds": 1}); got["message"] != nil {
		t.Fatalf("wait_for_message = %v, want null", got)
	}
	if waited := time.Since(started); waited < time.Second {
		t.Fatalf("returned after %v, before its timeout", waited)
	}

	result := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_for_message", Arguments: map[string]any{"timeout_seconds": 60}})
		result <- err
	}()
	time.Sleep(200 * time.Millisecond)
	started = time.Now()
	ts.srv.Close()
	select {
	case <-result:
		if took := time.Since(started); took > 5*time.Second {
			t.Fatalf("the wait ended %v after shutdown", took)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the wait outlived the shutdown")
	}
}
