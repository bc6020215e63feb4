package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Leases keep a piece of background work in one process at a time when
// several chatd processes share a PostgreSQL database: the bulk deletion
// worker, the retention purge, and the sends of each webhook endpoint. A
// lease is a row of the leases table: its name, its holder (a process's
// NodeID) and when it expires. The holder renews it while it works; a
// holder that stops renewing (it ended, or died) loses the lease when it
// expires, and another process takes it. Taking, renewing and releasing
// are writes through the writer, so each is one transaction under the
// database's one write lock, as atomic across nodes as on SQLite.
//
// Expiry is read from the database's clock (dialect.clockMicros), never a
// node's own: nodes whose clocks disagree still agree on when a lease
// ends.
//
// A SQLite file has one server at a time (`chatd serve` holds its server
// lock): neither its jobs (runAlone) nor its webhook sends take a lease
// there, so a restart after a crash goes on at once, whatever leases an
// earlier server left. On PostgreSQL a lease is only ever taken over once
// it expired: a node restarted after a SIGKILL waits out what its earlier
// self held, as the other nodes do.

// Lease is a claim TakeLease makes.
type Lease struct {
	// Name is what is claimed: "bulk", "purge", "webhook:<endpoint id>".
	// The part before the first colon is its kind, which the metrics
	// count by.
	Name string
	// Holder is who claims it: a process's NodeID.
	Holder string
	// TTL is how long the claim lasts unless the holder renews it.
	TTL time.Duration
}

// Bounds of a lease's fields: names and holders are chatd's own short
// strings; a TTL past an hour would hold a dead node's work for too long.
const (
	maxLeaseNameLen = 200
	minLeaseTTL     = time.Millisecond
	maxLeaseTTL     = time.Hour
)

func (l Lease) check() error {
	for _, f := range []struct{ field, v string }{{"name", l.Name}, {"holder", l.Holder}} {
		if f.v == "" || len(f.v) > maxLeaseNameLen || !utf8.ValidString(f.v) {
			return fmt.Errorf("lease %s %q: must be 1 to %d bytes of UTF-8", f.field, f.v, maxLeaseNameLen)
		}
	}
	if l.TTL < minLeaseTTL || l.TTL > maxLeaseTTL {
		return fmt.Errorf("lease %q: TTL %v is not from %v to %v", l.Name, l.TTL, minLeaseTTL, maxLeaseTTL)
	}
	return nil
}

// LeaseState is what TakeLease found.
type LeaseState struct {
	// Held: the lease is the caller's now.
	Held bool
	// Holder is who holds the lease: the caller, when Held.
	Holder string
	// Left is how long the holder's claim had to run when it was read:
	// how long to wait before trying again, when another holds it.
	Left time.Duration
	// Until is when the claim ends at the latest by this process's clock:
	// Left counted from before the write, since the database read its
	// clock after that. A holder stops relying on its lease by then.
	Until time.Time
}

// TakeLease takes l.Name for l.Holder until l.TTL from now when nobody
// holds it or its holder's claim has expired, or renews it when l.Holder
// holds it already; while another holder's claim runs, it changes nothing
// and says whose it is and for how long.
func (db *DB) TakeLease(ctx context.Context, l Lease) (LeaseState, error) {
	if err := l.check(); err != nil {
		return LeaseState{}, err
	}
	var st LeaseState
	start := time.Now()
	err := db.Write(ctx, func(tx *Tx) error {
		clock := db.dialect.clockMicros
		// One statement: a new lease, an expired one taken over, or the
		// holder's own renewed; when the WHERE refuses, no row changes.
		if _, err := tx.Exec(`INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, `+clock+` + ?)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE leases.holder = excluded.holder OR leases.expires_at <= `+clock,
			l.Name, l.Holder, l.TTL.Microseconds()); err != nil {
			return err
		}
		var left int64
		if err := tx.QueryRow(`SELECT holder, expires_at - `+clock+` FROM leases WHERE name = ?`, l.Name).Scan(&st.Holder, &left); err != nil {
			return err
		}
		st.Held, st.Left = st.Holder == l.Holder, max(0, time.Duration(left)*time.Microsecond)
		st.Until = start.Add(st.Left)
		return nil
	})
	if err != nil {
		return LeaseState{}, err
	}
	if l.Holder == db.nodeID {
		db.leases.note(l, st)
	}
	return st, nil
}

// ReleaseLease gives up holder's lease name, if it holds it, so that
// another process may take it at once rather than when it expires.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := (Lease{Name: name, Holder: holder, TTL: minLeaseTTL}).check(); err != nil {
		return err
	}
	err := db.Write(ctx, func(tx *Tx) error {
		_, err := tx.Exec(`DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder)
		return err
	})
	if err == nil && holder == db.nodeID {
		db.leases.forget(name)
	}
	return err
}

// NodeID names this process among those sharing the database: the
// holder of its leases, as the leases table shows them. It is drawn at
// Open: the host's name, the process id and random bytes, so that a
// restarted process is a new holder.
func (db *DB) NodeID() string { return db.nodeID }

func newNodeID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r < '!' || r > '~' {
			return '_'
		}
		return r
	}, host)
	if len(host) > 64 {
		host = host[:64]
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
}

// leaseBook is what this process knows of the leases it holds: when each
// runs out at the latest, by its own clock (LeaseState.Until).
type leaseBook struct {
	mu   sync.Mutex
	held map[string]time.Time
}

func (b *leaseBook) note(l Lease, st LeaseState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		b.held = map[string]time.Time{}
	}
	if st.Held {
		b.held[l.Name] = st.Until
	} else {
		delete(b.held, l.Name)
	}
}

func (b *leaseBook) forget(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.held, name)
}

// LeasesHeld counts the leases this process holds now, by kind (the part
// of the name before its first colon), for the metrics.
func (db *DB) LeasesHeld() map[string]int {
	b := &db.leases
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	now := time.Now()
	for name, until := range b.held {
		if until.After(now) {
			kind, _, _ := strings.Cut(name, ":")
			out[kind]++
		} else {
			delete(b.held, name)
		}
	}
	return out
}

// Defaults of Options.JobLeaseTTL and Options.JobPoll.
const (
	DefaultJobLeaseTTL = 20 * time.Second
	DefaultJobPoll     = 2 * time.Second
)

// leaseRetry paces a job's attempts to take or renew its lease after a
// write that failed (a full queue, a database out of reach); it doubles up
// to a third of the TTL while the failure lasts.
const leaseRetry = 100 * time.Millisecond

// jobLease keeps a background job of this process (the bulk deletion
// worker, the retention purge) on one process of those sharing the
// database: the one holding the lease called name.
type jobLease struct {
	db   *DB
	name string
	ttl  time.Duration
}

func (db *DB) jobLease(name string) *jobLease {
	return &jobLease{db: db, name: name, ttl: db.jobLeaseTTL}
}

func (l *jobLease) lease() Lease { return Lease{Name: l.name, Holder: l.db.nodeID, TTL: l.ttl} }

// take takes or renews the lease.
func (l *jobLease) take() (LeaseState, error) {
	return l.db.TakeLease(context.Background(), l.lease())
}

// run calls work each time this process holds the lease, until ctx ends.
// It takes the lease; while another process holds it, it looks every
// JobPoll (a read) whether that one released it, and tries again when it
// did or its claim ran out, so a job moves here at once from a holder that
// stopped, and within the TTL from one that died. While work runs the
// lease is renewed every third of the TTL; work's context ends when ctx
// does, or when the lease is lost (a renewal found another holder, or none
// went through before the claim ran out), and then run releases the lease
// if it still holds it, and returns once ctx ended or tries to take it
// again.
func (l *jobLease) run(ctx context.Context, work func(context.Context)) {
	if !l.db.SharesChanges() {
		l.runAlone(ctx, work)
		return
	}
	retry := leaseRetry
	for ctx.Err() == nil {
		st, err := l.take()
		switch {
		case errors.Is(err, ErrClosed):
			return
		case err != nil:
			l.db.log.Warn("taking a job's lease failed; retrying", "lease", l.name, "err", err, "in", retry)
			if !sleep(ctx, retry) {
				return
			}
			retry = min(2*retry, l.ttl/3)
		case !st.Held:
			l.awaitFree(ctx, st.Left)
		default:
			retry = leaseRetry
			l.hold(ctx, st.Until, work)
		}
	}
}

// runAlone runs work where this process is the database's one server (a
// SQLite file, under the server lock): the job is its own without a lease,
// and an idle server writes nothing to keep one, which would otherwise
// fsync every few seconds and hand Litestream a stream of frames to ship.
func (l *jobLease) runAlone(ctx context.Context, work func(context.Context)) {
	l.db.leases.note(l.lease(), LeaseState{Held: true, Holder: l.db.nodeID, Until: time.Now().AddDate(100, 0, 0)})
	defer l.db.leases.forget(l.name)
	work(ctx)
}

// awaitFree returns when the lease, another's for left more, may be free:
// released, or run out (a little past the end, so that it has by the
// database's clock too), or when ctx ends.
func (l *jobLease) awaitFree(ctx context.Context, left time.Duration) {
	for {
		end := time.Now().Add(left + time.Millisecond)
		if !sleep(ctx, min(time.Until(end), l.db.jobPoll)) || !time.Now().Before(end) {
			return
		}
		held, err := l.db.leaseLeft(ctx, l.name)
		if err != nil || held <= 0 {
			return
		}
		left = held
	}
}

// leaseLeft reads how long the lease name has to run: 0 when nobody holds
// it or its claim ran out.
func (db *DB) leaseLeft(ctx context.Context, name string) (time.Duration, error) {
	var left int64
	err := db.queryRow(ctx, `SELECT expires_at - `+db.dialect.clockMicros+` FROM leases WHERE name = ?`, name).Scan(&left)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return max(0, time.Duration(left)*time.Microsecond), err
}

// hold runs work while renewing the lease, held until until, and releases
// it after work returned if it was not lost meanwhile.
func (l *jobLease) hold(ctx context.Context, until time.Time, work func(context.Context)) {
	wctx, lose := context.WithCancel(ctx)
	defer lose()
	var kept atomic.Bool
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		kept.Store(l.keep(wctx, until, lose))
	}()
	work(wctx)
	lose()
	<-renewing
	if kept.Load() {
		// Released, the next holder starts at once instead of at expiry.
		err := l.db.ReleaseLease(context.Background(), l.name, l.db.nodeID)
		if err != nil && !errors.Is(err, ErrClosed) {
			l.db.log.Warn("releasing a job's lease failed; it expires instead", "lease", l.name, "err", err)
		}
	}
}

// keep renews the lease every third of its TTL until ctx ends, and
// reports whether it still held it then. When the lease is lost it calls
// lose and reports false: another holder has it, or no renewal went
// through while the claim had more than a tenth of its TTL left (the end
// must not come while a step of the work is on its way). A renewal waits
// in the writer's queue like any write, so keep does not wait for it past
// that point: a writer held up (a process frozen, a database out of reach)
// loses the lease in time.
func (l *jobLease) keep(ctx context.Context, until time.Time, lose func()) bool {
	next, retry := l.ttl/3, leaseRetry
	type result struct {
		st  LeaseState
		err error
	}
	for {
		if !sleep(ctx, next) {
			return true
		}
		renewed := make(chan result, 1)
		go func() {
			st, err := l.take()
			renewed <- result{st, err}
		}()
		deadline := time.NewTimer(time.Until(until) - l.ttl/10)
		var r result
		select {
		case r = <-renewed:
		case <-deadline.C:
			r.err = errors.New("no renewal went through before the lease ran out")
		case <-ctx.Done():
			// Let the renewal end first, so that the release comes after
			// it.
			deadline.Stop()
			<-renewed
			return true
		}
		deadline.Stop()
		switch {
		case r.err == nil && r.st.Held:
			until, next, retry = r.st.Until, l.ttl/3, leaseRetry
		case r.err == nil:
			l.db.log.Warn("a job's lease was taken over; stopping the job here", "lease", l.name, "holder", r.st.Holder)
			lose()
			return false
		case time.Until(until) < l.ttl/10 || errors.Is(r.err, ErrClosed):
			l.db.log.Warn("a job's lease could not be renewed in time; stopping the job here", "lease", l.name, "err", r.err)
			lose()
			return false
		default:
			next, retry = min(retry, time.Until(until)/2), min(2*retry, l.ttl/3)
		}
	}
}

// sleep waits d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
