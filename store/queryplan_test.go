package store

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// The paths every agent and person takes all day (a post, /next, the
// listings, the rooms with their unread counts) must cost the same in a
// database of ten thousand messages and of ten million: every statement
// they run reaches its rows through an index, never by reading a whole
// table. SQLite's planner has no statistics here (chatd runs no ANALYZE),
// so a plan depends on the schema and the SQL alone, and the plans seen on
// a small database are the plans of a large one.

// hotPathKit is a person, two agents and two rooms with some traffic in
// them, opened on the plan-recording driver.
type hotPathKit struct {
	db             *DB
	log            *planLog
	alice          Actor
	poster, worker Actor
	room, other    string
}

func newHotPathKit(t *testing.T) *hotPathKit {
	t.Helper()
	log := &planLog{}
	db := openTestDB(t, Options{driver: registerPlanDriver(log)})
	alice, _ := mustUser(t, db, "alice")
	poster, _ := mustAgent(t, db, alice, "Poster")
	worker, _ := mustAgent(t, db, alice, "Worker")
	k := &hotPathKit{db: db, log: log, alice: UserActor(alice), poster: AgentActor(poster), worker: AgentActor(worker)}
	k.room, k.other = k.newRoom(t), k.newRoom(t)
	for i := range 30 {
		k.post(t, k.poster, k.room, fmt.Sprintf("step %d of the plan", i))
		k.post(t, k.alice, k.other, fmt.Sprintf("question %d", i))
	}
	return k
}

func (k *hotPathKit) newRoom(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	room, err := k.db.CreateRoom(ctx, k.alice, NewRoom{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []Actor{k.poster, k.worker} {
		if _, err := k.db.AddParticipant(ctx, k.alice, room.ID, a.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	return room.ID
}

// post sends a text that mentions the worker.
func (k *hotPathKit) post(t *testing.T, from Actor, room, content string) *Message {
	t.Helper()
	m, err := k.db.SendText(context.Background(), from, room, TextInput{Content: content,
		Mentions: []MentionInput{{ID: &k.worker.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// hotPaths are what the kit's actors do all day, each a store call as the
// server makes it.
func (k *hotPathKit) hotPaths(t *testing.T) []struct {
	name string
	run  func() error
} {
	ctx := context.Background()
	second := func(list func(PageRequest) (*PageInfo, error)) error {
		info, err := list(PageRequest{Limit: 5})
		if err != nil || info.Next == nil {
			return err
		}
		_, err = list(PageRequest{Limit: 5, After: info.Next})
		return err
	}
	return []struct {
		name string
		run  func() error
	}{
		{"a person posts", func() error { k.post(t, k.alice, k.room, "and one more"); return nil }},
		{"an agent posts", func() error { k.post(t, k.poster, k.room, "done"); return nil }},
		{"/next", func() error { _, err := k.db.NextMessage(ctx, k.worker, k.room); return err }},
		{"the inbox", func() error { _, err := k.db.InboxNext(ctx, k.worker); return err }},
		{"a claim", func() error { _, err := k.db.ClaimMessage(ctx, k.worker, k.room); return err }},
		{"a claim in any room", func() error { _, err := k.db.ClaimMessage(ctx, k.worker, ""); return err }},
		{"processing, then processed", func() error {
			m, err := k.db.NextMessage(ctx, k.worker, k.other)
			if err != nil || m == nil {
				return fmt.Errorf("nothing next: %v", err)
			}
			if _, err := k.db.MarkProcessing(ctx, k.worker, k.other, m.ID); err != nil {
				return err
			}
			_, err = k.db.MarkProcessed(ctx, k.worker, k.other, m.ID)
			return err
		}},
		{"an agent's inbox listing", func() error {
			return second(func(pr PageRequest) (*PageInfo, error) {
				p, err := k.db.ListInbox(ctx, k.worker, pr)
				return pageInfo(p, err)
			})
		}},
		{"an agent's messages, by each status", func() error {
			for _, status := range append([]string{""}, DeliveryStatuses...) {
				err := second(func(pr PageRequest) (*PageInfo, error) {
					p, err := k.db.ListDeliveries(ctx, k.worker, k.room, status, false, pr)
					return pageInfo(p, err)
				})
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{"an agent's context", func() error {
			return second(func(pr PageRequest) (*PageInfo, error) {
				p, err := k.db.ListContext(ctx, k.worker, k.room, pr)
				return pageInfo(p, err)
			})
		}},
		{"a person's history", func() error {
			return second(func(pr PageRequest) (*PageInfo, error) {
				p, err := k.db.ListHistory(ctx, k.alice, k.room, HistoryFilter{}, pr)
				return pageInfo(p, err)
			})
		}},
		{"a person's rooms, with unread counts", func() error {
			p, err := k.db.ListRooms(ctx, k.alice, RoomFilter{Descending: true}, PageRequest{Limit: 1})
			if err != nil {
				return err
			}
			_, err = k.db.ListRooms(ctx, k.alice, RoomFilter{Descending: true}, PageRequest{Limit: 1, After: p.Next})
			return err
		}},
	}
}

func pageInfo[T any](p *Page[T], err error) (*PageInfo, error) {
	if err != nil {
		return nil, err
	}
	return &p.PageInfo, nil
}

// boundedSorts are the sorts the hot paths may make, each of a set that
// the database's size does not grow: a statement whose text holds the key
// may sort its rows in a temporary tree.
var boundedSorts = map[string]string{
	"FROM participants p LEFT JOIN users u":     "a room's participants, as many as a room may hold",
	"FROM reactions WHERE message_seq IN":       "the reactions of one page's messages",
	"deliveries d INDEXED BY deliveries_open":   "an agent's open deliveries across its rooms: its backlog",
	"ORDER BY r.inserted_at DESC, r.id DESC":    "the person's own rooms",
	"ORDER BY r.updated_at DESC, r.id DESC":     "the person's own rooms",
	"ORDER BY r.inserted_at ASC, r.id ASC":      "the person's own rooms",
	"INSERT INTO messages_fts (rowid, content)": "the messages queued for the index since its last write (indexEvery)",
}

// openWork is the condition of a delivery not yet processed: a statement
// that says it must read the index of open deliveries, which the planner
// would otherwise pass over for the primary key (see openDeliveries).
const openWork = "d.status != 'processed'"

// boundedScans are the tables the hot paths may read whole.
var boundedScans = map[string]string{
	"SCAN q":                  "messages_fts_queue, emptied by every index write: it holds the messages of the last indexEvery",
	"SCAN messages_fts_queue": "EXISTS: the first row at most, whether anything waits for the index",
	"SCAN unread":             "the co-routine of unreadSQL, bounded by its LIMIT",
}

// unbound returns why a plan step is not bound by an index, or "".
func unbound(query, step string) string {
	step = strings.TrimSpace(step)
	switch {
	case strings.HasPrefix(step, "SCAN "):
		if strings.HasPrefix(step, "SCAN (subquery") || strings.HasPrefix(step, "SCAN CONSTANT ROW") ||
			strings.Contains(step, "VIRTUAL TABLE") || boundedScans[step] != "" {
			return ""
		}
		return "reads a whole table or index"
	case strings.Contains(step, "TEMP B-TREE"):
		for key := range boundedSorts {
			if strings.Contains(oneLine(query), key) {
				return ""
			}
		}
		return "sorts a set whose size is not bounded"
	case strings.HasPrefix(step, "EXPLAIN failed"):
		return "could not be explained"
	}
	return ""
}

func TestHotPathsAreIndexBound(t *testing.T) {
	sqliteOnly(t)
	k := newHotPathKit(t)
	for _, path := range k.hotPaths(t) {
		t.Run(path.name, func(t *testing.T) {
			k.log.start()
			err := path.run()
			order, plans := k.log.stop()
			if err != nil {
				t.Fatal(err)
			}
			if len(order) == 0 {
				t.Fatal("no statement was recorded")
			}
			for _, query := range order {
				if strings.Contains(query, openWork) && !strings.Contains(strings.Join(plans[query], "\n"), "INDEX deliveries_open") {
					t.Errorf("open deliveries not read through their index:\n%s\n  %s", oneLine(query), strings.Join(plans[query], "\n  "))
				}
				for _, step := range plans[query] {
					if why := unbound(query, step); why != "" {
						t.Errorf("%s: %s\n%s\n  %s", step, why, oneLine(query), strings.Join(plans[query], "\n  "))
					}
				}
			}
		})
	}
}

var spaces = regexp.MustCompile(`\s+`)

func oneLine(query string) string { return spaces.ReplaceAllString(strings.TrimSpace(query), " ") }
