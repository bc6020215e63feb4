package store

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// Room is a chat room.
type Room struct {
	ID             string
	OrganizationID string
	Title          *string // nil until set or derived from the first message
	TitleLocked    bool    // set by a rename (or a title at creation): the first message no longer titles the room
	TaskID         *string
	Type           string // direct, group, task
	Status         string // active, archived, closed
	CreatorID      string
	CreatorType    PartyType
	LastMessageAt  *time.Time
	MessageCount   int
	InsertedAt     time.Time
	UpdatedAt      time.Time
	// Unread is, for a person reading the room, the chat content others
	// sent after their read marker, at most UnreadCap (see reads.go); 0 for
	// an agent. Set by the reads the Human API renders rooms from.
	Unread int
}

const roomColumns = `r.id, r.organization_id, r.title, r.title_locked, r.task_id, r.type, r.status, r.creator_id, r.creator_type,
	r.last_message_at, r.message_count, r.inserted_at, r.updated_at`

func scanRoom(row interface{ Scan(...any) error }) (*Room, error) { return scanRoomAnd(row) }

// scanRoomWithUnread scans roomColumns followed by an unread count.
func scanRoomWithUnread(row interface{ Scan(...any) error }) (*Room, error) {
	var unread int
	r, err := scanRoomAnd(row, &unread)
	if err != nil {
		return nil, err
	}
	r.Unread = unread
	return r, nil
}

// scanRoomAnd scans roomColumns, then the columns after them into extra.
func scanRoomAnd(row interface{ Scan(...any) error }, extra ...any) (*Room, error) {
	var r Room
	var title, task sql.NullString
	var last sql.NullInt64
	var ins, upd int64
	err := row.Scan(append([]any{&r.ID, &r.OrganizationID, &title, &r.TitleLocked, &task, &r.Type, &r.Status, &r.CreatorID, &r.CreatorType,
		&last, &r.MessageCount, &ins, &upd}, extra...)...)
	if err != nil {
		return nil, err
	}
	r.Title, r.TaskID = nullString(title), nullString(task)
	if last.Valid {
		t := fromMicros(last.Int64)
		r.LastMessageAt = &t
	}
	r.InsertedAt, r.UpdatedAt = fromMicros(ins), fromMicros(upd)
	return &r, nil
}

// NewRoom is what CreateRoom takes; both fields are optional.
type NewRoom struct {
	Title  *string
	TaskID *string
}

// CreateRoom creates a room with the actor as its owner. A title that is
// not blank locks the title; without one, the first message titles the room.
func (db *DB) CreateRoom(ctx context.Context, actor Actor, nr NewRoom) (*Room, error) {
	p := Problems{}
	// No title, an empty one or spaces only means no title: the first
	// message will provide one. Anything else must be a valid title.
	var title *string
	if nr.Title != nil && strings.TrimSpace(*nr.Title) != "" {
		t, msg := CleanTitle(*nr.Title)
		if msg != "" {
			p.Add("/chat/title", "%s", msg)
		}
		title = &t
	}
	if nr.TaskID != nil && !ValidID(*nr.TaskID) {
		p.Add("/chat/task_id", "must be a UUID")
	}
	if err := p.Err(CodeValidation); err != nil {
		return nil, err
	}
	var room *Room
	err := db.Write(ctx, func(tx *Tx) error {
		var owned int
		if err := tx.QueryRow(`SELECT count(*) FROM rooms WHERE quota_owner_id = ? AND deleted_at IS NULL`, actor.OwnerID).Scan(&owned); err != nil {
			return err
		}
		if owned >= db.limits.ChatsPerUser {
			return limitReached("chats", db.limits.ChatsPerUser, owned)
		}
		ts := tx.Now().UnixMicro()
		id := newID()
		_, err := tx.Exec(`INSERT INTO rooms (id, organization_id, title, title_locked, task_id, creator_id, creator_type, quota_owner_id, inserted_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, actor.OrganizationID, toNullString(title), boolInt(title != nil), toNullString(nr.TaskID),
			actor.ID, actor.Type, actor.OwnerID, ts, ts)
		if err != nil {
			return err
		}
		creator, err := insertParticipant(tx, id, actor.ID, actor.IsAgent(), "owner")
		if err != nil {
			return err
		}
		if room, err = scanRoom(tx.QueryRow(`SELECT `+roomColumns+` FROM rooms r WHERE r.id = ?`, id)); err != nil {
			return err
		}
		db.publish(tx, Change{Kind: RoomAdded, Room: room, Member: creator})
		db.publish(tx, Change{Kind: ParticipantAdded, Room: room, Member: creator})
		return nil
	})
	return room, err
}

// Room returns a room the actor may read, with the actor's unread count.
func (db *DB) Room(ctx context.Context, actor Actor, roomID string) (*Room, error) {
	var room *Room
	err := db.readTx(ctx, func(q readQ) error {
		a, err := loadAccess(q, actor, roomID)
		if err != nil {
			return err
		}
		room = a.room
		room.Unread, err = roomUnread(q, actor, roomID)
		return err
	})
	return room, err
}

// RoomFilter narrows ListRooms.
type RoomFilter struct {
	// IncludeAgentRooms also lists, for a human, the rooms where an agent it
	// owns participates.
	IncludeAgentRooms bool
	Status            string // "" for any
	Type              string // "" for any
	Sort              string // "inserted_at" (default) or "updated_at"
	Descending        bool
}

// RoomSorts are the sortable fields of ListRooms.
var RoomSorts = []string{"inserted_at", "updated_at"}

// RoomKeyset is the paging position just after r.
func RoomKeyset(r *Room, sort string) *Keyset {
	if sort == "updated_at" {
		return &Keyset{Int: r.UpdatedAt.UnixMicro(), ID: r.ID}
	}
	return &Keyset{Int: r.InsertedAt.UnixMicro(), ID: r.ID}
}

// ListRooms lists the live rooms the actor participates in (with an active
// row), for a person with their unread count in each, computed in the
// listing's own query.
func (db *DB) ListRooms(ctx context.Context, actor Actor, f RoomFilter, pr PageRequest) (*Page[*Room], error) {
	cond, condArgs := readableRooms(actor, f.IncludeAgentRooms)
	// The unread count is a column of the SELECT, so its arguments come
	// before those of the conditions. The total's count(*) over the same
	// text drops the column unevaluated.
	base, args := `SELECT `+roomColumns+`, 0 FROM rooms r`, condArgs
	if !actor.IsAgent() {
		base, args = `SELECT `+roomColumns+`, `+unreadSQL+` FROM rooms r`, append([]any{actor.ID, actor.ID}, condArgs...)
	}
	conds := []string{"r.deleted_at IS NULL", cond}
	if f.Status != "" {
		conds = append(conds, "r.status = ?")
		args = append(args, f.Status)
	}
	if f.Type != "" {
		conds = append(conds, "r.type = ?")
		args = append(args, f.Type)
	}
	sort := sortSpec{column: "r.inserted_at", idCol: "r.id", descend: f.Descending}
	if f.Sort == "updated_at" {
		sort.column = "r.updated_at"
	}
	page, err := listPage(ctx, db, base, conds, args, sort, pr, scanRoomWithUnread)
	if err != nil {
		return nil, err
	}
	if n := len(page.Items); n > 0 {
		page.Next = RoomKeyset(page.Items[n-1], f.Sort)
	}
	return page, nil
}

// RenameRoom renames a room its actor owns and locks the title. Renaming a
// locked room to the title it has changes nothing.
func (db *DB) RenameRoom(ctx context.Context, actor Actor, roomID, title string) (*Room, error) {
	t, msg := CleanTitle(title)
	if msg != "" {
		return nil, Problems{"/chat/title": {msg}}.Err(CodeValidation)
	}
	var room *Room
	err := db.writeInRoom(ctx, actor, roomID, loadAccess, func(tx *Tx, a *roomAccess) error {
		if !a.isOwner() {
			return &Error{Code: CodeForbidden, Message: "only the owner of the room may rename it"}
		}
		room = a.room
		var err error
		if room.Unread, err = roomUnread(tx, actor, room.ID); err != nil {
			return err
		}
		if room.TitleLocked && room.Title != nil && *room.Title == t {
			return nil
		}
		room.Title, room.TitleLocked, room.UpdatedAt = &t, true, tx.Now()
		if _, err := tx.Exec(`UPDATE rooms SET title = ?, title_locked = 1, updated_at = ? WHERE id = ?`, t, room.UpdatedAt.UnixMicro(), room.ID); err != nil {
			return err
		}
		members, err := roomParticipants(tx, room.ID, "")
		if err != nil {
			return err
		}
		db.publish(tx, Change{Kind: RoomUpdated, Room: room, Members: members})
		return nil
	})
	return room, err
}

// DeleteRoom soft-deletes a room its actor owns: it disappears from every
// listing and read, its files are deleted, and its removal is published to
// everyone in it.
func (db *DB) DeleteRoom(ctx context.Context, actor Actor, roomID string) error {
	return db.Write(ctx, func(tx *Tx) error { return db.deleteRoom(tx, actor, roomID) })
}

// deleteRoom is DeleteRoom inside the caller's transaction, so that a bulk
// deletion item runs the very same rules and publishes the same changes.
func (db *DB) deleteRoom(tx *Tx, actor Actor, roomID string) error {
	a, err := loadAccess(tx, actor, roomID)
	if err != nil {
		return err
	}
	if !a.isOwner() {
		return &Error{Code: CodeForbidden, Message: "only the owner of the room may delete it"}
	}
	members, err := roomParticipants(tx, roomID, "")
	if err != nil {
		return err
	}
	ts := tx.Now()
	if _, err := tx.Exec(`UPDATE rooms SET deleted_at = ?, updated_at = ? WHERE id = ?`, ts.UnixMicro(), ts.UnixMicro(), roomID); err != nil {
		return err
	}
	// The room stays as a tombstone, but nothing can reach its files again:
	// their storage is reclaimed now. Attachment rows go first, since they
	// reference the files.
	if _, err := tx.Exec(`DELETE FROM message_attachments WHERE file_id IN (SELECT id FROM files WHERE room_id = ?)`, roomID); err != nil {
		return err
	}
	if err := deleteFiles(tx, `room_id = ?`, roomID); err != nil {
		return err
	}
	room := a.room
	room.UpdatedAt = ts
	db.publish(tx, Change{Kind: RoomDeleted, Room: room, Members: members})
	for _, m := range members {
		db.publish(tx, Change{Kind: RoomRemoved, Room: room, Member: m})
	}
	return nil
}

// listPage runs a keyset- or offset-paged listing in its own read
// transaction: base is the SELECT without conditions, conds/args its
// filters, sort its order.
func listPage[T any](ctx context.Context, db *DB, base string, conds []string, args []any, sort sortSpec, pr PageRequest,
	scan func(interface{ Scan(...any) error }) (T, error)) (*Page[T], error) {
	var page *Page[T]
	err := db.readTx(ctx, func(q readQ) error {
		var err error
		page, err = listPageIn(q, base, conds, args, sort, pr, scan)
		return err
	})
	return page, err
}

// listPageIn is listPage inside the caller's read transaction.
func listPageIn[T any](q readQ, base string, conds []string, args []any, sort sortSpec, pr PageRequest,
	scan func(interface{ Scan(...any) error }) (T, error)) (*Page[T], error) {
	page := &Page[T]{}
	count := func(conds []string, args []any) (n int, err error) {
		err = q.QueryRow(`SELECT count(*) FROM (`+base+where(conds)+`) AS matching`, args...).Scan(&n)
		return n, err
	}
	pageConds, pageArgs := conds, args
	if cond, cargs := sort.keysetWhere(pr.After); cond != "" {
		pageConds = append(append([]string{}, conds...), cond)
		pageArgs = append(append([]any{}, args...), cargs...)
	}
	if pr.WithTotal {
		var err error
		if page.Total, err = count(conds, args); err != nil {
			return nil, err
		}
		page.Before = pr.Offset
		if pr.After != nil {
			from, err := count(pageConds, pageArgs)
			if err != nil {
				return nil, err
			}
			page.Before += page.Total - from
		}
	}
	rows, err := q.Query(base+where(pageConds)+sort.orderBy()+` LIMIT ? OFFSET ?`, append(pageArgs, pr.Limit+1, pr.Offset)...)
	if err != nil {
		return nil, err
	}
	if page.Items, err = scanAll(rows, scan); err != nil {
		return nil, err
	}
	if len(page.Items) > pr.Limit {
		page.Items, page.HasMore = page.Items[:pr.Limit], true
	}
	return page, nil
}
