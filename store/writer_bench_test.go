package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkWriter measures single-row jobs through the writer: jobs/s, the
// p50/p99 latency of a Write (enqueue to acknowledged commit) and the mean
// group-commit batch, at 1, 16 and 64 concurrent producers, for both sync
// modes. Run: go test ./store -run '^$' -bench Writer -benchtime 3s
func BenchmarkWriter(b *testing.B) {
	row := strings.Repeat("x", 200) // about the size of a chat message row
	for _, mode := range []Sync{SyncNormal, SyncFull} {
		for _, producers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("sync=%s/producers=%d", mode, producers), func(b *testing.B) {
				db := openTestDB(b, Options{Sync: mode})
				rawExec(b, db, `CREATE TABLE m (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`)
				commitsBefore := db.WriterStats().Commits
				latencies := make([][]time.Duration, producers)
				var next atomic.Int64
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for p := 0; p < producers; p++ {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							t0 := time.Now()
							err := db.Write(context.Background(), func(tx *Tx) error {
								_, err := tx.Exec(`INSERT INTO m (body) VALUES (?)`, row)
								return err
							})
							if err != nil {
								b.Error(err)
								return
							}
							latencies[p] = append(latencies[p], time.Since(t0))
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				all := slices.Concat(latencies...)
				slices.Sort(all)
				commits := db.WriterStats().Commits - commitsBefore
				b.ReportMetric(float64(len(all))/elapsed.Seconds(), "jobs/s")
				b.ReportMetric(float64(percentile(all, 0.50).Microseconds()), "p50-µs")
				b.ReportMetric(float64(percentile(all, 0.99).Microseconds()), "p99-µs")
				b.ReportMetric(float64(len(all))/float64(max(commits, 1)), "jobs/commit")
			})
		}
	}
}

// BenchmarkWriteRefusedWhenQueueFull measures how long a Write takes to be
// refused when the queue is full (ns/op is the refusal latency).
func BenchmarkWriteRefusedWhenQueueFull(b *testing.B) {
	db := openTestDB(b, Options{QueueSize: 8})
	release := blockWriter(b, db)
	defer release()
	for db.WriteAsync(func(*Tx) error { return nil }) == nil {
	}
	noop := func(*Tx) error { return nil }
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := db.Write(context.Background(), noop); !errors.Is(err, ErrQueueFull) {
			b.Fatalf("err = %v", err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 0.99).Nanoseconds()), "p99-ns")
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
