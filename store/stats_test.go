package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Stats counts every table's rows, sizes the rooms of one organization (or
// all), and counts the messages of each of the last 30 days.
func TestStatsReportWhereTheBytesGo(t *testing.T) {
	k := newRetentionKit(t, Options{})
	ctx := context.Background()
	big := k.newRoom(t)
	for i := range 3 {
		k.say(t, big, strings.Repeat("a long message ", 20)+fmt.Sprint(i))
	}
	k.at(t, k.event(t, big, "yesterday's thought"), k.now.Add(-24*time.Hour))
	k.at(t, k.event(t, big, "too old to count"), k.now.Add(-40*24*time.Hour))
	uploadText(t, k.db, k.alice, k.room, "notes.txt", strings.Repeat("x", 5000))
	k.say(t, k.room, "short")
	carol, _, err := k.db.CreateUser(ctx, NewUser{Handle: "carol", Name: "Carol", Organization: "Elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := k.db.CreateRoom(ctx, UserActor(carol), NewRoom{})
	if err != nil {
		t.Fatal(err)
	}

	s, err := k.db.Stats(ctx, k.alice.OrganizationID, k.now)
	if err != nil {
		t.Fatal(err)
	}
	if s.DatabaseBytes == 0 || s.PageSize == 0 || s.Rooms != 2 || s.Messages != 6 || s.Files != 1 || s.FileBytes != 5000 {
		t.Fatalf("totals: %+v", s)
	}
	rows := map[string]int64{}
	for _, tr := range s.Tables {
		rows[tr.Name] = tr.Rows
	}
	if rows["messages"] != 6 || rows["rooms"] != 3 || rows["file_chunks"] != 1 || rows["users"] != 2 {
		t.Fatalf("rows per table: %v", rows)
	}
	if _, ok := rows["messages_fts_data"]; ok {
		t.Fatalf("the search index's own tables are listed: %v", rows)
	}
	if len(s.LargestByMessages) != 2 || s.LargestByMessages[0].ID != big || s.LargestByMessages[0].Messages != 5 {
		t.Fatalf("largest by messages: %+v", s.LargestByMessages)
	}
	if len(s.LargestByBytes) != 2 || s.LargestByBytes[0].ID != k.room || s.LargestByBytes[0].FileBytes != 5000 {
		t.Fatalf("largest by bytes: %+v", s.LargestByBytes)
	}
	for _, r := range append(s.LargestByBytes, s.LargestByMessages...) {
		if r.ID == theirs.ID {
			t.Fatal("another organization's room is listed")
		}
	}
	today, yesterday := s.Days[StatsDays-1], s.Days[StatsDays-2]
	if len(s.Days) != StatsDays || today.Day != k.now.Format(time.DateOnly) || today.Texts != 4 || today.Events != 0 ||
		yesterday.Events != 1 || yesterday.Texts != 0 {
		t.Fatalf("days: today %+v, yesterday %+v", today, yesterday)
	}

	all, err := k.db.Stats(ctx, "", k.now)
	if err != nil || all.Rooms != 3 {
		t.Fatalf("every organization: %+v, %v", all, err)
	}
	bob, _ := mustUser(t, k.db, "bob")
	_, err = k.db.OrganizationStats(ctx, bob)
	wantCode(t, err, CodeForbidden)
}

// After a purge, the database file shrinks once vacuumed, the search
// index with it (FTS5 keeps a purged message's entries, and a tombstone
// beside them, until it merges them); a vacuum is refused while a server
// holds the database.
func TestVacuumShrinksThePurgedDatabase(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "chatd.db")
	k := &retentionKit{searchKit: newSearchKitAt(t, path), now: time.Now().UTC()}
	ctx := context.Background()
	old := k.now.Add(-10 * 24 * time.Hour)
	err := k.db.Write(ctx, func(tx *Tx) error {
		for i := range 3000 {
			if _, err := tx.Exec(`INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type, content,
				inserted_at, updated_at) VALUES (?, ?, ?, 'User', 'Alice', 'thought', ?, ?, ?)`,
				newID(), k.room, k.alice.ID, strings.Repeat("thinking hard ", 50)+fmt.Sprint(i), old.UnixMicro(), old.UnixMicro()); err != nil {
				return err
			}
		}
		_, err := tx.Exec(`UPDATE rooms SET message_count = 3000 WHERE id = ?`, k.room)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	k.say(t, k.room, "new")
	k.setRoom(t, k.room, Periods{EventDays: days(1)})
	k.purge(t, PurgeOptions{Batch: 1000})
	indexBytes := func(db *DB) int {
		return rawCount(t, db, `SELECT sum(pgsize) FROM dbstat WHERE name = 'messages_fts_data'`)
	}
	purgedIndex := indexBytes(k.db)

	lock, err := LockServer(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Vacuum(ctx, path); !errors.Is(err, ErrServerRunning) {
		t.Fatalf("a vacuum beside a server: %v", err)
	}
	lock.Release()
	k.db.Close()
	before, after, err := Vacuum(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if after >= before/2 {
		t.Fatalf("the file went from %d to %d bytes", before, after)
	}
	db := openTestDBAt(t, path, Options{})
	indexIntact(t, db)
	if n := rawCount(t, db, `SELECT count(*) FROM messages`); n != 1 {
		t.Fatalf("%d messages after the vacuum", n)
	}
	if after := indexBytes(db); after*10 > purgedIndex {
		t.Fatalf("the search index went from %d to %d bytes", purgedIndex, after)
	}
}

// newSearchKitAt is newSearchKit on the database file at path.
func newSearchKitAt(t testing.TB, path string) *searchKit {
	t.Helper()
	db := openTestDBAt(t, path, Options{})
	alice, _ := mustUser(t, db, "alice")
	helper, _ := mustAgent(t, db, alice, "Helper")
	scout, _ := mustAgent(t, db, alice, "Scout")
	k := &searchKit{db: db, alice: UserActor(alice), helper: AgentActor(helper), scout: AgentActor(scout)}
	k.room = k.newRoom(t)
	return k
}
