package store

import "testing"

func TestNumberPlaceholders(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`SELECT a FROM t WHERE b = ? AND c IN (?,?)`, `SELECT a FROM t WHERE b = $1 AND c IN ($2,$3)`},
		{`SELECT '?', "a?" FROM t WHERE x = ?`, `SELECT '?', "a?" FROM t WHERE x = $1`},
		{`SELECT 'it''s ?' WHERE y = ?`, `SELECT 'it''s ?' WHERE y = $1`},
		{"SELECT ? -- is it?\n, ?", "SELECT $1 -- is it?\n, $2"},
		{`SELECT ?, 'open ?`, `SELECT $1, 'open ?`},
		{`SELECT ? -- to the end?`, `SELECT $1 -- to the end?`},
		{`SELECT ?1 + ?2 + ?1, ?`, `SELECT $1 + $2 + $1, $3`},
		{`SELECT ?12`, `SELECT $12`},
	} {
		if got := numberPlaceholders(c.in); got != c.want {
			t.Errorf("numberPlaceholders(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
