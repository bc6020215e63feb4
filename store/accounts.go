package store

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// Accounts for the web app: a person signs in with handle and password and
// gets a session; the very first person is created through a one-time setup
// link printed by `chatd serve`; people manage their own human API keys.

const (
	// SessionTTL is how long a sign-in lasts.
	SessionTTL = 12 * time.Hour
	// SetupTokenTTL is how long a first-run setup link works.
	SetupTokenTTL = 30 * time.Minute
	// MaxKeysPerUser bounds the human API keys one person holds.
	MaxKeysPerUser = 50
	maxKeyNameLen  = 100
	setupPrefix    = "band_s_"
)

// ErrBadSignIn answers every failed sign-in alike, so that the answer does
// not tell whether the handle exists.
var ErrBadSignIn = &Error{Code: CodeUnauthorized, Message: "wrong handle or password"}

var errBadSetup = &Error{Code: CodeUnauthorized, Message: "invalid, expired or already used setup token"}

// Session is one sign-in.
type Session struct {
	ID        string
	UserID    string
	ExpiresAt time.Time
}

// createSession starts a session for userID. The person's ended sessions
// are dropped on the way, so their rows stay as few as their live sessions.
func createSession(tx *Tx, userID string) (*Session, error) {
	s := &Session{ID: newID(), UserID: userID, ExpiresAt: tx.Now().Add(SessionTTL)}
	if _, err := tx.Exec(`DELETE FROM sessions WHERE user_id = ? AND (expires_at <= ? OR revoked_at IS NOT NULL)`,
		userID, tx.Now().UnixMicro()); err != nil {
		return nil, err
	}
	_, err := tx.Exec(`INSERT INTO sessions (id, user_id, inserted_at, expires_at) VALUES (?, ?, ?, ?)`,
		s.ID, userID, tx.Now().UnixMicro(), s.ExpiresAt.UnixMicro())
	return s, err
}

// SignIn checks a person's handle and password and starts a session. A
// handle with no password (or no person) spends one hash all the same.
func (db *DB) SignIn(ctx context.Context, handle, password string) (*User, *Session, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, nil, err
	}
	handle = strings.TrimPrefix(strings.TrimSpace(handle), "@")
	var u *User
	var hash string
	if ValidHandle(handle) == "" && len(password) <= 4*MaxPasswordLen {
		row := db.queryRow(ctx, `SELECT `+userColumns+`, (SELECT hash FROM user_passwords WHERE user_id = users.id)
			FROM users WHERE handle = ? AND removed_at IS NULL`, handle)
		var h sql.NullString
		var err error
		u, err = scanUser(scanTail{row, &h})
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, nil, err
		}
		hash = h.String
	}
	if hash == "" {
		if _, err := verifyPassword(ctx, decoyHash(), password); err != nil {
			return nil, nil, err
		}
		return nil, nil, ErrBadSignIn
	}
	ok, err := verifyPassword(ctx, hash, password)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, ErrBadSignIn
	}
	var s *Session
	err = db.Write(ctx, func(tx *Tx) error {
		s, err = createSession(tx, u.ID)
		if isConstraint(err) { // the person was deleted meanwhile
			return ErrBadSignIn
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return u, s, nil
}

// scanTail scans a row whose leading columns are a user's and whose last
// column goes to tail.
type scanTail struct {
	row  interface{ Scan(...any) error }
	tail any
}

func (s scanTail) Scan(dst ...any) error { return s.row.Scan(append(dst, s.tail)...) }

// SessionUser returns the person of a live session (not expired, not
// signed out); a session that is not live authenticates nobody.
func (db *DB) SessionUser(ctx context.Context, sessionID, userID string) (*User, error) {
	u, err := scanUser(db.queryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = (SELECT user_id FROM sessions
		WHERE id = ? AND user_id = ? AND revoked_at IS NULL AND expires_at > ?) AND removed_at IS NULL`, sessionID, userID, now().UnixMicro()))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrBadCredentials
	}
	return u, err
}

// EndSession signs a session out; its token stops working at once, and the
// connections opened with it close (CredentialsEnded).
func (db *DB) EndSession(ctx context.Context, sessionID string) error {
	return db.Write(ctx, func(tx *Tx) error {
		_, err := tx.Exec(`UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, tx.Now().UnixMicro(), sessionID)
		db.publish(tx, Change{Kind: CredentialsEnded})
		return err
	})
}

// SetPassword sets a person's password (hashed before the write) and ends
// their sessions: whoever signed in with the old password is signed out,
// and their connections close (CredentialsEnded).
func (db *DB) SetPassword(ctx context.Context, userID, password string) error {
	if err := refuseDelegated(ctx); err != nil {
		return err
	}
	if err := CheckPassword(password); err != nil {
		return err
	}
	hash, err := hashPassword(ctx, password)
	if err != nil {
		return err
	}
	return db.Write(ctx, func(tx *Tx) error {
		ts := tx.Now().UnixMicro()
		_, err := tx.Exec(`INSERT INTO user_passwords (user_id, hash, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (user_id) DO UPDATE SET hash = excluded.hash, updated_at = excluded.updated_at`, userID, hash, ts)
		if isConstraint(err) {
			return notFound("user")
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(`UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL`, ts, userID)
		db.publish(tx, Change{Kind: CredentialsEnded})
		return err
	})
}

// CreateSetupToken stores the digest of a new first-run setup token, valid
// SetupTokenTTL and once, and returns the token. Earlier tokens stop
// working: only the link printed last opens setup.
func (db *DB) CreateSetupToken(ctx context.Context) (string, error) {
	if err := refuseDelegated(ctx); err != nil {
		return "", err
	}
	token := setupPrefix + strings.TrimPrefix(mintKey(UserKey), mintPrefix[UserKey])
	err := db.Write(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(`DELETE FROM setup_tokens`); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO setup_tokens (digest, expires_at) VALUES (?, ?)`,
			keyDigest(token), tx.Now().Add(SetupTokenTTL).UnixMicro())
		return err
	})
	return token, err
}

// setupTokenUsable checks a setup token inside q: known, unexpired, unused.
func setupTokenUsable(q interface {
	QueryRow(string, ...any) *sql.Row
}, token string, at time.Time) error {
	if len(token) != len(setupPrefix)+52 || !strings.HasPrefix(token, setupPrefix) {
		return errBadSetup
	}
	var stored []byte
	var expires int64
	var used sql.NullInt64
	digest := keyDigest(token)
	err := q.QueryRow(`SELECT digest, expires_at, used_at FROM setup_tokens WHERE digest = ?`, digest).Scan(&stored, &expires, &used)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return errBadSetup
	case err != nil:
		return err
	case subtle.ConstantTimeCompare(stored, digest) != 1 || used.Valid || !at.Before(fromMicros(expires)):
		return errBadSetup
	}
	return nil
}

// SetUpFirstUser redeems a setup token: it creates the first person, admin
// of the default organization, with a password, and signs them in. Once
// anyone exists it is refused (409), whatever the token.
func (db *DB) SetUpFirstUser(ctx context.Context, token string, nu NewUser, password string) (*User, *Session, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, nil, err
	}
	nu.Organization, nu.APIKey = "", ""
	c, err := checkNewUser(nu)
	if msg := checkPassword(password); msg != "" {
		p := Problems{}
		var e *Error
		if errors.As(err, &e) {
			p, _ = e.Details.(Problems)
		}
		p.Add("/password", "%s", msg)
		return nil, nil, p.Err(CodeValidation)
	}
	if err != nil {
		return nil, nil, err
	}
	// A read first, so that a bad token costs no hash; the write checks
	// again, since the token may be spent meanwhile.
	if err := db.readTx(ctx, func(q readQ) error { return setupTokenUsable(q, token, now()) }); err != nil {
		return nil, nil, err
	}
	hash, err := hashPassword(ctx, password)
	if err != nil {
		return nil, nil, err
	}
	var u *User
	var s *Session
	err = db.Write(ctx, func(tx *Tx) error {
		if err := setupTokenUsable(tx, token, tx.Now()); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM users`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return &Error{Code: CodeConflict, Message: "setup is done: people exist already; sign in instead"}
		}
		if u, err = insertUser(tx, c); err != nil {
			return err
		}
		if u.Role != "admin" { // the organization outlived its people
			if _, err := tx.Exec(`UPDATE users SET role = 'admin' WHERE id = ?`, u.ID); err != nil {
				return err
			}
			u.Role = "admin"
		}
		ts := tx.Now().UnixMicro()
		if _, err := tx.Exec(`UPDATE setup_tokens SET used_at = ? WHERE digest = ?`, ts, keyDigest(token)); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO user_passwords (user_id, hash, updated_at) VALUES (?, ?, ?)`, u.ID, hash, ts); err != nil {
			return err
		}
		s, err = createSession(tx, u.ID)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return u, s, nil
}

// UserKeys lists a person's own human API keys, oldest first.
func (db *DB) UserKeys(ctx context.Context, userID string) ([]KeyInfo, error) {
	return db.keyInfos(ctx, `WHERE user_id = ? ORDER BY inserted_at, id`, userID)
}

// CreateUserKey mints a human API key for the person, named name, and
// returns it (shown this once) with its description.
func (db *DB) CreateUserKey(ctx context.Context, userID, name string) (KeyInfo, string, error) {
	if err := refuseDelegated(ctx); err != nil {
		return KeyInfo{}, "", err
	}
	name, msg := cleanText(name, 1, maxKeyNameLen)
	if msg != "" {
		return KeyInfo{}, "", Problems{"/key/name": {msg}}.Err(CodeValidation)
	}
	var info KeyInfo
	var key string
	err := db.Write(ctx, func(tx *Tx) error {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM api_keys WHERE user_id = ?`, userID).Scan(&n); err != nil {
			return err
		}
		if n >= MaxKeysPerUser {
			return limitReached("api keys", MaxKeysPerUser, n)
		}
		var err error
		if key, err = insertKey(tx, UserKey, userID, ""); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE api_keys SET name = ? WHERE digest = ?`, name, keyDigest(key)); err != nil {
			return err
		}
		info, err = scanKeyInfo(tx.QueryRow(`SELECT `+keyInfoColumns+` FROM api_keys WHERE digest = ?`, keyDigest(key)))
		return err
	})
	if err != nil {
		return KeyInfo{}, "", err
	}
	return info, key, nil
}

// DeleteUserKey deletes one of the person's own keys; it stops working at
// once, and the connections opened with it close (CredentialsEnded). Another person's key is not found, as an unknown one.
func (db *DB) DeleteUserKey(ctx context.Context, userID, id string) error {
	if !ValidID(id) {
		return notFound("api key")
	}
	return db.Write(ctx, func(tx *Tx) error {
		res, err := tx.Exec(`DELETE FROM api_keys WHERE id = ? AND user_id = ?`, id, userID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("api key")
		}
		db.endCredentials(tx)
		db.publish(tx, Change{Kind: CredentialsEnded})
		return nil
	})
}
