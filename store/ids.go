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
// (lower case, hyphenated). Ids that are not are answered as not found (the
// spec's rule for malformed ids); clients only ever send back ids they got.
func ValidID(s string) bool {
	if len(s) != 36 || strings.ToLower(s) != s {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
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
