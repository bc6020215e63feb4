package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

const setupPath, signInPath, signOutPath, keysPath = "/api/v1/auth/setup", "/api/v1/auth/sign-in", "/api/v1/auth/sign-out", "/api/v1/me/keys"

const goodPassword = "correct horse battery staple"

func setupBody(token string, f ...func(map[string]any)) map[string]any {
	b := map[string]any{"token": token, "handle": "ada", "name": "Ada Lovelace", "email": "ada@example.com", "password": goodPassword}
	for _, f := range f {
		f(b)
	}
	return b
}

func TestSetupCreatesTheFirstPerson(t *testing.T) {
	ts := newTestServer(t)
	token, err := ts.db.CreateSetupToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	refused := func(name string, body any, status int, code string, pointers ...string) scenario {
		return refusalCase(name, noCred, "POST", setupPath, body, status, code, pointers...)
	}
	ts.run(t, []scenario{
		refused("unknown token", setupBody("band_s_"+strings.Repeat("a", 52)), 401, "unauthorized"),
		refused("malformed token", setupBody("hello"), 401, "unauthorized"),
		refused("no token", setupBody("", func(b map[string]any) { delete(b, "token") }), 401, "unauthorized"),
		refused("short password", setupBody(token, func(b map[string]any) { b["password"] = "elevenchars" }), 422, "validation_error", "/password"),
		refused("long password", setupBody(token, func(b map[string]any) { b["password"] = strings.Repeat("p", 257) }), 422, "validation_error", "/password"),
		refused("no password", setupBody(token, func(b map[string]any) { delete(b, "password") }), 422, "validation_error", "/password"),
		refused("bad handle", setupBody(token, func(b map[string]any) { b["handle"] = "-x-" }), 422, "validation_error", "/handle"),
		refused("no name", setupBody(token, func(b map[string]any) { delete(b, "name") }), 422, "validation_error", "/name"),
		refused("bad email", setupBody(token, func(b map[string]any) { b["email"] = "not an email" }), 422, "validation_error", "/email"),
		refused("an .invalid email", setupBody(token, func(b map[string]any) { b["email"] = "ada@noreply.invalid" }), 422, "validation_error", "/email"),
		refused("unknown field", setupBody(token, func(b map[string]any) { b["role"] = "admin" }), 400, "unknown_field", "/role"),
	})

	r := ts.do(t, "POST", setupPath, noCred, setupBody(token))
	expect(t, r, 201, "")
	d := r.data(t)
	if d["token_type"] != "Bearer" || d["expires_in"] != float64(store.SessionTTL.Seconds()) {
		t.Fatalf("setup answer %s", r.body)
	}
	me := ts.do(t, "GET", "/api/v1/me", bearer(d["access_token"].(string)), nil)
	expect(t, me, 200, "")
	var want, got any
	json.Unmarshal(me.body, &want)
	json.Unmarshal(mustJSON(t, map[string]any{"data": d["user"]}), &got)
	if !jsonEqual(t, want, got) {
		t.Fatalf("setup's user %v differs from GET /me %v", got, want)
	}
	if u := me.data(t); u["handle"] != "ada" || u["role"] != "admin" {
		t.Fatalf("first person %v", u)
	}
	// The person can sign in with the password they chose.
	expect(t, ts.do(t, "POST", signInPath, noCred, map[string]any{"handle": "ada", "password": goodPassword}), 200, "")

	t.Run("token used twice", func(t *testing.T) {
		ts.refused(t, "POST", setupPath, noCred, setupBody(token, func(b map[string]any) { b["handle"] = "eve" }), 401, "unauthorized", "")
	})
	t.Run("people exist already", func(t *testing.T) {
		again, _ := ts.db.CreateSetupToken(context.Background())
		ts.refused(t, "POST", setupPath, noCred, setupBody(again, func(b map[string]any) { b["handle"] = "eve" }), 409, "conflict", "")
	})
}

func TestSetupIsRefusedOnceSomeoneExists(t *testing.T) {
	ts := newTestServer(t)
	ts.user("alice") // made with chatd create-user, say
	token, _ := ts.db.CreateSetupToken(context.Background())
	ts.refused(t, "POST", setupPath, noCred, setupBody(token), 409, "conflict", "")
}

// signIn signs in and returns the session token.
func (ts *testServer) signIn(t *testing.T, handle, password string) string {
	t.Helper()
	r := ts.do(t, "POST", signInPath, noCred, map[string]any{"handle": handle, "password": password})
	expect(t, r, 200, "")
	d := r.data(t)
	if d["token_type"] != "Bearer" || d["expires_in"] != float64(store.SessionTTL.Seconds()) {
		t.Fatalf("sign-in answer %s", r.body)
	}
	return d["access_token"].(string)
}

func TestSignInAndSignOut(t *testing.T) {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	ts.user("bob") // no password
	if err := ts.db.SetPassword(context.Background(), alice.ID, goodPassword); err != nil {
		t.Fatal(err)
	}
	var messages []string
	// Each 401 keeps its message, to compare them after.
	refused := func(name string, body any, status int, code string) scenario {
		s := refusalCase(name, noCred, "POST", signInPath, body, status, code)
		if status == 401 {
			s.check = func(t testing.TB, r *response) {
				messages = append(messages, r.json(t)["error"].(map[string]any)["message"].(string))
			}
		}
		return s
	}
	ts.run(t, []scenario{
		refused("wrong password", map[string]any{"handle": "alice", "password": goodPassword + "!"}, 401, "unauthorized"),
		refused("unknown handle", map[string]any{"handle": "nobody", "password": goodPassword}, 401, "unauthorized"),
		refused("no password set", map[string]any{"handle": "bob", "password": goodPassword}, 401, "unauthorized"),
		refused("empty body", nil, 401, "unauthorized"),
		refused("unknown field", map[string]any{"handle": "alice", "password": goodPassword, "remember": true}, 400, "unknown_field"),
	})
	for _, m := range messages {
		if m != messages[0] {
			t.Fatalf("sign-in refusals differ (%q, %q): they tell which handles exist", messages[0], m)
		}
	}

	tok := ts.signIn(t, "alice", goodPassword)
	other := ts.signIn(t, "@alice", goodPassword)
	me := ts.do(t, "GET", "/api/v1/me", bearer(tok), nil)
	expect(t, me, 200, "")
	if me.data(t)["id"] != alice.ID {
		t.Fatalf("signed in as %v", me.data(t)["id"])
	}
	// Signing out ends the token at once, and only that session.
	expect(t, ts.do(t, "POST", signOutPath, bearer(tok), nil), 204, "")
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(tok), nil), 401, "unauthorized")
	expect(t, ts.do(t, "POST", signOutPath, bearer(tok), nil), 401, "unauthorized")
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(other), nil), 200, "")

	// Only sessions sign out; other credentials are unaffected.
	minted := ts.token(alice, time.Hour)
	ts.refused(t, "POST", signOutPath, bearer(minted), nil, 400, "bad_request", "")
	ts.refused(t, "POST", signOutPath, apiKey(aliceKey), nil, 400, "bad_request", "")
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(minted), nil), 200, "")

	// A new password ends the sessions signed in with the old one.
	if err := ts.db.SetPassword(context.Background(), alice.ID, "a brand new passphrase"); err != nil {
		t.Fatal(err)
	}
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(other), nil), 401, "unauthorized")
	ts.refused(t, "POST", signInPath, noCred, map[string]any{"handle": "alice", "password": goodPassword}, 401, "unauthorized", "")
	ts.signIn(t, "alice", "a brand new passphrase")
}

// Failed sign-ins and setups spend the address's failed-authentication
// budget; once it is spent the address is refused before any hashing, even
// with the right password.
func TestSignInFailuresAreRateLimited(t *testing.T) {
	ts := newTestServerWith(t, func(c *Config) {
		c.DisableAuthFailureLimit, c.AuthFailureRate, c.AuthFailureBurst = false, 0.001, 3
	})
	alice, _ := ts.user("alice")
	ts.db.SetPassword(context.Background(), alice.ID, goodPassword)
	wrong := map[string]any{"handle": "alice", "password": "not the password"}
	expect(t, ts.do(t, "POST", signInPath, noCred, wrong), 401, "unauthorized")
	expect(t, ts.do(t, "POST", setupPath, noCred, setupBody("band_s_"+strings.Repeat("b", 52))), 401, "unauthorized")
	expect(t, ts.do(t, "POST", signInPath, noCred, wrong), 401, "unauthorized")
	r := ts.refused(t, "POST", signInPath, noCred, wrong, 429, "rate_limited", "")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	ts.refused(t, "POST", signInPath, noCred, map[string]any{"handle": "alice", "password": goodPassword}, 429, "rate_limited", "")
}

func TestMyKeys(t *testing.T) {
	ts := newTestServer(t)
	_, aliceKey := ts.user("alice")
	_, bobKey := ts.user("bob")

	r := ts.do(t, "GET", keysPath, apiKey(aliceKey), nil)
	expect(t, r, 200, "")
	list := r.list(t)
	if len(list) != 1 || strings.Contains(string(r.body), aliceKey) {
		t.Fatalf("alice's keys: %s", r.body)
	}
	first := list[0].(map[string]any)
	if first["name"] != "" || !strings.HasPrefix(aliceKey, first["prefix"].(string)) || len(first["prefix"].(string)) >= len(aliceKey)/2 {
		t.Fatalf("first key %v", first)
	}

	r = ts.do(t, "POST", keysPath, apiKey(aliceKey), map[string]any{"key": map[string]any{"name": "laptop"}})
	expect(t, r, 201, "")
	made := r.data(t)
	key, id := made["api_key"].(string), made["id"].(string)
	if made["name"] != "laptop" || !strings.HasPrefix(key, "band_u_") || !strings.HasPrefix(key, made["prefix"].(string)) ||
		made["inserted_at"] == nil || made["last_used_at"] != nil {
		t.Fatalf("created %s", r.body)
	}
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey(key), nil), 200, "")
	r = ts.do(t, "GET", keysPath, apiKey(key), nil)
	if expect(t, r, 200, ""); len(r.list(t)) != 2 || strings.Contains(string(r.body), key) {
		t.Fatalf("keys after creating one: %s", r.body)
	}

	ts.run(t, []scenario{
		refusalCase("no key object", apiKey(aliceKey), "POST", keysPath, map[string]any{}, 422, "validation_error", "/key"),
		refusalCase("empty name", apiKey(aliceKey), "POST", keysPath, map[string]any{"key": map[string]any{"name": " "}}, 422, "validation_error", "/key/name"),
		refusalCase("long name", apiKey(aliceKey), "POST", keysPath, map[string]any{"key": map[string]any{"name": strings.Repeat("n", 101)}}, 422, "validation_error", "/key/name"),
		refusalCase("name not a string", apiKey(aliceKey), "POST", keysPath, map[string]any{"key": map[string]any{"name": 7}}, 422, "validation_error", "/key/name"),
		refusalCase("choosing the key", apiKey(aliceKey), "POST", keysPath, map[string]any{"key": map[string]any{"name": "x", "api_key": "band_u_x"}}, 400, "unknown_field", "/key/api_key"),
		refusalCase("another person's key", apiKey(bobKey), "DELETE", keysPath+"/"+id, nil, 404, "not_found"),
		refusalCase("unknown key", apiKey(aliceKey), "DELETE", keysPath+"/"+nilID, nil, 404, "not_found"),
		refusalCase("not an id", apiKey(aliceKey), "DELETE", keysPath+"/laptop", nil, 404, "not_found"),
	})

	// Deleting takes effect at once, though the key was just used (and so
	// cached).
	expect(t, ts.do(t, "DELETE", keysPath+"/"+id, apiKey(aliceKey), nil), 204, "")
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey(key), nil), 401, "unauthorized")
	ts.refused(t, "DELETE", keysPath+"/"+id, apiKey(aliceKey), nil, 404, "not_found", "")

	for i := 1; i < store.MaxKeysPerUser; i++ {
		expect(t, ts.do(t, "POST", keysPath, apiKey(aliceKey), map[string]any{"key": map[string]any{"name": "k"}}), 201, "")
	}
	ts.refused(t, "POST", keysPath, apiKey(aliceKey), map[string]any{"key": map[string]any{"name": "one too many"}}, 403, "limit_reached", "")
}

// A delegated token can neither manage keys nor sign out: no scope a
// delegation can hold covers those routes.
func TestDelegatedTokensCannotTouchKeysOrSessions(t *testing.T) {
	k := newDelegationWorld(t)
	_, grant := k.grant(t, store.DelegationScopes...)
	tok := k.exchange(t, grant)
	for _, rt := range []struct {
		method, path string
		body         any
	}{
		{"GET", keysPath, nil},
		{"POST", keysPath, map[string]any{"key": map[string]any{"name": "stolen"}}},
		{"DELETE", keysPath + "/" + nilID, nil},
		{"POST", signOutPath, nil},
		{"POST", "/api/v1/me/password", map[string]any{"current_password": goodPassword, "new_password": "a brand new passphrase"}},
		{"GET", "/api/v1/me/sessions", nil},
		{"DELETE", "/api/v1/me/sessions/" + nilID, nil},
	} {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			k.ts.refused(t, rt.method, rt.path, bearer(tok), rt.body, 403, "forbidden", "")
		})
	}
	for _, path := range []string{keysPath, keysPath + "/" + nilID, signOutPath, setupPath, signInPath,
		"/api/v1/me/password", "/api/v1/me/sessions", "/api/v1/me/sessions/" + nilID} {
		for _, m := range []string{"GET", "POST", "DELETE"} {
			if sc := delegationScope(m, path); sc != "" && sc != credentialScope {
				t.Errorf("%s %s needs scope %q, which a delegation could hold", m, path, sc)
			}
		}
	}
}

// TestMySessionsAndPassword: a person lists their sign-ins, ends one (its
// token stops working), and changes their password: every session ends,
// the answer is a new one, and the new password signs in. Refusals change
// nothing.
func TestMySessionsAndPassword(t *testing.T) {
	ts := newTestServer(t)
	alice, _ := ts.user("alice")
	bob, _ := ts.user("bob")
	for _, u := range []*store.User{alice, bob} {
		if err := ts.db.SetPassword(context.Background(), u.ID, goodPassword); err != nil {
			t.Fatal(err)
		}
	}
	here := ts.signIn(t, "alice", goodPassword)
	phone := ts.signIn(t, "alice", goodPassword)
	bobs := ts.signIn(t, "bob", goodPassword)

	r := ts.do(t, "GET", "/api/v1/me/sessions", bearer(here), nil)
	expect(t, r, 200, "")
	list := r.list(t)
	if len(list) != 2 || list[0].(map[string]any)["current"] == list[1].(map[string]any)["current"] {
		t.Fatalf("alice's sessions: %s", r.body)
	}
	phoneID := list[0].(map[string]any)["id"].(string) // newest first
	if list[0].(map[string]any)["current"] == true {
		t.Fatalf("the newest session is the phone's, not this one: %s", r.body)
	}
	bobID := ts.do(t, "GET", "/api/v1/me/sessions", bearer(bobs), nil).list(t)[0].(map[string]any)["id"].(string)

	ts.run(t, []scenario{
		refusalCase("bob's session", bearer(here), "DELETE", "/api/v1/me/sessions/"+bobID, nil, 404, "not_found"),
		refusalCase("no such session", bearer(here), "DELETE", "/api/v1/me/sessions/"+nilID, nil, 404, "not_found"),
		refusalCase("wrong current password", bearer(here), "POST", "/api/v1/me/password",
			map[string]any{"current_password": goodPassword + "!", "new_password": "a brand new passphrase"}, 422, "validation_error", "/current_password"),
		refusalCase("too short", bearer(here), "POST", "/api/v1/me/password",
			map[string]any{"current_password": goodPassword, "new_password": "short"}, 422, "validation_error", "/new_password"),
		refusalCase("unknown field", bearer(here), "POST", "/api/v1/me/password",
			map[string]any{"current_password": goodPassword, "new_password": "a brand new passphrase", "also": 1}, 400, "unknown_field"),
	})

	expect(t, ts.doNoContent(t, "DELETE", "/api/v1/me/sessions/"+phoneID, bearer(here)), 204, "")
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(phone), nil), 401, "unauthorized")
	expect(t, ts.doNoContent(t, "DELETE", "/api/v1/me/sessions/"+phoneID, bearer(here)), 404, "not_found")

	r = ts.do(t, "POST", "/api/v1/me/password", bearer(here),
		map[string]any{"current_password": goodPassword, "new_password": "a brand new passphrase"})
	expect(t, r, 200, "")
	fresh := r.data(t)["access_token"].(string)
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(here), nil), 401, "unauthorized")
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(fresh), nil), 200, "")
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(bobs), nil), 200, "") // bob's sessions are his
	ts.signIn(t, "alice", "a brand new passphrase")
	expect(t, ts.do(t, "POST", signInPath, noCred, map[string]any{"handle": "alice", "password": goodPassword}), 401, "unauthorized")
}
