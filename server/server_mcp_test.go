package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatd/chatd/store"
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
		"search", "send_message", "set_board_goal", "store_memory", "wait_for_message", "whoami"}
	humanToolNames = []string{"add_participant", "create_room", "list_agents", "list_participants", "list_rooms",
		"message_status", "read_messages", "search", "send_message", "whoami"}
)

// mcpWorld is a server with alice and her agent helper.
type mcpWorld struct {
	ts                  *testServer
	alice               *store.User
	helper              *store.Agent
	aliceKey, helperKey string
}

func newMCPWorld(t *testing.T) mcpWorld {
	t.Helper()
	w := mcpWorld{ts: newTestServer(t)}
	w.alice, w.aliceKey = w.ts.user("alice")
	w.helper, w.helperKey = w.ts.agent(w.alice, "Helper")
	return w
}

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
	w := newMCPWorld(t)
	ts := w.ts
	cs := ts.mcpSession(t, apiKey(w.helperKey))

	started := time.Now()
	if got := toolOK(t, cs, "wait_for_message", map[string]any{"timeout_seconds": 1}); got["message"] != nil {
		t.Fatalf("wait_for_message = %v, want null", got)
	}
	if waited := time.Since(started); waited < time.Second {
		t.Fatalf("returned after %v, before its timeout", waited)
	}

	// A wait whose credential ends answers so, before the session closes:
	// a client would otherwise wait for the answer until its own timeout.
	rotated := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_for_message", Arguments: map[string]any{"timeout_seconds": 60}})
		if err != nil {
			t.Errorf("the wait whose key was rotated: %v", err)
		}
		rotated <- res
	}()
	time.Sleep(200 * time.Millisecond)
	expect(t, ts.do(t, "POST", "/api/v1/me/agents/"+w.helper.ID+"/rotate-key", apiKey(w.aliceKey), nil), 200, "")
	select {
	case res := <-rotated:
		if res == nil || !res.IsError || !strings.Contains(toolText(t, res), `"code":"unauthorized"`) {
			t.Fatalf("the wait whose key was rotated answered %+v", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the wait outlived its credential")
	}

	_, newKey := ts.agent(w.alice, "Scout")
	cs = ts.mcpSession(t, apiKey(newKey))
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

// mcpHeaders is a credential plus the headers of a Streamable HTTP
// request, for the transport's refusals sent by hand.
func mcpHeaders(c cred, session string) cred {
	return func(h http.Header) {
		c(h)
		h.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			h.Set("Mcp-Session-Id", session)
		}
	}
}

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
	`"capabilities":{},"clientInfo":{"name":"by-hand","version":"1"}}}`

// openMCPSession initializes a session by hand and returns its id.
func (ts *testServer) openMCPSession(t testing.TB, c cred) string {
	t.Helper()
	r, _ := ts.send(t, "POST", "/mcp", mcpHeaders(c, ""), mcpInitialize)
	id := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || id == "" {
		t.Fatalf("initialize: %d %s (session %q)", r.status, r.body, id)
	}
	return id
}

// The transport's refusals are answered in the error envelope and change
// nothing.
func TestMCPTransportRefusals(t *testing.T) {
	ts := newTestServerWith(t, func(c *Config) { c.MaxBodyBytes = 4 << 10 })
	alice, aliceKey := ts.user("alice")
	_, helperKey := ts.agent(alice, "Helper")
	_, scoutKey := ts.agent(alice, "Scout")
	helpers := ts.openMCPSession(t, apiKey(helperKey))
	ended := ts.openMCPSession(t, apiKey(helperKey))
	expect(t, ts.do(t, "DELETE", "/mcp", mcpHeaders(apiKey(helperKey), ended), nil), 204, "")
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	plain := func(h http.Header) { mcpHeaders(apiKey(helperKey), "")(h); h.Set("Content-Type", "text/plain") }
	noAccept := func(h http.Header) { apiKey(helperKey)(h) }

	ts.run(t, []scenario{
		refusalCase("no credentials", noCred, "POST", "/mcp", mcpInitialize, 401, "unauthorized"),
		refusalCase("a bad key", mcpHeaders(apiKey("band_a_"+strings.Repeat("z", 52)), ""), "POST", "/mcp", mcpInitialize, 401, "unauthorized"),
		refusalCase("listen without a session", mcpHeaders(apiKey(helperKey), ""), "GET", "/mcp", nil, 400, "invalid_mcp_request"),
		refusalCase("end without a session", mcpHeaders(apiKey(helperKey), ""), "DELETE", "/mcp", nil, 400, "invalid_mcp_request"),
		refusalCase("no Accept", noAccept, "POST", "/mcp", mcpInitialize, 400, "invalid_mcp_request"),
		refusalCase("not JSON", plain, "POST", "/mcp", mcpInitialize, 400, "invalid_mcp_request"),
		refusalCase("malformed JSON-RPC", mcpHeaders(apiKey(helperKey), helpers), "POST", "/mcp", `{"jsonrpc":"2.0","id":`, 400, "invalid_mcp_request"),
		refusalCase("over the size limit", mcpHeaders(apiKey(helperKey), helpers), "POST", "/mcp",
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{"pad":"`+strings.Repeat("x", 8<<10)+`"}}}`,
			413, "payload_too_large"),
		refusalCase("another agent's session", mcpHeaders(apiKey(scoutKey), helpers), "POST", "/mcp", list, 404, "not_found"),
		refusalCase("its owner's key", mcpHeaders(apiKey(aliceKey), helpers), "POST", "/mcp", list, 404, "not_found"),
		refusalCase("an ended session", mcpHeaders(apiKey(helperKey), ended), "POST", "/mcp", list, 404, "not_found"),
		refusalCase("a made-up session", mcpHeaders(apiKey(helperKey), "not-a-session"), "GET", "/mcp", nil, 404, "not_found"),
		refusalCase("another site's page", withOrigin(mcpHeaders(apiKey(helperKey), ""), "http://evil.example"), "POST", "/mcp", mcpInitialize, 403, "forbidden"),
		refusalCase("a page rebound to this server's address", withOrigin(mcpHeaders(apiKey(helperKey), ""), "http://rebound.example:8080"), "POST", "/mcp", mcpInitialize, 403, "forbidden"),
		refusalCase("a malformed Origin", withOrigin(mcpHeaders(apiKey(helperKey), ""), "::"), "POST", "/mcp", mcpInitialize, 403, "forbidden"),
	})
}

// A browser page may reach /mcp from this machine (an inspector) or from
// the server's public URL; other clients send no Origin.
func TestMCPOriginsAllowed(t *testing.T) {
	ts := newTestServerWith(t, func(c *Config) { c.PublicURL = "https://chat.example.com/" })
	alice, _ := ts.user("alice")
	_, helperKey := ts.agent(alice, "Helper")
	for _, origin := range []string{"http://localhost:6274", "http://127.0.0.1:3000", "http://[::1]:8080", "https://chat.example.com"} {
		r, _ := ts.send(t, "POST", "/mcp", withOrigin(mcpHeaders(apiKey(helperKey), ""), origin), mcpInitialize)
		if r.status != 200 || r.header.Get("Mcp-Session-Id") == "" {
			t.Errorf("Origin %s: %d %s", origin, r.status, r.body)
		}
	}
}

func withOrigin(c cred, origin string) cred {
	return func(h http.Header) {
		c(h)
		h.Set("Origin", origin)
	}
}

// mcpRefusal is a tool call the REST API would refuse, with the REST
// request that must be refused with the same code ("" method: the tool has
// no REST twin).
type mcpRefusal struct {
	name            string
	tool            string
	args            map[string]any
	code            string
	method, path    string
	body            any
	pointerFromTool string // a pointer the tool's refusal names (the REST one's, unwrapped)
}

// A refused tool call answers the REST API's code, and changes nothing.
func TestMCPToolRefusals(t *testing.T) {
	ts := newTestServer(t, func(o *store.Options) { o.Limits.ChatsPerUser = 3 })
	alice, aliceKey := ts.user("alice")
	bob, bobKey := ts.user("bob")
	helper, helperKey := ts.agent(alice, "Helper")
	scout, _ := ts.agent(alice, "Scout")
	room := ts.room(t, helperKey, alice.ID)
	blocked := ts.do(t, "POST", humanChatsPath, apiKey(aliceKey), map[string]any{}).data(t)["id"].(string)
	expect(t, ts.do(t, "POST", humanChatsPath+"/"+blocked+"/participants", apiKey(aliceKey), participantBody(helper.ID, "")), 201, "")
	expect(t, ts.do(t, "PATCH", humanChatsPath+"/"+blocked+"/participants/"+helper.ID, apiKey(aliceKey),
		map[string]any{"participant": map[string]any{"status": "blocked"}}), 200, "")
	bobs := ts.do(t, "POST", humanChatsPath, apiKey(bobKey), map[string]any{}).data(t)["id"].(string)
	posted := ts.do(t, "POST", humanChatsPath+"/"+room+"/messages", apiKey(aliceKey),
		map[string]any{"message": map[string]any{"content": "@alice/helper hi", "mentions": []any{map[string]any{"id": helper.ID}}}})
	pending := posted.data(t)["id"].(string)
	ts.room(t, helperKey) // the third room: alice's quota is full
	cs := ts.mcpSession(t, apiKey(helperKey))
	msgPath := func(room string) string { return agentChatsPath + "/" + room + "/messages" }
	text := func(content string, mentions ...any) map[string]any {
		return map[string]any{"message": map[string]any{"content": content, "mentions": append([]any{}, mentions...)}}
	}

	for _, c := range []mcpRefusal{
		{name: "a room it is not in", tool: "send_message", args: map[string]any{"room_id": bobs, "content": "@bob hi", "mentions": []any{"bob"}},
			code: "not_found", method: "POST", path: msgPath(bobs), body: text("@bob hi", map[string]any{"handle": "bob"})},
		{name: "blocked in the room", tool: "send_message", args: map[string]any{"room_id": blocked, "content": "@alice hi", "mentions": []any{"alice"}},
			code: "execution_stopped", method: "POST", path: msgPath(blocked), body: text("@alice hi", map[string]any{"handle": "alice"})},
		{name: "a mention of someone not in the room", tool: "send_message", args: map[string]any{"room_id": room, "content": "@bob hi", "mentions": []any{bob.ID}},
			code: "mentioned_participant_not_in_room", method: "POST", path: msgPath(room), body: text("@bob hi", map[string]any{"id": bob.ID})},
		{name: "no mention", tool: "send_message", args: map[string]any{"room_id": room, "content": "hi", "mentions": []any{}},
			code: "mentions_required", method: "POST", path: msgPath(room), body: text("hi")},
		{name: "blank content", tool: "send_message", args: map[string]any{"room_id": room, "content": " ", "mentions": []any{"alice"}},
			code: "validation_error", method: "POST", path: msgPath(room), body: text(" ", map[string]any{"handle": "alice"}),
			pointerFromTool: "/content"},
		{name: "processed before it was taken", tool: "mark_processed", args: map[string]any{"room_id": room, "message_id": pending},
			code: "no_active_attempt", method: "POST", path: msgPath(room) + "/" + pending + "/processed", body: map[string]any{}},
		{name: "an event of no known type", tool: "post_event", args: map[string]any{"room_id": room, "message_type": "gossip", "content": "psst"},
			code: "validation_error", method: "POST", path: agentChatsPath + "/" + room + "/events",
			body:            map[string]any{"event": map[string]any{"message_type": "gossip", "content": "psst"}},
			pointerFromTool: "/message_type"},
		{name: "over the room quota", tool: "create_room", args: map[string]any{"title": "One more"},
			code: "limit_reached", method: "POST", path: agentChatsPath, body: map[string]any{"chat": map[string]any{"title": "One more"}}},
		{name: "a handle nobody has", tool: "add_participant", args: map[string]any{"room_id": room, "participant": "nobody"}, code: "not_found"},
		{name: "a participant of a room it is not in", tool: "add_participant", args: map[string]any{"room_id": bobs, "participant": scout.ID},
			code: "not_found", method: "POST", path: agentChatsPath + "/" + bobs + "/participants", body: participantBody(scout.ID, "")},
		{name: "a wait too long", tool: "wait_for_message", args: map[string]any{"timeout_seconds": 61}, code: "validation_error"},
		{name: "a wait in a room it is not in", tool: "wait_for_message", args: map[string]any{"room_id": bobs, "timeout_seconds": 1},
			code: "not_found", method: "GET", path: msgPath(bobs) + "/next"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := ts.snapshot(t)
			refusal := toolRefused(t, cs, c.tool, c.args, c.code)
			ts.unchanged(t, before)
			if c.pointerFromTool != "" {
				if _, ok := refusal["details"].(map[string]any)[c.pointerFromTool]; !ok {
					t.Errorf("details %v do not name %s", refusal["details"], c.pointerFromTool)
				}
			}
			if c.method == "" {
				return
			}
			r := ts.do(t, c.method, c.path, apiKey(helperKey), c.body)
			expect(t, r, r.status, c.code)
			ts.unchanged(t, before)
			// The tool's pointers name its arguments: no body wrapper.
			unwrapped := strings.NewReplacer("/message/", "/", "/event/", "/", "/chat/", "/", "/participant/", "/")
			if rest := r.json(t)["error"].(map[string]any)["message"].(string); unwrapped.Replace(rest) != refusal["message"] {
				t.Errorf("REST says %q, the tool %q", rest, refusal["message"])
			}
		})
	}
}

// Arguments that do not fit a tool's input schema, and unknown tools, are
// refused before the tool runs.
func TestMCPArgumentRefusals(t *testing.T) {
	w := newMCPWorld(t)
	ts := w.ts
	cs := ts.mcpSession(t, apiKey(w.helperKey))
	before := ts.snapshot(t)
	for _, c := range []struct {
		name, tool string
		args       map[string]any
		says       string
	}{
		{"a number for an id", "send_message", map[string]any{"room_id": 5, "content": "hi"}, "room_id"},
		{"a missing argument", "rename_room", map[string]any{"room_id": nilID}, "title"},
		{"an argument the tool does not take", "create_room", map[string]any{"title": "x", "owner": "bob"}, "owner"},
		{"a string for a number", "wait_for_message", map[string]any{"timeout_seconds": "soon"}, "timeout_seconds"},
	} {
		res := callTool(t, cs, c.tool, c.args)
		if text := toolText(t, res); !res.IsError || !strings.Contains(text, c.says) {
			t.Errorf("%s: %s(%v) = %s, want an error naming %s", c.name, c.tool, c.args, text, c.says)
		}
	}
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "drop_tables"})
	if err == nil || !strings.Contains(err.Error(), "drop_tables") {
		t.Errorf("an unknown tool: %v, want an error naming it", err)
	}
	ts.unchanged(t, before)
}

// A session ends when the credential that opened it ends, as a socket
// does: later requests of it are 404, and a wait in progress ends.
func TestMCPSessionsEndWithTheirCredential(t *testing.T) {
	w := newMCPWorld(t)
	ts, aliceKey, helper, helperKey := w.ts, w.aliceKey, w.helper, w.helperKey
	agentSession := ts.mcpSession(t, apiKey(helperKey))
	keys := ts.do(t, "POST", "/api/v1/me/keys", apiKey(aliceKey), map[string]any{"key": map[string]any{"name": "assistant"}})
	expect(t, keys, 201, "")
	personKey := keys.data(t)["api_key"].(string)
	personSession := ts.openMCPSession(t, apiKey(personKey))

	waiting := make(chan error, 1)
	go func() {
		_, err := agentSession.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait_for_message",
			Arguments: map[string]any{"timeout_seconds": 60}})
		waiting <- err
	}()
	time.Sleep(200 * time.Millisecond)
	rotated := ts.do(t, "POST", "/api/v1/me/agents/"+helper.ID+"/rotate-key", apiKey(aliceKey), nil)
	expect(t, rotated, 200, "")
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait outlived the agent's key")
	}
	newKey := rotated.data(t)["credentials"].(map[string]any)["api_key"].(string)
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	expect(t, ts.do(t, "POST", "/mcp", mcpHeaders(apiKey(newKey), agentSession.ID()), list), 404, "not_found")

	keyID := keys.data(t)["id"].(string)
	expect(t, ts.do(t, "DELETE", "/api/v1/me/keys/"+keyID, apiKey(aliceKey), nil), 204, "")
	for deadline := time.Now().Add(5 * time.Second); ts.srv.mcp.isOpen(personSession); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the session outlived the person's key")
		}
	}
}

// isOpen reports whether session id is open.
func (m *mcpSessions) isOpen(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.byID[id]
	return ok
}

// docs/mcp.md names every tool and every argument a tool takes.
func TestMCPDocsNameEveryToolAndArgument(t *testing.T) {
	doc, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	w := newMCPWorld(t)
	for _, c := range []cred{apiKey(w.helperKey), apiKey(w.aliceKey)} {
		for tool, err := range w.ts.mcpSession(t, c).Tools(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(doc, []byte("`"+tool.Name+"`")) {
				t.Errorf("docs/mcp.md does not name the tool %s", tool.Name)
			}
			var schema struct {
				Properties map[string]any `json:"properties"`
			}
			remarshal(t, tool.InputSchema, &schema)
			for arg := range schema.Properties {
				if !bytes.Contains(doc, []byte("`"+arg+"`")) {
					t.Errorf("docs/mcp.md does not name %s's argument %s", tool.Name, arg)
				}
			}
		}
	}
}

// Each room the caller reads is a resource holding its recent transcript
// as the caller sees it, and the agent prompt frames a turn.
func TestMCPRoomResourcesAndPrompt(t *testing.T) {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	helper, helperKey := ts.agent(alice, "Helper")
	room := ts.room(t, helperKey, alice.ID)
	expect(t, ts.do(t, "POST", humanChatsPath+"/"+room+"/messages", apiKey(aliceKey),
		map[string]any{"message": map[string]any{"content": "@alice/helper for you", "mentions": []any{map[string]any{"id": helper.ID}}}}), 201, "")
	expect(t, ts.do(t, "POST", humanChatsPath+"/"+room+"/messages", apiKey(aliceKey),
		map[string]any{"message": map[string]any{"content": "@alice/helper and this", "mentions": []any{map[string]any{"id": helper.ID}}}}), 201, "")
	ctx := context.Background()
	uri := "chatd://rooms/" + room

	for _, c := range []struct {
		name string
		cred cred
	}{{"the agent", apiKey(helperKey)}, {"the person", apiKey(aliceKey)}} {
		t.Run(c.name, func(t *testing.T) {
			cs := ts.mcpSession(t, c.cred)
			listed, err := cs.ListResources(ctx, nil)
			if err != nil || len(listed.Resources) != 1 || listed.Resources[0].URI != uri {
				t.Fatalf("resources/list = %+v, %v; want the room", listed, err)
			}
			read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil || len(read.Contents) != 1 {
				t.Fatalf("resources/read: %+v, %v", read, err)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			// What each caller is shown is its own, for no shared cache.
			for what, scope := range map[string]string{"resources/list": listed.CacheScope, "resources/read": read.CacheScope, "tools/list": tools.CacheScope} {
				if scope != "private" {
					t.Errorf("%s: cacheScope %q, want private", what, scope)
				}
			}
			text := read.Contents[0].Text
			if !strings.Contains(text, "room_id: "+room) || strings.Index(text, "for you") > strings.Index(text, "and this") {
				t.Fatalf("the transcript, oldest first, lacks a message:\n%s", text)
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "chatd://rooms/" + nilID}); err == nil {
				t.Fatal("a room that does not exist was read")
			}
		})
	}

	_, bobKey := ts.user("bob")
	if _, err := ts.mcpSession(t, apiKey(bobKey)).ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
		t.Fatal("a stranger read the room")
	}

	cs := ts.mcpSession(t, apiKey(helperKey))
	prompt, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "chatd_agent", Arguments: map[string]string{"room_id": room}})
	if err != nil || len(prompt.Messages) != 1 {
		t.Fatalf("prompts/get: %+v, %v", prompt, err)
	}
	if text := prompt.Messages[0].Content.(*mcp.TextContent).Text; !strings.Contains(text, "wait_for_message") || !strings.Contains(text, room) {
		t.Fatalf("the prompt does not frame a turn in the room:\n%s", text)
	}
}
