package store

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// On PostgreSQL another chatd process (a second node, or a command such as
// rotate-agent-key) is heard through the database: every writer's
// transaction sends a notification on writesChannel (postgresDialect.begin),
// delivered at its commit only, and every store listens on a connection of
// its own. A notification from its own writer's connection is its own
// write; any other wakes the follower (cluster.go), which reads and
// publishes what was committed. While nobody listened, what was committed
// went unheard: the writer's next look (every otherWritersEvery) then drops
// cached credentials as on SQLite, which notices other processes only so.

// writesChannel is the channel of the writers' notifications.
const writesChannel = "chatd_writes"

// listenAgainAfter is the pause before listening again after the
// listening connection failed.
const listenAgainAfter = time.Second

// writesListener listens for the commits of other processes; close stops it.
type writesListener struct {
	stop      context.CancelFunc
	stopped   chan struct{}
	following sync.WaitGroup
}

// listenForOtherWriters starts listening on a connection to location, and
// f following what the notifications announce. ownPID is the server
// process of this store's writer connection.
func (db *DB) listenForOtherWriters(location string, ownPID uint32, f *follower) {
	ctx, stop := context.WithCancel(context.Background())
	l := &writesListener{stop: stop, stopped: make(chan struct{})}
	db.listener = l
	l.following.Add(1)
	go func() {
		defer l.following.Done()
		f.run(ctx)
	}()
	go func() {
		defer close(l.stopped)
		for first := true; ctx.Err() == nil; first = false {
			// Whatever was committed while nobody listened went unheard:
			// take it that another process wrote.
			if !first {
				db.w.othersWrote.Store(true)
			}
			err := listen(ctx, location, ownPID, f.poke)
			if ctx.Err() != nil {
				return
			}
			db.log.Warn("listening for other chatd processes' writes failed; listening again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(listenAgainAfter):
			}
		}
	}()
}

// listen calls heard for every notification of another writer, and once
// listening (for what was committed before), until ctx ends or the
// connection fails.
func listen(ctx context.Context, location string, ownPID uint32, heard func()) error {
	conn, err := pgx.Connect(ctx, location)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+writesChannel); err != nil {
		return err
	}
	heard()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.PID != ownPID {
			heard()
		}
	}
}

func (l *writesListener) close() {
	l.stop()
	<-l.stopped
	l.following.Wait()
}

// postgresUpkeep is the writer's care of a PostgreSQL database: only its
// look for other processes' writes, which the listener heard.
func postgresUpkeep(w *writer) upkeep {
	u := noUpkeep(w)
	u.look = func() {
		if w.othersWrote.Swap(false) {
			if f := w.otherWrites.Load(); f != nil {
				w.safely(*f)
			}
		}
	}
	return u
}
