package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Retention: how long a room keeps its text messages, its events (thoughts,
// tool calls and results, errors, tasks, …: most of the bytes) and its
// files, each counted separately in days. An organization's admin sets the
// default for every room of the organization; a room's owner may shorten
// it for the room, never lengthen it: the effective period of each kind is
// the shorter of the two, so an operator's disk and compliance policy holds
// in every room. Nothing set means kept forever, which is where every
// database starts (an upgrade deletes nothing).
//
// The purge (purge.go) deletes what the effective periods put out of time,
// in small steps through the writer.

// MaxRetentionDays bounds a retention period (100 years).
const MaxRetentionDays = 36500

// The kinds of content retention counts separately.
const (
	KindText  = "text"
	KindEvent = "event"
	KindFile  = "file"
)

// RetentionKinds are the kinds, in the order reports list them.
var RetentionKinds = []string{KindText, KindEvent, KindFile}

// Periods are the days each kind is kept; nil keeps it forever (an
// organization's) or follows the organization (a room's).
type Periods struct {
	TextDays, EventDays, FileDays *int
}

// Days returns the period of kind.
func (p Periods) Days(kind string) *int {
	switch kind {
	case KindText:
		return p.TextDays
	case KindEvent:
		return p.EventDays
	}
	return p.FileDays
}

// Check returns the validation problems of p, at pointers under prefix
// ("/retention").
func (p Periods) Check(prefix string) error {
	problems := Problems{}
	for _, f := range []struct {
		name string
		days *int
	}{{"text_days", p.TextDays}, {"event_days", p.EventDays}, {"file_days", p.FileDays}} {
		if f.days != nil && (*f.days < 1 || *f.days > MaxRetentionDays) {
			problems.Add(prefix+"/"+f.name, "must be a number of days from 1 to %d, or null to keep forever", MaxRetentionDays)
		}
	}
	return problems.Err(CodeValidation)
}

// shorter is the shorter of two periods, nil being forever.
func shorter(a, b *int) *int {
	switch {
	case a == nil:
		return b
	case b == nil || *a <= *b:
		return a
	}
	return b
}

// Effective is what applies in a room whose organization keeps org and
// which itself keeps p: each kind's shorter period.
func (p Periods) Effective(org Periods) Periods {
	return Periods{shorter(org.TextDays, p.TextDays), shorter(org.EventDays, p.EventDays), shorter(org.FileDays, p.FileDays)}
}

// Set reports whether any kind has a period.
func (p Periods) Set() bool { return p.TextDays != nil || p.EventDays != nil || p.FileDays != nil }

// Retention is an organization's or a room's setting.
type Retention struct {
	Periods
	UpdatedAt *time.Time // nil while never set
	UpdatedBy string     // who set it last: a person's id, or "" for the command line
}

// RoomRetention is a room's own setting with what applies in it.
type RoomRetention struct {
	Retention
	Organization Periods // the organization's default
	Effective    Periods // what the purge applies: the shorter of each kind
}

const retentionColumns = `text_days, event_days, file_days, updated_by, updated_at`

func scanRetention(row interface{ Scan(...any) error }) (*Retention, error) {
	var r Retention
	var text, event, file sql.NullInt64
	var at int64
	err := row.Scan(&text, &event, &file, &r.UpdatedBy, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return &Retention{}, nil
	}
	if err != nil {
		return nil, err
	}
	r.TextDays, r.EventDays, r.FileDays = nullDays(text), nullDays(event), nullDays(file)
	t := fromMicros(at)
	r.UpdatedAt = &t
	return &r, nil
}

func nullDays(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	d := int(v.Int64)
	return &d
}

func daysArg(d *int) any {
	if d == nil {
		return nil
	}
	return *d
}

func organizationRetention(q queryer, orgID string) (*Retention, error) {
	return scanRetention(q.QueryRow(`SELECT `+retentionColumns+` FROM organization_retention WHERE organization_id = ?`, orgID))
}

// OrganizationRetention returns the retention default of a person's
// organization; every person of it may read it.
func (db *DB) OrganizationRetention(ctx context.Context, caller *User) (*Retention, error) {
	var r *Retention
	err := db.readTx(ctx, func(q readQ) error {
		var err error
		r, err = organizationRetention(q, caller.OrganizationID)
		return err
	})
	return r, err
}

// SetOrganizationRetention replaces the retention default of the caller's
// organization; only its admins may. The purge is woken to apply it.
func (db *DB) SetOrganizationRetention(ctx context.Context, caller *User, p Periods) (*Retention, error) {
	if err := p.Check("/retention"); err != nil {
		return nil, err
	}
	var r *Retention
	err := db.Write(ctx, func(tx *Tx) error {
		var role string
		if err := tx.QueryRow(`SELECT role FROM users WHERE id = ?`, caller.ID).Scan(&role); err != nil {
			return err
		}
		if role != "admin" {
			return &Error{Code: CodeForbidden, Message: "only an admin of the organization may set its retention"}
		}
		var err error
		r, err = db.setOrganizationRetention(tx, caller.OrganizationID, caller.ID, p)
		return err
	})
	return r, err
}

// SetOrganizationRetentionByName replaces the retention default of the
// organization named name, for the command line (the operator).
func (db *DB) SetOrganizationRetentionByName(ctx context.Context, name string, p Periods) (*Retention, error) {
	if err := p.Check(""); err != nil {
		return nil, err
	}
	var r *Retention
	err := db.Write(ctx, func(tx *Tx) error {
		orgID, err := organizationNamed(tx, name)
		if err != nil {
			return err
		}
		r, err = db.setOrganizationRetention(tx, orgID, "", p)
		return err
	})
	return r, err
}

// OrganizationRetentionByName returns the retention default of the
// organization named name, for the command line.
func (db *DB) OrganizationRetentionByName(ctx context.Context, name string) (*Retention, error) {
	var r *Retention
	err := db.readTx(ctx, func(q readQ) error {
		orgID, err := organizationNamed(q, name)
		if err != nil {
			return err
		}
		r, err = organizationRetention(q, orgID)
		return err
	})
	return r, err
}

func organizationNamed(q queryer, name string) (string, error) {
	var id string
	err := q.QueryRow(`SELECT id FROM organizations WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", notFound("organization")
	}
	return id, err
}

func (db *DB) setOrganizationRetention(tx *Tx, orgID, by string, p Periods) (*Retention, error) {
	_, err := tx.Exec(`INSERT INTO organization_retention (organization_id, text_days, event_days, file_days, updated_by, updated_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (organization_id) DO UPDATE SET text_days = excluded.text_days,
		event_days = excluded.event_days, file_days = excluded.file_days, updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
		orgID, daysArg(p.TextDays), daysArg(p.EventDays), daysArg(p.FileDays), by, tx.Now().UnixMicro())
	if err != nil {
		return nil, err
	}
	tx.AfterCommit(db.purge.poke)
	return organizationRetention(tx, orgID)
}

// roomRetention reads a room's setting with its organization's.
func roomRetention(q queryer, room *Room) (*RoomRetention, error) {
	own, err := scanRetention(q.QueryRow(`SELECT `+retentionColumns+` FROM room_retention WHERE room_id = ?`, room.ID))
	if err != nil {
		return nil, err
	}
	org, err := organizationRetention(q, room.OrganizationID)
	if err != nil {
		return nil, err
	}
	return &RoomRetention{Retention: *own, Organization: org.Periods, Effective: own.Periods.Effective(org.Periods)}, nil
}

// RoomRetention returns a room's retention, to anyone who may read the
// room.
func (db *DB) RoomRetention(ctx context.Context, actor Actor, roomID string) (*RoomRetention, error) {
	var r *RoomRetention
	err := db.readTx(ctx, func(q readQ) error {
		a, err := loadAccess(q, actor, roomID)
		if err != nil {
			return err
		}
		r, err = roomRetention(q, a.room)
		return err
	})
	return r, err
}

// SetRoomRetention replaces a room's own retention; only its owner may. A
// period longer than the organization's is kept as set but does not apply
// while the organization's is shorter.
func (db *DB) SetRoomRetention(ctx context.Context, actor Actor, roomID string, p Periods) (*RoomRetention, error) {
	if err := p.Check("/retention"); err != nil {
		return nil, err
	}
	var r *RoomRetention
	err := db.writeInRoom(ctx, actor, roomID, loadAccess, func(tx *Tx, a *roomAccess) error {
		if !a.isOwner() {
			return &Error{Code: CodeForbidden, Message: "only the owner of the room may set its retention"}
		}
		_, err := tx.Exec(`INSERT INTO room_retention (room_id, text_days, event_days, file_days, updated_by, updated_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (room_id) DO UPDATE SET text_days = excluded.text_days,
			event_days = excluded.event_days, file_days = excluded.file_days, updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
			roomID, daysArg(p.TextDays), daysArg(p.EventDays), daysArg(p.FileDays), actor.ID, tx.Now().UnixMicro())
		if err != nil {
			return err
		}
		tx.AfterCommit(db.purge.poke)
		r, err = roomRetention(tx, a.room)
		return err
	})
	return r, err
}

// effectivePeriods reads what applies in one room now.
func effectivePeriods(q queryer, roomID string) (Periods, error) {
	var org, own [3]sql.NullInt64
	err := q.QueryRow(`SELECT o.text_days, o.event_days, o.file_days, rr.text_days, rr.event_days, rr.file_days
		FROM rooms r LEFT JOIN organization_retention o ON o.organization_id = r.organization_id
		LEFT JOIN room_retention rr ON rr.room_id = r.id WHERE r.id = ?`, roomID).
		Scan(&org[0], &org[1], &org[2], &own[0], &own[1], &own[2])
	if errors.Is(err, sql.ErrNoRows) {
		return Periods{}, nil
	}
	if err != nil {
		return Periods{}, err
	}
	o := Periods{nullDays(org[0]), nullDays(org[1]), nullDays(org[2])}
	return Periods{nullDays(own[0]), nullDays(own[1]), nullDays(own[2])}.Effective(o), nil
}
