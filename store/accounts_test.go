package store

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestPasswordHashRoundTrip(t *testing.T) {
	ctx := context.Background()
	h, err := hashPassword(ctx, "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q is not PHC argon2id with the chosen parameters", h)
	}
	h2, _ := hashPassword(ctx, "correct horse battery")
	if h == h2 {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for _, tc := range []struct {
		encoded, pw string
		ok          bool
	}{
		{h, "correct horse battery", true},
		{h, "correct horse batterY", false},
		{h, "", false},
		{strings.Replace(h, "argon2id", "argon2i", 1), "correct horse battery", false},
		{strings.Replace(h, "m=19456", "m=4194304", 1), "correct horse battery", false}, // too costly to try
		{"not a hash", "correct horse battery", false},
	} {
		ok, err := verifyPassword(ctx, tc.encoded, tc.pw)
		if err != nil || ok != tc.ok {
			t.Errorf("verify(%q, %q) = %v, %v; want %v", tc.encoded, tc.pw, ok, err, tc.ok)
		}
	}
}

func TestPasswordRules(t *testing.T) {
	for _, tc := range []struct {
		pw string
		ok bool
	}{
		{strings.Repeat("a", 11), false},
		{strings.Repeat("a", 12), true},
		{strings.Repeat("é", 12), true}, // characters, not bytes
		{strings.Repeat("a", 256), true},
		{strings.Repeat("a", 257), false},
		{"\xff" + strings.Repeat("a", 12), false},
	} {
		if got := checkPassword(tc.pw) == ""; got != tc.ok {
			t.Errorf("checkPassword(%d bytes) ok = %v, want %v", len(tc.pw), got, tc.ok)
		}
	}
}

func TestSignInAndSessions(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, _ := mustUser(t, db, "alice")
	if _, _, err := db.SignIn(ctx, "alice", "no password set yet"); err != ErrBadSignIn {
		t.Fatalf("sign-in without a password: %v", err)
	}
	if err := db.SetPassword(ctx, alice.ID, "short"); ErrorCode(err) != CodeValidation {
		t.Fatalf("short password: %v", err)
	}
	if err := db.SetPassword(ctx, alice.ID, "a long enough password"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]string{{"alice", "a long enough passworD"}, {"nobody", "a long enough password"}, {"", ""}} {
		if _, _, err := db.SignIn(ctx, bad[0], bad[1]); err != ErrBadSignIn {
			t.Fatalf("sign-in %q: %v", bad, err)
		}
	}
	u, s, err := db.SignIn(ctx, "@Alice", "a long enough password")
	if err != nil || u.ID != alice.ID || s.UserID != alice.ID || s.ExpiresAt.Sub(time.Now()) < SessionTTL-time.Minute {
		t.Fatalf("sign-in: %v %+v", err, s)
	}
	if got, err := db.SessionUser(ctx, s.ID, alice.ID); err != nil || got.ID != alice.ID {
		t.Fatalf("live session: %v", err)
	}
	if _, err := db.SessionUser(ctx, s.ID, newID()); err != ErrBadCredentials {
		t.Fatalf("session of another user: %v", err)
	}
	if err := db.EndSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SessionUser(ctx, s.ID, alice.ID); err != ErrBadCredentials {
		t.Fatalf("ended session: %v", err)
	}
	// A new password ends the sessions signed in with the old one.
	_, s2, _ := db.SignIn(ctx, "alice", "a long enough password")
	if err := db.SetPassword(ctx, alice.ID, "another long password"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SessionUser(ctx, s2.ID, alice.ID); err != ErrBadCredentials {
		t.Fatalf("session after a password change: %v", err)
	}
	if _, _, err := db.SignIn(ctx, "alice", "another long password"); err != nil {
		t.Fatal(err)
	}
	// Ended sessions are dropped at the next sign-in.
	if n := rawCount(t, db, `SELECT count(*) FROM sessions WHERE user_id = ?`, alice.ID); n != 1 {
		t.Fatalf("%d session rows, want the one live session", n)
	}
}

func TestSetUpFirstUser(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	nu := NewUser{Handle: "ada", Name: "Ada Lovelace", Organization: "elsewhere"}
	expired, _ := db.CreateSetupToken(ctx)
	if err := db.Write(ctx, func(tx *Tx) error {
		_, err := tx.Exec(`UPDATE setup_tokens SET expires_at = ? WHERE digest = ?`, tx.Now().UnixMicro(), keyDigest(expired))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.SetUpFirstUser(ctx, expired, nu, "a long enough password"); err != errBadSetup {
		t.Fatalf("expired token: %v", err)
	}
	token, err := db.CreateSetupToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.SetUpFirstUser(ctx, expired, nu, "a long enough password"); err != errBadSetup {
		t.Fatalf("replaced token: %v", err)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM setup_tokens WHERE digest = ?`, keyDigest(token)); n != 1 {
		t.Fatal("the token's digest is not stored")
	}
	if _, _, err := db.SetUpFirstUser(ctx, token, NewUser{Handle: "-"}, "short"); ErrorCode(err) != CodeValidation {
		t.Fatalf("bad fields: %v", err)
	} else if p := err.(*Error).Details.(Problems); p["/password"] == nil || p["/handle"] == nil || p["/name"] == nil {
		t.Fatalf("problems %v", p)
	}
	if _, _, err := db.SetUpFirstUser(ctx, setupPrefix+strings.Repeat("a", 52), nu, "a long enough password"); err != errBadSetup {
		t.Fatalf("unknown token: %v", err)
	}
	u, s, err := db.SetUpFirstUser(ctx, token, nu, "a long enough password")
	if err != nil {
		t.Fatal(err)
	}
	org := rawCount(t, db, `SELECT count(*) FROM organizations WHERE id = ? AND name = ?`, u.OrganizationID, DefaultOrganization)
	if u.Role != "admin" || org != 1 || s.UserID != u.ID {
		t.Fatalf("first person: %+v in %d", u, org)
	}
	if _, err := db.SessionUser(ctx, s.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.SetUpFirstUser(ctx, token, NewUser{Handle: "again", Name: "Again"}, "a long enough password"); err != errBadSetup {
		t.Fatalf("used token: %v", err)
	}
	token2, _ := db.CreateSetupToken(ctx)
	if _, _, err := db.SetUpFirstUser(ctx, token2, NewUser{Handle: "again", Name: "Again"}, "a long enough password"); ErrorCode(err) != CodeConflict {
		t.Fatalf("setup with people present: %v", err)
	}
}

func TestUserKeys(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, firstKey := mustUser(t, db, "alice")
	bob, _ := mustUser(t, db, "bob")
	if _, _, err := db.CreateUserKey(ctx, alice.ID, " "); ErrorCode(err) != CodeValidation {
		t.Fatalf("blank name: %v", err)
	}
	info, key, err := db.CreateUserKey(ctx, alice.ID, "laptop")
	if err != nil || info.Name != "laptop" || !strings.HasPrefix(key, info.Prefix) || KindOfKey(key) != UserKey {
		t.Fatalf("create: %v %+v", err, info)
	}
	keys, _ := db.UserKeys(ctx, alice.ID)
	if len(keys) != 2 || keys[0].Name != "" || keys[1].ID != info.ID || !strings.HasPrefix(firstKey, keys[0].Prefix) {
		t.Fatalf("keys %+v", keys)
	}
	if p, err := db.Authenticate(ctx, key); err != nil || p.User.ID != alice.ID {
		t.Fatalf("new key: %v", err)
	}
	if err := db.DeleteUserKey(ctx, bob.ID, info.ID); ErrorCode(err) != CodeNotFound {
		t.Fatalf("bob deletes alice's key: %v", err)
	}
	if err := db.DeleteUserKey(ctx, alice.ID, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Authenticate(ctx, key); err != ErrBadCredentials {
		t.Fatalf("deleted key (cached before) still works: %v", err)
	}
	for i := 1; i < MaxKeysPerUser; i++ {
		if _, _, err := db.CreateUserKey(ctx, alice.ID, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := db.CreateUserKey(ctx, alice.ID, "one too many"); ErrorCode(err) != CodeLimitReached {
		t.Fatalf("key %d: %v", MaxKeysPerUser+1, err)
	}
}

// Every way a person's credential ends is published, so that the server can
// close the connections opened with it, and EndedCredentials names exactly
// the ended ones.
func TestEndedCredentials(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, aliceKey := mustUser(t, db, "alice")
	if err := db.SetPassword(ctx, alice.ID, "a long enough password"); err != nil {
		t.Fatal(err)
	}
	_, signedOut, _ := db.SignIn(ctx, "alice", "a long enough password")
	_, live, _ := db.SignIn(ctx, "alice", "a long enough password")
	spare, _, err := db.CreateUserKey(ctx, alice.ID, "spare")
	if err != nil {
		t.Fatal(err)
	}
	p, err := db.Authenticate(ctx, aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(db)
	ended := func() map[string]bool {
		t.Helper()
		got, err := db.EndedCredentials(ctx, HeldCredentials{Keys: []string{p.KeyID, spare.ID, newID()}, Sessions: []string{signedOut.ID, live.ID, newID()}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := ended(); len(got) != 2 || got[p.KeyID] || got[spare.ID] || got[signedOut.ID] || got[live.ID] {
		t.Fatalf("before: ended %v, want only the two unknown ids", got)
	}

	steps := []struct {
		name string
		do   func() error
		now  []string // ids that have ended after the step
	}{
		{"sign-out", func() error { return db.EndSession(ctx, signedOut.ID) }, []string{signedOut.ID}},
		{"key deleted", func() error { return db.DeleteUserKey(ctx, alice.ID, spare.ID) }, []string{signedOut.ID, spare.ID}},
		{"password set", func() error { return db.SetPassword(ctx, alice.ID, "another long password") },
			[]string{signedOut.ID, spare.ID, live.ID}},
	}
	for _, step := range steps {
		rec.reset()
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := rec.kinds(); len(got) != 1 || got[0] != string(CredentialsEnded) {
			t.Fatalf("%s published %v, want credentials_ended", step.name, got)
		}
		got := ended()
		for _, id := range step.now {
			if !got[id] {
				t.Fatalf("after %s: %s has not ended (%v)", step.name, id, got)
			}
		}
		if got[p.KeyID] || len(got) != len(step.now)+2 {
			t.Fatalf("after %s: ended %v, want %v and the unknown ids", step.name, got, step.now)
		}
	}
}

// No function that creates, reveals or rotates a secret runs for a request
// made with a delegated token, whichever route reaches it, and a refusal
// writes nothing.
func TestDelegatedContextMintsNoCredential(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, _ := mustUser(t, db, "alice")
	agent, _, err := db.RegisterAgent(ctx, NewAgent{OwnerID: alice.ID, Name: "Helper", Description: "Does things"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetPassword(ctx, alice.ID, "a long enough password"); err != nil {
		t.Fatal(err)
	}
	delegated := WithDelegation(ctx, &Delegation{ID: newID(), UserID: alice.ID, Agent: agent})
	const credentialRows = `SELECT (SELECT count(*) FROM api_keys) || '/' || (SELECT count(*) FROM agents) || '/' ||
		(SELECT count(*) FROM users) || '/' || (SELECT count(*) FROM sessions) || '/' || (SELECT count(*) FROM delegations) || '/' ||
		(SELECT count(*) FROM setup_tokens) || '/' || (SELECT count(*) || ':' || coalesce(max(hash), '') FROM user_passwords) || '/' ||
		(SELECT count(*) FROM oauth_codes)`
	var before string
	if err := db.read.QueryRow(credentialRows).Scan(&before); err != nil {
		t.Fatal(err)
	}
	for name, mint := range map[string]func() error{
		"RegisterAgent": func() error {
			_, _, err := db.RegisterAgent(delegated, NewAgent{OwnerID: alice.ID, Name: "Minted", Description: "Does things"})
			return err
		},
		"RotateAgentKey": func() error { _, _, err := db.RotateAgentKey(delegated, alice, agent.ID); return err },
		"CreateUserKey":  func() error { _, _, err := db.CreateUserKey(delegated, alice.ID, "laptop"); return err },
		"CreateDelegation": func() error {
			_, _, err := db.CreateDelegation(delegated, alice, agent.ID, NewDelegation{Scopes: []string{"chats:read"}})
			return err
		},
		"ExchangeDelegationGrant": func() error { _, err := db.ExchangeDelegationGrant(delegated, agent, "band_g_x", nil); return err },
		"CreateUser":              func() error { _, _, err := db.CreateUser(delegated, NewUser{Handle: "mallory", Name: "M"}); return err },
		"SetPassword":             func() error { return db.SetPassword(delegated, alice.ID, "a password of my own") },
		"SignIn":                  func() error { _, _, err := db.SignIn(delegated, "alice", "a long enough password"); return err },
		"SetUpFirstUser": func() error {
			_, _, err := db.SetUpFirstUser(delegated, "band_s_x", NewUser{Handle: "eve", Name: "E"}, "a long enough password")
			return err
		},
		"CreateSetupToken": func() error { _, err := db.CreateSetupToken(delegated); return err },
		"AuthorizeOAuthClient": func() error {
			_, err := db.AuthorizeOAuthClient(delegated, alice, OAuthAuthorization{ClientID: newID(), AgentID: agent.ID,
				CodeChallenge: strings.Repeat("A", 43)})
			return err
		},
	} {
		if err := mint(); err != ErrDelegatedCredential {
			t.Errorf("%s with a delegated context: %v, want ErrDelegatedCredential", name, err)
		}
	}
	var after string
	if err := db.read.QueryRow(credentialRows).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("credential rows %s, before %s", after, before)
	}
}

// TestInvitationAcceptedOnce: an admin's invitation makes a person of their
// organization, with the invited role and a session, once; a revoked
// invitation makes nobody, and taken handles are refused before anything
// is used up.
func TestInvitationAcceptedOnce(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, _ := mustUser(t, db, "alice")
	inv, token, err := db.CreateInvitation(ctx, alice, "admin")
	if err != nil {
		t.Fatal(err)
	}
	revoked, revokedToken, err := db.CreateInvitation(ctx, alice, "")
	if err != nil {
		t.Fatal(err)
	}
	if open, err := db.Invitations(ctx, alice); err != nil || len(open) != 2 || open[0].ID != revoked.ID || open[1].InvitedBy != alice.Name() {
		t.Fatalf("open invitations: %+v, %v", open, err)
	}
	if err := db.RevokeInvitation(ctx, alice, revoked.ID); err != nil {
		t.Fatal(err)
	}
	const password = "a long enough password"
	_, _, err = db.AcceptInvitation(ctx, revokedToken, NewUser{Handle: "erin", Name: "Erin"}, password)
	wantCode(t, err, CodeUnauthorized)
	_, _, err = db.AcceptInvitation(ctx, token, NewUser{Handle: "ALICE", Name: "Other Alice"}, password)
	wantCode(t, err, CodeConflict)

	dora, s, err := db.AcceptInvitation(ctx, token, NewUser{Handle: "dora", Name: "Dora"}, password)
	if err != nil || dora.Role != "admin" || dora.OrganizationID != alice.OrganizationID || s == nil {
		t.Fatalf("accepted: %+v, %+v, %v", dora, s, err)
	}
	if _, err := db.SessionUser(ctx, s.ID, dora.ID); err != nil {
		t.Fatal(err)
	}
	_, _, err = db.AcceptInvitation(ctx, token, NewUser{Handle: "dora2", Name: "Dora"}, password)
	wantCode(t, err, CodeUnauthorized)
	if open, err := db.Invitations(ctx, alice); err != nil || len(open) != 0 {
		t.Fatalf("open invitations after use: %+v, %v (invitation %s)", open, err, inv.ID)
	}
}
