package store

import (
	"context"
	"os"
	"slices"
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

// searchBenchRooms is how many rooms the benchmark's messages are spread
// over (CHATD_SEARCH_ROOMS overrides it; at least 200).
func searchBenchRooms() int {
	if n, err := strconv.Atoi(os.Getenv("CHATD_SEARCH_ROOMS")); err == nil && n >= 200 {
		return n
	}
	return 200
}

// searchBench is a database of n messages from the corpus in rooms of
// alice's (searchBenchRooms); bob is in 40 of them, and helper in 40
// others, mentioned in a tenth of their messages.
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
	rooms := make([]string, searchBenchRooms())
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
			tx.BeforeCommit("search index", indexQueued)
			for i := done; i < min(done+perWrite, n); i++ {
				room := rooms[i%len(rooms)]
				typ, content := corpus.message()
				var seq int64
				err := tx.QueryRow(`INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type, content, inserted_at, updated_at)
					VALUES (?, ?, ?, 'User', 'Alice', ?, ?, ?, ?) RETURNING seq`, newID(), room, alice.ID, typ, content, i, i).Scan(&seq)
				if err != nil {
					return err
				}
				if r := i % len(rooms); r >= 40 && r < 80 && i%10 == 0 && typ == "text" {
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
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				page, err := s.db.Search(context.Background(), c.actor, c.f, PageRequest{Limit: 20})
				if err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
				hits = len(page.Items)
			}
			slices.Sort(took)
			b.ReportMetric(float64(hits), "hits")
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
	b.Logf("the index takes %.1f%% of the database's bytes", 100*indexShare(b, s.db))
}

// indexShare is the part of the database's pages that the search index
// (messages_fts and its shadow tables) holds.
func indexShare(b *testing.B, db *DB) float64 {
	var index, all float64
	if err := db.read.QueryRow(`SELECT coalesce(sum(CASE WHEN name LIKE 'messages_fts%' THEN pgsize END), 0), sum(pgsize) FROM dbstat`).
		Scan(&index, &all); err != nil {
		b.Fatal(err)
	}
	return index / all
}
