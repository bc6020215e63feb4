package store

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The bounds of a search query, so that one search stays cheap and its
// cursor short.
const (
	MaxSearchQueryLen   = 256 // characters
	maxSearchQueryTerms = 16
	minSearchPrefixLen  = 2 // letters or digits before a *
)

// SearchQueryProblem says what is wrong with a search query, or "" when
// it can be run.
func SearchQueryProblem(q string) string {
	_, problem := parseSearchQuery(q)
	return problem
}

// parseSearchQuery reads what someone typed in a small syntax of its own:
//
//   - words separated by spaces must all match (in any order, any case,
//     with or without accents);
//   - "a quoted phrase" matches those words one after another (an unclosed
//     quote runs to the end);
//   - a word or phrase ending in * matches as a prefix (deploy* finds
//     deploying), given at least two letters or digits before it.
//
// Each database's search is made from the terms it returns (fts5Match,
// postgresMatch), so the syntax and its problems are the same on both.
// Operators of the databases' own syntaxes (AND, OR, NOT, NEAR, column
// filters, parentheses, ^, +, &, |, !) are plain words and punctuation,
// which separates words as it does in the text. A term without a letter or
// digit (a lone -, *, or ") finds nothing and is left out. It returns the
// terms, or what is wrong with the input.
func parseSearchQuery(q string) ([]searchTerm, string) {
	switch {
	case !utf8.ValidString(q):
		return nil, "must be valid UTF-8"
	case utf8.RuneCountInString(q) > MaxSearchQueryLen:
		return nil, "must be at most " + strconv.Itoa(MaxSearchQueryLen) + " characters long"
	}
	// Control characters separate words in the text; in a query they would
	// end FTS5's string early (NUL) or mean nothing.
	q = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, q)
	var out []searchTerm
	for _, t := range searchTerms(q) {
		if !hasWordChar(t.text) {
			continue
		}
		if t.prefix && lastWordLen(t.text) < minSearchPrefixLen {
			return nil, "a prefix (a word ending in *) needs at least " + strconv.Itoa(minSearchPrefixLen) + " letters or digits"
		}
		out = append(out, t)
	}
	switch {
	case len(out) == 0:
		return nil, "must contain a word to search for (a letter or a digit)"
	case len(out) > maxSearchQueryTerms:
		return nil, "must contain at most " + strconv.Itoa(maxSearchQueryTerms) + " words or phrases"
	}
	return out, ""
}

// fts5Match is the FTS5 query of terms: every term a quoted string, so
// that nothing in it is FTS5 syntax, all of which must match.
func fts5Match(terms []searchTerm) string {
	phrases := make([]string, len(terms))
	for i, t := range terms {
		phrases[i] = `"` + strings.ReplaceAll(t.text, `"`, `""`) + `"`
		if t.prefix {
			phrases[i] += "*"
		}
	}
	return strings.Join(phrases, " ")
}

// searchTerm is one word or quoted phrase of a query.
type searchTerm struct {
	text   string
	prefix bool
}

// searchTerms splits a query into words and quoted phrases.
func searchTerms(q string) []searchTerm {
	var terms []searchTerm
	rest := q
	for {
		rest = strings.TrimLeftFunc(rest, isSearchSpace)
		if rest == "" {
			return terms
		}
		var t searchTerm
		if rest[0] == '"' {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				t.text, rest = rest[1:], ""
			} else {
				t.text, rest = rest[1:1+end], rest[2+end:]
			}
			if strings.HasPrefix(rest, "*") {
				t.prefix, rest = true, rest[1:]
			}
		} else {
			end := strings.IndexFunc(rest, func(r rune) bool { return isSearchSpace(r) || r == '"' })
			if end < 0 {
				end = len(rest)
			}
			t.text, rest = rest[:end], rest[end:]
			if trimmed := strings.TrimRight(t.text, "*"); trimmed != t.text {
				t.text, t.prefix = trimmed, true
			}
		}
		terms = append(terms, t)
	}
}

func isSearchSpace(r rune) bool { return unicode.IsSpace(r) }

// isWordChar is what the index's tokenizer (unicode61) keeps of a text:
// letters and digits; the rest separates words.
func isWordChar(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

func hasWordChar(s string) bool { return strings.IndexFunc(s, isWordChar) >= 0 }

// lastWordLen is the length in characters of the last word of s, the one
// a * makes a prefix of.
func lastWordLen(s string) int {
	words := strings.FieldsFunc(s, func(r rune) bool { return !isWordChar(r) })
	if len(words) == 0 {
		return 0
	}
	return utf8.RuneCountInString(words[len(words)-1])
}
