package store

import (
	"context"
	"testing"
	"time"
)

func TestDeliveryBacklog(t *testing.T) {
	k := newClaimKit(t, Options{})
	ctx := context.Background()
	backlog := func() DeliveryBacklog {
		t.Helper()
		b, err := k.db.DeliveryBacklog(ctx, 100)
		if err != nil || b.Capped {
			t.Fatalf("backlog %+v, %v", b, err)
		}
		return b
	}
	want := func(b DeliveryBacklog, pending, processing, failed int64, oldest time.Time) {
		t.Helper()
		got := [3]int64{b.Open["pending"], b.Open["processing"], b.Open["failed"]}
		if got != [3]int64{pending, processing, failed} || !b.OldestPending.Equal(oldest) || len(b.Open) != 3 {
			t.Fatalf("backlog %v, oldest pending %v; want pending %d, processing %d, failed %d, oldest %v",
				b.Open, b.OldestPending, pending, processing, failed, oldest)
		}
	}
	want(backlog(), 0, 0, 0, time.Time{})

	var posted []*Message
	for _, room := range []string{k.first, k.second, k.first} {
		m, err := k.db.SendText(ctx, k.poster, room, TextInput{Content: "look", Mentions: []MentionInput{{ID: &k.worker.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		posted = append(posted, m)
	}
	want(backlog(), 3, 0, 0, posted[0].InsertedAt)

	// The oldest is picked up: the next one is now the oldest pending.
	if got := k.claim(t, k.first); got != posted[0].ID {
		t.Fatalf("claimed %s, want %s", got, posted[0].ID)
	}
	want(backlog(), 2, 1, 0, posted[1].InsertedAt)
	if _, err := k.db.MarkFailed(ctx, k.worker, k.first, posted[0].ID, "no luck"); err != nil {
		t.Fatal(err)
	}
	want(backlog(), 2, 0, 1, posted[1].InsertedAt)
	// Past its limit, the count stops there and says so.
	if b, err := k.db.DeliveryBacklog(ctx, 2); err != nil || !b.Capped || b.Open["pending"]+b.Open["failed"] != 2 {
		t.Fatalf("backlog limited to 2: %+v, %v", b, err)
	}

	// Processed deliveries leave the backlog; so does everything once done.
	for _, m := range posted {
		if _, err := k.db.MarkProcessing(ctx, k.worker, m.RoomID, m.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := k.db.MarkProcessed(ctx, k.worker, m.RoomID, m.ID); err != nil {
			t.Fatal(err)
		}
	}
	want(backlog(), 0, 0, 0, time.Time{})
}

func TestPages(t *testing.T) {
	sqliteOnly(t)
	db := openTableDB(t, Options{})
	before, err := db.Pages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if before.Size < 512 || before.Size&(before.Size-1) != 0 || before.Count < 2 || before.Free < 0 {
		t.Fatalf("pages %+v", before)
	}
	big := make([]byte, 64<<10)
	rawExec(t, db, `INSERT INTO t (k, v) VALUES ('big', ?)`, big)
	after, err := db.Pages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after.Count-before.Count < int64(len(big))/before.Size {
		t.Fatalf("pages %+v after writing %d bytes to %+v", after, len(big), before)
	}
	rawExec(t, db, `DELETE FROM t WHERE k = 'big'`)
	if freed, err := db.Pages(context.Background()); err != nil || freed.Free < int64(len(big))/before.Size {
		t.Fatalf("pages %+v, %v after deleting %d bytes", freed, err, len(big))
	}
}
