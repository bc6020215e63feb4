package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Agent is an agent identity. Its handle is "<owner handle>/<slug>".
type Agent struct {
	ID                     string
	OwnerID                string
	OrganizationID         string
	Slug                   string
	Handle                 string
	Name                   string
	Description            *string
	Bio                    *string
	Tags                   []string
	ListedInDirectory      bool
	IsExternal             bool
	IsGlobal               bool
	SharedWithOrganization bool
	InsertedAt             time.Time
	UpdatedAt              time.Time
}

const (
	minAgentNameLen    = 3
	maxDescriptionLen  = 500
	maxBioLen          = 2000
	maxTagLen          = 50
	maxSlugCollisions  = 100 // PickSlug tries slug, slug-2 ... slug-100
	agentColumns       = `a.id, a.owner_id, a.organization_id, a.slug, a.handle, a.name, a.description, a.bio, a.tags, a.listed_in_directory, a.is_external, a.is_global, a.shared_with_organization, a.inserted_at, a.updated_at`
	liveAgent          = `a.deleted_at IS NULL`
	agentFromLiveAgent = ` FROM agents a WHERE ` + liveAgent
)

func scanAgent(row interface{ Scan(...any) error }) (*Agent, error) {
	var a Agent
	var desc, bio sql.NullString
	var tags string
	var ins, upd int64
	err := row.Scan(&a.ID, &a.OwnerID, &a.OrganizationID, &a.Slug, &a.Handle, &a.Name, &desc, &bio, &tags,
		&a.ListedInDirectory, &a.IsExternal, &a.IsGlobal, &a.SharedWithOrganization, &ins, &upd)
	if err != nil {
		return nil, err
	}
	a.Description, a.Bio = nullString(desc), nullString(bio)
	if err := json.Unmarshal([]byte(tags), &a.Tags); err != nil {
		return nil, err
	}
	if a.Tags == nil {
		a.Tags = []string{}
	}
	a.InsertedAt, a.UpdatedAt = fromMicros(ins), fromMicros(upd)
	return &a, nil
}

// NewAgent is what RegisterAgent needs.
type NewAgent struct {
	OwnerID     string
	Name        string
	Slug        string // optional: derived from Name when empty
	Description string // required: what the agent does, not blank (the Band Python SDK refuses an agent without one)
	Bio         string // optional
	Tags        []string
	APIKey      string // optional: adopt this agent key instead of minting one
	// PickSlug, for callers who cannot choose a slug (the HTTP API): when the
	// derived slug is taken, try slug-2, slug-3, ... instead of failing.
	PickSlug bool
}

// agentRow is a NewAgent checked for everything that needs no database.
type agentRow struct {
	name, description, bio, slug string
	tags                         []string
}

// check validates na and returns its texts trimmed, its slug (derived from
// the name when none was sent) and its tags.
func (na NewAgent) check() (agentRow, error) {
	p := Problems{}
	var row agentRow
	var nameMsg, descMsg, bioMsg string
	row.name, nameMsg = cleanText(na.Name, minAgentNameLen, maxNameLen)
	row.description, descMsg = cleanDescription(na.Description)
	row.bio, bioMsg = cleanMultiline(na.Bio, maxBioLen)
	for ptr, msg := range map[string]string{"/agent/name": nameMsg, "/agent/description": descMsg, "/agent/bio": bioMsg} {
		if msg != "" {
			p.Add(ptr, "%s", msg)
		}
	}
	row.slug = strings.TrimSpace(na.Slug)
	if row.slug != "" {
		if msg := ValidHandle(row.slug); msg != "" {
			p.Add("/agent/slug", "%s", msg)
		}
	} else if bioMsg == "" && row.name != "" {
		// This waits on the bio's check, not the name's: so RegisterAgent
		// has always answered (a refused bio hides "cannot be derived"),
		// though the name's check looks like what was meant.
		if row.slug = DeriveSlug(row.name); row.slug == "" {
			p.Add("/agent/slug", "cannot be derived from the name; choose one")
		}
	}
	row.tags = cleanTags(na.Tags, p)
	return row, p.Err(CodeValidation)
}

// cleanDescription trims an agent's description and reports what is wrong
// with it: it is required, since the Band Python SDK refuses to start an
// agent whose profile has none, and must show something (not only spaces or
// invisible characters), in at most maxDescriptionLen characters on one line.
func cleanDescription(s string) (string, string) {
	d, msg := cleanText(s, 1, maxDescriptionLen)
	if msg == "" && IsBlank(d) {
		msg = "can't be blank or only invisible characters"
	}
	return d, msg
}

// cleanTags trims each tag and drops those that repeat an earlier one
// without regard to case.
func cleanTags(tags []string, p Problems) []string {
	out := make([]string, 0, len(tags))
	seen := map[string]bool{}
	for i, t := range tags {
		t, msg := cleanText(t, 1, maxTagLen)
		if msg != "" {
			p.Add(Pointer("agent", "tags", i), "%s", msg)
			continue
		}
		if !seen[strings.ToLower(t)] {
			seen[strings.ToLower(t)] = true
			out = append(out, t)
		}
	}
	return out
}

// RegisterAgent creates an external agent owned by a human, with its API
// key, in one transaction, and returns the agent and the key.
func (db *DB) RegisterAgent(ctx context.Context, na NewAgent) (*Agent, string, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, "", err
	}
	row, err := na.check()
	if err != nil {
		return nil, "", err
	}
	if len(row.tags) > db.limits.TagsPerAgent {
		return nil, "", limitReached("agent tags", db.limits.TagsPerAgent, len(row.tags))
	}
	var agent *Agent
	var key string
	err = db.Write(ctx, func(tx *Tx) error {
		owner, err := readAgentOwner(tx, na.OwnerID)
		if err != nil {
			return err
		}
		if err := db.ownerMayAddAgent(tx, owner); err != nil {
			return err
		}
		slug, err := freeSlug(tx, owner.handle, row.slug, na.PickSlug)
		if err != nil {
			return err
		}
		id, err := insertAgent(tx, owner, slug, row)
		if err != nil {
			return err
		}
		if key, err = insertKey(tx, AgentKey, id, na.APIKey); err != nil {
			return err
		}
		agent, err = scanAgent(tx.QueryRow(`SELECT `+agentColumns+` FROM agents a WHERE a.id = ?`, id))
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return agent, key, nil
}

// agentOwner is the person a new agent belongs to: its handle is the first
// part of the agent's, and the agent joins its organization.
type agentOwner struct {
	id, handle, organizationID string
}

func readAgentOwner(tx *Tx, id string) (agentOwner, error) {
	owner := agentOwner{id: id}
	err := tx.QueryRow(`SELECT handle, organization_id FROM users WHERE id = ?`, id).Scan(&owner.handle, &owner.organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return owner, notFound("owner")
	}
	return owner, err
}

// ownerMayAddAgent checks the owner's quota of live agents.
func (db *DB) ownerMayAddAgent(tx *Tx, owner agentOwner) error {
	var owned int
	if err := tx.QueryRow(`SELECT count(*) FROM agents a WHERE a.owner_id = ? AND `+liveAgent, owner.id).Scan(&owned); err != nil {
		return err
	}
	if owned >= db.limits.AgentsPerUser {
		return limitReached("agents", db.limits.AgentsPerUser, owned)
	}
	return nil
}

// insertAgent stores an external agent and returns its id.
func insertAgent(tx *Tx, owner agentOwner, slug string, row agentRow) (string, error) {
	tagsJSON, _ := json.Marshal(row.tags)
	ts, id := tx.Now().UnixMicro(), newID()
	_, err := tx.Exec(`INSERT INTO agents (id, owner_id, organization_id, slug, handle, name, description, bio, tags, is_external, inserted_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
		id, owner.id, owner.organizationID, slug, owner.handle+"/"+slug, row.name,
		row.description, sql.NullString{String: row.bio, Valid: row.bio != ""},
		string(tagsJSON), ts, ts)
	return id, err
}

// freeSlug returns slug if "<owner>/<slug>" is free, or with pick the first
// free slug-N; otherwise a conflict.
func freeSlug(tx *Tx, ownerHandle, slug string, pick bool) (string, error) {
	for n := 1; n <= maxSlugCollisions; n++ {
		candidate := slug
		if n > 1 {
			suffix := "-" + strconv.Itoa(n)
			candidate = strings.TrimRight(slug[:min(len(slug), maxSlugLen-len(suffix))], "-_.") + suffix
		}
		var taken int
		err := tx.QueryRow(`SELECT count(*) FROM agents a WHERE a.handle = ? AND `+liveAgent, ownerHandle+"/"+candidate).Scan(&taken)
		if err != nil {
			return "", err
		}
		if taken == 0 {
			return candidate, nil
		}
		if !pick {
			break
		}
	}
	return "", &Error{Code: CodeConflict, Message: "handle " + ownerHandle + "/" + slug + " is already taken",
		Details: Problems{"/agent/slug": {"is already taken"}}}
}

// AgentByID returns a live agent.
func (db *DB) AgentByID(ctx context.Context, id string) (*Agent, error) {
	a, err := scanAgent(db.queryRow(ctx, `SELECT `+agentColumns+agentFromLiveAgent+` AND a.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("agent")
	}
	return a, err
}

// AgentFilter narrows ListOwnedAgents.
type AgentFilter struct {
	Name              string // case-insensitive substring of the name
	IsExternal        *bool
	ListedInDirectory *bool
	Sort              string // "inserted_at" (default), "updated_at" or "name"
	Descending        bool
}

// AgentSorts are the sortable fields of ListOwnedAgents.
var AgentSorts = []string{"inserted_at", "updated_at", "name"}

func agentSort(f AgentFilter) sortSpec {
	s := sortSpec{column: "a.inserted_at", idCol: "a.id", descend: f.Descending}
	switch f.Sort {
	case "updated_at":
		s.column = "a.updated_at"
	case "name":
		// lower(), as PostgreSQL has no NOCASE; both fold ASCII only, as
		// SQLite's NOCASE does.
		s.column, s.isText = "lower(a.name)", true
	}
	return s
}

// AgentKeyset is the paging position just after a.
func AgentKeyset(a *Agent, sort string) *Keyset {
	switch sort {
	case "updated_at":
		return &Keyset{Int: a.UpdatedAt.UnixMicro(), ID: a.ID}
	case "name":
		return &Keyset{Str: a.Name, ID: a.ID}
	}
	return &Keyset{Int: a.InsertedAt.UnixMicro(), ID: a.ID}
}

// ListOwnedAgents lists the live agents a human owns.
func (db *DB) ListOwnedAgents(ctx context.Context, ownerID string, f AgentFilter, pr PageRequest) (*Page[*Agent], error) {
	conds := []string{liveAgent, "a.owner_id = ?"}
	args := []any{ownerID}
	if f.Name != "" {
		// Folded on both sides: PostgreSQL's LIKE minds case, SQLite's not.
		conds = append(conds, `lower(a.name) LIKE lower(?) ESCAPE '\'`)
		args = append(args, "%"+likeEscape(f.Name)+"%")
	}
	if f.IsExternal != nil {
		conds = append(conds, "a.is_external = ?")
		args = append(args, boolInt(*f.IsExternal))
	}
	if f.ListedInDirectory != nil {
		conds = append(conds, "a.listed_in_directory = ?")
		args = append(args, boolInt(*f.ListedInDirectory))
	}
	if f.Sort == "name" && pr.After != nil {
		// The cursor holds the name as it is; the listing compares names folded.
		after := *pr.After
		after.Str = lowerASCII(after.Str)
		pr.After = &after
	}
	page, err := listPage(ctx, db, `SELECT `+agentColumns+` FROM agents a`, conds, args, agentSort(f), pr, scanAgent)
	if err != nil {
		return nil, err
	}
	if n := len(page.Items); n > 0 {
		page.Next = AgentKeyset(page.Items[n-1], f.Sort)
	}
	return page, nil
}

// DeletedAgent reports what DeleteAgent removed.
type DeletedAgent struct {
	Agent             *Agent
	ExecutionsDeleted int
}

// DeleteAgent deletes an agent its caller owns. Its keys are revoked at once,
// it leaves every room, its webhooks are removed, and its handle is freed; the row stays so that what
// it wrote keeps a sender. An agent that has processed messages (has
// execution history) is only deleted with force, which also deletes that
// history. Where the agent was a room's last owner, its owner takes over the
// room, so no room is left without an owner.
//
// An agent the caller can see but does not own is forbidden; one the caller
// cannot see is not found.
func (db *DB) DeleteAgent(ctx context.Context, caller *User, agentID string, force bool) (*DeletedAgent, error) {
	if !ValidID(agentID) {
		return nil, notFound("agent")
	}
	var out *DeletedAgent
	err := db.Write(ctx, func(tx *Tx) error {
		var err error
		out, err = db.deleteAgent(tx, caller, agentID, force)
		return err
	})
	return out, err
}

// deleteAgent is DeleteAgent inside the caller's transaction, so that a bulk
// deletion item runs the very same rules and after-commit effects.
func (db *DB) deleteAgent(tx *Tx, caller *User, agentID string, force bool) (*DeletedAgent, error) {
	a, err := ownedAgent(tx, caller, agentID, "delete it")
	if err != nil {
		return nil, err
	}
	var executions int
	if err := tx.QueryRow(`SELECT count(*) FROM deliveries WHERE agent_id = ? AND current_attempt > 0`, a.ID).Scan(&executions); err != nil {
		return nil, err
	}
	if executions > 0 && !force {
		return nil, Problems{"/force": {"must be true to delete an agent that has processed messages (that history is deleted with it)"}}.
			Err(CodeExecutionHistoryExists)
	}
	out := &DeletedAgent{Agent: a}
	if force {
		out.ExecutionsDeleted = executions
		if _, err := tx.Exec(`DELETE FROM deliveries WHERE agent_id = ?`, a.ID); err != nil {
			return nil, err
		}
	}
	if err := db.leaveAllRooms(tx, a.ID, caller.ID); err != nil {
		return nil, err
	}
	if err := db.dropContactsOf(tx, a.ID); err != nil {
		return nil, err
	}
	if err := deleteAgentMemories(tx, a.ID); err != nil {
		return nil, err
	}
	// Its webhooks go with it, queue and log: nothing is sent for an agent
	// that no longer exists.
	if _, err := tx.Exec(`DELETE FROM webhook_endpoints WHERE agent_id = ?`, a.ID); err != nil {
		return nil, err
	}
	ts := tx.Now().UnixMicro()
	// Its delegations end with it; their tokens were refused from here on
	// anyway, and the listing should say so.
	if _, err := tx.Exec(`UPDATE delegations SET revoked_at = ? WHERE agent_id = ? AND revoked_at IS NULL`, ts, a.ID); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(`UPDATE agents SET deleted_at = ?, updated_at = ? WHERE id = ?`, ts, ts, a.ID); err != nil {
		return nil, err
	}
	if _, err = tx.Exec(`DELETE FROM api_keys WHERE agent_id = ?`, a.ID); err != nil {
		return nil, err
	}
	db.endCredentials(tx)
	db.publish(tx, Change{Kind: AgentDeleted, Agent: a})
	return out, nil
}

// RotateAgentKey replaces every API key of an agent the caller owns with
// one new key, in one transaction, and returns the agent and the key (shown
// this once; chatd keeps only its digest). The earlier keys stop working at
// once, and the agent's connections that authenticated with one of them are
// closed (CredentialsEnded). Delegated tokens the agent obtained with an
// earlier key (exchanged delegations still live) end too, since whoever held
// the old key may hold them; pending grants stay, as exchanging one takes
// the new key. The agent keeps its rooms, contacts, memories and history.
//
// Another person's agent is not found, as an unknown one, even one the
// caller can see (a global or shared agent): only its owner may mint it a key.
func (db *DB) RotateAgentKey(ctx context.Context, caller *User, agentID string) (*Agent, string, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, "", err
	}
	if !ValidID(agentID) {
		return nil, "", notFound("agent")
	}
	var agent *Agent
	var key string
	err := db.Write(ctx, func(tx *Tx) error {
		a, err := scanAgent(tx.QueryRow(`SELECT `+agentColumns+agentFromLiveAgent+` AND a.id = ? AND a.owner_id = ?`,
			agentID, caller.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("agent")
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM api_keys WHERE agent_id = ?`, a.ID); err != nil {
			return err
		}
		if key, err = insertKey(tx, AgentKey, a.ID, ""); err != nil {
			return err
		}
		ts := tx.Now().UnixMicro()
		if _, err := tx.Exec(`UPDATE delegations SET revoked_at = ? WHERE agent_id = ? AND revoked_at IS NULL
			AND exchanged_at IS NOT NULL AND exchanged_at + token_ttl > ?`, ts, a.ID, ts); err != nil {
			return err
		}
		db.endCredentials(tx)
		db.publish(tx, Change{Kind: CredentialsEnded, Agent: a})
		agent = a
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return agent, key, nil
}

// ownedAgent returns a live agent the caller owns. An agent the caller can
// see but does not own (a global or shared one) is 403 ("only the owner may
// <what>"); one it cannot see is 404.
func ownedAgent(q queryer, caller *User, agentID, what string) (*Agent, error) {
	if !ValidID(agentID) {
		return nil, notFound("agent")
	}
	a, err := scanAgent(q.QueryRow(`SELECT `+agentColumns+agentFromLiveAgent+` AND a.id = ?
		AND (a.owner_id = ? OR a.is_global = 1 OR (a.shared_with_organization = 1 AND a.organization_id = ?))`,
		agentID, caller.ID, caller.OrganizationID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("agent")
	}
	if err != nil {
		return nil, err
	}
	if a.OwnerID != caller.ID {
		return nil, &Error{Code: CodeForbidden, Message: "only the owner of an agent may " + what}
	}
	return a, nil
}

// leaveAllRooms removes a deleted agent or a removed person (memberID) from
// their rooms; where they were the last owner, heirID (the agent's owner,
// the admin who removed the person) becomes an owner of the room.
func (db *DB) leaveAllRooms(tx *Tx, memberID, heirID string) error {
	rows, err := tx.Query(`SELECT `+roomColumns+` FROM rooms r JOIN participants p ON p.room_id = r.id
		WHERE p.member_id = ? AND r.deleted_at IS NULL`, memberID)
	if err != nil {
		return err
	}
	rooms, err := scanAll(rows, scanRoom)
	if err != nil {
		return err
	}
	for _, room := range rooms {
		member, err := participant(tx, room.ID, memberID)
		if err != nil {
			return err
		}
		if keepAnOwner(tx, member, "remove") != nil {
			if err := db.promoteToOwner(tx, room, heirID); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(`DELETE FROM participants WHERE room_id = ? AND member_id = ?`, room.ID, memberID); err != nil {
			return err
		}
		db.publish(tx, Change{Kind: ParticipantRemoved, Room: room, Member: member})
		db.publish(tx, Change{Kind: RoomRemoved, Room: room, Member: member})
	}
	return nil
}

// promoteToOwner makes a user an active owner of a room, adding them if
// they are not in it.
func (db *DB) promoteToOwner(tx *Tx, room *Room, userID string) error {
	existing, err := participant(tx, room.ID, userID)
	switch {
	case err == nil:
		_, err = tx.Exec(`UPDATE participants SET role = 'owner', status = 'active', updated_at = ? WHERE room_id = ? AND member_id = ?`,
			tx.Now().UnixMicro(), room.ID, userID)
		if err == nil && existing.Status != "active" {
			existing.Role, existing.Status = "owner", "active"
			db.publish(tx, Change{Kind: RoomAdded, Room: room, Member: existing})
		}
		return err
	case ErrorCode(err) != CodeNotFound:
		return err
	}
	added, err := insertParticipant(tx, room.ID, userID, false, "owner")
	if err != nil {
		return err
	}
	db.publish(tx, Change{Kind: ParticipantAdded, Room: room, Member: added})
	db.publish(tx, Change{Kind: RoomAdded, Room: room, Member: added})
	return nil
}
