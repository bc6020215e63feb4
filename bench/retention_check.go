package main

import (
	"database/sql"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"strings"
	"time"
)

// What the retention workload checks of the purge, beside how fast it
// went: that it deleted everything out of time (every old message, and
// every old file with all of its chunks) and touched nothing in time (every
// message still within its period, the posts of both runs among them, byte
// for byte, with its deliveries and attachments, and the file in time with
// every chunk); that every room's message count still matches its
// messages; and, after chatd vacuum, that the file, its foreign keys and
// the search index are whole. A message's kind decides its period: text,
// or an event (any other type).
//
// The purge's pass counts back from a moment between the purge server's
// start and the pass's end, so what it must have deleted is what was out of
// time when the server started, and what it must have left is what is
// still in time when the pass ended. The seeding keeps every message and
// file days away from either cut-off, so none falls between them.

// keptMessage is what must survive of a message in time.
type keptMessage struct {
	text bool
	at   int64
	sum  uint64 // of its content and metadata
	refs int64  // its deliveries and attachments
}

// keptFile is a file and what must survive of it.
type keptFile struct {
	at     int64
	chunks int64
	sum    uint64 // of its chunks' data, in order
}

// purgeSnapshot is the database before the purge: its messages in time,
// every file, and the last message's number.
type purgeSnapshot struct {
	taken    time.Time
	messages map[int64]keptMessage
	files    map[string]keptFile
	last     int64
}

// cutoffs are the times before which a text, an event and a file are out
// of time at t, in µs.
func cutoffs(t time.Time) (text, event, file int64) {
	days := func(n int) int64 { return t.Add(-time.Duration(n) * 24 * time.Hour).UnixMicro() }
	return days(textDays), days(eventDays), days(fileDays)
}

// openRead opens the database read-only (no server runs on it).
func openRead(db string) (*sql.DB, error) {
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
	if err == nil {
		conn.SetMaxOpenConns(1)
	}
	return conn, err
}

// messageRows runs a query of seq, message_type = 'text', inserted_at,
// content, metadata and the references to the message, and hands each row
// on.
func messageRows(conn *sql.DB, query string, each func(seq int64, m keptMessage), args ...any) error {
	rows, err := conn.Query(`SELECT seq, message_type = 'text', inserted_at, content, metadata,
		(SELECT count(*) FROM deliveries d WHERE d.message_seq = m.seq) +
		(SELECT count(*) FROM message_attachments a WHERE a.message_seq = m.seq)
		FROM messages m WHERE `+query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var m keptMessage
		var content, metadata string
		if err := rows.Scan(&seq, &m.text, &m.at, &content, &metadata, &m.refs); err != nil {
			return err
		}
		h := fnv.New64a()
		h.Write([]byte(content + "\x00" + metadata))
		m.sum = h.Sum64()
		each(seq, m)
	}
	return rows.Err()
}

// snapshot reads what the purge must leave, and every file.
func snapshot(db string) (*purgeSnapshot, error) {
	conn, err := openRead(db)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	s := &purgeSnapshot{taken: time.Now(), messages: map[int64]keptMessage{}}
	text, event, _ := cutoffs(s.taken)
	err = messageRows(conn, `(message_type = 'text' AND inserted_at >= ?) OR (message_type != 'text' AND inserted_at >= ?)`,
		func(seq int64, m keptMessage) { s.messages[seq] = m }, text, event)
	if err != nil {
		return nil, err
	}
	if err := conn.QueryRow(`SELECT coalesce(max(seq), 0) FROM messages`).Scan(&s.last); err != nil {
		return nil, err
	}
	s.files, err = readFiles(conn)
	return s, err
}

// readFiles reads every file with its chunks.
func readFiles(conn *sql.DB) (map[string]keptFile, error) {
	rows, err := conn.Query(`SELECT f.id, f.inserted_at, c.data FROM files f LEFT JOIN file_chunks c ON c.file_id = f.id
		ORDER BY f.id, c.n`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	files := map[string]keptFile{}
	sums := map[string]hash.Hash64{}
	for rows.Next() {
		var id string
		var at int64
		var data []byte
		if err := rows.Scan(&id, &at, &data); err != nil {
			return nil, err
		}
		f := files[id]
		f.at = at
		if data != nil {
			if sums[id] == nil {
				sums[id] = fnv.New64a()
			}
			f.chunks++
			sums[id].Write(data)
			f.sum = sums[id].Sum64()
		}
		files[id] = f
	}
	return files, rows.Err()
}

// verify checks the database after the purge p, during which the posting
// run during went on.
func (s *purgeSnapshot) verify(db string, p purgeFigures, during result) (string, error) {
	conn, err := openRead(db)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	var problems []error
	text, event, _ := cutoffs(p.started)
	var left int64
	err = conn.QueryRow(`SELECT count(*) FROM messages WHERE (message_type = 'text' AND inserted_at < ?)
		OR (message_type != 'text' AND inserted_at < ?)`, text, event).Scan(&left)
	if err != nil {
		return "", err
	}
	if left > 0 {
		problems = append(problems, fmt.Errorf("%d messages out of time are left", left))
	}
	intact, err := s.verifyKept(conn, p.ended)
	if err != nil {
		problems = append(problems, err)
	}
	var posted int64
	if err := conn.QueryRow(`SELECT count(*) FROM messages WHERE seq > ?`, s.last).Scan(&posted); err != nil {
		return "", err
	}
	if acked := int64(len(during.lat)); posted < acked || posted > acked+int64(during.errors) {
		problems = append(problems, fmt.Errorf("%d messages posted during the purge, of %d acknowledged", posted, acked))
	}
	gone, kept, err := s.verifyFiles(conn, p)
	if err != nil {
		problems = append(problems, err)
	}
	var miscounted int64
	err = conn.QueryRow(`SELECT count(*) FROM rooms r WHERE message_count != (SELECT count(*) FROM messages m WHERE m.room_id = r.id)`).
		Scan(&miscounted)
	if err != nil {
		return "", err
	}
	if miscounted > 0 {
		problems = append(problems, fmt.Errorf("%d rooms count their messages wrong", miscounted))
	}
	return fmt.Sprintf("nothing out of time left (%d old files gone with every chunk); %d messages and %d file in time intact, "+
		"with their deliveries and attachments; the %d posts of the purge's run there; every room's message count right",
		gone, intact, kept, posted), errors.Join(problems...)
}

// verifyKept checks that every message of the snapshot still in time at
// ended is there as it was, and says how many there are, with those
// posted since.
func (s *purgeSnapshot) verifyKept(conn *sql.DB, ended time.Time) (int64, error) {
	now := map[int64]keptMessage{}
	err := messageRows(conn, `seq <= ?`, func(seq int64, m keptMessage) { now[seq] = m }, s.last)
	if err != nil {
		return 0, err
	}
	text, event, _ := cutoffs(ended)
	var checked, lost, changed int64
	for seq, m := range s.messages {
		if m.text && m.at < text || !m.text && m.at < event {
			continue // out of time since the snapshot: either way is right
		}
		checked++
		switch got, ok := now[seq]; {
		case !ok:
			lost++
		case got != m:
			changed++
		}
	}
	if lost+changed > 0 {
		return checked, fmt.Errorf("of %d messages in time, the purge deleted %d and changed %d", checked, lost, changed)
	}
	return checked, nil
}

// verifyFiles checks that every file out of time when the purge started
// is gone with its chunks, and every file in time when it ended is whole;
// it returns how many of each it checked.
func (s *purgeSnapshot) verifyFiles(conn *sql.DB, p purgeFigures) (gone, kept int, err error) {
	now, err := readFiles(conn)
	if err != nil {
		return 0, 0, err
	}
	var chunks int64
	if err := conn.QueryRow(`SELECT count(*) FROM file_chunks c WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.id = c.file_id)`).
		Scan(&chunks); err != nil {
		return 0, 0, err
	}
	var problems []string
	if chunks > 0 {
		problems = append(problems, fmt.Sprintf("%d chunks of no file", chunks))
	}
	_, _, before := cutoffs(p.started)
	_, _, after := cutoffs(p.ended)
	for id, f := range s.files {
		got, ok := now[id]
		switch {
		case f.at < before && ok:
			problems = append(problems, fmt.Sprintf("file %s, out of time, is left with %d chunks", id, got.chunks))
		case f.at < before:
			gone++
		case f.at >= after && got != f:
			problems = append(problems, fmt.Sprintf("file %s, in time, went from %+v to %+v", id, f, got))
		case f.at >= after:
			kept++
		}
	}
	if len(problems) > 0 {
		return gone, kept, errors.New(strings.Join(problems, "; "))
	}
	return gone, kept, nil
}

// checkWhole checks the vacuumed database: its integrity, its foreign
// keys, and that the search index holds exactly the messages' words. It
// returns its largest tables and indexes, with their sizes.
func checkWhole(db string) (string, error) {
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	var problems []error
	var integrity string
	if err := conn.QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		problems = append(problems, fmt.Errorf("integrity_check: %s %v", integrity, err))
	}
	var fk int
	if err := conn.QueryRow(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fk); err != nil || fk > 0 {
		problems = append(problems, fmt.Errorf("foreign_key_check: %d rows %v", fk, err))
	}
	// With rank 1, FTS5 also checks the index against its content.
	if _, err := conn.Exec(`INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		problems = append(problems, fmt.Errorf("the search index: %w", err))
	}
	rows, err := conn.Query(`SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 5`)
	if err != nil {
		return "", errors.Join(append(problems, err)...)
	}
	defer rows.Close()
	var largest []string
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			return "", err
		}
		largest = append(largest, name+" "+mib(size))
	}
	return strings.Join(largest, ", "), errors.Join(append(problems, rows.Err())...)
}
