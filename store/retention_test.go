package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"
)

func days(n int) *int { return &n }

// Who may read and set retention, what is refused, and what applies: the
// shorter of the organization's and the room's period of each kind.
func TestRetentionSettings(t *testing.T) {
	k := newSearchKit(t, Options{})
	ctx := context.Background()
	alice, _ := k.db.UserByID(ctx, k.alice.ID) // the organization's first person: its admin
	bob, _ := mustUser(t, k.db, "bob")
	if alice.Role != "admin" || bob.Role != "user" {
		t.Fatalf("roles: alice %s, bob %s", alice.Role, bob.Role)
	}

	t.Run("keep forever until set", func(t *testing.T) {
		r, err := k.db.OrganizationRetention(ctx, bob)
		if err != nil || r.Set() || r.UpdatedAt != nil {
			t.Fatalf("a new organization's retention: %+v, %v", r, err)
		}
		rr, err := k.db.RoomRetention(ctx, k.alice, k.room)
		if err != nil || rr.Set() || rr.Effective.Set() {
			t.Fatalf("a new room's retention: %+v, %v", rr, err)
		}
	})
	t.Run("only an admin sets the organization's", func(t *testing.T) {
		_, err := k.db.SetOrganizationRetention(ctx, bob, Periods{TextDays: days(30)})
		wantCode(t, err, CodeForbidden)
		r, err := k.db.SetOrganizationRetention(ctx, alice, Periods{TextDays: days(30), EventDays: days(7)})
		if err != nil || *r.TextDays != 30 || *r.EventDays != 7 || r.FileDays != nil || r.UpdatedBy != alice.ID {
			t.Fatalf("set: %+v, %v", r, err)
		}
	})
	t.Run("bounds", func(t *testing.T) {
		for _, bad := range []int{0, -1, MaxRetentionDays + 1} {
			_, err := k.db.SetOrganizationRetention(ctx, alice, Periods{FileDays: days(bad)})
			wantCode(t, err, CodeValidation)
			if p := err.(*Error).Details.(Problems); len(p["/retention/file_days"]) != 1 {
				t.Fatalf("%d: problems %v", bad, p)
			}
		}
		if r, _ := k.db.OrganizationRetention(ctx, alice); *r.TextDays != 30 || r.FileDays != nil {
			t.Fatalf("a refusal changed the setting: %+v", r)
		}
	})
	t.Run("a room's owner shortens, never lengthens", func(t *testing.T) {
		r, err := k.db.SetRoomRetention(ctx, k.alice, k.room, Periods{TextDays: days(365), EventDays: days(1), FileDays: days(10)})
		if err != nil {
			t.Fatal(err)
		}
		eff := r.Effective
		if *eff.TextDays != 30 || *eff.EventDays != 1 || *eff.FileDays != 10 || *r.TextDays != 365 || *r.Organization.TextDays != 30 {
			t.Fatalf("effective %+v of %+v", eff, r)
		}
	})
	t.Run("a participant who is not the owner reads, and may not set", func(t *testing.T) {
		if _, err := k.db.RoomRetention(ctx, k.helper, k.room); err != nil {
			t.Fatal(err)
		}
		_, err := k.db.SetRoomRetention(ctx, k.helper, k.room, Periods{})
		wantCode(t, err, CodeForbidden)
	})
	t.Run("someone outside the room finds no room", func(t *testing.T) {
		_, err := k.db.RoomRetention(ctx, UserActor(bob), k.room)
		wantCode(t, err, CodeNotFound)
		_, err = k.db.SetRoomRetention(ctx, UserActor(bob), k.room, Periods{})
		wantCode(t, err, CodeNotFound)
	})
	t.Run("the command line sets an organization by name", func(t *testing.T) {
		r, err := k.db.SetOrganizationRetentionByName(ctx, DefaultOrganization, Periods{EventDays: days(3)})
		if err != nil || r.TextDays != nil || *r.EventDays != 3 || r.UpdatedBy != "" {
			t.Fatalf("%+v, %v", r, err)
		}
		_, err = k.db.SetOrganizationRetentionByName(ctx, "nobody's", Periods{})
		wantCode(t, err, CodeNotFound)
	})
}

// retentionKit is a searchKit with a clock: messages are backdated to
// where a test wants them.
type retentionKit struct {
	*searchKit
	now time.Time
}

func newRetentionKit(t testing.TB, opts Options) *retentionKit {
	t.Helper()
	k := &retentionKit{searchKit: newSearchKit(t, opts), now: time.Now().UTC().Truncate(time.Microsecond)}
	return k
}

// at backdates message m to t.
func (k *retentionKit) at(t testing.TB, m *Message, when time.Time) *Message {
	t.Helper()
	rawExec(t, k.db, `UPDATE messages SET inserted_at = ?, updated_at = ? WHERE seq = ?`, when.UnixMicro(), when.UnixMicro(), m.Seq)
	return m
}

// event posts an event of helper's in room.
func (k *retentionKit) event(t testing.TB, room, content string) *Message {
	t.Helper()
	m, err := k.db.PostEvent(context.Background(), k.helper, room, EventInput{Type: "thought", Content: content})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (k *retentionKit) setRoom(t testing.TB, room string, p Periods) {
	t.Helper()
	if _, err := k.db.SetRoomRetention(context.Background(), k.alice, room, p); err != nil {
		t.Fatal(err)
	}
}

func (k *retentionKit) purge(t testing.TB, opts PurgeOptions) *PurgeReport {
	t.Helper()
	opts.Now = k.now
	r, err := k.db.Purge(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// contents lists a room's messages, oldest first, "|" between them.
func (k *retentionKit) contents(t testing.TB, room string) string {
	t.Helper()
	page, err := k.db.ListHistory(context.Background(), k.alice, room, HistoryFilter{}, PageRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(page.Items) - 1; i >= 0; i-- {
		out = append(out, strings.TrimPrefix(page.Items[i].Content, "@alice/helper "))
	}
	return strings.Join(out, "|")
}

// The cut-off is exact: a message older than the period by a microsecond
// goes, one exactly as old stays, and everything newer is untouched; text
// and events each follow their own period; the newest message of the
// database stays whatever its age.
func TestPurgeCutOffIsExact(t *testing.T) {
	k := newRetentionKit(t, Options{})
	day := 24 * time.Hour
	textCut, eventCut := k.now.Add(-30*day), k.now.Add(-7*day)
	k.at(t, k.say(t, k.room, "text past"), textCut.Add(-time.Microsecond))
	k.at(t, k.say(t, k.room, "text at"), textCut)
	k.at(t, k.event(t, k.room, "event past text cut"), textCut.Add(-time.Microsecond))
	k.at(t, k.event(t, k.room, "event past"), eventCut.Add(-time.Microsecond))
	k.at(t, k.say(t, k.room, "text between"), eventCut.Add(-time.Microsecond))
	k.at(t, k.event(t, k.room, "event at"), eventCut)
	k.say(t, k.room, "text new")
	k.event(t, k.room, "event new")
	other := k.newRoom(t) // no setting of its own, and the organization keeps forever
	k.at(t, k.say(t, other, "other room, old"), textCut.Add(-day))
	k.at(t, k.say(t, other, "the newest of the database, old"), textCut.Add(-day))
	k.setRoom(t, k.room, Periods{TextDays: days(30), EventDays: days(7)})

	before := snapshotRows(t, k.db, `SELECT seq, id, room_id, content, inserted_at, updated_at, reply_to_seq, edited_at, deleted_at
		FROM messages WHERE room_id != ? OR inserted_at >= CASE WHEN message_type = 'text' THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END ORDER BY seq`,
		k.room, textCut.UnixMicro(), eventCut.UnixMicro())
	preview, err := k.db.PurgePreview(context.Background(), PurgeOptions{Now: k.now})
	if err != nil {
		t.Fatal(err)
	}
	report := k.purge(t, PurgeOptions{})
	if got := k.contents(t, k.room); got != "text at|text between|event at|text new|event new" {
		t.Fatalf("left in the room: %q", got)
	}
	for _, r := range []*PurgeReport{preview, report} {
		if n, _ := r.Total(KindText); n != 1 {
			t.Errorf("texts reported: %d", n)
		}
		if n, _ := r.Total(KindEvent); n != 2 {
			t.Errorf("events reported: %d", n)
		}
	}
	after := snapshotRows(t, k.db, `SELECT seq, id, room_id, content, inserted_at, updated_at, reply_to_seq, edited_at, deleted_at
		FROM messages WHERE room_id != ? OR inserted_at >= CASE WHEN message_type = 'text' THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END ORDER BY seq`,
		k.room, textCut.UnixMicro(), eventCut.UnixMicro())
	if before != after {
		t.Fatalf("a message the purge should not touch changed:\n%s\n%s", before, after)
	}

	t.Run("the newest message of the database stays", func(t *testing.T) {
		k.setRoom(t, other, Periods{TextDays: days(1)})
		k.purge(t, PurgeOptions{})
		if got := k.contents(t, other); got != "the newest of the database, old" {
			t.Fatalf("left: %q", got)
		}
		m := k.say(t, k.room, "newer")
		k.purge(t, PurgeOptions{})
		if got := k.contents(t, other); got != "" {
			t.Fatalf("left after a newer message: %q", got)
		}
		if next := k.say(t, k.room, "next"); next.Seq <= m.Seq {
			t.Fatalf("a message number was reused: %d after %d", next.Seq, m.Seq)
		}
	})
	indexIntact(t, k.db)
}

// snapshotRows renders the rows of a query, to compare before and after.
func snapshotRows(t testing.TB, db *DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.read.Query(db.dialect.bind(query), args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if bs, ok := v.([]byte); ok {
				v = string(bs)
			}
			fmt.Fprintf(&b, "%v\t", v)
		}
		b.WriteByte('\n')
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// What goes with a purged message goes in the same step, and what stays is
// kept in step: deliveries (processed or not) and webhook requests,
// reactions, edits and attachment rows; replies lose their parent; the
// room's count, its last message time and the unread counts follow; the
// search index stays intact.
func TestPurgeKeepsEveryInvariant(t *testing.T) {
	k := newRetentionKit(t, Options{})
	ctx := context.Background()
	old := k.now.Add(-40 * 24 * time.Hour)
	if _, _, err := k.db.CreateWebhook(ctx, k.alice, k.helper.ID, NewWebhook{URL: "http://10.0.0.7/hook"}); err != nil {
		t.Fatal(err)
	}
	file := uploadText(t, k.db, k.alice, k.room, "notes.txt", "kept on its own clock")
	a, err := k.db.SendText(ctx, k.alice, k.room, TextInput{Content: "the old plan", Mentions: []MentionInput{{ID: &k.helper.ID}},
		AttachmentIDs: []string{file.ID}})
	if err != nil {
		t.Fatal(err)
	}
	k.at(t, a, old)
	b := k.at(t, k.say(t, k.room, "an old question"), old)
	if _, err := k.db.EditMessage(ctx, k.alice, k.room, b.ID, "an old question, edited"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.db.React(ctx, k.helper, k.room, a.ID, "👍"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.db.MarkProcessing(ctx, k.helper, k.room, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := k.db.MarkProcessed(ctx, k.helper, k.room, b.ID); err != nil {
		t.Fatal(err)
	}
	aliceID := k.alice.ID
	x, err := k.db.SendText(ctx, k.helper, k.room, TextInput{Content: "an old answer", Mentions: []MentionInput{{ID: &aliceID}}})
	if err != nil {
		t.Fatal(err)
	}
	k.at(t, x, old)
	reply, err := k.db.SendText(ctx, k.helper, k.room, TextInput{Content: "a new reply", Mentions: []MentionInput{{ID: &aliceID}}, ReplyToID: &a.ID})
	if err != nil {
		t.Fatal(err)
	}
	if room, _ := k.db.Room(ctx, k.alice, k.room); room.Unread != 2 || room.MessageCount != 4 {
		t.Fatalf("before: %d unread, %d messages", room.Unread, room.MessageCount)
	}
	k.setRoom(t, k.room, Periods{TextDays: days(30)})
	k.purge(t, PurgeOptions{})

	purged := []any{a.Seq, b.Seq, x.Seq}
	for _, table := range []string{"deliveries", "webhook_deliveries", "reactions", "message_edits", "message_attachments"} {
		if n := rawCount(t, k.db, `SELECT count(*) FROM `+table+` WHERE message_seq IN (?, ?, ?)`, purged...); n != 0 {
			t.Errorf("%s keeps %d rows of purged messages", table, n)
		}
	}
	got, err := k.db.Message(ctx, k.alice, k.room, reply.ID)
	if err != nil || got.ReplyTo != nil || got.replyToSeq != 0 {
		t.Fatalf("the reply: %+v, %v", got, err)
	}
	room, _ := k.db.Room(ctx, k.alice, k.room)
	if room.Unread != 1 || room.MessageCount != 1 || !room.LastMessageAt.Equal(reply.InsertedAt) {
		t.Fatalf("after: %d unread, %d messages, last at %v (the reply %v)", room.Unread, room.MessageCount, room.LastMessageAt, reply.InsertedAt)
	}
	if _, err := k.db.RoomFile(ctx, k.alice, k.room, file.ID); err != nil {
		t.Fatalf("the attached file follows its own period, forever here: %v", err)
	}
	indexIntact(t, k.db)
	if k.found(t, k.alice, "old") != "" {
		t.Fatalf("a purged message is found: %q", k.found(t, k.alice, "old"))
	}

	t.Run("every message purged: no last message time", func(t *testing.T) {
		k.at(t, reply, old)
		k.say(t, k.newRoom(t), "the newest of the database, elsewhere")
		k.purge(t, PurgeOptions{})
		room, _ := k.db.Room(ctx, k.alice, k.room)
		if room.MessageCount != 0 || room.LastMessageAt != nil || room.Unread != 0 {
			t.Fatalf("an emptied room: %+v", room)
		}
		indexIntact(t, k.db)
	})
}

// uploadText stores content as a file of room.
func uploadText(t testing.TB, db *DB, actor Actor, room, name, content string) *File {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	f, err := db.UploadFile(context.Background(), actor, room, FileInput{Name: name, ContentType: "text/plain",
		SHA256: hex.EncodeToString(sum[:])}, strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Files past their period go with their chunks, a few at a time and
// resumed after an interruption; they read as missing from the first step;
// newer files and the messages that carried the old ones stay.
func TestPurgeRemovesFilesWithTheirChunks(t *testing.T) {
	k := newRetentionKit(t, Options{FileChunkSize: 4})
	ctx := context.Background()
	old := uploadText(t, k.db, k.alice, k.room, "old.txt", strings.Repeat("old bytes ", 40)) // 100 chunks
	small := uploadText(t, k.db, k.alice, k.room, "small.txt", "tiny")
	fresh := uploadText(t, k.db, k.alice, k.room, "new.txt", "fresh bytes")
	m, err := k.db.SendText(ctx, k.alice, k.room, TextInput{Content: "see attached", Mentions: []MentionInput{{ID: &k.helper.ID}},
		AttachmentIDs: []string{old.ID, fresh.ID}})
	if err != nil {
		t.Fatal(err)
	}
	cut := k.now.Add(-10 * 24 * time.Hour)
	rawExec(t, k.db, `UPDATE files SET inserted_at = ? WHERE id IN (?, ?)`, cut.Add(-time.Microsecond).UnixMicro(), old.ID, small.ID)
	rawExec(t, k.db, `UPDATE files SET inserted_at = ? WHERE id = ?`, cut.UnixMicro(), fresh.ID)
	k.setRoom(t, k.room, Periods{FileDays: days(10)})

	preview, err := k.db.PurgePreview(ctx, PurgeOptions{Now: k.now})
	if n, b := preview.Total(KindFile); err != nil || n != 2 || b != old.Size+small.Size {
		t.Fatalf("preview: %d files, %d bytes, %v", n, b, err)
	}
	// The first run stops after its first reclaiming step.
	stopping, stop := context.WithCancel(ctx)
	steps := 0
	_, err = k.db.Purge(stopping, PurgeOptions{Now: k.now, ChunkBudget: 40, Progress: func(l PurgeLine) {
		steps++
		stop()
	}})
	if err == nil || steps != 1 {
		t.Fatalf("the interrupted run: %v after %d steps", err, steps)
	}
	if _, err := k.db.RoomFile(ctx, k.alice, k.room, old.ID); ErrorCode(err) != CodeNotFound {
		t.Fatalf("an expired file still reads: %v", err)
	}
	if got, _ := k.db.Message(ctx, k.alice, k.room, m.ID); len(got.Attachments) != 1 || got.Attachments[0].ID != fresh.ID {
		t.Fatalf("the message's attachments: %+v", got.Attachments)
	}
	if n := rawCount(t, k.db, `SELECT count(*) FROM file_chunks WHERE file_id = ?`, old.ID); n != 100 {
		t.Fatalf("%d chunks left before reclaiming, want 100", n)
	}
	var reclaimSteps int
	report, err := k.db.Purge(ctx, PurgeOptions{Now: k.now, ChunkBudget: 40, Progress: func(PurgeLine) { reclaimSteps++ }})
	if err != nil || len(report.Lines) != 0 {
		t.Fatalf("the resumed run: %+v, %v", report, err)
	}
	for _, f := range []*File{old, small} {
		if n := rawCount(t, k.db, `SELECT count(*) FROM files WHERE id = ?`, f.ID) +
			rawCount(t, k.db, `SELECT count(*) FROM file_chunks WHERE file_id = ?`, f.ID); n != 0 {
			t.Errorf("%s keeps %d rows", f.Name, n)
		}
	}
	if _, err := k.db.RoomFile(ctx, k.alice, k.room, fresh.ID); err != nil {
		t.Fatalf("a file as old as the cut-off: %v", err)
	}
	if n := rawCount(t, k.db, `SELECT count(*) FROM file_chunks WHERE file_id = ?`, fresh.ID); n != 3 {
		t.Fatalf("the new file has %d chunks", n)
	}
	if got, _ := k.db.Message(ctx, k.alice, k.room, m.ID); got == nil || got.Content == "" {
		t.Fatal("the message that carried the file is gone")
	}
}

// A pass interrupted between two steps goes on where it stopped: small
// steps over many messages delete each exactly once.
func TestPurgeResumesInSmallSteps(t *testing.T) {
	k := newRetentionKit(t, Options{})
	ctx := context.Background()
	old := k.now.Add(-3 * 24 * time.Hour)
	for i := range 25 {
		k.at(t, k.say(t, k.room, fmt.Sprintf("old %d", i)), old)
		k.at(t, k.event(t, k.room, fmt.Sprintf("old event %d", i)), old)
	}
	k.say(t, k.room, "new")
	k.setRoom(t, k.room, Periods{TextDays: days(1), EventDays: days(2)})
	stopping, stop := context.WithCancel(ctx)
	var first int64
	_, err := k.db.Purge(stopping, PurgeOptions{Now: k.now, Batch: 4, Progress: func(l PurgeLine) {
		if first += l.Count; first >= 12 {
			stop()
		}
	}})
	if err == nil || first < 12 || first > 16 {
		t.Fatalf("the interrupted pass: %v, %d deleted", err, first)
	}
	report := k.purge(t, PurgeOptions{Batch: 4})
	texts, _ := report.Total(KindText)
	events, _ := report.Total(KindEvent)
	if texts+events+first != 50 || k.contents(t, k.room) != "new" {
		t.Fatalf("resumed: %d texts, %d events after %d; left %q", texts, events, first, k.contents(t, k.room))
	}
	if st := k.db.PurgeStats(); st.Texts != 25 || st.Events != 25 {
		t.Fatalf("counted: %+v", st)
	}
	indexIntact(t, k.db)
}

// The worker purges when a setting changes, without waiting for its next
// round, and stops promptly.
func TestPurgeWorkerWakesOnASettingAndStops(t *testing.T) {
	k := newRetentionKit(t, Options{})
	ctx := context.Background()
	k.at(t, k.say(t, k.room, "two days old"), k.now.Add(-48*time.Hour))
	k.say(t, k.room, "new")
	k.db.StartPurgeWorker(time.Hour)
	defer k.db.StopPurgeWorker()
	waitFor(t, "the first pass", func() bool { return k.db.PurgeStats().Passes >= 1 })
	if k.contents(t, k.room) != "two days old|new" {
		t.Fatalf("purged with nothing set: %q", k.contents(t, k.room))
	}
	alice, _ := k.db.UserByID(ctx, k.alice.ID)
	if _, err := k.db.SetOrganizationRetention(ctx, alice, Periods{TextDays: days(1)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the purge after the setting", func() bool { return k.contents(t, k.room) == "new" })
	start := time.Now()
	k.db.StopPurgeWorker()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("stopping took %v", took)
	}
}
