package store

import "strings"

// Keyset is a position in a sorted listing: the sort value and the id of the
// last row a page held; the next page starts strictly after it. The sort value
// is an integer (timestamps) or a string (names), as the sort column holds.
type Keyset struct {
	// Rank is a search's relevance (store.Search): an FTS5 rank, exact
	// through JSON (Go writes the shortest text that reads back the same).
	Rank float64 `json:"r,omitempty"`
	// Floor and Ceil are the seqs of the oldest and newest messages a
	// search by relevance ranks: its pages rank the same window of matches
	// however many arrive.
	Floor int64  `json:"f,omitempty"`
	Ceil  int64  `json:"c,omitempty"`
	Int   int64  `json:"i,omitempty"`
	Str   string `json:"s,omitempty"`
	ID    string `json:"id"`
}

// PageRequest says which page of a listing to read: keyset paging (After,
// possibly nil for the first page) or, for the deprecated page/page_size
// parameters, an Offset.
type PageRequest struct {
	Limit  int
	After  *Keyset
	Offset int
	// WithTotal also counts every matching row and, for keyset paging, the
	// rows before the page (a listing that answers page numbers in cursor
	// mode too needs both).
	WithTotal bool
}

// Page is one page of a listing.
type Page[T any] struct {
	Items []T
	PageInfo
}

// PageInfo is what a page says about its place in the listing.
type PageInfo struct {
	HasMore bool
	Next    *Keyset // the position after the last item; nil when the page is empty
	Total   int     // set when the request asked WithTotal
	Before  int     // the matching rows before this page; set when the request asked WithTotal
}

// sortSpec describes one sortable column of a listing.
type sortSpec struct {
	column  string // SQL expression, e.g. "a.name COLLATE NOCASE"
	isText  bool
	idCol   string // the unique tie-breaker column, e.g. "a.id"
	descend bool
}

// keysetWhere returns the condition "strictly after k" for the sort order.
func (s sortSpec) keysetWhere(k *Keyset) (string, []any) {
	if k == nil {
		return "", nil
	}
	op := ">"
	if s.descend {
		op = "<"
	}
	var v any = k.Int
	if s.isText {
		v = k.Str
	}
	return "(" + s.column + " " + op + " ? OR (" + s.column + " = ? AND " + s.idCol + " " + op + " ?))", []any{v, v, k.ID}
}

func (s sortSpec) orderBy() string {
	dir := " ASC"
	if s.descend {
		dir = " DESC"
	}
	return " ORDER BY " + s.column + dir + ", " + s.idCol + dir
}

// where joins conditions with AND.
func where(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// likeEscape escapes s for use inside a LIKE pattern with ESCAPE '\'.
func likeEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}
