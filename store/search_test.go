package store

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// searchKit is a person (alice) in a room with her agent helper and a
// second agent, scout; each test posts what it searches for.
type searchKit struct {
	db            *DB
	alice         Actor
	helper, scout Actor
	room          string
}

func newSearchKit(t testing.TB, opts Options) *searchKit {
	t.Helper()
	db := openTestDB(t, opts)
	alice, _ := mustUser(t, db, "alice")
	helper, _ := mustAgent(t, db, alice, "Helper")
	scout, _ := mustAgent(t, db, alice, "Scout")
	k := &searchKit{db: db, alice: UserActor(alice), helper: AgentActor(helper), scout: AgentActor(scout)}
	k.room = k.newRoom(t)
	return k
}

// newRoom is a room of alice's with helper and scout in it.
func (k *searchKit) newRoom(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	room, err := k.db.CreateRoom(ctx, k.alice, NewRoom{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []Actor{k.helper, k.scout} {
		if _, err := k.db.AddParticipant(ctx, k.alice, room.ID, a.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	return room.ID
}

// say posts a text message from alice to helper in room.
func (k *searchKit) say(t testing.TB, room, content string) *Message {
	t.Helper()
	id := k.helper.ID
	m, err := k.db.SendText(context.Background(), k.alice, room, TextInput{Content: content, Mentions: []MentionInput{{ID: &id}}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// found is the contents of what q finds for actor, most relevant first,
// "|" between them.
func (k *searchKit) found(t testing.TB, actor Actor, q string) string {
	t.Helper()
	page, err := k.db.Search(context.Background(), actor, SearchFilter{Query: q}, PageRequest{Limit: 100})
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	var out []string
	for _, h := range page.Items {
		out = append(out, strings.TrimPrefix(h.Content, "@alice/helper "))
	}
	return strings.Join(out, "|")
}

// indexIntact indexes what is queued, as a search would, and fails the test
// unless the index then holds exactly the messages, none left in its queue:
// FTS5's integrity check, with rank 1, also compares the index with its
// content (messages). Where the database keeps the index itself (a
// generated column), every message's entry must be its content's words.
func indexIntact(t testing.TB, db *DB) {
	t.Helper()
	if !db.dialect.search.queued {
		stale := rawCount(t, db, `SELECT count(*) FROM messages WHERE search IS DISTINCT FROM to_tsvector('simple', chatd_search_words(content))`)
		if stale != 0 {
			t.Fatalf("%d messages' search entries are out of step with their content", stale)
		}
		return
	}
	if err := db.flushIndex(context.Background(), db.Write); err != nil {
		t.Fatal(err)
	}
	err := db.Write(context.Background(), func(tx *Tx) error {
		_, err := tx.Exec(`INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)`)
		return err
	})
	if err != nil {
		t.Fatalf("the search index is out of step with the messages: %v", err)
	}
	indexed := rawCount(t, db, `SELECT count(*) FROM messages_fts_docsize`)
	all := rawCount(t, db, `SELECT count(*) FROM messages`)
	queued := rawCount(t, db, `SELECT count(*) FROM messages_fts_queue`)
	if indexed != all || queued != 0 {
		t.Fatalf("the index holds %d messages of %d, and %d wait in its queue after a flush", indexed, all, queued)
	}
}

// The index follows every way a message comes, changes or goes, in the
// same write: posting (text and events), a message deleted outright (as
// retention will), and a content changed (as an edit or a tombstone will);
// a room's deletion, alone or in a bulk job, keeps its messages from
// being found.
// fts5Query is the FTS5 query made of what someone typed, as parse reads
// it (parseSearchQuery, memorySearchTerms), or what is wrong with it.
func fts5Query(parse func(string) ([]searchTerm, string), typed string) (string, string) {
	terms, problem := parse(typed)
	if problem != "" {
		return "", problem
	}
	return fts5Match(terms), ""
}

func TestSearchIndexStaysInStepWithTheMessages(t *testing.T) {
	k := newSearchKit(t, Options{})
	ctx := context.Background()
	k.say(t, k.room, "the deploy of mercury failed")
	if _, err := k.db.PostEvent(ctx, k.helper, k.room, EventInput{Type: "thought", Content: "checking mercury logs"}); err != nil {
		t.Fatal(err)
	}
	other := k.newRoom(t)
	k.say(t, other, "mercury in the other room")
	third := k.newRoom(t)
	k.say(t, third, "mercury in the third room")
	indexIntact(t, k.db)
	if got := k.found(t, k.alice, "mercury"); strings.Count(got, "|") != 3 {
		t.Fatalf("before any deletion: %q", got)
	}

	t.Run("a deleted room's messages are found no more", func(t *testing.T) {
		if err := k.db.DeleteRoom(ctx, k.alice, other); err != nil {
			t.Fatal(err)
		}
		indexIntact(t, k.db)
		if got := k.found(t, k.alice, "other"); got != "" {
			t.Fatalf("a deleted room's message is found: %q", got)
		}
	})
	t.Run("nor are those of a room a bulk job deleted", func(t *testing.T) {
		alice, _ := k.db.UserByID(ctx, k.alice.ID)
		if _, err := k.db.CreateBulkJob(ctx, alice, "chat", []string{third}, false); err != nil {
			t.Fatal(err)
		}
		k.db.StartBulkWorker()
		defer k.db.StopBulkWorker()
		waitFor(t, "the bulk deletion", func() bool { return k.found(t, k.alice, "third") == "" })
		indexIntact(t, k.db)
	})
	t.Run("an edited content is found by its new words only", func(t *testing.T) {
		m := k.say(t, k.room, "the venus release is ready")
		rawExec(t, k.db, `UPDATE messages SET content = 'the jupiter release is ready' WHERE seq = ?`, m.Seq)
		indexIntact(t, k.db)
		if k.found(t, k.alice, "venus") != "" || k.found(t, k.alice, "jupiter") == "" {
			t.Fatalf("after the edit: venus %q, jupiter %q", k.found(t, k.alice, "venus"), k.found(t, k.alice, "jupiter"))
		}
	})
	t.Run("a message deleted outright leaves the index", func(t *testing.T) {
		rawExec(t, k.db, `DELETE FROM deliveries WHERE room_id = ?`, k.room)
		rawExec(t, k.db, `DELETE FROM messages WHERE room_id = ? AND content LIKE '%jupiter%'`, k.room)
		indexIntact(t, k.db)
		if got := k.found(t, k.alice, "jupiter"); got != "" {
			t.Fatalf("a deleted message is found: %q", got)
		}
	})
	t.Run("messages of a deleted room deleted outright leave it intact", func(t *testing.T) {
		rawExec(t, k.db, `DELETE FROM deliveries WHERE room_id = ?`, other)
		rawExec(t, k.db, `DELETE FROM messages WHERE room_id = ?`, other)
		indexIntact(t, k.db)
	})
}

const nilID = "00000000-0000-7000-8000-000000000000"

// A page's snippets are made in one pass of the match, which FTS5 bounds to
// the page's range of rowids itself.
func TestSearchSnippetQueryIsBoundedByRowid(t *testing.T) {
	sqliteOnly(t)
	k := newSearchKit(t, Options{})
	var id, parent, unused int
	var detail string
	err := k.db.read.QueryRow(`EXPLAIN QUERY PLAN `+snippetQuery(2), "[", "]", 10, `"x"`, 1, 9, 1, 9).Scan(&id, &parent, &unused, &detail)
	if err != nil {
		t.Fatal(err)
	}
	// The index number's flags name the constraints FTS5 took: M for the
	// match, > and < for the rowid bounds.
	if !strings.HasPrefix(detail, "SCAN messages_fts VIRTUAL TABLE INDEX") || !strings.Contains(detail, "M1") ||
		!strings.Contains(detail, ">") || !strings.Contains(detail, "<") {
		t.Fatalf("the snippets' query: %s", detail)
	}
}

// The search is driven by the full-text index, and each candidate is
// checked by primary key and index lookups: no step scans a table.
func TestSearchQueryPlanUsesTheIndexes(t *testing.T) {
	sqliteOnly(t)
	k := newSearchKit(t, Options{})
	for _, c := range []struct {
		name  string
		actor Actor
		f     SearchFilter
	}{
		{"a person, every room", k.alice, SearchFilter{}},
		{"a person, one room, filtered", k.alice, SearchFilter{RoomID: k.room, SenderID: k.helper.ID, Type: "text"}},
		{"an agent, every room, newest first", k.helper, SearchFilter{Newest: true}},
		{"an agent, one room, most relevant first", k.helper, SearchFilter{RoomID: k.room, After: &time.Time{}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			query, args := searchQuery(c.actor, `"x"`, c.f, window{floor: 7, ceil: 1 << 40}, 21)
			rows, err := k.db.read.Query(`EXPLAIN QUERY PLAN `+query, args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			sorted := false // the outer query's matches, not a subquery's rows
			for rows.Next() {
				var id, parent, unused int
				var detail string
				rows.Scan(&id, &parent, &unused, &detail)
				plan = append(plan, detail)
				sorted = sorted || parent == 0 && strings.Contains(detail, "TEMP B-TREE FOR ORDER BY")
			}
			rows.Close()
			text := strings.Join(plan, "\n")
			t.Logf("plan:\n%s", text)
			if !strings.Contains(text, "SCAN messages_fts VIRTUAL TABLE INDEX") {
				t.Errorf("the full-text index does not drive the search:\n%s", text)
			}
			if !strings.Contains(text, "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)") {
				t.Errorf("a candidate's message is not read by its key:\n%s", text)
			}
			if sorted {
				t.Errorf("the matches are sorted rather than read in the index's order:\n%s", text)
			}
			for _, step := range plan {
				if strings.HasPrefix(step, "SCAN") && !strings.HasPrefix(step, "SCAN messages_fts VIRTUAL TABLE") {
					t.Errorf("a step scans a table: %s\n%s", step, text)
				}
			}
		})
	}
}

func TestSearchMatchQuotesEveryTerm(t *testing.T) {
	for _, c := range []struct{ in, want, problem string }{
		{in: "deploy", want: `"deploy"`},
		{in: "  Deploy   failed ", want: `"Deploy" "failed"`},
		{in: `"deploy failed" mercury`, want: `"deploy failed" "mercury"`},
		{in: `deploy*`, want: `"deploy"*`},
		{in: `"deploy fa"*`, want: `"deploy fa"*`},
		{in: `"unclosed phrase`, want: `"unclosed phrase"`},
		{in: `AND OR NOT`, want: `"AND" "OR" "NOT"`},
		{in: `NEAR(a b)`, want: `"NEAR(a" "b)"`},
		{in: `content:secret`, want: `"content:secret"`},
		{in: `-deploy ^start +x`, want: `"-deploy" "^start" "+x"`},
		{in: `say "hi"there`, want: `"say" "hi" "there"`},
		{in: `a"b`, want: `"a" "b"`},
		{in: `café`, want: `"café"`},
		{in: `東京 タワー`, want: `"東京" "タワー"`},
		{in: "tab\tand\nnewline", want: `"tab" "and" "newline"`},
		{in: `deploy - * " ()`, want: `"deploy"`},
		{in: `"`, problem: "must contain a word"},
		{in: `*`, problem: "must contain a word"},
		{in: ` - `, problem: "must contain a word"},
		{in: ``, problem: "must contain a word"},
		{in: `🚀`, problem: "must contain a word"},
		{in: `d*`, problem: "a prefix"},
		{in: `"deploy f"*`, problem: "a prefix"},
		{in: strings.Repeat("a ", 17), problem: "at most 16"},
		{in: strings.Repeat("a", MaxSearchQueryLen+1), problem: "at most 256 characters"},
		{in: "\xff", problem: "UTF-8"},
	} {
		got, problem := fts5Query(parseSearchQuery, c.in)
		if got != c.want || !strings.Contains(problem, c.problem) || (c.problem == "") != (problem == "") {
			t.Errorf("fts5Query(parseSearchQuery, %q) = %q, %q; want %q, %q", c.in, got, problem, c.want, c.problem)
		}
	}
}

// Whatever is typed, a search answers hits or a validation error at /q:
// never an FTS5 syntax error.
func TestSearchAnyQueryIsHitsOrAProblem(t *testing.T) {
	k := newSearchKit(t, Options{})
	k.say(t, k.room, `the "deploy" of mercury-7 failed: NEAR(x) AND café * 東京`)
	pieces := []string{`"`, `*`, `-`, `+`, `^`, `(`, `)`, `:`, `NEAR`, `NEAR(`, `AND`, `OR`, `NOT`, `deploy`, `mercury`, `7`,
		`café`, `東京`, ` `, "\t", "\x00", `'`, `\`, `{`, `}`, `content`, `rank`, `*"`, `"*`, "\u0301", "🚀", `a`, `ab`}
	rng := rand.New(rand.NewPCG(20, 1))
	for i := range 2000 {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		q := b.String()
		if i%7 == 0 { // and some random bytes
			raw := make([]byte, 1+rng.IntN(12))
			for j := range raw {
				raw[j] = byte(rng.IntN(256))
			}
			q = string(raw)
		}
		_, err := k.db.Search(context.Background(), k.alice, SearchFilter{Query: q, Newest: i%2 == 0}, PageRequest{Limit: 5})
		if err == nil {
			continue
		}
		var e *Error
		if !asError(err, &e) || e.Code != CodeValidation || e.Details == nil || len(e.Details.(Problems)["/q"]) == 0 {
			t.Fatalf("search %q (valid UTF-8: %v): %v", q, utf8.ValidString(q), err)
		}
	}
}

// The searches that find what a person expects: any case, accents or
// none, phrases, prefixes, words joined by punctuation.
func TestSearchFinds(t *testing.T) {
	k := newSearchKit(t, Options{})
	for _, s := range []string{"The Café opened", "deploying mercury-7 to staging", "staging deploy failed", "東京 タワー"} {
		k.say(t, k.room, s)
	}
	for _, c := range []struct{ q, want string }{
		{"cafe", "The Café opened"},
		{"CAFÉ", "The Café opened"},
		{"deploy*", "deploying mercury-7 to staging|staging deploy failed"},
		{`"staging deploy"`, "staging deploy failed"},
		{`"deploy staging"`, ""},
		{"mercury-7", "deploying mercury-7 to staging"},
		{"mercury 7", "deploying mercury-7 to staging"},
		{"staging failed", "staging deploy failed"},
		{"東京", "東京 タワー"},
		{"deplo", ""},
	} {
		got := k.found(t, k.alice, c.q)
		if got != c.want && !(strings.Contains(c.want, "|") && sameSet(got, c.want)) {
			t.Errorf("%q found %q, want %q", c.q, got, c.want)
		}
	}
}

func sameSet(a, b string) bool {
	as, bs := strings.Split(a, "|"), strings.Split(b, "|")
	if len(as) != len(bs) {
		return false
	}
	seen := map[string]int{}
	for _, s := range as {
		seen[s]++
	}
	for _, s := range bs {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// Snippets mark each match with « and », and the text's own « and » are
// changed so that every marker is one.
func TestSearchSnippetMarksMatches(t *testing.T) {
	k := newSearchKit(t, Options{})
	k.say(t, k.room, "he said «deploy now» and we deployed")
	long := strings.Repeat("filler ", 40) + "needle " + strings.Repeat("filler ", 40)
	k.say(t, k.room, long)
	for _, c := range []struct{ q, want string }{
		{"deploy*", "@alice/helper he said ‹«deploy» now› and we «deployed»"},
		{"needle", "…filler filler filler filler filler filler filler filler filler «needle» filler filler filler filler filler filler filler filler filler filler…"},
	} {
		page, err := k.db.Search(context.Background(), k.alice, SearchFilter{Query: c.q}, PageRequest{Limit: 5})
		if err != nil || len(page.Items) != 1 {
			t.Fatalf("%q: %v, %v", c.q, page, err)
		}
		if got := page.Items[0].Snippet; got != c.want {
			t.Errorf("%q: snippet %q\nwant %q", c.q, got, c.want)
		}
		if page.Items[0].Score <= 0 {
			t.Errorf("%q: score %v", c.q, page.Items[0].Score)
		}
	}
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*target = e
	}
	return ok
}

// A message is indexed as it is when the index is written: changed or
// deleted after it was queued (here by the same job of a group commit), or
// written by a job that failed, the index holds what was committed.
func TestSearchIndexesWhatWasCommitted(t *testing.T) {
	k := newSearchKit(t, Options{})
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan struct{})
	go k.db.Write(ctx, func(*Tx) error { close(started); <-release; return nil }) // holds the writer, so what follows shares a batch
	<-started
	var edited, deleted, failed error
	var wg sync.WaitGroup
	wg.Go(func() {
		edited = k.db.Write(ctx, func(tx *Tx) error {
			m, err := insertTestMessage(tx, k, "the saturn plan")
			if err == nil {
				_, err = tx.Exec(`UPDATE messages SET content = 'the neptune plan' WHERE seq = ?`, m)
			}
			return err
		})
	})
	wg.Go(func() {
		deleted = k.db.Write(ctx, func(tx *Tx) error {
			m, err := insertTestMessage(tx, k, "the pluto plan")
			if err == nil {
				_, err = tx.Exec(`DELETE FROM messages WHERE seq = ?`, m)
			}
			return err
		})
	})
	wg.Go(func() {
		failed = k.db.Write(ctx, func(tx *Tx) error {
			if _, err := insertTestMessage(tx, k, "the uranus plan"); err != nil {
				return err
			}
			return errors.New("refused after writing")
		})
	})
	time.Sleep(100 * time.Millisecond) // the three are queued behind the first
	close(release)
	wg.Wait()
	if edited != nil || deleted != nil || failed == nil {
		t.Fatalf("edited: %v, deleted: %v, failed: %v", edited, deleted, failed)
	}
	indexIntact(t, k.db)
	for word, want := range map[string]bool{"neptune": true, "saturn": false, "pluto": false, "uranus": false} {
		if found := k.found(t, k.alice, word) != ""; found != want {
			t.Errorf("%s found: %v, want %v", word, found, want)
		}
	}
}

// insertTestMessage writes a message in alice's room as a job would, and
// returns its seq.
func insertTestMessage(tx *Tx, k *searchKit, content string) (int64, error) {
	var seq int64
	err := tx.QueryRow(`INSERT INTO messages (id, room_id, sender_id, sender_type, sender_name, message_type, content, inserted_at, updated_at)
		VALUES (?, ?, ?, 'User', 'Alice', 'text', ?, 1, 1) RETURNING seq`, newID(), k.room, k.alice.ID, content).Scan(&seq)
	return seq, err
}

// By relevance, a search ranks the RelevanceWindow newest matches, on
// every page of it; newest first reaches every match.
func TestSearchRanksTheNewestMatchesByRelevance(t *testing.T) {
	k := newSearchKit(t, Options{})
	old := 5
	err := k.db.Write(context.Background(), func(tx *Tx) error {
		for i := range RelevanceWindow + old {
			content := "mercury once"
			if i < old {
				content = "mercury mercury mercury, the oldest and the best match"
			}
			if _, err := insertTestMessage(tx, k, content); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	walk := func(newest bool) (hits, best int) {
		pr := PageRequest{Limit: 100}
		for {
			page, err := k.db.Search(context.Background(), k.alice, SearchFilter{Query: "mercury", Newest: newest}, pr)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range page.Items {
				hits++
				if strings.Contains(h.Content, "best") {
					best++
				}
			}
			if !page.HasMore {
				return hits, best
			}
			pr.After = page.Next
		}
	}
	if hits, best := walk(false); hits != RelevanceWindow || best != 0 {
		t.Errorf("by relevance: %d hits, %d of the oldest; want the %d newest", hits, best, RelevanceWindow)
	}
	if hits, best := walk(true); hits != RelevanceWindow+old || best != old {
		t.Errorf("newest first: %d hits, %d of the oldest; want all %d", hits, best, RelevanceWindow+old)
	}
}

// Nobody needs to search for the index to catch up: the indexer writes
// what is queued within moments of its commit. (SQLite's FTS5 queue: on
// PostgreSQL each write indexes its messages.)
func TestSearchIndexCatchesUpWithoutASearch(t *testing.T) {
	sqliteOnly(t)
	k := newSearchKit(t, Options{})
	for i := range 5 {
		k.say(t, k.room, "venus report "+strconv.Itoa(i))
	}
	waitFor(t, "the indexer", func() bool {
		return rawCount(t, k.db, `SELECT count(*) FROM messages_fts_queue`) == 0 &&
			rawCount(t, k.db, `SELECT count(*) FROM messages_fts_docsize`) == rawCount(t, k.db, `SELECT count(*) FROM messages`)
	})
	indexIntact(t, k.db)
}

// Snippets cut in Go (PostgreSQL's) are those FTS5's snippet() cuts on
// SQLite: the same passage and the same marks, for words, phrases and
// prefixes found in the corpus's messages, long and short.
func TestSearchSnippetsAreCutAsFTS5CutsThem(t *testing.T) {
	fts, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer fts.Close()
	fts.SetMaxOpenConns(1)
	mustExec(t, fts, `CREATE VIRTUAL TABLE t USING fts5 (content, tokenize = 'unicode61 remove_diacritics 2')`)
	corpus := newSearchCorpus(t, 3)
	rng := rand.New(rand.NewPCG(3, 9))
	open, shut := "\uE000", "\uE001"
	marks := strings.NewReplacer("«", "‹", "»", "›", open, "«", shut, "»")
	compared, elided := 0, 0
	for i := range 400 {
		_, content := corpus.message()
		if i%3 == 0 {
			content += " " + corpus.sentence() + " «" + corpus.word() + "». " + corpus.sentence()
		}
		words := textWords(content)
		if len(words) < 2 {
			continue
		}
		at := rng.IntN(len(words) - 1)
		word, next := content[words[at].start:words[at].end], content[words[at+1].start:words[at+1].end]
		queries := []string{word, word + " " + next, `"` + word + " " + next + `"`, corpus.word() + " " + word}
		if utf8.RuneCountInString(word) > 3 {
			queries = append(queries, string([]rune(word)[:3])+"*")
		}
		for _, q := range queries {
			terms, problem := parseSearchQuery(q)
			if problem != "" {
				continue
			}
			if _, err := fts.Exec(`DELETE FROM t; INSERT INTO t (content) VALUES (?)`, content); err != nil {
				t.Fatal(err)
			}
			var want string
			err := fts.QueryRow(`SELECT snippet(t, 0, ?, ?, '…', ?) FROM t WHERE t MATCH ?`, open, shut, snippetTokens, fts5Match(terms)).Scan(&want)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				t.Fatalf("%q: %v", q, err)
			}
			compared++
			if strings.HasPrefix(want, "…") {
				elided++
			}
			if got := snippetOf(content, terms); got != marks.Replace(want) {
				t.Errorf("%q in %q:\n got %q\nwant %q", q, content, got, marks.Replace(want))
			}
		}
	}
	if compared < 1000 || elided < 100 {
		t.Fatalf("compared %d snippets, %d of them cut at the start: too few to tell", compared, elided)
	}
}
