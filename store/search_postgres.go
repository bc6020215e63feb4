package store

import (
	"cmp"
	"database/sql"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// PostgreSQL searches the search columns of messages and memories
// (schema_postgres.sql): the words of each content as chatd_search_words
// makes them (without accents, lowercased, every character but a letter or
// digit a space, as FTS5's unicode61 tokenizer splits a text), which the
// database keeps in step in every write: there is no queue to index. A
// query's terms go through the same function, so a word matches in a query
// as it does in the text. Snippets are cut here as FTS5's snippet() cuts
// them: ts_headline would split the text into words otherwise than the
// search column does, and mark other words.
var postgresSearch = searchEngine{
	match:         postgresMatch,
	hits:          postgresHits,
	snippets:      postgresSnippets,
	memoryMatches: `m.search @@ CAST(? AS tsquery)`,
}

// postgresMatch is the tsquery of terms, as text: each term's words one
// after another (<->), the last a prefix (:*) if the term is one, and every
// term required (&). A term in which the database finds no word is left
// out; with none left the tsquery is empty, and matches nothing.
func postgresMatch(row rowReader, terms []searchTerm) (string, error) {
	texts, suffixes := make([]string, len(terms)), make([]string, len(terms))
	for i, t := range terms {
		texts[i] = t.text
		if t.prefix {
			suffixes[i] = ":*"
		}
	}
	var match sql.NullString
	err := row(`SELECT string_agg('(' || p.phrase::text || p.suffix || ')', ' & ' ORDER BY p.n)
		FROM (SELECT phraseto_tsquery('simple', chatd_search_words(u.term)) AS phrase, u.suffix, u.n
			FROM unnest(CAST(? AS TEXT[]), CAST(? AS TEXT[])) WITH ORDINALITY AS u(term, suffix, n)) p
		WHERE p.phrase::text <> ''`, texts, suffixes).Scan(&match)
	return match.String, err
}

// postgresHits is the query of up to limit matches within w, newest first,
// each with its rank, -ts_rank. The GIN index finds the matches; each is
// then checked against the actor's rooms and the filters.
func postgresHits(actor Actor, match string, f SearchFilter, w window, limit int) (string, []any) {
	conds, args := searchConditions(actor, f)
	conds, args = w.bounds("m.seq", conds, args)
	return `SELECT m.seq, -CAST(ts_rank(m.search, CAST(? AS tsquery)) AS DOUBLE PRECISION) FROM messages m
		WHERE m.search @@ CAST(? AS tsquery) AND ` + strings.Join(conds, " AND ") + ` ORDER BY m.seq DESC LIMIT ?`,
		append(append([]any{match, match}, args...), limit)
}

// postgresSnippets sets each hit's snippet, cut from its content, and its
// score, the rank the search read.
func postgresSnippets(_ queryer, _ string, terms []searchTerm, hits []*SearchHit) error {
	for _, h := range hits {
		h.Snippet, h.Score = snippetOf(h.Content, terms), -h.rank
	}
	return nil
}

// textWord is a word of a text: where it is, and its folded form (what a
// query's word must equal to match it).
type textWord struct {
	start, end int
	folded     string
}

// textWords splits s into words as the index does: letters and digits.
func textWords(s string) []textWord {
	var words []textWord
	start := -1
	for i, r := range s {
		switch {
		case isWordChar(r) && start < 0:
			start = i
		case !isWordChar(r) && start >= 0:
			words = append(words, textWord{start, i, foldWord(s[start:i])})
			start = -1
		}
	}
	if start >= 0 {
		words = append(words, textWord{start, len(s), foldWord(s[start:])})
	}
	return words
}

// foldWord is w without its accents, lowercased.
func foldWord(w string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(w) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// phraseAt is where one term (a phrase of size words) matches in a text.
type phraseAt struct{ phrase, pos, size int }

// phrasesIn is every place where a term matches words, in the order of the
// text.
func phrasesIn(words []textWord, terms []searchTerm) []phraseAt {
	var found []phraseAt
	for p, t := range terms {
		want := textWords(t.text)
		for i := 0; len(want) > 0 && i+len(want) <= len(words); i++ {
			if phraseMatches(words[i:i+len(want)], want, t.prefix) {
				found = append(found, phraseAt{p, i, len(want)})
			}
		}
	}
	slices.SortFunc(found, func(a, b phraseAt) int { return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.phrase, b.phrase)) })
	return found
}

func phraseMatches(words, want []textWord, prefix bool) bool {
	last := len(want) - 1
	for i, w := range want {
		if words[i].folded != w.folded && !(i == last && prefix && strings.HasPrefix(words[i].folded, w.folded)) {
			return false
		}
	}
	return true
}

// snippetOf is the passage of text that FTS5's snippet() would choose, as
// attachSnippets marks it: the snippetTokens words with the most distinct
// terms (a passage that starts a sentence preferred), each match between «
// and », the text's own « and » read as ‹ and ›, "…" where text is left out.
func snippetOf(text string, terms []searchTerm) string {
	words := textWords(text)
	found := phrasesIn(words, terms)
	start := snippetStart(text, words, found, len(terms))
	return markSnippet(text, words, found, start, start+snippetTokens-1)
}

// snippetStart is the first word of the best passage (fts5SnippetFunction).
func snippetStart(text string, words []textWord, found []phraseAt, phrases int) int {
	firsts := sentenceStarts(text, words)
	best, bestStart := 0, 0
	for _, f := range found {
		score, first, last := snippetScore(found, phrases, f.pos)
		if score > best {
			adj := first - (snippetTokens-(last-first))/2
			adj = max(min(adj, len(words)-snippetTokens), 0)
			best, bestStart = score, adj
		}
		if len(words) <= snippetTokens {
			continue
		}
		j := 0
		for j < len(firsts)-1 && firsts[j+1] <= f.pos {
			j++
		}
		if firsts[j] < f.pos {
			score, _, _ := snippetScore(found, phrases, firsts[j])
			score += 100
			if firsts[j] == 0 {
				score += 20
			}
			if score > best {
				best, bestStart = score, firsts[j]
			}
		}
	}
	return bestStart
}

// snippetScore scores the passage of snippetTokens words from pos: 1000
// for each term found in it, 1 for each repeat (fts5SnippetScore), with the
// first matched word and the word after the last match.
func snippetScore(found []phraseAt, phrases, pos int) (score, first, last int) {
	seen := make([]bool, phrases)
	first = -1
	for _, f := range found {
		if f.pos < pos || f.pos >= pos+snippetTokens {
			continue
		}
		if seen[f.phrase] {
			score++
		} else {
			score += 1000
		}
		seen[f.phrase] = true
		if first < 0 {
			first = f.pos
		}
		last = f.pos + f.size
	}
	return score, first, last
}

// sentenceStarts are the words that start a sentence: the first, and each
// after a . or : and a space (fts5SentenceFinderCb).
func sentenceStarts(text string, words []textWord) []int {
	if len(words) == 0 {
		return nil
	}
	firsts := []int{0}
	for i := 1; i < len(words); i++ {
		gap := text[words[i-1].end:words[i].start]
		trimmed := strings.TrimRight(gap, " \t\n\r")
		if len(trimmed) < len(gap) && (strings.HasSuffix(trimmed, ".") || strings.HasSuffix(trimmed, ":")) {
			firsts = append(firsts, i)
		}
	}
	return firsts
}

// wordSpan is a run of matched words [start, end], overlapping matches
// joined (fts5CInstIterNext).
type wordSpan struct{ start, end int }

func matchedSpans(found []phraseAt) []wordSpan {
	var spans []wordSpan
	for _, f := range found {
		end := f.pos + f.size - 1
		if n := len(spans); n > 0 && f.pos <= spans[n-1].end {
			spans[n-1].end = max(spans[n-1].end, end)
			continue
		}
		spans = append(spans, wordSpan{f.pos, end})
	}
	return spans
}

// ownMarks are the text's own « and », which a snippet shows as ‹ and ›.
var ownMarks = strings.NewReplacer("«", "‹", "»", "›")

// markSnippet is text's words first to last (and what lies between them),
// each matched span between « and » (fts5HighlightCb).
func markSnippet(text string, words []textWord, found []phraseAt, first, last int) string {
	spans := matchedSpans(found)
	for len(spans) > 0 && spans[0].start < first {
		spans = spans[1:]
	}
	next := func() wordSpan {
		if len(spans) == 0 {
			return wordSpan{-1, -1}
		}
		return spans[0]
	}
	var out strings.Builder
	copied, open := 0, false
	copyTo := func(end int) {
		if end > copied {
			out.WriteString(ownMarks.Replace(text[copied:end]))
			copied = end
		}
	}
	if first > 0 {
		out.WriteString("…")
	}
	for pos, w := range words {
		if pos < first || pos > last {
			continue
		}
		if first > 0 && pos == first {
			copied = w.start
		}
		sp := next()
		if open && (pos <= sp.start || sp.start < 0) && w.start > copied {
			out.WriteString("»")
			open = false
		}
		if pos == sp.start && !open {
			copyTo(w.start)
			out.WriteString("«")
			open = true
		}
		if pos == sp.end {
			if !open {
				out.WriteString("«")
				open = true
			}
			copyTo(w.end)
			spans = spans[1:]
		}
		if pos == last {
			if open {
				if sp := next(); sp.start >= 0 && pos >= sp.start {
					copyTo(w.end)
				}
				out.WriteString("»")
				open = false
			}
			copyTo(w.end)
		}
	}
	if open {
		out.WriteString("»")
	}
	if last >= len(words)-1 {
		copyTo(len(text))
	} else {
		out.WriteString("…")
	}
	return out.String()
}
