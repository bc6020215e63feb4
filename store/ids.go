package store

import (
	"database/sql"
	"strings"
	"time"

	"github.com/google/uuid"
)

// newID returns a UUIDv7: time-ordered, so inserts append to the primary-key
// B-tree and id order is creation order (used as the tie-breaker in paging).
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// ValidID reports whether s is a UUID in the canonical form chatd issues
// and stores (lower case, hyphenated). Ids that are not are answered as not
// found (the spec's rule for malformed ids). Ids from clients pass through
// NormalizeID first, where they enter.
func ValidID(s string) bool {
	if len(s) != 36 || strings.ToLower(s) != s {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// NormalizeID returns s in lower case when it is a UUID in the canonical
// 8-4-4-4-12 form in any case: UUIDs are case-insensitive on input (RFC 9562,
// section 4) and chatd stores and compares them as it issues them, in lower
// case. Anything else (braces, urn:uuid:, no hyphens, no UUID at all) is
// returned unchanged, to be refused or looked up as it stands.
func NormalizeID(s string) string {
	if len(s) != 36 {
		return s
	}
	upper := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return s
			}
		case c >= '0' && c <= '9' || c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			upper = true
		default:
			return s
		}
	}
	if !upper {
		return s
	}
	return strings.ToLower(s)
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func nullString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	v := s.String
	return &v
}

func toNullString(s *string) sql.NullString {
	if s == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *s, Valid: true}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
