package store

import (
	"database/sql"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSearchQuery: whatever is typed, parseSearchQuery refuses it with a reason
// or makes an FTS5 query that FTS5 runs (never a syntax error) with at most
// 16 quoted phrases, each a "..." string whose inner quotes are doubled,
// optionally a prefix. A valid query of letters alone always runs.
func FuzzSearchQuery(f *testing.F) {
	for _, seed := range []string{`deploy`, `"deploy failed" mercury*`, `"`, `*`, `-`, `NEAR(`, `AND OR NOT`, `a"b`,
		`content:x`, "\x00", "\xff", `""*`, `"de"*`, `東京`, `café`, `(x) ^y +z`, strings.Repeat("a ", 20)} {
		f.Add(seed)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		f.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	f.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE VIRTUAL TABLE t USING fts5 (content, tokenize = 'unicode61 remove_diacritics 2');
		INSERT INTO t VALUES ('the deploy failed: NEAR café, 東京 a"b');`); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, q string) {
		match, problem := fts5Query(parseSearchQuery, q)
		if (match == "") == (problem == "") {
			t.Fatalf("fts5Query(parseSearchQuery, %q) = %q, %q: want exactly one", q, match, problem)
		}
		if problem != "" {
			if utf8.ValidString(q) && utf8.RuneCountInString(q) <= MaxSearchQueryLen && strings.Count(q, " ") < maxSearchQueryTerms &&
				strings.IndexFunc(q, func(r rune) bool { return !('a' <= r && r <= 'z' || r == ' ') }) < 0 && strings.TrimSpace(q) != "" {
				t.Fatalf("fts5Query(parseSearchQuery, %q) refused a query of plain words: %s", q, problem)
			}
			return
		}
		if n := len(quotedPhrases(t, match)); n == 0 || n > maxSearchQueryTerms {
			t.Fatalf("fts5Query(parseSearchQuery, %q) = %q: %d phrases", q, match, n)
		}
		var found int
		if err := db.QueryRow(`SELECT count(*) FROM t WHERE t MATCH ?`, match).Scan(&found); err != nil {
			t.Fatalf("fts5Query(parseSearchQuery, %q) = %q, which FTS5 refuses: %v", q, match, err)
		}
	})
}

// quotedPhrases splits an FTS5 query made of quoted strings (each perhaps
// followed by *) separated by single spaces, and fails the test if it is
// not one.
func quotedPhrases(t *testing.T, match string) []string {
	var phrases []string
	for rest := match; rest != ""; {
		if rest[0] != '"' {
			t.Fatalf("%q: %q does not start with a quote", match, rest)
		}
		i := 1
		for {
			j := strings.IndexByte(rest[i:], '"')
			if j < 0 {
				t.Fatalf("%q: an unterminated string", match)
			}
			i += j + 1
			if i < len(rest) && rest[i] == '"' { // a doubled quote inside
				i++
				continue
			}
			break
		}
		phrases = append(phrases, rest[:i])
		rest = strings.TrimPrefix(rest[i:], "*")
		if rest != "" && !strings.HasPrefix(rest, ` "`) {
			t.Fatalf("%q: %q does not separate phrases with one space", match, rest)
		}
		rest = strings.TrimPrefix(rest, " ")
	}
	return phrases
}
