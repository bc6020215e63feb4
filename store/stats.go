package store

import (
	"context"
	"database/sql"
	"sort"
	"strings"
	"time"
)

// Stats: what the database holds and where its bytes go, for `chatd stats`
// and an organization admin's page. It reads in one read transaction: it
// takes no write lock; a database of a million messages takes a few
// seconds (two passes over the messages: their bytes by room, and the last
// 30 days).

// StatsRooms bounds the largest rooms a report lists; StatsDays is how many
// days of messages it counts, today included.
const (
	StatsRooms = 10
	StatsDays  = 30
)

// Stats is a report on the database.
type Stats struct {
	DatabaseBytes int64 // the database file
	SQLiteFile    bool  // whether it is a SQLite file, which has the two below
	WALBytes      int64 // its write-ahead log
	PageSize      int64
	FreeBytes     int64 // free pages inside the file: what a vacuum gives back
	Tables        []TableRows
	// What the organization (or, for the whole database, everyone) has.
	Rooms, Messages, Files int64
	FileBytes              int64
	LargestByMessages      []RoomSize // most messages first
	LargestByBytes         []RoomSize // most bytes first
	Days                   []DayCount // the last StatsDays days, oldest first
}

// TableRows is a table's row count.
type TableRows struct {
	Name string
	Rows int64
}

// RoomSize is what one room holds.
type RoomSize struct {
	ID           string
	Title        *string
	Readable     bool  // for OrganizationStats: the caller may read the room (a nil Title may only mean it has none)
	Deleted      bool  // a deleted room: its messages stay until purged
	Messages     int64 // messages and events
	MessageBytes int64 // their content and metadata
	FileBytes    int64
}

// Bytes is the room's messages' and files' bytes.
func (r RoomSize) Bytes() int64 { return r.MessageBytes + r.FileBytes }

// DayCount is one day's new messages (UTC).
type DayCount struct {
	Day           string // YYYY-MM-DD
	Texts, Events int64
}

// Stats reports on the database: its files, pages and tables, and, for the
// organization orgID (or everyone, with ""), its rooms, the largest of
// them, its files and its messages of the last StatsDays days before now.
func (db *DB) Stats(ctx context.Context, orgID string, now time.Time) (*Stats, error) {
	s := &Stats{}
	err := db.readTx(ctx, func(q readQ) error {
		for _, step := range []func(readQ) error{
			func(q readQ) error { return db.dialect.readStorage(db, q, s) },
			func(q readQ) error { return s.readTables(q, db.dialect.tablesQuery) },
			func(q readQ) error { return s.readRooms(q, orgID) },
			func(q readQ) error { return s.readDays(q, orgID, now) },
		} {
			if err := step(q); err != nil {
				return err
			}
		}
		return nil
	})
	return s, err
}

// OrganizationStats is Stats for an admin of an organization: the
// database's figures, and their organization's rooms and messages, with
// the titles of the rooms they may read.
func (db *DB) OrganizationStats(ctx context.Context, caller *User) (*Stats, error) {
	var role string
	if err := db.queryRow(ctx, `SELECT role FROM users WHERE id = ?`, caller.ID).Scan(&role); err != nil {
		return nil, err
	}
	if role != "admin" {
		return nil, &Error{Code: CodeForbidden, Message: "only an admin of the organization may read its statistics"}
	}
	s, err := db.Stats(ctx, caller.OrganizationID, now())
	if err != nil {
		return nil, err
	}
	// An admin sees how big every room of the organization is, but the
	// title only of the rooms they may read.
	for _, list := range [][]RoomSize{s.LargestByMessages, s.LargestByBytes} {
		for i := range list {
			_, err := db.Room(ctx, UserActor(caller), list[i].ID)
			switch {
			case err == nil:
				list[i].Readable = true
			case ErrorCode(err) == CodeNotFound:
				list[i].Title = nil
			default:
				return nil, err
			}
		}
	}
	return s, nil
}

// sqliteStorage reads the sizes of the database's file and WAL, and its
// pages.
func (db *DB) sqliteStorage(q readQ, s *Stats) error {
	s.SQLiteFile, s.DatabaseBytes, s.WALBytes = true, fileSize(db.path), fileSize(db.path+"-wal")
	var free int64
	if err := q.QueryRow(`SELECT page_size FROM pragma_page_size`).Scan(&s.PageSize); err != nil {
		return err
	}
	if err := q.QueryRow(`SELECT freelist_count FROM pragma_freelist_count`).Scan(&free); err != nil {
		return err
	}
	s.FreeBytes = free * s.PageSize
	return nil
}

// postgresStorage reads the size of the database and its block size.
func (db *DB) postgresStorage(q readQ, s *Stats) error {
	return q.QueryRow(`SELECT pg_database_size(current_database()), current_setting('block_size')::bigint`).
		Scan(&s.DatabaseBytes, &s.PageSize)
}

// readTables counts the rows of chatd's tables, which tablesQuery lists:
// not the database's own, nor SQLite's search indexes' (virtual tables and
// their shadow tables).
func (s *Stats) readTables(q readQ, tablesQuery string) error {
	rows, err := q.Query(tablesQuery)
	if err != nil {
		return err
	}
	names, err := scanAll(rows, func(row interface{ Scan(...any) error }) (string, error) {
		var n string
		err := row.Scan(&n)
		return n, err
	})
	if err != nil {
		return err
	}
	for _, name := range names {
		t := TableRows{Name: name}
		if err := q.QueryRow(`SELECT count(*) FROM "` + strings.ReplaceAll(name, `"`, `""`) + `"`).Scan(&t.Rows); err != nil {
			return err
		}
		s.Tables = append(s.Tables, t)
	}
	return nil
}

// orgCondition narrows a query on rooms r to an organization ("": all).
func orgCondition(orgID string) (string, []any) {
	if orgID == "" {
		return "1 = 1", nil
	}
	return "r.organization_id = ?", []any{orgID}
}

// readRooms sizes every room: its messages' bytes take one pass over the
// messages, its files' one over the files.
func (s *Stats) readRooms(q readQ, orgID string) error {
	cond, args := orgCondition(orgID)
	rows, err := q.Query(`SELECT r.id, r.title, r.deleted_at IS NOT NULL, r.message_count,
		coalesce((SELECT sum(size) FROM files f WHERE f.room_id = r.id), 0) FROM rooms r WHERE `+cond, args...)
	if err != nil {
		return err
	}
	rooms, err := scanAll(rows, func(row interface{ Scan(...any) error }) (*RoomSize, error) {
		var r RoomSize
		var title sql.NullString
		err := row.Scan(&r.ID, &title, &r.Deleted, &r.Messages, &r.FileBytes)
		r.Title = nullString(title)
		return &r, err
	})
	if err != nil {
		return err
	}
	byID := map[string]*RoomSize{}
	for _, r := range rooms {
		byID[r.ID] = r
		s.Rooms, s.Messages, s.FileBytes = s.Rooms+1, s.Messages+r.Messages, s.FileBytes+r.FileBytes
	}
	if err := q.QueryRow(`SELECT count(*) FROM files f JOIN rooms r ON r.id = f.room_id WHERE `+cond, args...).Scan(&s.Files); err != nil {
		return err
	}
	if err := readMessageBytes(q, orgID, byID); err != nil {
		return err
	}
	s.LargestByMessages = largest(rooms, func(r *RoomSize) int64 { return r.Messages })
	s.LargestByBytes = largest(rooms, func(r *RoomSize) int64 { return r.Bytes() })
	return nil
}

// readMessageBytes adds each room's messages' bytes to byID.
func readMessageBytes(q readQ, orgID string, byID map[string]*RoomSize) error {
	cond, args := orgCondition(orgID)
	rows, err := q.Query(`SELECT m.room_id, sum(octet_length(m.content) + octet_length(m.metadata)) FROM messages m
		JOIN rooms r ON r.id = m.room_id WHERE `+cond+` GROUP BY m.room_id`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return err
		}
		if r := byID[id]; r != nil {
			r.MessageBytes = n
		}
	}
	return rows.Err()
}

// largest is the StatsRooms rooms with the most of size, most first (ties
// by id), leaving out those with none.
func largest(rooms []*RoomSize, size func(*RoomSize) int64) []RoomSize {
	sorted := append([]*RoomSize(nil), rooms...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := size(sorted[i]), size(sorted[j])
		if a != b {
			return a > b
		}
		return sorted[i].ID < sorted[j].ID
	})
	out := []RoomSize{}
	for _, r := range sorted {
		if len(out) == StatsRooms || size(r) == 0 {
			break
		}
		out = append(out, *r)
	}
	return out
}

// readDays counts the messages of the last StatsDays days. Messages have no
// index by time, but their seq grows with it: the first seq of the window
// is found by bisection, and only the window's messages are read.
func (s *Stats) readDays(q readQ, orgID string, now time.Time) error {
	today := now.UTC().Truncate(24 * time.Hour)
	start := today.AddDate(0, 0, 1-StatsDays)
	s.Days = make([]DayCount, StatsDays)
	for i := range s.Days {
		s.Days[i].Day = start.AddDate(0, 0, i).Format(time.DateOnly)
	}
	from, err := firstSeqSince(q, start.UnixMicro())
	if err != nil || from == 0 {
		return err
	}
	cond, args := orgCondition(orgID)
	rows, err := q.Query(`SELECT (m.inserted_at - ?) / 86400000000, m.message_type = 'text', count(*) FROM messages m
		JOIN rooms r ON r.id = m.room_id WHERE m.seq >= ? AND m.inserted_at >= ? AND `+cond+` GROUP BY 1, 2`,
		append([]any{start.UnixMicro(), from, start.UnixMicro()}, args...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var day, n int64
		var text bool
		if err := rows.Scan(&day, &text, &n); err != nil {
			return err
		}
		if day < 0 || day >= StatsDays {
			continue // a clock set back or forward
		}
		if text {
			s.Days[day].Texts += n
		} else {
			s.Days[day].Events += n
		}
	}
	return rows.Err()
}

// firstSeqSince is the seq of the first message inserted at or after t, by
// bisection over seq (which grows with time), or 0 when there is none.
func firstSeqSince(q readQ, t int64) (int64, error) {
	var lo, hi int64
	if err := q.QueryRow(`SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM messages`).Scan(&lo, &hi); err != nil || hi == 0 {
		return 0, err
	}
	at := func(seq int64) (int64, int64, error) { // the first message at or after seq
		var s, ins int64
		err := q.QueryRow(`SELECT seq, inserted_at FROM messages WHERE seq >= ? ORDER BY seq LIMIT 1`, seq).Scan(&s, &ins)
		return s, ins, err
	}
	if _, ins, err := at(hi); err != nil || ins < t {
		return 0, err
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		s, ins, err := at(mid)
		if err != nil {
			return 0, err
		}
		if ins >= t {
			hi = min(mid, s)
		} else {
			lo = s + 1
		}
	}
	first, _, err := at(lo)
	return first, err
}
