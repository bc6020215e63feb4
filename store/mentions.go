package store

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Mentions: how the entries a text message names resolve against the
// room's participants, and how its content @-references a handle.

// Mention is a resolved mention of a participant.
type Mention struct {
	ID     string `json:"id"`
	Handle string `json:"handle"`
	Name   string `json:"name"`
	Kind   string `json:"kind"` // "mention" (delivered) or "reference" (narrative only)
}

// MentionInput is one entry of a message's mentions as the client sent it.
type MentionInput struct {
	ID, Handle, Name *string
	Kind             *string
	KindNull         bool // "kind": null was sent (refused)
}

// mentionCandidates loads the participants of the room that the mentions
// may name: when every entry names an id, only those, so that a post in a
// room of thousands reads a row per mention rather than the whole room;
// when an entry names a handle, every participant.
func mentionCandidates(q queryer, roomID string, in []MentionInput) ([]*Participant, error) {
	ids := make([]any, 0, len(in)+1)
	ids = append(ids, roomID)
	for _, m := range in {
		switch {
		case m.ID != nil && *m.ID != "":
			ids = append(ids, *m.ID)
		case m.Handle != nil:
			return roomParticipants(q, roomID, "")
		}
	}
	if len(ids) == 1 {
		return nil, nil
	}
	rows, err := q.Query(participantSelect+` WHERE p.room_id = ? AND p.member_id IN `+inList(len(ids)-1), ids...)
	if err != nil {
		return nil, err
	}
	return scanAll(rows, scanParticipant)
}

// resolveMentions resolves mentions against the room's participants (by id,
// which wins, or by handle within the room) and appends their problems.
func resolveMentions(c *codedProblems, in []MentionInput, members []*Participant, sender Actor) []Mention {
	byID := map[string]*Participant{}
	byHandle := map[string]*Participant{}
	for _, p := range members {
		byID[p.ID] = p
		if p.Status == "active" { // a blocked participant cannot be addressed
			byHandle[strings.ToLower(p.Handle)] = p
		}
	}
	out := make([]Mention, 0, len(in))
	seen := map[string]int{}
	for i, m := range in {
		var p *Participant
		switch {
		case m.ID != nil && *m.ID != "":
			if p = byID[*m.ID]; p == nil || p.Status != "active" {
				c.add(CodeMentionNotInRoom, Pointer("message", "mentions", i, "id"), unmentionable(*m.ID, p))
				continue
			}
		case m.Handle != nil:
			h := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(*m.Handle), "@"))
			if h == "" {
				continue // reported as mention_missing_identifier
			}
			if p = byHandle[h]; p == nil {
				c.add(CodeHandleNotFound, Pointer("message", "mentions", i, "handle"), "does not name a participant of this room")
				continue
			}
		default:
			continue
		}
		if p.ID == sender.ID {
			c.add(CodeCannotMentionSelf, Pointer("message", "mentions", i), "mentions the sender")
			continue
		}
		if first, dup := seen[p.ID]; dup {
			c.add(CodeDuplicateMentions, Pointer("message", "mentions", i), "mentions the same participant as entry "+strconv.Itoa(first))
			continue
		}
		seen[p.ID] = i
		kind := "mention"
		if m.Kind != nil {
			kind = *m.Kind
		}
		out = append(out, Mention{ID: p.ID, Handle: p.Handle, Name: p.Name, Kind: kind})
	}
	return out
}

// unmentionable says why id, which names p (nil if no one in the room),
// cannot be mentioned: not a UUID, no participant's, or a blocked one's.
// The code is mentioned_participant_not_in_room for all three, as the API
// documents for an entry that names no one in the room.
func unmentionable(id string, p *Participant) string {
	switch {
	case p != nil:
		return "is the id of a participant blocked in this room, who cannot be mentioned"
	case !ValidID(id):
		if len(id) > 40 {
			id = strings.ToValidUTF8(id[:40], "") + "…"
		}
		return fmt.Sprintf("is not a UUID (8-4-4-4-12 hexadecimal digits), so it names no participant: %q", id)
	}
	return "is not the id of a participant of this room: " + id
}

// withMentionsPrepended returns content with "@handle " prepended for each
// mention-kind entry the content does not @-reference already.
func withMentionsPrepended(content string, mentions []Mention) string {
	var prefix strings.Builder
	for _, m := range mentions {
		if m.Kind == "mention" && !MentionsHandle(content, m.Handle) {
			prefix.WriteString("@" + m.Handle + " ")
		}
	}
	return prefix.String() + content
}

// isHandleRune reports whether r can continue a handle after "@".
func isHandleRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '/'
}

// MentionsHandle reports whether content @-references handle: "@handle"
// (any case) that starts a word and is not followed by more of a handle. A
// '.' ends the handle only when it ends the sentence, so "@ana." references
// ana but "@ana.b" does not, and neither does "ana@ana.org".
func MentionsHandle(content, handle string) bool {
	lc, needle := strings.ToLower(content), "@"+strings.ToLower(handle)
	for from := 0; ; {
		i := strings.Index(lc[from:], needle)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(needle)
		from = end
		if start > 0 {
			prev, _ := utf8.DecodeLastRuneInString(lc[:start])
			if isHandleRune(prev) || prev == '.' || prev == '@' {
				continue
			}
		}
		if end == len(lc) {
			return true
		}
		next, _ := utf8.DecodeRuneInString(lc[end:])
		if next == '.' {
			after, _ := utf8.DecodeRuneInString(lc[end+1:])
			if end+1 == len(lc) || !isHandleRune(after) {
				return true
			}
		} else if !isHandleRune(next) {
			return true
		}
	}
}
