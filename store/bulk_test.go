package store

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// roomDeletions records the rooms whose deletion was published.
type roomDeletions struct {
	mu  sync.Mutex
	ids []string
}

func (r *roomDeletions) publish(c Change) {
	if c.Kind == RoomDeleted {
		r.mu.Lock()
		r.ids = append(r.ids, c.Room.ID)
		r.mu.Unlock()
	}
}

func (r *roomDeletions) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

func mustRoom(t testing.TB, db *DB, u *User) *Room {
	t.Helper()
	room, err := db.CreateRoom(context.Background(), UserActor(u), NewRoom{})
	if err != nil {
		t.Fatal(err)
	}
	return room
}

// renderItems renders a job's items as "status/code" in order, with names
// for the ids.
func renderItems(j *BulkJob) string {
	var out []string
	for _, it := range j.Items {
		s := it.Status
		if it.Error != nil {
			s += "/" + string(it.Error.Code)
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

func waitForJob(t testing.TB, db *DB, u *User, id string) *BulkJob {
	t.Helper()
	var job *BulkJob
	waitFor(t, "the job to end", func() bool {
		var err error
		if job, err = db.BulkJobOf(context.Background(), u, id); err != nil {
			t.Fatal(err)
		}
		return job.Status == "completed" || job.Status == "failed"
	})
	return job
}

// A crash between two items loses nothing and repeats nothing: after the
// restart the job goes on at its first pending item.
func TestBulkJobResumesAfterRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "chatd.db")
	db := openTestDBAt(t, path, Options{})
	alice, _ := mustUser(t, db, "alice")
	bob, _ := mustUser(t, db, "bob")
	r1, r2, r3 := mustRoom(t, db, alice), mustRoom(t, db, alice), mustRoom(t, db, alice)
	bobs := mustRoom(t, db, bob)
	job, err := db.CreateBulkJob(ctx, alice, BulkChats, []string{r1.ID, r2.ID, bobs.ID, r3.ID}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(tx *Tx) error { _, err := db.bulkStep(tx); return err }); err != nil {
		t.Fatal(err)
	}
	mid, err := db.BulkJobOf(ctx, alice, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if mid.Status != "processing" || mid.StartedAt == nil || renderItems(mid) != "succeeded,pending,pending,pending" {
		t.Fatalf("after one item: %s %s", mid.Status, renderItems(mid))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openTestDBAt(t, path, Options{})
	var seen roomDeletions
	db.SetPublisher(seen.publish)
	db.StartBulkWorker()
	done := waitForJob(t, db, alice, job.ID)
	// r1 ran before the crash: run again it would read not_found.
	if done.Status != "completed" || renderItems(done) != "succeeded,succeeded,failed/not_found,succeeded" {
		t.Fatalf("job = %s %s", done.Status, renderItems(done))
	}
	// The job reads completed once its last item commits; that item's
	// deletion is published just after the commit, so it may still be on
	// its way.
	want := r2.ID + "," + r3.ID
	for deadline := time.Now().Add(5 * time.Second); strings.Join(seen.list(), ",") != want && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := strings.Join(seen.list(), ","); got != want {
		t.Fatalf("deleted after the restart %s, want %s", got, want)
	}
	if p, s, f := done.Counts(); p != 4 || s != 3 || f != 1 {
		t.Fatalf("counts %d %d %d", p, s, f)
	}
	if done.CompletedAt == nil || !done.StartedAt.Equal(*mid.StartedAt) {
		t.Fatalf("times: started %v (was %v), completed %v", done.StartedAt, mid.StartedAt, done.CompletedAt)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM rooms WHERE deleted_at IS NULL`); n != 1 {
		t.Fatalf("%d live rooms, want bob's only", n)
	}
}

// An unexpected error while deleting an item fails the job there: the item
// is rolled back (delete_failed), the rest are left alone (not_attempted).
func TestBulkJobFailsOnStorageError(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, Options{})
	alice, _ := mustUser(t, db, "alice")
	r1, r2, r3, r4 := mustRoom(t, db, alice), mustRoom(t, db, alice), mustRoom(t, db, alice), mustRoom(t, db, alice)
	// A real database error in the middle of r2's deletion.
	failRoomDeletion(t, db, r2.ID)
	var seen roomDeletions
	db.SetPublisher(seen.publish)
	job, err := db.CreateBulkJob(ctx, alice, BulkChats, []string{r1.ID, r2.ID, r3.ID, r4.ID}, false)
	if err != nil {
		t.Fatal(err)
	}
	db.StartBulkWorker()
	done := waitForJob(t, db, alice, job.ID)
	if done.Status != "failed" || renderItems(done) != "succeeded,failed/delete_failed,failed/not_attempted,failed/not_attempted" {
		t.Fatalf("job = %s %s", done.Status, renderItems(done))
	}
	if done.CompletedAt == nil {
		t.Fatal("a failed job has no completed_at")
	}
	if got := strings.Join(seen.list(), ","); got != r1.ID {
		t.Fatalf("published deletions %s, want r1 only", got)
	}
	for _, r := range []*Room{r2, r3, r4} {
		if _, err := db.Room(ctx, UserActor(alice), r.ID); err != nil {
			t.Fatalf("room untouched by the failed job is gone: %v", err)
		}
	}
	// The worker goes on with the next job.
	next, err := db.CreateBulkJob(ctx, alice, BulkChats, []string{r3.ID}, false)
	if err != nil {
		t.Fatal(err)
	}
	if done := waitForJob(t, db, alice, next.ID); done.Status != "completed" || renderItems(done) != "succeeded" {
		t.Fatalf("next job = %s %s", done.Status, renderItems(done))
	}
}

func TestBulkJobQueueBoundAndVisibility(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, Options{BulkQueue: 1})
	alice, _ := mustUser(t, db, "alice")
	bob, _ := mustUser(t, db, "bob")
	job, err := db.CreateBulkJob(ctx, alice, BulkAgents, []string{"x"}, true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.CreateBulkJob(ctx, bob, BulkChats, []string{"y"}, false)
	wantCode(t, err, CodeUnavailable)
	if n := rawCount(t, db, `SELECT count(*) FROM bulk_jobs`); n != 1 {
		t.Fatalf("%d jobs after a refusal", n)
	}
	_, err = db.BulkJobOf(ctx, bob, job.ID)
	wantCode(t, err, CodeNotFound)
	_, err = db.BulkJobOf(ctx, alice, "job-1")
	wantCode(t, err, CodeNotFound)
	got, err := db.BulkJobOf(ctx, alice, job.ID)
	if err != nil || got.Status != "queued" || !got.Force || got.ResourceType != BulkAgents || renderItems(got) != "pending" {
		t.Fatalf("job = %+v, %v", got, err)
	}

	db.StartBulkWorker()
	if done := waitForJob(t, db, alice, job.ID); renderItems(done) != "failed/not_found" {
		t.Fatalf("job = %s", renderItems(done))
	}
	if _, err := db.CreateBulkJob(ctx, bob, BulkChats, []string{"y"}, false); err != nil {
		t.Fatalf("a finished job still counts against the bound: %v", err)
	}
	db.StopBulkWorker()
	db.StopBulkWorker()
}

// failRoomDeletion makes the database itself refuse to mark the room
// deleted, with a trigger in each backend's own syntax: a storage failure no
// store function can cause on purpose.
func failRoomDeletion(t *testing.T, db *DB, roomID string) {
	t.Helper()
	if testBackend != "postgres" {
		rawExec(t, db, `CREATE TRIGGER fail_room_deletion BEFORE UPDATE OF deleted_at ON rooms WHEN NEW.id = '`+roomID+`'
			BEGIN SELECT RAISE(ABORT, 'simulated storage failure'); END`)
		return
	}
	rawExec(t, db, `CREATE FUNCTION fail_room_deletion() RETURNS trigger LANGUAGE plpgsql
		AS $$ BEGIN RAISE EXCEPTION 'simulated storage failure'; END $$`)
	rawExec(t, db, `CREATE TRIGGER fail_room_deletion BEFORE UPDATE OF deleted_at ON rooms
		FOR EACH ROW WHEN (NEW.id = '`+roomID+`') EXECUTE FUNCTION fail_room_deletion()`)
}
