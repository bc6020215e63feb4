package store

import (
	"context"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Reactions: a participant who may post in a room and may see a message
// may react to it with an emoji, at most once with each. Reacting again with the same
// emoji, or taking back one never given, changes nothing and is no error:
// a client retrying after a lost answer must not fail.

// Reaction is one emoji on a message, with who gave it, in the order they
// did.
type Reaction struct {
	Emoji    string
	ActorIDs []string
}

// Bounds on reactions.
const (
	// MaxEmojiBytes bounds an emoji: a family or a flag with its modifiers
	// takes up to about 30 bytes.
	MaxEmojiBytes = 32
	// MaxReactionKinds bounds the different emoji on one message.
	MaxReactionKinds = 20
)

// CheckEmoji says what is wrong with an emoji, or "" when it may be used:
// 1 to MaxEmojiBytes bytes of UTF-8 with neither ASCII (":+1:" and words
// are not emoji), white space nor control characters.
func CheckEmoji(e string) string {
	switch {
	case e == "":
		return "can't be empty"
	case !utf8.ValidString(e):
		return "must be valid UTF-8"
	case len(e) > MaxEmojiBytes:
		return "must be at most 32 bytes: one emoji"
	case strings.IndexFunc(e, func(r rune) bool { return r < utf8.RuneSelf || unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return "must be an emoji, such as 👍: no letters, digits, spaces or control characters"
	}
	return ""
}

// React adds the actor's reaction emoji to a message it may see, in a room
// it may read, and returns the message with its reactions.
func (db *DB) React(ctx context.Context, actor Actor, roomID, messageID, emoji string) (*Message, error) {
	if problem := CheckEmoji(emoji); problem != "" {
		return nil, Problems{"/emoji": {problem}}.Err(CodeValidation)
	}
	return db.changeReaction(ctx, actor, roomID, messageID, func(tx *Tx, m *Message) error {
		for _, r := range m.Reactions {
			if r.Emoji == emoji {
				if contains(r.ActorIDs, actor.ID) {
					return errUnchanged
				}
				return insertReaction(tx, m.Seq, emoji, actor)
			}
		}
		if len(m.Reactions) >= MaxReactionKinds {
			return limitReached("reaction kinds on a message", MaxReactionKinds, len(m.Reactions))
		}
		return insertReaction(tx, m.Seq, emoji, actor)
	})
}

// Unreact takes back the actor's reaction emoji from a message it may see.
func (db *DB) Unreact(ctx context.Context, actor Actor, roomID, messageID, emoji string) (*Message, error) {
	return db.changeReaction(ctx, actor, roomID, messageID, func(tx *Tx, m *Message) error {
		res, err := tx.Exec(`DELETE FROM reactions WHERE message_seq = ? AND emoji = ? AND actor_id = ?`, m.Seq, emoji, actor.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmpErr(err, errUnchanged)
		}
		return nil
	})
}

// errUnchanged ends a change that has nothing to do: the answer is the
// message as it is, and nothing is pushed.
var errUnchanged = errors.New("unchanged")

func insertReaction(tx *Tx, seq int64, emoji string, actor Actor) error {
	_, err := tx.Exec(`INSERT INTO reactions (message_seq, emoji, actor_id, actor_type, inserted_at) VALUES (?, ?, ?, ?, ?)`,
		seq, emoji, actor.ID, actor.Type, tx.Now().UnixMicro())
	return err
}

// changeReaction runs change on a message the actor may see, in a live room
// it may post in, publishes the message after it, and returns it as the
// actor sees it.
func (db *DB) changeReaction(ctx context.Context, actor Actor, roomID, messageID string, change func(*Tx, *Message) error) (*Message, error) {
	var out *Message
	err := db.writeInRoom(ctx, actor, roomID, loadPostAccess, func(tx *Tx, a *roomAccess) error {
		m, err := visibleMessage(tx, actor, roomID, messageID)
		if err != nil {
			return err
		}
		if m.DeletedAt != nil {
			return &Error{Code: CodeConflict, Message: "the message was deleted"}
		}
		if err := attachReactions(tx, []*Message{m}); err != nil {
			return err
		}
		switch err := change(tx, m); {
		case errors.Is(err, errUnchanged):
		case err != nil:
			return err
		default:
			if err := db.publishMessageChange(tx, a.room, m.Seq, ReactionsChanged, nil); err != nil {
				return err
			}
		}
		out, err = messageFor(tx, m.Seq, readerID(actor))
		return err
	})
	return out, err
}

// attachReactions loads the reactions of msgs.
func attachReactions(q queryer, msgs []*Message) error {
	if len(msgs) == 0 {
		return nil
	}
	bySeq, seqs := byKey(msgs, func(m *Message) int64 { return m.Seq })
	rows, err := q.Query(`SELECT message_seq, emoji, actor_id FROM reactions WHERE message_seq IN `+inList(len(seqs))+
		` ORDER BY message_seq, inserted_at, actor_id`, seqs...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for _, m := range msgs {
		m.Reactions = []Reaction{}
	}
	for rows.Next() {
		var seq int64
		var emoji, actor string
		if err := rows.Scan(&seq, &emoji, &actor); err != nil {
			return err
		}
		m := bySeq[seq]
		i := len(m.Reactions) - 1
		for ; i >= 0 && m.Reactions[i].Emoji != emoji; i-- {
		}
		if i < 0 {
			m.Reactions = append(m.Reactions, Reaction{Emoji: emoji})
			i = len(m.Reactions) - 1
		}
		m.Reactions[i].ActorIDs = append(m.Reactions[i].ActorIDs, actor)
	}
	return rows.Err()
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
