package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSendText measures posting a text message that mentions an agent
// (the writer's hottest job) from 16 producers, each in its own room; then
// the same with the mentioned agents holding 100 webhooks in all, each post
// queuing a delivery for each of its agent's (nothing sends them).
func BenchmarkSendText(b *testing.B) {
	b.Run("no webhooks", func(b *testing.B) { benchmarkSendText(b, 0, true, nil) })
	b.Run("16 webhooks", func(b *testing.B) { benchmarkSendText(b, 16, true, nil) })
	b.Run("100 webhooks", func(b *testing.B) { benchmarkSendText(b, 100, true, nil) })
}

// BenchmarkSendTextSearchIndex measures the same posts of sentences from
// the manual, with the search index and without it (its triggers
// dropped), twice each in turn, so that a busier stretch of a shared
// machine weighs on both alike: what indexing costs a post.
func BenchmarkSendTextSearchIndex(b *testing.B) {
	corpus := newSearchCorpus(b, 1)
	var sentences []string
	for range 1000 {
		sentences = append(sentences, corpus.sentence())
	}
	for range 2 {
		b.Run("indexed", func(b *testing.B) { benchmarkSendText(b, 0, true, sentences) })
		b.Run("not indexed", func(b *testing.B) { benchmarkSendText(b, 0, false, sentences) })
	}
}

// benchmarkSendText posts from 16 producers, each in its own room, a
// message mentioning the room's worker, which holds webhooks; the
// contents are sentences in turn ("hello there" without), and indexed
// for search or not.
func benchmarkSendText(b *testing.B, webhooks int, indexed bool, sentences []string) {
	db := openTestDB(b, Options{Sync: SyncNormal, Limits: Limits{MessagesPerRoom: 1 << 30}})
	if !indexed {
		unindex(b, db)
	}
	ctx := context.Background()
	owner, _ := mustUser(b, db, "owner")
	const producers = 16
	type lane struct {
		poster Actor
		room   string
		worker string
	}
	lanes := make([]lane, producers)
	for i := range lanes {
		p, _ := mustAgent(b, db, owner, fmt.Sprintf("poster %d", i))
		w, _ := mustAgent(b, db, owner, fmt.Sprintf("worker %d", i))
		room, err := db.CreateRoom(ctx, AgentActor(p), NewRoom{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.AddParticipant(ctx, AgentActor(p), room.ID, w.ID, ""); err != nil {
			b.Fatal(err)
		}
		lanes[i] = lane{AgentActor(p), room.ID, w.ID}
	}
	for e := range webhooks {
		worker := lanes[e%producers].worker
		if _, _, err := db.CreateWebhook(ctx, UserActor(owner), worker, NewWebhook{URL: fmt.Sprintf("http://127.0.0.1:9/hook/%d", e)}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	cpu := processCPU()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range lanes {
		wg.Go(func() {
			l := lanes[i]
			id := l.worker
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				content := "hello there"
				if len(sentences) > 0 {
					content = sentences[int(n)%len(sentences)]
				}
				_, err := db.SendText(ctx, l.poster, l.room, TextInput{Content: content, Mentions: []MentionInput{{ID: &id}}})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// The process's CPU time a post took: on a machine shared with other
	// work, steadier than the wall-clock time, which waits for the others.
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// unindex drops the triggers that keep the search index, so that messages
// written after are not indexed.
func unindex(b testing.TB, db *DB) {
	b.Helper()
	err := db.Write(context.Background(), func(tx *Tx) error {
		rows, err := tx.Query(`SELECT name FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'messages_fts%'`)
		if err != nil {
			return err
		}
		names, err := scanAll(rows, func(r interface{ Scan(...any) error }) (string, error) {
			var n string
			return n, r.Scan(&n)
		})
		if err != nil {
			return err
		}
		for _, n := range names {
			if _, err := tx.Exec(`DROP TRIGGER ` + n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSendTextInABigRoom measures a post mentioning one agent in a
// room of 1,000 agents: what a post reads of the room's participants.
func BenchmarkSendTextInABigRoom(b *testing.B) {
	db := openTestDB(b, Options{Sync: SyncNormal, Limits: Limits{MessagesPerRoom: 1 << 30, AgentsPerUser: 2000}})
	ctx := context.Background()
	owner, _ := mustUser(b, db, "owner")
	room, err := db.CreateRoom(ctx, UserActor(owner), NewRoom{})
	if err != nil {
		b.Fatal(err)
	}
	var mentioned string
	for i := range 1000 {
		a, _ := mustAgent(b, db, owner, fmt.Sprintf("member %d", i))
		if _, err := db.AddParticipant(ctx, UserActor(owner), room.ID, a.ID, ""); err != nil {
			b.Fatal(err)
		}
		mentioned = a.ID
	}
	cpu := processCPU()
	b.ResetTimer()
	for range b.N {
		if _, err := db.SendText(ctx, UserActor(owner), room.ID, TextInput{Content: "hello there", Mentions: []MentionInput{{ID: &mentioned}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}
