package server

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestGetAgentMe(t *testing.T) {
	ts := newTestServer(t)
	alice, _ := ts.user("alice")
	agent, key := ts.agent(alice, "Research Helper")

	r := ts.do(t, "GET", "/api/v1/agent/me", apiKey(key), nil)
	expect(t, r, 200, "")
	d := r.data(t)
	for field, want := range map[string]any{
		"id": agent.ID, "name": "Research Helper", "handle": "alice/research-helper", "owner_uuid": alice.ID,
		"description": "Research Helper does things", "is_external": true, "listed_in_directory": false,
	} {
		if d[field] != want {
			t.Errorf("%s = %v, want %v", field, d[field], want)
		}
	}
	flags, ok := d["feature_flags"].(map[string]any)
	if !ok || flags["ff_file_transfer"] != true || flags["ff_room_tasks"] != true {
		t.Errorf("feature_flags = %v: every flag present, true exactly when the feature is served", d["feature_flags"])
	}
	if tags, ok := d["tags"].([]any); !ok || len(tags) != 0 {
		t.Errorf("tags = %v, want []", d["tags"])
	}
	// The header name is case-insensitive (the jam CLI sends x-api-key).
	r = ts.do(t, "GET", "/api/v1/agent/me", func(h http.Header) { h["x-api-key"] = []string{key} }, nil)
	expect(t, r, 200, "")
}

func TestGetMeAndProfile(t *testing.T) {
	ts := newTestServer(t)
	alice, key := ts.user("alice")
	for _, path := range []string{"/api/v1/me", "/api/v1/me/profile"} {
		for _, c := range []cred{apiKey(key), bearer(ts.token(alice, time.Hour))} {
			r := ts.do(t, "GET", path, c, nil)
			expect(t, r, 200, "")
			if err := ts.oas.ValidateSchema("UserDetails", mustJSON(t, r.data(t))); err != nil {
				t.Errorf("%s is not UserDetails: %v", path, err)
			}
			d := r.data(t)
			if d["id"] != alice.ID || d["handle"] != "alice" || d["email"] != "alice@example.com" || d["role"] != "admin" ||
				d["first_name"] != "Alice" || d["last_name"] != "Tester" || d["name"] != "Alice Tester" {
				t.Errorf("%s = %v", path, d)
			}
		}
	}
}

func TestUpdateProfile(t *testing.T) {
	ts := newTestServer(t)
	_, key := ts.user("alice")
	ts.user("bob")

	r := ts.do(t, "PUT", "/api/v1/me/profile", apiKey(key), map[string]any{"user": map[string]any{"first_name": "  Alicia "}})
	expect(t, r, 200, "")
	if d := r.data(t); d["first_name"] != "Alicia" || d["last_name"] != "Tester" {
		t.Fatalf("only the sent field changes, trimmed: %v", d)
	}
	r = ts.do(t, "PUT", "/api/v1/me/profile", apiKey(key), map[string]any{"user": map[string]any{"last_name": ""}})
	expect(t, r, 200, "")
	if d := r.data(t); d["first_name"] != "Alicia" || d["last_name"] != "" || d["name"] != "Alicia" {
		t.Fatalf("last name cleared: %v", d)
	}
	r = ts.do(t, "GET", "/api/v1/me/profile", apiKey(key), nil)
	if d := r.data(t); d["first_name"] != "Alicia" {
		t.Fatalf("update not persisted: %v", d)
	}

	update := func(name string, body any, status int, code string, pointers ...string) scenario {
		return refusalCase(name, apiKey(key), "PUT", "/api/v1/me/profile", body, status, code, pointers...)
	}
	ts.run(t, []scenario{
		update("no body", nil, 422, "validation_error", "/user"),
		update("user null", `{"user": null}`, 422, "validation_error", "/user"),
		update("blank first name", map[string]any{"user": map[string]any{"first_name": "  "}}, 422, "validation_error", "/user/first_name"),
		update("first name too long", map[string]any{"user": map[string]any{"first_name": strings.Repeat("x", 101)}}, 422, "validation_error", "/user/first_name"),
		update("newline in last name", map[string]any{"user": map[string]any{"last_name": "a\nb"}}, 422, "validation_error", "/user/last_name"),
		update("first name not a string", `{"user": {"first_name": 5}}`, 422, "validation_error", "/user/first_name"),
		update("unknown field", `{"user": {"first_name": "A", "handle": "root"}}`, 400, "unknown_field", "/user/handle"),
		update("unknown top-level field", `{"user": {}, "role": "admin"}`, 400, "unknown_field", "/role"),
		update("field name in another case", `{"User": {"first_name": "A"}}`, 400, "unknown_field", "/User"),
		update("not JSON", `{"user": `, 400, "invalid_json"),
		update("two JSON values", `{"user": {}} {}`, 400, "invalid_json"),
		update("array body", `[]`, 422, "validation_error"),
	})
}

// A person created without an email (create-user without --email, the setup
// form's optional field) is answered with <handle>@noreply.invalid wherever
// the API reports a person's email, so that UserDetails holds; nothing is
// stored for it, and the placeholder cannot be set.
func TestPeopleWithoutEmail(t *testing.T) {
	k := newContactsWorld(t)
	ts := k.ts
	alice, aliceKey := ts.personWithoutEmail("alice", "Alice Liddell")
	storedEmail := func() any {
		var v any
		if err := ts.readConn(t).QueryRow(ts.db.Rebind(`SELECT email FROM users WHERE id = ?`), alice.ID).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	reads := func(want string) {
		t.Helper()
		for _, path := range []string{"/api/v1/me", "/api/v1/me/profile"} {
			for _, c := range []cred{apiKey(aliceKey), bearer(ts.token(alice, time.Hour))} {
				r := ts.do(t, "GET", path, c, nil) // /me/profile is validated against the document here
				expect(t, r, 200, "")
				if err := ts.oas.ValidateSchema("UserDetails", mustJSON(t, r.data(t))); err != nil {
					t.Errorf("%s is not UserDetails: %v", path, err)
				}
				if got := r.data(t)["email"]; got != want {
					t.Errorf("%s email = %v, want %s", path, got, want)
				}
			}
		}
	}
	reads("alice@noreply.invalid")
	if v := storedEmail(); v != nil {
		t.Fatalf("stored email = %v, want NULL", v)
	}

	// Contacts see the placeholder too; agents still have no email.
	me := &contactsParty{handle: "alice", id: alice.ID, name: alice.Name(), key: aliceKey, user: alice}
	bob := k.human("bob")
	helper := k.bot(bob, "Helper")
	k.connect(t, bob, me)
	k.connect(t, helper, me)
	for _, c := range k.contactItems(t, bob) {
		if u := c["user"].(map[string]any); u["id"] == alice.ID && u["email"] != "alice@noreply.invalid" {
			t.Errorf("bob's contact alice reads %v", u)
		}
	}
	for _, c := range k.contactItems(t, me) {
		u := c["user"].(map[string]any)
		switch want, has := u["email"]; u["id"] {
		case bob.id:
			if want != "bob@example.com" {
				t.Errorf("alice's contact bob reads %v", u)
			}
		case helper.id:
			if has {
				t.Errorf("an agent contact has an email: %v", u)
			}
		}
	}

	// The placeholder, or any .invalid address, cannot be set; a real one
	// can, and "" removes it again.
	for _, email := range []string{"alice@noreply.invalid", "someone@example.INVALID", "a@b.invalid."} {
		ts.refused(t, "PUT", "/api/v1/me/profile", apiKey(aliceKey), map[string]any{"user": map[string]any{"email": email}},
			422, "validation_error", "/user/email")
	}
	ts.refused(t, "PUT", "/api/v1/me/profile", apiKey(aliceKey), map[string]any{"user": map[string]any{"email": "Bob@Example.com"}},
		409, "conflict", "/user/email")
	ts.refused(t, "PUT", "/api/v1/me/profile", apiKey(aliceKey), map[string]any{"user": map[string]any{"email": "not an address"}},
		422, "validation_error", "/user/email")
	r := ts.do(t, "PUT", "/api/v1/me/profile", apiKey(aliceKey), map[string]any{"user": map[string]any{"email": " alice@example.org "}})
	expect(t, r, 200, "")
	reads("alice@example.org")
	if v := storedEmail(); v != "alice@example.org" {
		t.Fatalf("stored email = %v", v)
	}
	expect(t, ts.do(t, "PUT", "/api/v1/me/profile", apiKey(aliceKey), map[string]any{"user": map[string]any{"email": ""}}), 200, "")
	reads("alice@noreply.invalid")
	if v := storedEmail(); v != nil {
		t.Fatalf("stored email after removing it = %v, want NULL", v)
	}
}
