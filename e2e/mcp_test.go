package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws/wsutil"
)

// An agent built on the official TypeScript MCP SDK (mcp_agent.mjs) takes
// a turn over /mcp alone: a person mentions it, and the person sees its
// thought, its answer and the message processed, live on their socket and
// in the room's history.
func TestMCPTypeScriptAgentTurn(t *testing.T) {
	node := nodeWith(t, "node_modules/@modelcontextprotocol/sdk",
		"e2e/node_modules/@modelcontextprotocol/sdk is missing: run npm ci in e2e/ to run the MCP client test")
	db, alice := newDatabaseWithAlice(t)
	helper := registerAgent(t, db, "--name", "Helper")
	addr := freeAddr(t)
	base := "http://" + addr
	srv := startServer(t, db, "--addr", addr)

	room := dataObject(t, base, apiKey(alice.APIKey), "POST", "/api/v1/me/chats", map[string]any{})["id"].(string)
	dataObject(t, base, apiKey(alice.APIKey), "POST", "/api/v1/me/chats/"+room+"/participants",
		map[string]any{"participant": map[string]any{"participant_id": helper.ID}})
	watching := joinRoomSocket(t, addr, alice.APIKey, room)

	agent := exec.Command(node, "mcp_agent.mjs")
	agent.Env = append(os.Environ(), "CHATD_URL="+base, "AGENT_KEY="+helper.APIKey)
	stdout, _ := agent.StdoutPipe()
	agent.Stderr = os.Stderr
	out := &lines{ch: make(chan map[string]any, 100)}
	exited := start(t, agent)
	go out.read(stdout)

	tools := out.await(t, "the tool list", func(e map[string]any) bool { return e["step"] == "tools" })
	for _, want := range []string{"wait_for_message", "post_event", "send_message", "mark_processed"} {
		if !slices.Contains(tools["names"].([]any), any(want)) {
			t.Fatalf("the agent's tools %v lack %s", tools["names"], want)
		}
	}
	if me := out.await(t, "whoami", func(e map[string]any) bool { return e["step"] == "whoami" }); me["handle"] != helper.Handle {
		t.Fatalf("whoami = %v, want %s", me, helper.Handle)
	}
	// Posted once the wait is under way, so that the post wakes it rather
	// than being found by it.
	out.await(t, "the wait", func(e map[string]any) bool { return e["step"] == "waiting" })
	time.Sleep(200 * time.Millisecond)
	question := "@" + helper.Handle + " what is 2+2?"
	asked := dataObject(t, base, apiKey(alice.APIKey), "POST", "/api/v1/me/chats/"+room+"/messages",
		map[string]any{"message": map[string]any{"content": question, "mentions": []map[string]string{{"id": helper.ID}}}})["id"].(string)

	taken := out.await(t, "the message taken", func(e map[string]any) bool { return e["step"] == "message" })
	if taken["id"] != asked || taken["room"] != room || taken["content"] != question || taken["status"] != "processing" {
		t.Fatalf("wait_for_message gave %v, want message %s of room %s, processing", taken, asked, room)
	}
	if s := out.await(t, "the sender", func(e map[string]any) bool { return e["step"] == "sender" }); s["handle"] != "alice" {
		t.Fatalf("the sender is %v, want alice", s)
	}
	thought := out.await(t, "the thought", func(e map[string]any) bool { return e["step"] == "thought" })
	reply := out.await(t, "the reply", func(e map[string]any) bool { return e["step"] == "replied" })
	if reply["success"] != true {
		t.Fatalf("send_message gave %v", reply)
	}
	if p := out.await(t, "processed", func(e map[string]any) bool { return e["step"] == "processed" }); p["status"] != "processed" {
		t.Fatalf("mark_processed gave %v", p)
	}
	out.await(t, "the session's end", func(e map[string]any) bool { return e["step"] == "closed" })
	select {
	case <-exited:
		if code := agent.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("mcp_agent.mjs exited %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("mcp_agent.mjs did not exit after closing its session")
	}

	// Live, as the web app shows it.
	watching.await(t, "event_created", func(p map[string]any) bool {
		return p["id"] == thought["id"] && p["message_type"] == "thought" && p["content"] == "Answering alice."
	})
	watching.await(t, "message_created", func(p map[string]any) bool {
		return p["id"] == reply["id"] && p["sender_id"] == helper.ID && mentions(p["metadata"].(map[string]any), alice.ID)
	})
	watching.await(t, "message_updated", func(p map[string]any) bool {
		return p["id"] == asked && deliveryStatus(p, helper.ID) == "processed"
	})

	// And in the room's history.
	byID := map[string]map[string]any{}
	for _, m := range dataArray(t, base, apiKey(alice.APIKey), "/api/v1/me/chats/"+room+"/messages") {
		m := m.(map[string]any)
		byID[m["id"].(string)] = m
	}
	if len(byID) != 3 {
		t.Fatalf("the room holds %d messages, want the question, the thought and the answer: %v", len(byID), byID)
	}
	if got := deliveryStatus(byID[asked], helper.ID); got != "processed" {
		t.Fatalf("the question is %v for the agent, want processed", got)
	}
	if m := byID[thought["id"].(string)]; m["message_type"] != "thought" || m["sender_id"] != helper.ID {
		t.Fatalf("the thought reads %v", m)
	}
	if m := byID[reply["id"].(string)]; m["content"] != "@alice you said: "+question || !mentions(m["metadata"].(map[string]any), alice.ID) {
		t.Fatalf("the answer reads %v", m)
	}
	srv.stop(t)
}

// deliveryStatus is a text message's delivery status for one agent.
func deliveryStatus(msg map[string]any, agentID string) any {
	meta, _ := msg["metadata"].(map[string]any)
	statuses, _ := meta["delivery_status"].(map[string]any)
	d, _ := statuses[agentID].(map[string]any)
	return d["status"]
}

// roomSocket is a person's real-time socket joined to one room, as the web
// app joins it: its pushes, as they arrive.
type roomSocket struct {
	pushes chan roomPush
	seen   []roomPush
}

type roomPush struct {
	event   string
	payload map[string]any
}

// joinRoomSocket connects to the socket with the person's key and joins
// the room's topic.
func joinRoomSocket(t *testing.T, addr, key, room string) *roomSocket {
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
	s := &roomSocket{pushes: make(chan roomPush, 100)}
	go s.read(conn, topic)
	s.await(t, "phx_reply", func(p map[string]any) bool { return p["status"] == "ok" })
	return s
}

// read passes on the frames of topic until the connection closes.
func (s *roomSocket) read(rw io.ReadWriter, topic string) {
	defer close(s.pushes)
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
		s.pushes <- roomPush{event, payload}
	}
}

// await waits for a push of event satisfying match (pushes seen before
// count too).
func (s *roomSocket) await(t *testing.T, event string, match func(map[string]any) bool) {
	t.Helper()
	for _, p := range s.seen {
		if p.event == event && match(p.payload) {
			return
		}
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case p, ok := <-s.pushes:
			if !ok {
				t.Fatalf("the socket closed before %s", event)
			}
			s.seen = append(s.seen, p)
			if p.event == event && match(p.payload) {
				return
			}
		case <-timeout:
			t.Fatalf("no %s on the socket; it pushed %s", event, s.describe())
		}
	}
}

func (s *roomSocket) describe() string {
	var b strings.Builder
	for _, p := range s.seen {
		fmt.Fprintf(&b, "\n  %s %v", p.event, p.payload)
	}
	return b.String()
}
