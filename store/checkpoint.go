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
// never blocks the writer or the readers. The writer still checkpoints
// (TRUNCATE, leaving an empty WAL) when it is idle, on shutdown, and as a
// backstop if the WAL ever grows past a bound (readers holding old
// snapshots for a long time).
//
// Copying is not enough to keep the WAL small: it starts over only when a
// write begins with every frame already copied, and under a steady load
// the writer has always appended more by the time a pass ends. Left alone
// the WAL grows until the backstop TRUNCATE, which then stalls every write
// behind it for as long as freeing a large file takes (136 ms for 256 MiB
// on a small VM). So once a pass has copied all it found and the WAL holds
// more than defaultRestartBytes, the writer is asked to catch up: between
// two batches it copies the few frames committed since (a PASSIVE
// checkpoint of its own, one to a few milliseconds, most of it the database
// file's fsync), and its next transaction starts the WAL over from the
// beginning, unless a reader still uses it, in which case a later pass asks
// again. The writer does it when no write is waiting, or after catchUpWait
// if one always is.

// checkpointEvery is how often the checkpointer copies what was committed.
const checkpointEvery = 250 * time.Millisecond

// defaultRestartBytes is the WAL size past which a complete pass asks the
// writer to catch up and start the WAL over. Smaller, the writer would
// stop for a catch-up more often; larger, readers would search a larger
// WAL index for each page.
const defaultRestartBytes = 32 << 20

// catchUpWait is how long the writer waits for a moment with no write
// queued before it catches up anyway. Longer, the WAL could pass the
// journal_size_limit (64 MiB), which SQLite then enforces by truncating the
// file in the first commit after the WAL starts over.
const catchUpWait = 100 * time.Millisecond

type checkpointer struct {
	conn     *sql.Conn
	log      *slog.Logger
	commits  *atomic.Int64 // the writer's commit counter
	catchUp  *atomic.Int64 // the writer's request to catch up: when it was first made (unix ns), 0 for none
	pageSize int64
	// restartBytes: see defaultRestartBytes.
	restartBytes int64
	observer     *atomic.Pointer[CheckpointObserver]
	stop         chan struct{}
	stopped      chan struct{}
	done         atomic.Int64 // checkpoints completed
}

func newCheckpointer(conn *sql.Conn, w *writer, pageSize, restartBytes int64, log *slog.Logger) *checkpointer {
	c := &checkpointer{conn: conn, log: log, commits: &w.commits, catchUp: &w.catchUp, pageSize: pageSize, restartBytes: restartBytes,
		observer: &w.ckptObserver, stop: make(chan struct{}), stopped: make(chan struct{})}
	go c.run()
	return c
}

// CheckpointObserver is told the mode ("truncate" or "catchup" by the
// writer, "passive" in the background) and duration of every checkpoint
// that completed. The writer's run on the writer goroutine, so it must be
// quick and never block, like a CommitObserver.
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
	r, ok := runCheckpoint(c.conn, "PASSIVE", c.log)
	if !ok {
		return
	}
	c.done.Add(1)
	observeCheckpoint(c.observer, "passive", start)
	if r.busy == 0 && r.copied == r.logFrames && int64(r.logFrames)*c.pageSize > c.restartBytes {
		c.catchUp.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// checkpointResult is what PRAGMA wal_checkpoint answers: whether it was
// kept from finishing, the frames in the WAL and those copied.
type checkpointResult struct{ busy, logFrames, copied int }

// runCheckpoint runs a checkpoint of mode on conn. A busy database is no
// reason for a warning (a later checkpoint will do); anything else is.
func runCheckpoint(conn *sql.Conn, mode string, log *slog.Logger) (checkpointResult, bool) {
	var r checkpointResult
	err := conn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint("+mode+")").Scan(&r.busy, &r.logFrames, &r.copied)
	if err != nil {
		if !isBusy(err) {
			log.Warn("checkpoint failed", "mode", mode, "err", err)
		}
		return r, false
	}
	return r, true
}

func (c *checkpointer) close() {
	close(c.stop)
	<-c.stopped
	c.conn.Close()
}
