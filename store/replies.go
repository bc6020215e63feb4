package store

import (
	"context"
	"database/sql"
	"errors"
	"unicode/utf8"
)

// Replies: a text message may answer another message of its room
// (TextInput.ReplyToID). Readers get a short quote of the parent with the
// reply, when they may see the parent: a person reading the room sees every
// message, an agent only its own and those that mention it, so an agent
// reading a reply to a message it cannot see gets the parent's id alone,
// never its words.

// Quote is what a reply shows of its parent.
type Quote struct {
	ID string
	// Visible is whether the reader may see the parent; the fields below
	// are empty otherwise.
	Visible    bool
	SenderID   string
	SenderType PartyType
	SenderName string
	// Excerpt is the start of the parent's content, at most QuoteLen
	// characters, "…" ending one cut short; "" for a deleted parent.
	Excerpt string
	Deleted bool
}

// QuoteLen bounds a quote's excerpt, in characters.
const QuoteLen = 140

// sees reports whether the reader may see the message at seq, which is in
// a room the reader may read: a person may see all of them (agentID ""),
// an agent its own and those with a delivery for it.
func sees(q queryer, agentID string, seq int64) (bool, error) {
	if agentID == "" {
		return true, nil
	}
	var one int
	err := q.QueryRow(`SELECT 1 FROM messages WHERE seq = ? AND sender_id = ?
		UNION ALL SELECT 1 FROM deliveries WHERE message_seq = ? AND agent_id = ? LIMIT 1`, seq, agentID, seq, agentID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// visibleMessage returns a message of a room the actor may read, when the
// actor may see it (a person no internal type); not found otherwise, as
// for a message that does not exist.
func visibleMessage(q queryer, actor Actor, roomID, messageID string) (*Message, error) {
	if !ValidID(messageID) {
		return nil, notFound("message")
	}
	m, err := scanMessage(q.QueryRow(`SELECT `+messageColumns+` FROM messages m WHERE m.id = ? AND m.room_id = ?`, messageID, roomID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("message")
	}
	if err != nil {
		return nil, err
	}
	if !actor.IsAgent() && IsInternalType(m.Type) {
		return nil, notFound("message")
	}
	agentID := ""
	if actor.IsAgent() {
		agentID = actor.ID
	}
	if ok, err := sees(q, agentID, m.Seq); err != nil || !ok {
		return nil, cmpErr(err, notFound("message"))
	}
	return m, nil
}

// seers are the agents that may see m, whose deliveries are attached: its
// sender, if an agent, and those it mentions.
func seers(m *Message) []string {
	var out []string
	if m.SenderType == PartyAgent {
		out = append(out, m.SenderID)
	}
	for _, d := range m.Deliveries {
		if d.AgentID != m.SenderID {
			out = append(out, d.AgentID)
		}
	}
	return out
}

// cmpErr is err, or else fallback.
func cmpErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}

// resolveReplyTo finds the parent a new message names in id (nil: none): a
// message of the room that the sender may see and that is not deleted. A
// parent it cannot use is a problem at /message/reply_to_id.
func resolveReplyTo(q queryer, c *codedProblems, roomID string, sender Actor, id *string) (*Message, error) {
	if id == nil {
		return nil, nil
	}
	m, err := visibleMessage(q, sender, roomID, NormalizeID(*id))
	switch {
	case ErrorCode(err) == CodeNotFound:
		c.add(CodeValidation, "/message/reply_to_id", "names no message of this room that you can see")
		return nil, nil
	case err != nil:
		return nil, err
	case m.DeletedAt != nil:
		c.add(CodeValidation, "/message/reply_to_id", "names a deleted message")
		return nil, nil
	}
	return m, nil
}

// attachReplies loads the quotes of the parents msgs reply to, as the
// reader (agentID, or "" for a person) may see them.
func attachReplies(q queryer, msgs []*Message, agentID string) error {
	byParent := map[int64][]*Message{}
	var seqs []any
	for _, m := range msgs {
		if m.replyToSeq == 0 {
			continue
		}
		if byParent[m.replyToSeq] == nil {
			seqs = append(seqs, m.replyToSeq)
		}
		byParent[m.replyToSeq] = append(byParent[m.replyToSeq], m)
	}
	if len(seqs) == 0 {
		return nil
	}
	rows, err := q.Query(`SELECT `+messageColumns+` FROM messages m WHERE m.seq IN `+inList(len(seqs)), seqs...)
	if err != nil {
		return err
	}
	parents, err := scanAll(rows, scanMessage)
	if err != nil {
		return err
	}
	for _, p := range parents {
		visible, err := sees(q, agentID, p.Seq)
		if err != nil {
			return err
		}
		quote := quoteOf(p, visible)
		for _, m := range byParent[p.Seq] {
			m.ReplyTo = quote
		}
	}
	return nil
}

// quoteOf is what a reader who may (visible) or may not see p is shown of
// it in a reply.
func quoteOf(p *Message, visible bool) *Quote {
	if !visible {
		return &Quote{ID: p.ID}
	}
	q := &Quote{ID: p.ID, Visible: true, SenderID: p.SenderID, SenderType: p.SenderType, SenderName: p.SenderName,
		Deleted: p.DeletedAt != nil}
	if !q.Deleted {
		q.Excerpt = excerpt(p.Content, QuoteLen)
	}
	return q
}

// excerpt is the start of s, at most n characters, "…" ending one cut
// short.
func excerpt(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// ListReplies lists the replies to a message the actor may see, oldest
// first, as the actor may see them (an agent: its own and those that
// mention it).
func (db *DB) ListReplies(ctx context.Context, actor Actor, roomID, messageID string, pr PageRequest) (*Page[*Message], error) {
	var parent *Message
	err := db.readTx(ctx, func(q readQ) error {
		if _, err := loadAccess(q, actor, roomID); err != nil {
			return err
		}
		var err error
		parent, err = visibleMessage(q, actor, roomID, messageID)
		return err
	})
	if err != nil {
		return nil, err
	}
	conds, args := []string{"m.reply_to_seq = ?"}, []any{parent.Seq}
	agentID := ""
	if actor.IsAgent() {
		agentID = actor.ID
		conds = append(conds, `(m.sender_id = ? OR m.seq IN (SELECT message_seq FROM deliveries WHERE agent_id = ? AND room_id = ?))`)
		args = append(args, actor.ID, actor.ID, roomID)
	}
	return db.readMessages(ctx, actor, roomID, agentID, `SELECT `+messageColumns+` FROM messages m`, conds, args,
		sortSpec{column: "m.seq", idCol: "m.id"}, pr)
}
