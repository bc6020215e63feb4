package store

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"sort"
	"time"
)

// The purge deletes what retention (retention.go) puts out of time: the
// text messages and the events older than their room's periods, and its
// files. It never holds the write lock for long: each step is one write job
// through the writer that deletes at most a few hundred messages (or a few
// MiB of a file), sized to hold the writer for about purgeStepTarget
// (pacer), and the purge pauses after each step for purgeYield times as long
// as the step's work took in the writer, so it takes only a small share of
// the writer's time and the writes queued behind it go first. (The wait for
// the writer and the commit's sync are not the purge's work: counting them
// would slow the purge most where the disk is slow, sparing no one.) The
// retention benchmark (docs/performance.md) chose the share.
//
// A purged message disappears: no tombstone, no push (clients see it gone
// at their next read). With it go, in the same step, its deliveries
// (processed or not: a message past its retention is gone for every agent
// too), its webhook requests, attachments rows, reactions and edit history
// (the foreign keys cascade), its entry in the search index (the delete
// trigger of version 8; on PostgreSQL, a column of its row); replies to it lose their parent (ON DELETE SET
// NULL); the room's message count drops and its last_message_at follows its
// newest message left. Read markers need nothing: a marker is a position,
// and a purged message is older than anything still unread.
//
// Files follow their own period, whatever carries them: a file past it is
// expired (it reads as missing at once, and the messages that carried it
// list it no more), then its chunks are deleted a step at a time, then the
// file. A message past its period does not take its files: they go when
// theirs ends.
//
// One message is never purged: the newest of the whole database. Message
// numbers (seq) are SQLite rowids, which count on from the largest present;
// deleting the largest would hand its number to the next message, below
// read markers and webhook positions that already passed it. It goes once a
// newer message exists. (PostgreSQL's identity column never hands a number
// out twice, but the rule holds there too, so that both purge the same.)
//
// Steps are resumable and idempotent: each reads the periods in force and
// where the last step stopped (retention_marks) inside its own write, so a
// restart, a settings change or a `chatd purge` run beside the server never
// deletes anything twice or too early.

// Purge step bounds: the most messages one step deletes, the rows it looks
// at to find them, the most files it expires, and the most file bytes it
// deletes. Steps start smaller and are sized to take about
// purgeStepTarget of the writer's time each (see pacer).
const (
	purgeBatch       = 500
	purgeScan        = 2000
	purgeFileBatch   = 100
	purgeChunkBudget = 8 << 20
	purgeStepTarget  = 3 * time.Millisecond
)

// purgeMinPause is the least pause between two steps of a pass;
// purgeYield, how many times as long as its work a step's pause is.
const (
	purgeMinPause = 2 * time.Millisecond
	purgeYield    = 7
)

// pacer sizes the steps of a pass so that each holds the writer for about
// target, whatever the machine and its load: a step that took longer
// shrinks the next in proportion; a step that did at least half its size's
// work in under half of target doubles it (a step that found little to do
// says nothing of what a full one costs); within 1 and max. A step's size
// is its most messages; the files' steps scale with it.
type pacer struct {
	size, max int
	target    time.Duration
}

// next sizes the next step after one that did work units in took.
func (p *pacer) next(took time.Duration, work int) {
	switch {
	case took > p.target:
		p.size = max(1, int(int64(p.size)*int64(p.target)/int64(took)))
	case 2*work >= p.size && 2*took < p.target:
		p.size = min(p.max, 2*p.size)
	}
}

// PurgeOptions tune one pass of the purge.
type PurgeOptions struct {
	// Now is the time the periods count back from; zero: when the pass
	// starts.
	Now time.Time
	// Batch bounds the messages one step deletes; default 500. Steps
	// start at a tenth of it and are sized to StepTarget.
	Batch int
	// StepTarget is how long a step should hold the writer; default 3 ms.
	StepTarget time.Duration
	// MinPause is the least pause after each step; 0: 2 ms. The pause is
	// also at least purgeYield times as long as the step's work took in the
	// writer.
	MinPause time.Duration
	// ChunkBudget bounds the bytes of file chunks one step deletes (at
	// least one chunk), for a step of Batch; default 8 MiB.
	ChunkBudget int64
	// Progress, when set, is called after each step with what it deleted.
	Progress func(PurgeLine)
}

// PurgeLine is what a purge deleted (or, for a preview, would delete) of
// one kind in one room: how many items and their bytes (a message's
// content and metadata, a file's size).
type PurgeLine struct {
	RoomID string
	Title  *string
	Kind   string // KindText, KindEvent or KindFile
	Count  int64
	Bytes  int64
}

// PurgeReport is what a pass deleted or would delete, room by room, each
// room's kinds in RetentionKinds order, rooms by most bytes first.
type PurgeReport struct {
	Now   time.Time
	Lines []PurgeLine
}

// Total adds the report's lines of kind.
func (r *PurgeReport) Total(kind string) (count, bytes int64) {
	for _, l := range r.Lines {
		if l.Kind == kind {
			count, bytes = count+l.Count, bytes+l.Bytes
		}
	}
	return count, bytes
}

// add merges l into the report.
func (r *PurgeReport) add(l PurgeLine) {
	if l.Count == 0 {
		return
	}
	for i := range r.Lines {
		if r.Lines[i].RoomID == l.RoomID && r.Lines[i].Kind == l.Kind {
			r.Lines[i].Count += l.Count
			r.Lines[i].Bytes += l.Bytes
			return
		}
	}
	r.Lines = append(r.Lines, l)
}

// sort orders the lines: rooms by their bytes, most first, then id; a
// room's kinds in RetentionKinds order.
func (r *PurgeReport) sort() {
	bytes := map[string]int64{}
	for _, l := range r.Lines {
		bytes[l.RoomID] += l.Bytes
	}
	order := map[string]int{KindText: 0, KindEvent: 1, KindFile: 2}
	sort.Slice(r.Lines, func(i, j int) bool {
		a, b := r.Lines[i], r.Lines[j]
		switch {
		case a.RoomID == b.RoomID:
			return order[a.Kind] < order[b.Kind]
		case bytes[a.RoomID] != bytes[b.RoomID]:
			return bytes[a.RoomID] > bytes[b.RoomID]
		}
		return a.RoomID < b.RoomID
	})
}

// purgeTarget is a room with a period in force.
type purgeTarget struct {
	roomID  string
	title   *string
	periods Periods
}

// purgeTargets lists the rooms (deleted ones too: their messages are still
// on disk) where some kind has a period.
func purgeTargets(q queryer) ([]purgeTarget, error) {
	rows, err := q.Query(`SELECT r.id, r.title, o.text_days, o.event_days, o.file_days, rr.text_days, rr.event_days, rr.file_days
		FROM rooms r LEFT JOIN organization_retention o ON o.organization_id = r.organization_id
		LEFT JOIN room_retention rr ON rr.room_id = r.id
		WHERE coalesce(o.text_days, o.event_days, o.file_days, rr.text_days, rr.event_days, rr.file_days) IS NOT NULL
		ORDER BY r.id`)
	if err != nil {
		return nil, err
	}
	return scanAll(rows, func(row interface{ Scan(...any) error }) (purgeTarget, error) {
		var t purgeTarget
		var title sql.NullString
		var org, own [3]sql.NullInt64
		err := row.Scan(&t.roomID, &title, &org[0], &org[1], &org[2], &own[0], &own[1], &own[2])
		t.title = nullString(title)
		o := Periods{nullDays(org[0]), nullDays(org[1]), nullDays(org[2])}
		t.periods = Periods{nullDays(own[0]), nullDays(own[1]), nullDays(own[2])}.Effective(o)
		return t, err
	})
}

// cutoff is the time before which kind is out of time under p at now, or
// false when p keeps it forever.
func cutoff(p Periods, kind string, now time.Time) (int64, bool) {
	d := p.Days(kind)
	if d == nil {
		return 0, false
	}
	return now.Add(-time.Duration(*d) * 24 * time.Hour).UnixMicro(), true
}

// kindCondition is the SQL condition on messages m of a message kind.
func kindCondition(kind string) string {
	if kind == KindText {
		return `m.message_type = 'text'`
	}
	return `m.message_type != 'text'`
}

// PurgePreview reports what a purge at opts.Now would delete, changing
// nothing: for `chatd purge --dry-run`. It reads in one snapshot.
func (db *DB) PurgePreview(ctx context.Context, opts PurgeOptions) (*PurgeReport, error) {
	report := &PurgeReport{Now: opts.Now}
	if report.Now.IsZero() {
		report.Now = now()
	}
	err := db.readTx(ctx, func(q readQ) error {
		targets, err := purgeTargets(q)
		if err != nil {
			return err
		}
		var newest int64
		if err := q.QueryRow(`SELECT coalesce(max(seq), 0) FROM messages`).Scan(&newest); err != nil {
			return err
		}
		for _, t := range targets {
			if err := previewRoom(q, t, report, newest); err != nil {
				return err
			}
		}
		return nil
	})
	report.sort()
	return report, err
}

// previewRoom adds what the purge would delete of room t to report.
func previewRoom(q queryer, t purgeTarget, report *PurgeReport, newest int64) error {
	for _, kind := range []string{KindText, KindEvent} {
		before, ok := cutoff(t.periods, kind, report.Now)
		if !ok {
			continue
		}
		l := PurgeLine{RoomID: t.roomID, Title: t.title, Kind: kind}
		err := q.QueryRow(`SELECT count(*), coalesce(sum(octet_length(m.content) + octet_length(m.metadata)), 0) FROM messages m
			WHERE m.room_id = ? AND `+kindCondition(kind)+` AND m.inserted_at < ? AND m.seq != ?`, t.roomID, before, newest).
			Scan(&l.Count, &l.Bytes)
		if err != nil {
			return err
		}
		report.add(l)
	}
	if before, ok := cutoff(t.periods, KindFile, report.Now); ok {
		l := PurgeLine{RoomID: t.roomID, Title: t.title, Kind: KindFile}
		err := q.QueryRow(`SELECT count(*), coalesce(sum(size), 0) FROM files
			WHERE room_id = ? AND status = 'ready' AND expired_at IS NULL AND inserted_at < ?`, t.roomID, before).Scan(&l.Count, &l.Bytes)
		if err != nil {
			return err
		}
		report.add(l)
	}
	return nil
}

// Purge runs one pass: it deletes, step by step, everything out of time at
// opts.Now in every room, then the chunks of every expired file, and
// reports what it deleted. It stops early, with what it did so far and
// ctx's error, when ctx ends; a later pass goes on from there.
func (db *DB) Purge(ctx context.Context, opts PurgeOptions) (*PurgeReport, error) {
	if opts.Now.IsZero() {
		opts.Now = now()
	}
	if opts.Batch <= 0 {
		opts.Batch = purgeBatch
	}
	if opts.MinPause <= 0 {
		opts.MinPause = purgeMinPause
	}
	if opts.ChunkBudget <= 0 {
		opts.ChunkBudget = purgeChunkBudget
	}
	if opts.StepTarget <= 0 {
		opts.StepTarget = purgeStepTarget
	}
	pace := &pacer{size: max(1, opts.Batch/10), max: opts.Batch, target: opts.StepTarget}
	report := &PurgeReport{Now: opts.Now}
	var targets []purgeTarget
	err := db.readTx(ctx, func(q readQ) error {
		var err error
		targets, err = purgeTargets(q)
		return err
	})
	for _, t := range targets {
		if err != nil {
			break
		}
		err = db.purgeRoom(ctx, opts, pace, report, t)
	}
	if err == nil {
		unit := max(1, opts.ChunkBudget/int64(opts.Batch)) // the file bytes of a step's unit of work
		err = db.purgeSteps(ctx, opts, pace, report, nil, func(tx *Tx, size int) (PurgeLine, int, bool, error) {
			deleted, done, err := reclaimExpiredFiles(tx, unit*int64(size))
			return PurgeLine{}, int(deleted / unit), done, err
		})
	}
	report.sort()
	return report, err
}

// purgeRoom runs the steps of one room's purge, kind by kind.
func (db *DB) purgeRoom(ctx context.Context, opts PurgeOptions, pace *pacer, report *PurgeReport, t purgeTarget) error {
	for _, kind := range RetentionKinds {
		if _, ok := cutoff(t.periods, kind, opts.Now); !ok {
			continue
		}
		step := func(tx *Tx, size int) (PurgeLine, int, bool, error) {
			line, done, err := purgeMessages(tx, t.roomID, kind, opts.Now, size)
			return line, int(line.Count), done, err
		}
		if kind == KindFile {
			step = func(tx *Tx, size int) (PurgeLine, int, bool, error) {
				line, done, err := expireFiles(tx, t.roomID, opts.Now, min(size, purgeFileBatch))
				return line, int(line.Count), done, err
			}
		}
		if err := db.purgeSteps(ctx, opts, pace, report, t.title, step); err != nil {
			return err
		}
	}
	return nil
}

// purgeSteps runs step as write jobs, of the size pace sets, until it
// reports it is done, pausing after each, and adds what each deleted to
// report.
func (db *DB) purgeSteps(ctx context.Context, opts PurgeOptions, pace *pacer, report *PurgeReport, title *string,
	step func(tx *Tx, size int) (line PurgeLine, work int, done bool, err error)) error {
	for {
		var line PurgeLine
		var work int
		var done bool
		var took time.Duration
		err := db.Write(ctx, func(tx *Tx) error {
			start := time.Now()
			var err error
			line, work, done, err = step(tx, pace.size)
			took = time.Since(start)
			return err
		})
		if err != nil {
			return err
		}
		db.log.Debug("purge step", "room", line.RoomID, "kind", line.Kind, "size", pace.size, "deleted", line.Count, "took", took)
		pace.next(took, work)
		if line.Count > 0 {
			line.Title = title
			report.add(line)
			db.purge.count(line)
			if opts.Progress != nil {
				opts.Progress(line)
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(opts.MinPause, purgeYield*took)):
		}
	}
}

// purgeMessages is one step of a room's purge of one kind of message: from
// where the last step stopped, it deletes up to batch messages of the
// kind that are out of time, up to the first that is not (or the newest of
// the database), looking at no more than purgeScan rows; it reports what it
// deleted and whether the room's kind is done for this pass.
func purgeMessages(tx *Tx, roomID, kind string, now time.Time, batch int) (PurgeLine, bool, error) {
	line := PurgeLine{RoomID: roomID, Kind: kind}
	p, err := effectivePeriods(tx, roomID)
	if err != nil {
		return line, false, err
	}
	before, ok := cutoff(p, kind, now)
	if !ok {
		return line, true, nil
	}
	var mark, newest int64
	err = tx.QueryRow(`SELECT coalesce((SELECT through_seq FROM retention_marks WHERE room_id = ? AND kind = ?), 0),
		coalesce((SELECT max(seq) FROM messages), 0)`, roomID, kind).Scan(&mark, &newest)
	if err != nil {
		return line, false, err
	}
	through, done, err := purgeRange(tx, roomID, kind, mark, newest, before, batch)
	if err != nil || through == mark {
		return line, done, err
	}
	if line.Count, line.Bytes, err = deleteMessages(tx, roomID, kind, mark, through, before); err != nil {
		return line, false, err
	}
	_, err = tx.Exec(`INSERT INTO retention_marks (room_id, kind, through_seq) VALUES (?, ?, ?)
		ON CONFLICT (room_id, kind) DO UPDATE SET through_seq = excluded.through_seq`, roomID, kind, through)
	return line, done, err
}

// purgeRange finds how far past mark this step goes: the seq through which
// every message of kind is out of time (before) and not the newest, with
// at most batch of them, and whether that reaches the first message of the
// kind still in time (or the room's end).
func purgeRange(tx *Tx, roomID, kind string, mark, newest, before int64, batch int) (through int64, done bool, err error) {
	rows, err := tx.Query(`SELECT seq, message_type = 'text', inserted_at FROM messages WHERE room_id = ? AND seq > ?
		ORDER BY seq LIMIT ?`, roomID, mark, purgeScan)
	if err != nil {
		return mark, false, err
	}
	defer rows.Close()
	through, scanned, found := mark, 0, 0
	for rows.Next() {
		var seq, at int64
		var isText bool
		if err := rows.Scan(&seq, &isText, &at); err != nil {
			return mark, false, err
		}
		scanned++
		if isText != (kind == KindText) {
			through = seq // another kind's: its own mark passes it
			continue
		}
		if at >= before || seq == newest {
			return through, true, rows.Err()
		}
		through, found = seq, found+1
		if found == batch {
			return through, false, rows.Err()
		}
	}
	return through, scanned < purgeScan, rows.Err()
}

// deleteMessages deletes the messages of kind in the room with a seq in
// (after, through] (all out of time: the condition on before only guards
// it), with what refers to them, and brings the room's counters up to
// date. It returns how many it deleted and their bytes.
func deleteMessages(tx *Tx, roomID, kind string, after, through, before int64) (count, bytes int64, err error) {
	cond := `m.room_id = ? AND m.seq > ? AND m.seq <= ? AND ` + kindCondition(kind) + ` AND m.inserted_at < ?`
	sel := `SELECT m.seq FROM messages m WHERE ` + cond
	args := []any{roomID, after, through, before}
	var newestChat sql.NullInt64
	err = tx.QueryRow(`SELECT count(*), coalesce(sum(octet_length(m.content) + octet_length(m.metadata)), 0),
		max(CASE WHEN m.message_type IN `+chatContentList+` THEN m.inserted_at END)
		FROM messages m WHERE `+cond, args...).Scan(&count, &bytes, &newestChat)
	if err != nil || count == 0 {
		return 0, 0, err
	}
	for _, stmt := range []string{
		`DELETE FROM deliveries WHERE message_seq IN (` + sel + `)`,
		`DELETE FROM webhook_deliveries WHERE message_seq IN (` + sel + `)`,
		`DELETE FROM messages WHERE seq IN (` + sel + `)`,
	} {
		if _, err := tx.Exec(stmt, args...); err != nil {
			return 0, 0, err
		}
	}
	if _, err := tx.Exec(`UPDATE rooms SET message_count = CASE WHEN message_count > ? THEN message_count - ? ELSE 0 END
		WHERE id = ?`, count, count, roomID); err != nil {
		return 0, 0, err
	}
	if newestChat.Valid {
		// The room's newest chat content may be gone: last_message_at
		// follows the newest left, or none.
		_, err = tx.Exec(`UPDATE rooms SET last_message_at = (SELECT m.inserted_at FROM messages m
			WHERE m.room_id = rooms.id AND m.message_type IN `+chatContentList+` ORDER BY m.seq DESC LIMIT 1)
			WHERE id = ?`, roomID)
	}
	return count, bytes, err
}

// chatContentList is chatContentTypes as an SQL list of literals.
var chatContentList = literalList(slices.Collect(maps.Keys(chatContentTypes)))

// expireFiles is one step of a room's file purge: it expires up to batch
// ready files uploaded before the room's file period, oldest first, and
// takes them off the messages that carried them. Their chunks go in
// reclaimExpiredFiles.
func expireFiles(tx *Tx, roomID string, now time.Time, batch int) (PurgeLine, bool, error) {
	line := PurgeLine{RoomID: roomID, Kind: KindFile}
	p, err := effectivePeriods(tx, roomID)
	if err != nil {
		return line, false, err
	}
	before, ok := cutoff(p, KindFile, now)
	if !ok {
		return line, true, nil
	}
	rows, err := tx.Query(`UPDATE files SET expired_at = ? WHERE id IN (SELECT id FROM files
		WHERE room_id = ? AND status = 'ready' AND expired_at IS NULL AND inserted_at < ? ORDER BY inserted_at LIMIT ?)
		RETURNING id, size`, tx.Now().UnixMicro(), roomID, before, batch)
	if err != nil {
		return line, false, err
	}
	var ids []string
	for rows.Next() {
		var id string
		var size int64
		if err := rows.Scan(&id, &size); err != nil {
			rows.Close()
			return line, false, err
		}
		ids, line.Count, line.Bytes = append(ids, id), line.Count+1, line.Bytes+size
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return line, false, err
	}
	for _, id := range ids {
		if _, err := tx.Exec(`DELETE FROM message_attachments WHERE file_id = ?`, id); err != nil {
			return line, false, err
		}
	}
	return line, len(ids) < batch, nil
}

// reclaimExpiredFiles is one step of deleting expired files: the chunks of
// the oldest expired files, up to budget bytes (at least one chunk), and
// each file whose chunks are all gone. It returns the bytes of the chunks
// it deleted (the files were counted when they expired), and whether no
// expired file is left.
func reclaimExpiredFiles(tx *Tx, budget int64) (int64, bool, error) {
	rows, err := tx.Query(`SELECT id, chunk_size FROM files WHERE expired_at IS NOT NULL ORDER BY expired_at, id LIMIT 16`)
	if err != nil {
		return 0, false, err
	}
	type expired struct {
		id    string
		chunk int64
	}
	files, err := scanAll(rows, func(row interface{ Scan(...any) error }) (expired, error) {
		var e expired
		err := row.Scan(&e.id, &e.chunk)
		return e, err
	})
	if err != nil || len(files) == 0 {
		return 0, true, err
	}
	var deleted int64
	for _, f := range files {
		if budget <= 0 {
			break
		}
		chunks := max(1, budget/max(f.chunk, 1))
		res, err := tx.Exec(`DELETE FROM file_chunks WHERE file_id = ? AND n IN (SELECT n FROM file_chunks WHERE file_id = ? ORDER BY n LIMIT ?)`,
			f.id, f.id, chunks)
		if err != nil {
			return deleted, false, err
		}
		n, _ := res.RowsAffected()
		budget, deleted = budget-n*f.chunk, deleted+n*f.chunk
		if n < chunks {
			if _, err := tx.Exec(`DELETE FROM files WHERE id = ?`, f.id); err != nil {
				return deleted, false, err
			}
		}
	}
	return deleted, false, nil
}
