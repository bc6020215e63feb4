package store

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// Invitations: an organization's admin invites a person with a one-time
// link; the person picks a handle, name and password on it, joins the
// organization with the role the invitation names, and is signed in. Only
// the token's digest is stored; a token works once, for InvitationTTL.

const (
	// InvitationTTL is how long an invitation link works.
	InvitationTTL = 7 * 24 * time.Hour
	// MaxPendingInvitations bounds an organization's open invitations.
	MaxPendingInvitations = 100
	invitationPrefix      = "band_i_"
)

// Invitation is an open (or spent) invitation, never its token.
type Invitation struct {
	ID        string
	Role      string
	InvitedBy string // the admin's name, "" when they are gone
	Inserted  time.Time
	Expires   time.Time
}

var (
	errBadInvitation = &Error{Code: CodeUnauthorized, Message: "invalid, expired or already used invitation"}
	errNotAdmin      = &Error{Code: CodeForbidden, Message: "only an admin of the organization invites people"}
)

// CreateInvitation makes an invitation to admin's organization, with role
// ("user" when empty), and answers it with its token, shown this once.
func (db *DB) CreateInvitation(ctx context.Context, admin *User, role string) (*Invitation, string, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, "", err
	}
	if role == "" {
		role = "user"
	}
	if p := (Problems{}); !checkOneOf(p, "/invitation/role", role, []string{"user", "admin"}) {
		return nil, "", p.Err(CodeValidation)
	}
	token := invitationPrefix + strings.TrimPrefix(mintKey(UserKey), mintPrefix[UserKey])
	inv := &Invitation{ID: newID(), Role: role, InvitedBy: admin.Name()}
	err := db.Write(ctx, func(tx *Tx) error {
		var r string
		if err := tx.QueryRow(`SELECT role FROM users WHERE id = ?`, admin.ID).Scan(&r); err != nil || r != "admin" {
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			return errNotAdmin
		}
		var open int
		if err := tx.QueryRow(`SELECT count(*) FROM invitations WHERE organization_id = ? AND used_at IS NULL AND expires_at > ?`,
			admin.OrganizationID, tx.Now().UnixMicro()).Scan(&open); err != nil {
			return err
		}
		if open >= MaxPendingInvitations {
			return &Error{Code: CodeLimitReached, Message: "the organization has too many open invitations: revoke some first"}
		}
		inv.Inserted, inv.Expires = tx.Now(), tx.Now().Add(InvitationTTL)
		_, err := tx.Exec(`INSERT INTO invitations (id, digest, organization_id, role, invited_by, inserted_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, inv.ID, keyDigest(token), admin.OrganizationID, role, admin.ID,
			inv.Inserted.UnixMicro(), inv.Expires.UnixMicro())
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return inv, token, nil
}

// Invitations lists the open invitations of admin's organization, newest
// first.
func (db *DB) Invitations(ctx context.Context, admin *User) ([]Invitation, error) {
	if admin.Role != "admin" {
		return nil, errNotAdmin
	}
	rows, err := db.query(ctx, `SELECT i.id, i.role, coalesce(trim(u.first_name || ' ' || u.last_name), ''), i.inserted_at, i.expires_at
		FROM invitations i LEFT JOIN users u ON u.id = i.invited_by
		WHERE i.organization_id = ? AND i.used_at IS NULL AND i.expires_at > ? ORDER BY i.inserted_at DESC, i.id DESC`,
		admin.OrganizationID, now().UnixMicro())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Invitation
	for rows.Next() {
		var inv Invitation
		var ins, exp int64
		if err := rows.Scan(&inv.ID, &inv.Role, &inv.InvitedBy, &ins, &exp); err != nil {
			return nil, err
		}
		inv.Inserted, inv.Expires = fromMicros(ins), fromMicros(exp)
		out = append(out, inv)
	}
	return out, rows.Err()
}

// RevokeInvitation ends an open invitation of admin's organization; any
// other is not found.
func (db *DB) RevokeInvitation(ctx context.Context, admin *User, id string) error {
	if err := refuseDelegated(ctx); err != nil {
		return err
	}
	if admin.Role != "admin" {
		return errNotAdmin
	}
	return db.Write(ctx, func(tx *Tx) error {
		res, err := tx.Exec(`DELETE FROM invitations WHERE id = ? AND organization_id = ? AND used_at IS NULL`, id, admin.OrganizationID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("invitation")
		}
		return nil
	})
}

// openInvitation finds the open invitation of a token inside q: its id,
// organization and role.
func openInvitation(q interface {
	QueryRow(string, ...any) *sql.Row
}, token string, at time.Time) (id, org, role string, err error) {
	if len(token) != len(invitationPrefix)+52 || !strings.HasPrefix(token, invitationPrefix) {
		return "", "", "", errBadInvitation
	}
	digest := keyDigest(token)
	var stored []byte
	var expires int64
	var used sql.NullInt64
	err = q.QueryRow(`SELECT id, digest, organization_id, role, expires_at, used_at FROM invitations WHERE digest = ?`, digest).
		Scan(&id, &stored, &org, &role, &expires, &used)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", "", "", errBadInvitation
	case err != nil:
		return "", "", "", err
	case subtle.ConstantTimeCompare(stored, digest) != 1 || used.Valid || !at.Before(fromMicros(expires)):
		return "", "", "", errBadInvitation
	}
	return id, org, role, nil
}

// AcceptInvitation spends an invitation token: it creates the person in
// the invitation's organization with its role and a password, and signs
// them in.
func (db *DB) AcceptInvitation(ctx context.Context, token string, nu NewUser, password string) (*User, *Session, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, nil, err
	}
	var orgID string
	if err := db.readTx(ctx, func(q readQ) error {
		var err error
		_, orgID, _, err = openInvitation(q, token, now())
		return err
	}); err != nil {
		return nil, nil, err
	}
	org, err := db.OrganizationName(ctx, orgID)
	if err != nil {
		return nil, nil, err
	}
	nu.Organization, nu.APIKey = org, ""
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
	hash, err := hashPassword(ctx, password)
	if err != nil {
		return nil, nil, err
	}
	var u *User
	var s *Session
	err = db.Write(ctx, func(tx *Tx) error {
		id, _, role, err := openInvitation(tx, token, tx.Now())
		if err != nil {
			return err
		}
		if u, err = insertUser(tx, c); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE users SET role = ? WHERE id = ?`, role, u.ID); err != nil {
			return err
		}
		u.Role = role
		ts := tx.Now().UnixMicro()
		if _, err := tx.Exec(`UPDATE invitations SET used_at = ?, used_by = ? WHERE id = ?`, ts, u.ID, id); err != nil {
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
