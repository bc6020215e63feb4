package store

import (
	"context"
	"database/sql"
	"log/slog"
	"sync/atomic"
	"time"
)

// Checkpoints copy committed pages from the WAL into the database file.
// Doing that inside the writer stalls every write queued behind it (tens of
// milliseconds for a large WAL), so routine checkpoints run here instead, on
// a connection of their own: a PASSIVE checkpoint takes no write lock and
// never blocks the writer or the readers. Once the WAL is fully copied, the
// next write transaction starts it over from the beginning, so it stays
// small under a steady load. The writer still checkpoints (TRUNCATE, leaving
// an empty WAL) when it is idle, on shutdown, and as a backstop if the WAL
// ever grows past a bound this goroutine could not keep it under (readers
// holding old snapshots for a long time).

// checkpointEvery is how often the checkpointer copies what was committed.
const checkpointEvery = time.Second

type checkpointer struct {
	conn     *sql.Conn
	log      *slog.Logger
	commits  *atomic.Int64 // the writer's commit counter
	observer *atomic.Pointer[CheckpointObserver]
	stop     chan struct{}
	stopped  chan struct{}
	done     atomic.Int64 // checkpoints completed
}

func newCheckpointer(conn *sql.Conn, w *writer, log *slog.Logger) *checkpointer {
	c := &checkpointer{conn: conn, log: log, commits: &w.commits, observer: &w.ckptObserver,
		stop: make(chan struct{}), stopped: make(chan struct{})}
	go c.run()
	return c
}

// CheckpointObserver is told the mode ("truncate" by the writer, "passive"
// in the background) and duration of every checkpoint that completed. The
// writer's run on the writer goroutine, so it must be quick and never
// block, like a CommitObserver.
type CheckpointObserver func(mode string, took time.Duration)

// SetCheckpointObserver installs f (nil for none).
func (db *DB) SetCheckpointObserver(f CheckpointObserver) {
	if f == nil {
		db.w.ckptObserver.Store(nil)
		return
	}
	db.w.ckptObserver.Store(&f)
}

// observeCheckpoint tells observer, if one is installed, of a checkpoint
// that began at start.
func observeCheckpoint(observer *atomic.Pointer[CheckpointObserver], mode string, start time.Time) {
	if f := observer.Load(); f != nil {
		(*f)(mode, time.Since(start))
	}
}

func (c *checkpointer) run() {
	defer close(c.stopped)
	tick := time.NewTicker(checkpointEvery)
	defer tick.Stop()
	seen := c.commits.Load()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		if n := c.commits.Load(); n != seen {
			seen = n
			c.passive()
		}
	}
}

func (c *checkpointer) passive() {
	start := time.Now()
	var busy, logFrames, copied int
	err := c.conn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied)
	if err != nil {
		if !isBusy(err) {
			c.log.Warn("background checkpoint failed", "err", err)
		}
		return
	}
	c.done.Add(1)
	observeCheckpoint(c.observer, "passive", start)
}

func (c *checkpointer) close() {
	close(c.stop)
	<-c.stopped
	c.conn.Close()
}
