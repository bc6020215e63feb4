package store

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
)

// twoNodes opens two stores on one PostgreSQL database, as two chatd nodes
// do.
func twoNodes(t *testing.T) (a, b *DB) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	var nodes [2]*DB
	for i := range nodes {
		db, err := openPostgresStore(t, url)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = db
	}
	return nodes[0], nodes[1]
}

// changesJSON is what a recorder heard, as the payloads are built from it.
func (r *recorder) changesJSON(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.changes {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// Every change a write publishes on one node is published on the other
// too, the same in every field, in the order they were made, and only
// once; a write that was refused publishes nothing anywhere.
func TestChangesOfOneNodeArePublishedOnTheOther(t *testing.T) {
	a, b := twoNodes(t)
	ctx := context.Background()
	bob, _ := mustUser(t, a, "bob")
	onA, onB := record(a), record(b)
	alice, _ := mustUser(t, a, "alice")
	helper, _ := mustAgent(t, a, alice, "Helper")
	room, err := a.CreateRoom(ctx, UserActor(alice), NewRoom{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddParticipant(ctx, UserActor(alice), room.ID, helper.ID, ""); err != nil {
		t.Fatal(err)
	}
	id := helper.ID
	msg, err := a.SendText(ctx, UserActor(alice), room.ID, TextInput{Content: "Plan the launch", Mentions: []MentionInput{{ID: &id}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.React(ctx, UserActor(alice), room.ID, msg.ID, "👍"); err != nil {
		t.Fatal(err)
	}
	subject := "Draft the plan"
	if _, err := a.CreateTask(ctx, UserActor(alice), room.ID, NewTask{Subject: &subject}); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteRoom(ctx, UserActor(bob), room.ID); err == nil {
		t.Fatal("someone outside the room deleted it")
	}

	want := onA.changesJSON(t)
	if len(want) < 6 {
		t.Fatalf("node A published only %d changes", len(want))
	}
	waitFor(t, "node B to publish node A's changes", func() bool { return len(onB.changesJSON(t)) >= len(want) })
	if got := onB.changesJSON(t); !slices.Equal(got, want) {
		t.Fatalf("node B published\n%v\nnode A\n%v", got, want)
	}
	// Node B's own write is published once on each node, not echoed back.
	onA.reset()
	onB.reset()
	if _, err := b.CreateRoom(ctx, UserActor(bob), NewRoom{}); err != nil {
		t.Fatal(err)
	}
	_, _ = mustAgent(t, b, alice, "Second")
	waitFor(t, "node A to publish node B's changes", func() bool { return len(onA.kinds()) >= len(onB.kinds()) })
	if got, want := onA.changesJSON(t), onB.changesJSON(t); !slices.Equal(got, want) {
		t.Fatalf("node A published\n%v\nnode B\n%v", got, want)
	}
}

// A key rotated on one node stops working on the other, whose cache had
// it, and the other node is told that credentials ended.
func TestCredentialsEndedOnOneNodeEndOnTheOther(t *testing.T) {
	a, b := twoNodes(t)
	ctx := context.Background()
	alice, agent, oldKey := agentInUse(t, a)
	if _, err := b.Authenticate(ctx, oldKey); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AuthenticateCached(oldKey); err != nil {
		t.Fatalf("node B did not cache the key: %v", err)
	}
	onB := record(b)
	if _, _, err := a.RotateAgentKey(ctx, alice, agent.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node B to hear that credentials ended", func() bool {
		return slices.Contains(onB.kinds(), string(CredentialsEnded))
	})
	if _, err := b.AuthenticateCached(oldKey); err == nil {
		t.Fatal("node B's cache still answers for the rotated key")
	}
	if _, err := b.Authenticate(ctx, oldKey); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("the rotated key on node B: %v", err)
	}
}
