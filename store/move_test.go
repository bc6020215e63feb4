package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
)

// moveWorld is a SQLite database with something in nearly every table,
// written through the store as chatd writes it, and what a test needs to
// read it back.
type moveWorld struct {
	path                    string
	alice, bob              *User
	aliceKey, helperKey     string
	helper                  *Agent
	room                    *Room
	first, reply            *Message
	file                    *File
	fileBody                string
	oauthAccess             string
	lastSeq                 int64
	taskID                  string
	secret                  []byte
	boardEvents, taskEvents int
}

// moveChunk is the file chunk size of the world's database: small, so
// that its file has several chunks.
const moveChunk = 1000

func newMoveWorld(t *testing.T) *moveWorld {
	t.Helper()
	ctx := context.Background()
	w := &moveWorld{path: filepath.Join(t.TempDir(), "chatd.db")}
	db, err := Open(w.path, Options{Schema: testSchema, FileChunkSize: moveChunk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	str := func(s string) *string { return &s }

	// People, their keys, a password, a session; agents; a setup link.
	w.alice, w.aliceKey = mustUser(t, db, "alice")
	w.bob, _ = mustUser(t, db, "bob")
	carol, _, err := db.CreateUser(ctx, NewUser{Handle: "carol", Name: "Carol Other", Organization: "Elsewhere", Email: "Carol@Example.com"})
	must(err)
	must(db.SetPassword(ctx, w.alice.ID, "correct horse battery staple"))
	_, _, err = db.SignIn(ctx, "alice", "correct horse battery staple")
	must(err)
	_, _, err = db.CreateUserKey(ctx, w.alice.ID, "laptop")
	must(err)
	w.helper, w.helperKey = mustAgent(t, db, w.alice, "Helper")
	scout, _ := mustAgent(t, db, w.alice, "Scout")
	// A lease this server holds, which the move leaves behind.
	_, err = db.TakeLease(ctx, Lease{Name: "webhook:held", Holder: db.NodeID(), TTL: time.Minute})
	must(err)
	_, err = db.CreateSetupToken(ctx)
	must(err)
	aliceA, bobA, helperA := UserActor(w.alice), UserActor(w.bob), AgentActor(w.helper)

	// A room with its participants, messages mentioning the agent (with
	// deliveries, one processing), a reply, an edit, a reaction, an event,
	// an attention message marked done, a file of several chunks
	// attached, a read marker.
	w.room, err = db.CreateRoom(ctx, aliceA, NewRoom{Title: str("Launch")})
	must(err)
	for _, id := range []string{w.helper.ID, w.bob.ID, scout.ID} {
		_, err := db.AddParticipant(ctx, aliceA, w.room.ID, id, "")
		must(err)
	}
	_, _, err = db.CreateWebhook(ctx, helperA, w.helper.ID, NewWebhook{URL: "https://hooks.example/helper", Description: "relay"})
	must(err)
	w.fileBody = strings.Repeat("0123456789abcdef", 220) // 3,520 bytes: four chunks
	w.file = uploadText(t, db, aliceA, w.room.ID, "notes.txt", w.fileBody)
	w.first, err = db.SendText(ctx, aliceA, w.room.ID, TextInput{Content: "the deploy checklist is ready",
		Mentions: []MentionInput{{ID: &w.helper.ID}}, AttachmentIDs: []string{w.file.ID}})
	must(err)
	w.reply, err = db.SendText(ctx, bobA, w.room.ID, TextInput{Content: "thanks, reading it now", ReplyToID: &w.first.ID,
		Mentions: []MentionInput{{ID: &w.helper.ID}}})
	must(err)
	_, err = db.EditMessage(ctx, bobA, w.room.ID, w.reply.ID, "thanks, reading it now (twice)")
	must(err)
	_, err = db.React(ctx, bobA, w.room.ID, w.first.ID, "👍")
	must(err)
	_, err = db.PostEvent(ctx, helperA, w.room.ID, EventInput{Content: "checking the list", Type: "thought"})
	must(err)
	attention, err := db.PostEvent(ctx, helperA, w.room.ID, EventInput{Content: "needs a decision", Type: "attention", Metadata: json.RawMessage(`{"kind":"question"}`)})
	must(err)
	_, err = db.MarkAttention(ctx, aliceA, w.room.ID, attention.ID, true)
	must(err)
	_, err = db.MarkProcessing(ctx, helperA, w.room.ID, w.first.ID)
	must(err)
	_, err = db.MarkRead(ctx, aliceA, w.room.ID, &w.reply.ID)
	must(err)

	// The board and a task with its history.
	_, err = db.UpdateBoard(ctx, aliceA, w.room.ID, BoardUpdate{GoalTitle: str("Ship it"), GoalSummary: str("by Friday")})
	must(err)
	task, err := db.CreateTask(ctx, helperA, w.room.ID, NewTask{Subject: str("write the notes"), Detail: str("all of them")})
	must(err)
	_, err = db.UpdateTask(ctx, helperA, w.room.ID, task.ID, TaskUpdate{Status: str("in_progress"), Comment: str("on it")})
	must(err)
	w.taskID = task.ID

	// Memories, contacts across organizations, a delegation, OAuth, an
	// invitation, retention, a queued bulk job.
	_, err = db.CreateMemory(ctx, helperA, NewMemory{Content: str("alice prefers short summaries"), System: str("long_term"),
		Type: str("semantic"), Segment: str("user"), Thought: str("she said so"), Scope: str("subject"), SubjectID: &w.alice.ID})
	must(err)
	request, err := db.AddContact(ctx, aliceA, "carol", str("hello from Acme"), "/message")
	must(err)
	_, err = db.RespondContactRequest(ctx, UserActor(carol), "approve", request.ID, "")
	must(err)
	_, _, err = db.CreateDelegation(ctx, w.alice, w.helper.ID, NewDelegation{Scopes: []string{"chats:read"}})
	must(err)
	client, err := db.RegisterOAuthClient(ctx, NewOAuthClient{Name: "Claude Code", RedirectURIs: []string{"http://127.0.0.1:5000/callback"}})
	must(err)
	code, err := db.AuthorizeOAuthClient(ctx, w.alice, OAuthAuthorization{ClientID: client.ID, RedirectURI: "http://127.0.0.1:5000/callback",
		CodeChallenge: s256(testVerifier), Scope: "mcp", Resource: "http://chatd.test/mcp", AgentID: w.helper.ID})
	must(err)
	tokens, err := db.ExchangeOAuthCode(ctx, OAuthCodeExchange{ClientID: client.ID, Code: code,
		RedirectURI: "http://127.0.0.1:5000/callback", Challenge: s256(testVerifier)})
	must(err)
	w.oauthAccess = tokens.Access
	_, _, err = db.CreateInvitation(ctx, w.alice, "user")
	must(err)
	_, err = db.SetOrganizationRetention(ctx, w.alice, Periods{EventDays: days(90)})
	must(err)
	_, err = db.SetRoomRetention(ctx, aliceA, w.room.ID, Periods{TextDays: days(365)})
	must(err)
	spare, err := db.CreateRoom(ctx, aliceA, NewRoom{Title: str("Spare")})
	must(err)
	_, err = db.CreateBulkJob(ctx, w.alice, BulkChats, []string{spare.ID}, false)
	must(err)

	w.secret, err = db.ServerSecret(ctx)
	must(err)
	w.lastSeq = int64(rawCount(t, db, `SELECT max(seq) FROM messages`))
	w.boardEvents = rawCount(t, db, `SELECT count(*) FROM board_events`)
	w.taskEvents = rawCount(t, db, `SELECT count(*) FROM task_events`)
	return w
}

// readBack is what the store answers about the world, rendered as JSON:
// the same text from the SQLite file and from its move means the move
// kept everything the store reads.
func (w *moveWorld) readBack(t *testing.T, db *DB) string {
	t.Helper()
	ctx := context.Background()
	aliceA, helperA := UserActor(w.alice), AgentActor(w.helper)
	var out strings.Builder
	add := func(what string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(what + ": " + string(b) + "\n")
	}
	page := PageRequest{Limit: 100}
	p, err := db.Authenticate(ctx, w.aliceKey)
	add("alice's key", p.User, err)
	p, err = db.Authenticate(ctx, w.helperKey)
	add("helper's key", p.Agent, err)
	keys, err := db.UserKeys(ctx, w.alice.ID)
	add("alice's keys", keys, err)
	history, err := db.ListHistory(ctx, aliceA, w.room.ID, HistoryFilter{}, page)
	add("history", history.Items, err)
	edits, err := db.MessageEdits(ctx, aliceA, w.room.ID, w.reply.ID)
	add("edits", edits, err)
	rooms, err := db.ListRooms(ctx, aliceA, RoomFilter{}, page)
	add("rooms", rooms.Items, err)
	participants, err := db.ListParticipants(ctx, aliceA, w.room.ID, "", page)
	add("participants", participants.Items, err)
	deliveries, err := db.ListDeliveries(ctx, helperA, w.room.ID, "", false, page)
	add("deliveries", deliveries.Items, err)
	board, err := db.Board(ctx, aliceA, w.room.ID, true)
	add("board", board, err)
	task, err := db.Task(ctx, aliceA, w.room.ID, w.taskID, true)
	add("task", task, err)
	memories, err := db.ListMemories(ctx, helperA, MemoryFilter{}, page)
	add("memories", memories.Items, err)
	contacts, err := db.ListContacts(ctx, aliceA, page)
	add("contacts", contacts.Items, err)
	delegations, err := db.ListDelegations(ctx, w.alice, w.helper.ID)
	add("delegations", delegations, err)
	grants, err := db.ListOAuthGrants(ctx, w.alice)
	add("grants", grants, err)
	invitations, err := db.Invitations(ctx, w.alice)
	add("invitations", invitations, err)
	retention, err := db.RoomRetention(ctx, aliceA, w.room.ID)
	add("retention", retention, err)
	webhooks, err := db.ListWebhooks(ctx, helperA, w.helper.ID)
	add("webhooks", webhooks, err)
	marks, err := db.AttentionMarks(ctx, aliceA, w.room.ID)
	add("attention", marks, err)
	return out.String()
}

// Moving fills PostgreSQL with everything the SQLite file holds: the store
// opened on it answers as it did on SQLite (history with its mentions,
// reactions, edits and attachments, the file's bytes, keys, passwords,
// OAuth tokens, the signing secret), search finds a moved message, and new
// rows take numbers after the moved ones. The SQLite file is not changed.
func TestMoveCopiesEverythingToPostgreSQL(t *testing.T) {
	url := pgtest.NewDatabase(t)
	w := newMoveWorld(t)
	ctx := context.Background()
	before := w.readBackFromSQLite(t)
	fileBefore := fileHash(t, w.path)

	var progress []MoveProgress
	report, err := Move(ctx, w.path, url, Options{Schema: testSchema, PostgresSchema: testPostgresSchema},
		func(p MoveProgress) { progress = append(progress, p) })
	if err != nil {
		t.Fatal(err)
	}
	if fileHash(t, w.path) != fileBefore {
		t.Fatal("the SQLite file changed")
	}
	if _, err := os.Stat(w.path + "-wal"); err == nil && fileSize(w.path+"-wal") > 0 {
		t.Fatal("the move wrote to the SQLite file's WAL")
	}

	// Every table SQLite has was copied, whole, and most hold rows, but
	// for the SQLite server's leases, which stay behind.
	src, err := openFile(w.path, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tables, err := queryStrings(ctx, src, sqliteDialect.tablesQuery)
	if err != nil {
		t.Fatal(err)
	}
	moved := map[string]int64{}
	for _, mt := range report.Tables {
		moved[mt.Name] = mt.Rows
	}
	if !slices.Equal(report.NotMoved, []string{"leases"}) {
		t.Errorf("tables not moved: %v", report.NotMoved)
	}
	if n := countOn(t, url, `SELECT count(*) FROM leases`); n != 0 {
		t.Errorf("%d leases moved", n)
	}
	tables = slices.DeleteFunc(tables, func(name string) bool { return name == "leases" })
	var empty []string
	for _, name := range tables {
		var n int64
		if err := src.QueryRow(`SELECT count(*) FROM ` + quoteName(name)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if got, ok := moved[name]; !ok || got != n {
			t.Errorf("%s: %d rows in SQLite, %d reported moved (listed: %v)", name, n, got, ok)
		}
		if pg := countOn(t, url, `SELECT count(*) FROM `+quoteName(name)); int64(pg) != n {
			t.Errorf("%s: %d rows in SQLite, %d in PostgreSQL", name, n, pg)
		}
		if n == 0 {
			empty = append(empty, name)
		}
	}
	if len(report.Tables) != len(tables) {
		t.Errorf("moved %d tables, SQLite has %d", len(report.Tables), len(tables))
	}
	// Only what no store call above writes may be empty: the purge's marks.
	if !slices.Equal(empty, []string{"retention_marks"}) {
		t.Errorf("empty tables: %v", empty)
	}
	if !slices.Equal(report.PostgresOnly, []string{"cluster_changes", "schema_version"}) {
		t.Errorf("PostgreSQL-only tables: %v", report.PostgresOnly)
	}
	for _, want := range []string{"board_events.seq", "messages.seq", "task_events.seq"} {
		if !slices.Contains(report.Sequences, want) {
			t.Errorf("sequences set: %v, not %s", report.Sequences, want)
		}
	}
	if i := slices.IndexFunc(progress, func(p MoveProgress) bool { return p.Stage == "verify" && p.Table == "messages" && p.Done }); i < 0 {
		t.Errorf("no progress report of the messages' check: %+v", progress)
	}

	pg, err := openPostgresStore(t, url)
	if err != nil {
		t.Fatal(err)
	}
	if after := w.readBack(t, pg); after != before {
		t.Fatalf("the store reads differently after the move:\nSQLite:\n%s\nPostgreSQL:\n%s", before, after)
	}
	secret, err := pg.ServerSecret(ctx)
	if err != nil || !bytes.Equal(secret, w.secret) {
		t.Fatalf("the server secret did not move: %v", err)
	}
	if p, err := pg.AuthenticateOAuth(ctx, w.oauthAccess); err != nil || p.Agent == nil || p.Agent.ID != w.helper.ID {
		t.Fatalf("the OAuth access token: %+v, %v", p, err)
	}
	if _, _, err := pg.SignIn(ctx, "alice", "correct horse battery staple"); err != nil {
		t.Fatalf("alice's password: %v", err)
	}
	f, err := pg.RoomFile(ctx, UserActor(w.alice), w.room.ID, w.file.ID)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	if err := pg.CopyFileRange(ctx, f, 0, f.Size-1, &body); err != nil || body.String() != w.fileBody {
		t.Fatalf("the file reads %d bytes (%v), want its %d", body.Len(), err, len(w.fileBody))
	}
	hits, err := pg.Search(ctx, UserActor(w.alice), SearchFilter{Query: "checklist"}, PageRequest{Limit: 10})
	if err != nil || len(hits.Items) != 1 || hits.Items[0].ID != w.first.ID {
		t.Fatalf("search for a moved message: %+v, %v", hits, err)
	}

	// New rows take numbers after the moved ones.
	next, err := pg.SendText(ctx, UserActor(w.alice), w.room.ID, TextInput{Content: "first on PostgreSQL", Mentions: []MentionInput{{ID: &w.helper.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	if next.Seq <= w.lastSeq {
		t.Fatalf("a new message took seq %d, not after the moved %d", next.Seq, w.lastSeq)
	}
	str := func(s string) *string { return &s }
	if _, err := pg.UpdateBoard(ctx, UserActor(w.alice), w.room.ID, BoardUpdate{GoalTitle: str("Ship it well")}); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.UpdateTask(ctx, AgentActor(w.helper), w.room.ID, w.taskID, TaskUpdate{Comment: str("half done")}); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, pg, `SELECT count(*) FROM board_events`); n != w.boardEvents+1 {
		t.Fatalf("%d board events, want %d", n, w.boardEvents+1)
	}
	if n := rawCount(t, pg, `SELECT count(*) FROM task_events`); n != w.taskEvents+1 {
		t.Fatalf("%d task events, want %d", n, w.taskEvents+1)
	}
}

// readBackFromSQLite is readBack on the world's SQLite database, closed
// again after.
func (w *moveWorld) readBackFromSQLite(t *testing.T) string {
	t.Helper()
	db, err := Open(w.path, Options{Schema: testSchema, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return w.readBack(t, db)
}

// A PostgreSQL database with tables in it is refused, naming them, and
// neither database changes.
func TestMoveRefusesATargetThatIsNotEmpty(t *testing.T) {
	url := pgtest.NewDatabase(t)
	w := newMoveWorld(t)
	execOn(t, url, `CREATE TABLE invoices (id BIGINT PRIMARY KEY)`)
	execOn(t, url, `INSERT INTO invoices VALUES (1)`)
	fileBefore := fileHash(t, w.path)
	_, err := Move(context.Background(), w.path, url, Options{Schema: testSchema, PostgresSchema: testPostgresSchema}, nil)
	if !errors.Is(err, ErrTargetNotEmpty) || !strings.Contains(err.Error(), "invoices") {
		t.Fatalf("move: %v, want a refusal naming invoices", err)
	}
	if n := countOn(t, url, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`); n != 1 {
		t.Fatalf("%d tables after the refusal, want the 1 that was there", n)
	}
	if n := countOn(t, url, `SELECT count(*) FROM pg_proc WHERE proname LIKE 'chatd_%'`); n != 0 {
		t.Fatalf("the refusal left %d of chatd's functions behind", n)
	}
	if fileHash(t, w.path) != fileBefore {
		t.Fatal("the SQLite file changed")
	}
}

// A SQLite file of an older schema is refused, saying to migrate it
// first; one a server holds is refused too. PostgreSQL is left empty.
func TestMoveRefusesAnOldSchemaAndARunningServer(t *testing.T) {
	url := pgtest.NewDatabase(t)
	opts := Options{Schema: testSchema, PostgresSchema: testPostgresSchema}
	old := databaseAsOf(t, 11)
	fileBefore := fileHash(t, old)
	_, err := Move(context.Background(), old, url, opts, nil)
	if err == nil || !strings.Contains(err.Error(), "schema version 11") || !strings.Contains(err.Error(), "chatd migrate") {
		t.Fatalf("move of a version-11 file: %v, want a refusal that says to migrate", err)
	}
	if fileHash(t, old) != fileBefore {
		t.Fatal("the old SQLite file changed")
	}

	w := newMoveWorld(t)
	lock, err := LockServer(w.path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Move(context.Background(), w.path, url, opts, nil)
	lock.Release()
	if !errors.Is(err, ErrServerRunning) {
		t.Fatalf("move beside a server: %v, want ErrServerRunning", err)
	}
	if n := countOn(t, url, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`); n != 0 {
		t.Fatalf("%d tables after the refusals, want none", n)
	}
}

// A move that is interrupted, or fails partway (here, on a row PostgreSQL
// refuses), leaves the target empty, so that it can run again once the
// cause is fixed.
func TestMoveThatFailsLeavesTheTargetEmpty(t *testing.T) {
	url := pgtest.NewDatabase(t)
	w := newMoveWorld(t)
	raw, err := openFile(w.path, readWrite)
	if err != nil {
		t.Fatal(err)
	}
	// PostgreSQL's text cannot hold a NUL; SQLite's can.
	if _, err := raw.Exec("UPDATE messages SET content = 'nul' || char(0) || 'inside' WHERE id = ?", w.reply.ID); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	opts := Options{Schema: testSchema, PostgresSchema: testPostgresSchema}
	empty := func(when string) {
		t.Helper()
		if n := countOn(t, url, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`); n != 0 {
			t.Fatalf("%d tables %s, want none", n, when)
		}
	}

	// Interrupted once the first table is copied (Ctrl-C).
	ctx, cancel := context.WithCancel(context.Background())
	_, err = Move(ctx, w.path, url, opts, func(p MoveProgress) {
		if p.Done {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("an interrupted move: %v, want context.Canceled", err)
	}
	empty("after an interrupted move")

	if _, err := Move(context.Background(), w.path, url, opts, nil); err == nil || !strings.Contains(err.Error(), "messages") {
		t.Fatalf("move: %v, want a failure naming messages", err)
	}
	empty("after a failed move")

	raw, _ = openFile(w.path, readWrite)
	if _, err := raw.Exec("UPDATE messages SET content = 'fixed' WHERE id = ?", w.reply.ID); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := Move(context.Background(), w.path, url, opts, nil); err != nil {
		t.Fatalf("the move again: %v", err)
	}
	// Done once, a move is not made twice.
	if _, err := Move(context.Background(), w.path, url, opts, nil); !errors.Is(err, ErrTargetNotEmpty) ||
		!strings.Contains(err.Error(), "already holds a chatd database") {
		t.Fatalf("a second move: %v, want a refusal", err)
	}
}

// The checksum is the same for the same rows in any order, and differs
// for a changed value, a NULL in place of an empty text, or a row twice.
func TestMoveChecksum(t *testing.T) {
	sum := func(rows ...[]any) string {
		var s rowSum
		for _, r := range rows {
			s.add(r)
		}
		return s.String()
	}
	a, b := []any{int64(1), "x", []byte{0, 1}, nil}, []any{int64(2), "y", []byte{}, "z"}
	if sum(a, b) != sum(b, a) {
		t.Fatal("the checksum depends on the rows' order")
	}
	if sum(a, b) == sum(a, []any{int64(2), "y", []byte{}, "Z"}) {
		t.Fatal("a changed value keeps the checksum")
	}
	if sum([]any{""}) == sum([]any{nil}) {
		t.Fatal("NULL and an empty text sum the same")
	}
	if sum(a) == sum(a, a) || sum(a, a) == sum() {
		t.Fatal("a row twice sums as once, or as none")
	}
	if sum([]any{"ab", "c"}) == sum([]any{"a", "bc"}) {
		t.Fatal("values run together")
	}
	if sum([]any{int64(7)}) != sum([]any{int32(7)}) || sum([]any{"é"}) != sum([]any{[]byte("é")}) {
		t.Fatal("the same value read as another Go type sums differently")
	}
}

func fileHash(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}
