package store

import (
	"strings"
	"unicode/utf8"
)

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
