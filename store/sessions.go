package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// A person's own sessions (sign-ins), for the web app's account screen:
// which are live, ending one, and changing the password, which ends every
// other one.

// SessionInfo is a live session as its person sees it.
type SessionInfo struct {
	ID         string
	InsertedAt time.Time
	ExpiresAt  time.Time
}

// UserSessions returns a person's live sessions (not signed out, not
// expired), newest first.
func (db *DB) UserSessions(ctx context.Context, userID string) ([]SessionInfo, error) {
	rows, err := db.query(ctx, `SELECT id, inserted_at, expires_at FROM sessions
		WHERE user_id = ? AND revoked_at IS NULL AND expires_at > ? ORDER BY inserted_at DESC, id DESC`, userID, now().UnixMicro())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SessionInfo
	for rows.Next() {
		var s SessionInfo
		var in, exp int64
		if err := rows.Scan(&s.ID, &in, &exp); err != nil {
			return nil, err
		}
		s.InsertedAt, s.ExpiresAt = fromMicros(in), fromMicros(exp)
		out = append(out, s)
	}
	return out, rows.Err()
}

// EndUserSession signs out one of a person's live sessions; someone else's,
// or one that ended already, is not found. Its token stops working at once
// and the connections opened with it close (CredentialsEnded).
func (db *DB) EndUserSession(ctx context.Context, userID, sessionID string) error {
	if err := refuseDelegated(ctx); err != nil {
		return err
	}
	return db.Write(ctx, func(tx *Tx) error {
		res, err := tx.Exec(`UPDATE sessions SET revoked_at = ? WHERE id = ? AND user_id = ? AND revoked_at IS NULL AND expires_at > ?`,
			tx.Now().UnixMicro(), sessionID, userID, tx.Now().UnixMicro())
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("session")
		}
		db.publish(tx, Change{Kind: CredentialsEnded})
		return nil
	})
}

// ErrWrongPassword refuses a password change whose current password is
// wrong.
var ErrWrongPassword = &Error{Code: CodeValidation, Message: "/current_password is not your password",
	Details: Problems{"/current_password": {"is not your password"}}}

// ChangePassword replaces a person's password when current is theirs, ends
// every session of theirs (whoever signed in with the old password is
// signed out, and their connections close) and answers a new one, so that
// the person stays signed in where they changed it.
func (db *DB) ChangePassword(ctx context.Context, userID, current, next string) (*Session, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, err
	}
	if msg := checkPassword(next); msg != "" {
		p := Problems{}
		p.Add("/new_password", "%s", msg)
		return nil, p.Err(CodeValidation)
	}
	var stored sql.NullString
	err := db.queryRow(ctx, `SELECT hash FROM user_passwords WHERE user_id = ?`, userID).Scan(&stored)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	hash := stored.String
	if hash == "" {
		hash = decoyHash()
	}
	ok, err := verifyPassword(ctx, hash, current)
	if err != nil {
		return nil, err
	}
	if !ok || !stored.Valid {
		return nil, ErrWrongPassword
	}
	newHash, err := hashPassword(ctx, next)
	if err != nil {
		return nil, err
	}
	var s *Session
	err = db.Write(ctx, func(tx *Tx) error {
		ts := tx.Now().UnixMicro()
		res, err := tx.Exec(`UPDATE user_passwords SET hash = ?, updated_at = ? WHERE user_id = ? AND hash = ?`, newHash, ts, userID, stored.String)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 { // changed meanwhile
			return ErrWrongPassword
		}
		if _, err := tx.Exec(`UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL`, ts, userID); err != nil {
			return err
		}
		db.publish(tx, Change{Kind: CredentialsEnded})
		s, err = createSession(tx, userID)
		return err
	})
	return s, err
}
