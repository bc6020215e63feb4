package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// The purge worker runs a purge pass (purge.go) when it starts, then every
// interval, and at once when a retention setting changes. One pass at a
// time: a change during a pass wakes the next one. Stopping cancels the
// pass between two steps (the step under way commits or never starts), and
// the next pass goes on from where it stopped.
//
// Of the processes sharing the database, the one holding the "purge"
// lease runs the passes (leases.go): it starts with a pass when it takes
// the lease (so one a dead holder cut short goes on), and it learns of a
// setting changed on another process by polling the settings every
// JobPoll. Losing the lease cancels the pass like stopping does. The
// purge's steps are idempotent and each runs under the write lock, so a
// step that overlaps a takeover deletes nothing twice.

// purgeWorker is the worker's state and what it counted.
type purgeWorker struct {
	mu      sync.Mutex
	cancel  context.CancelFunc // nil while not running
	stopped chan struct{}
	wake    chan struct{} // a setting changed

	// What every pass of this process deleted, by kind, and the passes
	// completed; for the metrics.
	text, events, files, bytes, passes atomic.Int64
}

// poke wakes the worker if it waits; it never blocks (it runs after
// commit, on the writer goroutine).
func (p *purgeWorker) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// count adds what one step deleted.
func (p *purgeWorker) count(l PurgeLine) {
	switch l.Kind {
	case KindText:
		p.text.Add(l.Count)
	case KindEvent:
		p.events.Add(l.Count)
	case KindFile:
		p.files.Add(l.Count)
	}
	p.bytes.Add(l.Bytes)
}

// PurgeStats are what the purge deleted since the database was opened.
type PurgeStats struct {
	Texts, Events, Files int64 // items deleted, by kind
	Bytes                int64 // their bytes
	Passes               int64 // passes completed by the worker
}

// PurgeStats returns what the purge deleted since the database was opened.
func (db *DB) PurgeStats() PurgeStats {
	p := &db.purge
	return PurgeStats{Texts: p.text.Load(), Events: p.events.Load(), Files: p.files.Load(), Bytes: p.bytes.Load(),
		Passes: p.passes.Load()}
}

// StartPurgeWorker starts purging every interval (at least a second), at
// once first. Starting it twice is harmless.
func (db *DB) StartPurgeWorker(interval time.Duration) {
	p := &db.purge
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.stopped = cancel, make(chan struct{})
	go func(stopped chan struct{}) {
		defer close(stopped)
		db.jobLease("purge").run(ctx, func(ctx context.Context) { db.runPurge(ctx, max(interval, time.Second)) })
	}(p.stopped)
}

// StopPurgeWorker stops the worker after the step it is on, releases its
// lease and waits for it.
func (db *DB) StopPurgeWorker() {
	p := &db.purge
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.stopped
	p.cancel, p.stopped = nil, nil
}

// purgeRetry paces the worker after a pass that failed (a full write queue,
// a locked database): what is left waits for the next pass, which comes
// sooner.
const purgeRetry = 10 * time.Second

// runPurge runs passes while this process holds the purge lease, until
// ctx ends.
func (db *DB) runPurge(ctx context.Context, interval time.Duration) {
	for {
		// Read before the pass, so that a change made during it is seen
		// after it. Unread, they read as changed: one pass more.
		settings, _ := db.retentionSettings(ctx)
		wait := interval
		start := time.Now()
		report, err := db.Purge(ctx, PurgeOptions{})
		switch {
		case ctx.Err() != nil, errors.Is(err, ErrClosed):
			return
		case err != nil:
			db.log.Warn("retention purge stopped; retrying", "err", err, "in", purgeRetry)
			wait = purgeRetry
		default:
			db.purge.passes.Add(1)
		}
		if report != nil && len(report.Lines) > 0 {
			texts, _ := report.Total(KindText)
			events, _ := report.Total(KindEvent)
			files, _ := report.Total(KindFile)
			var bytes int64
			for _, l := range report.Lines {
				bytes += l.Bytes
			}
			db.log.Info("retention purge", "texts", texts, "events", events, "files", files, "bytes", bytes,
				"rooms", len(rooms(report)), "took", time.Since(start).Round(time.Millisecond))
		}
		if !db.awaitPurge(ctx, time.Now().Add(wait), settings) {
			return
		}
	}
}

// awaitPurge waits until the next pass is due at next, a setting changed
// here, or one changed elsewhere (the settings differ from those read
// before the last pass); it reports false when ctx ended first.
func (db *DB) awaitPurge(ctx context.Context, next time.Time, settings retentionStamp) bool {
	for {
		wait := time.Until(next)
		if wait <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-db.purge.wake:
			return true
		case <-time.After(min(wait, db.jobPoll)):
		}
		if now, err := db.retentionSettings(ctx); err == nil && now != settings {
			return true
		}
	}
}

// retentionStamp tells retention settings apart: how many there are and
// when the last was set, of the organizations' and the rooms'.
type retentionStamp struct{ orgs, orgsAt, rooms, roomsAt int64 }

// retentionSettings reads the stamp of the settings now: two small tables,
// one row per organization or room with a setting of its own.
func (db *DB) retentionSettings(ctx context.Context) (retentionStamp, error) {
	var s retentionStamp
	err := db.queryRow(ctx, `SELECT (SELECT count(*) FROM organization_retention), (SELECT coalesce(max(updated_at), 0) FROM organization_retention),
		(SELECT count(*) FROM room_retention), (SELECT coalesce(max(updated_at), 0) FROM room_retention)`).
		Scan(&s.orgs, &s.orgsAt, &s.rooms, &s.roomsAt)
	return s, err
}

// rooms are the rooms of a report.
func rooms(r *PurgeReport) map[string]bool {
	seen := map[string]bool{}
	for _, l := range r.Lines {
		seen[l.RoomID] = true
	}
	return seen
}
