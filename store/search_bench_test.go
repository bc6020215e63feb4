package store

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// searchBenchMessages is how many messages the search benchmark searches
// (CHATD_SEARCH_MESSAGES overrides it).
func searchBenchMessages() int {
	if n, err := strconv.Atoi(os.Getenv("CHATD_SEARCH_MESSAGES")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// searchBench is a database of n messages from the corpus in 200 rooms of
// alice's; bob is in 40 of them, and helper in 40 others, mentioned in a
// tenth of their messages.
type searchBench struct {
	db               *DB
	alice, bob, help Actor
	room             string // one of bob's rooms
}

func newSearchBench(b *testing.B, n int) *searchBench {
	b.Helper()
	db := openTestDB(b, Options{Sync: SyncNormal})
	ctx := context.Background()
	alice, _ := mustUser(b, db, "alice")
	bob, _ := mustUser(b, db, "bob")
	helper, _ := mustAgent(b, db, alice, "Helper")
	s := &searchBench{db: db, alice: UserActor(alice), bob: UserActor(bob), help: AgentActor(helper)}
	rooms := make([]string, 200)
	for i := range rooms {
		r, err := db.CreateRoom(ctx, s.alice, NewRoom{})
		if err != nil {
			b.Fatal(err)
		}
		rooms[i] = r.ID
		member := map[bool]Actor{true: s.bob, false: s.help}[i < 40]
		if i < 80 {
			if _, err := db.AddParticipant(ctx, s.alice, r.ID, member.ID, ""); err != nil {
				b.Fatal(err)
			}
		}
	}
	s.room = rooms[0]
	corpus := newSearchCorpus(b, 1)
	const perWrite = 5000
	for done := 0; done < n; done += perWrite {
		err := db.Write(ctx, func(tx *Tx) error {
			for i := done; i < min(done+perWrite, n); i++ {
				room := rooms[i%len(rooms)]
				typ, content := corpus.message()
				var seq int64
				err := tx.QueryRow(`INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type, content, inserted_at, updated_at)
					VALUES (?, ?, ?, 'User', 'Alice', ?, ?, ?, ?) RETURNING seq`, newID(), room, alice.ID, typ, content, i, i).Scan(&seq)
				if err != nil {
					return err
				}
				if i%len(rooms) >= 40 && i%len(rooms) < 80 && i%10 == 0 && typ == "text" {
					if _, err := tx.Exec(`INSERT INTO deliveries (agent_id, room_id, message_seq, updated_at) VALUES (?, ?, ?, 0)`, helper.ID, room, seq); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkSearch measures one page (20 hits, with their messages and
// snippets) of typical searches over 100,000 messages.
func BenchmarkSearch(b *testing.B) {
	n := searchBenchMessages()
	start := time.Now()
	s := newSearchBench(b, n)
	b.Logf("%d messages written and indexed in %v", n, time.Since(start).Round(time.Millisecond))
	for _, c := range []struct {
		name  string
		actor Actor
		f     SearchFilter
	}{
		{"person/common word/relevance", s.alice, SearchFilter{Query: "message"}},
		{"person/common word/newest", s.alice, SearchFilter{Query: "message", Newest: true}},
		{"person/two words/relevance", s.alice, SearchFilter{Query: "agent room"}},
		{"person/rare word/relevance", s.alice, SearchFilter{Query: "argon2id"}},
		{"person/phrase/relevance", s.alice, SearchFilter{Query: `"read marker"`}},
		{"person/prefix/relevance", s.alice, SearchFilter{Query: "deliv*"}},
		{"person/short prefix/relevance", s.alice, SearchFilter{Query: "de*"}},
		{"person/no match", s.alice, SearchFilter{Query: "xylophone"}},
		{"person in a fifth of the rooms/common word/relevance", s.bob, SearchFilter{Query: "message"}},
		{"person in a fifth of the rooms/common word/newest", s.bob, SearchFilter{Query: "message", Newest: true}},
		{"person/one room/common word/relevance", s.bob, SearchFilter{Query: "message", RoomID: s.room}},
		{"agent/common word/relevance", s.help, SearchFilter{Query: "message"}},
		{"agent/common word/newest", s.help, SearchFilter{Query: "message", Newest: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			hits := 0
			for b.Loop() {
				page, err := s.db.Search(context.Background(), c.actor, c.f, PageRequest{Limit: 20})
				if err != nil {
					b.Fatal(err)
				}
				hits = len(page.Items)
			}
			b.ReportMetric(float64(hits), "hits")
		})
	}
}

// BenchmarkDeleteRoomUnindexes measures deleting a room of 10,000 messages,
// which takes them out of the index in the same write.
func BenchmarkDeleteRoomUnindexes(b *testing.B) {
	const perRoom = 10_000
	db := openTestDB(b, Options{Sync: SyncNormal})
	ctx := context.Background()
	alice, _ := mustUser(b, db, "alice")
	corpus := newSearchCorpus(b, 2)
	for b.Loop() {
		b.StopTimer()
		room := mustRoom(b, db, alice)
		err := db.Write(ctx, func(tx *Tx) error {
			for i := range perRoom {
				typ, content := corpus.message()
				if _, err := tx.Exec(`INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type, content, inserted_at, updated_at)
					VALUES (?, ?, ?, 'User', 'Alice', ?, ?, ?, ?)`, newID(), room.ID, alice.ID, typ, content, i, i); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := db.DeleteRoom(ctx, UserActor(alice), room.ID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(perRoom, "messages/room")
}
