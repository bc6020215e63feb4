package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"slices"
	"strings"
	"time"
)

// Full-text search over the messages an actor may read. On SQLite it goes
// through the FTS5 index messages_fts (schema.sql, version 8), which the
// triggers there and the indexer (search_index.go) keep in step with the
// messages; on PostgreSQL through the messages' search column
// (schema_postgres.sql), which the database keeps (search_postgres.go).
// The rules are the same on both: what a query means and refuses, who
// finds what, the relevance window, paging and snippets.

// searchEngine is how a database finds and marks what a search asks for.
type searchEngine struct {
	// queued says the messages wait in messages_fts_queue until the store
	// indexes them (the indexer, and flushIndex before each search);
	// otherwise the database indexes each message in the write that
	// writes it.
	queued bool
	// match turns a query's terms into the match argument of the queries
	// below, reading through row when it needs the database.
	match func(row rowReader, terms []searchTerm) (string, error)
	// hits is the query of up to limit matches within w, newest first, each
	// with its seq and rank (the lower, the more relevant).
	hits func(actor Actor, match string, f SearchFilter, w window, limit int) (string, []any)
	// snippets sets each hit's snippet and score; hits have their messages.
	snippets func(q queryer, match string, terms []searchTerm, hits []*SearchHit) error
	// memoryMatches is the condition "the memory m matches ?", a match.
	memoryMatches string
}

// rowReader runs a query for one row, in a transaction or not.
type rowReader func(query string, args ...any) *sql.Row

// rowReader reads from the read pool, outside a transaction.
func (db *DB) rowReader(ctx context.Context) rowReader {
	return func(query string, args ...any) *sql.Row { return db.queryRow(ctx, query, args...) }
}

// fts5Search searches SQLite's FTS5 tables.
var fts5Search = searchEngine{
	queued:        true,
	match:         func(_ rowReader, terms []searchTerm) (string, error) { return fts5Match(terms), nil },
	hits:          searchQuery,
	snippets:      attachSnippets,
	memoryMatches: `m.rowid IN (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?)`,
}

// SearchFilter is one search: what was typed and what narrows it.
type SearchFilter struct {
	Query    string     // what the caller typed (see parseSearchQuery)
	RoomID   string     // one room, or "" for every room the actor reads
	SenderID string     // one sender, or "" for anyone
	Type     string     // one message type, or "" for all
	After    *time.Time // only messages sent after this
	Before   *time.Time // only messages sent before this
	Newest   bool       // newest first; otherwise the most relevant first
}

// SearchHit is a message that matched.
type SearchHit struct {
	*Message
	// Snippet is a passage of the content around the matches, each match
	// between « and »; a « or » of the text itself reads as ‹ or ›, so
	// every « and » is a marker. An elided start or end reads as "…".
	Snippet string
	// Score is the match's relevance (SQLite's bm25, PostgreSQL's ts_rank;
	// higher is closer), comparable only between the hits of one search.
	Score float64
	rank  float64 // the database's rank, -Score: the relevance order's key
}

// SearchKeyset is the paging position just after h in its order; w is the
// window a search by relevance ranks (see RelevanceWindow).
func SearchKeyset(h *SearchHit, newest bool, w window) *Keyset {
	if newest {
		return &Keyset{Int: h.Seq, ID: h.ID}
	}
	return &Keyset{Rank: h.rank, Int: h.Seq, ID: h.ID, Floor: w.floor, Ceil: w.ceil}
}

// RelevanceWindow is how many of the newest matches the actor may read a
// search by relevance ranks. bm25 costs about 4 µs a match, and a common
// word matches a sixth of a history; among the newest thousand, a search
// answers in milliseconds however long the history, and a conversation's
// best matches are seldom older. Newest first has no such bound: it reads
// the index in its order and stops when the page is full.
const RelevanceWindow = 1000

// window is the seqs of the oldest and newest messages a search by
// relevance ranks; its later pages rank the same (zero: not known yet).
type window struct{ floor, ceil int64 }

// bounds adds w's bounds on the message number column (either zero: none)
// to conds and args.
func (w window) bounds(column string, conds []string, args []any) ([]string, []any) {
	if w.floor > 0 {
		conds, args = append(conds, column+` >= ?`), append(args, w.floor)
	}
	if w.ceil > 0 {
		conds, args = append(conds, column+` <= ?`), append(args, w.ceil)
	}
	return conds, args
}

// snippetTokens is how many words a snippet holds at most.
const snippetTokens = 20

// Search finds the messages matching f.Query that the actor may read, as
// the listings show them: a person every message of the rooms they read
// (their own, and those where an agent they own is), with every agent's
// delivery state; an agent what it sees in its rooms' context (what it
// sent, and the text messages that mention it), with its own. A room it
// may not read (f.RoomID) is ErrNotFound; a query it cannot run is a
// validation error at /q.
func (db *DB) Search(ctx context.Context, actor Actor, f SearchFilter, pr PageRequest) (*Page[*SearchHit], error) {
	terms, msg := parseSearchQuery(f.Query)
	if msg != "" {
		return nil, Problems{"/q": {msg}}.Err(CodeValidation)
	}
	agentID := ""
	if actor.IsAgent() {
		agentID = actor.ID
	}
	engine := db.dialect.search
	if engine.queued {
		if err := db.flushIndex(ctx, db.Write); err != nil {
			return nil, err
		}
	}
	page := &Page[*SearchHit]{}
	var w window
	if pr.After != nil {
		w = window{pr.After.Floor, pr.After.Ceil}
	}
	err := db.readTx(ctx, func(q readQ) error {
		if f.RoomID != "" {
			if _, err := loadAccess(q, actor, f.RoomID); err != nil {
				return err
			}
		}
		match, err := engine.match(q.QueryRow, terms)
		if err != nil {
			return err
		}
		var hits []*SearchHit
		if f.Newest {
			hits, err = searchNewest(q, engine, actor, match, f, pr)
		} else {
			hits, w, err = searchRelevant(q, engine, actor, match, f, pr, w)
		}
		if err != nil {
			return err
		}
		if page.HasMore = len(hits) > pr.Limit; page.HasMore {
			hits = hits[:pr.Limit]
		}
		page.Items = hits
		if err := loadHitMessages(q, hits, agentID); err != nil {
			return err
		}
		return engine.snippets(q, match, terms, hits)
	})
	if err != nil {
		return nil, err
	}
	if n := len(page.Items); n > 0 {
		page.Next = SearchKeyset(page.Items[n-1], f.Newest, w)
	}
	return page, nil
}

// searchNewest finds a page of hits newest first (and one more, to tell
// whether there are more), with their seq: the index's own order, so the
// page stops after its last row however many match.
func searchNewest(q readQ, engine searchEngine, actor Actor, match string, f SearchFilter, pr PageRequest) ([]*SearchHit, error) {
	var before int64
	if pr.After != nil {
		before = pr.After.Int
	}
	return searchRows(q, engine, actor, match, f, window{ceil: before - 1}, pr.Limit+1)
}

// searchRelevant finds a page of hits most relevant first (and one more):
// it reads the window, the RelevanceWindow newest matches the actor may
// read (on a later page, the first page's), with their ranks, and orders
// them by rank. The rank is computed only for the matches the actor may read.
func searchRelevant(q readQ, engine searchEngine, actor Actor, match string, f SearchFilter, pr PageRequest, w window) ([]*SearchHit, window, error) {
	hits, err := searchRows(q, engine, actor, match, f, w, RelevanceWindow)
	if err != nil || len(hits) == 0 {
		return nil, w, err
	}
	if w.ceil == 0 {
		w = window{floor: hits[len(hits)-1].Seq, ceil: hits[0].Seq}
	}
	slices.SortFunc(hits, func(a, b *SearchHit) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.Seq, b.Seq))
	})
	if after := pr.After; after != nil {
		i, _ := slices.BinarySearchFunc(hits, after, func(h *SearchHit, k *Keyset) int {
			return cmp.Or(cmp.Compare(h.rank, k.Rank), cmp.Compare(h.Seq, k.Int+1)) // the first after k
		})
		hits = hits[i:]
	}
	return hits[:min(len(hits), pr.Limit+1)], w, nil
}

// searchRows reads up to limit matches the actor may read, newest first,
// with their seq and rank, within w (either bound zero: none).
func searchRows(q readQ, engine searchEngine, actor Actor, match string, f SearchFilter, w window, limit int) ([]*SearchHit, error) {
	query, args := engine.hits(actor, match, f, w, limit)
	rows, err := q.Query(query, args...)
	if err != nil {
		return nil, err
	}
	return scanAll(rows, func(row interface{ Scan(...any) error }) (*SearchHit, error) {
		h := &SearchHit{Message: &Message{}}
		err := row.Scan(&h.Seq, &h.rank)
		return h, err
	})
}

// searchQuery is FTS5's query of up to limit matches within w, newest
// first, each with its rank. The full-text match drives it, in the index's own
// order (rowid is seq, descending); each candidate is then checked against
// the actor's rooms (a set built once) and the filters, by its primary key,
// and only then is its rank computed.
func searchQuery(actor Actor, match string, f SearchFilter, w window, limit int) (string, []any) {
	conds, args := searchConditions(actor, f)
	conds, args = w.bounds("messages_fts.rowid", conds, args)
	// CROSS JOIN keeps the index the outer loop: from a bound on rowid the
	// planner would otherwise infer one on seq and walk a room's messages
	// instead, every one within it.
	return `SELECT messages_fts.rowid, messages_fts.rank FROM messages_fts CROSS JOIN messages m ON m.seq = messages_fts.rowid
		WHERE messages_fts MATCH ? AND ` + strings.Join(conds, " AND ") + ` ORDER BY messages_fts.rowid DESC LIMIT ?`,
		append(append([]any{match}, args...), limit)
}

// searchConditions are the conditions "m is a message the actor may read"
// and the filters of f, with their arguments. A room of f was checked
// already (loadAccess).
func searchConditions(actor Actor, f SearchFilter) ([]string, []any) {
	var conds []string
	var args []any
	add := func(c string, a ...any) {
		conds = append(conds, c)
		args = append(args, a...)
	}
	switch {
	case f.RoomID != "":
		add(`m.room_id = ?`, f.RoomID)
	case actor.IsAgent():
		add(`m.room_id IN (SELECT p.room_id FROM participants p JOIN rooms r ON r.id = p.room_id
			WHERE p.member_id = ? AND p.status = 'active' AND r.deleted_at IS NULL)`, actor.ID)
	default:
		add(`m.room_id IN (SELECT p.room_id FROM participants p JOIN rooms r ON r.id = p.room_id
			WHERE p.member_id = ? AND p.status = 'active' AND r.deleted_at IS NULL
			UNION SELECT p.room_id FROM agents a JOIN participants p ON p.member_id = a.id JOIN rooms r ON r.id = p.room_id
			WHERE a.owner_id = ? AND a.deleted_at IS NULL AND p.status = 'active' AND r.deleted_at IS NULL)`, actor.ID, actor.ID)
	}
	if !actor.IsAgent() {
		add(notInternal)
	}
	if actor.IsAgent() {
		// What the agent's context listing shows it (ListContext).
		add(`(m.sender_id = ? OR EXISTS (SELECT 1 FROM deliveries d WHERE d.agent_id = ? AND d.room_id = m.room_id AND d.message_seq = m.seq))`,
			actor.ID, actor.ID)
	}
	if f.SenderID != "" {
		add(`m.sender_id = ?`, f.SenderID)
	}
	if f.Type != "" {
		add(`m.message_type = ?`, f.Type)
	}
	if f.After != nil {
		add(`m.inserted_at > ?`, f.After.UnixMicro())
	}
	if f.Before != nil {
		add(`m.inserted_at < ?`, f.Before.UnixMicro())
	}
	return conds, args
}

// loadHitMessages fills in each hit's message, with its attachments and
// deliveries (all of them, or only agentID's).
func loadHitMessages(q readQ, hits []*SearchHit, agentID string) error {
	if len(hits) == 0 {
		return nil
	}
	bySeq, seqs := byKey(hits, func(h *SearchHit) int64 { return h.Seq })
	rows, err := q.Query(`SELECT `+messageColumns+` FROM messages m WHERE m.seq IN `+inList(len(seqs)), seqs...)
	if err != nil {
		return err
	}
	msgs, err := scanAll(rows, scanMessage)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		bySeq[m.Seq].Message = m
	}
	loaded := make([]*Message, len(hits))
	for i, h := range hits {
		loaded[i] = h.Message
	}
	return attachMessageDetails(q, loaded, agentID)
}

// attachSnippets sets each hit's snippet and score from FTS5. It marks the matches
// with strings the text cannot hold by chance (a random nonce), which then
// become « and », after the text's own « and » became ‹ and ›.
func attachSnippets(q queryer, match string, _ []searchTerm, hits []*SearchHit) error {
	if len(hits) == 0 {
		return nil
	}
	nonce := make([]byte, 12)
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	open, shut := "\uE000"+hex.EncodeToString(nonce), "\uE001"+hex.EncodeToString(nonce)
	marks := strings.NewReplacer("«", "‹", "»", "›", open, "«", shut, "»")
	bySeq, seqs := byKey(hits, func(h *SearchHit) int64 { return h.Seq })
	low, high := hits[0].Seq, hits[0].Seq
	for _, h := range hits {
		low, high = min(low, h.Seq), max(high, h.Seq)
	}
	// One pass of the match over the page's range of rowids, which FTS5
	// bounds itself: a statement per hit would run the whole match (every
	// term a prefix expands to) once per hit. snippet() and bm25() run for
	// the page's rows only.
	rows, err := q.Query(snippetQuery(len(seqs)), append([]any{open, shut, snippetTokens, match, low, high}, seqs...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var snippet string
		var rank float64
		if err := rows.Scan(&seq, &snippet, &rank); err != nil {
			return err
		}
		bySeq[seq].Snippet, bySeq[seq].Score = marks.Replace(snippet), -rank
	}
	return rows.Err()
}

// snippetQuery is attachSnippets' query for a page of n hits.
func snippetQuery(n int) string {
	return `SELECT rowid, snippet(messages_fts, 0, ?, ?, '…', ?), bm25(messages_fts) FROM messages_fts
		WHERE messages_fts MATCH ? AND rowid >= ? AND rowid <= ? AND +rowid IN ` + inList(n)
}
