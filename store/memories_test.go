package store

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// memorySearch quotes every word, so no input is an FTS5 syntax error; the
// HTTP tests run odd inputs through the real query.
func TestMemorySearch(t *testing.T) {
	for _, tc := range []struct{ in, want, problem string }{
		{in: "hello", want: `"hello"`},
		{in: "  hello   world ", want: `"hello" "world"`},
		{in: `say "hi"`, want: `"say" """hi"""`},
		{in: `a OR b`, want: `"a" "OR" "b"`},
		{in: `NEAR(a b)`, want: `"NEAR(a" "b)"`},
		{in: `col:x -y ^z`, want: `"col:x" "-y" "^z"`},
		{in: `prefix*`, want: `"prefix"*`},
		{in: `pre**`, want: `"pre"*`},
		{in: `*`, want: `"*"`},
		{in: "a\x00b\tc", want: `"a" "b" "c"`},
		{in: "", problem: "must contain at least one word"},
		{in: " \t\n", problem: "must contain at least one word"},
		{in: "\x00", problem: "must contain at least one word"},
		{in: "\xff", problem: "must be valid UTF-8"},
		{in: strings.Repeat("a", maxMemorySearchLen+1), problem: "must be at most 1000 characters long"},
		{in: strings.Repeat("a ", maxMemorySearchTokens+1), problem: "must contain at most 32 words"},
	} {
		got, problem := fts5Query(memorySearchTerms, tc.in)
		if got != tc.want || problem != tc.problem {
			t.Errorf("fts5Query(memorySearchTerms, %q) = %q, %q; want %q, %q", tc.in, got, problem, tc.want, tc.problem)
		}
	}
}

func TestMemoryMetadataIsStoredCanonically(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{in: ``, want: `NULL`},
		{in: `null`, want: `NULL`},
		{in: `{}`, want: `{}`},
		{in: `{"tags":null}`, want: `{}`},
		{in: `{"tags":[" a ","b"],"references":[]}`, want: `{"tags":["a","b"]}`},
		{in: `{"references":["0190f0f0-0000-7000-8000-000000000000"]}`, want: `{"references":["0190f0f0-0000-7000-8000-000000000000"]}`},
	} {
		p := Problems{}
		got := checkMemoryMetadata(json.RawMessage(tc.in), "/memory/metadata", p)
		s := "NULL"
		if got.Valid {
			s = got.String
		}
		if s != tc.want || len(p) > 0 {
			t.Errorf("metadata %s stored as %s (problems %v), want %s", tc.in, s, p, tc.want)
		}
	}
}

// mustMemory stores a fact by agent by, with scope and subject unless they
// are "", and returns its id.
func mustMemory(t *testing.T, db *DB, by *Agent, scope, subject string) string {
	t.Helper()
	str := func(s string) *string { return &s }
	nm := NewMemory{Content: str("a fact"), System: str("long_term"), Type: str("semantic"), Segment: str("user"),
		Thought: str("worth keeping")}
	if scope != "" {
		nm.Scope = str(scope)
	}
	if subject != "" {
		nm.SubjectID = str(subject)
	}
	m, err := db.CreateMemory(context.Background(), AgentActor(by), nm)
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// Deleting an agent deletes the memories it stored (and their search
// entries); the memories others stored about it stay.
func TestDeleteAgentMemories(t *testing.T) {
	db := openTestDB(t, Options{})
	alice, _ := mustUser(t, db, "alice")
	gone, _ := mustAgent(t, db, alice, "Gone")
	kept, _ := mustAgent(t, db, alice, "Kept")
	mustMemory(t, db, gone, "", alice.ID)
	mustMemory(t, db, gone, "", gone.ID)
	mustMemory(t, db, kept, "", gone.ID)
	if err := db.Write(context.Background(), func(tx *Tx) error { return deleteAgentMemories(tx, gone.ID) }); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM memories WHERE source_agent_id = ?`, gone.ID); n != 0 {
		t.Errorf("%d memories of the deleted agent remain", n)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM memories WHERE source_agent_id = ?`, kept.ID); n != 1 {
		t.Errorf("%d memories of the other agent remain, want 1", n)
	}
	if n := memorySearchEntries(t, db); n != 1 {
		t.Errorf("%d search entries remain, want 1", n)
	}
}

// memorySearchEntries counts the memories' entries in the search index:
// FTS5's table beside them, or their own search column.
func memorySearchEntries(t *testing.T, db *DB) int {
	t.Helper()
	if db.dialect.search.queued {
		return rawCount(t, db, `SELECT count(*) FROM memories_fts_docsize`)
	}
	return rawCount(t, db, `SELECT count(*) FROM memories WHERE search IS NOT NULL`)
}

// namedMemories stores memories by and about alice's agents and people,
// writes by hand the states the API never makes (see TestMemoryNames),
// and returns by memory id the source agent and subject each must name.
func namedMemories(t *testing.T, db *DB, alice, carol *User) map[string][2]string {
	t.Helper()
	scout, _ := mustAgent(t, db, alice, "Scout")
	helper, _ := mustAgent(t, db, alice, "Helper")
	gone, _ := mustAgent(t, db, alice, "Gone")
	foreign, _ := mustAgent(t, db, carol, "Spy")
	aboutAlice := mustMemory(t, db, scout, "subject", alice.ID)
	aboutHelper := mustMemory(t, db, scout, "subject", helper.ID)
	orgWide := mustMemory(t, db, scout, "organization", "")
	aboutGone := mustMemory(t, db, helper, "subject", gone.ID)
	byGone := mustMemory(t, db, gone, "organization", "")
	aboutForeignUser := mustMemory(t, db, scout, "subject", alice.ID)
	aboutForeignAgent := mustMemory(t, db, scout, "subject", alice.ID)
	byForeign := mustMemory(t, db, helper, "organization", "")
	// gone is deleted as the API never does it, keeping its memories; the
	// others are pointed at carol and her agent.
	rawExec(t, db, `UPDATE agents SET deleted_at = updated_at WHERE id = ?`, gone.ID)
	rawExec(t, db, `UPDATE memories SET subject_id = ? WHERE id = ?`, carol.ID, aboutForeignUser)
	rawExec(t, db, `UPDATE memories SET subject_id = ? WHERE id = ?`, foreign.ID, aboutForeignAgent)
	rawExec(t, db, `UPDATE memories SET source_agent_id = ? WHERE id = ?`, foreign.ID, byForeign)

	named := func(a *Agent) string { return "Agent " + a.ID + " " + a.Name + " @" + a.Handle }
	return map[string][2]string{
		aboutAlice:        {named(scout), "User " + alice.ID + " Alice Liddell @alice"},
		aboutHelper:       {named(scout), named(helper)},
		orgWide:           {named(scout), "nil"},
		aboutGone:         {named(helper), "nil"},
		byGone:            {"nil", "nil"},
		aboutForeignUser:  {named(scout), "nil"},
		aboutForeignAgent: {named(scout), "nil"},
		byForeign:         {"nil", "nil"},
	}
}

// A memory carries the names of its source agent and its subject, read in
// the same query: a person or a live agent of the memory's organization,
// nobody else. The API never stores a memory about someone of another
// organization, nor keeps the memories of a deleted agent; those states are
// written here by hand to show that, even then, no name of another
// organization and no deleted agent's name comes out.
func TestMemoryNames(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, _, err := db.CreateUser(ctx, NewUser{Handle: "alice", Name: "Alice Liddell"})
	if err != nil {
		t.Fatal(err)
	}
	carol, _, err := db.CreateUser(ctx, NewUser{Handle: "carol", Name: "Carol Foreign", Organization: "globex"})
	if err != nil {
		t.Fatal(err)
	}
	want := namedMemories(t, db, alice, carol)
	party := func(p *MemoryParty) string {
		if p == nil {
			return "nil"
		}
		return string(p.Type) + " " + p.ID + " " + p.Name + " @" + p.Handle
	}
	check := func(t *testing.T, m *Memory) {
		t.Helper()
		w, ok := want[m.ID]
		if !ok {
			return
		}
		if got := [2]string{party(m.SourceAgent), party(m.Subject)}; got != w {
			t.Errorf("%s: source agent and subject %q, want %q", m.ID, got, w)
		}
	}

	t.Run("listed", func(t *testing.T) {
		page, err := db.ListMemories(ctx, UserActor(alice), MemoryFilter{}, PageRequest{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != len(want) {
			t.Errorf("alice lists %d memories, want %d", len(page.Items), len(want))
		}
		for _, m := range page.Items {
			check(t, m)
		}
	})
	t.Run("read", func(t *testing.T) {
		for id := range want {
			m, err := db.Memory(ctx, UserActor(alice), id)
			if err != nil {
				t.Fatalf("read %s: %v", id, err)
			}
			check(t, m)
		}
	})
	t.Run("another organization sees none, names or not", func(t *testing.T) {
		page, err := db.ListMemories(ctx, UserActor(carol), MemoryFilter{}, PageRequest{Limit: 100})
		if err != nil || len(page.Items) != 0 {
			t.Errorf("carol lists %d memories (%v), want none", len(page.Items), err)
		}
	})
}

// A content query finds the memories whose content holds every word, in
// any case, with or without accents, a word ending in * as a prefix; a
// query of no word finds nothing, and one it cannot run is a problem at
// /content_query.
func TestMemoryContentQuery(t *testing.T) {
	db := openTestDB(t, Options{})
	alice, _ := mustUser(t, db, "alice")
	scout, _ := mustAgent(t, db, alice, "Scout")
	for _, content := range []string{"Alice drinks her Café au lait", "the deploy of mercury-7 failed", "she said «deploying» OR worse"} {
		str := func(s string) *string { return &s }
		nm := NewMemory{Content: str(content), System: str("long_term"), Type: str("semantic"), Segment: str("user"), Scope: str("organization"), Thought: str("noted")}
		if _, err := db.CreateMemory(context.Background(), AgentActor(scout), nm); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ q, want string }{
		{"cafe", "Alice drinks her Café au lait"},
		{"CAFÉ alice", "Alice drinks her Café au lait"},
		{"mercury-7", "the deploy of mercury-7 failed"},
		{"7 mercury", "the deploy of mercury-7 failed"},
		{"deploy*", "she said «deploying» OR worse|the deploy of mercury-7 failed"},
		{"deploy", "the deploy of mercury-7 failed"},
		{"OR", "she said «deploying» OR worse"},
		{"deploy OR", ""},
		{"*", ""},
		{"lait -", "Alice drinks her Café au lait"},
	} {
		q := c.q
		page, err := db.ListMemories(context.Background(), UserActor(alice), MemoryFilter{ContentQuery: &q}, PageRequest{Limit: 10})
		if err != nil {
			t.Fatalf("%q: %v", c.q, err)
		}
		var got []string
		for _, m := range page.Items {
			got = append(got, m.Content)
		}
		if strings.Join(got, "|") != c.want && !sameSet(strings.Join(got, "|"), c.want) {
			t.Errorf("%q found %q, want %q", c.q, strings.Join(got, "|"), c.want)
		}
	}
	q := "\xff"
	_, err := db.ListMemories(context.Background(), UserActor(alice), MemoryFilter{ContentQuery: &q}, PageRequest{Limit: 10})
	var e *Error
	if !asError(err, &e) || e.Code != CodeValidation || len(e.Details.(Problems)["/content_query"]) == 0 {
		t.Errorf("an invalid query: %v", err)
	}
}
