package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/chatd/chatd/store"
)

// The scale workload writes its rows behind chatd's back, so they must be
// rows chatd reads as its own: a seeded key authenticates, and a lane's
// room answers its history, its listing and /next through the store.
func TestSeededDatabaseReadsAsChatds(t *testing.T) {
	schema, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	opts := store.Options{Schema: string(schema)}
	path := filepath.Join(t.TempDir(), "chatd.db")
	db, err := store.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := openSeeder(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.grow(300); err != nil {
		t.Fatal(err)
	}
	if err := s.grow(700); err != nil {
		t.Fatal(err)
	}
	var indexed int
	if err := s.db.QueryRow(`SELECT count(*) FROM messages_fts`).Scan(&indexed); err != nil || indexed != 700 {
		t.Fatalf("%d messages in the search index, want 700 (%v)", indexed, err)
	}
	lane := s.lanes(4)[3]
	s.db.Close()

	db, err = store.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	owner, err := db.Authenticate(ctx, lane.ownerKey)
	if err != nil {
		t.Fatal(err)
	}
	worker, err := db.Authenticate(ctx, lane.workerKey)
	if err != nil || worker.Actor().ID != lane.workerID {
		t.Fatalf("the worker's key: %v", err)
	}
	history, err := db.ListHistory(ctx, owner.Actor(), lane.room, store.HistoryFilter{}, store.PageRequest{Limit: 50})
	if err != nil || len(history.Items) < 10 {
		t.Fatalf("history: %v", err)
	}
	listing, err := db.ListDeliveries(ctx, worker.Actor(), lane.room, "", false, store.PageRequest{Limit: 20})
	if err != nil || len(listing.Items) == 0 {
		t.Fatalf("the worker's listing: %v", err)
	}
	if _, err := db.NextMessage(ctx, worker.Actor(), lane.room); err != nil {
		t.Fatal(err)
	}
}

func TestTaskNumber(t *testing.T) {
	for frame, want := range map[string]int{
		`{"content":"@a/b task#1234"}`: 1234,
		`{"content":"task#"}`:          -1,
		`{"content":"nothing"}`:        -1,
	} {
		if got := taskNumber([]byte(frame)); got != want {
			t.Errorf("taskNumber(%s) = %d, want %d", frame, got, want)
		}
	}
}
