package store

import (
	"context"
	"database/sql"
	"errors"
	"net/mail"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustUser(t testing.TB, db *DB, handle string) (*User, string) {
	t.Helper()
	u, key, err := db.CreateUser(context.Background(), NewUser{Handle: handle, Name: strings.ToUpper(handle[:1]) + handle[1:] + " Example"})
	if err != nil {
		t.Fatalf("create user %s: %v", handle, err)
	}
	return u, key
}

func mustAgent(t testing.TB, db *DB, owner *User, name string) (*Agent, string) {
	t.Helper()
	a, key, err := db.RegisterAgent(context.Background(), NewAgent{OwnerID: owner.ID, Name: name, Description: "Does things"})
	if err != nil {
		t.Fatalf("register agent %s: %v", name, err)
	}
	return a, key
}

func wantCode(t testing.TB, err error, code Code) {
	t.Helper()
	if got := ErrorCode(err); err == nil || got != code {
		t.Fatalf("err = %v (code %s), want code %s", err, got, code)
	}
}

func TestCreateUser(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, key := mustUser(t, db, "alice")
	if alice.Role != "admin" || alice.FirstName != "Alice" || alice.LastName != "Example" || alice.Name() != "Alice Example" {
		t.Fatalf("alice = %+v", alice)
	}
	if !strings.HasPrefix(key, "band_u_") || KindOfKey(key) != UserKey {
		t.Fatalf("key %q is not a new human key", key)
	}
	bob, _ := mustUser(t, db, "bob")
	if bob.Role != "user" || bob.OrganizationID != alice.OrganizationID {
		t.Fatalf("bob = %+v: the second user of an organization is a plain member", bob)
	}
	other, _, err := db.CreateUser(ctx, NewUser{Handle: "carol", Name: "Carol", Organization: "Elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if other.OrganizationID == alice.OrganizationID || other.Role != "admin" {
		t.Fatalf("carol = %+v: a new organization gets its first admin", other)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM organizations`); n != 2 {
		t.Fatalf("organizations = %d, want 2", n)
	}
}

// ReportedEmail answers a person's own address, or a placeholder that is a
// valid address (UserDetails requires format email) under .invalid.
func TestReportedEmail(t *testing.T) {
	for _, tc := range []struct{ handle, email, want string }{
		{"alice", "alice@example.com", "alice@example.com"},
		{"alice", "", "alice@noreply.invalid"},
		{"Alice.Liddell", "", "alice.liddell@noreply.invalid"},
		{"a..b", "", "a.b@noreply.invalid"},
		{"a...b_c-d", "", "a.b_c-d@noreply.invalid"},
	} {
		got := ReportedEmail(tc.handle, tc.email)
		if got != tc.want {
			t.Errorf("ReportedEmail(%q, %q) = %q, want %q", tc.handle, tc.email, got, tc.want)
		}
		if a, err := mail.ParseAddress(got); err != nil || a.Address != got {
			t.Errorf("%q is not an address: %v", got, err)
		}
	}
}

func TestCreateUserRefusals(t *testing.T) {
	db := openTestDB(t, Options{})
	mustUser(t, db, "alice")
	if _, _, err := db.CreateUser(context.Background(), NewUser{Handle: "dora", Name: "Dora", Email: "dora@example.com"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		in      NewUser
		code    Code
		pointer string
	}{
		{"handle taken, other case", NewUser{Handle: "ALICE", Name: "A"}, CodeConflict, "/handle"},
		{"email taken, other case", NewUser{Handle: "dora2", Name: "D", Email: "DORA@example.com"}, CodeConflict, "/email"},
		{"handle too short", NewUser{Handle: "a", Name: "A"}, CodeValidation, "/handle"},
		{"handle with slash", NewUser{Handle: "a/b", Name: "A"}, CodeValidation, "/handle"},
		{"handle ends with dot", NewUser{Handle: "abc.", Name: "A"}, CodeValidation, "/handle"},
		{"handle reserved", NewUser{Handle: "Admin", Name: "A"}, CodeValidation, "/handle"},
		{"blank name", NewUser{Handle: "erin", Name: "   "}, CodeValidation, "/name"},
		{"name with newline", NewUser{Handle: "erin", Name: "Erin\nX"}, CodeValidation, "/name"},
		{"bad email", NewUser{Handle: "erin", Name: "Erin", Email: "Erin <erin@x.y>"}, CodeValidation, "/email"},
		{"the placeholder of a person without one", NewUser{Handle: "erin", Name: "Erin", Email: "erin@noreply.invalid"}, CodeValidation, "/email"},
		{"any .invalid address", NewUser{Handle: "erin", Name: "Erin", Email: "erin@Mail.Invalid"}, CodeValidation, "/email"},
		{"adopted key of the wrong kind", NewUser{Handle: "erin", Name: "Erin", APIKey: "band_a_" + strings.Repeat("x", 30)}, CodeValidation, "/api_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			users := rawCount(t, db, `SELECT count(*) FROM users`)
			keys := rawCount(t, db, `SELECT count(*) FROM api_keys`)
			orgs := rawCount(t, db, `SELECT count(*) FROM organizations`)
			_, _, err := db.CreateUser(context.Background(), tc.in)
			wantCode(t, err, tc.code)
			var e *Error
			if errors.As(err, &e) {
				if p, ok := e.Details.(Problems); !ok || len(p[tc.pointer]) == 0 {
					t.Fatalf("details = %#v, want a problem at %s", e.Details, tc.pointer)
				}
			}
			if rawCount(t, db, `SELECT count(*) FROM users`) != users || rawCount(t, db, `SELECT count(*) FROM api_keys`) != keys ||
				rawCount(t, db, `SELECT count(*) FROM organizations`) != orgs {
				t.Fatal("a refused user left rows behind")
			}
		})
	}
}

func TestRegisterAgent(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, _ := mustUser(t, db, "alice")

	a, key, err := db.RegisterAgent(ctx, NewAgent{OwnerID: alice.ID, Name: "  Research Helper! ", Description: "Finds things", Tags: []string{"search", "Search", "web"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Handle != "alice/research-helper" || a.Slug != "research-helper" || a.Name != "Research Helper!" || !a.IsExternal {
		t.Fatalf("agent = %+v", a)
	}
	if a.OwnerID != alice.ID || a.OrganizationID != alice.OrganizationID || *a.Description != "Finds things" || a.Bio != nil {
		t.Fatalf("agent = %+v", a)
	}
	if strings.Join(a.Tags, ",") != "search,web" {
		t.Fatalf("tags = %v, want duplicates folded", a.Tags)
	}
	if KindOfKey(key) != AgentKey || !strings.HasPrefix(key, "band_a_") {
		t.Fatalf("key %q", key)
	}

	// The same name again: the CLI (explicit handle) gets a conflict, the
	// API (PickSlug) gets the next free slug.
	_, _, err = db.RegisterAgent(ctx, NewAgent{OwnerID: alice.ID, Name: "Research Helper", Description: "Does things"})
	wantCode(t, err, CodeConflict)
	b, _, err := db.RegisterAgent(ctx, NewAgent{OwnerID: alice.ID, Name: "Research Helper", Description: "Does things", PickSlug: true})
	if err != nil || b.Handle != "alice/research-helper-2" {
		t.Fatalf("picked %v, %v; want alice/research-helper-2", b, err)
	}
	c, _, err := db.RegisterAgent(ctx, NewAgent{OwnerID: alice.ID, Name: "Whatever", Description: "Does things", Slug: "Bot_1"})
	if err != nil || c.Handle != "alice/Bot_1" {
		t.Fatalf("explicit slug: %v, %v", c, err)
	}
	_, _, err = db.RegisterAgent(ctx, NewAgent{OwnerID: alice.ID, Name: "Other", Description: "Does things", Slug: "bot_1"})
	wantCode(t, err, CodeConflict)
}

func TestRegisterAgentRefusals(t *testing.T) {
	db := openTestDB(t, Options{Limits: Limits{AgentsPerUser: 2, TagsPerAgent: 2}})
	alice, _ := mustUser(t, db, "alice")
	mustAgent(t, db, alice, "First")
	for _, tc := range []struct {
		name string
		in   NewAgent
		code Code
	}{
		{"name too short", NewAgent{OwnerID: alice.ID, Name: "ab", Description: "Does things"}, CodeValidation},
		{"name underivable", NewAgent{OwnerID: alice.ID, Name: "!!!", Description: "Does things"}, CodeValidation},
		{"bad slug", NewAgent{OwnerID: alice.ID, Name: "Good", Description: "Does things", Slug: "-bad"}, CodeValidation},
		{"description too long", NewAgent{OwnerID: alice.ID, Name: "Good", Description: strings.Repeat("d", 501)}, CodeValidation},
		{"no description", NewAgent{OwnerID: alice.ID, Name: "Good"}, CodeValidation},
		{"blank description", NewAgent{OwnerID: alice.ID, Name: "Good", Description: " \t "}, CodeValidation},
		{"invisible description", NewAgent{OwnerID: alice.ID, Name: "Good", Description: "\u200b\u200d"}, CodeValidation},
		{"too many tags", NewAgent{OwnerID: alice.ID, Name: "Good", Description: "Does things", Tags: []string{"a", "b", "c"}}, CodeLimitReached},
		{"unknown owner", NewAgent{OwnerID: "0190a000-0000-7000-8000-000000000000", Name: "Good", Description: "Does things"}, CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := rawCount(t, db, `SELECT count(*) FROM agents`)
			_, _, err := db.RegisterAgent(context.Background(), tc.in)
			wantCode(t, err, tc.code)
			if strings.Contains(tc.name, "description") {
				var e *Error
				if !errors.As(err, &e) || len(e.Details.(Problems)["/agent/description"]) == 0 {
					t.Fatalf("err = %v, want a problem at /agent/description", err)
				}
			}
			if rawCount(t, db, `SELECT count(*) FROM agents`) != before {
				t.Fatal("a refused agent was written")
			}
		})
	}
	mustAgent(t, db, alice, "Second")
	_, _, err := db.RegisterAgent(context.Background(), NewAgent{OwnerID: alice.ID, Name: "Third", Description: "Does things"})
	wantCode(t, err, CodeLimitReached)
	var e *Error
	errors.As(err, &e)
	d := e.Details.(map[string]any)
	if d["resource"] != "agents" || d["limit"] != 2 || d["current"] != 2 {
		t.Fatalf("details = %v", d)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM api_keys WHERE agent_id IS NOT NULL`); n != 2 {
		t.Fatalf("agent keys = %d, want 2", n)
	}
}

func TestAuthenticate(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, aliceKey := mustUser(t, db, "alice")
	agent, agentKey := mustAgent(t, db, alice, "Helper")

	p, err := db.Authenticate(ctx, aliceKey)
	if err != nil || p.User == nil || p.User.ID != alice.ID || p.IsAgent() {
		t.Fatalf("human key: %+v, %v", p, err)
	}
	p, err = db.Authenticate(ctx, agentKey)
	if err != nil || !p.IsAgent() || p.Agent.ID != agent.ID || p.Agent.OwnerID != alice.ID {
		t.Fatalf("agent key: %+v, %v", p, err)
	}

	legacy := "thnv_a_1712345678_" + strings.Repeat("k", 32)
	old, _, err := db.RegisterAgent(ctx, NewAgent{OwnerID: alice.ID, Name: "Old Timer", Description: "Does things", APIKey: legacy})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := db.Authenticate(ctx, legacy); err != nil || p.Agent.ID != old.ID {
		t.Fatalf("adopted thnv_a_ key: %+v, %v", p, err)
	}

	for _, bad := range []string{
		"", "band_a_", agentKey + "x", agentKey[:len(agentKey)-1], "band_x_" + agentKey[7:],
		"band_u_" + agentKey[7:], // right body, wrong kind
		strings.Repeat("a", 500), "band_a_" + strings.Repeat("é", 30),
	} {
		if _, err := db.Authenticate(ctx, bad); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("Authenticate(%.20q…) = %v, want ErrBadCredentials", bad, err)
		}
	}

	if _, err := db.DeleteAgent(ctx, alice, agent.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Authenticate(ctx, agentKey); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("a deleted agent's key still authenticates: %v", err)
	}
}

func TestAuthenticateCachedKnowsOnlyKeysInUse(t *testing.T) {
	db := openTestDB(t, Options{})
	alice, aliceKey := mustUser(t, db, "alice")
	agent, agentKey := mustAgent(t, db, alice, "Helper")
	if _, err := db.AuthenticateCached(aliceKey); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("a key never used authenticated from the cache: %v", err)
	}
	if _, err := db.Authenticate(context.Background(), agentKey); err != nil {
		t.Fatal(err)
	}
	if p, err := db.AuthenticateCached(agentKey); err != nil || p.Agent.ID != agent.ID {
		t.Fatalf("a key in use: %+v, %v", p, err)
	}
	if _, err := db.AuthenticateCached("hello"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("a malformed key: %v", err)
	}
	if _, err := db.DeleteAgent(context.Background(), alice, agent.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AuthenticateCached(agentKey); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("a deleted agent's key still authenticates from the cache: %v", err)
	}
}

func TestTouchKeyRecordsLastUse(t *testing.T) {
	db := openTestDB(t, Options{})
	alice, _ := mustUser(t, db, "alice")
	agent, key := mustAgent(t, db, alice, "Helper")
	p, err := db.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	db.TouchKey(p)
	waitFor(t, "last_used_at", func() bool {
		keys, _ := db.AgentKeys(context.Background(), agent.ID)
		return len(keys) == 1 && keys[0].LastUsedAt != nil
	})
	keys, _ := db.AgentKeys(context.Background(), agent.ID)
	if !strings.HasPrefix(key, keys[0].Prefix) || len(keys[0].Prefix) != displayLen {
		t.Fatalf("display prefix %q does not start the key", keys[0].Prefix)
	}
}

// callersOf makes bob, of alice's organization, and carol, of another, and
// an agent of alice's shared with her organization (with everyone too,
// when global): the callers who see an agent they do not own, or none.
func callersOf(t *testing.T, db *DB, alice *User, global bool) (bob, carol *User, shared *Agent) {
	t.Helper()
	bob, _ = mustUser(t, db, "bob")
	carol, _, err := db.CreateUser(context.Background(), NewUser{Handle: "carol", Name: "Carol", Organization: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	shared, _ = mustAgent(t, db, alice, "Shared")
	rawExec(t, db, `UPDATE agents SET shared_with_organization = 1, is_global = ? WHERE id = ?`, boolInt(global), shared.ID)
	return bob, carol, shared
}

func TestDeleteAgentVisibility(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, _ := mustUser(t, db, "alice")
	private, _ := mustAgent(t, db, alice, "Private")
	bob, carol, shared := callersOf(t, db, alice, false)

	_, err := db.DeleteAgent(ctx, bob, private.ID, false)
	wantCode(t, err, CodeNotFound) // not visible to bob: indistinguishable from missing
	_, err = db.DeleteAgent(ctx, bob, shared.ID, false)
	wantCode(t, err, CodeForbidden) // bob sees it (same organization) but does not own it
	_, err = db.DeleteAgent(ctx, carol, shared.ID, false)
	wantCode(t, err, CodeNotFound) // other organization
	_, err = db.DeleteAgent(ctx, alice, "not-a-uuid", false)
	wantCode(t, err, CodeNotFound)

	d, err := db.DeleteAgent(ctx, alice, private.ID, false)
	if err != nil || d.Agent.ID != private.ID {
		t.Fatalf("delete: %v, %v", d, err)
	}
	_, err = db.DeleteAgent(ctx, alice, private.ID, false)
	wantCode(t, err, CodeNotFound)
	// The handle is free again.
	again, _ := mustAgent(t, db, alice, "Private")
	if again.Handle != "alice/private" || again.ID == private.ID {
		t.Fatalf("re-registered %+v", again)
	}
}

// agentInUse registers alice's agent Helper and authenticates with its key
// once, so that the key's principal sits in the credential cache as it
// does while the agent is connected.
func agentInUse(t *testing.T, db *DB) (alice *User, agent *Agent, key string) {
	t.Helper()
	alice, _ = mustUser(t, db, "alice")
	agent, key = mustAgent(t, db, alice, "Helper")
	if _, err := db.Authenticate(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	return alice, agent, key
}

// delegationsOf gives agent a delegation of alice's in each state a key
// rotation must tell apart: a live token (exchanged with the agent's key),
// a grant not yet exchanged, and an expired token.
func delegationsOf(t *testing.T, db *DB, alice *User, agent *Agent) (live, pending, expired string) {
	t.Helper()
	ctx := context.Background()
	delegation := func(exchange bool) string {
		d, grant, err := db.CreateDelegation(ctx, alice, agent.ID, NewDelegation{Scopes: []string{"chats:read"}})
		if err != nil {
			t.Fatal(err)
		}
		if exchange {
			if _, err := db.ExchangeDelegationGrant(ctx, agent, grant, nil); err != nil {
				t.Fatal(err)
			}
		}
		return d.ID
	}
	live, pending, expired = delegation(true), delegation(false), delegation(true)
	rawExec(t, db, `UPDATE delegations SET exchanged_at = exchanged_at - token_ttl WHERE id = ?`, expired)
	return live, pending, expired
}

// Nobody but its owner rotates an agent's key, and a refusal leaves the key
// working.
func TestRotateAgentKeyRefusals(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, agent, key := agentInUse(t, db)
	bob, carol, shared := callersOf(t, db, alice, true)
	gone, _ := mustAgent(t, db, alice, "Gone")
	if _, err := db.DeleteAgent(ctx, alice, gone.ID, false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		caller *User
		id     string
	}{
		{"another person's agent", bob, agent.ID},
		{"an agent the caller sees but does not own", bob, shared.ID},
		{"an agent of another organization", carol, agent.ID},
		{"a deleted agent", alice, gone.ID},
		{"unknown id", alice, "0190a000-0000-7000-8000-000000000000"},
		{"malformed id", alice, "not-a-uuid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := db.RotateAgentKey(ctx, tc.caller, tc.id)
			wantCode(t, err, CodeNotFound)
		})
	}
	if p, err := db.Authenticate(ctx, key); err != nil || p.Agent.ID != agent.ID {
		t.Fatalf("a refused rotation touched the key: %+v, %v", p, err)
	}
}

func TestRotateAgentKey(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, agent, oldKey := agentInUse(t, db)
	oldKeys, _ := db.AgentKeys(ctx, agent.ID)
	live, pending, expired := delegationsOf(t, db, alice, agent)
	rec := record(db)

	a, newKey, err := db.RotateAgentKey(ctx, alice, agent.ID)
	if err != nil || a.ID != agent.ID || a.Handle != "alice/helper" {
		t.Fatalf("rotate: %+v, %v", a, err)
	}
	keys, _ := db.AgentKeys(ctx, agent.ID)

	t.Run("the new key replaces the old", func(t *testing.T) {
		if KindOfKey(newKey) != AgentKey || newKey == oldKey {
			t.Fatalf("new key %q", newKey)
		}
		if _, err := db.Authenticate(ctx, oldKey); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("the old key still authenticates: %v", err)
		}
		if _, err := db.AuthenticateCached(oldKey); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("the old key still authenticates from the cache: %v", err)
		}
		if p, err := db.Authenticate(ctx, newKey); err != nil || p.Agent.ID != agent.ID {
			t.Fatalf("the new key: %+v, %v", p, err)
		}
		if len(keys) != 1 || !strings.HasPrefix(newKey, keys[0].Prefix) {
			t.Fatalf("keys after rotation = %+v", keys)
		}
	})

	t.Run("the old key's end is published", func(t *testing.T) {
		ended, err := db.EndedCredentials(ctx, HeldCredentials{Keys: []string{oldKeys[0].ID, keys[0].ID}})
		if err != nil || !ended[oldKeys[0].ID] || ended[keys[0].ID] {
			t.Fatalf("EndedCredentials = %v, %v", ended, err)
		}
		rec.mu.Lock()
		changes := rec.changes
		rec.mu.Unlock()
		if len(changes) != 1 || changes[0].Kind != CredentialsEnded || changes[0].Agent.ID != agent.ID {
			t.Fatalf("published %+v", changes)
		}
	})

	t.Run("only the live delegated token ends", func(t *testing.T) {
		for id, want := range map[string]bool{live: true, pending: false, expired: false} {
			var revokedAt sql.NullInt64
			if err := db.read.QueryRow(db.dialect.bind(`SELECT revoked_at FROM delegations WHERE id = ?`), id).Scan(&revokedAt); err != nil {
				t.Fatal(err)
			}
			if revokedAt.Valid != want {
				t.Errorf("delegation %s revoked = %v, want %v", id, revokedAt.Valid, want)
			}
		}
	})
}

func TestListOwnedAgentsPaging(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, _ := mustUser(t, db, "alice")
	bob, _ := mustUser(t, db, "bob")
	names := []string{"Charlie", "alpha", "Bravo", "delta", "Echo"}
	for _, n := range names {
		mustAgent(t, db, alice, n)
	}
	mustAgent(t, db, bob, "Bobs Agent")

	walk := func(f AgentFilter, limit int) []string {
		var got []string
		var after *Keyset
		for i := 0; i < 10; i++ {
			page, err := db.ListOwnedAgents(ctx, alice.ID, f, PageRequest{Limit: limit, After: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range page.Items {
				got = append(got, a.Name)
			}
			if !page.HasMore {
				return got
			}
			after = page.Next
		}
		t.Fatal("paging did not end")
		return nil
	}
	if got := strings.Join(walk(AgentFilter{Sort: "name"}, 2), ","); got != "alpha,Bravo,Charlie,delta,Echo" {
		t.Fatalf("by name asc = %s", got)
	}
	if got := strings.Join(walk(AgentFilter{Sort: "name", Descending: true}, 3), ","); got != "Echo,delta,Charlie,Bravo,alpha" {
		t.Fatalf("by name desc = %s", got)
	}
	if got := strings.Join(walk(AgentFilter{Descending: true}, 2), ","); got != "Echo,delta,Bravo,alpha,Charlie" {
		t.Fatalf("newest first = %s", got)
	}
	if got := strings.Join(walk(AgentFilter{Name: "HA"}, 10), ","); got != "Charlie,alpha" {
		t.Fatalf("name filter = %s", got)
	}
	if got := walk(AgentFilter{Name: "%"}, 10); len(got) != 0 {
		t.Fatalf("%% must match literally, got %v", got)
	}
	yes := true
	if got := walk(AgentFilter{IsExternal: &yes}, 10); len(got) != 5 {
		t.Fatalf("is_external filter = %v", got)
	}
	page, err := db.ListOwnedAgents(ctx, alice.ID, AgentFilter{Sort: "name"}, PageRequest{Limit: 2, Offset: 2, WithTotal: true})
	if err != nil || page.Total != 5 || len(page.Items) != 2 || page.Items[0].Name != "Charlie" || !page.HasMore {
		t.Fatalf("offset page: %+v, %v", page, err)
	}
}

// A key rotated by another process (the CLI beside a running server) stops
// working in this one within a second or so, cached or not, and the change
// is announced for the connections to recheck their keys.
func TestAnotherProcessRotatingAKeyIsNoticed(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	alice, agent, oldKey := agentInUse(t, db)
	rec := record(db)
	cli := openTestDBAt(t, db.Path(), Options{})
	_, newKey, err := cli.RotateAgentKey(ctx, alice, agent.ID)
	if err != nil {
		t.Fatal(err)
	}
	cli.Close() // as the command exits (its last checkpoint is a change too)
	waitFor(t, "the old key to leave the cache", func() bool {
		_, err := db.AuthenticateCached(oldKey)
		return err != nil
	})
	if _, err := db.Authenticate(ctx, oldKey); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("the old key still authenticates: %v", err)
	}
	if p, err := db.Authenticate(ctx, newKey); err != nil || p.Agent.ID != agent.ID {
		t.Fatalf("the new key: %+v, %v", p, err)
	}
	// SQLite knows only that another process wrote; PostgreSQL passes on
	// what it changed (cluster.go).
	waitFor(t, "other_process_wrote or credentials_ended", func() bool {
		return slices.Contains(rec.kinds(), string(OtherProcessWrote)) || slices.Contains(rec.kinds(), string(CredentialsEnded))
	})
	// This process's own writes are not taken for another's.
	time.Sleep(3 * otherWritersEvery / 2)
	rec.reset()
	mustUser(t, db, "bob")
	time.Sleep(3 * otherWritersEvery / 2)
	if got := rec.kinds(); slices.Contains(got, string(OtherProcessWrote)) {
		t.Fatalf("own writes announced as another process's: %v", got)
	}
}

// A write that ends credentials makes the credential cache step aside from
// within its job until its batch has ended, committed or not: its commit is
// visible to other readers before the writer could empty the cache, and no
// request may be let in on a copy older than that.
func TestCredentialCacheStepsAsideWhileCredentialsEnd(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	_, key := mustUser(t, db, "alice")
	cached := func() bool {
		_, err := db.AuthenticateCached(key)
		return err == nil
	}
	if _, err := db.Authenticate(ctx, key); err != nil || !cached() {
		t.Fatalf("the key is not cached after use: %v", err)
	}
	for _, outcome := range []error{nil, errors.New("the job fails")} {
		err := db.Write(ctx, func(tx *Tx) error {
			db.endCredentials(tx)
			if cached() {
				t.Error("the cache answered while a write ending credentials was under way")
			}
			if _, err := db.Authenticate(ctx, key); err != nil {
				t.Errorf("before its commit the key still authenticates from the database: %v", err)
			}
			if cached() {
				t.Error("the cache remembered a principal read while a write ending credentials was under way")
			}
			return outcome
		})
		if err != outcome {
			t.Fatalf("write: %v, want %v", err, outcome)
		}
		if _, err := db.Authenticate(ctx, key); err != nil || !cached() {
			t.Fatalf("after the batch (%v) the cache is not back in use: %v", outcome, err)
		}
	}
}
