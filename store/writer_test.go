package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWriterConcurrentProducers(t *testing.T) {
	db := openTableDB(t, Options{})
	const producers, perProducer = 32, 40
	var wg sync.WaitGroup
	errs := make(chan error, producers*perProducer)
	for p := 0; p < producers; p++ {
		wg.Go(func() {
			for i := 0; i < perProducer; i++ {
				if err := db.Write(context.Background(), insertRow(fmt.Sprintf("%d-%d", p, i), i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("write: %v", err)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM t`); n != producers*perProducer {
		t.Fatalf("rows = %d, want %d", n, producers*perProducer)
	}
}

func TestWriterGroupCommitsQueuedJobsInOneTransaction(t *testing.T) {
	db := openTableDB(t, Options{})
	release := blockWriter(t, db)
	before := db.WriterStats().Commits

	const jobs = 50
	wait := queueRows(t, db, jobs)
	release()
	wait()

	// The gate's own batch plus exactly one batch for the 50 queued jobs.
	if got := db.WriterStats().Commits - before; got != 2 {
		t.Fatalf("commits = %d, want 2 (gate + one group commit)", got)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM t`); n != jobs {
		t.Fatalf("rows = %d, want %d", n, jobs)
	}
}

func TestWriterFailingJobDoesNotSinkItsBatch(t *testing.T) {
	db := openTableDB(t, Options{})
	release := blockWriter(t, db)

	boom := errors.New("boom")
	outcomes := make([]chan error, 5)
	for i := range outcomes {
		outcomes[i] = make(chan error, 1)
		fn := insertRow(fmt.Sprint(i), i)
		switch i {
		case 2: // writes, then fails: its row must be rolled back
			fn = func(tx *Tx) error {
				if err := insertRow("2", 2)(tx); err != nil {
					return err
				}
				return boom
			}
		case 3: // panics after writing
			fn = func(tx *Tx) error {
				_ = insertRow("3", 3)(tx)
				panic("job bug")
			}
		}
		go func() { outcomes[i] <- db.Write(context.Background(), fn) }()
		waitFor(t, "job to queue", func() bool { return db.WriterStats().QueueDepth == i+1 })
	}
	release()

	for i, ch := range outcomes {
		err := <-ch
		switch i {
		case 2:
			if !errors.Is(err, boom) {
				t.Errorf("job 2: err = %v, want boom", err)
			}
		case 3:
			if err == nil {
				t.Errorf("job 3: panicking job reported success")
			}
		default:
			if err != nil {
				t.Errorf("job %d: %v", i, err)
			}
		}
	}
	if n := rawCount(t, db, `SELECT count(*) FROM t`); n != 3 {
		t.Fatalf("rows = %d, want 3 (jobs 0, 1, 4)", n)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM t WHERE k IN ('2', '3')`); n != 0 {
		t.Fatalf("rows of failed jobs = %d, want 0", n)
	}
}

func TestWriterRefusesAtOnceWhenQueueIsFull(t *testing.T) {
	db := openTableDB(t, Options{QueueSize: 4})
	release := blockWriter(t, db)
	wait := queueRows(t, db, 4)

	// The writer is still blocked, so returning here at all proves the
	// refusal does not wait for room in the queue.
	var ran atomic.Bool
	err := db.Write(context.Background(), func(tx *Tx) error {
		ran.Store(true)
		return insertRow("refused", 0)(tx)
	})
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("err = %v, want ErrQueueFull", err)
	}
	if ErrorCode(err) != CodeUnavailable {
		t.Fatalf("code = %s, want %s", ErrorCode(err), CodeUnavailable)
	}
	if got := db.WriterStats().Refused; got != 1 {
		t.Fatalf("refused = %d, want 1", got)
	}
	release()
	wait()

	if ran.Load() {
		t.Fatal("the refused job ran")
	}
	if n := rawCount(t, db, `SELECT count(*) FROM t WHERE k = 'refused'`); n != 0 {
		t.Fatal("the refused job wrote a row")
	}
	if n := rawCount(t, db, `SELECT count(*) FROM t`); n != 4 {
		t.Fatalf("rows = %d, want 4", n)
	}
}

func TestWriterAfterCommitRunsOnlyForCommittedJobs(t *testing.T) {
	db := openTableDB(t, Options{})
	var ok, failed atomic.Int32
	if err := db.Write(context.Background(), func(tx *Tx) error {
		tx.AfterCommit(func() { ok.Add(1) })
		return insertRow("a", 1)(tx)
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.Write(context.Background(), func(tx *Tx) error {
		tx.AfterCommit(func() { failed.Add(1) })
		return errors.New("refused")
	})
	if ok.Load() != 1 || failed.Load() != 0 {
		t.Fatalf("callbacks: committed=%d failed=%d, want 1 and 0", ok.Load(), failed.Load())
	}
}

func TestWriterAfterCommitSeesCommittedData(t *testing.T) {
	db := openTableDB(t, Options{})
	seen := make(chan int, 1)
	err := db.Write(context.Background(), func(tx *Tx) error {
		tx.AfterCommit(func() {
			var n int
			_ = db.read.QueryRow(`SELECT count(*) FROM t`).Scan(&n)
			seen <- n
		})
		return insertRow("a", 1)(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := <-seen; n != 1 {
		t.Fatalf("a reader in the callback saw %d rows, want 1: callback ran before commit", n)
	}
}

func TestWriterSkipsJobsWhoseContextEndedWhileQueued(t *testing.T) {
	db := openTableDB(t, Options{})
	release := blockWriter(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- db.Write(ctx, insertRow("late", 1)) }()
	waitFor(t, "job to queue", func() bool { return db.WriterStats().QueueDepth == 1 })
	cancel()
	release()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM t`); n != 0 {
		t.Fatal("a cancelled job was written")
	}
}

func TestCloseRunsQueuedJobsThenRefuses(t *testing.T) {
	db := openTableDB(t, Options{})
	release := blockWriter(t, db)
	wait := queueRows(t, db, 10)
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	waitFor(t, "close to begin", func() bool {
		db.w.mu.RLock()
		defer db.w.mu.RUnlock()
		return db.w.closed
	})
	if err := db.Write(context.Background(), insertRow("after", 0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v, want ErrClosed", err)
	}
	release()
	wait()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}

	reopened := openTestDBAt(t, db.Path(), Options{})
	if n := rawCount(t, reopened, `SELECT count(*) FROM t`); n != 10 {
		t.Fatalf("rows after close = %d, want 10", n)
	}
}

func TestCheckpointTruncatesWAL(t *testing.T) {
	sqliteOnly(t)
	db := openTableDB(t, Options{})
	for i := 0; i < 100; i++ {
		if err := db.Write(context.Background(), insertRow(fmt.Sprint(i), i)); err != nil {
			t.Fatal(err)
		}
	}
	if db.WriterStats().WALBytes == 0 {
		t.Fatal("WAL is empty after writes")
	}
	// The writer checkpoints on its own once idle (1s by default).
	waitFor(t, "idle checkpoint", func() bool {
		s := db.WriterStats()
		return s.Checkpoints > 0 && s.WALBytes == 0
	})
}

func TestCheckpointWhenWALPassesItsBound(t *testing.T) {
	sqliteOnly(t)
	db := openTableDB(t, Options{CheckpointBytes: 64 << 10, CheckpointIdle: 1 << 40})
	big := make([]byte, 16<<10)
	// The writer looks at the WAL's size at most every walSizeEvery.
	deadline := time.Now().Add(walSizeEvery + 30*time.Second)
	for i := 0; db.WriterStats().Checkpoints == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint although the WAL passed its bound")
		}
		err := db.Write(context.Background(), func(tx *Tx) error {
			_, err := tx.Exec(`INSERT OR REPLACE INTO t (k, v) VALUES (?, ?)`, fmt.Sprint(i%20), big)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestBackgroundCheckpointsKeepUpWithWrites(t *testing.T) {
	sqliteOnly(t)
	db := openTableDB(t, Options{CheckpointIdle: 1 << 40})
	for i := 0; i < 50; i++ {
		if err := db.Write(context.Background(), insertRow(fmt.Sprint(i), i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "a background checkpoint", func() bool { return db.WriterStats().BackgroundCheckpoints > 0 })
	if db.WriterStats().Checkpoints != 0 {
		t.Fatal("the writer checkpointed although it was neither idle nor past its bound")
	}
}

func TestCheckpointObserverSeesEachMode(t *testing.T) {
	sqliteOnly(t)
	for _, mode := range []string{"passive", "truncate"} {
		t.Run(mode, func(t *testing.T) {
			opts := Options{CheckpointIdle: 1 << 40}
			if mode == "truncate" {
				opts.CheckpointIdle = 10 * time.Millisecond
			}
			db := openTableDB(t, opts)
			seen := make(chan string, 100)
			db.SetCheckpointObserver(func(m string, took time.Duration) {
				if took <= 0 {
					t.Errorf("%s checkpoint took %v", m, took)
				}
				select {
				case seen <- m:
				default:
				}
			})
			defer db.SetCheckpointObserver(nil)
			for i := 0; i < 20; i++ {
				if err := db.Write(context.Background(), insertRow(fmt.Sprint(i), i)); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.After(30 * time.Second)
			for {
				select {
				case m := <-seen:
					if m == mode {
						return
					}
				case <-deadline:
					t.Fatalf("no %s checkpoint observed", mode)
				}
			}
		})
	}
}

// Under writes that never pause, the WAL starts over again and again (the
// writer catches up with the background checkpoints) instead of growing
// until the writer must truncate it, which stalls every write behind it.
func TestWALStartsOverUnderUnbrokenWrites(t *testing.T) {
	sqliteOnly(t)
	db := openTableDB(t, Options{CheckpointIdle: 1 << 40, restartBytes: 4 << 20})
	big := make([]byte, 64<<10)
	var written int64
	deadline := time.Now().Add(time.Minute)
	for i := 0; db.WriterStats().CatchUpCheckpoints < 3; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("no catch-up checkpoints after %d MiB written: %+v", written>>20, db.WriterStats())
		}
		err := db.Write(context.Background(), func(tx *Tx) error {
			_, err := tx.Exec(`INSERT OR REPLACE INTO t (k, v) VALUES (?, ?)`, fmt.Sprint(i%64), big)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		written += int64(len(big))
	}
	s := db.WriterStats()
	if s.Checkpoints != 0 {
		t.Errorf("the writer truncated the WAL %d times under load", s.Checkpoints)
	}
	if s.WALBytes >= written {
		t.Errorf("the WAL is %d bytes after %d written: it never started over", s.WALBytes, written)
	}
}

// Close leaves no connection open behind it, even one the read cache was
// still preparing a statement on: the last connection to close removes the
// WAL, and a connection left over would take the file's exclusive lock to do
// so later, under whoever opens the database next.
func TestCloseWaitsForStatementsBeingPrepared(t *testing.T) {
	sqliteOnly(t)
	for i := 0; i < 30; i++ {
		db := openTestDB(t, Options{})
		var n int
		// A first query misses the cache and prepares in the background.
		if err := db.queryRow(context.Background(), `SELECT count(*) FROM organizations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(db.Path() + "-wal"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("round %d: the WAL outlived Close (%v): a connection is still open", i, err)
		}
	}
}
