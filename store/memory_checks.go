package store

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
)

// The words a memory is described with, and the checks of what a client
// sends to store one: everything that needs no database (insertMemory
// checks the rest).

// The memory vocabularies.
var (
	MemorySystems  = []string{"sensory", "working", "long_term"}
	MemoryTypes    = []string{"iconic", "echoic", "haptic", "episodic", "semantic", "procedural"}
	MemorySegments = []string{"user", "agent", "tool", "guideline"}
	MemoryStatuses = []string{"active", "superseded", "archived"}
	MemoryScopes   = []string{"subject", "organization"}
	// MemoryInputScopes are the scopes a memory may be stored with: the
	// stored ones and "agent", which newer Band servers accept for a memory
	// an agent keeps about itself (it needs no subject_id). chatd stores it
	// as what it is, a subject memory whose subject is the storing agent,
	// so it reads back as scope subject, the documents' enum, with the
	// agent's id as subject_id, and the visibility rule applies unchanged.
	MemoryInputScopes = []string{"subject", "organization", "agent"}
)

// memoryTypesOf pairs each system with the types it holds (the Band SDK's
// memory_types.py): sensory memories are perceptions, the others what was
// lived, known or learnt to do.
var memoryTypesOf = map[string][]string{
	"sensory":   {"iconic", "echoic", "haptic"},
	"working":   {"episodic", "semantic", "procedural"},
	"long_term": {"episodic", "semantic", "procedural"},
}

// The bounds of a memory.
const (
	MaxMemoryContent    = 16384
	MaxMemoryThought    = 4000
	maxMemoryTags       = 32
	maxMemoryTagLen     = 64
	maxMemoryReferences = 32
)

// NewMemory is what CreateMemory (and a supersede with a replacement)
// takes, as the request sent it: nil is absent. Metadata is the raw JSON
// value sent.
type NewMemory struct {
	Content    *string
	System     *string
	Type       *string
	Segment    *string
	Thought    *string
	Scope      *string
	SubjectID  *string
	ChatRoomID *string
	Metadata   json.RawMessage
}

// memoryRow is a NewMemory checked for everything that needs no database.
type memoryRow struct {
	content, system, typ, segment, thought, scope string
	subjectID, chatRoomID                         *string
	aboutSource                                   bool // scope agent: the subject is the storing agent
	metadata                                      sql.NullString
}

// check validates nm, recording problems under the pointer at ("/memory").
func (nm NewMemory) check(at string, p Problems) *memoryRow {
	row := &memoryRow{scope: "subject"}
	required := func(name string, v *string) bool {
		if v == nil {
			p.Add(at+"/"+name, "is required")
			return false
		}
		return true
	}
	enum := func(name string, v *string, allowed []string) string {
		if !required(name, v) || !checkOneOf(p, at+"/"+name, *v, allowed) {
			return ""
		}
		return *v
	}
	if required("content", nm.Content) {
		c, msg := cleanMultiline(*nm.Content, MaxMemoryContent)
		if msg == "" && c == "" {
			msg = "can't be blank"
		}
		if msg != "" {
			p.Add(at+"/content", "%s", msg)
		}
		row.content = c
	}
	if required("thought", nm.Thought) {
		t, msg := cleanMultiline(*nm.Thought, MaxMemoryThought)
		if msg != "" {
			p.Add(at+"/thought", "%s", msg)
		}
		row.thought = t
	}
	row.system = enum("system", nm.System, MemorySystems)
	row.typ = enum("type", nm.Type, MemoryTypes)
	row.segment = enum("segment", nm.Segment, MemorySegments)
	if row.system != "" && row.typ != "" && !oneOf(row.typ, memoryTypesOf[row.system]) {
		p.Add(at+"/type", "%s is not a type of the %s system (use %s)", row.typ, row.system, strings.Join(memoryTypesOf[row.system], ", "))
	}
	if nm.Scope != nil {
		row.scope = enum("scope", nm.Scope, MemoryInputScopes)
	}
	row.checkSubject(nm.SubjectID, at, p)
	if nm.ChatRoomID != nil {
		id := NormalizeID(*nm.ChatRoomID)
		if !ValidID(id) {
			p.Add(at+"/chat_room_id", "must be a UUID")
		}
		row.chatRoomID = &id
	}
	row.metadata = checkMemoryMetadata(nm.Metadata, at+"/metadata", p)
	return row
}

// checkSubject checks the subject_id sent against the memory's scope.
func (row *memoryRow) checkSubject(subjectID *string, at string, p Problems) {
	switch {
	case row.scope == "subject" && subjectID == nil:
		p.Add(at+"/subject_id", "is required for a subject-scope memory")
	case row.scope == "subject":
		id := NormalizeID(*subjectID)
		if !ValidID(id) {
			p.Add(at+"/subject_id", "must be a UUID")
		}
		row.subjectID = &id
	case row.scope == "organization" && subjectID != nil:
		p.Add(at+"/subject_id", "must be absent for an organization-scope memory")
	case row.scope == "agent" && subjectID != nil:
		p.Add(at+"/subject_id", "must be absent for an agent-scope memory (it is about the agent that stores it)")
	case row.scope == "agent":
		row.scope, row.aboutSource = "subject", true
	}
}

// checkMemoryMetadata validates the metadata object (tags and references,
// nothing else: it is searched and shown, not a free-form store) and
// returns it as stored.
func checkMemoryMetadata(raw json.RawMessage, at string, p Problems) sql.NullString {
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return sql.NullString{}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		p.Add(at, "must be an object with tags and references")
		return sql.NullString{}
	}
	out := struct {
		References []string `json:"references,omitempty"`
		Tags       []string `json:"tags,omitempty"`
	}{}
	strs := func(name string, max int) ([]string, bool) {
		v, ok := fields[name]
		if !ok || string(v) == "null" {
			return nil, false
		}
		var list []string
		if err := json.Unmarshal(v, &list); err != nil {
			p.Add(at+"/"+name, "must be an array of strings")
			return nil, false
		}
		if len(list) > max {
			p.Add(at+"/"+name, "must have at most %d items", max)
			return nil, false
		}
		return list, true
	}
	for k := range fields {
		if k != "tags" && k != "references" {
			p.Add(at+Pointer(k), "is not a recognised field (metadata holds tags and references)")
		}
	}
	if tags, ok := strs("tags", maxMemoryTags); ok {
		out.Tags = make([]string, len(tags))
		for i, tag := range tags {
			t, msg := cleanText(tag, 1, maxMemoryTagLen)
			if msg != "" {
				p.Add(at+"/tags/"+strconv.Itoa(i), "%s", msg)
			}
			out.Tags[i] = t
		}
	}
	if refs, ok := strs("references", maxMemoryReferences); ok {
		for i, ref := range refs {
			// Kept in the metadata as chatd spells ids, whatever the case sent.
			if refs[i] = NormalizeID(ref); !ValidID(refs[i]) {
				p.Add(at+"/references/"+strconv.Itoa(i), "must be a memory id (a UUID)")
			}
		}
		out.References = refs
	}
	b, _ := json.Marshal(out)
	return sql.NullString{String: string(b), Valid: true}
}
