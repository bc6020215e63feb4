package store

import (
	"context"
	"database/sql"
	"errors"
)

// The people of an organization as its admins manage them: the list, and
// removing someone. A removed person's row stays, marked removed_at, so
// that what they wrote keeps its sender and their handle is never someone
// else's; from then on nothing authenticates them, lists them or finds them
// by handle.

var errNotPeopleAdmin = &Error{Code: CodeForbidden, Message: "only an admin of the organization manages its people"}

// livePerson is the condition on users u that leaves out removed people.
const livePerson = "u.removed_at IS NULL"

// PersonKeyset is the paging position just after u in ListPeople.
func PersonKeyset(u *User) *Keyset { return &Keyset{Int: u.InsertedAt.UnixMicro(), ID: u.ID} }

// ListPeople lists the people of admin's organization, admin included,
// oldest first (the first person of an organization is its first admin).
func (db *DB) ListPeople(ctx context.Context, admin *User, pr PageRequest) (*Page[*User], error) {
	if admin.Role != "admin" {
		return nil, errNotPeopleAdmin
	}
	page, err := listPage(ctx, db, `SELECT `+prefixed("u.", userColumns)+` FROM users u`,
		[]string{livePerson, "u.organization_id = ?"}, []any{admin.OrganizationID},
		sortSpec{column: "u.inserted_at", idCol: "u.id"}, pr, scanUser)
	if err != nil {
		return nil, err
	}
	if n := len(page.Items); n > 0 {
		page.Next = PersonKeyset(page.Items[n-1])
	}
	return page, nil
}

// RemovePerson removes a person of admin's organization, in one
// transaction: their API keys, sessions, password, OAuth sign-ins and
// delegations end (their open connections close), their agents are deleted
// as their owner would delete them (processed history included), they leave
// every room and lose their contacts and pending contact requests. Where
// they were a room's last owner the admin becomes its owner, so that no room
// is left without one, as an agent's owner takes over from a deleted agent.
// What they wrote stays, under their name.
//
// An admin does not remove themselves (403: another admin can); someone of
// another organization, unknown or already removed is not found.
func (db *DB) RemovePerson(ctx context.Context, admin *User, id string) (*User, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, err
	}
	if !ValidID(id) {
		return nil, notFound("person")
	}
	var removed *User
	err := db.Write(ctx, func(tx *Tx) error {
		var role string
		if err := tx.QueryRow(`SELECT role FROM users u WHERE id = ? AND `+livePerson, admin.ID).Scan(&role); err != nil || role != "admin" {
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			return errNotPeopleAdmin
		}
		u, err := scanUser(tx.QueryRow(`SELECT `+prefixed("u.", userColumns)+` FROM users u WHERE u.id = ? AND u.organization_id = ? AND `+livePerson,
			id, admin.OrganizationID))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("person")
		}
		if err != nil {
			return err
		}
		if u.ID == admin.ID {
			return &Error{Code: CodeForbidden, Message: "an admin does not remove themselves: another admin of the organization can"}
		}
		if err := db.removePerson(tx, u, admin); err != nil {
			return err
		}
		removed = u
		return nil
	})
	return removed, err
}

// removePerson is RemovePerson's work on u, found live in admin's
// organization.
func (db *DB) removePerson(tx *Tx, u, admin *User) error {
	agents, err := tx.Query(`SELECT id FROM agents a WHERE a.owner_id = ? AND `+liveAgent, u.ID)
	if err != nil {
		return err
	}
	ids, err := scanAll(agents, func(r interface{ Scan(...any) error }) (id string, err error) { return id, r.Scan(&id) })
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := db.deleteAgent(tx, u, id, true); err != nil {
			return err
		}
	}
	if err := db.leaveAllRooms(tx, u.ID, admin.ID); err != nil {
		return err
	}
	if err := db.dropContactsOf(tx, u.ID); err != nil {
		return err
	}
	if err := endPersonCredentials(db, tx, u.ID); err != nil {
		return err
	}
	// A link they made would still bring someone in, with the role they
	// chose, for days after they were removed.
	if _, err := tx.Exec(`DELETE FROM invitations WHERE organization_id = ? AND invited_by = ? AND used_at IS NULL`,
		u.OrganizationID, u.ID); err != nil {
		return err
	}
	ts := tx.Now().UnixMicro()
	_, err = tx.Exec(`UPDATE users SET removed_at = ?, updated_at = ? WHERE id = ?`, ts, ts, u.ID)
	return err
}

// endPersonCredentials ends everything that signs a person in: keys,
// sessions, the password, OAuth sign-ins (and codes not yet exchanged), and
// the delegations they gave.
func endPersonCredentials(db *DB, tx *Tx, userID string) error {
	now := tx.Now()
	ts := now.UnixMicro()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM api_keys WHERE user_id = ?`, []any{userID}},
		{`UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL`, []any{ts, userID}},
		{`DELETE FROM user_passwords WHERE user_id = ?`, []any{userID}},
		{`DELETE FROM oauth_codes WHERE user_id = ? AND used_at IS NULL`, []any{userID}},
		{`UPDATE delegations SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL`, []any{ts, userID}},
	} {
		if _, err := tx.Exec(q.sql, q.args...); err != nil {
			return err
		}
	}
	grants, err := tx.Query(`SELECT id FROM oauth_grants WHERE user_id = ? AND revoked_at IS NULL`, userID)
	if err != nil {
		return err
	}
	ids, err := scanAll(grants, func(r interface{ Scan(...any) error }) (id string, err error) { return id, r.Scan(&id) })
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := db.revokeOAuthGrant(tx, id, now); err != nil {
			return err
		}
	}
	db.endCredentials(tx)
	db.publish(tx, Change{Kind: CredentialsEnded})
	return nil
}
