package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkSendText measures posting a text message that mentions an agent
// (the writer's hottest job) from 16 producers, each in its own room; then
// the same with the mentioned agents holding 100 webhooks in all, each post
// queuing a delivery for each of its agent's (nothing sends them).
func BenchmarkSendText(b *testing.B) {
	b.Run("no webhooks", func(b *testing.B) { benchmarkSendText(b, 0) })
	b.Run("16 webhooks", func(b *testing.B) { benchmarkSendText(b, 16) })
	b.Run("100 webhooks", func(b *testing.B) { benchmarkSendText(b, 100) })
}

func benchmarkSendText(b *testing.B, webhooks int) {
	db := openTestDB(b, Options{Sync: SyncNormal, Limits: Limits{MessagesPerRoom: 1 << 30}})
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
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range lanes {
		wg.Go(func() {
			l := lanes[i]
			id := l.worker
			for next.Add(1) <= int64(b.N) {
				_, err := db.SendText(ctx, l.poster, l.room, TextInput{Content: "hello there", Mentions: []MentionInput{{ID: &id}}})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
