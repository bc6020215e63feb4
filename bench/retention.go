package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite"
)

// The retention workload: how a purge of a large backlog weighs on posting.
// It seeds a database with -messages old messages (most of them events,
// as agents' thoughts and tool output are) and -files old files, and after
// them a hundredth as many messages and one file still in time, written
// straight into the file in large transactions before any server runs;
// then it measures posting by -clients agents without the purge (a server
// with --purge-interval 0), then while the purge deletes the backlog (a
// server started with it), and reports posting p50/p99 in both runs, how
// fast the purge went, and the database file's size seeded, after the
// purge, and after chatd vacuum. It checks what the purge left
// (retention_check.go) and fails when it deleted too little or too much.

// retentionRooms is how many rooms the backlog is spread over.
const retentionRooms = 100

// The organization's retention in the workload, in days: text messages,
// events, files.
const textDays, eventDays, fileDays = 30, 7, 30

// seedLayout numbers what seed writes, so that a database kept by -seeded
// from another layout is seeded again rather than reused.
const seedLayout = 2

type retentionRun struct {
	bin, dir, db, sync  string
	clients             int
	duration            time.Duration
	messages, files     int
	personID, personKey string
	fixture             *fixture
	rooms, workers      []string
}

func retentionWorkload(bin, syncMode string, clients int, d time.Duration, messages, files int, cache string) error {
	if files > messages/5 {
		return fmt.Errorf("-files must be at most a fifth of -messages")
	}
	dir, err := os.MkdirTemp("", "chatd-bench-retention-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	r := &retentionRun{bin: bin, dir: dir, db: filepath.Join(dir, "chatd.db"), sync: syncMode, clients: clients, duration: d,
		messages: messages, files: files}
	if err := r.seeded(cache); err != nil {
		return err
	}
	sizeSeeded := dbSize(r.db)
	without, err := r.post("--purge-interval", "0")
	if err != nil {
		return err
	}
	before, err := snapshot(r.db)
	if err != nil {
		return fmt.Errorf("reading the database before the purge: %w", err)
	}
	during, purge, err := r.postDuringPurge()
	if err != nil {
		return err
	}
	sizePurged := dbSize(r.db)
	checked, checkErr := before.verify(r.db, purge, during)
	if out, err := exec.Command(bin, "vacuum", "--db", r.db).CombinedOutput(); err != nil {
		return fmt.Errorf("chatd vacuum: %v: %s", err, out)
	}
	tables, wholeErr := checkWhole(r.db)
	r.report(without, during, purge, sizeSeeded, sizePurged, dbSize(r.db))
	fmt.Printf("after chatd vacuum, the largest: %s\n", tables)
	if checkErr != nil || wholeErr != nil {
		return fmt.Errorf("the purge left the database wrong: %w", errors.Join(checkErr, wholeErr))
	}
	fmt.Printf("checked: %s; after chatd vacuum, integrity, foreign keys and the search index ok\n", checked)
	return nil
}

// seedCache is what -seeded keeps beside the seeded database: what the
// workload needs of it that the database does not give back (the keys).
type seedCache struct {
	Layout                   int
	Messages, Files, Clients int
	PersonID, PersonKey      string
	Rooms, Workers           []string
	Lanes                    []struct{ Room, PosterKey, WorkerKey, WorkerID string }
}

// seeded makes the seeded database with its retention set, or copies it
// from cache (a directory, "" for none) when a run with the same
// parameters left it there, and leaves it there for the next.
func (r *retentionRun) seeded(cache string) error {
	var c seedCache
	if cache != "" {
		if b, err := os.ReadFile(filepath.Join(cache, "seeded.json")); err == nil && json.Unmarshal(b, &c) == nil &&
			c.Layout == seedLayout && c.Messages == r.messages && c.Files == r.files && c.Clients == r.clients {
			r.personID, r.personKey, r.rooms, r.workers = c.PersonID, c.PersonKey, c.Rooms, c.Workers
			r.fixture = &fixture{personKey: c.PersonKey}
			for _, l := range c.Lanes {
				r.fixture.lanes = append(r.fixture.lanes, lane{room: l.Room, posterKey: l.PosterKey, workerKey: l.WorkerKey, workerID: l.WorkerID})
			}
			fmt.Printf("retention: the seeded database from %s\n", cache)
			return copyFile(filepath.Join(cache, "seeded.db"), r.db)
		}
	}
	if err := r.prepare(); err != nil {
		return err
	}
	start := time.Now()
	if err := r.seed(); err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	fmt.Printf("retention: seeded %d old messages and %d old files (1 MiB each), and %d messages and 1 file in time, in %s\n",
		r.messages, r.files, r.kept()+r.kept()/5, time.Since(start).Round(time.Second))
	if err := exec.Command(r.bin, "retention", "--db", r.db, "--text-days", strconv.Itoa(textDays), "--event-days", strconv.Itoa(eventDays),
		"--file-days", strconv.Itoa(fileDays)).Run(); err != nil {
		return fmt.Errorf("chatd retention: %w", err)
	}
	if cache == "" {
		return nil
	}
	c = seedCache{Layout: seedLayout, Messages: r.messages, Files: r.files, Clients: r.clients, PersonID: r.personID,
		PersonKey: r.personKey, Rooms: r.rooms, Workers: r.workers}
	for _, l := range r.fixture.lanes {
		c.Lanes = append(c.Lanes, struct{ Room, PosterKey, WorkerKey, WorkerID string }{l.room, l.posterKey, l.workerKey, l.workerID})
	}
	b, _ := json.Marshal(c)
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return err
	}
	if err := copyFile(r.db, filepath.Join(cache, "seeded.db")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cache, "seeded.json"), b, 0o600)
}

// commonFlags are the flags of every server of the workload.
func (r *retentionRun) commonFlags(extra ...string) []string {
	return append([]string{"--sync", r.sync, "--max-messages-per-room", "100000000", "--max-agents-per-user", "100000",
		"--max-chats-per-user", "100000", "--rate-limit", "0"}, extra...)
}

// prepare makes the person, the posting lanes and the rooms of the backlog
// through a first server, and stops it.
func (r *retentionRun) prepare() error {
	if err := exec.Command(r.bin, "migrate", "--db", r.db).Run(); err != nil {
		return fmt.Errorf("chatd migrate: %w", err)
	}
	var person struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	if err := runJSON(r.bin, &person, "create-user", "--db", r.db, "--handle", "bench", "--name", "Bench Person", "--json"); err != nil {
		return err
	}
	r.personID, r.personKey = person.ID, person.APIKey
	srv, url, _, err := startServerArgs(r.bin, r.db, r.commonFlags("--purge-interval", "0")...)
	if err != nil {
		return err
	}
	defer stopServer(srv)
	c := newClient(url, r.clients)
	if r.fixture, err = c.setup(r.personKey, r.clients); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	for _, l := range r.fixture.lanes {
		r.workers = append(r.workers, l.workerID)
	}
	for i := range retentionRooms {
		var room struct{ Data struct{ ID string } }
		if _, err := c.call("POST", "/api/v1/me/chats", r.personKey, map[string]any{"chat": map[string]any{"title": fmt.Sprintf("archive %d", i)}},
			&room, 201); err != nil {
			return err
		}
		r.rooms = append(r.rooms, room.Data.ID)
	}
	return nil
}

func stopServer(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
}

// post runs the posting load against a server started with extra flags.
func (r *retentionRun) post(extra ...string) (result, error) {
	srv, url, _, err := startServerArgs(r.bin, r.db, r.commonFlags(extra...)...)
	if err != nil {
		return result{}, err
	}
	defer stopServer(srv)
	r.fixture.c = newClient(url, r.clients)
	return r.fixture.c.run(r.clients, r.duration, r.fixture.post), nil
}

// purgeFigures are what the server's purge did, from its metrics, and
// when: its pass started after started and ended before ended.
type purgeFigures struct {
	items, itemsUnderLoad float64
	took, load            time.Duration
	started, ended        time.Time
}

// postDuringPurge starts a server, whose purge starts at once, posts for
// the duration, then waits for the purge's pass to end.
func (r *retentionRun) postDuringPurge() (result, purgeFigures, error) {
	p := purgeFigures{started: time.Now()}
	srv, url, metricsURL, err := startServerArgs(r.bin, r.db, r.commonFlags("--metrics-addr", "127.0.0.1:0")...)
	if err != nil {
		return result{}, p, err
	}
	defer stopServer(srv)
	start := time.Now()
	r.fixture.c = newClient(url, r.clients)
	res := r.fixture.c.run(r.clients, r.duration, r.fixture.post)
	p.load = time.Since(start)
	m, err := scrapeSamples(metricsURL)
	if err != nil {
		return res, p, err
	}
	p.itemsUnderLoad = purgedItems(m)
	for m["chatd_purge_passes_total"] < 1 {
		time.Sleep(100 * time.Millisecond)
		if m, err = scrapeSamples(metricsURL); err != nil {
			return res, p, err
		}
		if time.Since(start) > time.Hour {
			return res, p, fmt.Errorf("the purge did not end within an hour")
		}
	}
	p.took, p.items, p.ended = time.Since(start), purgedItems(m), time.Now()
	return res, p, nil
}

func purgedItems(m map[string]float64) float64 {
	return m[`chatd_purged_total{kind="text"}`] + m[`chatd_purged_total{kind="event"}`] + m[`chatd_purged_total{kind="file"}`]
}

func dbSize(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func (r *retentionRun) report(without, during result, p purgeFigures, seeded, purged, vacuumed int64) {
	fmt.Printf("%-22s %7s %10s %9s %9s %8s\n", "posting", "clients", "posts/s", "p50", "p99", "errors")
	for _, row := range []struct {
		name string
		res  result
	}{{"without the purge", without}, {"during the purge", during}} {
		fmt.Printf("%-22s %7d %10.0f %9s %9s %8d\n", row.name, r.clients, row.res.rate(), ms(row.res.p(0.5)), ms(row.res.p(0.99)), row.res.errors)
		if row.res.firstErr != nil {
			fmt.Printf("  first error: %v\n", row.res.firstErr)
		}
	}
	fmt.Printf("p99 during / without: %.2f\n", float64(during.p(0.99))/float64(max(without.p(0.99), 1)))
	fmt.Printf("purge: %.0f items in %s (%.0f/s); %.0f in the %s under load (%.0f/s)\n", p.items, p.took.Round(time.Second),
		p.items/p.took.Seconds(), p.itemsUnderLoad, p.load.Round(time.Second), p.itemsUnderLoad/p.load.Seconds())
	fmt.Printf("database: %s seeded, %s after the purge, %s after chatd vacuum\n", mib(seeded), mib(purged), mib(vacuumed))
}

// seed writes the backlog straight into the database file: messages 60 to
// 40 days old (a fifth of them text, each with a processed delivery to a
// worker, the rest thoughts and tool results), in bursts of seedBurst per
// room, the rooms taking turns, and files 60 days old, each attached to a
// text message. After the backlog come the messages the purge must leave:
// texts 29 to 8 days old (in time, though older than the events' period,
// so that the events' purge walks past them), then messages of every kind
// from the last 6 days, one of them with a file a day old.
func (r *retentionRun) seed() error {
	conn, err := sql.Open("sqlite", "file:"+r.db+"?_pragma=busy_timeout(5000)&_pragma=synchronous(OFF)&_pragma=foreign_keys(1)")
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	var base int64
	if err := conn.QueryRow(`SELECT coalesce(max(seq), 0) FROM messages`).Scan(&base); err != nil {
		return err
	}
	now := time.Now()
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixMicro() }
	day, kept := 24*time.Hour, r.kept()
	spans := []seedSpan{
		{n: r.messages, from: ago(60 * day), span: 20 * day},
		{first: r.messages, n: kept / 5, from: ago(29 * day), span: 21 * day, texts: true},
		{first: r.messages + kept/5, n: kept, from: ago(6 * day), span: 6*day - time.Hour},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const batch = 20000
	for _, sp := range spans {
		for done := 0; done < sp.n; done += batch {
			if err := r.seedBatch(conn, rng, base, sp, done, min(batch, sp.n-done)); err != nil {
				return err
			}
		}
	}
	for i := range r.files {
		if err := r.seedFile(conn, rng, base, i*5, ago(60*day), fmt.Sprintf("report-%d.bin", i)); err != nil {
			return err
		}
	}
	if err := r.seedFile(conn, rng, base, spans[2].first, ago(day), "recent.bin"); err != nil {
		return err
	}
	for _, room := range r.rooms {
		if _, err := conn.Exec(`UPDATE rooms SET message_count = message_count + (SELECT count(*) FROM messages WHERE room_id = ?)
			WHERE id = ?`, room, room); err != nil {
			return err
		}
	}
	_, err = conn.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

// kept is how many messages of every kind seed writes in time, beside a
// fifth as many texts.
func (r *retentionRun) kept() int { return max(50, r.messages/100) }

// seedSpan is a run of seeded messages: the first is message number first
// of the seeding, the n of them evenly spread over span from from; all
// texts, or the backlog's mix.
type seedSpan struct {
	first, n int
	from     int64 // µs
	span     time.Duration
	texts    bool
}

// words make the backlog's content: varied enough that the search index
// holds what a real one would.
var words = strings.Fields(`the deploy of service build failed passed retry cache database index query latency error warning
	user request response token model agent tool call result thought plan step check logs metrics trace span queue worker
	timeout config release branch merge commit review test suite coverage flaky network disk memory cpu budget alert page`)

func sentence(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(8) == 0 {
			b.WriteString(strconv.Itoa(rng.IntN(10000)))
		}
	}
	return b.String()
}

// seedBurst is how many messages in a row the backlog puts in one room: an
// agent's turn (its thoughts, tool calls and results, then its answer)
// comes in bursts, and rooms take turns.
const seedBurst = 50

// seedRoom is the room of the backlog's message i.
func (r *retentionRun) seedRoom(i int) string { return r.rooms[(i/seedBurst)%len(r.rooms)] }

// seedBatch writes messages [done, done+n) of sp in one transaction.
func (r *retentionRun) seedBatch(conn *sql.DB, rng *rand.Rand, base int64, sp seedSpan, done, n int) error {
	tx, err := conn.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	msg, err := tx.Prepare(`INSERT INTO messages (seq, id, room_id, sender_id, sender_type, sender_name, message_type, content,
		metadata, inserted_at, updated_at) VALUES (?, ?, ?, ?, 'User', 'Bench Person', ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	delivery, err := tx.Prepare(`INSERT INTO deliveries (agent_id, room_id, message_seq, status, current_attempt, processed_at, updated_at)
		VALUES (?, ?, ?, 'processed', 1, ?, ?)`)
	if err != nil {
		return err
	}
	for i := done; i < done+n; i++ {
		g := sp.first + i // the message's number in the seeding
		seq, room := base+1+int64(g), r.seedRoom(g)
		at := sp.from + sp.span.Microseconds()*int64(i)/int64(sp.n)
		typ, content, meta := "thought", sentence(rng, 40+rng.IntN(40)), "{}"
		switch {
		case sp.texts || i%5 == 0:
			typ, content = "text", sentence(rng, 8+rng.IntN(16))
		case i%5 == 3:
			typ, meta = "tool_result", `{"tool":"search","ok":true}`
			content = sentence(rng, 80+rng.IntN(120))
		}
		if _, err := msg.Exec(seq, uuid.Must(uuid.NewV7()).String(), room, r.personID, typ, content, meta, at, at); err != nil {
			return err
		}
		if typ == "text" {
			if _, err := delivery.Exec(r.workers[g%len(r.workers)], room, seq, at, at); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// seedFile writes a file of 1 MiB, in four chunks, uploaded at at and
// attached to the seeding's message number g, which is a text.
func (r *retentionRun) seedFile(conn *sql.DB, rng *rand.Rand, base int64, g int, at int64, name string) error {
	chunk := make([]byte, 256<<10)
	id, room := uuid.Must(uuid.NewV7()).String(), r.seedRoom(g)
	type stmt struct {
		q    string
		args []any
	}
	stmts := []stmt{
		{`INSERT INTO files (id, room_id, uploader_id, uploader_type, name, content_type, size, sha256, chunk_size, status, inserted_at)
			VALUES (?, ?, ?, 'User', ?, 'application/octet-stream', ?, 'seeded', ?, 'ready', ?)`,
			[]any{id, room, r.personID, name, 4 * len(chunk), len(chunk), at}},
		{`INSERT INTO message_attachments (message_seq, position, file_id) VALUES (?, 0, ?)`, []any{base + 1 + int64(g), id}},
	}
	for n := range 4 {
		data := make([]byte, len(chunk))
		for j := range data {
			data[j] = byte(rng.IntN(256))
		}
		stmts = append(stmts, stmt{`INSERT INTO file_chunks (file_id, n, data) VALUES (?, ?, ?)`, []any{id, n, data}})
	}
	for _, s := range stmts {
		if _, err := conn.Exec(s.q, s.args...); err != nil {
			return err
		}
	}
	return nil
}
