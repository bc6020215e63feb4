package store

import (
	"context"
	"errors"
	"time"
)

// The search index is written beside the messages, not in their writes. A
// message's insert queues it (the trigger messages_fts_insert, schema.sql),
// and the indexer indexes the queue in a write of its own, indexEvery after
// commits, so that the messages of many commits share one segment of the
// index. FTS5 writes a segment per transaction it indexes in, so indexing
// in the post's own commit wrote five of the eighteen pages a post alone
// commits. A search indexes what is queued first (flushIndex), so it finds
// every message committed before it began, as before. The indexer's writes
// wait in a place of their own beside the writer's queue: they never take
// one a client's write could have had.

// indexEvery is how often the indexer looks for commits, and so how long a
// message may wait in the queue when nobody searches.
const indexEvery = 100 * time.Millisecond

// indexer runs the index writes; close stops it.
type indexer struct {
	stop    chan struct{}
	stopped chan struct{}
}

// startIndexer starts indexing the queue: at once (what an earlier process
// left queued), then after each interval with commits.
func (db *DB) startIndexer() {
	ix := &indexer{stop: make(chan struct{}), stopped: make(chan struct{})}
	db.indexer = ix
	go func() {
		defer close(ix.stopped)
		tick := time.NewTicker(indexEvery)
		defer tick.Stop()
		seen := int64(-1)
		for {
			if n := db.w.commits.Load(); n != seen {
				seen = n
				if err := db.flushIndex(context.Background(), db.writeBackground); err != nil && !errors.Is(err, ErrClosed) {
					db.log.Warn("indexing messages for search failed", "err", err)
				}
			}
			select {
			case <-ix.stop:
				return
			case <-tick.C:
			}
		}
	}()
}

func (ix *indexer) close() {
	close(ix.stop)
	<-ix.stopped
}

// flushIndex indexes the queued messages, if there are any, through write
// (the indexer's writeBackground, or a search's Write). A full writer
// queue leaves them for the next look.
func (db *DB) flushIndex(ctx context.Context, write func(context.Context, func(*Tx) error) error) error {
	var queued bool
	if err := db.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages_fts_queue)`).Scan(&queued); err != nil || !queued {
		return err
	}
	err := write(ctx, indexQueued)
	if errors.Is(err, ErrQueueFull) {
		return nil
	}
	return err
}

// indexQueued indexes the messages queued, in the order they were written,
// with their content as it is now, and empties the queue.
func indexQueued(tx *Tx) error {
	if _, err := tx.Exec(`INSERT INTO messages_fts (rowid, content)
		SELECT m.seq, m.content FROM messages_fts_queue q JOIN messages m ON m.seq = q.seq ORDER BY q.seq`); err != nil {
		return err
	}
	_, err := tx.Exec(`DELETE FROM messages_fts_queue`)
	return err
}
