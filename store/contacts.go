package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Contacts connect people and agents across organizations: a contact is a
// peer (it can be invited into rooms) whatever organization it belongs to.
// A contact relationship exists in both directions, made by a request that
// its recipient approves (or that meets a request the other way, which
// approves both at once).
//
// Contact request states: pending, then approved (by the recipient),
// rejected (by the recipient) or cancelled (by the requester). A resolved
// request stays resolved (409 when answered again).

// PartyType says whether a party is a person or an agent, spelled as the
// wire spells a participant's type and as the *_type columns hold it.
type PartyType string

const (
	PartyUser  PartyType = "User"
	PartyAgent PartyType = "Agent"
)

// PartyTypes are what a type filter accepts, in the order its refusal names
// them.
var PartyTypes = []PartyType{PartyUser, PartyAgent}

// Party is a person or an agent as contacts see it.
type Party struct {
	ID                string
	Type              PartyType
	Handle            string
	Name              string
	Email             string // people only, "" when none
	Description       *string
	IsExternal        *bool
	ListedInDirectory bool
	Tags              []string // agents only
}

// Contact is one direction of a contact relationship: Party is the contact
// of OwnerID, and ID is OwnerID's record of it.
type Contact struct {
	ID         string
	OwnerID    string
	OwnerType  PartyType
	Party      *Party
	InsertedAt time.Time
}

// ContactRequest is a request to become contacts.
type ContactRequest struct {
	ID          string
	Requester   *Party
	Recipient   *Party
	Message     *string
	Status      string // pending, approved, rejected, cancelled, expired
	InsertedAt  time.Time
	RespondedAt *time.Time
}

// MaxContactMessage is the longest message of a contact request.
const MaxContactMessage = 500

// ParseHandle checks the form of a handle ("alice", "@alice",
// "alice/helper") and returns it without "@"; a malformed one is 400.
func ParseHandle(handle string) (string, error) {
	h := strings.TrimPrefix(strings.TrimSpace(handle), "@")
	owner, slug, isAgent := strings.Cut(h, "/")
	if ValidHandle(owner) != "" || (isAgent && ValidHandle(slug) != "") {
		return "", &Error{Code: CodeBadRequest, Message: "invalid handle format: expected @person or @person/agent"}
	}
	return h, nil
}

const partyUserSelect = `SELECT u.id, 'User', u.handle, trim(u.first_name || ' ' || u.last_name), coalesce(u.email, ''),
	NULL, NULL, u.listed_in_directory, NULL FROM users u`
const partyAgentSelect = `SELECT a.id, 'Agent', a.handle, a.name, '', a.description, a.is_external, a.listed_in_directory, a.tags
	FROM agents a`

func scanParty(row interface{ Scan(...any) error }) (*Party, error) {
	var p Party
	var desc, tags sql.NullString
	var ext sql.NullBool
	if err := row.Scan(&p.ID, &p.Type, &p.Handle, &p.Name, &p.Email, &desc, &ext, &p.ListedInDirectory, &tags); err != nil {
		return nil, err
	}
	p.Description = nullString(desc)
	if ext.Valid {
		p.IsExternal = &ext.Bool
	}
	if tags.Valid {
		if err := json.Unmarshal([]byte(tags.String), &p.Tags); err != nil {
			return nil, err
		}
	}
	return &p, nil
}

// partyByID returns a live person or agent.
func partyByID(q queryer, id string) (*Party, error) {
	p, err := scanParty(q.QueryRow(partyUserSelect+` WHERE u.id = ? AND u.removed_at IS NULL`, id))
	if errors.Is(err, sql.ErrNoRows) {
		p, err = scanParty(q.QueryRow(partyAgentSelect+` WHERE a.id = ? AND a.deleted_at IS NULL`, id))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("handle")
	}
	return p, err
}

// partyByHandle returns the live person or agent with a handle.
func partyByHandle(q queryer, handle string) (*Party, error) {
	h, err := ParseHandle(handle)
	if err != nil {
		return nil, err
	}
	var p *Party
	if strings.Contains(h, "/") {
		p, err = scanParty(q.QueryRow(partyAgentSelect+` WHERE a.handle = ? AND a.deleted_at IS NULL`, h))
	} else {
		p, err = scanParty(q.QueryRow(partyUserSelect+` WHERE u.handle = ? AND u.removed_at IS NULL`, h))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &Error{Code: CodeNotFound, Message: "no one has the handle " + h}
	}
	return p, err
}

// ResolveHandle returns who a handle names.
func (db *DB) ResolveHandle(ctx context.Context, handle string) (*Party, error) {
	var p *Party
	err := db.readTx(ctx, func(q readQ) error {
		var err error
		p, err = partyByHandle(q, handle)
		return err
	})
	return p, err
}

func isContact(q queryer, ownerID, contactID string) (bool, error) {
	var n int
	err := q.QueryRow(`SELECT count(*) FROM contacts WHERE owner_id = ? AND contact_id = ?`, ownerID, contactID).Scan(&n)
	return n > 0, err
}

const requestColumns = `id, requester_id, recipient_id, message, status, inserted_at, responded_at`

// scanRequest reads a request's row. Its parties hold only their ids until
// readParties reads them.
func scanRequest(row interface{ Scan(...any) error }) (*ContactRequest, error) {
	var r ContactRequest
	var requester, recipient string
	var msg sql.NullString
	var ins int64
	var responded sql.NullInt64
	if err := row.Scan(&r.ID, &requester, &recipient, &msg, &r.Status, &ins, &responded); err != nil {
		return nil, err
	}
	r.Message, r.InsertedAt = nullString(msg), fromMicros(ins)
	if responded.Valid {
		t := fromMicros(responded.Int64)
		r.RespondedAt = &t
	}
	r.Requester, r.Recipient = &Party{ID: requester}, &Party{ID: recipient}
	return &r, nil
}

// queryRequest reads the one request of a query of requestColumns, with its
// parties; sql.ErrNoRows when there is none.
func queryRequest(q queryer, query string, args ...any) (*ContactRequest, error) {
	r, err := scanRequest(q.QueryRow(query, args...))
	if err != nil {
		return nil, err
	}
	return r, readParties(q, &r.Requester, &r.Recipient)
}

// queryRequests reads the requests of a query of requestColumns: the rows
// whole first, then their parties, which are read on the same connection.
func queryRequests(q queryer, query string, args ...any) ([]*ContactRequest, error) {
	rows, err := q.Query(query, args...)
	if err != nil {
		return nil, err
	}
	out := []*ContactRequest{}
	var parties []**Party
	for rows.Next() {
		r, err := scanRequest(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, r)
		parties = append(parties, &r.Requester, &r.Recipient)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, readParties(q, parties...)
}

// readParties replaces each party that holds only an id with the party
// read, or with a placeholder for one deleted since.
func readParties(q queryer, parties ...**Party) error {
	for _, p := range parties {
		read, err := partyOrGone(q, (*p).ID)
		if err != nil {
			return err
		}
		*p = read
	}
	return nil
}

// partyOrGone is a party, or a placeholder for one deleted since.
func partyOrGone(q queryer, id string) (*Party, error) {
	p, err := partyByID(q, id)
	if ErrorCode(err) == CodeNotFound {
		return &Party{ID: id, Type: PartyAgent, Name: "(deleted)"}, nil
	}
	return p, err
}

// AddContact asks the party with handle to become the actor's contact. If
// that party had already asked the actor, both requests meet: it is
// approved and the contact made at once.
// messageAt is the JSON Pointer of the message in the request body.
func (db *DB) AddContact(ctx context.Context, actor Actor, handle string, message *string, messageAt string) (*ContactRequest, error) {
	if message != nil {
		m, msg := cleanMultiline(*message, MaxContactMessage)
		if msg != "" {
			return nil, Problems{messageAt: {msg}}.Err(CodeValidation)
		}
		message = &m
		if m == "" {
			message = nil
		}
	}
	var out *ContactRequest
	err := db.Write(ctx, func(tx *Tx) error {
		target, err := partyByHandle(tx, handle)
		if err != nil {
			return err
		}
		switch already, err := isContact(tx, actor.ID, target.ID); {
		case err != nil:
			return err
		case target.ID == actor.ID:
			return &Error{Code: CodeConflict, Message: "you cannot add yourself as a contact"}
		case already:
			return &Error{Code: CodeConflict, Message: "already contacts with " + target.Handle}
		}
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM contact_requests WHERE requester_id = ? AND recipient_id = ? AND status = 'pending'`,
			actor.ID, target.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return &Error{Code: CodeConflict, Message: "a request to " + target.Handle + " is already pending"}
		}
		inverse, err := queryRequest(tx, `SELECT `+requestColumns+` FROM contact_requests
			WHERE requester_id = ? AND recipient_id = ? AND status = 'pending'`, target.ID, actor.ID)
		if err == nil {
			out, err = db.resolveRequest(tx, inverse, "approved")
			return err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		id := newID()
		if _, err := tx.Exec(`INSERT INTO contact_requests (id, requester_id, requester_type, recipient_id, recipient_type, message, status, inserted_at)
			VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)`, id, actor.ID, actor.Type, target.ID, target.Type, toNullString(message), tx.Now().UnixMicro()); err != nil {
			return err
		}
		if out, err = queryRequest(tx, `SELECT `+requestColumns+` FROM contact_requests WHERE id = ?`, id); err != nil {
			return err
		}
		db.publish(tx, Change{Kind: ContactRequestReceived, ContactRequest: out})
		return nil
	})
	return out, err
}

// resolveRequest moves a pending request to status; approving makes the
// contact in both directions.
func (db *DB) resolveRequest(tx *Tx, r *ContactRequest, status string) (*ContactRequest, error) {
	now := tx.Now()
	if _, err := tx.Exec(`UPDATE contact_requests SET status = ?, responded_at = ? WHERE id = ?`, status, now.UnixMicro(), r.ID); err != nil {
		return nil, err
	}
	r.Status, r.RespondedAt = status, &now
	db.publish(tx, Change{Kind: ContactRequestUpdated, ContactRequest: r})
	if status != "approved" {
		return r, nil
	}
	for _, pair := range [][2]*Party{{r.Requester, r.Recipient}, {r.Recipient, r.Requester}} {
		owner, other := pair[0], pair[1]
		id := newID()
		res, err := tx.Exec(`INSERT INTO contacts (id, owner_id, owner_type, contact_id, contact_type, inserted_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (owner_id, contact_id) DO NOTHING`, id, owner.ID, owner.Type, other.ID, other.Type, now.UnixMicro())
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			db.publish(tx, Change{Kind: ContactAdded, Contact: &Contact{ID: id, OwnerID: owner.ID, OwnerType: owner.Type, Party: other, InsertedAt: now}})
		}
	}
	return r, nil
}

// RespondContactRequest approves, rejects (both: the recipient) or cancels
// (the requester) a pending request, named by id or by the other party's
// handle.
func (db *DB) RespondContactRequest(ctx context.Context, actor Actor, action, requestID, handle string) (*ContactRequest, error) {
	status := map[string]string{"approve": "approved", "reject": "rejected", "cancel": "cancelled"}[action]
	if status == "" {
		return nil, Problems{"/action": {"must be approve, reject or cancel"}}.Err(CodeValidation)
	}
	var out *ContactRequest
	err := db.Write(ctx, func(tx *Tx) error {
		var r *ContactRequest
		var err error
		switch {
		case requestID != "":
			if !ValidID(requestID) {
				return notFound("contact request")
			}
			r, err = queryRequest(tx, `SELECT `+requestColumns+` FROM contact_requests
				WHERE id = ? AND (requester_id = ? OR recipient_id = ?)`, requestID, actor.ID, actor.ID)
		default:
			other, perr := partyByHandle(tx, handle)
			if perr != nil {
				return perr
			}
			from, to := other.ID, actor.ID // approve/reject answer a request made to the actor
			if action == "cancel" {
				from, to = actor.ID, other.ID
			}
			r, err = queryRequest(tx, `SELECT `+requestColumns+` FROM contact_requests
				WHERE requester_id = ? AND recipient_id = ? AND status = 'pending'`, from, to)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return &Error{Code: CodeNotFound, Message: "no such pending contact request"}
		}
		if err != nil {
			return err
		}
		switch {
		case action == "cancel" && r.Requester.ID != actor.ID:
			return &Error{Code: CodeForbidden, Message: "only the sender of a request may cancel it"}
		case action != "cancel" && r.Recipient.ID != actor.ID:
			return &Error{Code: CodeForbidden, Message: "only the recipient of a request may approve or reject it"}
		case r.Status != "pending":
			return &Error{Code: CodeConflict, Message: "this request is already " + r.Status}
		}
		out, err = db.resolveRequest(tx, r, status)
		return err
	})
	return out, err
}

// RemoveContact ends a contact relationship in both directions; the contact
// is named by the actor's record id (or the other party's id) or by handle.
func (db *DB) RemoveContact(ctx context.Context, actor Actor, recordID, handle string) error {
	return db.Write(ctx, func(tx *Tx) error {
		var otherID string
		if recordID != "" {
			// contact_id names the contact record or, as the Human API's
			// Contact.contact_id does, the other party.
			err := tx.QueryRow(`SELECT contact_id FROM contacts WHERE owner_id = ? AND (id = ? OR contact_id = ?)`,
				actor.ID, recordID, recordID).Scan(&otherID)
			if errors.Is(err, sql.ErrNoRows) {
				return notFound("contact")
			}
			if err != nil {
				return err
			}
		} else {
			other, err := partyByHandle(tx, handle)
			if err != nil {
				return err
			}
			otherID = other.ID
		}
		// Each side's contact_removed names the party it lost.
		parties := map[string]*Party{}
		for _, id := range []string{actor.ID, otherID} {
			p, err := partyByID(tx, id)
			if err != nil {
				return err
			}
			parties[id] = p
		}
		for _, pair := range [][2]string{{actor.ID, otherID}, {otherID, actor.ID}} {
			var id string
			var ownerType PartyType
			err := tx.QueryRow(`SELECT id, owner_type FROM contacts WHERE owner_id = ? AND contact_id = ?`, pair[0], pair[1]).Scan(&id, &ownerType)
			if errors.Is(err, sql.ErrNoRows) {
				if pair[0] == actor.ID {
					return notFound("contact")
				}
				continue
			}
			if err != nil {
				return err
			}
			if _, err := tx.Exec(`DELETE FROM contacts WHERE id = ?`, id); err != nil {
				return err
			}
			db.publish(tx, Change{Kind: ContactRemoved, Contact: &Contact{ID: id, OwnerID: pair[0], OwnerType: ownerType, Party: parties[pair[1]]}})
		}
		return nil
	})
}

// dropContactsOf ends the contacts of a party that is going away (a deleted
// agent) and cancels the requests it had pending; the other sides hear of it.
func (db *DB) dropContactsOf(tx *Tx, partyID string) error {
	leaving, err := partyByID(tx, partyID)
	if err != nil {
		return err
	}
	rows, err := tx.Query(`SELECT id, owner_id, owner_type FROM contacts WHERE contact_id = ?`, partyID)
	if err != nil {
		return err
	}
	var gone []*Contact
	for rows.Next() {
		c := Contact{Party: leaving}
		if err := rows.Scan(&c.ID, &c.OwnerID, &c.OwnerType); err != nil {
			rows.Close()
			return err
		}
		gone = append(gone, &c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if _, err := tx.Exec(`DELETE FROM contacts WHERE owner_id = ? OR contact_id = ?`, partyID, partyID); err != nil {
		return err
	}
	for _, c := range gone {
		db.publish(tx, Change{Kind: ContactRemoved, Contact: c})
	}
	pending, err := queryRequests(tx, `SELECT `+requestColumns+` FROM contact_requests
		WHERE (requester_id = ? OR recipient_id = ?) AND status = 'pending'`, partyID, partyID)
	if err != nil {
		return err
	}
	for _, r := range pending {
		if _, err := db.resolveRequest(tx, r, "cancelled"); err != nil {
			return err
		}
	}
	return nil
}

// ListContacts lists the actor's contacts, oldest first.
func (db *DB) ListContacts(ctx context.Context, actor Actor, pr PageRequest) (*Page[*Contact], error) {
	page := &Page[*Contact]{PageInfo: PageInfo{Before: pr.Offset}}
	err := db.readTx(ctx, func(q readQ) error {
		if err := q.QueryRow(`SELECT count(*) FROM contacts WHERE owner_id = ?`, actor.ID).Scan(&page.Total); err != nil {
			return err
		}
		rows, err := q.Query(`SELECT id, contact_id, inserted_at FROM contacts WHERE owner_id = ? ORDER BY inserted_at, id LIMIT ? OFFSET ?`,
			actor.ID, pr.Limit+1, pr.Offset)
		if err != nil {
			return err
		}
		var parties []**Party
		for rows.Next() {
			c := &Contact{OwnerID: actor.ID, OwnerType: actor.Type, Party: &Party{}}
			var ins int64
			if err := rows.Scan(&c.ID, &c.Party.ID, &ins); err != nil {
				rows.Close()
				return err
			}
			c.InsertedAt = fromMicros(ins)
			page.Items = append(page.Items, c)
			parties = append(parties, &c.Party)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return readParties(q, parties...)
	})
	if err != nil {
		return nil, err
	}
	if len(page.Items) > pr.Limit {
		page.Items, page.HasMore = page.Items[:pr.Limit], true
	}
	return page, nil
}

// ContactRequestStatuses are the states a listing of requests may filter on.
var ContactRequestStatuses = []string{"pending", "approved", "rejected", "cancelled", "expired"}

// ListContactRequests lists the requests the actor received (received) or
// sent, newest first, with one of statuses (all when empty).
func (db *DB) ListContactRequests(ctx context.Context, actor Actor, received bool, statuses []string, pr PageRequest) (*Page[*ContactRequest], error) {
	col := "requester_id"
	if received {
		col = "recipient_id"
	}
	where := col + ` = ?`
	args := []any{actor.ID}
	if len(statuses) > 0 {
		where += ` AND status IN ` + inList(len(statuses))
		for _, s := range statuses {
			args = append(args, s)
		}
	}
	page := &Page[*ContactRequest]{PageInfo: PageInfo{Before: pr.Offset}}
	err := db.readTx(ctx, func(q readQ) error {
		if err := q.QueryRow(`SELECT count(*) FROM contact_requests WHERE `+where, args...).Scan(&page.Total); err != nil {
			return err
		}
		var err error
		page.Items, err = queryRequests(q, `SELECT `+requestColumns+` FROM contact_requests WHERE `+where+`
			ORDER BY inserted_at DESC, id DESC LIMIT ? OFFSET ?`, append(args, pr.Limit+1, pr.Offset)...)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(page.Items) > pr.Limit {
		page.Items, page.HasMore = page.Items[:pr.Limit], true
	}
	return page, nil
}

// ContactRequest returns a request the actor sent or received.
func (db *DB) ContactRequest(ctx context.Context, actor Actor, id string) (*ContactRequest, error) {
	if !ValidID(id) {
		return nil, notFound("contact request")
	}
	var r *ContactRequest
	err := db.readTx(ctx, func(q readQ) error {
		var err error
		r, err = queryRequest(q, `SELECT `+requestColumns+` FROM contact_requests WHERE id = ? AND (requester_id = ? OR recipient_id = ?)`,
			id, actor.ID, actor.ID)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("contact request")
		}
		return err
	})
	return r, err
}
