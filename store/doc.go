// Package store is chatd's persistence: every line of SQL lives here, and
// nothing here knows about HTTP.
//
// The database is one SQLite file in WAL mode. SQLite allows one writer at a
// time, so instead of letting request goroutines fight over the write lock
// (and time out on busy errors under load), every mutation is a job sent to a
// single writer goroutine through a bounded queue:
//
//   - A full queue refuses the job at once with ErrQueueFull; the caller answers
//     503 and the client retries. Nothing ever blocks on a full queue.
//   - The writer drains whatever is queued into one BEGIN IMMEDIATE transaction
//     (group commit) and runs each job inside its own SAVEPOINT, so one failing
//     job is rolled back alone while the rest of its batch commits.
//   - Write returns only after COMMIT returned: an acknowledged write is durable
//     (with synchronous=FULL, the default, it survives power loss too).
//   - Work that must follow the commit (realtime pushes) is registered with
//     Tx.AfterCommit and runs only if the job's changes were committed.
//
// Reads never go through the writer: they use a separate pool of read-only
// connections, each seeing a consistent snapshot.
//
// Checkpoints (copying the WAL into the database file) run in the background
// on their own connection, where they block nobody (checkpoint.go); the
// writer truncates the WAL only when idle, on shutdown, or if it outgrows a
// backstop bound: a checkpoint inside the writer would put tens of
// milliseconds on every write queued behind it.
//
// Authorization lives in the queries: functions that read or change a resource
// on behalf of a caller take the caller and return ErrNotFound for anything the
// caller may not see, so "not found" and "not yours" cannot be told apart.
package store
