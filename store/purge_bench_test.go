package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkPurge measures the purge alone: b.N old thoughts of about 300
// bytes, deleted in steps, with the search index kept in step.
func BenchmarkPurge(b *testing.B) {
	k := &retentionKit{searchKit: newSearchKit(b, Options{Sync: SyncNormal}), now: time.Now().UTC()}
	ctx := context.Background()
	old := k.now.Add(-10 * 24 * time.Hour).UnixMicro()
	words := strings.Fields("the deploy of service build failed passed retry cache database index query latency error warning")
	for done := 0; done < b.N; done += 10000 {
		err := k.db.Write(ctx, func(tx *Tx) error {
			for i := done; i < min(done+10000, b.N); i++ {
				var c strings.Builder
				for j := range 40 {
					c.WriteString(words[(i*7+j*3)%len(words)] + " ")
				}
				if _, err := tx.Exec(`INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type, content,
					inserted_at, updated_at) VALUES (?, ?, ?, 'User', 'Alice', 'thought', ?, ?, ?)`,
					newID(), k.room, k.alice.ID, c.String()+fmt.Sprint(i), old, old); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	k.say(b, k.room, "new")
	k.setRoom(b, k.room, Periods{EventDays: days(1)})
	b.ResetTimer()
	start := time.Now()
	if _, err := k.db.Purge(ctx, PurgeOptions{Now: k.now, MinPause: time.Nanosecond}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
