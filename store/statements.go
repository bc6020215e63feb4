package store

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A schema's text cut into statements, for the plan of a migration
// (MigrationPlan), which names each statement of an upgrade step by its
// head rather than printing it whole.

// statement is one SQL statement of a script: its text, from its first
// token through its semicolon, and its tokens, comments left out.
type statement struct {
	text   string
	tokens []sqlToken
}

// sqlToken is a word (a keyword or a bare name), a quoted name or string,
// or one character of punctuation.
type sqlToken struct {
	text string
	word bool
}

// upper is the token as a keyword, in capitals; "" for anything but a word.
func (t sqlToken) upper() string {
	if !t.word {
		return ""
	}
	return strings.ToUpper(t.text)
}

// dollarQuote opens a PostgreSQL dollar-quoted string: $$ or $tag$.
var dollarQuote = regexp.MustCompile(`^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$`)

// splitStatements cuts script into its statements, at the semicolons that
// end them: not those in comments, quoted strings and names, PostgreSQL's
// dollar-quoted bodies, or the body of a SQLite trigger (BEGIN … END) and
// CASE … END expressions.
func splitStatements(script string) []statement {
	var out []statement
	var cur statement
	start, depth := -1, 0
	for i := 0; i < len(script); {
		r, size := utf8.DecodeRuneInString(script[i:])
		rest := script[i:]
		end := i + size
		word := false
		switch {
		case unicode.IsSpace(r):
			i = end
			continue
		case strings.HasPrefix(rest, "--"):
			i = lineEnd(script, i)
			continue
		case strings.HasPrefix(rest, "/*"):
			if j := strings.Index(rest[2:], "*/"); j >= 0 {
				i += 2 + j + 2
			} else {
				i = len(script)
			}
			continue
		case r == '\'' || r == '"' || r == '`':
			end = quotedEnd(script, i, byte(r))
		case dollarQuote.MatchString(rest):
			tag := dollarQuote.FindString(rest)
			if j := strings.Index(rest[len(tag):], tag); j >= 0 {
				end = i + len(tag) + j + len(tag)
			} else {
				end = len(script)
			}
		case isWordRune(r):
			word = true
			for end < len(script) {
				r, size := utf8.DecodeRuneInString(script[end:])
				if !isWordRune(r) {
					break
				}
				end += size
			}
		}
		if start < 0 {
			start = i
		}
		tok := sqlToken{text: script[i:end], word: word}
		i = end
		if tok.text == ";" && depth == 0 {
			cur.text = script[start:end]
			out = append(out, cur)
			cur, start = statement{}, -1
			continue
		}
		switch tok.upper() {
		case "CASE":
			depth++
		case "BEGIN":
			if cur.isTrigger() {
				depth++
			}
		case "END":
			depth = max(depth-1, 0)
		}
		cur.tokens = append(cur.tokens, tok)
	}
	if len(cur.tokens) > 0 {
		cur.text = strings.TrimSpace(script[start:])
		out = append(out, cur)
	}
	return out
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// lineEnd is where the line holding script[i] ends.
func lineEnd(script string, i int) int {
	if j := strings.IndexByte(script[i:], '\n'); j >= 0 {
		return i + j + 1
	}
	return len(script)
}

// quotedEnd is where the quoted text opening at script[i] ends: after its
// closing quote (a doubled quote is one inside it).
func quotedEnd(script string, i int, quote byte) int {
	for j := i + 1; j < len(script); j++ {
		if script[j] != quote {
			continue
		}
		if j+1 < len(script) && script[j+1] == quote {
			j++
			continue
		}
		return j + 1
	}
	return len(script)
}

// isTrigger says whether the statement creates a trigger, whose body
// (BEGIN … END) holds statements of its own.
func (s statement) isTrigger() bool {
	for i, t := range s.tokens {
		switch t.upper() {
		case "TRIGGER":
			return i > 0 && s.tokens[0].upper() == "CREATE"
		case "CREATE", "TEMP", "TEMPORARY":
		default:
			return false
		}
	}
	return false
}

// setsVersion says whether the statement sets the schema version: SQLite's
// PRAGMA user_version, or the row of PostgreSQL's schema_version.
func (s statement) setsVersion() bool {
	return userVersionLine.MatchString(s.text) || postgresVersionLine.MatchString(s.text)
}

// planned is the statement as a migration's plan lists it: by its head
// (see PlannedStatement).
func (s statement) planned() PlannedStatement {
	t := s.tokens
	at := func(i int) string {
		if i < len(t) {
			return t[i].upper()
		}
		return ""
	}
	// through is the head up to and including the name at t[i], or all of
	// the statement when it is shorter.
	through := func(i int) string { return joinTokens(t[:min(i+1, len(t))]) }
	// skip passes the keywords at t[i], if they are there.
	skip := func(i int, words ...string) int {
		for _, w := range words {
			if at(i) != w {
				return i
			}
			i++
		}
		return i
	}
	// qualified passes a name's schema, if it has one: the name at t[i]
	// ends at the index returned.
	qualified := func(i int) int {
		for i+2 < len(t) && t[i+1].text == "." {
			i += 2
		}
		return i
	}
	switch at(0) {
	case "CREATE":
		i := 1
		for oneOf(at(i), []string{"UNIQUE", "VIRTUAL", "TEMP", "TEMPORARY", "OR", "REPLACE", "MATERIALIZED"}) {
			i++
		}
		name := qualified(skip(skip(i+1, "CONCURRENTLY"), "IF", "NOT", "EXISTS"))
		head := through(name)
		if at(name) == "ON" { // PostgreSQL's unnamed index
			head = through(qualified(name + 1))
		} else if oneOf(at(i), []string{"INDEX", "TRIGGER"}) {
			for j := name + 1; j+1 < len(t); j++ {
				if at(j) == "ON" {
					head += " ON " + joinTokens(t[j+1:qualified(j+1)+1])
					break
				}
			}
		}
		return PlannedStatement{Head: head}
	case "DROP":
		return PlannedStatement{Head: through(qualified(skip(2, "IF", "EXISTS")))}
	case "ALTER":
		// ALTER TABLE t, then its action up to the name it acts on:
		// ADD COLUMN c, DROP CONSTRAINT k, RENAME TO u.
		i := qualified(skip(skip(2, "IF", "EXISTS"), "ONLY")) + 1
		for i < len(t) && oneOf(at(i), []string{"ADD", "DROP", "ALTER", "RENAME", "COLUMN", "CONSTRAINT", "TO", "IF", "NOT", "EXISTS"}) {
			i++
		}
		return PlannedStatement{Head: through(i)}
	case "INSERT", "REPLACE":
		for i := range t {
			if at(i) == "INTO" {
				return PlannedStatement{Head: through(qualified(i + 1)), Data: true}
			}
		}
	case "UPDATE":
		i := 1
		if at(1) == "OR" { // UPDATE OR IGNORE t
			i = 3
		}
		return PlannedStatement{Head: through(qualified(skip(i, "ONLY"))), Data: true}
	case "DELETE":
		return PlannedStatement{Head: through(qualified(skip(skip(1, "FROM"), "ONLY"))), Data: true}
	}
	return PlannedStatement{Head: shortened(joinTokens(t))}
}

// headRunes bounds the head of a statement listed whole (a PRAGMA, a DO
// block): one line, cut after this many characters.
const headRunes = 72

func shortened(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > headRunes {
		return string(r[:headRunes]) + " …"
	}
	return s
}

// joinTokens writes tokens back as text on one line, as written, one
// space between words.
func joinTokens(tokens []sqlToken) string {
	var b strings.Builder
	prev := ""
	for _, t := range tokens {
		text := t.text
		if b.Len() > 0 && prev != "(" && prev != "." && text != ")" && text != "," && text != "." {
			b.WriteByte(' ')
		}
		b.WriteString(text)
		prev = text
	}
	return b.String()
}
