package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// inboxKit: alice owns the agents poster and worker; poster made first and
// second, with worker in both.
type inboxKit struct {
	ts                   *testServer
	aliceKey             string
	poster, worker       *store.Agent
	posterKey, workerKey string
	first, second        string
}

func newInboxKit(t *testing.T, configure func(*Config)) *inboxKit {
	t.Helper()
	ts := newTestServerWith(t, configure)
	alice, aliceKey := ts.user("alice")
	k := &inboxKit{ts: ts, aliceKey: aliceKey}
	k.poster, k.posterKey = ts.agent(alice, "Poster")
	k.worker, k.workerKey = ts.agent(alice, "Worker")
	k.first = ts.room(t, k.posterKey, k.worker.ID)
	k.second = ts.room(t, k.posterKey, k.worker.ID)
	return k
}

// post sends worker a message in room and returns its id.
func (k *inboxKit) post(t testing.TB, room, content string) string {
	t.Helper()
	r := k.ts.do(t, "POST", agentChatsPath+"/"+room+"/messages", apiKey(k.posterKey),
		map[string]any{"message": map[string]any{"content": content, "mentions": []any{map[string]any{"id": k.worker.ID}}}})
	expect(t, r, 201, "")
	return r.data(t)["id"].(string)
}

// held sends a request in the background and returns the response when it
// comes, with how long it was held.
func (k *inboxKit) held(t *testing.T, path string) <-chan heldResponse {
	out := make(chan heldResponse, 1)
	go func() {
		started := time.Now()
		r := k.ts.do(t, "GET", path, apiKey(k.workerKey), nil)
		out <- heldResponse{r, time.Since(started)}
	}()
	time.Sleep(200 * time.Millisecond) // the request is held before the message exists
	return out
}

type heldResponse struct {
	*response
	after time.Duration
}

func TestLongPollNext(t *testing.T) {
	k := newInboxKit(t, nil)
	next := agentChatsPath + "/" + k.first + "/messages/next"

	t.Run("without wait it answers at once", func(t *testing.T) {
		expect(t, k.ts.doNoContent(t, "GET", next, apiKey(k.workerKey)), 204, "")
	})
	t.Run("a held request answers the message that arrives", func(t *testing.T) {
		answer := k.held(t, next+"?wait=20")
		id := k.post(t, k.first, "@alice/worker wake up")
		got := <-answer
		expect(t, got.response, 200, "")
		if got.data(t)["id"] != id || got.after > 10*time.Second {
			t.Fatalf("answered %v after %v, want message %s", got.data(t)["id"], got.after, id)
		}
		k.ts.do(t, "POST", agentChatsPath+"/"+k.first+"/messages/"+id+"/processing", apiKey(k.workerKey), nil)
		k.ts.do(t, "POST", agentChatsPath+"/"+k.first+"/messages/"+id+"/processed", apiKey(k.workerKey), nil)
	})
	t.Run("a message in another room does not answer it", func(t *testing.T) {
		started := time.Now()
		k.post(t, k.second, "@alice/worker elsewhere")
		expect(t, k.ts.doNoContent(t, "GET", next+"?wait=1", apiKey(k.workerKey)), 204, "")
		if waited := time.Since(started); waited < time.Second {
			t.Fatalf("answered 204 after %v, before the wait ended", waited)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		k.ts.run(t, []scenario{
			refusalCase("a wait over 60 s", apiKey(k.workerKey), "GET", next+"?wait=61", nil, 422, "validation_error", "/wait"),
			refusalCase("a wait that is no number", apiKey(k.workerKey), "GET", next+"?wait=soon", nil, 422, "validation_error", "/wait"),
			refusalCase("a negative wait", apiKey(k.workerKey), "GET", "/api/v1/agent/inbox/next?wait=-1", nil, 422, "validation_error", "/wait"),
			refusalCase("claim that is no boolean", apiKey(k.workerKey), "GET", "/api/v1/agent/inbox/next?claim=maybe", nil, 422, "validation_error", "/claim"),
		})
	})
}

// At shutdown, held requests answer 204 at once.
func TestLongPollEndsAtShutdown(t *testing.T) {
	k := newInboxKit(t, nil)
	answers := []<-chan heldResponse{
		k.held(t, agentChatsPath+"/"+k.first+"/messages/next?wait=60"),
		k.held(t, "/api/v1/agent/inbox/next?wait=60&claim=true"),
	}
	k.ts.srv.Close()
	for _, answer := range answers {
		select {
		case got := <-answer:
			if got.status != 204 {
				t.Fatalf("answered %d %s at shutdown, want 204", got.status, got.body)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a held request outlived the shutdown")
		}
	}
}

func TestInbox(t *testing.T) {
	k := newInboxKit(t, nil)
	one := k.post(t, k.first, "one")
	two := k.post(t, k.second, "two")
	three := k.post(t, k.first, "three")

	t.Run("lists every room's messages, oldest first, by cursor", func(t *testing.T) {
		got := k.ts.walkPages(t, "/api/v1/agent/inbox", "limit=2", apiKey(k.workerKey), func(r *response) string {
			return idLabels{one: "one", two: "two", three: "three"}.listed(t, r)
		})
		if got != "one,two|three" {
			t.Fatalf("pages %q", got)
		}
		if room := k.ts.do(t, "GET", "/api/v1/agent/inbox", apiKey(k.workerKey), nil).list(t)[1].(map[string]any)["chat_room_id"]; room != k.second {
			t.Fatalf("the second message's room is %v, want %s", room, k.second)
		}
	})
	t.Run("next reads without taking, claim takes", func(t *testing.T) {
		inboxNext := "/api/v1/agent/inbox/next"
		for range 2 {
			if got := k.ts.do(t, "GET", inboxNext, apiKey(k.workerKey), nil).data(t)["id"]; got != one {
				t.Fatalf("next = %v, want the oldest", got)
			}
		}
		for _, want := range []string{one, two, three} {
			got := k.ts.do(t, "GET", inboxNext+"?claim=true", apiKey(k.workerKey), nil).data(t)
			if got["id"] != want || got["metadata"].(map[string]any)["status"] != "processing" {
				t.Fatalf("claimed %v (%v), want %s, processing", got["id"], got["metadata"].(map[string]any)["status"], want)
			}
		}
		expect(t, k.ts.doNoContent(t, "GET", inboxNext+"?claim=true", apiKey(k.workerKey)), 204, "")
		if got := k.ts.do(t, "GET", inboxNext, apiKey(k.workerKey), nil).data(t)["id"]; got != one {
			t.Fatalf("next after the claims = %v: claimed messages stay in the inbox until processed", got)
		}
	})
}

// Eight workers of one agent claim 1,000 messages in 20 rooms at once;
// each message is taken exactly once.
func TestInboxClaimRace(t *testing.T) {
	k := newInboxKit(t, func(c *Config) { c.DisableRateLimit = true })
	rooms := []string{k.first, k.second}
	for len(rooms) < 20 {
		rooms = append(rooms, k.ts.room(t, k.posterKey, k.worker.ID))
	}
	ctx := context.Background()
	poster := store.AgentActor(k.poster)
	posted := map[string]bool{}
	for i := range 1000 {
		m, err := k.ts.db.SendText(ctx, poster, rooms[i%len(rooms)], store.TextInput{Content: fmt.Sprint("task ", i),
			Mentions: []store.MentionInput{{ID: &k.worker.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		posted[m.ID] = true
	}
	k.claimers(t, 8, "/api/v1/agent/inbox/next?claim=true").wait(t, posted)
}

// claimers is workers of one agent, each claiming by path until it
// answers 204, and what they took.
type claimers struct {
	workers sync.WaitGroup
	mu      sync.Mutex
	taken   map[string]int
}

// claimers starts n workers claiming by path.
func (k *inboxKit) claimers(t *testing.T, n int, path string) *claimers {
	c := &claimers{taken: map[string]int{}}
	for range n {
		c.workers.Go(func() {
			for {
				r, _ := k.ts.send(t, "GET", path, apiKey(k.workerKey), nil)
				if r.status == 204 {
					return
				}
				if r.status != 200 {
					t.Errorf("claim: %d %s", r.status, r.body)
					return
				}
				c.mu.Lock()
				c.taken[r.data(t)["id"].(string)]++
				c.mu.Unlock()
			}
		})
	}
	return c
}

// wait waits for the workers to stop, and checks that they took every
// message posted, each exactly once.
func (c *claimers) wait(t *testing.T, posted map[string]bool) {
	t.Helper()
	c.workers.Wait()
	for id, n := range c.taken {
		if n != 1 || !posted[id] {
			t.Errorf("%s taken %d times", id, n)
		}
	}
	if len(c.taken) != len(posted) {
		t.Fatalf("%d of %d messages taken", len(c.taken), len(posted))
	}
}
