package store

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The rules for the strings clients send: one-line texts (names, subjects)
// and free texts (details, bios, messages), what counts as visible, room
// titles, and values that must come from a closed vocabulary. Every
// resource's checks use these, so a rule reads the same everywhere.

// cleanText trims s and reports what is wrong with it as a one-line display
// text of min..max characters ("" when nothing is). Control characters
// (including newlines and NUL) are refused.
func cleanText(s string, min, max int) (string, string) {
	s = strings.TrimSpace(s)
	if !utf8.ValidString(s) {
		return s, "must be valid UTF-8"
	}
	n := utf8.RuneCountInString(s)
	if n < min {
		if min == 1 {
			return s, "can't be blank"
		}
		return s, "must be at least " + strconv.Itoa(min) + " characters long"
	}
	if n > max {
		return s, "must be at most " + strconv.Itoa(max) + " characters long"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return s, "must not contain control characters or line breaks"
		}
	}
	return s, ""
}

// cleanMultiline trims s and reports what is wrong with it as a free text of
// at most max characters: line breaks and tabs are allowed, other control
// characters are not.
func cleanMultiline(s string, max int) (string, string) {
	s = strings.TrimSpace(s)
	if !utf8.ValidString(s) {
		return s, "must be valid UTF-8"
	}
	if utf8.RuneCountInString(s) > max {
		return s, "must be at most " + strconv.Itoa(max) + " characters long"
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' {
			return s, "must not contain control characters"
		}
	}
	return s, ""
}

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

// oneOf reports whether v is one of allowed.
func oneOf(v string, allowed []string) bool { return slices.Contains(allowed, v) }

// checkOneOf records a problem at pointer unless v is one of allowed, and
// reports whether it is.
func checkOneOf(p Problems, pointer, v string, allowed []string) bool {
	if oneOf(v, allowed) {
		return true
	}
	p.Add(pointer, "must be one of %s", strings.Join(allowed, ", "))
	return false
}
