package store

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"
)

// DefaultOrganization is the organization users join when none is named.
const DefaultOrganization = "default"

// User is a human account.
type User struct {
	ID                string
	OrganizationID    string
	Handle            string
	Email             string // "" when the user has none
	FirstName         string
	LastName          string
	Role              string // "admin" or "user"
	ListedInDirectory bool
	InsertedAt        time.Time
	UpdatedAt         time.Time
}

// Name is the display name: first and last name.
func (u *User) Name() string { return strings.TrimSpace(u.FirstName + " " + u.LastName) }

// NoEmailDomain is the domain of the address reported for a person without
// an email. The API's UserDetails requires an email, and a person may be
// created without one; .invalid is reserved (RFC 2606, RFC 6761) and never
// delivers, so the placeholder can be neither mistaken for a real address
// nor mailed. Nothing is stored for it.
const NoEmailDomain = "noreply.invalid"

// ReportedEmail is the email the API reports for a person: their own, or,
// when they have none, <handle>@noreply.invalid (lower case, with runs of
// dots, which handles allow and addresses do not, made single).
func ReportedEmail(handle, email string) string {
	if email != "" {
		return email
	}
	local := strings.ToLower(handle)
	for strings.Contains(local, "..") {
		local = strings.ReplaceAll(local, "..", ".")
	}
	return local + "@" + NoEmailDomain
}

// NewUser is what CreateUser needs.
type NewUser struct {
	Handle       string
	Name         string // display name; split into first and last name at the first space
	Email        string // optional
	Organization string // name of the organization to join (created if missing); default DefaultOrganization
	APIKey       string // optional: adopt this human key instead of minting one
}

const userColumns = `id, organization_id, handle, email, first_name, last_name, role, listed_in_directory, inserted_at, updated_at`

func scanUser(row interface{ Scan(...any) error }) (*User, error) {
	var u User
	var email sql.NullString
	var ins, upd int64
	err := row.Scan(&u.ID, &u.OrganizationID, &u.Handle, &email, &u.FirstName, &u.LastName, &u.Role,
		&u.ListedInDirectory, &ins, &upd)
	if err != nil {
		return nil, err
	}
	u.Email = email.String
	u.InsertedAt, u.UpdatedAt = fromMicros(ins), fromMicros(upd)
	return &u, nil
}

// CreateUser creates a human (and its organization on first use) with an API
// key, in one transaction, and returns the user and the key. The first user of
// an organization is its admin.
func (db *DB) CreateUser(ctx context.Context, nu NewUser) (*User, string, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, "", err
	}
	c, err := checkNewUser(nu)
	if err != nil {
		return nil, "", err
	}
	var user *User
	var key string
	err = db.Write(ctx, func(tx *Tx) error {
		if user, err = insertUser(tx, c); err != nil {
			return err
		}
		key, err = insertKey(tx, UserKey, user.ID, nu.APIKey)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return user, key, nil
}

// checkedUser is a NewUser whose fields passed checkNewUser.
type checkedUser struct{ handle, first, last, email, org string }

// checkNewUser validates a new person's fields, outside any transaction.
func checkNewUser(nu NewUser) (checkedUser, error) {
	p := Problems{}
	handle := strings.TrimSpace(nu.Handle)
	if msg := ValidHandle(handle); msg != "" {
		p.Add("/handle", "%s", msg)
	} else if reservedHandles[strings.ToLower(handle)] {
		p.Add("/handle", "is reserved")
	}
	name, msg := cleanText(nu.Name, 1, maxNameLen)
	if msg != "" {
		p.Add("/name", "%s", msg)
	}
	email := strings.TrimSpace(nu.Email)
	if email != "" {
		if msg := validEmail(email); msg != "" {
			p.Add("/email", "%s", msg)
		}
	}
	org, msg := cleanText(nu.Organization, 0, maxNameLen)
	if msg != "" {
		p.Add("/organization", "%s", msg)
	}
	if org == "" {
		org = DefaultOrganization
	}
	if err := p.Err(CodeValidation); err != nil {
		return checkedUser{}, err
	}
	first, last := splitName(name)
	return checkedUser{handle: handle, first: first, last: last, email: email, org: org}, nil
}

// insertUser adds a checked person to their organization, creating it (with
// them as its admin) on first use.
func insertUser(tx *Tx, c checkedUser) (*User, error) {
	orgID, created, err := ensureOrganization(tx, c.org)
	if err != nil {
		return nil, err
	}
	role := "user"
	if created {
		role = "admin"
	}
	if err := userConflict(tx, c.handle, c.email); err != nil {
		return nil, err
	}
	ts := tx.Now().UnixMicro()
	id := newID()
	_, err = tx.Exec(`INSERT INTO users (id, organization_id, handle, email, first_name, last_name, role, inserted_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, orgID, c.handle, sql.NullString{String: c.email, Valid: c.email != ""}, c.first, c.last, role, ts, ts)
	if err != nil {
		return nil, err
	}
	return scanUser(tx.QueryRow(`SELECT `+userColumns+` FROM users WHERE id = ?`, id))
}

// userConflict names what would make a user insert fail: a handle or an
// email someone (even someone removed) already has. It looks before the
// insert, because on PostgreSQL a failed insert aborts the job's
// transaction and nothing could be asked afterwards; the writer's one
// lock keeps the answer true until the insert.
func userConflict(tx *Tx, handle, email string) error {
	var handleTaken, emailTaken bool
	err := tx.QueryRow(`SELECT EXISTS (SELECT 1 FROM users WHERE handle = ?),
		EXISTS (SELECT 1 FROM users WHERE email = ?)`, handle, email).Scan(&handleTaken, &emailTaken)
	switch {
	case err != nil:
		return err
	case handleTaken:
		return &Error{Code: CodeConflict, Message: "handle " + handle + " is already taken", Details: Problems{"/handle": {"is already taken"}}}
	case emailTaken && email != "":
		return &Error{Code: CodeConflict, Message: "email " + email + " is already in use", Details: Problems{"/email": {"is already in use"}}}
	}
	return nil
}

func ensureOrganization(tx *Tx, name string) (id string, created bool, err error) {
	err = tx.QueryRow(`SELECT id FROM organizations WHERE name = ?`, name).Scan(&id)
	if err == nil {
		return id, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, err
	}
	id = newID()
	_, err = tx.Exec(`INSERT INTO organizations (id, name, inserted_at) VALUES (?, ?, ?)`, id, name, tx.Now().UnixMicro())
	return id, true, err
}

// UserByID returns a user.
func (db *DB) UserByID(ctx context.Context, id string) (*User, error) {
	u, err := scanUser(db.queryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = ? AND removed_at IS NULL`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("user")
	}
	return u, err
}

// UserByHandle returns a user by handle (case-insensitive; a leading "@" is ignored).
func (db *DB) UserByHandle(ctx context.Context, handle string) (*User, error) {
	handle = strings.TrimPrefix(strings.TrimSpace(handle), "@")
	u, err := scanUser(db.queryRow(ctx, `SELECT `+userColumns+` FROM users WHERE handle = ? AND removed_at IS NULL`, handle))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("user " + handle)
	}
	return u, err
}

// OrganizationName returns the name of an organization.
func (db *DB) OrganizationName(ctx context.Context, id string) (string, error) {
	var name string
	err := db.queryRow(ctx, `SELECT name FROM organizations WHERE id = ?`, id).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", notFound("organization")
	}
	return name, err
}

// CountUsers returns how many humans exist.
func (db *DB) CountUsers(ctx context.Context) (int, error) {
	var n int
	err := db.queryRow(ctx, `SELECT count(*) FROM users`).Scan(&n)
	return n, err
}

// PeopleOutside returns the handles, in order, of at most limit people of
// the database at path who are not in the named organization. It reads the
// file as it is, without opening it as a store: no schema upgrade, no
// secret, nothing written, so a command may look before it decides to use a
// database. A missing file, or one without chatd's tables yet, has nobody.
func PeopleOutside(ctx context.Context, path, organization string, limit int) ([]string, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	conn, err := openFile(path, readOnly)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var tables int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table'
		AND name IN ('users', 'organizations')`).Scan(&tables); err != nil {
		return nil, describeOpenError(path, err)
	}
	if tables < 2 {
		return nil, nil
	}
	// organizations.name compares without case, as it is unique.
	handles, err := scanStrings(conn.QueryContext(ctx, `SELECT u.handle FROM users u JOIN organizations o ON o.id = u.organization_id
		WHERE o.name <> ? ORDER BY u.handle LIMIT ?`, organization, limit))
	if err != nil {
		return nil, describeOpenError(path, err)
	}
	return handles, nil
}

// OnlyUser returns the single person when exactly one exists. With more,
// the error names them (the first ten handles in order), so that a command
// can say whom to choose from.
func (db *DB) OnlyUser(ctx context.Context) (*User, error) {
	const listed = 10
	rows, err := db.query(ctx, `SELECT `+userColumns+` FROM users WHERE removed_at IS NULL ORDER BY handle LIMIT ?`, listed+1)
	if err != nil {
		return nil, err
	}
	users, err := scanAll(rows, scanUser)
	if err != nil {
		return nil, err
	}
	switch len(users) {
	case 0:
		return nil, &Error{Code: CodeNotFound, Message: "there are no people yet; create one first"}
	case 1:
		return users[0], nil
	}
	handles := make([]string, 0, listed+1)
	for _, u := range users[:min(len(users), listed)] {
		handles = append(handles, u.Handle)
	}
	if len(users) > listed {
		handles = append(handles, "…")
	}
	return nil, &Error{Code: CodeBadRequest, Message: "there is more than one person: " + strings.Join(handles, ", ")}
}

// ProfileUpdate holds the profile fields to change; nil leaves a field as it is.
type ProfileUpdate struct {
	FirstName *string
	LastName  *string
	Email     *string // "" removes the person's address
}

// checkProfile validates a profile update, outside any transaction, and
// returns its fields cleaned. Problems are reported under /user/<field>, as
// the fields appear in the API's request body.
func checkProfile(up ProfileUpdate) (first, last, email string, err error) {
	p := Problems{}
	var msg string
	if up.FirstName != nil {
		if first, msg = cleanText(*up.FirstName, 1, maxNameLen); msg != "" {
			p.Add("/user/first_name", "%s", msg)
		}
	}
	if up.LastName != nil {
		if last, msg = cleanText(*up.LastName, 0, maxNameLen); msg != "" {
			p.Add("/user/last_name", "%s", msg)
		}
	}
	if up.Email != nil {
		if email = strings.TrimSpace(*up.Email); email != "" {
			if msg = validEmail(email); msg != "" {
				p.Add("/user/email", "%s", msg)
			}
		}
	}
	return first, last, email, p.Err(CodeValidation)
}

// UpdateProfile changes the caller's own profile.
func (db *DB) UpdateProfile(ctx context.Context, userID string, up ProfileUpdate) (*User, error) {
	first, last, email, err := checkProfile(up)
	if err != nil {
		return nil, err
	}
	var user *User
	err = db.Write(ctx, func(tx *Tx) error {
		u, err := scanUser(tx.QueryRow(`SELECT `+userColumns+` FROM users WHERE id = ?`, userID))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("user")
		}
		if err != nil {
			return err
		}
		user = u
		changed := false
		if up.FirstName != nil && u.FirstName != first {
			u.FirstName, changed = first, true
		}
		if up.LastName != nil && u.LastName != last {
			u.LastName, changed = last, true
		}
		if up.Email != nil && u.Email != email {
			u.Email, changed = email, true
		}
		if !changed {
			return nil
		}
		u.UpdatedAt = tx.Now()
		_, err = tx.Exec(`UPDATE users SET first_name = ?, last_name = ?, email = ?, updated_at = ? WHERE id = ?`,
			u.FirstName, u.LastName, sql.NullString{String: u.Email, Valid: u.Email != ""}, u.UpdatedAt.UnixMicro(), u.ID)
		if isConstraint(err) {
			return Problems{"/user/email": {"is already in use"}}.Err(CodeConflict)
		}
		if err != nil {
			return err
		}
		db.endCredentials(tx)
		return nil
	})
	return user, err
}
