package server

import (
	"strings"
	"testing"
)

// sdkRequired is, for each push an agent's connection receives, what the
// Band SDKs require of its payload (an SDK drops a payload that fails its
// model): the union of band-sdk-python's payload models
// (src/band/client/streaming/client.py) and band-sdk-typescript's zod
// schemas (packages/sdk/src/platform/streaming/payloadSchemas.ts), and
// chatd's own rule that a push that identifies a party names it. Each
// entry is field:kind, kind being str, bool or obj; a trailing ? allows null
// or absence.
var sdkRequired = map[string][]string{
	"message_created": {"id:str", "content:str", "message_type:str", "sender_id:str", "sender_type:str", "sender_name:str",
		"inserted_at:str", "updated_at:str", "chat_room_id:str?", "thread_id:str?", "metadata:obj?"},
	// message_updated reaches an agent only when it asks for chatd's
	// extension events; band-sdk-python reads it with message_created's model.
	"message_updated": {"id:str", "content:str", "message_type:str", "sender_id:str", "sender_type:str", "sender_name:str",
		"inserted_at:str", "updated_at:str", "chat_room_id:str?", "thread_id:str?", "metadata:obj?"},
	"room_added":               {"id:str", "inserted_at:str", "updated_at:str", "title:str?", "task_id:str?", "status:str?", "type:str?"},
	"room_removed":             {"id:str", "status:str", "type:str", "title:str", "removed_at:str"},
	"room_deleted":             {"id:str"},
	"participant_added":        {"id:str", "name:str", "type:str", "handle:str?", "description:str?", "is_external:bool?"},
	"participant_removed":      {"id:str", "name:str", "type:str", "handle:str"},
	"contact_request_received": {"id:str", "from_handle:str", "from_name:str", "status:str", "inserted_at:str", "message:str?"},
	"contact_request_updated":  {"id:str", "status:str"},
	"contact_added":            {"id:str", "handle:str", "name:str", "type:str", "inserted_at:str", "description:str?", "is_external:bool?"},
	"contact_removed":          {"id:str", "name:str", "type:str", "handle:str"},
	"supersede":                {"reason:str", "message:str", "retryable:bool"},
}

// checkSDKPayload fails the test where payload lacks what the SDKs require
// of event's payload.
func checkSDKPayload(t *testing.T, event string, payload map[string]any) {
	t.Helper()
	fields, ok := sdkRequired[event]
	if !ok {
		t.Fatalf("no SDK requirements for %s", event)
	}
	for _, f := range fields {
		name, kind, _ := strings.Cut(f, ":")
		optional := strings.HasSuffix(kind, "?")
		v, present := payload[name]
		if optional && (!present || v == nil) {
			continue
		}
		var good bool
		switch strings.TrimSuffix(kind, "?") {
		case "str":
			_, good = v.(string)
		case "bool":
			_, good = v.(bool)
		case "obj":
			_, good = v.(map[string]any)
		}
		if !good {
			t.Errorf("%s.%s = %#v, want %s: %v", event, name, v, kind, payload)
		}
	}
	if event == "message_created" {
		meta, _ := payload["metadata"].(map[string]any)
		mentions, _ := meta["mentions"].([]any)
		for _, m := range mentions {
			if id, _ := m.(map[string]any)["id"].(string); id == "" {
				t.Errorf("message_created mention without an id: %v", m)
			}
		}
	}
}

// TestSocketPushesCarryWhatTheSDKsRequire drives every push an agent's
// connection receives and checks each payload against sdkRequired, with the
// party it names where it names one.
func TestSocketPushesCarryWhatTheSDKsRequire(t *testing.T) {
	k := newContactsWorld(t)
	ts := k.ts
	alice, carol := k.human("alice"), k.human("carol", "Other Org")
	worker, poster, scout := k.bot(alice, "Worker"), k.bot(alice, "Poster"), k.bot(alice, "Scout")
	dave, _ := ts.personWithoutEmail("dave", "Dave Dent")
	room := ts.room(t, poster.key, worker.id, alice.id)
	topics := []string{"agent_control:" + worker.id, "agent_rooms:" + worker.id, "agent_contacts:" + worker.id,
		"chat_room:" + room, "room_participants:" + room}
	l := newListener(t, ts, worker.key, topics...)
	got := func(topic, event string, match func(map[string]any) bool) map[string]any {
		t.Helper()
		p := l.await(t, topic, event, match)
		checkSDKPayload(t, event, p)
		return p
	}
	byID := func(id string) func(map[string]any) bool { return func(p map[string]any) bool { return p["id"] == id } }
	names := func(event string, p map[string]any, name, handle, typ string) {
		t.Helper()
		if p["name"] != name || p["handle"] != handle || p["type"] != typ {
			t.Errorf("%s names %v %v %v, want %s %s %s", event, p["name"], p["handle"], p["type"], name, handle, typ)
		}
	}

	// A mention.
	r := ts.do(t, "POST", "/api/v1/agent/chats/"+room+"/messages", poster.cred(),
		map[string]any{"message": map[string]any{"content": "over to you", "mentions": []any{map[string]any{"id": worker.id}}}})
	expect(t, r, 201, "")
	got(topics[3], "message_created", byID(r.data(t)["id"].(string)))

	// People and agents come and go.
	for _, who := range []struct{ id, name, handle, typ string }{
		{dave.ID, "Dave Dent", "dave", "User"}, {scout.id, "Scout", "alice/scout", "Agent"},
	} {
		expect(t, ts.do(t, "POST", "/api/v1/me/chats/"+room+"/participants", alice.cred(),
			map[string]any{"participant": map[string]any{"participant_id": who.id}}), 201, "")
		names("participant_added", got(topics[4], "participant_added", byID(who.id)), who.name, who.handle, who.typ)
		expect(t, ts.do(t, "DELETE", "/api/v1/me/chats/"+room+"/participants/"+who.id, alice.cred(), nil), 200, "")
		names("participant_removed", got(topics[4], "participant_removed", byID(who.id)), who.name, who.handle, who.typ)
	}

	// The worker joins and leaves another room.
	other := ts.do(t, "POST", "/api/v1/me/chats", alice.cred(), map[string]any{}).data(t)["id"].(string)
	expect(t, ts.do(t, "POST", "/api/v1/me/chats/"+other+"/participants", alice.cred(),
		map[string]any{"participant": map[string]any{"participant_id": worker.id}}), 201, "")
	got(topics[1], "room_added", byID(other))
	expect(t, ts.do(t, "DELETE", "/api/v1/me/chats/"+other+"/participants/"+worker.id, alice.cred(), nil), 200, "")
	got(topics[1], "room_removed", byID(other))

	// Contacts: carol asks, the worker approves, carol removes it.
	asked := k.request(t, carol, worker, "hello")
	got(topics[2], "contact_request_received", byID(asked))
	k.respond(t, worker, "approve", asked)
	got(topics[2], "contact_request_updated", byID(asked))
	added := got(topics[2], "contact_added", func(p map[string]any) bool { return p["handle"] == "carol" })
	names("contact_added", added, "Carol Tester", "carol", "User")
	expect(t, ts.do(t, "POST", "/api/v1/me/contacts/remove", carol.cred(), map[string]any{"handle": worker.handle}), 200, "")
	names("contact_removed", got(topics[2], "contact_removed", byID(added["id"].(string))), "Carol Tester", "carol", "User")

	// The room goes.
	expect(t, ts.do(t, "DELETE", "/api/v1/me/chats/"+room, alice.cred(), nil), 204, "")
	got(topics[4], "room_deleted", byID(room))

	// A newer connection of the worker's supersedes this one.
	newer := newListener(t, ts, worker.key)
	defer newer.raw.conn.Close()
	got(topics[0], "supersede", nil)
	l.awaitClose(t, 1008, "the superseded connection")
}
