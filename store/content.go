package store

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// IsBlank reports whether s shows nothing a reader could see. A rune is
// visible when its Unicode category is a letter (L), number (N), punctuation
// (P) or symbol (S); whitespace (Z), control and format characters (Cc, Cf:
// zero-width spaces and joiners, bidi marks, BOM), unassigned and private-use
// code points and lone combining marks (M) are not. Deciding by category keeps
// the rule complete as Unicode grows, instead of chasing a list of
// "invisible" characters.
func IsBlank(s string) bool {
	return strings.IndexFunc(s, isVisible) < 0
}

// isVisible reports whether r is a rune IsBlank counts as visible.
func isVisible(r rune) bool { return unicode.In(r, unicode.L, unicode.N, unicode.P, unicode.S) }

// maxTitleLen is the longest room title, in characters, after trimming.
const maxTitleLen = 120

// CleanTitle trims a room title and reports what is wrong with it ("" when
// nothing is): it must be 1..120 characters and hold no line break, carriage
// return or NUL (or any other control character).
func CleanTitle(s string) (string, string) {
	t := strings.TrimSpace(s)
	if !utf8.ValidString(t) {
		return t, "must be valid UTF-8"
	}
	if IsBlank(t) {
		return t, "can't be blank or only invisible characters"
	}
	if strings.ContainsAny(t, "\n\r\x00") {
		return t, "must not contain line breaks, carriage returns or NUL characters"
	}
	for _, r := range t {
		if unicode.IsControl(r) {
			return t, "must not contain control characters"
		}
	}
	if utf8.RuneCountInString(t) > maxTitleLen {
		return t, "must be at most 120 characters long"
	}
	return t, ""
}

// TitleFromMessage derives a room title from the first message: its first
// line with something visible on it, without control or format characters,
// trimmed of what is invisible at its start (so that cutting it cannot leave
// only invisible characters, such as combining marks with nothing to combine
// with), cut at 120 characters. It returns "" when there is none.
func TitleFromMessage(content string) string {
	for _, line := range strings.Split(content, "\n") {
		line = strings.Map(func(r rune) rune {
			switch {
			case r == '\t':
				return ' '
			case unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r):
				return -1
			}
			return r
		}, line)
		line = strings.TrimRightFunc(strings.TrimLeftFunc(line, func(r rune) bool { return !isVisible(r) }), unicode.IsSpace)
		if line == "" {
			continue
		}
		if utf8.RuneCountInString(line) > maxTitleLen {
			line = strings.TrimSpace(string([]rune(line)[:maxTitleLen]))
		}
		return line
	}
	return ""
}

// isHandleRune reports whether r can continue a handle after "@".
func isHandleRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '/'
}

// MentionsHandle reports whether content @-references handle: "@handle"
// (any case) that starts a word and is not followed by more of a handle. A
// '.' ends the handle only when it ends the sentence, so "@ana." references
// ana but "@ana.b" does not, and neither does "ana@ana.org".
func MentionsHandle(content, handle string) bool {
	lc, needle := strings.ToLower(content), "@"+strings.ToLower(handle)
	for from := 0; ; {
		i := strings.Index(lc[from:], needle)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(needle)
		from = end
		if start > 0 {
			prev, _ := utf8.DecodeLastRuneInString(lc[:start])
			if isHandleRune(prev) || prev == '.' || prev == '@' {
				continue
			}
		}
		if end == len(lc) {
			return true
		}
		next, _ := utf8.DecodeRuneInString(lc[end:])
		if next == '.' {
			after, _ := utf8.DecodeRuneInString(lc[end+1:])
			if end+1 == len(lc) || !isHandleRune(after) {
				return true
			}
		} else if !isHandleRune(next) {
			return true
		}
	}
}
