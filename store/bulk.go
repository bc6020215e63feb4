package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"
)

// Bulk deletion: a person submits up to MaxBulkIDs rooms or agents to delete,
// and a worker deletes them one by one in the background while the person
// polls the job.
//
// The job and its items live in the database, and each item's deletion is
// written in the same transaction as its outcome, so an item never runs twice
// and a job interrupted by a restart resumes at its first pending item.
//
// An item the rules refuse (not found, not the caller's, execution history
// without force) is a failed item of a job that goes on. A job fails only
// when an item's deletion hits an unexpected error (storage, a bug): that
// item is rolled back and marked delete_failed, every later item
// not_attempted (left untouched, safe to resubmit), and the job stops.

// MaxBulkIDs bounds the targets of one bulk deletion job.
const MaxBulkIDs = 100

// The resource types of a bulk deletion job.
const (
	BulkChats  = "chat"
	BulkAgents = "agent"
)

// The item codes that are not the deletion's own refusals.
const (
	CodeDeleteFailed Code = "delete_failed" // the item's deletion hit an unexpected error; the job failed there
	CodeNotAttempted Code = "not_attempted" // the job failed before this item; nothing was done to it
)

// BulkJob is a bulk deletion job with its items in submitted order.
type BulkJob struct {
	ID           string
	UserID       string
	ResourceType string // BulkChats or BulkAgents
	Force        bool
	Status       string // queued, processing, completed, failed
	InsertedAt   time.Time
	StartedAt    *time.Time
	CompletedAt  *time.Time
	Items        []BulkItem
}

// BulkItem is one target of a job.
type BulkItem struct {
	ID     string // the target id, as submitted
	Status string // pending, succeeded, failed
	Error  *Error // nil unless failed; Code and Message only
}

// Counts returns the job's processed, succeeded and failed items.
func (j *BulkJob) Counts() (processed, succeeded, failed int) {
	for _, it := range j.Items {
		switch it.Status {
		case "succeeded":
			succeeded++
		case "failed":
			failed++
		}
	}
	return succeeded + failed, succeeded, failed
}

// CreateBulkJob queues a job deleting ids (already validated: 1..MaxBulkIDs
// unique strings) of resourceType for caller. While the open jobs (queued or
// processing) of everyone reach the bulk queue's bound, it refuses with
// CodeUnavailable, like a full write queue: a retry soon will pass.
func (db *DB) CreateBulkJob(ctx context.Context, caller *User, resourceType string, ids []string, force bool) (*BulkJob, error) {
	if resourceType != BulkChats && resourceType != BulkAgents {
		return nil, Errorf(CodeBadRequest, "unknown bulk resource type %q", resourceType)
	}
	if len(ids) == 0 || len(ids) > MaxBulkIDs {
		return nil, Problems{"/ids": {"must hold 1 to 100 ids"}}.Err(CodeValidation)
	}
	job := &BulkJob{ID: newID(), UserID: caller.ID, ResourceType: resourceType, Force: force, Status: "queued"}
	err := db.Write(ctx, func(tx *Tx) error {
		var open int
		if err := tx.QueryRow(`SELECT count(*) FROM bulk_jobs WHERE status IN ('queued', 'processing')`).Scan(&open); err != nil {
			return err
		}
		if open >= db.bulkQueue {
			return ErrBulkQueueFull
		}
		job.InsertedAt = tx.Now()
		if _, err := tx.Exec(`INSERT INTO bulk_jobs (id, user_id, resource_type, force, inserted_at) VALUES (?, ?, ?, ?, ?)`,
			job.ID, caller.ID, resourceType, boolInt(force), job.InsertedAt.UnixMicro()); err != nil {
			return err
		}
		job.Items = make([]BulkItem, len(ids))
		for i, id := range ids {
			if _, err := tx.Exec(`INSERT INTO bulk_job_items (job_id, position, target_id) VALUES (?, ?, ?)`, job.ID, i, id); err != nil {
				return err
			}
			job.Items[i] = BulkItem{ID: id, Status: "pending"}
		}
		tx.AfterCommit(db.bulk.poke)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// BulkJobOf returns a job its caller created; anyone else's, an unknown or a
// malformed id is not found.
func (db *DB) BulkJobOf(ctx context.Context, caller *User, jobID string) (*BulkJob, error) {
	if !ValidID(jobID) {
		return nil, notFound("bulk deletion")
	}
	var job *BulkJob
	err := db.readTx(ctx, func(q readQ) error {
		var err error
		job, err = loadBulkJob(q, jobID)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && job.UserID != caller.ID) {
			return notFound("bulk deletion")
		}
		return err
	})
	return job, err
}

func loadBulkJob(q queryer, jobID string) (*BulkJob, error) {
	var j BulkJob
	var ins int64
	var started, completed sql.NullInt64
	err := q.QueryRow(`SELECT id, user_id, resource_type, force, status, inserted_at, started_at, completed_at FROM bulk_jobs WHERE id = ?`, jobID).
		Scan(&j.ID, &j.UserID, &j.ResourceType, &j.Force, &j.Status, &ins, &started, &completed)
	if err != nil {
		return nil, err
	}
	j.InsertedAt = fromMicros(ins)
	j.StartedAt, j.CompletedAt = optionalMicros(started), optionalMicros(completed)
	rows, err := q.Query(`SELECT target_id, status, error_code, error_message FROM bulk_job_items WHERE job_id = ? ORDER BY position`, jobID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var it BulkItem
		var code, msg sql.NullString
		if err := rows.Scan(&it.ID, &it.Status, &code, &msg); err != nil {
			return nil, err
		}
		if code.Valid {
			it.Error = &Error{Code: Code(code.String), Message: msg.String}
		}
		j.Items = append(j.Items, it)
	}
	return &j, rows.Err()
}

func optionalMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// bulkWorker runs the open jobs, oldest first, one item per write. Of the
// processes sharing the database, the one holding the "bulk" lease runs
// them (leases.go); the others wait to take it over.
type bulkWorker struct {
	mu      sync.Mutex
	cancel  context.CancelFunc // nil while not running
	stopped chan struct{}
	wake    chan struct{} // a job was queued
}

// poke wakes the worker if it waits; it never blocks (it runs after commit,
// on the writer goroutine).
func (b *bulkWorker) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// StartBulkWorker starts running bulk deletion jobs, resuming any left open
// by an earlier run, once this process holds the bulk lease. Start it once
// changes are published to where they should go (the server installs its
// publisher first), so that the pushes of resumed deletions are not lost.
// Starting it twice is harmless.
func (db *DB) StartBulkWorker() {
	b := &db.bulk
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.stopped = cancel, make(chan struct{})
	go func(stopped chan struct{}) {
		defer close(stopped)
		db.jobLease("bulk").run(ctx, db.runBulk)
	}(b.stopped)
}

// StopBulkWorker stops the worker after the item it is on (whose write then
// committed or never started), releases its lease and waits for it. Open
// jobs stay open, to be resumed by whoever takes the lease next.
func (db *DB) StopBulkWorker() {
	b := &db.bulk
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel == nil {
		return
	}
	b.cancel()
	<-b.stopped
	b.cancel, b.stopped = nil, nil
}

// bulkRetry paces the worker after a write that did not go through (a full
// write queue, a locked database, a failing disk): the item is still pending,
// so trying again later is always safe. The pause doubles up to
// bulkRetryMax while the failure lasts, so a lasting one does not flood the log.
const (
	bulkRetry    = 100 * time.Millisecond
	bulkRetryMax = 5 * time.Second
)

// runBulk runs the open jobs while this process holds the bulk lease,
// until ctx ends. Between jobs it sleeps until one is queued here, or for
// JobPoll, after which it looks for jobs other processes queued: a read,
// so that an idle worker takes no turn at the write lock. Each step reads
// and changes its item under that lock, so a step that overlaps a takeover
// (its lease lost just as it was written) still runs no item twice.
func (db *DB) runBulk(ctx context.Context) {
	retry := bulkRetry
	for ctx.Err() == nil {
		open, err := db.bulkJobsOpen(ctx)
		var worked bool
		if err == nil && open {
			err = db.Write(context.Background(), func(tx *Tx) error {
				var err error
				worked, err = db.bulkStep(tx)
				return err
			})
		}
		wait := db.jobPoll
		switch {
		case errors.Is(err, ErrClosed), ctx.Err() != nil:
			return
		case err != nil:
			db.log.Warn("bulk deletion step failed; retrying", "err", err, "in", retry)
			wait, retry = retry, min(2*retry, bulkRetryMax)
		case worked:
			retry = bulkRetry
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-db.bulk.wake:
		case <-time.After(wait):
		}
	}
}

// bulkJobsOpen reports whether a job is queued or processing.
func (db *DB) bulkJobsOpen(ctx context.Context) (bool, error) {
	var open bool
	err := db.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bulk_jobs WHERE status IN ('queued', 'processing'))`).Scan(&open)
	return open, err
}

// bulkStep runs the first pending item of the oldest open job, and records
// its outcome and the job's state, all in tx. It reports whether there was
// anything to do.
func (db *DB) bulkStep(tx *Tx) (bool, error) {
	var jobID, userID, kind, status string
	var force bool
	err := tx.QueryRow(`SELECT id, user_id, resource_type, force, status FROM bulk_jobs
		WHERE status IN ('queued', 'processing') ORDER BY inserted_at, id LIMIT 1`).Scan(&jobID, &userID, &kind, &force, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ts := tx.Now().UnixMicro()
	if status == "queued" {
		if _, err := tx.Exec(`UPDATE bulk_jobs SET status = 'processing', started_at = ? WHERE id = ?`, ts, jobID); err != nil {
			return false, err
		}
	}
	var position int
	var target string
	err = tx.QueryRow(`SELECT position, target_id FROM bulk_job_items WHERE job_id = ? AND status = 'pending' ORDER BY position LIMIT 1`, jobID).
		Scan(&position, &target)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = tx.Exec(`UPDATE bulk_jobs SET status = 'completed', completed_at = ? WHERE id = ?`, ts, jobID)
		return true, err
	}
	if err != nil {
		return false, err
	}
	caller, err := scanUser(tx.QueryRow(`SELECT `+userColumns+` FROM users WHERE id = ?`, userID))
	if err != nil {
		return false, err
	}

	outcome, err := db.bulkDelete(tx, caller, kind, target, force)
	if err != nil {
		return false, err
	}
	if outcome == nil {
		_, err = tx.Exec(`UPDATE bulk_job_items SET status = 'succeeded' WHERE job_id = ? AND position = ?`, jobID, position)
	} else {
		_, err = tx.Exec(`UPDATE bulk_job_items SET status = 'failed', error_code = ?, error_message = ? WHERE job_id = ? AND position = ?`,
			outcome.Code, outcome.Message, jobID, position)
	}
	if err != nil {
		return false, err
	}
	if outcome != nil && outcome.Code == CodeDeleteFailed {
		if _, err := tx.Exec(`UPDATE bulk_job_items SET status = 'failed', error_code = ?, error_message = ? WHERE job_id = ? AND status = 'pending'`,
			CodeNotAttempted, "not attempted: the job stopped at an earlier item; nothing was done to this one", jobID); err != nil {
			return false, err
		}
		_, err = tx.Exec(`UPDATE bulk_jobs SET status = 'failed', completed_at = ? WHERE id = ?`, ts, jobID)
		return true, err
	}
	var pending int
	if err := tx.QueryRow(`SELECT count(*) FROM bulk_job_items WHERE job_id = ? AND status = 'pending'`, jobID).Scan(&pending); err != nil {
		return false, err
	}
	if pending == 0 {
		_, err = tx.Exec(`UPDATE bulk_jobs SET status = 'completed', completed_at = ? WHERE id = ?`, ts, jobID)
	}
	return true, err
}

// bulkDelete deletes one target inside a savepoint of its own and returns
// nil when it was deleted, or the item's error: the deletion's refusal, or
// delete_failed when anything else went wrong. Either way the savepoint
// undoes the target's partial work and its after-commit effects, so the
// outcome can still be recorded in tx. A non-nil error means tx itself
// is unusable.
func (db *DB) bulkDelete(tx *Tx, caller *User, kind, target string, force bool) (*Error, error) {
	if _, err := tx.Exec(`SAVEPOINT bulk_item`); err != nil {
		return nil, err
	}
	effects := len(tx.afterCommit)
	var err error
	if kind == BulkAgents {
		_, err = db.deleteAgent(tx, caller, target, force)
	} else {
		err = db.deleteRoom(tx, UserActor(caller), target)
	}
	if err != nil {
		tx.afterCommit = tx.afterCommit[:effects]
		if _, rerr := tx.Exec(`ROLLBACK TO bulk_item`); rerr != nil {
			return nil, rerr
		}
	}
	if _, rerr := tx.Exec(`RELEASE bulk_item`); rerr != nil {
		return nil, rerr
	}
	if err == nil {
		return nil, nil
	}
	var e *Error
	if errors.As(err, &e) {
		switch e.Code {
		case CodeNotFound, CodeForbidden, CodeExecutionHistoryExists:
			return &Error{Code: e.Code, Message: e.Message}, nil
		}
	}
	db.log.Error("bulk deletion item failed", "type", kind, "target", target, "err", err)
	return &Error{Code: CodeDeleteFailed, Message: "the deletion failed; the job stopped here"}, nil
}

// BulkJobCounts returns how many bulk deletion jobs are in each status
// (queued, processing, completed, failed), for the metrics.
func (db *DB) BulkJobCounts(ctx context.Context) (map[string]int, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT status, count(*) FROM bulk_jobs GROUP BY status`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := map[string]int{"queued": 0, "processing": 0, "completed": 0, "failed": 0}
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return nil, err
		}
		counts[status] = n
	}
	return counts, rows.Err()
}
