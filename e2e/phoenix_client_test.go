package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/apitest"
	"github.com/chatd/chatd/store"
)

func TestPhoenixJSAgentAcrossARestart(t *testing.T) {
	node := nodeWith(t, "node_modules/phoenix", "e2e/node_modules is missing: run npm ci in e2e/ to run the JS client test")
	db, alice := newDatabaseWithAlice(t)
	poster := registerAgent(t, db, "--name", "Poster", "--description", "Posts messages for the test")
	worker := registerAgent(t, db, "--name", "Worker", "--description", "Works through its messages")

	// The server comes back on the same address, where the client
	// reconnects.
	addr := apitest.FreeAddr(t)
	base := "http://" + addr
	srv := startServer(t, db, "--addr", addr)

	out := startPhoenixAgent(t, node, base, worker)
	out.await(t, "agent_control joined", func(e map[string]any) bool {
		return e["event"] == "joined" && e["topic"] == "agent_control:"+worker.ID
	})
	out.await(t, "agent_rooms joined", func(e map[string]any) bool {
		return e["event"] == "joined" && e["topic"] == "agent_rooms:"+worker.ID
	})

	// The poster opens a room with the worker in it: room_added, then the
	// worker joins the room.
	room := dataObject(t, base, apiKey(poster.APIKey), "POST", "/api/v1/agent/chats", map[string]any{})["id"].(string)
	dataObject(t, base, apiKey(poster.APIKey), "POST", "/api/v1/agent/chats/"+room+"/participants",
		map[string]any{"participant": map[string]any{"participant_id": worker.ID}})
	added := out.await(t, "room_added", func(e map[string]any) bool { return e["event"] == "room_added" && e["id"] == room })
	if _, ok := added["status"].(string); !ok {
		t.Fatalf("room_added without a string status: %v", added)
	}
	out.await(t, "chat_room joined", func(e map[string]any) bool { return e["event"] == "joined" && e["topic"] == "chat_room:"+room })

	// A live message: pushed, worked on, processed.
	first := dataObject(t, base, apiKey(poster.APIKey), "POST", "/api/v1/agent/chats/"+room+"/messages",
		map[string]any{"message": map[string]any{"content": "first task", "mentions": []map[string]string{{"id": worker.ID}}}})["id"].(string)
	out.await(t, "message_created", func(e map[string]any) bool { return e["event"] == "message_created" && e["id"] == first })
	out.await(t, "first processed", func(e map[string]any) bool { return e["event"] == "processed" && e["id"] == first })

	// The server restarts: clients are told (1012) and reconnect. A message
	// sent while it was down (written to the database directly) is not
	// pushed; the worker catches up with /next when it rejoins.
	srv.stop(t)
	out.await(t, "close 1012", func(e map[string]any) bool { return e["event"] == "close" && e["code"] == float64(1012) })
	second := postWhileDown(t, db, poster.APIKey, room, worker.ID)
	srv = startServer(t, db, "--addr", addr)
	out.await(t, "reopened", func(e map[string]any) bool { return e["event"] == "open" })
	got := out.await(t, "second processed", func(e map[string]any) bool { return e["event"] == "processed" && e["id"] == second })
	if got["via"] != "next" {
		t.Fatalf("the message sent while the server was down arrived via %v, want next", got["via"])
	}

	// What the worker did is what a person reading the room sees.
	msgs := dataArray(t, base, apiKey(alice.APIKey), "/api/v1/me/chats/"+room+"/messages")
	for _, m := range msgs {
		msg := m.(map[string]any)
		status := msg["metadata"].(map[string]any)["delivery_status"].(map[string]any)[worker.ID].(map[string]any)["status"]
		if status != "processed" {
			t.Fatalf("message %v is %v, want processed", msg["id"], status)
		}
	}
	srv.stop(t)
}

// startPhoenixAgent runs agent.mjs, an agent on the phoenix JS client, as
// worker against base, and returns the JSON lines it prints. It is killed
// when the test ends.
func startPhoenixAgent(t *testing.T, node, base string, worker created) *lines {
	t.Helper()
	agent := exec.Command(node, "agent.mjs")
	agent.Env = append(os.Environ(), "CHATD_URL="+base, "AGENT_KEY="+worker.APIKey, "AGENT_ID="+worker.ID)
	out := &lines{ch: make(chan map[string]any, 1000)}
	stdout, _ := agent.StdoutPipe()
	agent.Stderr = os.Stderr
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	go out.read(stdout)
	return out
}

// lines collects JSON objects as a client prints or receives them: the
// lines an agent prints, or a socket's pushes.
type lines struct {
	ch   chan map[string]any
	seen []map[string]any
}

func (l *lines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			l.ch <- e
		}
	}
	close(l.ch)
}

// await waits for a line satisfying match (lines seen before count too).
func (l *lines) await(t *testing.T, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	for _, e := range l.seen {
		if match(e) {
			return e
		}
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-l.ch:
			if !ok {
				t.Fatalf("the stream ended before %s", what)
			}
			l.seen = append(l.seen, e)
			if match(e) {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s; there came %v", what, l.seen)
		}
	}
}

// postWhileDown writes a message straight into the database of a stopped
// server, as the poster agent.
func postWhileDown(t *testing.T, db, posterKey, room, workerID string) string {
	t.Helper()
	schema, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(db, store.Options{Schema: string(schema)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	p, err := st.Authenticate(ctx, posterKey)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.SendText(ctx, p.Actor(), room, store.TextInput{Content: "sent while the server was down",
		Mentions: []store.MentionInput{{ID: &workerID}}})
	if err != nil {
		t.Fatal(err)
	}
	return msg.ID
}
