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
	for _, tc := range []struct {
		name    string
		body    any
		status  int
		code    string
		pointer string
	}{
		{"unknown token", setupBody("band_s_" + strings.Repeat("a", 52)), 401, "unauthorized", ""},
		{"malformed token", setupBody("hello"), 401, "unauthorized", ""},
		{"no token", setupBody("", func(b map[string]any) { delete(b, "token") }), 401, "unauthorized", ""},
		{"short password", setupBody(token, func(b map[string]any) { b["password"] = "elevenchars" }), 422, "validation_error", "/password"},
		{"long password", setupBody(token, func(b map[string]any) { b["password"] = strings.Repeat("p", 257) }), 422, "validation_error", "/password"},
		{"no password", setupBody(token, func(b map[string]any) { delete(b, "password") }), 422, "validation_error", "/password"},
		{"bad handle", setupBody(token, func(b map[string]any) { b["handle"] = "-x-" }), 422, "validation_error", "/handle"},
		{"no name", setupBody(token, func(b map[string]any) { delete(b, "name") }), 422, "validation_error", "/name"},
		{"bad email", setupBody(token, func(b map[string]any) { b["email"] = "not an email" }), 422, "validation_error", "/email"},
		{"an .invalid email", setupBody(token, func(b map[string]any) { b["email"] = "ada@noreply.invalid" }), 422, "validation_error", "/email"},
		{"unknown field", setupBody(token, func(b map[string]any) { b["role"] = "admin" }), 400, "unknown_field", "/role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts.refused(t, "POST", setupPath, noCred, tc.body, tc.status, tc.code, tc.pointer)
		})
	}

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
	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"wrong password", map[string]any{"handle": "alice", "password": goodPassword + "!"}, 401, "unauthorized"},
		{"unknown handle", map[string]any{"handle": "nobody", "password": goodPassword}, 401, "unauthorized"},
		{"no password set", map[string]any{"handle": "bob", "password": goodPassword}, 401, "unauthorized"},
		{"empty body", nil, 401, "unauthorized"},
		{"unknown field", map[string]any{"handle": "alice", "password": goodPassword, "remember": true}, 400, "unknown_field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.refused(t, "POST", signInPath, noCred, tc.body, tc.status, tc.code, "")
			if tc.status == 401 {
				messages = append(messages, r.json(t)["error"].(map[string]any)["message"].(string))
			}
		})
	}
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

	for _, tc := range []struct {
		name, method, path string
		cred               cred
		body               any
		status             int
		code, pointer      string
	}{
		{"no key object", "POST", keysPath, apiKey(aliceKey), map[string]any{}, 422, "validation_error", "/key"},
		{"empty name", "POST", keysPath, apiKey(aliceKey), map[string]any{"key": map[string]any{"name": " "}}, 422, "validation_error", "/key/name"},
		{"long name", "POST", keysPath, apiKey(aliceKey), map[string]any{"key": map[string]any{"name": strings.Repeat("n", 101)}}, 422, "validation_error", "/key/name"},
		{"name not a string", "POST", keysPath, apiKey(aliceKey), map[string]any{"key": map[string]any{"name": 7}}, 422, "validation_error", "/key/name"},
		{"choosing the key", "POST", keysPath, apiKey(aliceKey), map[string]any{"key": map[string]any{"name": "x", "api_key": "band_u_x"}}, 400, "unknown_field", "/key/api_key"},
		{"another person's key", "DELETE", keysPath + "/" + id, apiKey(bobKey), nil, 404, "not_found", ""},
		{"unknown key", "DELETE", keysPath + "/" + nilID, apiKey(aliceKey), nil, 404, "not_found", ""},
		{"not an id", "DELETE", keysPath + "/laptop", apiKey(aliceKey), nil, 404, "not_found", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts.refused(t, tc.method, tc.path, tc.cred, tc.body, tc.status, tc.code, tc.pointer)
		})
	}

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
	k := newDgKit(t)
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
	} {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			k.ts.refused(t, rt.method, rt.path, bearer(tok), rt.body, 403, "forbidden", "")
		})
	}
	for _, path := range []string{keysPath, keysPath + "/" + nilID, signOutPath, setupPath, signInPath} {
		for _, m := range []string{"GET", "POST", "DELETE"} {
			if sc := delegationScope(m, path); sc != "" && sc != credentialScope {
				t.Errorf("%s %s needs scope %q, which a delegation could hold", m, path, sc)
			}
		}
	}
}
