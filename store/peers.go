package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
)

// Peer is someone an actor may invite into a room.
type Peer struct {
	ID                string
	Type              PartyType
	Name              string
	Handle            string
	Description       *string
	IsExternal        *bool
	ListedInDirectory bool
	Tags              []string // nil for users
	IsContact         bool
	Source            string // "registry" or "contact"
}

// peersOf returns the SQL of the actor's peers (columns: id, type, name,
// handle, description, is_external, listed, tags, source, is_contact) and
// its arguments. The peer network, exactly:
//
//   - of an agent: its owner, its sibling agents (same owner), global agents,
//     and agents shared with its organization; never itself;
//   - of a human: the other humans of its organization, the agents it owns,
//     and global agents;
//   - of either: its contacts, whatever their organization.
//
// Someone both in the registry and a contact is listed once, as registry.
func peersOf(actor Actor) (string, []any) {
	const userCols = `u.id AS id, 'User' AS type, trim(u.first_name || ' ' || u.last_name) AS name, u.handle AS handle,
		NULL AS description, NULL AS is_external, u.listed_in_directory AS listed, NULL AS tags`
	const agentCols = `a.id, 'Agent', a.name, a.handle, a.description, a.is_external, a.listed_in_directory, a.tags`
	var registry string
	var args []any
	if actor.IsAgent() {
		registry = `SELECT ` + userCols + `, 'registry' AS source FROM users u WHERE u.id = ?
			UNION ALL SELECT ` + agentCols + `, 'registry' FROM agents a WHERE a.deleted_at IS NULL AND a.id != ?
				AND (a.owner_id = ? OR a.is_global = 1 OR (a.shared_with_organization = 1 AND a.organization_id = ?))`
		args = []any{actor.OwnerID, actor.ID, actor.OwnerID, actor.OrganizationID}
	} else {
		registry = `SELECT ` + userCols + `, 'registry' AS source FROM users u WHERE u.organization_id = ? AND u.id != ? AND u.removed_at IS NULL
			UNION ALL SELECT ` + agentCols + `, 'registry' FROM agents a WHERE a.deleted_at IS NULL AND (a.owner_id = ? OR a.is_global = 1)`
		args = []any{actor.OrganizationID, actor.ID, actor.ID}
	}
	contacts := `SELECT ` + userCols + `, 'contact' FROM contacts c JOIN users u ON u.id = c.contact_id WHERE c.owner_id = ? AND u.removed_at IS NULL
		UNION ALL SELECT ` + agentCols + `, 'contact' FROM contacts c JOIN agents a ON a.id = c.contact_id
			WHERE c.owner_id = ? AND a.deleted_at IS NULL`
	args = append(append([]any{actor.ID}, args...), actor.ID, actor.ID)
	// Of someone listed both ways only the registry row is kept: 'registry'
	// sorts after 'contact', so it comes first in source DESC.
	return `SELECT id, type, name, handle, description, is_external, listed, tags, source,
			EXISTS (SELECT 1 FROM contacts k WHERE k.owner_id = ? AND k.contact_id = p.id) AS is_contact
		FROM (SELECT l.*, ROW_NUMBER() OVER (PARTITION BY id ORDER BY source DESC) AS nth
			FROM (` + registry + ` UNION ALL ` + contacts + `) l) p WHERE nth = 1`, args
}

// peerTypeOf returns the type of memberID when it is a peer of the actor,
// and not_found otherwise.
func peerTypeOf(q queryer, actor Actor, memberID string) (PartyType, error) {
	if !ValidID(memberID) {
		return "", notFound("participant")
	}
	peers, args := peersOf(actor)
	var typ PartyType
	err := q.QueryRow(`SELECT type FROM (`+peers+`) peer WHERE id = ?`,
		append(args, memberID)...).Scan(&typ)
	if errors.Is(err, sql.ErrNoRows) {
		return "", notFound("participant")
	}
	return typ, err
}

// PeerFilter narrows ListPeers.
type PeerFilter struct {
	NotInChat string    // leave out who is already in this room (if the actor may read it)
	Type      PartyType // "" for both
}

// ListPeers lists the actor's peers: the registry before contacts, and in
// each people first, then agents, each by name.
func (db *DB) ListPeers(ctx context.Context, actor Actor, f PeerFilter, pr PageRequest) (*Page[*Peer], error) {
	peers, args := peersOf(actor)
	base := `SELECT id, type, name, handle, description, is_external, listed, tags, source, is_contact FROM (` + peers + `) peer`
	var conds []string
	if f.Type != "" {
		conds = append(conds, "type = ?")
		args = append(args, f.Type)
	}
	page := &Page[*Peer]{PageInfo: PageInfo{Before: pr.Offset}}
	err := db.readTx(ctx, func(q readQ) error {
		if f.NotInChat != "" {
			if _, err := loadAccess(q, actor, f.NotInChat); err == nil {
				conds = append(conds, "id NOT IN (SELECT member_id FROM participants WHERE room_id = ?)")
				args = append(args, f.NotInChat)
			} else if ErrorCode(err) != CodeNotFound {
				return err
			}
		}
		if err := q.QueryRow(`SELECT count(*) FROM (`+base+where(conds)+`) listed`, args...).Scan(&page.Total); err != nil {
			return err
		}
		rows, err := q.Query(base+where(conds)+` ORDER BY source DESC, type DESC, lower(name), id LIMIT ? OFFSET ?`,
			append(args, pr.Limit+1, pr.Offset)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p Peer
			var desc, tags sql.NullString
			var ext sql.NullBool
			if err := rows.Scan(&p.ID, &p.Type, &p.Name, &p.Handle, &desc, &ext, &p.ListedInDirectory, &tags, &p.Source, &p.IsContact); err != nil {
				return err
			}
			p.Description = nullString(desc)
			if ext.Valid {
				p.IsExternal = &ext.Bool
			}
			if tags.Valid {
				if err := json.Unmarshal([]byte(tags.String), &p.Tags); err != nil {
					return err
				}
			}
			page.Items = append(page.Items, &p)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if len(page.Items) > pr.Limit {
		page.Items, page.HasMore = page.Items[:pr.Limit], true
	}
	return page, nil
}
