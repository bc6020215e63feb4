package server

import "testing"

// TestAttentionMarks: alice marks an agent's attention message done; bob,
// in the same room, still has it open; taking the mark back opens it
// again. Marks are refused, changing nothing, for what is no attention
// message of the room, for rooms the caller cannot read, and for agents.
func TestAttentionMarks(t *testing.T) {
	k := newTeam(t, newTestServer(t))
	k.ts.do(t, "POST", "/api/v1/me/chats/"+k.room+"/participants", apiKey(k.aliceKey),
		map[string]any{"participant": map[string]any{"participant_id": k.bob.ID}})
	event := func(typ, content string) string {
		r := k.ts.do(t, "POST", "/api/v1/agent/chats/"+k.room+"/events", apiKey(k.helperKey),
			map[string]any{"event": map[string]any{"message_type": typ, "content": content, "metadata": map[string]any{"kind": "question"}}})
		expect(t, r, 201, "")
		return r.data(t)["id"].(string)
	}
	ask := event("attention", "may I ship?")
	thought := event("thought", "thinking")
	mark := "/api/v1/me/chats/" + k.room + "/messages/" + ask + "/done"
	list := "/api/v1/me/chats/" + k.room + "/done"
	alice, bob := apiKey(k.aliceKey), apiKey(k.bobKey)

	r := k.ts.do(t, "PUT", mark, alice, nil)
	expect(t, r, 200, "")
	first := r.data(t)["done_at"]
	if r.data(t)["message_id"] != ask || first == nil {
		t.Fatalf("the mark is %s", r.body)
	}
	// Again: the same mark.
	if again := k.ts.do(t, "PUT", mark, alice, nil); again.data(t)["done_at"] != first {
		t.Fatalf("marking again moved the mark: %s", again.body)
	}
	if got := listedValues(t, k.ts.do(t, "GET", list, alice, nil), "message_id"); got != ask {
		t.Fatalf("alice's marks: %s", got)
	}
	if got := k.ts.do(t, "GET", list, bob, nil).list(t); len(got) != 0 {
		t.Fatalf("bob sees alice's marks: %v", got)
	}

	_, carolKey := k.ts.user("carol", "Elsewhere")
	for _, s := range []scenario{
		refusalCase("a thought", alice, "PUT", "/api/v1/me/chats/"+k.room+"/messages/"+thought+"/done", nil, 422, "validation_error", "/message_id"),
		refusalCase("no such message", alice, "PUT", "/api/v1/me/chats/"+k.room+"/messages/"+nilID+"/done", nil, 404, "not_found"),
		refusalCase("not an id", alice, "PUT", "/api/v1/me/chats/"+k.room+"/messages/nope/done", nil, 404, "not_found"),
		refusalCase("another room's message", alice, "PUT", "/api/v1/me/chats/"+k.ts.room(t, k.helperKey, k.alice.ID)+"/messages/"+ask+"/done", nil, 404, "not_found"),
		refusalCase("a room carol cannot read", apiKey(carolKey), "PUT", mark, nil, 404, "not_found"),
		refusalCase("carol's listing", apiKey(carolKey), "GET", list, nil, 404, "not_found"),
		refusalCase("an agent", apiKey(k.helperKey), "PUT", mark, nil, 403, "forbidden"),
	} {
		t.Run(s.name, func(t *testing.T) { k.ts.try(t, s) })
	}

	expect(t, k.ts.do(t, "DELETE", mark, alice, nil), 204, "")
	expect(t, k.ts.do(t, "DELETE", mark, alice, nil), 204, "")
	if got := k.ts.do(t, "GET", list, alice, nil).list(t); len(got) != 0 {
		t.Fatalf("after taking it back, alice's marks: %v", got)
	}
}
