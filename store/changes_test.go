package store

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
)

// recorder collects published changes.
type recorder struct {
	mu      sync.Mutex
	changes []Change
}

func record(db *DB) *recorder {
	r := &recorder{}
	db.SetPublisher(func(c Change) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.changes = append(r.changes, c)
	})
	return r
}

// kinds lists what was published, as "kind:member" where a member is named.
func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.changes {
		k := string(c.Kind)
		if c.Member != nil {
			k += ":" + c.Member.Handle
		}
		out = append(out, k)
	}
	return out
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = nil
}

func TestChangesArePublishedAfterCommitOnly(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, _ := mustUser(t, db, "alice")
	helper, _ := mustAgent(t, db, alice, "Helper")
	bob, _ := mustUser(t, db, "bob")
	rec := record(db)

	room, err := db.CreateRoom(ctx, UserActor(alice), NewRoom{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddParticipant(ctx, UserActor(alice), room.ID, helper.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddParticipant(ctx, UserActor(alice), room.ID, bob.ID, ""); err != nil {
		t.Fatal(err)
	}
	want := "room_added:alice participant_added:alice participant_added:alice/helper room_added:alice/helper participant_added:bob room_added:bob"
	if got := strings.Join(rec.kinds(), " "); got != want {
		t.Fatalf("published %s\nwant      %s", got, want)
	}

	// A refused write publishes nothing.
	rec.reset()
	if err := db.DeleteRoom(ctx, UserActor(bob), room.ID); ErrorCode(err) != CodeForbidden {
		t.Fatalf("bob deleting: %v", err)
	}
	if _, err := db.SendText(ctx, UserActor(alice), room.ID, TextInput{Content: "hi"}); err == nil {
		t.Fatal("a message without mentions was accepted")
	}
	if got := rec.kinds(); len(got) != 0 {
		t.Fatalf("refused writes published %v", got)
	}

	id := helper.ID
	msg, err := db.SendText(ctx, UserActor(alice), room.ID, TextInput{Content: "Plan the launch\nthen ship", Mentions: []MentionInput{{ID: &id}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.kinds(), " "); got != "room_updated message_created" {
		t.Fatalf("first message published %s", got)
	}
	rec.mu.Lock()
	created := rec.changes[1]
	titled := rec.changes[0]
	rec.mu.Unlock()
	if created.Message.ID != msg.ID || len(created.Message.Deliveries) != 1 || created.Message.Deliveries[0].AgentID != helper.ID {
		t.Fatalf("message_created carries %+v", created.Message)
	}
	if titled.Room.Title == nil || *titled.Room.Title != "Plan the launch" {
		t.Fatalf("room_updated carries title %v", titled.Room.Title)
	}

	// Deleting the room tells everyone in it.
	rec.reset()
	if err := db.DeleteRoom(ctx, UserActor(alice), room.ID); err != nil {
		t.Fatal(err)
	}
	got := rec.kinds()
	sort.Strings(got)
	if strings.Join(got, " ") != "room_deleted room_removed:alice room_removed:alice/helper room_removed:bob" {
		t.Fatalf("delete published %v", got)
	}
	rec.mu.Lock()
	for _, c := range rec.changes {
		if c.Kind == RoomDeleted && len(c.Members) != 3 {
			t.Errorf("room_deleted names %d members, want 3", len(c.Members))
		}
	}
	rec.mu.Unlock()
}

func TestDeletingAnAgentHandsItsRoomsToItsOwner(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, _ := mustUser(t, db, "alice")
	helper, _ := mustAgent(t, db, alice, "Helper")
	room, err := db.CreateRoom(ctx, AgentActor(helper), NewRoom{})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(db)
	if _, err := db.DeleteAgent(ctx, alice, helper.ID, false); err != nil {
		t.Fatal(err)
	}
	got := rec.kinds()
	sort.Strings(got)
	if strings.Join(got, " ") != "agent_deleted participant_added:alice participant_removed:alice/helper room_added:alice room_removed:alice/helper" {
		t.Fatalf("published %v", got)
	}
	p, err := db.ListParticipants(ctx, UserActor(alice), room.ID, "", PageRequest{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].ID != alice.ID || p.Items[0].Role != "owner" {
		t.Fatalf("participants after the owner agent was deleted: %+v", p.Items)
	}
}

func TestDeletingAnAgentWithExecutionHistoryNeedsForce(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, _ := mustUser(t, db, "alice")
	helper, _ := mustAgent(t, db, alice, "Helper")
	room := mustRoom(t, db, alice)
	if _, err := db.AddParticipant(ctx, UserActor(alice), room.ID, helper.ID, ""); err != nil {
		t.Fatal(err)
	}
	id := helper.ID
	msg, err := db.SendText(ctx, UserActor(alice), room.ID, TextInput{Content: "go", Mentions: []MentionInput{{ID: &id}}})
	if err != nil {
		t.Fatal(err)
	}
	// Delivered but never worked on: no execution history yet.
	if n := rawCount(t, db, `SELECT count(*) FROM deliveries WHERE agent_id = ? AND current_attempt > 0`, helper.ID); n != 0 {
		t.Fatal("history before any attempt")
	}
	if _, err := db.MarkProcessing(ctx, AgentActor(helper), room.ID, msg.ID); err != nil {
		t.Fatal(err)
	}
	_, err = db.DeleteAgent(ctx, alice, helper.ID, false)
	wantCode(t, err, CodeExecutionHistoryExists)
	if n := rawCount(t, db, `SELECT count(*) FROM agents WHERE id = ? AND deleted_at IS NULL`, helper.ID); n != 1 {
		t.Fatal("the refused delete deleted the agent")
	}
	d, err := db.DeleteAgent(ctx, alice, helper.ID, true)
	if err != nil || d.ExecutionsDeleted != 1 {
		t.Fatalf("forced delete: %+v, %v", d, err)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM deliveries WHERE agent_id = ?`, helper.ID); n != 0 {
		t.Fatalf("%d deliveries of the deleted agent remain", n)
	}
}
