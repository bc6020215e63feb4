package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Memories are what agents learn and keep: a content, how it is remembered
// (system, type, segment), why (thought), and whom it is about.
//
// Who sees a memory (the visibility rule, decided in every query, so that a
// memory the caller may not see reads as missing, 404, never 403):
//
//   - Nothing is ever visible outside the memory's organization.
//   - An organization-scope memory is visible to every person and agent of
//     its organization.
//   - A subject-scope memory is visible to its subject (a person or an
//     agent); to the agent that stored it (its source); to the person who
//     owns the source agent and to that person's other agents (the agents of
//     one owner share what they learn); and, when the subject is an agent,
//     to the person who owns the subject agent.
//
// Who changes a memory: through the Agent API only its source agent
// (archive, supersede); through the Human API only the person it is about
// (archive, restore, supersede, delete). Any other caller that sees the
// memory gets 403.
//
// Lifecycle: active -> archived (archive) -> active (restore); active or
// archived -> superseded (supersede), which is final. Superseding may store
// the replacement in the same transaction and record its id in
// superseded_by.

// Memory is one stored memory.
type Memory struct {
	ID             string
	OrganizationID string
	SourceAgentID  string
	Scope          string // subject, organization
	SubjectID      *string
	ChatRoomID     *string // the room the memory was stored from, when given
	System         string
	Type           string
	Segment        string
	Content        string
	Thought        *string
	Metadata       json.RawMessage // nil when none; otherwise an object of tags and references
	Status         string          // active, superseded, archived
	SupersededBy   *string
	InsertedAt     time.Time
	UpdatedAt      time.Time
	// SourceAgent and Subject name the agent that stored the memory and
	// whom it is about, read in the same query. SourceAgent is nil when the
	// agent was deleted; Subject when the memory has no subject or its
	// subject no longer exists. Either is nil, too, for anyone outside the
	// memory's organization (which storing never lets in): no name crosses
	// organizations.
	SourceAgent *MemoryParty
	Subject     *MemoryParty
}

// MemoryParty names a memory's source agent or subject.
type MemoryParty struct {
	ID     string
	Type   PartyType
	Name   string
	Handle string
}

// memoryColumns are a memory's columns, then the names of its source agent
// (sa) and subject (a person su or an agent sg), NULL where memoryFrom's
// joins find no one to name.
const memoryColumns = `m.id, m.organization_id, m.source_agent_id, m.scope, m.subject_id, m.chat_room_id, m.system, m.type,
	m.segment, m.content, m.thought, m.metadata, m.status, m.superseded_by, m.inserted_at, m.updated_at,
	CASE WHEN sa.deleted_at IS NULL AND sa.organization_id = m.organization_id THEN sa.name END, sa.handle,
	su.id, trim(su.first_name || ' ' || su.last_name), su.handle, sg.id, sg.name, sg.handle`

// memoryFrom joins the source agent as sa, which the visibility rule needs,
// and the subject, for its name: as a person (su) or a live agent (sg) of
// the memory's own organization only, so that a name never comes from
// another organization.
const memoryFrom = ` FROM memories m JOIN agents sa ON sa.id = m.source_agent_id
	LEFT JOIN users su ON su.id = m.subject_id AND su.organization_id = m.organization_id
	LEFT JOIN agents sg ON sg.id = m.subject_id AND sg.organization_id = m.organization_id AND sg.deleted_at IS NULL`

func scanMemory(row interface{ Scan(...any) error }) (*Memory, error) {
	var m Memory
	var subject, room, thought, meta, by sql.NullString
	var saName, saHandle, suID, suName, suHandle, sgID, sgName, sgHandle sql.NullString
	var ins, upd int64
	err := row.Scan(&m.ID, &m.OrganizationID, &m.SourceAgentID, &m.Scope, &subject, &room, &m.System, &m.Type,
		&m.Segment, &m.Content, &thought, &meta, &m.Status, &by, &ins, &upd,
		&saName, &saHandle, &suID, &suName, &suHandle, &sgID, &sgName, &sgHandle)
	if err != nil {
		return nil, err
	}
	m.SubjectID, m.ChatRoomID, m.Thought, m.SupersededBy = nullString(subject), nullString(room), nullString(thought), nullString(by)
	if meta.Valid {
		m.Metadata = json.RawMessage(meta.String)
	}
	m.InsertedAt, m.UpdatedAt = fromMicros(ins), fromMicros(upd)
	if saName.Valid {
		m.SourceAgent = &MemoryParty{ID: m.SourceAgentID, Type: PartyAgent, Name: saName.String, Handle: saHandle.String}
	}
	switch {
	case suID.Valid:
		m.Subject = &MemoryParty{ID: suID.String, Type: PartyUser, Name: suName.String, Handle: suHandle.String}
	case sgID.Valid:
		m.Subject = &MemoryParty{ID: sgID.String, Type: PartyAgent, Name: sgName.String, Handle: sgHandle.String}
	}
	return &m, nil
}

// visibleMemories is the visibility rule as a condition on m (and sa, its
// source agent); its arguments follow. The source agent itself needs no
// clause of its own: its owner is its OwnerID.
func visibleMemories(actor Actor) (string, []any) {
	cond := `m.organization_id = ? AND (m.scope = 'organization' OR m.subject_id = ? OR sa.owner_id = ?`
	args := []any{actor.OrganizationID, actor.ID, actor.OwnerID}
	if !actor.IsAgent() {
		cond += ` OR EXISTS (SELECT 1 FROM agents sj WHERE sj.id = m.subject_id AND sj.owner_id = ?)`
		args = append(args, actor.ID)
	}
	return cond + `)`, args
}

// loadMemory returns a memory the actor sees, or not_found.
func loadMemory(q queryer, actor Actor, id string) (*Memory, error) {
	if !ValidID(id) {
		return nil, notFound("memory")
	}
	cond, args := visibleMemories(actor)
	m, err := scanMemory(q.QueryRow(`SELECT `+memoryColumns+memoryFrom+` WHERE m.id = ? AND `+cond, append([]any{id}, args...)...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("memory")
	}
	return m, err
}

func memoryByID(q queryer, id string) (*Memory, error) {
	return scanMemory(q.QueryRow(`SELECT `+memoryColumns+memoryFrom+` WHERE m.id = ?`, id))
}

// Memory returns a memory the actor sees.
func (db *DB) Memory(ctx context.Context, actor Actor, id string) (*Memory, error) {
	var m *Memory
	err := db.readTx(ctx, func(q readQ) error {
		var err error
		m, err = loadMemory(q, actor, id)
		return err
	})
	return m, err
}

// MemoryFilter narrows ListMemories. Zero values do not filter.
type MemoryFilter struct {
	// Scope: subject (about SubjectID), organization, about_me (about the
	// actor), room (stored from a room the actor can read), all or "". With
	// all or "" and a SubjectID: the memories about SubjectID and the
	// organization-wide ones.
	Scope      string
	SubjectID  string
	ChatRoomID string // stored from this room
	System     string
	Type       string
	Segment    string
	Status     string // "" for any
	// ContentQuery, when not nil, is a full-text search (see memorySearch).
	ContentQuery *string
}

// MemoryKeyset is the paging position just after m.
func MemoryKeyset(m *Memory) *Keyset { return &Keyset{Int: m.InsertedAt.UnixMicro(), ID: m.ID} }

// ListMemories lists the memories the actor sees, newest first.
func (db *DB) ListMemories(ctx context.Context, actor Actor, f MemoryFilter, pr PageRequest) (*Page[*Memory], error) {
	cond, args := visibleMemories(actor)
	conds := []string{cond}
	add := func(c string, a ...any) {
		conds = append(conds, c)
		args = append(args, a...)
	}
	switch {
	case f.Scope == "subject":
		add(`m.scope = 'subject' AND m.subject_id = ?`, f.SubjectID)
	case f.Scope == "organization":
		add(`m.scope = 'organization'`)
	case f.Scope == "about_me":
		add(`m.subject_id = ?`, actor.ID)
	case f.Scope == "room":
		readable, rargs := readableRooms(actor, true)
		add(`EXISTS (SELECT 1 FROM rooms r WHERE r.id = m.chat_room_id AND r.deleted_at IS NULL AND `+readable+`)`, rargs...)
	case f.SubjectID != "":
		add(`(m.subject_id = ? OR m.scope = 'organization')`, f.SubjectID)
	}
	if f.ChatRoomID != "" {
		add(`m.chat_room_id = ?`, f.ChatRoomID)
	}
	for _, eq := range []struct{ col, v string }{{"m.system", f.System}, {"m.type", f.Type}, {"m.segment", f.Segment}, {"m.status", f.Status}} {
		if eq.v != "" {
			add(eq.col+` = ?`, eq.v)
		}
	}
	if f.ContentQuery != nil {
		terms, msg := memorySearchTerms(*f.ContentQuery)
		if msg != "" {
			return nil, Problems{"/content_query": {msg}}.Err(CodeValidation)
		}
		match, err := db.dialect.search.match(db.rowReader(ctx), terms)
		if err != nil {
			return nil, err
		}
		add(db.dialect.search.memoryMatches, match)
	}
	sort := sortSpec{column: "m.inserted_at", idCol: "m.id", descend: true}
	page, err := listPage(ctx, db, `SELECT `+memoryColumns+memoryFrom, conds, args, sort, pr, scanMemory)
	if err != nil {
		return nil, err
	}
	if n := len(page.Items); n > 0 {
		page.Next = MemoryKeyset(page.Items[n-1])
	}
	return page, nil
}

// The bounds of a content query, so that one search stays cheap.
const (
	maxMemorySearchLen    = 1000
	maxMemorySearchTokens = 32
)

// memorySearchTerms reads what a person typed: every word (split at spaces
// and control characters) is a phrase of its own, so operators (OR, NOT,
// NEAR, column filters, parentheses) are plain words, and the words must
// all match. A word ending in * matches as a prefix. It returns the terms,
// or what is wrong with the input.
func memorySearchTerms(s string) ([]searchTerm, string) {
	if !utf8.ValidString(s) {
		return nil, "must be valid UTF-8"
	}
	if utf8.RuneCountInString(s) > maxMemorySearchLen {
		return nil, "must be at most " + strconv.Itoa(maxMemorySearchLen) + " characters long"
	}
	words := strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
	switch {
	case len(words) == 0:
		return nil, "must contain at least one word"
	case len(words) > maxMemorySearchTokens:
		return nil, "must contain at most " + strconv.Itoa(maxMemorySearchTokens) + " words"
	}
	terms := make([]searchTerm, len(words))
	for i, w := range words {
		terms[i].text = w
		if t := strings.TrimRight(w, "*"); t != "" && t != w {
			terms[i] = searchTerm{text: t, prefix: true}
		}
	}
	return terms, ""
}

// CreateMemory stores a memory with the actor, an agent, as its source.
func (db *DB) CreateMemory(ctx context.Context, actor Actor, nm NewMemory) (*Memory, error) {
	if !actor.IsAgent() {
		return nil, &Error{Code: CodeForbidden, Message: "only agents store memories"}
	}
	p := Problems{}
	row := nm.check("/memory", p)
	if err := p.Err(CodeValidation); err != nil {
		return nil, err
	}
	var m *Memory
	err := db.Write(ctx, func(tx *Tx) error {
		var err error
		m, err = db.insertMemory(tx, actor, row, "/memory")
		return err
	})
	return m, err
}

// insertMemory checks what row refers to (its subject and room), the
// source agent's quota, and stores it.
func (db *DB) insertMemory(tx *Tx, actor Actor, row *memoryRow, at string) (*Memory, error) {
	if row.aboutSource {
		id := actor.ID
		row.subjectID = &id
	}
	p := Problems{}
	if row.subjectID != nil {
		var n int
		err := tx.QueryRow(`SELECT (SELECT count(*) FROM users WHERE id = ?1 AND organization_id = ?2 AND removed_at IS NULL)
			+ (SELECT count(*) FROM agents WHERE id = ?1 AND organization_id = ?2 AND deleted_at IS NULL)`,
			*row.subjectID, actor.OrganizationID).Scan(&n)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			// The same answer for an id of another organization as for no
			// one at all: a foreign id is not confirmed.
			p.Add(at+"/subject_id", "must be a person or agent of your organization")
		}
	}
	if row.chatRoomID != nil {
		_, err := loadAccess(tx, actor, *row.chatRoomID)
		switch {
		case ErrorCode(err) == CodeNotFound:
			p.Add(at+"/chat_room_id", "must be a chat room you participate in")
		case err != nil:
			return nil, err
		}
	}
	if err := p.Err(CodeValidation); err != nil {
		return nil, err
	}
	var stored int
	if err := tx.QueryRow(`SELECT count(*) FROM memories WHERE source_agent_id = ?`, actor.ID).Scan(&stored); err != nil {
		return nil, err
	}
	if stored >= db.limits.MemoriesPerAgent {
		return nil, limitReached("memories", db.limits.MemoriesPerAgent, stored)
	}
	id, ts := newID(), tx.Now().UnixMicro()
	_, err := tx.Exec(`INSERT INTO memories (id, organization_id, source_agent_id, scope, subject_id, chat_room_id, system, type,
		segment, content, thought, metadata, inserted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, actor.OrganizationID, actor.ID, row.scope, toNullString(row.subjectID), toNullString(row.chatRoomID), row.system, row.typ,
		row.segment, row.content, row.thought, row.metadata, ts, ts)
	if err != nil {
		return nil, err
	}
	return memoryByID(tx, id)
}

// mayChangeMemory returns nil when the actor may change m (see the rule at
// the top of this file).
func mayChangeMemory(actor Actor, m *Memory) error {
	if actor.IsAgent() {
		if m.SourceAgentID != actor.ID {
			return &Error{Code: CodeForbidden, Message: "only the agent that stored a memory may change it"}
		}
		return nil
	}
	if m.SubjectID == nil || *m.SubjectID != actor.ID {
		return &Error{Code: CodeForbidden, Message: "you may change only the memories about you"}
	}
	return nil
}

// changeMemory loads a memory the actor may change and applies change, which
// returns the new status ("" to leave the memory as it is).
func (db *DB) changeMemory(ctx context.Context, actor Actor, id string, change func(tx *Tx, m *Memory) (string, error)) (*Memory, error) {
	var out *Memory
	err := db.Write(ctx, func(tx *Tx) error {
		m, err := loadMemory(tx, actor, id)
		if err != nil {
			return err
		}
		if err := mayChangeMemory(actor, m); err != nil {
			return err
		}
		status, err := change(tx, m)
		if err != nil || status == "" {
			out = m
			return err
		}
		if _, err := tx.Exec(`UPDATE memories SET status = ?, superseded_by = ?, updated_at = ? WHERE id = ?`,
			status, toNullString(m.SupersededBy), tx.Now().UnixMicro(), m.ID); err != nil {
			return err
		}
		out, err = memoryByID(tx, m.ID)
		return err
	})
	return out, err
}

// ArchiveMemory archives an active memory; an archived one stays as it is.
func (db *DB) ArchiveMemory(ctx context.Context, actor Actor, id string) (*Memory, error) {
	return db.changeMemory(ctx, actor, id, func(_ *Tx, m *Memory) (string, error) {
		switch m.Status {
		case "archived":
			return "", nil
		case "superseded":
			return "", &Error{Code: CodeValidation, Message: "a superseded memory cannot be archived"}
		}
		return "archived", nil
	})
}

// RestoreMemory makes an archived memory active again.
func (db *DB) RestoreMemory(ctx context.Context, actor Actor, id string) (*Memory, error) {
	return db.changeMemory(ctx, actor, id, func(_ *Tx, m *Memory) (string, error) {
		if m.Status != "archived" {
			return "", &Error{Code: CodeValidation, Message: "only an archived memory can be restored (this one is " + m.Status + ")"}
		}
		return "active", nil
	})
}

// SupersedeMemory marks an active or archived memory superseded. With a
// replacement, it stores that too, in the same transaction, and records it
// in superseded_by: both happen or neither does. The replacement is checked
// as CreateMemory checks a memory, with problems under /memory.
func (db *DB) SupersedeMemory(ctx context.Context, actor Actor, id string, replacement *NewMemory) (*Memory, error) {
	var row *memoryRow
	if replacement != nil {
		if !actor.IsAgent() {
			return nil, &Error{Code: CodeForbidden, Message: "only agents store memories"}
		}
		p := Problems{}
		row = replacement.check("/memory", p)
		if err := p.Err(CodeValidation); err != nil {
			return nil, err
		}
	}
	return db.changeMemory(ctx, actor, id, func(tx *Tx, m *Memory) (string, error) {
		if m.Status == "superseded" {
			return "", &Error{Code: CodeConflict, Message: "the memory is already superseded"}
		}
		if row != nil {
			next, err := db.insertMemory(tx, actor, row, "/memory")
			if err != nil {
				return "", err
			}
			m.SupersededBy = &next.ID
		}
		return "superseded", nil
	})
}

// DeleteMemory deletes a memory for good (its search entry goes with it).
func (db *DB) DeleteMemory(ctx context.Context, actor Actor, id string) error {
	return db.Write(ctx, func(tx *Tx) error {
		m, err := loadMemory(tx, actor, id)
		if err != nil {
			return err
		}
		if err := mayChangeMemory(actor, m); err != nil {
			return err
		}
		_, err = tx.Exec(`DELETE FROM memories WHERE id = ?`, m.ID)
		return err
	})
}

// deleteAgentMemories deletes the memories an agent stored, as deleting the
// agent does. Memories about it that others stored stay theirs.
func deleteAgentMemories(tx *Tx, agentID string) error {
	_, err := tx.Exec(`DELETE FROM memories WHERE source_agent_id = ?`, agentID)
	return err
}
