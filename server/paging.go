package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/chatd/chatd/store"
)

// Listings page by opaque keyset cursors: ?cursor=<metadata.next_cursor>&limit=N.
// A cursor is the position after the last row of a page plus the listing and
// sort order it belongs to, signed with a key derived from the server secret,
// so a cursor cannot be forged, edited, or replayed against another listing
// or sort order: all of those are 422 invalid_cursor, never a 500.
//
// The deprecated ?page=&page_size= still work (the Band Python SDK pages
// messages that way) and add Deprecation and Sunset headers. Mixing the two
// families is 422.

const maxCursorLen = 1024

// The dates of the deprecated page/page_size parameters: removed from the
// hosted API 2.0.0 on 2026-10-01. chatd keeps serving them; the headers say
// they are on their way out (RFC 9745 Deprecation, RFC 8594 Sunset).
const (
	deprecationHeader = "@1790812800"
	sunsetHeader      = "Thu, 01 Oct 2026 00:00:00 GMT"
)

// cursorEncoding is strict, so that a cursor has exactly one spelling:
// changing any character of it changes what it decodes to.
var cursorEncoding = base64.RawURLEncoding.Strict()

type cursorPayload struct {
	Scope string       `json:"c"`
	Pos   store.Keyset `json:"p"`
}

func (s *Server) encodeCursor(scope string, pos *store.Keyset) *string {
	if pos == nil {
		return nil
	}
	body, _ := json.Marshal(cursorPayload{Scope: scope, Pos: *pos})
	m := hmac.New(sha256.New, s.cursorKey)
	m.Write(body)
	c := cursorEncoding.EncodeToString(body) + "." + cursorEncoding.EncodeToString(m.Sum(nil)[:16])
	return &c
}

func (s *Server) decodeCursor(scope, c string) (*store.Keyset, bool) {
	if len(c) > maxCursorLen {
		return nil, false
	}
	b64body, b64mac, ok := strings.Cut(c, ".")
	if !ok {
		return nil, false
	}
	body, err1 := cursorEncoding.DecodeString(b64body)
	mac, err2 := cursorEncoding.DecodeString(b64mac)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	m := hmac.New(sha256.New, s.cursorKey)
	m.Write(body)
	if !hmac.Equal(mac, m.Sum(nil)[:16]) {
		return nil, false
	}
	var p cursorPayload
	if err := json.Unmarshal(body, &p); err != nil || p.Scope != scope || !store.ValidID(p.Pos.ID) {
		return nil, false
	}
	return &p.Pos, true
}

// listing describes one paged endpoint's limits.
type listing struct {
	defaultLimit, maxLimit int
	// bothShapes: the document says the listing's metadata carries the
	// offset fields (page, page_size, total_count, total_pages) in cursor
	// mode too, "during the transition"; elsewhere they answer the
	// deprecated parameters only.
	bothShapes bool
}

// pageQuery is a parsed page request.
type pageQuery struct {
	store.PageRequest
	legacy         bool // page/page_size were used
	bothShapes     bool // the offset fields are answered in cursor mode too
	page, pageSize int
}

// parsePage reads cursor/limit or page/page_size from q. scope names the
// listing and its sort order (a cursor is only valid where it was issued).
func (s *Server) parsePage(q url.Values, scope string, l listing) (pageQuery, error) {
	p := store.Problems{}
	has := func(k string) bool { _, ok := q[k]; return ok }
	var pq pageQuery
	if (has("cursor") || has("limit")) && (has("page") || has("page_size")) {
		p.Add("", "use cursor and limit, or the deprecated page and page_size, not both")
		return pq, p.Err(store.CodeValidation)
	}
	if has("page") || has("page_size") {
		pq.legacy = true
		pq.page = intParam(q, "page", 1, 1, 1<<30, p)
		pq.pageSize = intParam(q, "page_size", l.defaultLimit, 1, l.maxLimit, p)
		if err := p.Err(store.CodeValidation); err != nil {
			return pq, err
		}
		pq.Limit, pq.Offset, pq.WithTotal = pq.pageSize, (pq.page-1)*pq.pageSize, true
		return pq, nil
	}
	pq.Limit = intParam(q, "limit", l.defaultLimit, 1, l.maxLimit, p)
	if err := p.Err(store.CodeValidation); err != nil {
		return pq, err
	}
	pq.bothShapes, pq.WithTotal = l.bothShapes, l.bothShapes
	if c := q.Get("cursor"); c != "" {
		pos, ok := s.decodeCursor(scope, c)
		if !ok {
			return pq, &httpError{Code: codeInvalidCursor,
				Message: "/cursor is not valid for this listing (use metadata.next_cursor from the previous page, with the same sort)",
				Details: store.Problems{"/cursor": {"is not valid for this listing"}}}
		}
		pq.After = pos
	}
	return pq, nil
}

// intParam parses an integer query parameter in [min, max].
func intParam(q url.Values, name string, def, min, max int, p store.Problems) int {
	v, ok := q[name]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v[0]))
	if err != nil || n < min || n > max {
		p.Add("/"+name, "must be an integer from %d to %d", min, max)
		return def
	}
	return n
}

// boolParam parses an optional boolean query parameter.
func boolParam(q url.Values, name string, p store.Problems) *bool {
	v, ok := q[name]
	if !ok {
		return nil
	}
	switch strings.ToLower(strings.TrimSpace(v[0])) {
	case "true", "1":
		t := true
		return &t
	case "false", "0":
		f := false
		return &f
	}
	p.Add("/"+name, "must be true or false")
	return nil
}

// enumParam parses an optional query parameter that must be one of allowed.
// A named string type (store.PartyType) comes back as itself, so that the
// caller need not convert what was just checked.
func enumParam[T ~string](q url.Values, name string, def T, allowed []T, p store.Problems) T {
	v, ok := q[name]
	if !ok {
		return def
	}
	for _, a := range allowed {
		if v[0] == string(a) {
			return a
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	p.Add("/"+name, "must be one of %s", strings.Join(names, ", "))
	return def
}

// includeHistory reads include=history, which asks for a record with its
// history.
func includeHistory(q url.Values) (bool, error) {
	p := store.Problems{}
	history := enumParam(q, "include", "", []string{"history"}, p) == "history"
	return history, p.Err(store.CodeValidation)
}

// pageMeta is the paging part of a listing's metadata. The cursor fields are
// always present (clients require them even in page mode); the offset fields
// when page/page_size were used or the listing answers both shapes.
type pageMeta struct {
	HasMore    bool    `json:"has_more"`
	Limit      int     `json:"limit"`
	NextCursor *string `json:"next_cursor"`
	Page       *int    `json:"page,omitempty"`
	PageSize   *int    `json:"page_size,omitempty"`
	TotalCount *int    `json:"total_count,omitempty"`
	TotalPages *int    `json:"total_pages,omitempty"`
}

// meta builds the metadata of a page and, for the deprecated parameters,
// sets the Deprecation and Sunset headers. In cursor mode, a listing that
// answers both shapes numbers its pages by the rows before the page, in
// pages of the requested limit.
func (s *Server) meta(w http.ResponseWriter, pq pageQuery, scope string, info store.PageInfo) pageMeta {
	m := pageMeta{HasMore: info.HasMore, Limit: pq.Limit}
	if info.HasMore {
		m.NextCursor = s.encodeCursor(scope, info.Next)
	}
	switch {
	case pq.legacy:
		h := w.Header()
		h.Set("Deprecation", deprecationHeader)
		h.Set("Sunset", sunsetHeader)
		m.setOffsetFields(pq.page, pq.pageSize, info.Total)
	case pq.bothShapes:
		m.setOffsetFields(info.Before/pq.Limit+1, pq.Limit, info.Total)
	}
	return m
}

func (m *pageMeta) setOffsetFields(page, size, total int) {
	pages := (total + size - 1) / size
	m.Page, m.PageSize, m.TotalCount, m.TotalPages = &page, &size, &total, &pages
}

// orderName spells a sort order in a cursor's scope.
func orderName(desc bool) string {
	if desc {
		return "desc"
	}
	return "asc"
}

// offsetListing is the limits of GET /agent/chats and the peer listings.
var offsetListing = listing{defaultLimit: 20, maxLimit: 100}

// offsetPage is a page of a listing that pages only by page/page_size (the
// OpenAPI document gives those listings no cursor), so using them is not
// deprecated there.
type offsetPage struct{ page, pageSize int }

func parseOffsetPage(q url.Values, l listing) (offsetPage, error) {
	p := store.Problems{}
	op := offsetPage{
		page:     intParam(q, "page", 1, 1, 1<<30, p),
		pageSize: intParam(q, "page_size", l.defaultLimit, 1, l.maxLimit, p),
	}
	return op, p.Err(store.CodeValidation)
}

func (op offsetPage) request() store.PageRequest {
	return store.PageRequest{Limit: op.pageSize, Offset: (op.page - 1) * op.pageSize, WithTotal: true}
}

type offsetMeta struct {
	Page       int `json:"page"`
	PageSize   int `json:"page_size"`
	TotalCount int `json:"total_count"`
	TotalPages int `json:"total_pages"`
}

func (op offsetPage) meta(total int) offsetMeta {
	return offsetMeta{Page: op.page, PageSize: op.pageSize, TotalCount: total, TotalPages: (total + op.pageSize - 1) / op.pageSize}
}
