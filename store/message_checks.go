package store

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// The checks of what a client sends to post a message or an event, in the
// order their codes take precedence; the mentions' resolution against the
// room is in mentions.go.

// Limits on message content.
const (
	MaxTextLen          = 32768 // characters of a text message
	MaxEventContentLen  = 16384 // characters of an event's content
	MaxEventMetadataLen = 65536 // bytes of an event's metadata, serialized
	// MaxMetadataDepth bounds how deeply a message's or an event's
	// metadata nests arrays and objects (the object itself is level 1).
	// Within the byte limit, JSON can nest thousands deep, past what
	// common clients parse: Python's json and pydantic, jq. A message one
	// of them cannot parse would stay first in its agent's /next.
	MaxMetadataDepth = 32
	maxMentions      = 50
	maxAttachments   = 20
)

// TextInput is a text message as the client sent it.
type TextInput struct {
	Content       string
	Mentions      []MentionInput // nil: the field was missing
	AttachmentIDs []string
	// Metadata is an optional object the client attaches (null or absent for
	// none); it is kept beside the mentions and delivery states chatd adds.
	Metadata json.RawMessage
	// ReplyToID names the message this one answers (nil: none): a message
	// of the same room the sender may see (replies.go).
	ReplyToID *string
}

// checkText checks what can be checked of a text message without the
// database, in the order the codes take precedence.
func checkText(in TextInput) *codedProblems {
	c := &codedProblems{}
	switch {
	case !utf8.ValidString(in.Content):
		c.add(CodeValidation, "/message/content", "must be valid UTF-8")
	case IsBlank(in.Content):
		c.add(CodeValidation, "/message/content", "can't be blank or only invisible characters")
	case utf8.RuneCountInString(in.Content) > MaxTextLen:
		c.add(CodeValidation, "/message/content", "must be at most 32768 characters long")
	}
	switch {
	case in.Mentions == nil:
		c.add(CodeMentionsRequired, "/message/mentions", "is required: mention at least one participant")
	case len(in.Mentions) == 0:
		c.add(CodeMentionsRequired, "/message/mentions", "can't be empty: mention at least one participant")
	case len(in.Mentions) > maxMentions:
		c.add(CodeValidation, "/message/mentions", "must have at most 50 entries")
	}
	hasMention, badKind := false, false
	for i, m := range in.Mentions {
		switch {
		case m.KindNull:
			badKind = true
			c.add(CodeInvalidMentionKind, Pointer("message", "mentions", i, "kind"), "must be mention or reference (omit it rather than send null)")
		case m.Kind != nil && *m.Kind != "mention" && *m.Kind != "reference":
			badKind = true
			c.add(CodeInvalidMentionKind, Pointer("message", "mentions", i, "kind"), "must be mention or reference")
		case m.Kind == nil || *m.Kind == "mention":
			hasMention = true
		}
		if (m.ID == nil || *m.ID == "") && (m.Handle == nil || strings.TrimPrefix(strings.TrimSpace(*m.Handle), "@") == "") {
			c.add(CodeMentionMissingIdentifier, Pointer("message", "mentions", i), "needs an id or a handle")
		}
	}
	// Only references (no entry that mentions) is mentions_required; when a
	// kind is invalid, that is the more useful thing to say.
	if len(in.Mentions) > 0 && !hasMention && !badKind {
		c.add(CodeMentionsRequired, "/message/mentions", "must hold at least one entry of kind mention")
	}
	if len(in.AttachmentIDs) > maxAttachments {
		c.add(CodeValidation, "/message/attachment_ids", "must have at most 20 entries")
	}
	if meta, msg := metadataObject(in.Metadata); msg != "" {
		c.add(CodeValidation, "/message/metadata", msg)
	} else {
		var obj map[string]json.RawMessage
		_ = json.Unmarshal(meta, &obj)
		for _, k := range reservedMetadataKeys {
			if _, ok := obj[k]; ok {
				c.add(CodeValidation, Pointer("message", "metadata", k), "is reserved: chatd sets it")
			}
		}
	}
	return c
}

// reservedMetadataKeys are the keys of a text message's metadata that chatd
// fills in itself (mentions and delivery state); a sender cannot set them.
var reservedMetadataKeys = []string{"mentions", "delivery_status", "status", "attempts", "current_attempt"}

// metadataObject checks optional client metadata: an object of at most
// MaxEventMetadataLen bytes serialized, nesting at most MaxMetadataDepth
// levels (null or absent read as {}). It returns the object compacted, or
// what is wrong with it.
func metadataObject(raw json.RawMessage) (json.RawMessage, string) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return json.RawMessage("{}"), ""
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil || obj == nil {
		return nil, "must be an object"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil || buf.Len() > MaxEventMetadataLen {
		return nil, "must be at most 65536 bytes when serialized"
	}
	if jsonDepth(buf.Bytes()) > MaxMetadataDepth {
		return nil, "must nest arrays and objects at most 32 levels deep"
	}
	return json.RawMessage(buf.Bytes()), ""
}

// jsonDepth is how many levels of arrays and objects the valid JSON text
// nests at its deepest.
func jsonDepth(text []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range text {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped = c == '\\'
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// EventInput is an event as the client sent it.
type EventInput struct {
	Content  string
	Type     string
	Metadata json.RawMessage // an object, null, or absent
}

var attentionKinds = map[string]bool{"question": true, "assumption": true, "failure": true, "review": true}

// checkEvent validates an event and returns its metadata, compacted, and
// the task id an attention event names ("" for none), which only the write
// transaction can check against the room's board.
func checkEvent(in EventInput) (json.RawMessage, string, error) {
	p := Problems{}
	checkOneOf(p, "/event/message_type", in.Type, EventTypes)
	if !utf8.ValidString(in.Content) {
		p.Add("/event/content", "must be valid UTF-8")
	} else if IsBlank(in.Content) {
		// As the hosted API: "content can't be blank" (the SDKs send a
		// placeholder instead), and by the rule text messages follow.
		p.Add("/event/content", "can't be blank or only invisible characters")
	} else if utf8.RuneCountInString(in.Content) > MaxEventContentLen {
		p.Add("/event/content", "must be at most 16384 characters long")
	}
	meta, msg := metadataObject(in.Metadata)
	if msg != "" {
		p.Add("/event/metadata", "%s", msg)
	}
	var taskID string
	if in.Type == "attention" {
		var obj map[string]json.RawMessage
		_ = json.Unmarshal(meta, &obj)
		taskID = checkAttention(obj, p)
		if lower, _ := json.Marshal(taskID); taskID != "" && !bytes.Equal(obj["task_id"], lower) {
			// The task id is kept as chatd spells ids, whatever the case sent.
			obj["task_id"] = lower
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(obj)
			meta = bytes.TrimSpace(buf.Bytes())
		}
	}
	return meta, taskID, p.Err(CodeValidation)
}

// checkAttention checks an attention event's metadata and returns the task
// id it names, if any.
func checkAttention(meta map[string]json.RawMessage, p Problems) (taskID string) {
	var kind string
	if raw, ok := meta["kind"]; !ok || json.Unmarshal(raw, &kind) != nil || !attentionKinds[kind] {
		p.Add("/event/metadata/kind", "is required for attention events: question, assumption, failure or review")
	}
	if raw, ok := meta["blocking"]; ok {
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			p.Add("/event/metadata/blocking", "must be a boolean")
		}
	}
	if raw, ok := meta["task_id"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &taskID) != nil || !ValidID(NormalizeID(taskID)) {
			p.Add("/event/metadata/task_id", "is not a task of this room")
			taskID = ""
		}
	}
	return NormalizeID(taskID)
}
