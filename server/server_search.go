package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/chatd/chatd/store"
)

// Search (chatd's own): the messages a caller may read that match some
// words, most relevant or newest first, each with a snippet marking where
// it matched. A person searches every room they read, an agent what its
// context listing shows it; the store decides both (store.Search).

func (s *Server) searchRoutes() {
	s.handle("GET", "/api/v1/me/search", humansOnly, s.search)
	s.handle("GET", "/api/v1/agent/search", agentsOnly, s.search)
}

var searchListing = listing{defaultLimit: 20, maxLimit: 100}

// The orders a search answers in.
var searchSorts = []string{"relevance", "newest"}

// searchResultView is a hit: the message as the caller's API renders it
// in its listings, with its snippet and score.
type searchResultView struct {
	messageView
	Snippet string  `json:"snippet"`
	Score   float64 `json:"score"`
}

// search is GET /me/search and GET /agent/search.
func (s *Server) search(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f, err := searchFilterOf(q)
	if err != nil {
		return err
	}
	p := principal(r)
	audience := "me"
	if p.IsAgent() {
		audience = "agent"
	}
	scope := searchCursorScope(audience, f)
	pq, err := s.parsePage(q, scope, searchListing)
	if err != nil {
		return err
	}
	page, err := s.db.Search(r.Context(), p.Actor(), f, pq.PageRequest)
	if err != nil {
		return err
	}
	views := viewsOf(page.Items, func(h *store.SearchHit) searchResultView {
		return searchResultView{messageView: newMessageView(h.Message, readerOf(r)), Snippet: h.Snippet, Score: h.Score}
	})
	return replyPage(w, views, s.meta(w, pq, scope, page.PageInfo))
}

// searchFilterOf reads a search's parameters; every problem found is
// answered at once.
func searchFilterOf(q url.Values) (store.SearchFilter, error) {
	p := store.Problems{}
	f := store.SearchFilter{
		Query:  q.Get("q"),
		Type:   enumParam(q, "message_type", "", store.MessageTypes, p),
		Newest: enumParam(q, "sort", "relevance", searchSorts, p) == "newest",
	}
	if _, ok := q["q"]; !ok {
		p.Add("/q", "is required: the words to search for")
	} else if problem := store.SearchQueryProblem(f.Query); problem != "" {
		p.Add("/q", "%s", problem)
	}
	f.RoomID = idParam(q, "chat_id", p)
	f.SenderID = idParam(q, "sender_id", p)
	f.After = timeParam(q, "after", p)
	f.Before = timeParam(q, "before", p)
	if f.After != nil && f.Before != nil && !f.Before.After(*f.After) {
		p.Add("/before", "must be later than after")
	}
	for _, legacy := range []string{"page", "page_size"} {
		if _, ok := q[legacy]; ok {
			p.Add("/"+legacy, "is not taken here: page with cursor and limit")
		}
	}
	return f, p.Err(store.CodeValidation)
}

// timeParam reads an optional RFC 3339 (ISO 8601) date-time parameter.
func timeParam(q url.Values, name string, p store.Problems) *time.Time {
	v, ok := q[name]
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, v[0])
	if err != nil {
		p.Add("/"+name, "must be an RFC 3339 date-time, such as 2026-01-15T10:30:00Z")
		return nil
	}
	return &t
}

// searchCursorScope names a search in its cursors: the API and a digest of
// everything that decides its results and their order, so that a cursor
// is valid only for the search that issued it (and stays short, whatever
// the query's length).
func searchCursorScope(audience string, f store.SearchFilter) string {
	stamp := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	sort := "relevance"
	if f.Newest {
		sort = "newest"
	}
	digest := sha256.Sum256([]byte(strings.Join([]string{f.Query, f.RoomID, f.SenderID, f.Type, stamp(f.After), stamp(f.Before), sort}, "\x00")))
	return audience + "/search:" + hex.EncodeToString(digest[:16])
}
