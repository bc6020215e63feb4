package store

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
)

// What a lease does, step by step, on the backend under test: taken when
// free, renewed by its holder, refused to another while it runs, taken
// over once it expired, given up by its holder alone.
func TestLeaseTakeRenewRefuseExpireRelease(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	const long = time.Hour
	type step struct {
		what          string
		op            string // take, release
		name, holder  string
		ttl           time.Duration
		held          bool
		holderAfter   string
		retryUntilNow bool // take again until it holds (an expiry to wait out)
	}
	for _, s := range []step{
		{what: "a free lease is taken", op: "take", name: "bulk", holder: "node-a", ttl: long, held: true, holderAfter: "node-a"},
		{what: "its holder renews it", op: "take", name: "bulk", holder: "node-a", ttl: long, held: true, holderAfter: "node-a"},
		{what: "another is refused while it runs", op: "take", name: "bulk", holder: "node-b", ttl: long, held: false, holderAfter: "node-a"},
		{what: "another lease is another's to take", op: "take", name: "purge", holder: "node-b", ttl: long, held: true, holderAfter: "node-b"},
		{what: "only the holder releases", op: "release", name: "bulk", holder: "node-b", holderAfter: "node-a"},
		{what: "still refused", op: "take", name: "bulk", holder: "node-b", ttl: long, held: false, holderAfter: "node-a"},
		{what: "the holder releases", op: "release", name: "bulk", holder: "node-a"},
		{what: "a released lease is free at once", op: "take", name: "bulk", holder: "node-b", ttl: long, held: true, holderAfter: "node-b"},
		{what: "a short claim", op: "take", name: "webhook:e1", holder: "node-a", ttl: 20 * time.Millisecond, held: true, holderAfter: "node-a"},
		{what: "is taken over once it expired", op: "take", name: "webhook:e1", holder: "node-b", ttl: long, held: true, holderAfter: "node-b", retryUntilNow: true},
		{what: "and then refused to its old holder", op: "take", name: "webhook:e1", holder: "node-a", ttl: long, held: false, holderAfter: "node-b"},
	} {
		switch s.op {
		case "take":
			l := Lease{Name: s.name, Holder: s.holder, TTL: s.ttl}
			before := time.Now()
			st, err := db.TakeLease(ctx, l)
			for s.retryUntilNow && err == nil && !st.Held {
				if st.Holder == s.holder || st.Left > s.ttl {
					t.Fatalf("%s: refused with %+v", s.what, st)
				}
				waitFor(t, "the claim to run out", func() bool { return time.Since(before) > st.Left })
				before = time.Now()
				st, err = db.TakeLease(ctx, l)
			}
			if err != nil {
				t.Fatalf("%s: %v", s.what, err)
			}
			if st.Held != s.held || st.Holder != s.holderAfter || st.Left <= 0 || st.Left > long {
				t.Fatalf("%s: %+v, want held %v by %s", s.what, st, s.held, s.holderAfter)
			}
			if st.Held && (st.Left > s.ttl || st.Until.After(time.Now().Add(s.ttl))) {
				t.Fatalf("%s: held for %v (until %v), longer than its TTL %v", s.what, st.Left, st.Until, s.ttl)
			}
		case "release":
			if err := db.ReleaseLease(ctx, s.name, s.holder); err != nil {
				t.Fatalf("%s: %v", s.what, err)
			}
		}
		got := ""
		rows, err := db.read.Query(db.dialect.bind(`SELECT holder FROM leases WHERE name = ?`), s.name)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			rows.Scan(&got)
		}
		rows.Close()
		if got != s.holderAfter {
			t.Fatalf("%s: the row names %q, want %q", s.what, got, s.holderAfter)
		}
	}
}

// A malformed lease is refused before anything is written.
func TestLeaseRefusesWhatIsMalformed(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	for _, l := range []Lease{
		{Name: "", Holder: "a", TTL: time.Second},
		{Name: "bulk", Holder: "", TTL: time.Second},
		{Name: strings.Repeat("n", maxLeaseNameLen+1), Holder: "a", TTL: time.Second},
		{Name: "bulk\xff", Holder: "a", TTL: time.Second},
		{Name: "bulk", Holder: "a", TTL: 0},
		{Name: "bulk", Holder: "a", TTL: -time.Second},
		{Name: "bulk", Holder: "a", TTL: 2 * time.Hour},
	} {
		if _, err := db.TakeLease(ctx, l); err == nil {
			t.Errorf("took %+v", l)
		}
	}
	if err := db.ReleaseLease(ctx, "", "a"); err == nil {
		t.Error("released a lease without a name")
	}
	if n := rawCount(t, db, `SELECT count(*) FROM leases`); n != 0 {
		t.Fatalf("%d leases written", n)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "chatd.db"), Options{Schema: testSchema, JobLeaseTTL: 2 * time.Hour}); err == nil {
		t.Fatal("opened with a job lease of two hours")
	}
}

// NodeID names each opened store apart.
func TestLeaseHoldersAreNamedPerProcess(t *testing.T) {
	a, b := openTestDB(t, Options{}), openTestDB(t, Options{})
	if a.NodeID() == "" || a.NodeID() == b.NodeID() {
		t.Fatalf("node ids %q and %q", a.NodeID(), b.NodeID())
	}
}

// A lease left in a SQLite file (by a server of an earlier version killed
// while it held it) keeps nothing waiting: the next server holds the file
// alone, so its jobs take no lease and run at once.
func TestLeaseOfADeadSQLiteServerIsIgnoredAtRestart(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "chatd.db")
	first := openTestDBAt(t, path, Options{})
	alice, _ := mustUser(t, first, "alice")
	room := mustRoom(t, first, alice)
	if _, err := first.CreateBulkJob(ctx, alice, BulkChats, []string{room.ID}, false); err != nil {
		t.Fatal(err)
	}
	// What a SIGKILL leaves: the worker's lease, unreleased, for an hour.
	if st, err := first.TakeLease(ctx, Lease{Name: "bulk", Holder: first.NodeID(), TTL: time.Hour}); err != nil || !st.Held {
		t.Fatalf("take: %+v %v", st, err)
	}
	first.Close()

	second := openTestDBAt(t, path, Options{JobLeaseTTL: time.Hour})
	second.StartBulkWorker()
	waitFor(t, "the job, run by the restarted server", func() bool {
		return rawCount(t, second, `SELECT count(*) FROM bulk_jobs WHERE status = 'completed'`) == 1
	})
	if held := second.LeasesHeld(); held["bulk"] != 1 {
		t.Fatalf("leases held %v", held)
	}
	if n := rawCount(t, second, `SELECT count(*) FROM leases WHERE holder = ?`, second.NodeID()); n != 0 {
		t.Fatalf("the bulk worker of a SQLite server wrote %d leases", n)
	}
}

// openNode opens one more store on the PostgreSQL database at url: a node
// of a cluster.
func openNode(t *testing.T, url string, opts Options) *DB {
	t.Helper()
	opts.Schema, opts.PostgresSchema = testSchema, testPostgresSchema
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := Open(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// holderOf is the holder of the lease name, "" when nobody holds it.
func holderOf(t *testing.T, db *DB, name string) string {
	t.Helper()
	var holder string
	rows, err := db.read.Query(db.dialect.bind(`SELECT holder FROM leases WHERE name = ?`), name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(&holder); err != nil {
			t.Fatal(err)
		}
	}
	return holder
}

// bulkRooms queues a job on db deleting n rooms of a new person's and
// returns the job and the rooms' ids.
func bulkRooms(t *testing.T, db *DB, handle string, n int) (*User, *BulkJob, []string) {
	t.Helper()
	u, _ := mustUser(t, db, handle)
	var ids []string
	for range n {
		ids = append(ids, mustRoom(t, db, u).ID)
	}
	job, err := db.CreateBulkJob(context.Background(), u, BulkChats, ids, false)
	if err != nil {
		t.Fatal(err)
	}
	return u, job, ids
}

// deletedOnce checks that every room of ids was deleted by the job, and
// its deletion pushed by no node twice. The job reads completed once its
// last item commits, and that item's deletion is pushed just after the
// commit, so it may still be on its way.
func deletedOnce(t *testing.T, job *BulkJob, ids []string, pushes ...*roomDeletions) {
	t.Helper()
	if job.Status != "completed" || renderItems(job) != strings.TrimSuffix(strings.Repeat("succeeded,", len(ids)), ",") {
		t.Fatalf("job %s: %s", job.Status, renderItems(job))
	}
	pushed := func() map[string]int {
		seen := map[string]int{}
		for i, p := range pushes {
			mine := map[string]bool{}
			for _, id := range p.list() {
				if mine[id] {
					t.Fatalf("node %d pushed the deletion of %s twice", i, id)
				}
				mine[id] = true
				seen[id]++
			}
		}
		return seen
	}
	waitFor(t, "every deletion pushed", func() bool {
		seen := pushed()
		for _, id := range ids {
			if seen[id] == 0 {
				return false
			}
		}
		return true
	})
}

// Two nodes run the bulk worker; a job queued on the one that does not
// hold the lease is run once, by the one that does, which learns of it by
// polling: each item is deleted once (a second run would find it gone,
// not_found) and no node pushes a deletion twice.
func TestPostgresLeaseRunsABulkJobOnceOnTwoNodes(t *testing.T) {
	url := pgtest.NewDatabase(t)
	opts := Options{JobPoll: 20 * time.Millisecond}
	a, b := openNode(t, url, opts), openNode(t, url, opts)
	var pushedA, pushedB roomDeletions
	a.SetPublisher(pushedA.publish)
	b.SetPublisher(pushedB.publish)
	a.StartBulkWorker()
	waitFor(t, "a to hold the bulk lease", func() bool { return holderOf(t, a, "bulk") == a.NodeID() })
	b.StartBulkWorker()

	u, job, ids := bulkRooms(t, b, "alice", 12)
	done := waitForJob(t, b, u, job.ID)
	deletedOnce(t, done, ids, &pushedA, &pushedB)
	if a.LeasesHeld()["bulk"] != 1 || b.LeasesHeld()["bulk"] != 0 {
		t.Fatalf("leases held: a %v, b %v", a.LeasesHeld(), b.LeasesHeld())
	}
}

// Two nodes run the purge worker; a retention setting made on the one that
// does not hold the lease is purged by the one that does, which learns of
// it by polling, and each message is deleted once.
func TestPostgresLeaseRunsThePurgeOnceOnTwoNodes(t *testing.T) {
	url := pgtest.NewDatabase(t)
	opts := Options{JobPoll: 20 * time.Millisecond}
	a, b := openNode(t, url, opts), openNode(t, url, opts)
	alice, _ := mustUser(t, a, "alice")
	helper, _ := mustAgent(t, a, alice, "Helper")
	k := &retentionKit{searchKit: &searchKit{db: a, alice: UserActor(alice), helper: AgentActor(helper)}, now: time.Now().UTC()}
	k.room = mustRoom(t, a, alice).ID
	if _, err := a.AddParticipant(context.Background(), k.alice, k.room, helper.ID, ""); err != nil {
		t.Fatal(err)
	}
	const old = 30
	for i := range old {
		k.at(t, k.say(t, k.room, fmt.Sprint("old ", i)), k.now.Add(-48*time.Hour))
	}
	k.say(t, k.room, "new")

	a.StartPurgeWorker(time.Hour)
	waitFor(t, "a's first pass", func() bool { return a.PurgeStats().Passes >= 1 })
	b.StartPurgeWorker(time.Hour)
	if _, err := b.SetOrganizationRetention(context.Background(), alice, Periods{TextDays: days(1)}); err != nil {
		t.Fatal(err)
	}
	// The counts move just after the step's commit, which the rows' absence
	// shows a moment sooner: wait for both.
	waitFor(t, "the purge of the old messages", func() bool {
		return k.contents(t, k.room) == "new" && a.PurgeStats().Texts+b.PurgeStats().Texts >= old
	})
	if sa, sb := a.PurgeStats(), b.PurgeStats(); sa.Texts+sb.Texts != old || sb.Passes != 0 {
		t.Fatalf("purged: a %+v, b %+v; want %d texts in all, none by b", sa, sb, old)
	}
}

// A node that stops gracefully releases its jobs' leases: another, which
// looks every JobPoll, takes them over at once, not when they would have
// expired (in an hour here).
func TestPostgresLeaseMovesAtOnceWhenItsHolderCloses(t *testing.T) {
	url := pgtest.NewDatabase(t)
	opts := Options{JobPoll: 20 * time.Millisecond, JobLeaseTTL: time.Hour}
	a, b := openNode(t, url, opts), openNode(t, url, opts)
	a.StartBulkWorker()
	waitFor(t, "a to hold the bulk lease", func() bool { return holderOf(t, a, "bulk") == a.NodeID() })
	b.StartBulkWorker()
	a.Close()
	u, job, ids := bulkRooms(t, b, "alice", 3)
	var pushed roomDeletions
	b.SetPublisher(pushed.publish)
	deletedOnce(t, waitForJob(t, b, u, job.ID), ids, &pushed)
	if got := holderOf(t, b, "bulk"); got != b.NodeID() {
		t.Fatalf("the bulk lease is %q's", got)
	}
}

// A node cut off from the database (here its write connection is ended
// under it, as a crash or a network failure would) can neither renew its
// jobs' leases nor release them: another node takes them over once they
// expire, and finishes the job. No item runs twice.
func TestPostgresLeaseMovesWhenItsHolderIsCutOff(t *testing.T) {
	url := pgtest.NewDatabase(t)
	opts := Options{JobPoll: 20 * time.Millisecond, JobLeaseTTL: 600 * time.Millisecond}
	a, b := openNode(t, url, opts), openNode(t, url, opts)
	var pushedA, pushedB roomDeletions
	a.SetPublisher(pushedA.publish)
	b.SetPublisher(pushedB.publish)
	a.StartBulkWorker()
	waitFor(t, "a to hold the bulk lease", func() bool { return holderOf(t, a, "bulk") == a.NodeID() })
	b.StartBulkWorker()

	var writer int
	if err := a.Write(context.Background(), func(tx *Tx) error { return tx.QueryRow(`SELECT pg_backend_pid()`).Scan(&writer) }); err != nil {
		t.Fatal(err)
	}
	execOn(t, url, fmt.Sprintf(`SELECT pg_terminate_backend(%d)`, writer))
	u, job, ids := bulkRooms(t, b, "alice", 6)
	deletedOnce(t, waitForJob(t, b, u, job.ID), ids, &pushedA, &pushedB)
	if got := holderOf(t, b, "bulk"); got != b.NodeID() {
		t.Fatalf("the bulk lease is %q's", got)
	}
	waitFor(t, "a to count the lease lost", func() bool { return a.LeasesHeld()["bulk"] == 0 })
}

// A worker whose renewal finds its lease taken (its claim ran out while it
// was held up, and another process took it) stops working, waits for the
// lease, and goes on once it is free again.
func TestPostgresLeaseLostStopsTheJobUntilTakenAgain(t *testing.T) {
	db := openNode(t, pgtest.NewDatabase(t), Options{JobPoll: 20 * time.Millisecond, JobLeaseTTL: 300 * time.Millisecond})
	db.StartBulkWorker()
	waitFor(t, "the worker to hold its lease", func() bool { return holderOf(t, db, "bulk") == db.NodeID() })
	// Another process took it over, for an hour.
	rawExec(t, db, `UPDATE leases SET holder = 'elsewhere', expires_at = expires_at + 3600000000 WHERE name = 'bulk'`)
	waitFor(t, "the worker to learn it lost the lease", func() bool { return db.LeasesHeld()["bulk"] == 0 })
	u, job, ids := bulkRooms(t, db, "alice", 2)
	if got, err := db.BulkJobOf(context.Background(), u, job.ID); err != nil || got.Status != "queued" {
		t.Fatalf("the job without the lease: %+v %v", got, err)
	}
	// That process released it.
	rawExec(t, db, `DELETE FROM leases WHERE holder = 'elsewhere'`)
	var pushed roomDeletions
	db.SetPublisher(pushed.publish)
	deletedOnce(t, waitForJob(t, db, u, job.ID), ids, &pushed)
	if db.LeasesHeld()["bulk"] != 1 {
		t.Fatalf("leases held %v", db.LeasesHeld())
	}
}
