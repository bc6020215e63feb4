package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// claimKit: alice owns the agents poster and worker; poster made the rooms
// first and second, both with worker in them.
type claimKit struct {
	db             *DB
	poster, worker Actor
	first, second  string
}

func newClaimKit(t *testing.T, opts Options) *claimKit {
	t.Helper()
	db := openTestDB(t, opts)
	alice, _ := mustUser(t, db, "alice")
	poster, _ := mustAgent(t, db, alice, "Poster")
	worker, _ := mustAgent(t, db, alice, "Worker")
	k := &claimKit{db: db, poster: AgentActor(poster), worker: AgentActor(worker)}
	k.first, k.second = k.room(t), k.room(t)
	return k
}

// room is a new room of poster's with worker in it.
func (k *claimKit) room(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	room, err := k.db.CreateRoom(ctx, k.poster, NewRoom{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.db.AddParticipant(ctx, k.poster, room.ID, k.worker.ID, ""); err != nil {
		t.Fatal(err)
	}
	return room.ID
}

// post sends worker a message in room and returns its id.
func (k *claimKit) post(t *testing.T, room, content string) string {
	t.Helper()
	m, err := k.db.SendText(context.Background(), k.poster, room, TextInput{Content: content,
		Mentions: []MentionInput{{ID: &k.worker.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// claim claims in room ("" for any) and returns the message's id, or "" for
// none.
func (k *claimKit) claim(t *testing.T, room string) string {
	t.Helper()
	m, err := k.db.ClaimMessage(context.Background(), k.worker, room)
	if err != nil {
		t.Fatalf("claim in %q: %v", room, err)
	}
	if m == nil {
		return ""
	}
	if len(m.Deliveries) != 1 || m.Deliveries[0].Status != "processing" || m.Deliveries[0].AgentID != k.worker.ID {
		t.Fatalf("claimed %q with deliveries %+v, want the worker's, processing", m.ID, m.Deliveries)
	}
	return m.ID
}

func TestClaimMessageTakesTheOldestFirst(t *testing.T) {
	k := newClaimKit(t, Options{})
	one := k.post(t, k.first, "one")
	two := k.post(t, k.second, "two")
	three := k.post(t, k.first, "three")

	t.Run("in one room", func(t *testing.T) {
		if got := k.claim(t, k.second); got != two {
			t.Fatalf("claimed %q in the second room, want two", got)
		}
		if got := k.claim(t, k.second); got != "" {
			t.Fatalf("claimed %q again in the second room, want nothing", got)
		}
	})
	t.Run("in any room", func(t *testing.T) {
		for _, want := range []string{one, three, ""} {
			if got := k.claim(t, ""); got != want {
				t.Fatalf("claimed %q, want %q", got, want)
			}
		}
	})
}

func TestClaimMessageLeavesWhatIsNotForTaking(t *testing.T) {
	k := newClaimKit(t, Options{})
	ctx := context.Background()
	failed := k.post(t, k.first, "fails")
	if k.claim(t, k.first) == "" {
		t.Fatal("nothing to claim")
	}
	if _, err := k.db.MarkFailed(ctx, k.worker, k.first, failed, "no luck"); err != nil {
		t.Fatal(err)
	}
	if got := k.claim(t, ""); got != "" {
		t.Fatalf("claimed %q after its failure, want nothing", got)
	}

	k.post(t, k.second, "in a room it leaves")
	if _, err := k.db.RemoveParticipant(ctx, k.poster, k.second, k.worker.ID); err != nil {
		t.Fatal(err)
	}
	if got := k.claim(t, ""); got != "" {
		t.Fatalf("claimed %q from a room it left, want nothing", got)
	}
	_, err := k.db.ClaimMessage(ctx, k.worker, k.second)
	wantCode(t, err, CodeNotFound)
	_, err = k.db.ClaimMessage(ctx, k.worker, "not-an-id")
	wantCode(t, err, CodeNotFound)
}

func TestClaimMessageRetakesAnAbandonedAttempt(t *testing.T) {
	// Long enough that a loaded machine makes the second claim well
	// within it.
	const timeout = 2 * time.Second
	k := newClaimKit(t, Options{AttemptTimeout: timeout})
	k.post(t, k.first, "slow")
	claimed := time.Now()
	k.claim(t, "")
	if got := k.claim(t, ""); got != "" && time.Since(claimed) < timeout {
		t.Fatalf("claimed %q while its attempt is live, want nothing", got)
	}
	time.Sleep(timeout + 100*time.Millisecond)
	m, err := k.db.ClaimMessage(context.Background(), k.worker, "")
	if err != nil || m == nil {
		t.Fatalf("claim after the attempt timeout = %v, %v; want the message", m, err)
	}
	if d := m.Deliveries[0]; d.CurrentAttempt != 2 {
		t.Fatalf("attempt %d, want 2 (the first abandoned)", d.CurrentAttempt)
	}
}

// Workers of one agent claiming at once never take the same message.
func TestClaimMessageTakesEachMessageOnce(t *testing.T) {
	k := newClaimKit(t, Options{})
	rooms := []string{k.first, k.second, k.room(t), k.room(t)}
	const messages, workers = 200, 8
	want := map[string]bool{}
	for i := range messages {
		want[k.post(t, rooms[i%len(rooms)], fmt.Sprintf("message %d", i))] = true
	}
	var mu sync.Mutex
	taken := map[string]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				m, err := k.db.ClaimMessage(context.Background(), k.worker, "")
				if err != nil {
					t.Error(err)
					return
				}
				if m == nil {
					return
				}
				mu.Lock()
				taken[m.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for id, n := range taken {
		if n != 1 || !want[id] {
			t.Errorf("%s taken %d times", id, n)
		}
	}
	if len(taken) != messages {
		t.Fatalf("%d messages taken, want %d", len(taken), messages)
	}
}
