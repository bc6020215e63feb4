package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkSendText measures posting a text message that mentions an agent
// (the writer's hottest job) from 16 producers, each in its own room.
func BenchmarkSendText(b *testing.B) {
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
