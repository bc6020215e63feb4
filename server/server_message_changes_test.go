package server

import (
	"net/url"
	"strings"
	"testing"

	"github.com/chatd/chatd/store"
)

// chatKit: alice owns a room with bob and her agents helper and scout in
// it; carol, of another organization, is in none of it.
type chatKit struct {
	ts                            *testServer
	alice, bob                    *store.User
	aliceKey, bobKey, carolKey    string
	helper, scout                 *store.Agent
	helperKey, scoutKey           string
	room, otherRoom               string
	helperMsg, scoutMsg, aliceMsg string // a message each sent, alice's mentioning helper
}

func newChatKit(t *testing.T) *chatKit {
	t.Helper()
	ts := newTestServer(t)
	k := &chatKit{ts: ts}
	k.alice, k.aliceKey = ts.user("alice")
	k.bob, k.bobKey = ts.user("bob")
	_, k.carolKey = ts.user("carol", "Elsewhere")
	k.helper, k.helperKey = ts.agent(k.alice, "Helper")
	k.scout, k.scoutKey = ts.agent(k.alice, "Scout")
	k.room = ts.do(t, "POST", humanChatsPath, apiKey(k.aliceKey), map[string]any{}).data(t)["id"].(string)
	for _, id := range []string{k.bob.ID, k.helper.ID, k.scout.ID} {
		expect(t, ts.do(t, "POST", humanChatsPath+"/"+k.room+"/participants", apiKey(k.aliceKey), participantBody(id, "")), 201, "")
	}
	k.otherRoom = ts.room(t, k.helperKey, k.alice.ID)
	k.helperMsg = k.send(t, k.helperKey, k.room, "helper here, for @alice", k.alice.ID, "")
	k.scoutMsg = k.send(t, k.scoutKey, k.room, "scout here, for @alice", k.alice.ID, "")
	k.aliceMsg = k.send(t, k.aliceKey, k.room, "@alice/helper please look", k.helper.ID, "")
	return k
}

// path is under the room in the API of key: the people's for alice's, bob's
// and carol's keys, the agents' for the others.
func (k *chatKit) path(key, room, under string) string {
	if key == k.aliceKey || key == k.bobKey || key == k.carolKey {
		return humanChatsPath + "/" + room + under
	}
	return agentChatsPath + "/" + room + under
}

// send posts a text message as key mentioning to, in reply to replyTo ("":
// none), and returns its id.
func (k *chatKit) send(t *testing.T, key, room, content, to, replyTo string) string {
	t.Helper()
	msg := map[string]any{"content": content, "mentions": []map[string]string{{"id": to}}}
	if replyTo != "" {
		msg["reply_to_id"] = replyTo
	}
	r := k.ts.do(t, "POST", k.path(key, room, "/messages"), apiKey(key), map[string]any{"message": msg})
	expect(t, r, 201, "")
	return r.data(t)["id"].(string)
}

// history finds a message in alice's view of the room's history.
func (k *chatKit) history(t *testing.T, id string) map[string]any {
	t.Helper()
	for _, m := range k.ts.do(t, "GET", k.path(k.aliceKey, k.room, "/messages?limit=100"), apiKey(k.aliceKey), nil).list(t) {
		if m := m.(map[string]any); m["id"] == id {
			return m
		}
	}
	t.Fatalf("message %s is not in the room's history", id)
	return nil
}

// messageBody is the body of a message's edit.
func messageBody(content string) map[string]any {
	return map[string]any{"message": map[string]any{"content": content}}
}

func TestReplies(t *testing.T) {
	k := newChatKit(t)
	long := strings.Repeat("word ", 60)
	parent := k.send(t, k.helperKey, k.room, long+"@alice", k.alice.ID, "")

	t.Run("a reply carries its parent's id and a quote of it", func(t *testing.T) {
		id := k.send(t, k.aliceKey, k.room, "answering @alice/helper", k.helper.ID, parent)
		got := k.history(t, id)
		quote := got["reply_to"].(map[string]any)
		excerpt := quote["excerpt"].(string)
		if got["reply_to_id"] != parent || quote["sender_id"] != k.helper.ID || len([]rune(excerpt)) != store.QuoteLen ||
			!strings.HasSuffix(excerpt, "…") {
			t.Fatalf("reply_to_id %v, quote %v", got["reply_to_id"], quote)
		}
		replies := k.ts.do(t, "GET", k.path(k.helperKey, k.room, "/messages/"+parent+"/replies"), apiKey(k.helperKey), nil)
		if (idLabels{id: "reply"}).listed(t, replies) != "reply" {
			t.Fatalf("the parent's replies: %s", replies.body)
		}
	})
	t.Run("an agent gets no quote of a parent it may not see", func(t *testing.T) {
		reply := k.send(t, k.aliceKey, k.room, "about scout's, @alice/helper", k.helper.ID, k.scoutMsg)
		got := k.ts.do(t, "GET", k.path(k.helperKey, k.room, "/messages?status=all"), apiKey(k.helperKey), nil).list(t)
		for _, m := range got {
			if m := m.(map[string]any); m["id"] == reply && (m["reply_to_id"] != k.scoutMsg || m["reply_to"] != nil) {
				t.Fatalf("helper reads the reply as %v", m)
			}
		}
		expect(t, k.ts.do(t, "GET", k.path(k.helperKey, k.room, "/messages/"+k.scoutMsg+"/replies"), apiKey(k.helperKey), nil), 404, "not_found")
	})
	t.Run("refusals", func(t *testing.T) {
		k.ts.run(t, []scenario{
			refusalCase("an agent answering a message it may not see", apiKey(k.helperKey), "POST", k.path(k.helperKey, k.room, "/messages"),
				replyBody(k.alice.ID, k.scoutMsg), 422, "validation_error", "/message/reply_to_id"),
			refusalCase("a message of another room", apiKey(k.aliceKey), "POST", k.path(k.aliceKey, k.room, "/messages"),
				replyBody(k.helper.ID, k.send(t, k.helperKey, k.otherRoom, "elsewhere @alice", k.alice.ID, "")), 422, "validation_error", "/message/reply_to_id"),
			refusalCase("no message at all", apiKey(k.aliceKey), "POST", k.path(k.aliceKey, k.room, "/messages"),
				replyBody(k.helper.ID, "nothing"), 422, "validation_error", "/message/reply_to_id"),
			refusalCase("replies of a room one is not in", apiKey(k.carolKey), "GET", k.path(k.carolKey, k.room, "/messages/"+parent+"/replies"), nil, 404, "not_found"),
		})
	})
}

// replyBody is a message to to in reply to parent.
func replyBody(to, parent string) map[string]any {
	return map[string]any{"message": map[string]any{"content": "re", "mentions": []map[string]string{{"id": to}}, "reply_to_id": parent}}
}

func TestEditMessages(t *testing.T) {
	k := newChatKit(t)
	edit := func(key, id string) string { return k.path(key, k.room, "/messages/"+id) }

	t.Run("the sender edits; the mentions and deliveries stay; the owner reads the history", func(t *testing.T) {
		r := k.ts.do(t, "PATCH", edit(k.aliceKey, k.aliceMsg), apiKey(k.aliceKey), messageBody("could you look again?"))
		expect(t, r, 200, "")
		got := r.data(t)
		delivery := got["metadata"].(map[string]any)["delivery_status"].(map[string]any)[k.helper.ID]
		if got["content"] != "@alice/helper could you look again?" || got["edited_at"] == nil || delivery == nil {
			t.Fatalf("edited: %v", got)
		}
		next := k.ts.do(t, "GET", k.path(k.helperKey, k.room, "/messages/next"), apiKey(k.helperKey), nil).data(t)
		if next["id"] != k.aliceMsg || next["content"] != got["content"] {
			t.Fatalf("helper's next is %v", next)
		}
		edits := k.ts.do(t, "GET", edit(k.aliceKey, k.aliceMsg)+"/edits", apiKey(k.aliceKey), nil).list(t)
		if len(edits) != 1 || edits[0].(map[string]any)["content"] != "@alice/helper please look" {
			t.Fatalf("edit history %v", edits)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		event := k.ts.do(t, "POST", k.path(k.helperKey, k.room, "/events"), apiKey(k.helperKey),
			map[string]any{"event": map[string]any{"content": "thinking", "message_type": "thought"}}).data(t)["id"].(string)
		k.ts.run(t, []scenario{
			refusalCase("someone else's message", apiKey(k.bobKey), "PATCH", edit(k.bobKey, k.helperMsg), messageBody("mine now"), 403, "forbidden"),
			refusalCase("an event", apiKey(k.helperKey), "PATCH", edit(k.helperKey, event), messageBody("no"), 403, "forbidden"),
			refusalCase("blank content", apiKey(k.helperKey), "PATCH", edit(k.helperKey, k.helperMsg), messageBody(" \u200b"), 422, "validation_error", "/message/content"),
			refusalCase("no content", apiKey(k.helperKey), "PATCH", edit(k.helperKey, k.helperMsg), map[string]any{"message": map[string]any{}}, 422, "validation_error", "/message/content"),
			refusalCase("a message an agent may not see", apiKey(k.scoutKey), "PATCH", edit(k.scoutKey, k.helperMsg), messageBody("x"), 404, "not_found"),
			refusalCase("a room of another organization", apiKey(k.carolKey), "PATCH", edit(k.carolKey, k.aliceMsg), messageBody("x"), 404, "not_found"),
			refusalCase("the history, not being the owner", apiKey(k.bobKey), "GET", edit(k.bobKey, k.aliceMsg)+"/edits", nil, 403, "forbidden"),
		})
	})
}

func TestDeleteMessages(t *testing.T) {
	k := newChatKit(t)
	del := func(key, id string) string { return k.path(key, k.room, "/messages/"+id) }
	k.ts.run(t, []scenario{
		refusalCase("someone else's, not owning the room", apiKey(k.bobKey), "DELETE", del(k.bobKey, k.helperMsg), nil, 403, "forbidden"),
		refusalCase("what an agent may not see", apiKey(k.scoutKey), "DELETE", del(k.scoutKey, k.helperMsg), nil, 404, "not_found"),
		refusalCase("a room of another organization", apiKey(k.carolKey), "DELETE", del(k.carolKey, k.aliceMsg), nil, 404, "not_found"),
	})

	t.Run("the sender's deletion leaves a tombstone, and the message leaves /next", func(t *testing.T) {
		got := k.ts.do(t, "DELETE", del(k.aliceKey, k.aliceMsg), apiKey(k.aliceKey), nil).data(t)
		if got["content"] != "" || got["deleted_at"] == nil || k.history(t, k.aliceMsg)["deleted_at"] == nil {
			t.Fatalf("deleted: %v", got)
		}
		expect(t, k.ts.doNoContent(t, "GET", k.path(k.helperKey, k.room, "/messages/next"), apiKey(k.helperKey)), 204, "")
		again := k.ts.do(t, "DELETE", del(k.aliceKey, k.aliceMsg), apiKey(k.aliceKey), nil).data(t)
		if again["deleted_at"] != got["deleted_at"] {
			t.Fatalf("deleting again changed it: %v", again)
		}
	})
	t.Run("the room's owner deletes anyone's; replies quote the tombstone", func(t *testing.T) {
		reply := k.send(t, k.bobKey, k.room, "re helper, @alice/helper", k.helper.ID, k.helperMsg)
		expect(t, k.ts.do(t, "DELETE", del(k.aliceKey, k.helperMsg), apiKey(k.aliceKey), nil), 200, "")
		quote := k.history(t, reply)["reply_to"].(map[string]any)
		if quote["deleted"] != true || quote["excerpt"] != "" {
			t.Fatalf("the reply quotes %v", quote)
		}
		k.ts.run(t, []scenario{
			refusalCase("answering a deleted message", apiKey(k.bobKey), "POST", k.path(k.bobKey, k.room, "/messages"),
				replyBody(k.helper.ID, k.helperMsg), 422, "validation_error", "/message/reply_to_id"),
			refusalCase("editing a deleted message", apiKey(k.aliceKey), "PATCH", del(k.aliceKey, k.aliceMsg), messageBody("back"), 409, "conflict"),
			refusalCase("reacting to a deleted message", apiKey(k.bobKey), "POST", del(k.bobKey, k.aliceMsg)+"/reactions",
				map[string]any{"emoji": "👍"}, 409, "conflict"),
		})
	})
}

func TestReactions(t *testing.T) {
	k := newChatKit(t)
	reactions := func(key string) string { return k.path(key, k.room, "/messages/"+k.helperMsg+"/reactions") }
	react := func(key, emoji string) map[string]any {
		t.Helper()
		r := k.ts.do(t, "POST", reactions(key), apiKey(key), map[string]any{"emoji": emoji})
		expect(t, r, 200, "")
		return r.data(t)
	}
	shown := func(m map[string]any) string {
		var out []string
		for _, r := range m["reactions"].([]any) {
			r := r.(map[string]any)
			out = append(out, r["emoji"].(string)+strings.Repeat("+", int(r["count"].(float64)))+map[bool]string{true: "*"}[r["reacted"] == true])
		}
		return strings.Join(out, " ")
	}

	react(k.aliceKey, "👍")
	react(k.helperKey, "👍")
	if got := shown(react(k.aliceKey, "🎉")); got != "👍++* 🎉+*" {
		t.Fatalf("alice sees %q", got)
	}
	if got := shown(react(k.bobKey, "👍")); got != "👍+++* 🎉+" {
		t.Fatalf("bob sees %q", got)
	}
	if got := shown(react(k.bobKey, "👍")); got != "👍+++* 🎉+" {
		t.Fatalf("reacting again: bob sees %q", got)
	}
	r := k.ts.do(t, "DELETE", reactions(k.bobKey)+"/"+url.PathEscape("👍"), apiKey(k.bobKey), nil)
	if got := shown(r.data(t)); got != "👍++ 🎉+" {
		t.Fatalf("after taking it back, bob sees %q", got)
	}

	for i := range store.MaxReactionKinds - 2 {
		react(k.aliceKey, string(rune(0x1F600+i)))
	}
	k.ts.run(t, []scenario{
		refusalCase("a word", apiKey(k.bobKey), "POST", reactions(k.bobKey), map[string]any{"emoji": ":+1:"}, 422, "validation_error", "/emoji"),
		refusalCase("too long", apiKey(k.bobKey), "POST", reactions(k.bobKey), map[string]any{"emoji": strings.Repeat("👍", 9)}, 422, "validation_error", "/emoji"),
		refusalCase("no emoji", apiKey(k.bobKey), "POST", reactions(k.bobKey), map[string]any{}, 422, "validation_error", "/emoji"),
		refusalCase("a twenty-first kind", apiKey(k.bobKey), "POST", reactions(k.bobKey), map[string]any{"emoji": "🦀"}, 403, "limit_reached"),
		refusalCase("what an agent may not see", apiKey(k.scoutKey), "POST", reactions(k.scoutKey), map[string]any{"emoji": "👍"}, 404, "not_found"),
		refusalCase("a room of another organization", apiKey(k.carolKey), "POST", reactions(k.carolKey), map[string]any{"emoji": "👍"}, 404, "not_found"),
	})
}

// Edits, deletions and reactions are pushed as message_updated: to people
// reading the room, each with their own reactions marked, and to the
// agents that may see the message and asked for chatd's extension events.
// Replies reach agents without a quote of a parent they may not see.
func TestMessageChangesArePushed(t *testing.T) {
	k := newChatKit(t)
	topic := "chat_room:" + k.room
	bob := newListener(t, k.ts, k.bobKey, topic)
	alice := newListener(t, k.ts, k.aliceKey, topic)
	helper := newListenerWith(t, k.ts, url.Values{"api_key": {k.helperKey}, "extensions": {"true"}}, topic)
	scout := newListener(t, k.ts, k.scoutKey, topic)
	both := k.send(t, k.aliceKey, k.room, "@alice/helper and @alice/scout, both", k.helper.ID, "")
	k.ts.do(t, "PATCH", k.path(k.aliceKey, k.room, "/messages/"+both), apiKey(k.aliceKey), messageBody("both of you, @alice/scout"))

	edited := func(p map[string]any) bool { return p["id"] == both && p["edited_at"] != nil }
	bob.await(t, topic, "message_updated", edited)
	got := helper.await(t, topic, "message_updated", edited)
	if got["metadata"].(map[string]any)["status"] != "pending" {
		t.Fatalf("helper's push is not as helper reads it: %v", got)
	}
	checkSDKPayload(t, "message_updated", got)

	expect(t, k.ts.do(t, "POST", k.path(k.bobKey, k.room, "/messages/"+both+"/reactions"), apiKey(k.bobKey), map[string]any{"emoji": "👀"}), 200, "")
	reacted := func(p map[string]any) bool { return p["id"] == both && len(p["reactions"].([]any)) == 1 }
	mine := bob.await(t, topic, "message_updated", reacted)["reactions"].([]any)[0].(map[string]any)
	theirs := alice.await(t, topic, "message_updated", reacted)["reactions"].([]any)[0].(map[string]any)
	if mine["reacted"] != true || theirs["reacted"] != false {
		t.Fatalf("bob's push %v, alice's %v", mine, theirs)
	}

	quoted := k.send(t, k.aliceKey, k.room, "re yours, @alice/helper", k.helper.ID, k.helperMsg)
	unquoted := k.send(t, k.aliceKey, k.room, "re scout's, @alice/helper", k.helper.ID, k.scoutMsg)
	if got := helper.await(t, topic, "message_created", func(p map[string]any) bool { return p["id"] == quoted }); got["reply_to"] == nil {
		t.Fatalf("helper's own message is not quoted: %v", got)
	}
	got = helper.await(t, topic, "message_created", func(p map[string]any) bool { return p["id"] == unquoted })
	if got["reply_to"] != nil || got["reply_to_id"] != k.scoutMsg {
		t.Fatalf("helper got a quote of scout's message: %v", got)
	}
	checkSDKPayload(t, "message_created", got)
	if n := scout.count(topic, "message_updated"); n != 0 {
		t.Fatalf("scout, which asked for no extension events, got %d message_updated", n)
	}
}
