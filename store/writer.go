package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// maxBatch bounds how many queued jobs share one transaction, so one commit's
// latency stays bounded however deep the queue is.
const maxBatch = 256

// Tx is the handle a write job receives. It is valid only during the job.
type Tx struct {
	w            *writer
	ctx          context.Context
	now          time.Time
	afterCommit  []func()
	finally      []func()
	beforeCommit []keyedStep
	// shared is what the job publishes for the other processes on the
	// database, when it shares its changes (cluster.go).
	shared sharedBatch
}

// keyedStep is a step of a batch's end, run once per key.
type keyedStep struct {
	key string
	f   func(*Tx) error
}

// Exec runs a statement inside the job's savepoint.
func (t *Tx) Exec(query string, args ...any) (sql.Result, error) {
	st, err := t.w.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

// QueryRow runs a query that returns at most one row.
func (t *Tx) QueryRow(query string, args ...any) *sql.Row {
	st, err := t.w.stmt(query)
	if err != nil {
		// A broken query: let the row report it through Scan.
		return t.w.conn.QueryRowContext(t.ctx, t.w.dialect.bind(query), args...)
	}
	return st.QueryRowContext(t.ctx, args...)
}

// Query runs a query inside the job's savepoint.
func (t *Tx) Query(query string, args ...any) (*sql.Rows, error) {
	st, err := t.w.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, args...)
}

// Now is the job's timestamp: one value for everything a job writes.
func (t *Tx) Now() time.Time { return t.now }

// AfterCommit registers f to run after the batch holding this job committed.
// It never runs when the job fails or the commit fails. Callbacks run on the
// writer goroutine, so they must not block (publishing to a hub with bounded,
// non-blocking queues is the intended use).
func (t *Tx) AfterCommit(f func()) { t.afterCommit = append(t.afterCommit, f) }

// BeforeCommit registers f to run once every job of the batch holding this
// job has run, before the batch commits, outside any job's savepoint: work
// cheaper done once for a whole group commit than once per job. Each key
// runs once per batch, however many of its jobs registered it; it never
// runs for a job that failed alone, and its failure fails the whole batch.
func (t *Tx) BeforeCommit(key string, f func(*Tx) error) {
	for _, s := range t.beforeCommit {
		if s.key == key {
			return
		}
	}
	t.beforeCommit = append(t.beforeCommit, keyedStep{key, f})
}

// Finally registers f to run once the batch holding this job has ended,
// committed or not (after the AfterCommit callbacks), even when the job
// itself fails: for undoing what the job set up outside the database.
func (t *Tx) Finally(f func()) { t.finally = append(t.finally, f) }

type job struct {
	ctx  context.Context
	fn   func(*Tx) error
	done chan error // nil for fire-and-forget jobs
	// set by the writer
	err          error
	afterCommit  []func()
	finally      []func()
	beforeCommit []keyedStep
	shared       sharedBatch
}

// WriterStats is a snapshot of the writer's counters.
type WriterStats struct {
	QueueDepth    int   // jobs waiting now
	QueueCapacity int   // the queue's bound
	Jobs          int64 // jobs run (committed or failed)
	FailedJobs    int64 // jobs whose own work failed and was rolled back
	Commits       int64 // transactions committed
	Refused       int64 // jobs refused because the queue was full
	Checkpoints   int64 // TRUNCATE checkpoints completed by the writer
	// CatchUpCheckpoints are the writer's PASSIVE ones that let the WAL
	// start over under load (see checkpoint.go).
	CatchUpCheckpoints int64
	// BackgroundCheckpoints are the PASSIVE checkpoints of checkpoint.go.
	BackgroundCheckpoints int64
	WALBytes              int64 // current size of the -wal file
}

type writer struct {
	conn    *sql.Conn // the only write connection
	dialect dialect
	upkeep  upkeep
	stmts   map[string]*sql.Stmt
	queue   chan *job
	// background holds at most one job of the store's own bookkeeping (the
	// search index), so that it never takes a place in queue that a
	// client's write could have had.
	background chan *job
	log        *slog.Logger
	walPath    string
	idle       time.Duration // checkpoint after this long without writes
	walLimit   int64         // checkpoint at once when the WAL grows past this (a backstop; see checkpoint.go)
	// walSizeAt is when pastWALLimit last read the WAL's size.
	walSizeAt time.Time

	mu      sync.RWMutex // held for reading while enqueueing; for writing by close
	closed  bool
	stopped chan struct{} // closed when the writer goroutine exits
	stop    chan struct{}

	lastBatch int // size of the previous batch

	// passiveOnly leaves the WAL to an outside replicator: the writer never
	// runs a TRUNCATE checkpoint (see Options.PassiveCheckpointsOnly).
	passiveOnly bool
	observer    atomic.Pointer[CommitObserver]
	// ckptObserver is shared with the background checkpointer.
	ckptObserver atomic.Pointer[CheckpointObserver]
	// catchUp is set by the background checkpointer when the WAL should
	// start over (see checkpoint.go).
	catchUp atomic.Int64
	// otherWrites is called when another process committed to the
	// database (see lookForOtherWriters); dataVersion is what the last
	// look saw, 0 before the first.
	otherWrites atomic.Pointer[func()]
	dataVersion int64
	// othersWrote is set when what other processes committed may have
	// gone unheard (postgres_listen.go).
	othersWrote atomic.Bool

	jobs, failed, commits, refused, checkpoints, catchUps atomic.Int64
}

// upkeep is the care the database's files need from the writer between
// transactions: SQLite's WAL checkpoints and its look for other processes'
// commits (sqliteUpkeep). PostgreSQL looks after its own files and has none.
type upkeep struct {
	afterCommit func()      // after each batch
	idle        func() bool // after idle without writes, if written since it last returned true
	look        func()      // every otherWritersEvery
	closing     func()      // once the last batch has committed
}

func noUpkeep(*writer) upkeep {
	return upkeep{afterCommit: func() {}, idle: func() bool { return true }, look: func() {}, closing: func() {}}
}

// sqliteUpkeep is the writer's care of a SQLite database.
func (w *writer) sqliteUpkeep() upkeep {
	return upkeep{
		afterCommit: func() {
			if w.pastWALLimit() {
				w.checkpoint()
			} else if w.dueToCatchUp() {
				w.catchUpCheckpoint()
			}
		},
		idle:    w.checkpoint,
		look:    w.lookForOtherWriters,
		closing: func() { w.checkpoint() },
	}
}

func newWriter(conn *sql.Conn, d dialect, queueSize int, walPath string, idle time.Duration, walLimit int64, passiveOnly bool, log *slog.Logger) *writer {
	if passiveOnly {
		walLimit = 0
	}
	w := &writer{
		passiveOnly: passiveOnly,
		conn:        conn,
		dialect:     d,
		stmts:       map[string]*sql.Stmt{},
		queue:       make(chan *job, queueSize),
		background:  make(chan *job, 1),
		log:         log,
		walPath:     walPath,
		idle:        idle,
		walLimit:    walLimit,
		stopped:     make(chan struct{}),
		stop:        make(chan struct{}),
	}
	w.upkeep = d.upkeep(w)
	go w.run()
	return w
}

// submit enqueues j without blocking.
func (w *writer) submit(j *job) error {
	err := w.offer(w.queue, j)
	if errors.Is(err, ErrQueueFull) {
		w.refused.Add(1)
	}
	return err
}

// offer puts j in place, one of the writer's queues, without blocking:
// ErrClosed once the writer closed, ErrQueueFull when place is full.
func (w *writer) offer(place chan *job, j *job) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	select {
	case place <- j:
		return nil
	default:
		return ErrQueueFull
	}
}

// Write runs fn as one job on the writer and returns after its batch committed
// (nil) or after fn's own error was rolled back (that error). A full queue
// returns ErrQueueFull at once. If ctx ends before the writer reaches the job,
// the job is skipped; once it started, Write waits for the outcome so that an
// acknowledged write is always a committed one.
func (db *DB) Write(ctx context.Context, fn func(*Tx) error) error {
	j := &job{ctx: ctx, fn: fn, done: make(chan error, 1)}
	if err := db.w.submit(j); err != nil {
		return err
	}
	return <-j.done
}

// writeBackground runs fn like Write, but in the writer's place for the
// store's own bookkeeping rather than in its queue: ErrQueueFull at once
// when such a write already waits.
func (db *DB) writeBackground(ctx context.Context, fn func(*Tx) error) error {
	j := &job{ctx: ctx, fn: fn, done: make(chan error, 1)}
	if err := db.w.offer(db.w.background, j); err != nil {
		return err
	}
	return <-j.done
}

// WriteAsync enqueues fn without waiting for it. It is for best-effort
// bookkeeping (such as an API key's last use) that may be dropped under load.
func (db *DB) WriteAsync(fn func(*Tx) error) error {
	return db.w.submit(&job{ctx: context.Background(), fn: fn})
}

// CommitObserver is told the size and duration (BEGIN to COMMIT) of every
// committed batch. It runs on the writer goroutine, so it must be quick and
// never block: updating an atomic counter or histogram is the intended use.
type CommitObserver func(jobs int, took time.Duration)

// SetCommitObserver installs f (nil for none).
func (db *DB) SetCommitObserver(f CommitObserver) {
	if f == nil {
		db.w.observer.Store(nil)
		return
	}
	db.w.observer.Store(&f)
}

// WriterStats returns the writer's counters.
func (db *DB) WriterStats() WriterStats {
	w := db.w
	return WriterStats{
		QueueDepth:         len(w.queue),
		QueueCapacity:      cap(w.queue),
		Jobs:               w.jobs.Load(),
		FailedJobs:         w.failed.Load(),
		Commits:            w.commits.Load(),
		Refused:            w.refused.Load(),
		Checkpoints:        w.checkpoints.Load(),
		CatchUpCheckpoints: w.catchUps.Load(),
		BackgroundCheckpoints: func() int64 {
			if db.ckpt == nil {
				return 0
			}
			return db.ckpt.done.Load()
		}(),
		WALBytes: fileSize(w.walPath),
	}
}

// close stops accepting jobs, runs every job already queued, checkpoints and
// returns when the writer goroutine has exited.
func (w *writer) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.stopped
		return
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.stopped
}

func (w *writer) run() {
	defer close(w.stopped)
	timer := time.NewTimer(w.idle)
	defer timer.Stop()
	look := time.NewTicker(otherWritersEvery)
	defer look.Stop()
	w.upkeep.look()
	dirty := false // written since the last checkpoint
	batch := make([]*job, 0, maxBatch)
	for {
		select {
		case <-look.C:
			w.upkeep.look()
		case j := <-w.background:
			w.commit(w.collect(append(batch[:0], j)))
			dirty = true
		case j := <-w.queue:
			batch = w.collect(append(batch[:0], j))
			if len(batch) < maxBatch && w.lastBatch > 1 {
				batch = w.linger(batch)
			}
			w.lastBatch = len(batch)
			w.commit(batch)
			dirty = true
			w.upkeep.afterCommit()
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(w.idle)
		case <-timer.C:
			if dirty {
				dirty = !w.upkeep.idle()
			}
			timer.Reset(w.idle)
		case <-w.stop:
			// No submitter can enqueue any more (closed is set under the lock),
			// so draining until empty runs every accepted job.
			select {
			case j := <-w.background:
				w.commit([]*job{j})
			default:
			}
			for len(w.queue) > 0 {
				batch = w.collect(batch[:0])
				w.commit(batch)
			}
			w.upkeep.closing()
			for _, st := range w.stmts {
				st.Close()
			}
			w.conn.Close()
			return
		}
	}
}

// otherWritersEvery is how often the writer looks for commits of other
// processes.
const otherWritersEvery = time.Second

// lookForOtherWriters calls otherWrites when another process (a chatd
// command beside a running server) committed since the last look. SQLite's
// data_version, read on a connection, moves only with the commits of other
// connections, and every write of this process goes through the writer's
// connection, so a move means another process wrote.
func (w *writer) lookForOtherWriters() {
	st, err := w.stmt("PRAGMA data_version")
	var v int64
	if err == nil {
		err = st.QueryRowContext(context.Background()).Scan(&v)
	}
	if err != nil {
		if !isBusy(err) {
			w.log.Warn("reading data_version failed", "err", err)
		}
		return
	}
	if w.dataVersion != 0 && v != w.dataVersion {
		if f := w.otherWrites.Load(); f != nil {
			w.safely(*f)
		}
	}
	w.dataVersion = v
}

// When the previous batch showed that jobs arrive concurrently, the writer
// lingers before committing: under load, the goroutines whose writes just
// committed send their next ones within microseconds, and one commit (one
// write of each touched page) can serve them all. It yields the processor
// (rather than sleeping: Go rounds sub-millisecond sleeps up) while jobs keep
// coming, and stops after lingerRounds yields bring nothing new. A lone writer
// never waits: its previous batch held one job.
const lingerRounds = 2

// linger adds jobs that keep arriving to batch, up to maxBatch.
func (w *writer) linger(batch []*job) []*job {
	for idle := 0; idle < lingerRounds && len(batch) < maxBatch; {
		runtime.Gosched()
		before := len(batch)
		batch = w.collect(batch)
		if len(batch) == before {
			idle++
		} else {
			idle = 0
		}
	}
	return batch
}

// collect appends queued jobs to batch without waiting, up to maxBatch.
func (w *writer) collect(batch []*job) []*job {
	for len(batch) < maxBatch {
		select {
		case j := <-w.queue:
			batch = append(batch, j)
		default:
			return batch
		}
	}
	return batch
}

// commit runs batch in one transaction, one savepoint per job, and reports
// each job's outcome after COMMIT.
func (w *writer) commit(batch []*job) {
	if len(batch) == 0 {
		return
	}
	batch, err := w.runBatch(batch)
	for _, j := range batch {
		if err != nil && j.err == nil {
			j.err = err
			j.afterCommit = nil
		}
		if j.err == nil {
			for _, f := range j.afterCommit {
				w.safely(f)
			}
		}
		for _, f := range j.finally {
			w.safely(f)
		}
		if j.done != nil {
			j.done <- j.err
		} else if j.err != nil && !isContextErr(j.err) {
			w.log.Warn("background write failed", "err", j.err)
		}
	}
}

// runBatch returns a non-nil error only when the transaction as a whole
// failed (every job in it fails); per-job errors are left in job.err. It
// drives the transaction with plain BEGIN/SAVEPOINT/COMMIT statements on the
// writer's own connection, so that its prepared statements serve every
// transaction. The jobs queued while the transaction began join the batch,
// which it returns: on PostgreSQL, beginning waits for the write lock
// while another node's writer holds it, and what arrived meanwhile would
// otherwise wait for the lock once more.
func (w *writer) runBatch(batch []*job) (_ []*job, err error) {
	ctx := context.Background()
	start := time.Now()
	for i, q := range w.dialect.begin {
		if err := w.exec(ctx, q); err != nil {
			if i > 0 { // the transaction began
				_ = w.exec(ctx, "ROLLBACK")
			}
			return batch, w.batchError("begin", err)
		}
	}
	batch = w.collect(batch)
	defer func() {
		if err != nil {
			_ = w.exec(ctx, "ROLLBACK")
		}
	}()
	for _, j := range batch {
		w.jobs.Add(1)
		if cerr := j.ctx.Err(); cerr != nil {
			j.err = cerr
			continue
		}
		if err = w.exec(ctx, "SAVEPOINT job"); err != nil {
			return batch, w.batchError("savepoint", err)
		}
		t := &Tx{w: w, ctx: ctx, now: now()}
		j.err = runJob(j.fn, t)
		j.finally = t.finally
		if j.err != nil {
			w.failed.Add(1)
			if err = w.exec(ctx, "ROLLBACK TO job"); err != nil {
				return batch, w.batchError("rollback to savepoint", err)
			}
		} else {
			j.afterCommit, j.beforeCommit, j.shared = t.afterCommit, t.beforeCommit, t.shared
		}
		if err = w.exec(ctx, "RELEASE job"); err != nil {
			return batch, w.batchError("release savepoint", err)
		}
	}
	if err = w.endBatch(ctx, batch); err != nil {
		return batch, w.batchError("before commit", err)
	}
	if w.dialect.shareChanges {
		if err = w.shareChanges(ctx, batch); err != nil {
			return batch, w.batchError("share changes", err)
		}
	}
	if err = w.exec(ctx, "COMMIT"); err != nil {
		return batch, w.batchError("commit", err)
	}
	w.commits.Add(1)
	if f := w.observer.Load(); f != nil {
		(*f)(len(batch), time.Since(start))
	}
	return batch, nil
}

// endBatch runs the BeforeCommit steps of the batch's jobs that succeeded,
// each key once, in the order they were first registered.
func (w *writer) endBatch(ctx context.Context, batch []*job) error {
	var ran []string
	for _, j := range batch {
		for _, step := range j.beforeCommit {
			if j.err != nil || slices.Contains(ran, step.key) {
				continue
			}
			ran = append(ran, step.key)
			if err := runJob(step.f, &Tx{w: w, ctx: ctx, now: now()}); err != nil {
				return fmt.Errorf("%s: %w", step.key, err)
			}
		}
	}
	return nil
}

// maxWriterStmts bounds the writer's prepared statements; queries beyond it
// (there are no such in chatd's fixed set) run unprepared.
const maxWriterStmts = 1024

// stmt returns the prepared statement for query, preparing it once. Only
// the writer goroutine calls it.
func (w *writer) stmt(query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	st, err := w.conn.PrepareContext(context.Background(), w.dialect.bind(query))
	if err != nil {
		return nil, err
	}
	if len(w.stmts) < maxWriterStmts {
		w.stmts[query] = st
	}
	return st, nil
}

func (w *writer) exec(ctx context.Context, query string) error {
	st, err := w.stmt(query)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx)
	return err
}

// runJob runs fn, turning a panic into an internal error so that one broken
// job cannot take the writer (and every later write) down with it.
func runJob(fn func(*Tx) error, t *Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("write job panicked: %v", r)
		}
	}()
	return fn(t)
}

func (w *writer) batchError(step string, err error) error {
	w.log.Error("write transaction failed", "step", step, "err", err)
	if isBusy(err) {
		return ErrLocked
	}
	return fmt.Errorf("write transaction (%s): %w", step, err)
}

func (w *writer) safely(f func()) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("after-commit callback panicked", "panic", r)
		}
	}()
	f()
}

// checkpoint copies the WAL into the database and truncates it. It gives up
// at once instead of waiting for readers, so a long read never stalls the
// writer; it reports whether the WAL was fully reset. With passiveOnly it
// does nothing: resetting the WAL is the replicator's business.
func (w *writer) checkpoint() bool {
	if w.passiveOnly {
		return true
	}
	ctx := context.Background()
	start := time.Now()
	if _, err := w.conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return false
	}
	defer w.conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout.Milliseconds()))
	r, ok := runCheckpoint(w.conn, "TRUNCATE", w.log)
	if !ok || r.busy != 0 {
		return false
	}
	w.checkpoints.Add(1)
	observeCheckpoint(&w.ckptObserver, "truncate", start)
	return true
}

// walSizeEvery bounds how often the writer reads the WAL's size for its
// backstop: a stat after every commit cost a busy server 2 % of its CPU.
const walSizeEvery = 100 * time.Millisecond

// pastWALLimit reports whether the WAL has grown past the backstop's bound,
// looking at most every walSizeEvery.
func (w *writer) pastWALLimit() bool {
	if w.walLimit <= 0 || time.Since(w.walSizeAt) < walSizeEvery {
		return false
	}
	w.walSizeAt = time.Now()
	return fileSize(w.walPath) > w.walLimit
}

// dueToCatchUp reports whether the background checkpointer asked the
// writer to catch up and now is the time: no write waits, or one always
// has for catchUpWait. It takes the request.
func (w *writer) dueToCatchUp() bool {
	asked := w.catchUp.Load()
	if asked == 0 || len(w.queue) > 0 && time.Since(time.Unix(0, asked)) < catchUpWait {
		return false
	}
	return w.catchUp.CompareAndSwap(asked, 0)
}

// catchUpCheckpoint copies what was committed since the background
// checkpointer's last pass, so that the next transaction can start the WAL
// over. PASSIVE never waits for readers.
func (w *writer) catchUpCheckpoint() {
	start := time.Now()
	if _, ok := runCheckpoint(w.conn, "PASSIVE", w.log); !ok {
		return
	}
	w.catchUps.Add(1)
	observeCheckpoint(&w.ckptObserver, "catchup", start)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
