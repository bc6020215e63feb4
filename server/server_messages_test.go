package server

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/chatd/chatd/store"
)

// Scenario tests of sending messages (both APIs), posting events, and
// reading messages: the agent's work listing, the human history and the
// agent's context. Rooms are set up through the API.

// unknownID is a well-formed id that names nothing.
const unknownID = "0190a000-0000-7000-8000-00000000beef"

// messagesParty is a human or an agent, with the API it calls.
type messagesParty struct {
	label  string
	id     string
	handle string
	name   string
	typ    string // "User" or "Agent"
	cred   cred
	base   string      // agentChatsPath or humanChatsPath
	user   *store.User // humans only
}

// at is the path of a room (and what is under it) in the party's API.
func (p messagesParty) at(room string, under ...string) string {
	return strings.Join(append([]string{p.base, room}, under...), "/")
}

// messagesWorld is a test server with three people and three of alice's agents.
// room is alice's room, with bob, helper and coder in it; idle (a sibling
// of helper and coder) and carol (another organization) are not in it.
// labels names every id the test made, so listings compare as names.
type messagesWorld struct {
	ts                  *testServer
	alice, bob, carol   messagesParty
	helper, coder, idle messagesParty
	room                string
	labels              idLabels
}

func newMessagesWorld(t *testing.T, opts ...func(*store.Options)) *messagesWorld {
	t.Helper()
	w := &messagesWorld{ts: newTestServer(t, opts...), labels: map[string]string{}}
	w.alice = w.human("alice")
	w.bob = w.human("bob")
	w.carol = w.human("carol", "Other Org")
	w.helper = w.bot(w.alice, "Helper")
	w.coder = w.bot(w.alice, "Coder")
	w.idle = w.bot(w.alice, "Idle")
	w.room = w.newRoom(t, w.alice, "room")
	for _, p := range []messagesParty{w.helper, w.coder, w.bob} {
		w.add(t, w.alice, w.room, p)
	}
	return w
}

func (w *messagesWorld) human(handle string, org ...string) messagesParty {
	u, key := w.ts.user(handle, org...)
	w.labels[u.ID] = handle
	return messagesParty{label: handle, id: u.ID, handle: u.Handle, name: u.Name(), typ: "User", cred: apiKey(key), base: humanChatsPath, user: u}
}

func (w *messagesWorld) bot(owner messagesParty, name string) messagesParty {
	a, key := w.ts.agent(owner.user, name)
	label := strings.ToLower(name)
	w.labels[a.ID] = label
	return messagesParty{label: label, id: a.ID, handle: a.Handle, name: a.Name, typ: "Agent", cred: apiKey(key), base: agentChatsPath}
}

// newRoom creates a room as p and returns its id.
func (w *messagesWorld) newRoom(t testing.TB, p messagesParty, label string) string {
	t.Helper()
	r := w.ts.do(t, "POST", p.base, p.cred, map[string]any{"chat": map[string]any{}})
	expect(t, r, 201, "")
	id := r.data(t)["id"].(string)
	w.labels[id] = label
	return id
}

// add adds member to room as p.
func (w *messagesWorld) add(t testing.TB, p messagesParty, room string, member messagesParty) {
	t.Helper()
	r := w.ts.do(t, "POST", p.at(room, "participants"), p.cred,
		map[string]any{"participant": map[string]any{"participant_id": member.id}})
	expect(t, r, 201, "")
}

// msgOf is a send-message body: {"message": {k1: v1, k2: v2, ...}}.
func msgOf(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return map[string]any{"message": m}
}

// eventOf is a post-event body: {"event": {k1: v1, ...}}.
func eventOf(kv ...any) map[string]any {
	return map[string]any{"event": msgOf(kv...)["message"]}
}

// mentionOf is a mention entry: {k1: v1, ...}.
func mentionOf(kv ...any) map[string]any { return msgOf(kv...)["message"].(map[string]any) }

// byID mentions p by id.
func byID(p messagesParty) map[string]any { return mentionOf("id", p.id) }

// send posts a text message as p.
func (w *messagesWorld) send(t testing.TB, p messagesParty, room, content string, mentions ...any) *response {
	t.Helper()
	return w.ts.do(t, "POST", p.at(room, "messages"), p.cred, msgOf("content", content, "mentions", mentions))
}

// mustSend posts a text message as p, expects 201, and names it label.
func (w *messagesWorld) mustSend(t testing.TB, label string, p messagesParty, room, content string, mentions ...any) string {
	t.Helper()
	r := w.send(t, p, room, content, mentions...)
	expect(t, r, 201, "")
	id := r.data(t)["id"].(string)
	w.labels[id] = label
	return id
}

// event posts an event as agent p (meta nil: no metadata field), expects
// 201, and names it label.
func (w *messagesWorld) event(t testing.TB, label string, p messagesParty, room, typ, content string, meta any) string {
	t.Helper()
	ev := eventOf("content", content, "message_type", typ)
	if meta != nil {
		ev["event"].(map[string]any)["metadata"] = meta
	}
	r := w.ts.do(t, "POST", p.at(room, "events"), p.cred, ev)
	expect(t, r, 201, "")
	d := r.data(t)
	if d["success"] != true || d["message_type"] != typ {
		t.Fatalf("event created = %v", d)
	}
	id := d["id"].(string)
	w.labels[id] = label
	return id
}

// mark moves agent p's delivery of message mid: processing, processed or
// failed (with an error).
func (w *messagesWorld) mark(t testing.TB, p messagesParty, room, mid, step string) {
	t.Helper()
	var body any = map[string]any{}
	if step == "failed" {
		body = map[string]any{"error": "x"}
	}
	r := w.ts.do(t, "POST", p.at(room, "messages", mid, step), p.cred, body)
	expect(t, r, 200, "")
	if d := r.data(t); d["id"] != mid || d["status"] != step || d["success"] != true {
		t.Fatalf("%s: %v", step, d)
	}
}

// get reads a listing as p, expecting 200.
func (w *messagesWorld) get(t testing.TB, p messagesParty, path string) *response {
	t.Helper()
	r := w.ts.do(t, "GET", path, p.cred, nil)
	expect(t, r, 200, "")
	return r
}

// names is the labels of a listing's items, in order, comma-separated.
func (w *messagesWorld) names(t testing.TB, r *response) string {
	t.Helper()
	return w.labels.listed(t, r)
}

// byLabel returns the item of a listing with the given label.
func (w *messagesWorld) byLabel(t testing.TB, r *response, label string) map[string]any {
	t.Helper()
	for _, it := range r.list(t) {
		m := it.(map[string]any)
		if w.labels[m["id"].(string)] == label {
			return m
		}
	}
	t.Fatalf("%s is not in %s", label, r.body)
	return nil
}

// walk pages through a cursor listing (query holds limit and filters) and
// returns its pages, "|" between them.
func (w *messagesWorld) walk(t testing.TB, p messagesParty, path, query string) string {
	t.Helper()
	return w.ts.walkPages(t, path, query, p.cred, func(r *response) string { return w.names(t, r) })
}

// ---------------------------------------------------------------------------
// Sending text messages.

// unknownAttachmentID is a well-formed file id that names no file.
const unknownAttachmentID = "0190a000-0000-7000-8000-00000000f11e"

// messageRefusals writes the rows of sendRefusals: messages one party posts
// to one room.
type messageRefusals struct {
	cred cred
	path string
}

// refused is a message refused with status and code, with a problem at each
// of pointers.
func (m messageRefusals) refused(name string, body any, status int, code string, pointers ...string) scenario {
	return refusalCase(name, m.cred, "POST", m.path, body, status, code, pointers...)
}

// unprocessable is a message refused with 422 and code.
func (m messageRefusals) unprocessable(name string, body any, code string, pointers ...string) scenario {
	return m.refused(name, body, 422, code, pointers...)
}

// mentionsOf is a mentions array.
func mentionsOf(ms ...any) []any { return ms }

// referenceTo is mention m as kind reference: it names without mentioning.
func referenceTo(m map[string]any) map[string]any {
	out := map[string]any{"kind": "reference"}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sendRefusals are the 400 and 422 refusals of a text message sent by self
// to the world's room; they hold for both APIs.
func sendRefusals(w *messagesWorld, self messagesParty) []scenario {
	send := messageRefusals{cred: self.cred, path: self.at(w.room, "messages")}
	coder := byID(w.coder)
	return []scenario{
		// validation_error: the body and the content.
		send.unprocessable("no body", nil, "validation_error", "/message"),
		send.unprocessable("no message object", map[string]any{}, "validation_error", "/message"),
		send.unprocessable("content missing", msgOf("mentions", mentionsOf(coder)), "validation_error", "/message/content"),
		send.unprocessable("content empty", msgOf("content", "", "mentions", mentionsOf(coder)), "validation_error", "/message/content"),
		send.unprocessable("content only spaces", msgOf("content", "  \t\n  ", "mentions", mentionsOf(coder)), "validation_error", "/message/content"),
		send.unprocessable("content only zero-width and format characters", msgOf("content", "\u200b\u200d\ufeff\u2060\u200e", "mentions", mentionsOf(coder)), "validation_error", "/message/content"),
		send.unprocessable("content only combining marks", msgOf("content", "\u0301\u0308\u20dd", "mentions", mentionsOf(coder)), "validation_error", "/message/content"),
		send.unprocessable("content of the wrong type", msgOf("content", 42, "mentions", mentionsOf(coder)), "validation_error", "/message/content"),
		// A value of the wrong type inside an array is named by its index.
		send.unprocessable("mention id of the wrong type", msgOf("content", "hi", "mentions", mentionsOf(mentionOf("id", 5))), "validation_error", "/message/mentions/0/id"),
		send.unprocessable("second mention's handle of the wrong type", msgOf("content", "hi", "mentions", mentionsOf(coder, mentionOf("handle", true))), "validation_error", "/message/mentions/1/handle"),
		send.unprocessable("a mention that is no object", msgOf("content", "hi", "mentions", mentionsOf(5)), "validation_error", "/message/mentions/0"),
		send.unprocessable("an attachment id that is no string", msgOf("content", "hi", "mentions", mentionsOf(coder), "attachment_ids", []any{1}), "validation_error", "/message/attachment_ids/0"),
		send.unprocessable("mentions not an array", msgOf("content", "hi", "mentions", "coder"), "validation_error", "/message/mentions"),
		send.unprocessable("message not an object", map[string]any{"message": "hi"}, "validation_error", "/message"),
		send.unprocessable("content too long", msgOf("content", strings.Repeat("a", store.MaxTextLen+1), "mentions", mentionsOf(coder)), "validation_error", "/message/content"),
		send.unprocessable("too many mentions", msgOf("content", "hi", "mentions", slices.Repeat(mentionsOf(coder), 51)), "validation_error", "/message/mentions"),
		send.unprocessable("metadata nested a level too deep", msgOf("content", "hi", "mentions", mentionsOf(coder), "metadata", nestedObject(store.MaxMetadataDepth+1)), "validation_error", "/message/metadata"),
		// Far deeper than any client parses, yet within the byte limit.
		send.unprocessable("metadata nested a thousand levels", msgOf("content", "hi", "mentions", mentionsOf(coder), "metadata", nestedObject(1000)), "validation_error", "/message/metadata"),
		// mentions_required.
		send.unprocessable("mentions missing", msgOf("content", "hi"), "mentions_required", "/message/mentions"),
		send.unprocessable("mentions null", msgOf("content", "hi", "mentions", nil), "mentions_required", "/message/mentions"),
		send.unprocessable("mentions empty", msgOf("content", "hi", "mentions", mentionsOf()), "mentions_required", "/message/mentions"),
		send.unprocessable("only references", msgOf("content", "hi", "mentions", mentionsOf(referenceTo(coder), referenceTo(mentionOf("handle", w.bob.handle)))), "mentions_required", "/message/mentions"),
		// cannot_mention_self.
		send.unprocessable("self by id", msgOf("content", "hi", "mentions", mentionsOf(byID(self))), "cannot_mention_self", "/message/mentions/0"),
		send.unprocessable("self as a reference", msgOf("content", "hi", "mentions", mentionsOf(coder, referenceTo(byID(self)))), "cannot_mention_self", "/message/mentions/1"),
		send.unprocessable("self by handle", msgOf("content", "hi", "mentions", mentionsOf(coder, mentionOf("handle", "@"+strings.ToUpper(self.handle)))), "cannot_mention_self", "/message/mentions/1"),
		// duplicate_mentions.
		send.unprocessable("same participant by id and by handle", msgOf("content", "hi", "mentions", mentionsOf(byID(w.helperOr(self)), mentionOf("handle", w.helperOr(self).handle))), "duplicate_mentions", "/message/mentions/1"),
		send.unprocessable("same participant twice by id", msgOf("content", "hi", "mentions", mentionsOf(coder, coder)), "duplicate_mentions", "/message/mentions/1"),
		send.unprocessable("same participant as mention and reference", msgOf("content", "hi", "mentions", mentionsOf(coder, referenceTo(coder))), "duplicate_mentions", "/message/mentions/1"),
		// mentioned_participant_not_in_room.
		send.unprocessable("an agent of alice's not added to the room", msgOf("content", "hi", "mentions", mentionsOf(byID(w.idle))), "mentioned_participant_not_in_room", "/message/mentions/0/id"),
		send.unprocessable("a person of another organization", msgOf("content", "hi", "mentions", mentionsOf(coder, byID(w.carol))), "mentioned_participant_not_in_room", "/message/mentions/1/id"),
		send.unprocessable("an id that names nothing", msgOf("content", "hi", "mentions", mentionsOf(mentionOf("id", unknownID))), "mentioned_participant_not_in_room", "/message/mentions/0/id"),
		send.unprocessable("an id that is no UUID", msgOf("content", "hi", "mentions", mentionsOf(mentionOf("id", "coder"))), "mentioned_participant_not_in_room", "/message/mentions/0/id"),
		// invalid_mention_kind.
		send.unprocessable("kind shout", msgOf("content", "hi", "mentions", mentionsOf(coder, mentionOf("id", w.bob.id, "kind", "shout"))), "invalid_mention_kind", "/message/mentions/1/kind"),
		send.unprocessable("kind explicitly null", msgOf("content", "hi", "mentions", mentionsOf(coder, mentionOf("id", w.bob.id, "kind", nil))), "invalid_mention_kind", "/message/mentions/1/kind"),
		send.unprocessable("kind not a string", msgOf("content", "hi", "mentions", mentionsOf(coder, mentionOf("id", w.bob.id, "kind", 1))), "invalid_mention_kind", "/message/mentions/1/kind"),
		send.unprocessable("kind in upper case", msgOf("content", "hi", "mentions", mentionsOf(coder, mentionOf("id", w.bob.id, "kind", "MENTION"))), "invalid_mention_kind", "/message/mentions/1/kind"),
		// handle_not_found.
		send.unprocessable("unknown handle", msgOf("content", "hi", "mentions", mentionsOf(mentionOf("handle", "nobody"))), "handle_not_found", "/message/mentions/0/handle"),
		send.unprocessable("handle of someone not in the room", msgOf("content", "hi", "mentions", mentionsOf(coder, mentionOf("handle", w.idle.handle))), "handle_not_found", "/message/mentions/1/handle"),
		send.unprocessable("an agent's slug without its owner", msgOf("content", "hi", "mentions", mentionsOf(mentionOf("handle", "helper"))), "handle_not_found", "/message/mentions/0/handle"),
		// mention_missing_identifier.
		send.unprocessable("neither id nor handle", msgOf("content", "hi", "mentions", mentionsOf(mentionOf("name", "Coder"))), "mention_missing_identifier", "/message/mentions/0"),
		send.unprocessable("an empty entry beside a good one", msgOf("content", "hi", "mentions", mentionsOf(coder, mentionOf())), "mention_missing_identifier", "/message/mentions/1"),
		send.unprocessable("empty id and a bare @ handle", msgOf("content", "hi", "mentions", mentionsOf(mentionOf("id", "", "handle", " @ "))), "mention_missing_identifier", "/message/mentions/0"),
		// unknown_attachment: ids that name no file of the room (files have their own tests).
		send.unprocessable("an attachment id", msgOf("content", "hi", "mentions", mentionsOf(coder), "attachment_ids", []string{unknownAttachmentID}), "unknown_attachment", "/message/attachment_ids/0"),
		send.unprocessable("a second attachment id", msgOf("content", "hi", "mentions", mentionsOf(coder), "attachment_ids", []string{unknownAttachmentID, unknownID}), "unknown_attachment", "/message/attachment_ids/0", "/message/attachment_ids/1"),
		// The code of the first problem wins; the details name the others
		// found in the same pass (the body's own checks run before those
		// against the room's participants).
		send.unprocessable("blank content before missing mentions", msgOf("content", " "), "validation_error", "/message/content", "/message/mentions"),
		send.unprocessable("blank content before a mention problem", msgOf("content", "\u200b", "mentions", mentionsOf(byID(self))), "validation_error", "/message/content"),
		send.unprocessable("a bad kind before a missing identifier", msgOf("content", "hi", "mentions", mentionsOf(mentionOf("id", w.bob.id, "kind", "shout"), mentionOf("name", "x"), coder)), "invalid_mention_kind", "/message/mentions/0/kind", "/message/mentions/1"),
		send.unprocessable("a missing identifier before an unknown handle", msgOf("content", "hi", "mentions", mentionsOf(mentionOf("handle", "nobody"), mentionOf())), "mention_missing_identifier", "/message/mentions/1"),
		send.unprocessable("the first entry's problem wins among entries", msgOf("content", "hi", "mentions", mentionsOf(byID(w.idle), byID(self), mentionOf("handle", "nobody"))), "mentioned_participant_not_in_room", "/message/mentions/0/id", "/message/mentions/1", "/message/mentions/2/handle"),
		send.unprocessable("a mention problem before an unknown attachment", msgOf("content", "hi", "mentions", mentionsOf(mentionOf("handle", "nobody")), "attachment_ids", []string{unknownAttachmentID}), "handle_not_found", "/message/mentions/0/handle", "/message/attachment_ids/0"),
		// The message leads with the problem the code names, though another
		// pointer sorts first (checkResponse checks the message of every refusal).
		send.unprocessable("a mentioned outsider before an unknown attachment", msgOf("content", "hi", "mentions", mentionsOf(byID(w.idle)), "attachment_ids", []string{unknownAttachmentID}), "mentioned_participant_not_in_room", "/message/mentions/0/id", "/message/attachment_ids/0"),
		// Unknown fields are 400.
		send.refused("unknown field in the message", msgOf("content", "hi", "mentions", mentionsOf(coder), "priority", "high"), 400, "unknown_field", "/message/priority"),
		send.refused("unknown field in a mention", msgOf("content", "hi", "mentions", mentionsOf(mentionOf("id", w.coder.id, "email", "coder@example.com"))), 400, "unknown_field", "/message/mentions/0/email"),
		send.refused("unknown top-level field", map[string]any{"message": msgOf("content", "hi", "mentions", mentionsOf(coder))["message"], "chat_id": w.room}, 400, "unknown_field", "/chat_id"),
		send.refused("not JSON", "{\"message\":", 400, "invalid_json"),
		send.refused("not UTF-8", "{\"message\":{\"content\":\"caf\xe9\",\"mentions\":[{\"id\":\""+w.coder.id+"\"}]}}", 400, "invalid_json"),
		// An unpaired surrogate escape names no character; decoded, it would be U+FFFD.
		send.refused("a lone high surrogate", `{"message":{"content":"cut \ud83d","mentions":[{"id":"`+w.coder.id+`"}]}}`, 400, "invalid_json"),
		send.refused("a lone low surrogate", `{"message":{"content":"\ude00 cut","mentions":[{"id":"`+w.coder.id+`"}]}}`, 400, "invalid_json"),
		send.refused("a high surrogate before a letter", `{"message":{"content":"\uD83Dx","mentions":[{"id":"`+w.coder.id+`"}]}}`, 400, "invalid_json"),
	}
}

// helperOr is the world's helper, or coder when helper is self.
func (w *messagesWorld) helperOr(self messagesParty) messagesParty {
	if self.id == w.helper.id {
		return w.coder
	}
	return w.helper
}

func TestMessagesSendRefusals(t *testing.T) {
	t.Parallel() // its own server and database
	w := newMessagesWorld(t)
	for _, self := range []messagesParty{w.helper, w.alice} {
		api := map[string]string{agentChatsPath: "agent API", humanChatsPath: "human API"}[self.base]
		t.Run(api, func(t *testing.T) { w.ts.run(t, sendRefusals(w, self)) })
	}
	// Nothing was sent, so the room got no title from a refused message.
	if r := w.get(t, w.alice, w.alice.at(w.room)); r.data(t)["title"] != nil {
		t.Errorf("room title after refusals = %v", r.data(t)["title"])
	}
}

// A lone entry with a bad kind is also "no entry of kind mention": the
// details name both problems whichever code wins.
func TestMessagesSendLoneBadKind(t *testing.T) {
	w := newMessagesWorld(t)
	for _, kind := range []any{"shout", nil} {
		before := w.ts.snapshot(t)
		r := w.ts.do(t, "POST", w.helper.at(w.room, "messages"), w.helper.cred,
			msgOf("content", "hi", "mentions", []any{mentionOf("id", w.coder.id, "kind", kind)}))
		expect(t, r, 422, "")
		if code := r.errorCode(t); code != "invalid_mention_kind" && code != "mentions_required" {
			t.Errorf("kind %v: code %s", kind, code)
		}
		if _, ok := errorDetails(t, r)["/message/mentions/0/kind"]; !ok {
			t.Errorf("kind %v: details %v lack /message/mentions/0/kind", kind, errorDetails(t, r))
		}
		w.ts.unchanged(t, before)
	}
}

// Only text is sent here; other types go to /events. Whether the server
// knows the field (422) or not (400), nothing is written.
func TestMessagesSendOnlyText(t *testing.T) {
	w := newMessagesWorld(t)
	for _, self := range []messagesParty{w.helper, w.alice} {
		before := w.ts.snapshot(t)
		r := w.ts.do(t, "POST", self.at(w.room, "messages"), self.cred,
			msgOf("content", "calling grep", "mentions", []any{byID(w.coder)}, "message_type", "tool_call"))
		switch code := r.errorCode(t); {
		case r.status == 400 && code == "unknown_field", r.status == 422 && code == "validation_error":
			if _, ok := errorDetails(t, r)["/message/message_type"]; !ok {
				t.Errorf("%s: details %v lack /message/message_type", self.label, errorDetails(t, r))
			}
		default:
			t.Errorf("%s: %d %s", self.label, r.status, r.body)
		}
		w.ts.unchanged(t, before)
	}
}

// What the TypeScript SDK sends beyond the OpenAPI schema is accepted: a
// mention's username (standing in for a missing handle) and message_type
// "text".
func TestMessagesSendTypeScriptExtras(t *testing.T) {
	w := newMessagesWorld(t)
	r := w.ts.do(t, "POST", w.helper.at(w.room, "messages"), w.helper.cred,
		msgOf("content", "typed", "message_type", "text", "mentions", []any{mentionOf("username", w.coder.handle, "name", w.coder.name)}))
	expect(t, r, 201, "")
	recipients := r.data(t)["recipients"].([]any)
	if len(recipients) != 1 || recipients[0].(map[string]any)["id"] != w.coder.id {
		t.Fatalf("recipients = %v, want %s resolved from username", recipients, w.coder.handle)
	}
	// A handle, when present, wins over the username.
	r = w.ts.do(t, "POST", w.helper.at(w.room, "messages"), w.helper.cred,
		msgOf("content", "both", "mentions", []any{mentionOf("handle", w.bob.handle, "username", w.coder.handle)}))
	expect(t, r, 201, "")
	if id := r.data(t)["recipients"].([]any)[0].(map[string]any)["id"]; id != w.bob.id {
		t.Fatalf("resolved %v, want %s by handle", id, w.bob.handle)
	}
}

// recipientOf is p as a send answer's recipients list it.
func recipientOf(p messagesParty) map[string]any {
	return map[string]any{"id": p.id, "handle": p.handle, "name": p.name}
}

// newest is the newest message of the room as alice reads it.
func (w *messagesWorld) newest(t testing.TB) map[string]any {
	t.Helper()
	list := w.get(t, w.alice, w.alice.at(w.room, "messages")+"?limit=1").list(t)
	return list[0].(map[string]any)
}

func TestMessagesSend(t *testing.T) {
	w := newMessagesWorld(t)
	t.Run("recipients resolve ids and handles", func(t *testing.T) { sendResolvesRecipients(t, w) })
	t.Run("recipients list only mention-kind entries", func(t *testing.T) { sendListsOnlyMentionKindRecipients(t, w) })
	t.Run("content of the longest length", func(t *testing.T) { sendTakesTheLongestContent(t, w) })
	t.Run("escaped text is kept as written", func(t *testing.T) { sendKeepsEscapedText(t, w) })
	t.Run("an empty attachment list is fine", func(t *testing.T) { sendTakesAnEmptyAttachmentList(t, w) })
	t.Run("mentions not referenced in the content are prepended", func(t *testing.T) { sendPrependsUnreferencedMentions(t, w) })

	// Metadata a client attaches to a text message (the TypeScript SDK sends
	// some) is kept, but must not pose as the server's delivery state: those
	// keys are refused.
	t.Run("attached metadata cannot spoof delivery state", func(t *testing.T) { sendKeepsMetadataButNotDeliveryState(t, w) })
	t.Run("every message names its sender", func(t *testing.T) { sendNamesEverySender(t, w) })
	t.Run("the first message titles the room", func(t *testing.T) { sendTitlesTheRoom(t, w) })
}

func sendResolvesRecipients(t *testing.T, w *messagesWorld) {
	for _, self := range []messagesParty{w.helper, w.alice} {
		for _, tc := range []struct {
			name    string
			mention map[string]any
			want    messagesParty
		}{
			{"by id", byID(w.coder), w.coder},
			{"by handle", mentionOf("handle", "alice/coder"), w.coder},
			{"by handle with @", mentionOf("handle", "@alice/coder"), w.coder},
			{"by handle in another case", mentionOf("handle", "@ALICE/Coder"), w.coder},
			{"by handle with spaces", mentionOf("handle", " @alice/coder "), w.coder},
			{"a person by handle", mentionOf("handle", "Bob"), w.bob},
			{"id wins over a handle of another participant", mentionOf("id", w.coder.id, "handle", "bob"), w.coder},
			{"id wins over an unknown handle", mentionOf("id", w.coder.id, "handle", "nobody"), w.coder},
			{"explicit kind mention", mentionOf("id", w.coder.id, "kind", "mention"), w.coder},
			{"a given name is not trusted", mentionOf("id", w.coder.id, "name", "Someone Else"), w.coder},
		} {
			t.Run(self.label+"/"+tc.name, func(t *testing.T) {
				r := w.send(t, self, w.room, "ping", tc.mention)
				expect(t, r, 201, "")
				d := r.data(t)
				if d["success"] != true || d["id"] == "" {
					t.Fatalf("data = %v", d)
				}
				want := []any{recipientOf(tc.want)}
				if !reflect.DeepEqual(d["recipients"], want) {
					t.Fatalf("recipients = %v, want %v", d["recipients"], want)
				}
				m := w.newest(t)
				if m["id"] != d["id"] || m["content"] != "@"+tc.want.handle+" ping" || m["message_type"] != "text" {
					t.Fatalf("stored = %v", m)
				}
			})
		}
	}
}

func sendListsOnlyMentionKindRecipients(t *testing.T, w *messagesWorld) {
	r := w.send(t, w.alice, w.room, "Status?", byID(w.coder),
		mentionOf("id", w.helper.id, "kind", "reference"), mentionOf("handle", "bob", "kind", "mention"))
	expect(t, r, 201, "")
	if got, want := r.data(t)["recipients"], []any{recipientOf(w.coder), recipientOf(w.bob)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("recipients = %v, want %v", got, want)
	}
	m := w.newest(t)
	if m["content"] != "@alice/coder @bob Status?" {
		t.Errorf("content = %q", m["content"])
	}
	meta := m["metadata"].(map[string]any)
	mentions := meta["mentions"].([]any)
	wantMentions := []any{
		map[string]any{"id": w.coder.id, "handle": w.coder.handle, "name": "Coder", "kind": "mention"},
		map[string]any{"id": w.helper.id, "handle": w.helper.handle, "name": "Helper", "kind": "reference"},
		map[string]any{"id": w.bob.id, "handle": "bob", "name": w.bob.name, "kind": "mention"},
	}
	if !reflect.DeepEqual(mentions, wantMentions) {
		t.Errorf("mentions = %v", mentions)
	}
	// Only the mentioned agent gets a delivery (not the referenced
	// agent, not the person).
	ds := meta["delivery_status"].(map[string]any)
	if len(ds) != 1 || ds[w.coder.id] == nil {
		t.Errorf("delivery_status = %v", ds)
	}
}

func sendTakesTheLongestContent(t *testing.T, w *messagesWorld) {
	content := strings.Repeat("é", store.MaxTextLen)
	expect(t, w.send(t, w.helper, w.room, content, byID(w.alice)), 201, "")
	if got := w.newest(t)["content"]; got != "@alice "+content {
		t.Errorf("content of %d characters stored as %d", store.MaxTextLen, len([]rune(got.(string))))
	}
}

// A surrogate pair is one character, and an escaped backslash before "u"
// starts no escape: neither is an unpaired surrogate (sendRefusals).
func sendKeepsEscapedText(t *testing.T, w *messagesWorld) {
	body := `{"message":{"content":"\ud83d\ude00 \\ud800 \u00e9","mentions":[{"id":"` + w.alice.id + `"}]}}`
	expect(t, w.ts.do(t, "POST", w.helper.at(w.room, "messages"), w.helper.cred, body), 201, "")
	if got, want := w.newest(t)["content"], "@alice 😀 \\ud800 é"; got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
}

func sendTakesAnEmptyAttachmentList(t *testing.T, w *messagesWorld) {
	r := w.ts.do(t, "POST", w.helper.at(w.room, "messages"), w.helper.cred,
		msgOf("content", "no files", "mentions", []any{byID(w.alice)}, "attachment_ids", []string{}))
	expect(t, r, 201, "")
	if got := r.data(t)["recipients"]; !reflect.DeepEqual(got, []any{recipientOf(w.alice)}) {
		t.Errorf("recipients = %v", got)
	}
	if m := w.newest(t); !reflect.DeepEqual(m["attachments"], []any{}) {
		t.Errorf("attachments = %v", m["attachments"])
	}
}

func sendPrependsUnreferencedMentions(t *testing.T, w *messagesWorld) {
	for _, tc := range []struct {
		name     string
		content  string
		mentions []any
		want     string
	}{
		{"none referenced", "Please review", []any{byID(w.coder), byID(w.bob)}, "@alice/coder @bob Please review"},
		{"already referenced", "Hey @alice/coder, look", []any{byID(w.coder)}, "Hey @alice/coder, look"},
		{"referenced in another case, ending a sentence", "done, @ALICE/Coder.", []any{byID(w.coder)}, "done, @ALICE/Coder."},
		{"referenced in parentheses", "ask (@bob)", []any{byID(w.bob)}, "ask (@bob)"},
		{"referenced on a later line", "Report\n@alice/coder see above", []any{byID(w.coder)}, "Report\n@alice/coder see above"},
		{"one of two referenced", "cc @bob", []any{byID(w.coder), byID(w.bob)}, "@alice/coder cc @bob"},
		{"a longer handle is no reference", "thanks @alice/coder-2", []any{byID(w.coder)}, "@alice/coder thanks @alice/coder-2"},
		{"an email address is no reference", "write to bob@bob.org", []any{byID(w.bob)}, "@bob write to bob@bob.org"},
		{"a domain is no reference", "see @bob.org", []any{byID(w.bob)}, "@bob see @bob.org"},
		{"the canonical handle is prepended", "x", []any{mentionOf("handle", "@ALICE/CODER")}, "@alice/coder x"},
		{"references are not prepended", "See notes", []any{byID(w.coder), mentionOf("id", w.bob.id, "kind", "reference")}, "@alice/coder See notes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, w.send(t, w.alice, w.room, tc.content, tc.mentions...), 201, "")
			if got := w.newest(t)["content"]; got != tc.want {
				t.Fatalf("content = %q, want %q", got, tc.want)
			}
		})
	}
}

func sendKeepsMetadataButNotDeliveryState(t *testing.T, w *messagesWorld) {
	before := w.ts.snapshot(t)
	r := w.ts.do(t, "POST", w.alice.at(w.room, "messages"), w.alice.cred, msgOf("content", "spoof", "mentions", []any{byID(w.coder)},
		"metadata", map[string]any{"status": "processed", "current_attempt": 7, "attempts": []any{}, "delivery_status": map[string]any{}, "mentions": []any{}, "source": "a2a"}))
	expect(t, r, 422, "validation_error")
	details := errorDetails(t, r)
	for _, key := range []string{"status", "current_attempt", "attempts", "delivery_status", "mentions"} {
		if _, ok := details["/message/metadata/"+key]; !ok {
			t.Errorf("details %v lack /message/metadata/%s", details, key)
		}
	}
	w.ts.unchanged(t, before)

	r = w.ts.do(t, "POST", w.alice.at(w.room, "messages"), w.alice.cred, msgOf("content", "kept", "mentions", []any{byID(w.coder)},
		"metadata", map[string]any{"source": "a2a", "gateway_context_id": "ctx-1"}))
	expect(t, r, 201, "")
	meta := w.newest(t)["metadata"].(map[string]any)
	if meta["source"] != "a2a" || meta["gateway_context_id"] != "ctx-1" {
		t.Errorf("attached metadata lost: %v", meta)
	}
	if ds := meta["delivery_status"].(map[string]any); ds[w.coder.id] == nil || len(meta["mentions"].([]any)) != 1 {
		t.Errorf("metadata = %v", meta)
	}
}

func sendNamesEverySender(t *testing.T, w *messagesWorld) {
	w.event(t, "thought", w.helper, w.room, "thought", "hmm", nil)
	expect(t, w.send(t, w.bob, w.room, "hi", byID(w.helper)), 201, "")
	senders := map[string]messagesParty{}
	for _, p := range []messagesParty{w.alice, w.bob, w.helper, w.coder} {
		senders[p.id] = p
	}
	seen := map[string]bool{}
	walked := 0
	q := "limit=100"
	for {
		r := w.get(t, w.alice, w.alice.at(w.room, "messages")+"?"+q)
		for _, it := range r.list(t) {
			m := it.(map[string]any)
			walked++
			p, ok := senders[m["sender_id"].(string)]
			if !ok || m["sender_name"] != p.name || m["sender_type"] != p.typ {
				t.Fatalf("message %v: sender_name %v, sender_type %v", m["id"], m["sender_name"], m["sender_type"])
			}
			seen[p.label] = true
		}
		meta := r.meta(t)
		if meta["has_more"] != true {
			break
		}
		q = "limit=100&cursor=" + url.QueryEscape(meta["next_cursor"].(string))
	}
	if !seen["alice"] || !seen["bob"] || !seen["helper"] || walked < 3 {
		t.Errorf("senders seen: %v in %d messages", seen, walked)
	}
}

func sendTitlesTheRoom(t *testing.T, w *messagesWorld) {
	room := w.newRoom(t, w.helper, "titled")
	w.add(t, w.helper, room, w.coder)
	expect(t, w.send(t, w.helper, room, "\u200bPlan the launch\nsecond line", byID(w.coder)), 201, "")
	if r := w.get(t, w.helper, w.helper.at(room)); r.data(t)["title"] != "Plan the launch" {
		t.Errorf("title = %v", r.data(t)["title"])
	}
}

func TestMessagesSendAuthorization(t *testing.T) {
	w := newMessagesWorld(t)
	// helperRoom is created by alice's agent: alice reads it through the
	// agent but is no participant herself.
	helperRoom := w.newRoom(t, w.helper, "helper's")
	hi := func(m messagesParty) any { return msgOf("content", "hi", "mentions", []any{byID(m)}) }
	thought := eventOf("content", "thinking", "message_type", "thought")

	w.ts.run(t, []scenario{
		{name: "a person not in the room", cred: w.carol.cred, method: "POST", path: w.carol.at(w.room, "messages"), body: hi(w.alice), status: 404, code: "not_found"},
		{name: "a person of the organization not in the room", cred: w.bob.cred, method: "POST", path: w.bob.at(helperRoom, "messages"), body: hi(w.helper), status: 404, code: "not_found"},
		{name: "an agent not in the room", cred: w.idle.cred, method: "POST", path: w.idle.at(w.room, "messages"), body: hi(w.alice), status: 404, code: "not_found"},
		{name: "an agent's event in a room it is not in", cred: w.idle.cred, method: "POST", path: w.idle.at(w.room, "events"), body: thought, status: 404, code: "not_found"},
		{name: "an unknown room", cred: w.helper.cred, method: "POST", path: w.helper.at(unknownID, "messages"), body: hi(w.alice), status: 404, code: "not_found"},
		{name: "a malformed room id", cred: w.alice.cred, method: "POST", path: w.alice.at("not-a-room", "messages"), body: hi(w.helper), status: 404, code: "not_found"},
		{name: "a person who reads the room only through an agent", cred: w.alice.cred, method: "POST", path: w.alice.at(helperRoom, "messages"), body: hi(w.helper), status: 403, code: "forbidden"},
		{name: "a person's key on the agent API", cred: w.alice.cred, method: "POST", path: w.helper.at(w.room, "messages"), body: hi(w.coder), status: 403, code: "forbidden"},
		{name: "an agent's key on the human API", cred: w.helper.cred, method: "POST", path: w.alice.at(w.room, "messages"), body: hi(w.coder), status: 403, code: "forbidden"},
		{name: "a person's key on the events API", cred: w.alice.cred, method: "POST", path: w.helper.at(w.room, "events"), body: thought, status: 403, code: "forbidden"},
		{name: "no credentials", cred: noCred, method: "POST", path: w.helper.at(w.room, "messages"), body: hi(w.coder), status: 401, code: "unauthorized"},
	})
	t.Run("a deleted room", func(t *testing.T) {
		gone := w.newRoom(t, w.alice, "gone")
		w.add(t, w.alice, gone, w.helper)
		expect(t, w.ts.do(t, "DELETE", w.alice.at(gone), w.alice.cred, nil), 204, "")
		w.ts.run(t, []scenario{
			{name: "human message", cred: w.alice.cred, method: "POST", path: w.alice.at(gone, "messages"), body: hi(w.helper), status: 404, code: "not_found"},
			{name: "agent message", cred: w.helper.cred, method: "POST", path: w.helper.at(gone, "messages"), body: hi(w.alice), status: 404, code: "not_found"},
			{name: "event", cred: w.helper.cred, method: "POST", path: w.helper.at(gone, "events"), body: thought, status: 404, code: "not_found"},
			{name: "history", cred: w.alice.cred, method: "GET", path: w.alice.at(gone, "messages"), status: 404, code: "not_found"},
			{name: "agent listing", cred: w.helper.cred, method: "GET", path: w.helper.at(gone, "messages"), status: 404, code: "not_found"},
			{name: "context", cred: w.helper.cred, method: "GET", path: w.helper.at(gone, "context"), status: 404, code: "not_found"},
		})
	})
	// The refusals are about posting: alice still reads the agent's room.
	w.get(t, w.alice, w.alice.at(helperRoom, "messages"))
}

func TestMessagesBlockedAgent(t *testing.T) {
	w := newMessagesWorld(t)
	r := w.ts.do(t, "PATCH", w.alice.at(w.room, "participants", w.coder.id), w.alice.cred,
		map[string]any{"participant": map[string]any{"status": "blocked"}})
	expect(t, r, 200, "")
	if r.data(t)["status"] != "blocked" {
		t.Fatalf("participant = %v", r.data(t))
	}
	// The spec: 403 when "the agent's execution in this room has been
	// stopped" (code execution_stopped), not the 404 of an unknown room.
	w.ts.run(t, []scenario{
		{name: "message", cred: w.coder.cred, method: "POST", path: w.coder.at(w.room, "messages"),
			body: msgOf("content", "still here", "mentions", []any{byID(w.alice)}), status: 403, code: "execution_stopped"},
		{name: "event", cred: w.coder.cred, method: "POST", path: w.coder.at(w.room, "events"),
			body: eventOf("content", "thinking", "message_type", "thought"), status: 403, code: "execution_stopped"},
	})
}

func TestMessagesQuota(t *testing.T) {
	w := newMessagesWorld(t, func(o *store.Options) { o.Limits = store.Limits{MessagesPerRoom: 3} })
	w.mustSend(t, "t1", w.alice, w.room, "one", byID(w.helper))
	w.event(t, "e1", w.helper, w.room, "thought", "two", nil)
	w.mustSend(t, "t2", w.helper, w.room, "three", byID(w.alice))

	full := []scenario{
		{name: "agent message", cred: w.helper.cred, method: "POST", path: w.helper.at(w.room, "messages"),
			body: msgOf("content", "four", "mentions", []any{byID(w.alice)}), status: 403, code: "limit_reached"},
		{name: "human message", cred: w.alice.cred, method: "POST", path: w.alice.at(w.room, "messages"),
			body: msgOf("content", "four", "mentions", []any{byID(w.helper)}), status: 403, code: "limit_reached"},
		{name: "event", cred: w.helper.cred, method: "POST", path: w.helper.at(w.room, "events"),
			body: eventOf("content", "four", "message_type", "tool_call", "metadata", map[string]any{"id": "c1"}), status: 403, code: "limit_reached"},
	}
	w.ts.run(t, full)
	for _, tc := range full {
		r := w.ts.do(t, "POST", tc.path, tc.cred, tc.body)
		d := errorDetails(t, r)
		if d["resource"] != "messages" || d["limit"] != float64(3) || d["current"] != float64(3) {
			t.Errorf("%s: details = %v", tc.name, d)
		}
	}
	// Validation comes first: a bad message is 422 even in a full room.
	expect(t, w.send(t, w.helper, w.room, " ", byID(w.alice)), 422, "validation_error")
	// The quota is per room.
	other := w.newRoom(t, w.alice, "other")
	w.add(t, w.alice, other, w.helper)
	w.mustSend(t, "o1", w.helper, other, "fresh room", byID(w.alice))
}

func TestMessagesWriteQueueFull(t *testing.T) {
	w := newMessagesWorld(t, func(o *store.Options) { o.QueueSize = 2 })
	writes := []struct {
		name string
		as   messagesParty
		path string
		body any
	}{
		{"agent message", w.helper, w.helper.at(w.room, "messages"), msgOf("content", "hi", "mentions", []any{byID(w.alice)})},
		{"human message", w.alice, w.alice.at(w.room, "messages"), msgOf("content", "hi", "mentions", []any{byID(w.helper)})},
		{"event", w.helper, w.helper.at(w.room, "events"), eventOf("content", "hmm", "message_type", "thought")},
	}
	before := w.ts.snapshot(t)
	release := w.ts.fillWriteQueue(t)
	for _, wr := range writes {
		r := w.ts.do(t, "POST", wr.path, wr.as.cred, wr.body)
		expect(t, r, 503, "service_unavailable")
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", wr.name)
		}
	}
	// A refusal decided before the queue is still answered as such.
	expect(t, w.send(t, w.helper, w.room, "hi"), 422, "mentions_required")
	// Reads do not wait for the writer.
	w.get(t, w.alice, w.alice.at(w.room, "messages"))
	w.get(t, w.helper, w.helper.at(w.room, "messages"))
	release()
	w.ts.unchanged(t, before)
	for _, wr := range writes {
		expect(t, w.ts.do(t, "POST", wr.path, wr.as.cred, wr.body), 201, "")
	}
}

// ---------------------------------------------------------------------------
// Events.

func TestEvents(t *testing.T) {
	t.Parallel() // its own server and database
	w := newMessagesWorld(t)
	path := w.helper.at(w.room, "events")
	metadataFor := map[string]any{
		"tool_call":   map[string]any{"function": map[string]any{"name": "grep", "arguments": map[string]any{"q": "x"}}, "id": "call_1", "type": "function"},
		"tool_result": map[string]any{"success": true, "message": "3 matches", "matches": []any{1.0, 2.0, 3.0}},
		"error":       map[string]any{"error_code": "E42", "details": "boom"},
		"attention":   map[string]any{"kind": "question", "blocking": true},
	}

	t.Run("every event type", func(t *testing.T) { eventsOfEveryType(t, w, metadataFor) })
	t.Run("sizes at the limits", func(t *testing.T) { eventsAtTheSizeLimits(t, w, path) })
	t.Run("absent or null metadata", func(t *testing.T) { eventsWithoutMetadata(t, w, path) })
	t.Run("attention kinds", func(t *testing.T) { eventsOfEveryAttentionKind(t, w) })

	w.ts.run(t, eventRefusals(w, path))

	t.Run("events reach no agent", func(t *testing.T) { eventsReachNoAgent(t, w) })
}

// eventsOfEveryType posts an event of each type and reads it back: people
// from the room's history, the agent from its context. The internal types
// are the agent's alone: people neither list them, nor filter by them, nor
// read one by its id.
func eventsOfEveryType(t *testing.T, w *messagesWorld, metadataFor map[string]any) {
	for _, typ := range store.EventTypes {
		t.Run(typ, func(t *testing.T) {
			id := w.event(t, typ, w.helper, w.room, typ, "a "+typ, metadataFor[typ])
			history := w.get(t, w.alice, w.alice.at(w.room, "messages")+"?limit=100")
			reader := history
			if store.IsInternalType(typ) {
				if strings.Contains(string(history.body), id) {
					t.Fatalf("a person's history lists the %s event: %s", typ, history.body)
				}
				w.ts.refused(t, "GET", w.alice.at(w.room, "messages")+"?message_type="+typ, w.alice.cred, nil, 422, "validation_error", "/message_type")
				w.ts.refused(t, "POST", w.alice.at(w.room, "messages", id, "reactions"), w.alice.cred, map[string]any{"emoji": "👍"}, 404, "not_found", "")
				reader = w.get(t, w.helper, w.helper.at(w.room, "context")+"?limit=100")
			}
			m := w.byLabel(t, reader, typ)
			if m["id"] != id || m["message_type"] != typ || m["content"] != "a "+typ ||
				m["sender_id"] != w.helper.id || m["sender_type"] != "Agent" || m["sender_name"] != "Helper" {
				t.Fatalf("stored = %v", m)
			}
			want := metadataFor[typ]
			if want == nil {
				want = map[string]any{}
			}
			if !reflect.DeepEqual(m["metadata"], want) {
				t.Errorf("metadata = %v, want %v", m["metadata"], want)
			}
		})
	}
}

func eventsAtTheSizeLimits(t *testing.T, w *messagesWorld, path string) {
	// Characters, not bytes: 16384 two-byte characters fit.
	content := strings.Repeat("é", store.MaxEventContentLen)
	id := w.event(t, "long", w.helper, w.room, "thought", content, nil)
	m := w.byLabel(t, w.get(t, w.alice, w.alice.at(w.room, "messages")+"?message_type=thought&limit=100"), "long")
	if m["id"] != id || m["content"] != content {
		t.Errorf("long content was not stored whole")
	}
	// {"k":"xxx…"} serialized in exactly 65536 bytes.
	exact := map[string]any{"k": strings.Repeat("x", store.MaxEventMetadataLen-8)}
	if n := len(mustJSON(t, exact)); n != store.MaxEventMetadataLen {
		t.Fatalf("test metadata is %d bytes", n)
	}
	w.event(t, "big", w.helper, w.room, "tool_result", "big", exact)
	w.event(t, "deep", w.helper, w.room, "tool_result", "deep", nestedObject(store.MaxMetadataDepth))
	// Serialized means compact: spaces around the same object do not count.
	spaced := fmt.Sprintf(`{"event": {"content": "spaced", "message_type": "tool_result", "metadata": {  "k" :  %q  } } }`, exact["k"])
	expect(t, w.ts.do(t, "POST", path, w.helper.cred, spaced), 201, "")
}

func eventsWithoutMetadata(t *testing.T, w *messagesWorld, path string) {
	w.event(t, "absent", w.helper, w.room, "thought", "no metadata", nil)
	r := w.ts.do(t, "POST", path, w.helper.cred, map[string]any{"event": map[string]any{"content": "explicit null", "message_type": "thought", "metadata": nil}})
	expect(t, r, 201, "")
	w.labels[r.data(t)["id"].(string)] = "explicit-null"
	list := w.get(t, w.alice, w.alice.at(w.room, "messages")+"?message_type=thought&limit=100")
	for _, label := range []string{"absent", "explicit-null"} {
		if m := w.byLabel(t, list, label); !reflect.DeepEqual(m["metadata"], map[string]any{}) {
			t.Errorf("%s: metadata = %v", label, m["metadata"])
		}
	}
}

func eventsOfEveryAttentionKind(t *testing.T, w *messagesWorld) {
	for _, kind := range []string{"question", "assumption", "failure", "review"} {
		w.event(t, "attention-"+kind, w.helper, w.room, "attention", "need a human", map[string]any{"kind": kind})
	}
	w.event(t, "attention-null-task", w.helper, w.room, "attention", "no task", map[string]any{"kind": "review", "task_id": nil, "blocking": false})
	first := w.event(t, "attention-open", w.helper, w.room, "attention", "which db?", map[string]any{"kind": "question", "blocking": true})
	w.event(t, "attention-resolved", w.helper, w.room, "attention", "postgres", map[string]any{"kind": "question", "resolves": first, "resolution": "postgres"})
}

func eventsReachNoAgent(t *testing.T, w *messagesWorld) {
	for _, p := range []messagesParty{w.helper, w.coder} {
		r := w.get(t, p, p.at(w.room, "messages")+"?status=all")
		if got := w.names(t, r); got != "" {
			t.Errorf("%s lists %s", p.label, got)
		}
	}
}

// nestedObject is an object that nests levels of objects, itself
// included: {"a":{"a":{}}} is 3.
func nestedObject(levels int) any {
	var v any = map[string]any{}
	for range levels - 1 {
		v = map[string]any{"a": v}
	}
	return v
}

// eventRefusals are the 400 and 422 refusals of an event helper posts to
// path.
func eventRefusals(w *messagesWorld, path string) []scenario {
	ev := func(kv ...any) any { return eventOf(kv...) }
	rf := func(name string, body any, status int, code string, pointers ...string) scenario {
		return scenario{name: name, cred: w.helper.cred, method: "POST", path: path, body: body, status: status, code: code, pointers: pointers}
	}
	v422 := func(name string, body any, pointers ...string) scenario {
		return rf(name, body, 422, "validation_error", pointers...)
	}
	over := map[string]any{"k": strings.Repeat("x", store.MaxEventMetadataLen-7)}
	return []scenario{
		v422("no body", nil, "/event"),
		v422("no event object", map[string]any{}, "/event"),
		v422("content and type missing", ev(), "/event/content", "/event/message_type"),
		v422("content missing", ev("message_type", "thought"), "/event/content"),
		v422("type missing", ev("content", "x"), "/event/message_type"),
		v422("unknown type", ev("content", "x", "message_type", "shout"), "/event/message_type"),
		v422("text is no event type", ev("content", "x", "message_type", "text"), "/event/message_type"),
		v422("type in another case", ev("content", "x", "message_type", "Thought"), "/event/message_type"),
		v422("empty type", ev("content", "x", "message_type", ""), "/event/message_type"),
		v422("content of the wrong type", ev("content", 5, "message_type", "thought"), "/event/content"),
		v422("empty content", ev("content", "", "message_type", "tool_result"), "/event/content"),
		v422("blank content", ev("content", " \n\t", "message_type", "thought"), "/event/content"),
		v422("only invisible characters", ev("content", "\u200b\u2060", "message_type", "error"), "/event/content"),
		v422("content one character too long", ev("content", strings.Repeat("é", store.MaxEventContentLen+1), "message_type", "thought"), "/event/content"),
		v422("metadata one byte too big", ev("content", "x", "message_type", "tool_result", "metadata", over), "/event/metadata"),
		v422("metadata nested a level too deep", ev("content", "x", "message_type", "tool_result", "metadata", nestedObject(store.MaxMetadataDepth+1)), "/event/metadata"),
		v422("metadata nested a thousand levels", ev("content", "x", "message_type", "tool_result", "metadata", nestedObject(1000)), "/event/metadata"),
		v422("metadata an array", ev("content", "x", "message_type", "tool_call", "metadata", []any{1}), "/event/metadata"),
		v422("metadata a string", ev("content", "x", "message_type", "tool_call", "metadata", "{}"), "/event/metadata"),
		v422("metadata a number", ev("content", "x", "message_type", "tool_call", "metadata", 1), "/event/metadata"),
		v422("metadata a boolean", ev("content", "x", "message_type", "tool_call", "metadata", true), "/event/metadata"),
		v422("attention without metadata", ev("content", "x", "message_type", "attention"), "/event/metadata/kind"),
		v422("attention with null metadata", ev("content", "x", "message_type", "attention", "metadata", nil), "/event/metadata/kind"),
		v422("attention without kind", ev("content", "x", "message_type", "attention", "metadata", map[string]any{"blocking": true}), "/event/metadata/kind"),
		v422("attention with an unknown kind", ev("content", "x", "message_type", "attention", "metadata", map[string]any{"kind": "panic"}), "/event/metadata/kind"),
		v422("attention with a kind of the wrong type", ev("content", "x", "message_type", "attention", "metadata", map[string]any{"kind": 1}), "/event/metadata/kind"),
		v422("attention with a task id", ev("content", "x", "message_type", "attention", "metadata", map[string]any{"kind": "review", "task_id": unknownID}), "/event/metadata/task_id"),
		v422("attention with blocking not a boolean", ev("content", "x", "message_type", "attention", "metadata", map[string]any{"kind": "review", "blocking": "yes"}), "/event/metadata/blocking"),
		v422("every problem at once", ev("content", strings.Repeat("a", store.MaxEventContentLen+1), "message_type", "shout", "metadata", []any{}),
			"/event/content", "/event/message_type", "/event/metadata"),
		rf("unknown field", ev("content", "x", "message_type", "thought", "mentions", []any{}), 400, "unknown_field", "/event/mentions"),
		rf("unknown top-level field", map[string]any{"event": map[string]any{"content": "x", "message_type": "thought"}, "message": map[string]any{}}, 400, "unknown_field", "/message"),
	}
}

// ---------------------------------------------------------------------------
// Reading.

func TestAgentMessageListing(t *testing.T) {
	t.Parallel() // its own server and database
	w := newMessagesWorld(t)
	room := w.room
	// What helper must not see: messages to others, its own, events,
	// references.
	w.mustSend(t, "to-coder", w.alice, room, "for coder", byID(w.coder))
	w.mustSend(t, "own", w.helper, room, "from helper", byID(w.alice))
	w.event(t, "event", w.helper, room, "thought", "thinking", nil)
	w.event(t, "coder-event", w.coder, room, "tool_call", "calling", map[string]any{"id": "c1"})
	w.mustSend(t, "reference", w.alice, room, "about @alice/helper", byID(w.coder), mentionOf("id", w.helper.id, "kind", "reference"))
	// What helper sees: a..e, in several states.
	w.mustSend(t, "a", w.alice, room, "a", byID(w.helper))
	b := w.mustSend(t, "b", w.coder, room, "b", byID(w.helper), byID(w.alice))
	c := w.mustSend(t, "c", w.bob, room, "c", mentionOf("handle", "alice/helper"))
	d := w.mustSend(t, "d", w.alice, room, "d", byID(w.coder), byID(w.helper))
	e := w.mustSend(t, "e", w.coder, room, "e", byID(w.helper))
	w.mark(t, w.helper, room, b, "processing") // b: processing
	w.mark(t, w.helper, room, c, "processing") // c: processed
	w.mark(t, w.helper, room, c, "processed")
	w.mark(t, w.helper, room, d, "processing") // d: failed
	w.mark(t, w.helper, room, d, "failed")
	w.mark(t, w.helper, room, e, "processing") // e: failed, then retried
	w.mark(t, w.helper, room, e, "failed")
	w.mark(t, w.helper, room, e, "processing")
	path := w.helper.at(room, "messages")

	t.Run("status filter", func(t *testing.T) { agentListingFiltersByStatus(t, w, path) })
	t.Run("each message carries the agent's own state", func(t *testing.T) { agentListingShowsOwnState(t, w, path) })
	t.Run("other agents see their own messages", func(t *testing.T) { agentListingIsPerAgent(t, w, room) })
	t.Run("cursor paging", func(t *testing.T) { agentListingPagesByCursor(t, w, path) })
	t.Run("legacy page and page_size", func(t *testing.T) { agentListingPagesByPage(t, w, path) })
	t.Run("refusals", func(t *testing.T) { agentListingRefusals(t, w, room, path) })
}

func agentListingFiltersByStatus(t *testing.T, w *messagesWorld, path string) {
	for _, tc := range []struct {
		query  string
		want   string
		filter any
	}{
		{"", "a,b,d,e", nil},
		{"status=pending", "a,d", "pending"},
		{"status=processing", "b,e", "processing"},
		{"status=processed", "c", "processed"},
		{"status=failed", "d", "failed"},
		{"status=all", "a,b,c,d,e", "all"},
		{"status=all&sort_order=desc", "e,d,c,b,a", "all"},
		{"sort_order=asc", "a,b,d,e", nil},
		{"sort_order=desc", "e,d,b,a", nil},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := w.get(t, w.helper, path+"?"+tc.query)
			if got := w.names(t, r); got != tc.want {
				t.Fatalf("listed %s, want %s", got, tc.want)
			}
			meta := r.meta(t)
			if sf, ok := meta["status_filter"]; !ok || sf != tc.filter {
				t.Errorf("status_filter = %v (present %v), want %v", sf, ok, tc.filter)
			}
			if meta["has_more"] != false || meta["next_cursor"] != nil || meta["limit"] != float64(20) {
				t.Errorf("metadata = %v", meta)
			}
			if _, ok := meta["total_count"]; ok || r.header.Get("Deprecation") != "" {
				t.Errorf("cursor mode carries offset paging: %v", meta)
			}
		})
	}
}

func agentListingShowsOwnState(t *testing.T, w *messagesWorld, path string) {
	r := w.get(t, w.helper, path+"?status=all")
	for _, tc := range []struct {
		label, status string
		attempts      []string
	}{
		{"a", "pending", nil},
		{"b", "processing", []string{"processing"}},
		{"c", "processed", []string{"processed"}},
		{"d", "failed", []string{"failed"}},
		{"e", "processing", []string{"failed", "processing"}},
	} {
		m := w.byLabel(t, r, tc.label)
		if m["message_type"] != "text" || m["sender_name"] == nil || m["sender_type"] == nil {
			t.Errorf("%s: %v", tc.label, m)
		}
		meta := m["metadata"].(map[string]any)
		attempts := meta["attempts"].([]any)
		if meta["status"] != tc.status || meta["current_attempt"] != float64(len(tc.attempts)) || len(attempts) != len(tc.attempts) {
			t.Errorf("%s: metadata = %v", tc.label, meta)
			continue
		}
		for i, at := range attempts {
			at := at.(map[string]any)
			if at["status"] != tc.attempts[i] || at["attempt_number"] != float64(i+1) {
				t.Errorf("%s: attempt %d = %v", tc.label, i, at)
			}
		}
		// Only the reader's own delivery is shown to an agent.
		if ds := meta["delivery_status"].(map[string]any); len(ds) != 1 || ds[w.helper.id] == nil {
			t.Errorf("%s: delivery_status = %v", tc.label, ds)
		}
	}
	if attempts := w.byLabel(t, r, "d")["metadata"].(map[string]any)["attempts"].([]any); attempts[0].(map[string]any)["error"] != "x" {
		t.Errorf("failed attempt = %v", attempts[0])
	}
}

func agentListingIsPerAgent(t *testing.T, w *messagesWorld, room string) {
	r := w.get(t, w.coder, w.coder.at(room, "messages")+"?status=all")
	if got := w.names(t, r); got != "to-coder,reference,d" {
		t.Errorf("coder lists %s", got)
	}
}

func agentListingPagesByCursor(t *testing.T, w *messagesWorld, path string) {
	for _, tc := range []struct{ query, want string }{
		{"status=all&limit=2", "a,b|c,d|e"},
		{"status=all&limit=2&sort_order=desc", "e,d|c,b|a"},
		{"limit=3", "a,b,d|e"},
		{"status=all&limit=5", "a,b,c,d,e"},
		{"status=all&limit=1", "a|b|c|d|e"},
	} {
		if got := w.walk(t, w.helper, path, tc.query); got != tc.want {
			t.Errorf("%s: walked %s, want %s", tc.query, got, tc.want)
		}
	}
}

func agentListingPagesByPage(t *testing.T, w *messagesWorld, path string) {
	for _, tc := range []struct {
		query              string
		want               string
		page, total, pages float64
		more               bool
	}{
		{"status=all&page=2&page_size=2", "c,d", 2, 5, 3, true},
		{"status=all&page=3&page_size=2", "e", 3, 5, 3, false},
		{"page=1&page_size=3", "a,b,d", 1, 4, 2, true},
		{"status=all&page=9&page_size=2", "", 9, 5, 3, false},
	} {
		r := w.get(t, w.helper, path+"?"+tc.query)
		if got := w.names(t, r); got != tc.want {
			t.Errorf("%s: listed %s, want %s", tc.query, got, tc.want)
		}
		meta := r.meta(t)
		if meta["page"] != tc.page || meta["total_count"] != tc.total || meta["total_pages"] != tc.pages || meta["has_more"] != tc.more {
			t.Errorf("%s: metadata = %v", tc.query, meta)
		}
		if r.header.Get("Deprecation") == "" || r.header.Get("Sunset") != "Thu, 01 Oct 2026 00:00:00 GMT" {
			t.Errorf("%s: Deprecation %q Sunset %q", tc.query, r.header.Get("Deprecation"), r.header.Get("Sunset"))
		}
	}
}

func agentListingRefusals(t *testing.T, w *messagesWorld, room, path string) {
	asc := w.get(t, w.helper, path+"?status=all&limit=1").meta(t)["next_cursor"].(string)
	other := w.newRoom(t, w.alice, "other")
	w.add(t, w.alice, other, w.helper)
	w.mustSend(t, "o1", w.alice, other, "o1", byID(w.helper))
	w.mustSend(t, "o2", w.alice, other, "o2", byID(w.helper))
	fromOther := w.get(t, w.helper, w.helper.at(other, "messages")+"?limit=1").meta(t)["next_cursor"].(string)
	get := func(name, query string, status int, code string, pointers ...string) scenario {
		return scenario{name: name, cred: w.helper.cred, method: "GET", path: path + "?" + query, status: status, code: code, pointers: pointers}
	}
	w.ts.run(t, []scenario{
		get("garbage cursor", "cursor=garbage", 422, "invalid_cursor", "/cursor"),
		get("tampered cursor", "cursor="+url.QueryEscape(flipChar(asc, len(asc)-5)), 422, "invalid_cursor", "/cursor"),
		get("cursor of another sort order", "sort_order=desc&cursor="+url.QueryEscape(asc), 422, "invalid_cursor", "/cursor"),
		get("cursor of another room", "cursor="+url.QueryEscape(fromOther), 422, "invalid_cursor", "/cursor"),
		get("limit 0", "limit=0", 422, "validation_error", "/limit"),
		get("limit 101", "limit=101", 422, "validation_error", "/limit"),
		get("limit not a number", "limit=all", 422, "validation_error", "/limit"),
		get("page 0", "page=0", 422, "validation_error", "/page"),
		get("page_size 101", "page_size=101", 422, "validation_error", "/page_size"),
		get("cursor with page", "cursor="+url.QueryEscape(asc)+"&page=1", 422, "validation_error"),
		get("unknown status", "status=delivered", 422, "validation_error", "/status"),
		get("empty status", "status=", 422, "validation_error", "/status"),
		get("unknown sort order", "sort_order=newest", 422, "validation_error", "/sort_order"),
		{name: "an agent not in the room", cred: w.idle.cred, method: "GET", path: w.idle.at(room, "messages"), status: 404, code: "not_found"},
		{name: "an unknown room", cred: w.helper.cred, method: "GET", path: w.helper.at(unknownID, "messages"), status: 404, code: "not_found"},
		{name: "a person's key", cred: w.alice.cred, method: "GET", path: path, status: 403},
	})
	// The cursor of a page still works where it was issued.
	if got := w.names(t, w.get(t, w.helper, path+"?status=all&limit=1&cursor="+url.QueryEscape(asc))); got != "b" {
		t.Errorf("after the asc cursor: %s", got)
	}
}

func TestHumanMessageHistory(t *testing.T) {
	t.Parallel() // its own server and database
	w := newMessagesWorld(t)
	room := w.room
	w.mustSend(t, "t1", w.alice, room, "one", byID(w.helper))
	w.event(t, "e1", w.helper, room, "thought", "thinking", nil)
	t2 := w.mustSend(t, "t2", w.helper, room, "two", byID(w.alice), byID(w.coder))
	w.event(t, "e2", w.coder, room, "tool_call", "calling", map[string]any{"id": "c1"})
	t3 := w.mustSend(t, "t3", w.bob, room, "three", byID(w.helper), byID(w.coder), mentionOf("id", w.alice.id, "kind", "reference"))
	w.mark(t, w.helper, room, t3, "processing")
	w.mark(t, w.helper, room, t3, "processed")
	w.mark(t, w.coder, room, t2, "processing")
	path := w.alice.at(room, "messages")

	all := w.get(t, w.alice, path)
	sinceT2 := w.byLabel(t, all, "t2")["inserted_at"].(string)

	t.Run("listing and filters", func(t *testing.T) { historyListsAndFilters(t, w, path, sinceT2, t2, t3) })
	t.Run("delivery status per mentioned agent", func(t *testing.T) { historyShowsEachAgentsDelivery(t, w, t2, t3, all) })
	t.Run("cursor paging, newest first", func(t *testing.T) { historyPagesByCursor(t, w, path, t2, t3) })
	t.Run("legacy page and page_size", func(t *testing.T) { historyPagesByPage(t, w, path, t2) })
	t.Run("a person reads a room through an agent it owns", func(t *testing.T) { historyReadsThroughAnOwnedAgent(t, w, room) })
	t.Run("refusals", func(t *testing.T) { historyRefusals(t, w, room, path, sinceT2) })
}

func historyListsAndFilters(t *testing.T, w *messagesWorld, path, sinceT2, t2, t3 string) {
	for _, tc := range []struct {
		as    messagesParty
		query string
		want  string
	}{
		{w.alice, "", "t3,e2,t2,e1,t1"},
		{w.bob, "", "t3,e2,t2,e1,t1"},
		{w.alice, "message_type=text", "t3,t2,t1"},
		{w.alice, "message_type=thought", "e1"},
		{w.alice, "message_type=tool_call", "e2"},
		{w.alice, "message_type=attention", ""},
		{w.alice, "since=" + url.QueryEscape(sinceT2), "t3,e2"},
		{w.alice, "since=2000-01-01T00:00:00Z", "t3,e2,t2,e1,t1"},
		{w.alice, "since=2999-01-01T00:00:00%2B02:00", ""},
		{w.alice, "message_type=text&since=" + url.QueryEscape(sinceT2), "t3"},
	} {
		r := w.get(t, tc.as, path+"?"+tc.query)
		if got := w.names(t, r); got != tc.want {
			t.Errorf("%s %s: listed %s, want %s", tc.as.label, tc.query, got, tc.want)
		}
		meta := r.meta(t)
		if meta["has_more"] != false || meta["next_cursor"] != nil || meta["limit"] != float64(20) {
			t.Errorf("%s: metadata = %v", tc.query, meta)
		}
	}
}

func historyShowsEachAgentsDelivery(t *testing.T, w *messagesWorld, t2, t3 string, all *response) {
	ds := func(label string) map[string]any {
		return w.byLabel(t, all, label)["metadata"].(map[string]any)["delivery_status"].(map[string]any)
	}
	t3ds := ds("t3")
	if len(t3ds) != 2 {
		t.Fatalf("t3 delivery_status = %v", t3ds)
	}
	h := t3ds[w.helper.id].(map[string]any)
	if h["status"] != "processed" || h["current_attempt"] != float64(1) || h["processed_at"] == nil {
		t.Errorf("helper's t3 = %v", h)
	}
	if at := h["attempts"].([]any); len(at) != 1 || at[0].(map[string]any)["status"] != "processed" || at[0].(map[string]any)["completed_at"] == nil {
		t.Errorf("helper's t3 attempts = %v", at)
	}
	c := t3ds[w.coder.id].(map[string]any)
	if c["status"] != "pending" || c["current_attempt"] != float64(0) || !reflect.DeepEqual(c["attempts"], []any{}) || c["processed_at"] != nil {
		t.Errorf("coder's t3 = %v", c)
	}
	// t2 mentions alice (a person: no delivery) and coder.
	t2ds := ds("t2")
	if len(t2ds) != 1 || t2ds[w.coder.id].(map[string]any)["status"] != "processing" {
		t.Errorf("t2 delivery_status = %v", t2ds)
	}
	// A person reading has no own status at the top of metadata.
	if meta := w.byLabel(t, all, "t3")["metadata"].(map[string]any); meta["status"] != nil || meta["attempts"] != nil {
		t.Errorf("t3 metadata = %v", meta)
	}
	// An event's metadata is what was posted.
	if meta := w.byLabel(t, all, "e2")["metadata"]; !reflect.DeepEqual(meta, map[string]any{"id": "c1"}) {
		t.Errorf("e2 metadata = %v", meta)
	}
}

func historyPagesByCursor(t *testing.T, w *messagesWorld, path, t2, t3 string) {
	if got := w.walk(t, w.alice, path, "limit=2"); got != "t3,e2|t2,e1|t1" {
		t.Errorf("walked %s", got)
	}
	if got := w.walk(t, w.alice, path, "limit=1&message_type=text"); got != "t3|t2|t1" {
		t.Errorf("walked text %s", got)
	}
}

func historyPagesByPage(t *testing.T, w *messagesWorld, path, t2 string) {
	r := w.get(t, w.alice, path+"?page=2&page_size=2")
	if got := w.names(t, r); got != "t2,e1" {
		t.Errorf("page 2 = %s", got)
	}
	meta := r.meta(t)
	if meta["page"] != float64(2) || meta["page_size"] != float64(2) || meta["total_count"] != float64(5) || meta["total_pages"] != float64(3) || meta["has_more"] != true {
		t.Errorf("metadata = %v", meta)
	}
	if r.header.Get("Deprecation") == "" || r.header.Get("Sunset") != "Thu, 01 Oct 2026 00:00:00 GMT" {
		t.Errorf("Deprecation %q Sunset %q", r.header.Get("Deprecation"), r.header.Get("Sunset"))
	}
}

func historyReadsThroughAnOwnedAgent(t *testing.T, w *messagesWorld, room string) {
	agentRoom := w.newRoom(t, w.helper, "agent room")
	w.add(t, w.helper, agentRoom, w.coder)
	w.mustSend(t, "ar1", w.helper, agentRoom, "hello", byID(w.coder))
	w.event(t, "ar2", w.coder, agentRoom, "thought", "on it", nil)
	if got := w.names(t, w.get(t, w.alice, w.alice.at(agentRoom, "messages"))); got != "ar2,ar1" {
		t.Errorf("alice reads %s", got)
	}
	// bob owns no agent there and is no participant.
	expect(t, w.ts.do(t, "GET", w.bob.at(agentRoom, "messages"), w.bob.cred, nil), 404, "not_found")
}

func historyRefusals(t *testing.T, w *messagesWorld, room, path, sinceT2 string) {
	textCursor := w.get(t, w.alice, path+"?limit=1&message_type=text").meta(t)["next_cursor"].(string)
	get := func(name string, as messagesParty, query string, status int, code string, pointers ...string) scenario {
		return scenario{name: name, cred: as.cred, method: "GET", path: path + "?" + query, status: status, code: code, pointers: pointers}
	}
	w.ts.run(t, []scenario{
		get("since with cursor", w.alice, "since="+url.QueryEscape(sinceT2)+"&cursor="+url.QueryEscape(textCursor), 422, "validation_error", "/since"),
		get("since not a date-time", w.alice, "since=yesterday", 422, "validation_error", "/since"),
		get("unknown message type", w.alice, "message_type=shout", 422, "validation_error", "/message_type"),
		get("cursor of another filter", w.alice, "cursor="+url.QueryEscape(textCursor), 422, "invalid_cursor", "/cursor"),
		get("garbage cursor", w.alice, "cursor=%00zz", 422, "invalid_cursor", "/cursor"),
		get("limit 0", w.alice, "limit=0", 422, "validation_error", "/limit"),
		get("limit 101", w.alice, "limit=101", 422, "validation_error", "/limit"),
		get("page_size 0", w.alice, "page_size=0", 422, "validation_error", "/page_size"),
		get("a person not in the room", w.carol, "", 404, "not_found"),
		get("an agent's key", w.helper, "", 403, ""),
		{name: "an unknown room", cred: w.alice.cred, method: "GET", path: w.alice.at(unknownID, "messages"), status: 404, code: "not_found"},
		{name: "a malformed room id", cred: w.alice.cred, method: "GET", path: w.alice.at("nope", "messages"), status: 404, code: "not_found"},
	})
	// A blocked person reads nothing.
	expect(t, w.ts.do(t, "PATCH", w.alice.at(room, "participants", w.bob.id), w.alice.cred,
		map[string]any{"participant": map[string]any{"status": "blocked"}}), 200, "")
	expect(t, w.ts.do(t, "GET", path, w.bob.cred, nil), 404, "not_found")
}

func TestAgentContext(t *testing.T) {
	w := newMessagesWorld(t)
	room := w.room
	t1 := w.mustSend(t, "t1", w.alice, room, "one", byID(w.helper))
	w.mustSend(t, "t2", w.alice, room, "two", byID(w.coder))
	w.event(t, "e1", w.helper, room, "thought", "thinking", map[string]any{"step": 1.0})
	w.mustSend(t, "t3", w.helper, room, "three", byID(w.alice))
	w.event(t, "e2", w.coder, room, "tool_call", "calling", nil)
	w.mustSend(t, "t4", w.bob, room, "four", byID(w.coder), mentionOf("id", w.helper.id, "kind", "reference"))
	w.mustSend(t, "t5", w.coder, room, "five", byID(w.helper), byID(w.alice))
	w.event(t, "e3", w.helper, room, "attention", "which one?", map[string]any{"kind": "question"})
	// A processed message stays in the context.
	w.mark(t, w.helper, room, t1, "processing")
	w.mark(t, w.helper, room, t1, "processed")
	path := w.helper.at(room, "context")

	t.Run("what the agent sent and what mentions it, oldest first", func(t *testing.T) { contextListsSentAndMentioning(t, w, room, t1) })
	t.Run("messages carry their metadata", func(t *testing.T) { contextCarriesMetadata(t, w, path, t1) })
	t.Run("paging", func(t *testing.T) { contextPages(t, w, path, t1) })
	t.Run("refusals", func(t *testing.T) { contextRefusals(t, w, room, path) })
}

func contextListsSentAndMentioning(t *testing.T, w *messagesWorld, room, t1 string) {
	for _, tc := range []struct {
		as   messagesParty
		want string
	}{
		{w.helper, "t1,e1,t3,t5,e3"},
		{w.coder, "t2,e2,t4,t5"},
	} {
		r := w.get(t, tc.as, tc.as.at(room, "context"))
		if got := w.names(t, r); got != tc.want {
			t.Errorf("%s: context %s, want %s", tc.as.label, got, tc.want)
		}
		body := r.json(t)
		meta, deprecated := body["metadata"], body["meta"]
		if meta == nil || !reflect.DeepEqual(meta, deprecated) {
			t.Errorf("%s: metadata %v, meta %v", tc.as.label, meta, deprecated)
		}
		m := meta.(map[string]any)
		if m["has_more"] != false || m["next_cursor"] != nil || m["limit"] != float64(50) {
			t.Errorf("%s: metadata = %v", tc.as.label, m)
		}
	}
}

func contextCarriesMetadata(t *testing.T, w *messagesWorld, path, t1 string) {
	r := w.get(t, w.helper, path)
	if meta := w.byLabel(t, r, "t1")["metadata"].(map[string]any); meta["status"] != "processed" || meta["current_attempt"] != float64(1) {
		t.Errorf("t1 metadata = %v", meta)
	}
	if meta := w.byLabel(t, r, "e1")["metadata"]; !reflect.DeepEqual(meta, map[string]any{"step": 1.0}) {
		t.Errorf("e1 metadata = %v", meta)
	}
	if m := w.byLabel(t, r, "t3"); m["sender_id"] != w.helper.id || m["sender_name"] != "Helper" || m["sender_type"] != "Agent" {
		t.Errorf("t3 = %v", m)
	}
}

func contextPages(t *testing.T, w *messagesWorld, path, t1 string) {
	if got := w.walk(t, w.helper, path, "limit=2"); got != "t1,e1|t3,t5|e3" {
		t.Errorf("walked %s", got)
	}
	r := w.get(t, w.helper, path+"?page=2&page_size=2")
	if got := w.names(t, r); got != "t3,t5" {
		t.Errorf("page 2 = %s", got)
	}
	body := r.json(t)
	meta := body["metadata"].(map[string]any)
	if meta["total_count"] != float64(5) || meta["total_pages"] != float64(3) || meta["page"] != float64(2) || !reflect.DeepEqual(meta, body["meta"]) {
		t.Errorf("metadata %v, meta %v", meta, body["meta"])
	}
	if r.header.Get("Deprecation") == "" || r.header.Get("Sunset") != "Thu, 01 Oct 2026 00:00:00 GMT" {
		t.Errorf("Deprecation %q Sunset %q", r.header.Get("Deprecation"), r.header.Get("Sunset"))
	}
}

func contextRefusals(t *testing.T, w *messagesWorld, room, path string) {
	fromMessages := w.get(t, w.helper, w.helper.at(room, "messages")+"?status=all&limit=1").meta(t)["next_cursor"].(string)
	get := func(name string, as messagesParty, query string, status int, code string, pointers ...string) scenario {
		return scenario{name: name, cred: as.cred, method: "GET", path: path + "?" + query, status: status, code: code, pointers: pointers}
	}
	w.ts.run(t, []scenario{
		get("limit 0", w.helper, "limit=0", 422, "validation_error", "/limit"),
		get("limit 101", w.helper, "limit=101", 422, "validation_error", "/limit"),
		get("garbage cursor", w.helper, "cursor=abc.def", 422, "invalid_cursor", "/cursor"),
		get("cursor of the messages listing", w.helper, "cursor="+url.QueryEscape(fromMessages), 422, "invalid_cursor", "/cursor"),
		get("an agent not in the room", w.idle, "", 404, "not_found"),
		get("a person's key", w.alice, "", 403, "forbidden"),
		{name: "an unknown room", cred: w.helper.cred, method: "GET", path: w.helper.at(unknownID, "context"), status: 404, code: "not_found"},
	})
}

// flipChar returns s with the character at i replaced by a different one of
// the cursor alphabet.
func flipChar(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}
