package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// On PostgreSQL several chatd nodes share one database, and a write made on
// one must reach the clients of all: their sockets, long-polls and MCP
// waits. So each writer's batch records, in its own transaction, the
// changes its jobs published, as one row of cluster_changes: a change is
// there exactly when it committed, and seq follows commit order (writers
// take turns under the write lock). The commit notifies writesChannel;
// every other node, woken by that, reads the rows it has not seen and
// publishes their changes to its own clients as though it had made them.
// A batch that ended credentials says so, and a node that reads it drops
// its cached principals before publishing, so that a revoked key stops
// working, and its sockets close, on every node within moments.
//
// A node publishes its own changes at once, and another node's when it
// hears of them (a few milliseconds later), so two changes made on two
// nodes at nearly the same moment can reach a client in either order;
// each node's own changes keep their order.

// sharedBatch is what one batch shares with the other processes.
type sharedBatch struct {
	// CredentialsEnded: the batch ended credentials (endCredentials).
	CredentialsEnded bool     `json:"credentials_ended,omitempty"`
	Changes          []Change `json:"changes,omitempty"`
}

func (b *sharedBatch) add(o sharedBatch) {
	b.CredentialsEnded = b.CredentialsEnded || o.CredentialsEnded
	b.Changes = append(b.Changes, o.Changes...)
}

// shareChanges records what the batch's jobs that succeeded published,
// before the batch commits.
func (w *writer) shareChanges(ctx context.Context, batch []*job) error {
	var all sharedBatch
	for _, j := range batch {
		if j.err == nil {
			all.add(j.shared)
		}
	}
	if len(all.Changes) == 0 && !all.CredentialsEnded {
		return nil
	}
	body, err := json.Marshal(all)
	if err != nil {
		return err
	}
	// The origin is the writer connection's server process, as its
	// notifications name it: the process it serves knows its own rows by
	// that (a PostgreSQL-only statement, as sharing is).
	st, err := w.stmt(`INSERT INTO cluster_changes (origin, at, body) VALUES (pg_backend_pid()::text, ?, ?)`)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx, now().UnixMicro(), string(body))
	return err
}

const (
	// sharedChangesKept is how long changes stay in cluster_changes. A
	// node away longer (its connection to the database lost) has missed
	// them anyway; its clients catch up through REST, as after any gap.
	sharedChangesKept = 10 * time.Minute
	// followEvery is how often a node reads cluster_changes unwoken: a
	// backstop for a notification lost with the listening connection.
	followEvery = 5 * time.Second
	// followPage bounds the rows one read brings.
	followPage = 256
)

// follower publishes, on this node, the changes other processes shared.
type follower struct {
	db     *DB
	origin string        // the server process of this store's writer connection
	last   int64         // the seq of the last row read
	wake   chan struct{} // a notification from another process (holds one)
}

// newFollower starts from the latest row: what was shared before this
// store opened, its clients will read through REST.
func newFollower(db *DB, origin string) (*follower, error) {
	f := &follower{db: db, origin: origin, wake: make(chan struct{}, 1)}
	err := db.read.QueryRow(`SELECT coalesce(max(seq), 0) FROM cluster_changes`).Scan(&f.last)
	return f, err
}

// poke wakes the follower; it never blocks.
func (f *follower) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run reads and publishes until ctx ends, and prunes old rows now and then.
func (f *follower) run(ctx context.Context) {
	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	pruned := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-tick.C:
		}
		if err := f.catchUp(ctx); err != nil && ctx.Err() == nil {
			f.db.log.Warn("reading the changes of other chatd processes failed", "err", err)
		}
		if time.Since(pruned) > sharedChangesKept/10 {
			pruned = time.Now()
			f.prune(ctx)
		}
	}
}

// catchUp publishes every change shared since the last one read.
func (f *follower) catchUp(ctx context.Context) error {
	for {
		n, err := f.readPage(ctx)
		if err != nil || n < followPage {
			return err
		}
	}
}

func (f *follower) readPage(ctx context.Context) (int, error) {
	rows, err := f.db.read.QueryContext(ctx, f.db.dialect.bind(`SELECT seq, origin, body FROM cluster_changes
		WHERE seq > ? AND origin <> ? ORDER BY seq LIMIT ?`), f.last, f.origin, followPage)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var origin, body string
		if err := rows.Scan(&f.last, &origin, &body); err != nil {
			return n, err
		}
		n++
		var b sharedBatch
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			f.db.log.Warn("a change shared by another chatd process is unreadable; skipped", "seq", f.last, "err", err)
			continue
		}
		f.db.publishShared(origin, b)
	}
	return n, rows.Err()
}

// prune deletes the rows past sharedChangesKept. Every node does, now and
// then: deleting what another node already deleted costs nothing.
func (f *follower) prune(ctx context.Context) {
	cut := now().Add(-sharedChangesKept).UnixMicro()
	err := f.db.writeBackground(ctx, func(tx *Tx) error {
		_, err := tx.Exec(`DELETE FROM cluster_changes WHERE at < ?`, cut)
		return err
	})
	if err != nil && !errors.Is(err, ErrQueueFull) && ctx.Err() == nil {
		f.db.log.Warn("pruning the changes shared between chatd processes failed", "err", err)
	}
}

// publishShared publishes another process's batch here. Cached principals
// go first, so that whatever the changes make the server recheck is
// checked against the database.
func (db *DB) publishShared(origin string, b sharedBatch) {
	if b.CredentialsEnded {
		db.creds.invalidate()
	}
	p := db.publisher.p.Load()
	if p == nil {
		return
	}
	told := false
	for _, c := range b.Changes {
		c.Relayed, c.Origin = true, origin
		(*p)(c)
		told = told || c.Kind == CredentialsEnded
	}
	if b.CredentialsEnded && !told {
		(*p)(Change{Kind: OtherProcessWrote, At: now(), Relayed: true, Origin: origin})
	}
}

// PresenceNote is what a node tells the others of its real-time sockets,
// for presence (server/presence.go): that a participant's first socket
// there opened or its last one closed, or, now and then, everyone with a
// socket there (Everyone set), which also says the node is alive.
type PresenceNote struct {
	Party     *PresenceParty  `json:"party,omitempty"`
	Connected bool            `json:"connected,omitempty"`
	Everyone  []PresenceParty `json:"everyone,omitempty"`
	// Snapshot: Everyone is the whole of the node's sockets (even none).
	Snapshot bool `json:"snapshot,omitempty"`
}

// PresenceParty is a participant with a socket.
type PresenceParty struct {
	ID    string `json:"id"`
	Agent bool   `json:"agent,omitempty"`
}

// SharesChanges reports whether other chatd processes may be serving
// clients of this database (PostgreSQL), so that what only this process
// knows is worth telling them (ShareWithOtherNodes).
func (db *DB) SharesChanges() bool { return db.dialect.shareChanges }

// ShareWithOtherNodes tells the other processes on the database c, which
// only this process knows (it is published there as relayed, and not
// here), in the writer's next batch. It is best effort, as a push is: a
// full queue drops it (ErrQueueFull). Where no other process serves
// clients (SQLite), it does nothing.
func (db *DB) ShareWithOtherNodes(c Change) error {
	if !db.dialect.shareChanges {
		return nil
	}
	return db.WriteAsync(func(tx *Tx) error {
		c.At = tx.Now()
		tx.shared.Changes = append(tx.shared.Changes, c)
		return nil
	})
}
