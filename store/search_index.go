package store

// The search index is written in the transaction that writes a message, at
// its end: the message's insert queues it (the trigger messages_fts_insert,
// schema.sql), and the writer indexes the queue once every job of the
// transaction has run, before it commits. A message is searchable as soon
// as it is committed, and a group commit of many messages adds one segment
// to the index rather than one per message (FTS5 starts a segment at every
// savepoint, and each job runs in one).

// queueForIndex makes the transaction tx belongs to index the queued
// messages before it commits.
func queueForIndex(tx *Tx) { tx.BeforeCommit("search index", indexQueued) }

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
