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
		got, problem := memorySearch(tc.in)
		if got != tc.want || problem != tc.problem {
			t.Errorf("memorySearch(%q) = %q, %q; want %q, %q", tc.in, got, problem, tc.want, tc.problem)
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

// Deleting an agent deletes the memories it stored (and their search
// entries); the memories others stored about it stay.
func TestDeleteAgentMemories(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, _, err := db.CreateUser(ctx, NewUser{Handle: "alice", Name: "Alice"})
	if err != nil {
		t.Fatal(err)
	}
	agent := func(name string) *Agent {
		a, _, err := db.RegisterAgent(ctx, NewAgent{OwnerID: alice.ID, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	gone, kept := agent("Gone"), agent("Kept")
	str := func(s string) *string { return &s }
	store := func(by *Agent, subject string) {
		_, err := db.CreateMemory(ctx, AgentActor(by), NewMemory{Content: str("a fact"), System: str("long_term"), Type: str("semantic"),
			Segment: str("user"), Thought: str("worth keeping"), SubjectID: str(subject)})
		if err != nil {
			t.Fatal(err)
		}
	}
	store(gone, alice.ID)
	store(gone, gone.ID)
	store(kept, gone.ID)
	if err := db.Write(ctx, func(tx *Tx) error { return deleteAgentMemories(tx, gone.ID) }); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM memories WHERE source_agent_id = ?`, gone.ID); n != 0 {
		t.Errorf("%d memories of the deleted agent remain", n)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM memories WHERE source_agent_id = ?`, kept.ID); n != 1 {
		t.Errorf("%d memories of the other agent remain, want 1", n)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM memories_fts_docsize`); n != 1 {
		t.Errorf("%d search entries remain, want 1", n)
	}
}
