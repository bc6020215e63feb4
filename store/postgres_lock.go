package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// On PostgreSQL the server lock is a session-level advisory lock, held on a
// connection of its own for the server's life: the database drops it when
// that connection ends, however the process ends. One chatd serve per
// database: the pushes of a write reach only the sockets of the process
// that made it, so a second server would leave its clients deaf to the
// first one's writes.

// serverLockKey is the key of the server lock, beside the writers' one.
const serverLockKey = writeLockKey + 1

// PostgresServerLock is a held server lock of a PostgreSQL database.
type PostgresServerLock struct{ conn *pgx.Conn }

// LockPostgresServer takes the server lock of the database at url without
// waiting: ErrServerRunning if another process holds it.
func LockPostgresServer(ctx context.Context, url string) (*PostgresServerLock, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	var held bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, serverLockKey).Scan(&held); err != nil || !held {
		conn.Close(ctx)
		if err == nil {
			err = ErrServerRunning
		}
		return nil, err
	}
	return &PostgresServerLock{conn: conn}, nil
}

// Release drops the lock.
func (l *PostgresServerLock) Release() error {
	if l == nil || l.conn == nil {
		return nil
	}
	err := l.conn.Close(context.Background())
	l.conn = nil
	return err
}
