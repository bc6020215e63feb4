package store

import (
	"net/mail"
	"strings"
)

// How people and agents are named: handles, agent slugs, display names and
// email addresses.

// Handle rules: 2..39 characters of ASCII letters, digits, '-', '_' and '.',
// starting and ending with a letter or digit. Handles are unique without
// regard to case and are how people and agents are @-mentioned, so they are
// kept to characters that survive in URLs, shells and mention parsing.
const (
	minHandleLen = 2
	maxHandleLen = 39
	maxSlugLen   = 39
	maxNameLen   = 100
	maxEmailLen  = 254
)

// reservedHandles cannot be taken by users: they read like addresses of the
// server itself or like broadcast mentions.
var reservedHandles = map[string]bool{
	"admin": true, "administrator": true, "root": true, "system": true, "chatd": true,
	"api": true, "me": true, "agent": true, "agents": true, "all": true, "everyone": true,
	"here": true, "channel": true, "support": true, "help": true,
}

// ValidHandle reports what is wrong with h as a user handle or an agent slug
// ("" when nothing is).
func ValidHandle(h string) string {
	n := len(h)
	if n < minHandleLen || n > maxHandleLen {
		return "must be 2 to 39 characters long"
	}
	for i := 0; i < n; i++ {
		c := h[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && c != '-' && c != '_' && c != '.' {
			return "may contain only letters, digits, '-', '_' and '.'"
		}
		if !alnum && (i == 0 || i == n-1) {
			return "must start and end with a letter or digit"
		}
	}
	return ""
}

// DeriveSlug turns an agent name into a slug: lower case, runs of anything
// but letters and digits become one '-', cut to the slug length. It returns ""
// when the name has no ASCII letters or digits to build one from.
func DeriveSlug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			if b.Len() >= maxSlugLen {
				break
			}
			continue
		}
		dash = true
	}
	s := strings.Trim(b.String(), "-")
	if len(s) < minHandleLen {
		return ""
	}
	return s
}

// validEmail reports what is wrong with e as a person's email address (""
// when nothing is). Addresses under the reserved .invalid top-level domain
// are refused: chatd answers NoEmailDomain addresses for people without
// one, and a stored one would pass for that placeholder.
func validEmail(e string) string {
	if len(e) > maxEmailLen {
		return "is too long"
	}
	if !IsEmailAddress(e) {
		return "is not a valid email address"
	}
	if strings.HasSuffix(strings.ToLower(strings.TrimRight(e, ".")), ".invalid") {
		return "must be a deliverable address: the .invalid domain is reserved (chatd shows <handle>@" + NoEmailDomain +
			" for people without an email)"
	}
	return ""
}

// IsEmailAddress reports whether e is a bare email address: one that
// parses, with no display name, written as it parses.
func IsEmailAddress(e string) bool {
	a, err := mail.ParseAddress(e)
	return err == nil && a.Address == e && a.Name == ""
}

// splitName splits a display name into first and last name at the first space.
func splitName(name string) (first, last string) {
	first, last, _ = strings.Cut(strings.TrimSpace(name), " ")
	return first, strings.TrimSpace(last)
}

// lowerASCII folds the ASCII letters of s to lower case and leaves every
// other character as it is: what SQL's lower() does to a name on both
// databases here, so that a value from Go compares with a folded column.
func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}
