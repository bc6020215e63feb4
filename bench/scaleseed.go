package main

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The scale workload's database, written straight into the file in large
// transactions (chatd's writer commits a post at a time, and filling ten
// million messages through it would take hours): rows as chatd writes
// them, with the search index filled by the statement chatd's writer runs.
//
// People own ten rooms each and four agents each; a room holds its owner
// and two of those agents and about a hundred messages (50 to 150): a
// fifth of them events (tool calls and results, thoughts) and the rest
// text messages that each mention one agent of the room, whose delivery is
// processed nineteen times in twenty and open otherwise. The owner has read
// the room but for its last few messages.

const (
	roomsPerPerson  = 10
	agentsPerPerson = 4
	seedTxMessages  = 50000 // messages per transaction
)

type seedPerson struct{ id, handle, name string }

type seedAgent struct{ id, handle, name string }

// seedRoom is a seeded room: its owner and its two agents (indexes into
// the seeder's people and agents).
type seedRoom struct {
	id            string
	owner         int
	first, second int
}

type seeder struct {
	db       *sql.DB
	org      string
	rng      *rand.Rand
	clock    int64 // microseconds: the time of the next row
	people   []seedPerson
	agents   []seedAgent
	rooms    []seedRoom
	messages int
}

// seedKey is the API key of a seeded person or agent, derived from its id
// so that the bench needs to keep none.
func seedKey(prefix, id string) string {
	d := sha256.Sum256([]byte("chatd-bench:" + id))
	return prefix + hex.EncodeToString(d[:])
}

func openSeeder(path string) (*seeder, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=synchronous(OFF)&_pragma=cache_size(-262144)&_pragma=foreign_keys(1)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	s := &seeder{db: db, rng: rand.New(rand.NewPCG(1, 2)),
		// The history starts 300 days back, a second between messages: ten
		// million messages end before today.
		clock: time.Now().Add(-300 * 24 * time.Hour).UnixMicro()}
	s.org = uuid.Must(uuid.NewV7()).String()
	_, err = db.Exec(`INSERT INTO organizations (id, name, inserted_at) VALUES (?, 'Bench', ?)`, s.org, s.clock)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// grow adds rooms until the database holds target messages.
func (s *seeder) grow(target int) error {
	for s.messages < target {
		tx, err := s.db.Begin()
		if err != nil {
			return err
		}
		st, err := prepareSeed(tx)
		if err != nil {
			tx.Rollback()
			return err
		}
		for end := min(target, s.messages+seedTxMessages); s.messages < end && err == nil; {
			err = s.addRoom(tx, st, min(50+s.rng.IntN(101), end-s.messages))
		}
		if err == nil {
			// What chatd's writer runs before each commit (store/search_index.go).
			_, err = tx.Exec(`INSERT INTO messages_fts (rowid, content)
				SELECT m.seq, m.content FROM messages_fts_queue q JOIN messages m ON m.seq = q.seq ORDER BY q.seq`)
		}
		if err == nil {
			_, err = tx.Exec(`DELETE FROM messages_fts_queue`)
		}
		st.close()
		if err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	_, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

// seedStmts are the statements run once per message.
type seedStmts struct{ message, delivery *sql.Stmt }

func prepareSeed(tx *sql.Tx) (*seedStmts, error) {
	m, err := tx.Prepare(`INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type, content, mentions,
		inserted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`)
	if err != nil {
		return nil, err
	}
	d, err := tx.Prepare(`INSERT INTO deliveries (agent_id, room_id, message_seq, status, current_attempt, attempts, processed_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		m.Close()
		return nil, err
	}
	return &seedStmts{m, d}, nil
}

func (st *seedStmts) close() { st.message.Close(); st.delivery.Close() }

func (s *seeder) tick() int64 { s.clock += 1_000_000; return s.clock }

// addPerson adds a person with their agents and everyone's API key.
func (s *seeder) addPerson(tx *sql.Tx) error {
	n := len(s.people)
	p := seedPerson{id: uuid.Must(uuid.NewV7()).String(), handle: fmt.Sprintf("seed%d", n), name: fmt.Sprintf("Person %d", n)}
	ts := s.tick()
	if _, err := tx.Exec(`INSERT INTO users (id, organization_id, handle, first_name, last_name, role, inserted_at, updated_at)
		VALUES (?, ?, ?, ?, 'Seeded', 'user', ?, ?)`, p.id, s.org, p.handle, p.name, ts, ts); err != nil {
		return err
	}
	if err := insertSeedKey(tx, "band_u_", p.id, ts, true); err != nil {
		return err
	}
	s.people = append(s.people, p)
	for i := range agentsPerPerson {
		a := seedAgent{id: uuid.Must(uuid.NewV7()).String(), handle: fmt.Sprintf("%s/agent-%d", p.handle, i), name: fmt.Sprintf("Agent %d of %d", i, n)}
		if _, err := tx.Exec(`INSERT INTO agents (id, owner_id, organization_id, slug, handle, name, description, is_external, inserted_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, 'seeded for the scale bench', 1, ?, ?)`, a.id, p.id, s.org, fmt.Sprintf("agent-%d", i), a.handle, a.name, ts, ts); err != nil {
			return err
		}
		if err := insertSeedKey(tx, "band_a_", a.id, ts, false); err != nil {
			return err
		}
		s.agents = append(s.agents, a)
	}
	return nil
}

func insertSeedKey(tx *sql.Tx, prefix, owner string, ts int64, person bool) error {
	key := seedKey(prefix, owner)
	digest := sha256.Sum256([]byte(key))
	userID, agentID := sql.NullString{String: owner, Valid: person}, sql.NullString{String: owner, Valid: !person}
	_, err := tx.Exec(`INSERT INTO api_keys (id, digest, prefix, user_id, agent_id, inserted_at) VALUES (?, ?, ?, ?, ?, ?)`,
		uuid.Must(uuid.NewV7()).String(), digest[:], key[:12], userID, agentID, ts)
	return err
}

// addRoom adds a room of the newest person's (a new person every ten
// rooms) with its participants, n messages and the owner's read marker.
func (s *seeder) addRoom(tx *sql.Tx, st *seedStmts, n int) error {
	if len(s.rooms)%roomsPerPerson == 0 {
		if err := s.addPerson(tx); err != nil {
			return err
		}
	}
	owner := len(s.people) - 1
	first := owner*agentsPerPerson + len(s.rooms)%agentsPerPerson
	r := seedRoom{id: uuid.Must(uuid.NewV7()).String(), owner: owner, first: first,
		second: owner*agentsPerPerson + (len(s.rooms)+1)%agentsPerPerson}
	p := s.people[owner]
	ts := s.tick()
	if _, err := tx.Exec(`INSERT INTO rooms (id, organization_id, title, type, creator_id, creator_type, quota_owner_id, inserted_at, updated_at)
		VALUES (?, ?, ?, 'group', ?, 'User', ?, ?, ?)`, r.id, s.org, fmt.Sprintf("Room %d", len(s.rooms)), p.id, p.id, ts, ts); err != nil {
		return err
	}
	for _, m := range []struct{ id, role string }{{p.id, "owner"}, {s.agents[r.first].id, "member"}, {s.agents[r.second].id, "member"}} {
		userID, agentID := sql.NullString{String: m.id, Valid: m.role == "owner"}, sql.NullString{String: m.id, Valid: m.role != "owner"}
		if _, err := tx.Exec(`INSERT INTO participants (room_id, member_id, user_id, agent_id, role, inserted_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, r.id, m.id, userID, agentID, m.role, ts, ts); err != nil {
			return err
		}
	}
	var last int64
	for range n {
		seq, err := s.addMessage(tx, st, r)
		if err != nil {
			return err
		}
		last = seq
	}
	s.rooms = append(s.rooms, r)
	s.messages += n
	if _, err := tx.Exec(`UPDATE rooms SET message_count = ?, last_message_at = ?, updated_at = ? WHERE id = ?`, n, s.clock, s.clock, r.id); err != nil {
		return err
	}
	_, err := tx.Exec(`INSERT INTO read_markers (user_id, room_id, last_read_seq) VALUES (?, ?, ?)`, p.id, r.id, last-int64(s.rng.IntN(4)))
	return err
}

var eventTypes = []string{"tool_call", "tool_result", "thought"}

// addMessage adds one message to room r: an event of one of its agents,
// or a text message mentioning one of them, with that agent's delivery.
func (s *seeder) addMessage(tx *sql.Tx, st *seedStmts, r seedRoom) (int64, error) {
	ts := s.tick()
	first, second := s.agents[r.first], s.agents[r.second]
	var seq int64
	if s.rng.IntN(5) == 0 {
		from := []seedAgent{first, second}[s.rng.IntN(2)]
		err := st.message.QueryRow(uuid.Must(uuid.NewV7()).String(), r.id, from.id, "Agent", from.name, eventTypes[s.rng.IntN(3)],
			s.words(), "[]", ts, ts).Scan(&seq)
		return seq, err
	}
	// A text message: the owner mentions one agent, or one agent the other.
	senderID, senderType, senderName, to := s.people[r.owner].id, "User", s.people[r.owner].name, []seedAgent{first, second}[s.rng.IntN(2)]
	if who := s.rng.IntN(3); who > 0 {
		from := []seedAgent{first, second}[who-1]
		senderID, senderType, senderName, to = from.id, "Agent", from.name, []seedAgent{second, first}[who-1]
	}
	mentions, _ := json.Marshal([]map[string]string{{"id": to.id, "handle": to.handle, "name": to.name, "kind": "mention"}})
	if err := st.message.QueryRow(uuid.Must(uuid.NewV7()).String(), r.id, senderID, senderType, senderName, "text",
		"@"+to.handle+" "+s.words(), string(mentions), ts, ts).Scan(&seq); err != nil {
		return 0, err
	}
	if s.rng.IntN(20) == 0 {
		_, err := st.delivery.Exec(to.id, r.id, seq, "pending", 0, "[]", nil, ts)
		return seq, err
	}
	at := time.UnixMicro(ts).UTC().Format("2006-01-02T15:04:05.000000Z")
	attempts := `[{"attempt_number":1,"status":"processed","started_at":"` + at + `","completed_at":"` + at + `","error":null}]`
	_, err := st.delivery.Exec(to.id, r.id, seq, "processed", 1, attempts, ts, ts)
	return seq, err
}

// seedWords are what seeded messages say: common words, so the search
// index has the shape of real text (a few words everywhere, many rare).
var seedWords = strings.Fields(`the a to of and in is it for that on with this be as at by from or an
	not we can will are was have has should run test build deploy server client request response error
	message room agent delivery queue writer commit index table query page cursor token key file path
	log line function handler route status retry timeout socket frame push webhook endpoint schema
	migration backup restore check value field list count limit offset order time date user person
	config flag option default port address host memory cache disk cpu load latency throughput batch
	please look fix update review merge branch release version issue bug patch change done next later
	why how what when where which because so then also still only just again first last new old`)

// words is a message's text: 8 to 40 words, with now and then a number
// or an identifier, which makes the rare terms of an index.
func (s *seeder) words() string {
	n := 8 + s.rng.IntN(33)
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		if s.rng.IntN(10) == 0 {
			fmt.Fprintf(&b, "item-%d", s.rng.IntN(1_000_000))
			continue
		}
		b.WriteString(seedWords[s.rng.IntN(len(seedWords))])
	}
	return b.String()
}
