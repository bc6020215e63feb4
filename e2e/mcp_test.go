package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/apitest"
	"github.com/gobwas/ws/wsutil"
)

// An agent built on the official TypeScript MCP SDK (mcp_agent.mjs) takes
// a turn over /mcp alone: a person mentions it, and the person sees its
// thought, its answer and the message processed, live on their socket and
// in the room's history.
func TestMCPTypeScriptAgentTurn(t *testing.T) {
	node := nodeWith(t, "node_modules/@modelcontextprotocol/sdk",
		"e2e/node_modules/@modelcontextprotocol/sdk is missing: run npm ci in e2e/ to run the MCP client test")
	turn := startMCPTurn(t, node)
	turn.agentIsReady(t)
	turn.agentAnswers(t)
	turn.personSawItLive(t)
	turn.historyHoldsIt(t)
	turn.srv.stop(t)
}

// mcpTurn is a server with alice, her agent helper in a room with her,
// alice watching the room on her socket, and mcp_agent.mjs running as
// helper; then what each step saw.
type mcpTurn struct {
	srv             *serverProc
	base, room      string
	alice, helper   created
	watching        roomSocket
	agent           *exec.Cmd
	out             *lines
	exited          <-chan struct{}
	question, asked string
	thought, reply  map[string]any
}

func startMCPTurn(t *testing.T, node string) *mcpTurn {
	db, alice := newDatabaseWithAlice(t)
	k := &mcpTurn{alice: alice, helper: registerAgent(t, db, "--name", "Helper", "--description", "Answers questions")}
	addr := apitest.FreeAddr(t)
	k.base = "http://" + addr
	k.srv = startServer(t, db, "--addr", addr)
	k.room = dataObject(t, k.base, apiKey(alice.APIKey), "POST", "/api/v1/me/chats", map[string]any{})["id"].(string)
	dataObject(t, k.base, apiKey(alice.APIKey), "POST", "/api/v1/me/chats/"+k.room+"/participants",
		map[string]any{"participant": map[string]any{"participant_id": k.helper.ID}})
	k.watching = joinRoomSocket(t, addr, alice.APIKey, k.room)

	k.agent = exec.Command(node, "mcp_agent.mjs")
	k.agent.Env = append(os.Environ(), "CHATD_URL="+k.base, "AGENT_KEY="+k.helper.APIKey)
	stdout, _ := k.agent.StdoutPipe()
	k.agent.Stderr = os.Stderr
	k.out = &lines{ch: make(chan map[string]any, 100)}
	k.exited = start(t, k.agent)
	go k.out.read(stdout)
	return k
}

// step waits for the agent to print a step.
func (k *mcpTurn) step(t *testing.T, name string) map[string]any {
	t.Helper()
	return k.out.await(t, name, func(e map[string]any) bool { return e["step"] == name })
}

// agentIsReady: the agent lists its tools, knows who it is, and waits.
func (k *mcpTurn) agentIsReady(t *testing.T) {
	tools := k.step(t, "tools")
	for _, want := range []string{"wait_for_message", "post_event", "send_message", "mark_processed"} {
		if !slices.Contains(tools["names"].([]any), any(want)) {
			t.Fatalf("the agent's tools %v lack %s", tools["names"], want)
		}
	}
	if me := k.step(t, "whoami"); me["handle"] != k.helper.Handle {
		t.Fatalf("whoami = %v, want %s", me, k.helper.Handle)
	}
	// Posted once the wait is under way, so that the post wakes it rather
	// than being found by it.
	k.step(t, "waiting")
	time.Sleep(200 * time.Millisecond)
}

// agentAnswers: alice asks; the agent takes the message, thinks, answers
// her with a mention, marks it processed and ends its session.
func (k *mcpTurn) agentAnswers(t *testing.T) {
	k.question = "@" + k.helper.Handle + " what is 2+2?"
	k.asked = dataObject(t, k.base, apiKey(k.alice.APIKey), "POST", "/api/v1/me/chats/"+k.room+"/messages",
		map[string]any{"message": map[string]any{"content": k.question, "mentions": []map[string]string{{"id": k.helper.ID}}}})["id"].(string)
	taken := k.step(t, "message")
	if taken["id"] != k.asked || taken["room"] != k.room || taken["content"] != k.question || taken["status"] != "processing" {
		t.Fatalf("wait_for_message gave %v, want message %s of room %s, processing", taken, k.asked, k.room)
	}
	if s := k.step(t, "sender"); s["handle"] != "alice" {
		t.Fatalf("the sender is %v, want alice", s)
	}
	k.thought = k.step(t, "thought")
	if k.reply = k.step(t, "replied"); k.reply["success"] != true {
		t.Fatalf("send_message gave %v", k.reply)
	}
	if p := k.step(t, "processed"); p["status"] != "processed" {
		t.Fatalf("mark_processed gave %v", p)
	}
	k.step(t, "closed")
	select {
	case <-k.exited:
		if code := k.agent.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("mcp_agent.mjs exited %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("mcp_agent.mjs did not exit after closing its session")
	}
}

// personSawItLive: alice's socket pushed the thought, the answer and the
// processed delivery, as the web app shows them.
func (k *mcpTurn) personSawItLive(t *testing.T) {
	k.watching.await(t, "event_created", func(p map[string]any) bool {
		return p["id"] == k.thought["id"] && p["message_type"] == "thought" && p["content"] == "Answering alice."
	})
	k.watching.await(t, "message_created", func(p map[string]any) bool {
		return p["id"] == k.reply["id"] && p["sender_id"] == k.helper.ID && mentions(p["metadata"].(map[string]any), k.alice.ID)
	})
	k.watching.await(t, "message_updated", func(p map[string]any) bool {
		return p["id"] == k.asked && deliveryStatus(p, k.helper.ID) == "processed"
	})
}

// historyHoldsIt: the room's history holds the question (processed for
// the agent), the thought and the answer.
func (k *mcpTurn) historyHoldsIt(t *testing.T) {
	byID := map[string]map[string]any{}
	for _, m := range dataArray(t, k.base, apiKey(k.alice.APIKey), "/api/v1/me/chats/"+k.room+"/messages") {
		m := m.(map[string]any)
		byID[m["id"].(string)] = m
	}
	if len(byID) != 3 {
		t.Fatalf("the room holds %d messages, want the question, the thought and the answer: %v", len(byID), byID)
	}
	if got := deliveryStatus(byID[k.asked], k.helper.ID); got != "processed" {
		t.Fatalf("the question is %v for the agent, want processed", got)
	}
	if m := byID[k.thought["id"].(string)]; m["message_type"] != "thought" || m["sender_id"] != k.helper.ID {
		t.Fatalf("the thought reads %v", m)
	}
	if m := byID[k.reply["id"].(string)]; m["content"] != "@alice you said: "+k.question || !mentions(m["metadata"].(map[string]any), k.alice.ID) {
		t.Fatalf("the answer reads %v", m)
	}
}

// deliveryStatus is a text message's delivery status for one agent.
func deliveryStatus(msg map[string]any, agentID string) any {
	meta, _ := msg["metadata"].(map[string]any)
	statuses, _ := meta["delivery_status"].(map[string]any)
	d, _ := statuses[agentID].(map[string]any)
	return d["status"]
}

// roomSocket is a person's real-time socket joined to one room, as the web
// app joins it: its pushes, as they arrive, each as {"push": event,
// "payload": …}.
type roomSocket struct{ *lines }

// joinRoomSocket connects to the socket with the person's key and joins
// the room's topic.
func joinRoomSocket(t *testing.T, addr, key, room string) roomSocket {
	t.Helper()
	conn, err := dialWebSocket("ws://"+addr+"/api/v1/socket/websocket?vsn=2.0.0", http.Header{"X-Api-Key": {key}})
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	topic := "chat_room:" + room
	join, _ := json.Marshal([]any{"1", "1", topic, "phx_join", map[string]any{}})
	if err := wsutil.WriteClientText(conn, join); err != nil {
		t.Fatalf("socket: %v", err)
	}
	s := roomSocket{&lines{ch: make(chan map[string]any, 100)}}
	go s.read(conn, topic)
	s.await(t, "phx_reply", func(p map[string]any) bool { return p["status"] == "ok" })
	return s
}

// read passes on the frames of topic until the connection closes.
func (s roomSocket) read(rw io.ReadWriter, topic string) {
	defer close(s.ch)
	for {
		data, err := wsutil.ReadServerText(rw)
		if err != nil {
			return
		}
		var frame [5]json.RawMessage
		var at, event string
		var payload map[string]any
		if json.Unmarshal(data, &frame) != nil || json.Unmarshal(frame[2], &at) != nil ||
			json.Unmarshal(frame[3], &event) != nil || json.Unmarshal(frame[4], &payload) != nil || at != topic {
			continue
		}
		s.ch <- map[string]any{"push": event, "payload": payload}
	}
}

// await waits for a push of event whose payload satisfies match (pushes
// seen before count too).
func (s roomSocket) await(t *testing.T, event string, match func(map[string]any) bool) {
	t.Helper()
	s.lines.await(t, event+" on the socket", func(e map[string]any) bool {
		return e["push"] == event && match(e["payload"].(map[string]any))
	})
}
