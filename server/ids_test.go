package server

import (
	"encoding/json"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// idsWorld: alice's room, with her agent helper, bob and carol; a message
// of alice's mentioning helper, a task, a file, a memory about alice.
type idsWorld struct {
	ts                        *testServer
	aliceKey, helperKey       string
	alice, helper, bob, carol string // ids
	room, message, task, file string
	memory                    string
}

func newIDsWorld(t *testing.T) *idsWorld {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	bob, _ := ts.user("bob")
	carol, _ := ts.user("carol")
	helper, helperKey := ts.agent(alice, "Helper")
	w := &idsWorld{ts: ts, aliceKey: aliceKey, helperKey: helperKey, alice: alice.ID, helper: helper.ID, bob: bob.ID, carol: carol.ID}
	created := func(r *response) string {
		t.Helper()
		expect(t, r, 201, "")
		return r.data(t)["id"].(string)
	}
	w.room = created(ts.do(t, "POST", "/api/v1/me/chats", apiKey(aliceKey), map[string]any{}))
	for _, id := range []string{helper.ID, bob.ID} {
		created(ts.do(t, "POST", "/api/v1/me/chats/"+w.room+"/participants", apiKey(aliceKey),
			map[string]any{"participant": map[string]any{"participant_id": id}}))
	}
	w.message = created(ts.do(t, "POST", "/api/v1/me/chats/"+w.room+"/messages", apiKey(aliceKey),
		map[string]any{"message": map[string]any{"content": "hi", "mentions": []any{map[string]any{"id": helper.ID}}}}))
	w.task = created(ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/tasks", apiKey(helperKey), map[string]any{"subject": "Plan"}))
	w.file = created(ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/files",
		fileHeaders(helperKey, "notes.txt", hexDigest([]byte("notes")), "text/plain"), []byte("notes")))
	w.memory = created(ts.do(t, "POST", "/api/v1/agent/memories", apiKey(helperKey), memoryBody(map[string]any{"subject_id": alice.ID})))
	return w
}

var anyUUID = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// upperIDs spells every UUID in s in upper case.
func upperIDs(s string) string { return anyUUID.ReplaceAllStringFunc(s, strings.ToUpper) }

// lowerIDsOnly fails the test if an answer spells a UUID in upper case.
func lowerIDsOnly(t testing.TB, r *response) {
	t.Helper()
	for _, id := range anyUUID.FindAllString(string(r.body), -1) {
		if id != strings.ToLower(id) {
			t.Fatalf("the answer spells %s in upper case: %s", id, r.body)
		}
	}
}

// An id in upper case, in a path, a query or a body, names what it names in
// lower case: reads answer the same, writes act on the same thing, and
// answers spell ids in lower case.
func TestIDsAreCaseInsensitive(t *testing.T) {
	w := newIDsWorld(t)
	ts := w.ts
	agent, human := apiKey(w.helperKey), apiKey(w.aliceKey)
	// Reads, asked in lower case and then with every id in upper case.
	for _, tc := range []struct {
		name, path string
		c          cred
	}{
		{"a room, agent API", "/api/v1/agent/chats/" + w.room, agent},
		{"a room, human API", "/api/v1/me/chats/" + w.room, human},
		{"participants", "/api/v1/me/chats/" + w.room + "/participants", human},
		{"history", "/api/v1/me/chats/" + w.room + "/messages", human},
		{"a task", "/api/v1/agent/chats/" + w.room + "/tasks/" + w.task + "?include=history", agent},
		{"a memory", "/api/v1/agent/memories/" + w.memory, agent},
		{"a person's memory", "/api/v1/me/memories/" + w.memory, human},
		{"memories about someone", "/api/v1/agent/memories?scope=subject&subject_id=" + w.alice, agent},
		{"peers not in a room", "/api/v1/agent/peers?not_in_chat=" + w.room, agent},
		{"a file", "/api/v1/agent/chats/" + w.room + "/files/" + w.file, agent},
	} {
		t.Run("read "+tc.name, func(t *testing.T) { readsTheSameInUpperCase(t, ts, tc.path, tc.c) })
	}
	// Writes with ids in upper case act on what the ids name.
	write := func(name, method, path string, c cred, body map[string]any, status int, check func(t testing.TB, r *response)) scenario {
		var upper any
		if body != nil {
			upper = upperBody(t, body)
		}
		return scenario{name: "write " + name, method: method, path: upperIDs(path), cred: c, body: upper, status: status,
			check: func(t testing.TB, r *response) {
				if check != nil {
					check(t, r)
				}
				lowerIDsOnly(t, r)
			}}
	}
	ts.run(t, []scenario{
		write("add a participant by id", "POST", "/api/v1/me/chats/"+w.room+"/participants", human,
			map[string]any{"participant": map[string]any{"participant_id": w.carol}}, 201,
			func(t testing.TB, r *response) { equal(t, "participant id", r.data(t)["id"], w.carol) }),
		write("mention by id and attach a file", "POST", "/api/v1/me/chats/"+w.room+"/messages", human,
			map[string]any{"message": map[string]any{"content": "see the notes", "mentions": []any{map[string]any{"id": w.helper}},
				"attachment_ids": []string{w.file}}}, 201,
			func(t testing.TB, r *response) {
				equal(t, "recipient", r.data(t)["recipients"].([]any)[0].(map[string]any)["id"], w.helper)
			}),
		write("mark read up to a message", "POST", "/api/v1/me/chats/"+w.room+"/read", human,
			map[string]any{"message_id": w.message}, 200, nil),
		write("process a message", "POST", "/api/v1/agent/chats/"+w.room+"/messages/"+w.message+"/processing", agent, nil, 200, nil),
		write("update a task", "POST", "/api/v1/agent/chats/"+w.room+"/tasks/"+w.task, agent,
			map[string]any{"status": "in_progress"}, 200,
			func(t testing.TB, r *response) { equal(t, "task id", r.data(t)["id"], w.task) }),
		write("supersede a task", "POST", "/api/v1/agent/chats/"+w.room+"/tasks", agent,
			map[string]any{"subject": "Plan better", "supersedes_id": w.task}, 201, nil),
		write("a memory about someone", "POST", "/api/v1/agent/memories", agent,
			memoryBody(map[string]any{"subject_id": w.alice, "metadata": map[string]any{"references": []string{w.memory}}}), 201,
			func(t testing.TB, r *response) {
				equal(t, "subject", r.data(t)["subject_id"], w.alice)
				equal(t, "reference", r.data(t)["metadata"].(map[string]any)["references"].([]any)[0], w.memory)
			}),
		write("a room for a task", "POST", "/api/v1/me/chats", human,
			map[string]any{"chat": map[string]any{"task_id": w.task}}, 201,
			func(t testing.TB, r *response) { equal(t, "task id", r.data(t)["task_id"], w.task) }),
		write("block a participant", "PATCH", "/api/v1/me/chats/"+w.room+"/participants/"+w.bob, human,
			map[string]any{"participant": map[string]any{"status": "blocked"}}, 200,
			func(t testing.TB, r *response) { equal(t, "participant id", r.data(t)["id"], w.bob) }),
	})
}

// readsTheSameInUpperCase reads path in lower case and then with every id
// in upper case: the same answer, with the ids in lower case.
func readsTheSameInUpperCase(t *testing.T, ts *testServer, path string, c cred) {
	lower := ts.do(t, "GET", path, c, nil)
	expect(t, lower, 200, "")
	upper := ts.do(t, "GET", upperIDs(path), c, nil)
	expect(t, upper, 200, "")
	if strings.HasPrefix(lower.header.Get("Content-Type"), "application/json") {
		if a, b := lower.json(t), upper.json(t); !reflect.DeepEqual(a, b) {
			t.Fatalf("in upper case:\n%s\nin lower case:\n%s", upper.body, lower.body)
		}
	} else if string(lower.body) != string(upper.body) {
		t.Fatalf("in upper case %q, in lower case %q", upper.body, lower.body)
	}
	lowerIDsOnly(t, upper)
}

func equal(t testing.TB, what string, got any, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %s", what, got, want)
	}
}

// upperBody is body (a JSON value) with every UUID in upper case.
func upperBody(t testing.TB, body any) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(upperIDs(string(mustJSON(t, body)))), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The socket takes agent_id in any case; a topic must spell its id as
// chatd does, since pushes carry the topic exactly as joined, and a join
// that does not is told so.
func TestSocketIDsInUpperCase(t *testing.T) {
	w := newIDsWorld(t)
	target := w.ts.socketURL(url.Values{"vsn": {"2.0.0"}, "api_key": {w.aliceKey}, "agent_id": {strings.ToUpper(w.helper)}})
	s, err := dialRaw(t, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.send(t, `["1","1","agent_control:`+w.helper+`","phx_join",{}]`)
	if msg := s.next(t); msg[4].(map[string]any)["status"] != "ok" {
		t.Fatalf("the connection does not act as the agent named in upper case: %v", msg)
	}
	s.send(t, `["2","2","chat_room:`+strings.ToUpper(w.room)+`","phx_join",{}]`)
	msg := s.next(t)
	reply := msg[4].(map[string]any)
	reason, _ := reply["response"].(map[string]any)["reason"].(string)
	if reply["status"] != "error" || !strings.Contains(reason, "lower case") {
		t.Fatalf("join with an upper-case id: %v", msg)
	}
}

// A mention's id that is no UUID, no participant's, or a blocked
// participant's is refused with a message that says which, changing
// nothing; an id in upper case or with the right id in braces is no
// exception to the rules.
func TestMentionIDMessages(t *testing.T) {
	w := newIDsWorld(t)
	ts := w.ts
	expect(t, ts.do(t, "PATCH", "/api/v1/me/chats/"+w.room+"/participants/"+w.bob, apiKey(w.aliceKey),
		map[string]any{"participant": map[string]any{"status": "blocked"}}), 200, "")
	path := "/api/v1/me/chats/" + w.room + "/messages"
	for _, tc := range []struct {
		name, id, message string
	}{
		{"not a UUID", "helper", `/message/mentions/0/id is not a UUID (8-4-4-4-12 hexadecimal digits), so it names no participant: "helper"`},
		{"a UUID in braces", "{" + w.helper + "}", `/message/mentions/0/id is not a UUID (8-4-4-4-12 hexadecimal digits), so it names no participant: "{` + w.helper + `}"`},
		{"no UUID, long", strings.Repeat("x", 100), `/message/mentions/0/id is not a UUID (8-4-4-4-12 hexadecimal digits), so it names no participant: "` + strings.Repeat("x", 40) + `…"`},
		{"no participant's", nilID, "/message/mentions/0/id is not the id of a participant of this room: " + nilID},
		{"no participant's, in upper case", strings.ToUpper(w.carol), "/message/mentions/0/id is not the id of a participant of this room: " + w.carol},
		{"a blocked participant's", strings.ToUpper(w.bob), "/message/mentions/0/id is the id of a participant blocked in this room, who cannot be mentioned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"message": map[string]any{"content": "hi", "mentions": []any{map[string]any{"id": tc.id}}}}
			r := ts.refused(t, "POST", path, apiKey(w.aliceKey), body, 422, "mentioned_participant_not_in_room", "/message/mentions/0/id")
			if got := r.json(t)["error"].(map[string]any)["message"]; got != tc.message {
				t.Fatalf("message %q, want %q", got, tc.message)
			}
		})
	}
}
