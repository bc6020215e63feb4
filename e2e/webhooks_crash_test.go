package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// webhookReceiver records what a running chatd sends it: while held, each
// request waits (as a receiver that hangs would) until its connection ends;
// once released, each is answered 204.
type webhookReceiver struct {
	mu       sync.Mutex
	held     bool
	arrivals []webhookArrival // every request, in arrival order
}

type webhookArrival struct {
	id, content string
	accepted    bool
}

func (h *webhookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var payload struct {
		Data struct {
			Message struct{ Content string }
		}
	}
	json.Unmarshal(body, &payload)
	words := strings.Fields(payload.Data.Message.Content)
	a := webhookArrival{id: r.Header.Get("webhook-id")}
	if len(words) > 0 {
		a.content = words[len(words)-1]
	}
	h.mu.Lock()
	held := h.held
	a.accepted = !held
	h.arrivals = append(h.arrivals, a)
	h.mu.Unlock()
	if held {
		<-r.Context().Done() // the server is killed mid-request
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *webhookReceiver) seen() []webhookArrival {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]webhookArrival(nil), h.arrivals...)
}

// A server killed with SIGKILL while a webhook request is in flight loses
// no message: after a restart on the same file, the request cut short is
// made again, with the same webhook-id, and every message follows in the
// order it was sent.
func TestWebhookQueueSurvivesSIGKILL(t *testing.T) {
	skipIfShort(t, "kills and restarts a server")
	db, alice := newDatabaseWithAlice(t)
	helper := registerAgent(t, db, "--owner", "alice", "--name", "Helper", "--description", "Answers questions")
	receiver := &webhookReceiver{held: true}
	hs := httptest.NewServer(receiver)
	defer hs.Close()

	srv := startServer(t, db)
	room := srv.createRoom(t, alice.APIKey, helper.ID)
	status, body := srv.call(t, "POST", "/api/v1/agent/webhooks", helper.APIKey,
		map[string]any{"webhook": map[string]any{"url": hs.URL + "/hook"}})
	hook, ok := createdID(body)
	if status != 201 || !ok {
		t.Fatalf("register the webhook: %d %s", status, body)
	}
	for _, content := range []string{"k1", "k2", "k3"} {
		if status, body := srv.call(t, "POST", "/api/v1/me/chats/"+room+"/messages", alice.APIKey, map[string]any{
			"message": map[string]any{"content": content, "mentions": []any{map[string]any{"id": helper.ID}}}}); status != 201 {
			t.Fatalf("send %s: %d %s", content, status, body)
		}
	}
	waitUntil(t, "the first request to arrive", func() bool { return len(receiver.seen()) == 1 })
	srv.kill(t)
	cut := receiver.seen()[0]

	receiver.mu.Lock()
	receiver.held = false
	receiver.mu.Unlock()
	srv = startServer(t, db)
	waitUntil(t, "every message delivered after the restart", func() bool {
		n := 0
		for _, a := range receiver.seen() {
			if a.accepted {
				n++
			}
		}
		return n == 3
	})
	seen := receiver.seen()
	var order []string
	for _, a := range seen {
		order = append(order, a.content)
	}
	if got := strings.Join(order, ","); got != "k1,k1,k2,k3" {
		t.Fatalf("requests %s, want k1 cut by the kill, then k1, k2, k3", got)
	}
	if seen[1].id != cut.id || seen[2].id == cut.id {
		t.Fatalf("webhook-ids %s, then %s %s: the request made again must keep its id", cut.id, seen[1].id, seen[2].id)
	}
	waitUntil(t, "the log to show every delivery", func() bool {
		status, body := srv.call(t, "GET", "/api/v1/agent/webhooks/"+hook+"/deliveries", helper.APIKey, nil)
		return status == 200 && strings.Count(string(body), `"status":"delivered"`) == 3
	})
}

// waitUntil polls cond until it holds, failing after a generous deadline.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
