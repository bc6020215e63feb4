package server

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/store"
)

// delegationWorld: alice owns helper and scout; bob owns rover. Requests are logged
// into log, so tests can check that delegated calls are attributed.
type delegationWorld struct {
	ts                  *testServer
	log                 *syncBuffer
	alice, bob          *store.User
	aliceKey, bobKey    string
	helper, scout       *store.Agent
	helperKey, scoutKey string
	rover               *store.Agent
	roverKey            string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newDelegationWorld(t *testing.T) *delegationWorld {
	k := &delegationWorld{log: &syncBuffer{}}
	k.ts = newTestServerWith(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(k.log, nil)) })
	k.alice, k.aliceKey = k.ts.user("alice")
	k.bob, k.bobKey = k.ts.user("bob", "Bobco")
	k.helper, k.helperKey = k.ts.agent(k.alice, "Helper")
	k.scout, k.scoutKey = k.ts.agent(k.alice, "Scout")
	k.rover, k.roverKey = k.ts.agent(k.bob, "Rover")
	return k
}

func delegationsPath(agentID string) string { return "/api/v1/me/agents/" + agentID + "/delegations" }

const exchangePath = "/api/v1/agent/delegation/token"

// grant has alice delegate scopes to her helper and returns the delegation
// id and its grant.
func (k *delegationWorld) grant(t *testing.T, scopes ...string) (id, grant string) {
	t.Helper()
	r := k.ts.do(t, "POST", delegationsPath(k.helper.ID), apiKey(k.aliceKey), map[string]any{"delegation": map[string]any{"scopes": scopes}})
	expect(t, r, 201, "")
	d := r.data(t)
	return d["id"].(string), d["grant"].(string)
}

func exchangeBody(grant string, scope ...string) map[string]any {
	b := map[string]any{"grant_type": tokenExchangeGrant, "subject_token": grant, "subject_token_type": delegationGrantType}
	if len(scope) > 0 {
		b["scope"] = strings.Join(scope, " ")
	}
	return b
}

// exchange redeems a grant with the helper's key and returns the token.
func (k *delegationWorld) exchange(t *testing.T, grant string, scope ...string) string {
	t.Helper()
	r := k.ts.do(t, "POST", exchangePath, apiKey(k.helperKey), exchangeBody(grant, scope...))
	expect(t, r, 200, "")
	return r.data(t)["access_token"].(string)
}

// delegation returns alice's delegation id to the helper as she lists it.
func (k *delegationWorld) delegation(t *testing.T, id string) map[string]any {
	t.Helper()
	r := k.ts.do(t, "GET", delegationsPath(k.helper.ID), apiKey(k.aliceKey), nil)
	expect(t, r, 200, "")
	for _, d := range r.list(t) {
		if d := d.(map[string]any); d["id"] == id {
			return d
		}
	}
	t.Fatalf("delegation %s is not listed: %s", id, r.body)
	return nil
}

// sign makes a delegated token with the server's delegation key.
func (k *delegationWorld) sign(t *testing.T, claims delegatedClaims) string {
	t.Helper()
	secret, err := k.ts.db.ServerSecret(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(deriveKey(secret, "chatd/delegation/v1"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestDelegationLifecycle(t *testing.T) {
	k := newDelegationWorld(t)
	before := time.Now()
	r := k.ts.do(t, "POST", delegationsPath(k.helper.ID), apiKey(k.aliceKey),
		map[string]any{"delegation": map[string]any{"scopes": []string{"chats:read", "chats:write"}, "token_ttl_seconds": 600}})
	expect(t, r, 201, "")
	d := r.data(t)
	id, grant := d["id"].(string), d["grant"].(string)
	if !strings.HasPrefix(grant, "band_g_") || len(grant) != len("band_g_")+52 {
		t.Fatalf("grant = %q", grant)
	}
	if d["status"] != "pending" || d["agent_id"] != k.helper.ID || d["agent_handle"] != "alice/helper" ||
		d["token_ttl_seconds"] != float64(600) || d["exchanged_at"] != nil || d["token_expires_at"] != nil {
		t.Errorf("created delegation = %v", d)
	}
	if exp, _ := time.Parse(time.RFC3339Nano, d["grant_expires_at"].(string)); exp.Sub(before) < 9*time.Minute || exp.Sub(before) > 11*time.Minute {
		t.Errorf("grant_expires_at = %v, want about ten minutes from now", d["grant_expires_at"])
	}
	listed := k.delegation(t, id)
	if _, shown := listed["grant"]; shown {
		t.Errorf("the listing shows the grant again: %v", listed)
	}
	if strings.Contains(k.ts.snapshot(t), grant) {
		t.Error("the grant is stored in the clear")
	}

	r = k.ts.do(t, "POST", exchangePath, apiKey(k.helperKey), exchangeBody(grant))
	expect(t, r, 200, "")
	x := r.data(t)
	if x["token_type"] != "Bearer" || x["issued_token_type"] != issuedTokenTypeJWT || x["expires_in"] != float64(600) ||
		x["scope"] != "chats:read chats:write" || x["delegation_id"] != id {
		t.Errorf("exchange = %v", x)
	}
	tok := x["access_token"].(string)
	var claims delegatedClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &claims); err != nil ||
		claims.Subject != k.alice.ID || claims.Act.Sub != k.helper.ID || claims.ID != id || claims.Scope != "chats:read chats:write" {
		t.Errorf("token claims = %+v (%v)", claims, err)
	}
	if got := k.delegation(t, id); got["status"] != "active" || got["exchanged_at"] == nil || got["token_expires_at"] == nil {
		t.Errorf("after the exchange: %v", got)
	}

	// The token acts as alice, within its scopes.
	expect(t, k.ts.do(t, "GET", "/api/v1/me/chats", bearer(tok), nil), 200, "")
	r = k.ts.do(t, "POST", "/api/v1/me/chats", bearer(tok), map[string]any{"chat": map[string]any{"title": "Planning"}})
	expect(t, r, 201, "")
	room := r.data(t)["id"].(string)
	r = k.ts.do(t, "GET", "/api/v1/me/chats/"+room+"/participants", apiKey(k.aliceKey), nil)
	expect(t, r, 200, "")
	if ps := r.list(t); len(ps) != 1 || ps[0].(map[string]any)["id"] != k.alice.ID {
		t.Errorf("the room made through the delegation has participants %s, want alice alone", r.body)
	}
	k.ts.refused(t, "GET", "/api/v1/me/contacts", bearer(tok), nil, 403, "forbidden", "")

	// Every use names the acting agent and the delegation.
	if !strings.Contains(k.log.String(), "path=/api/v1/me/chats status=201") ||
		!strings.Contains(k.log.String(), "acting_agent="+k.helper.ID+" delegation="+id) {
		t.Errorf("the request log does not attribute the delegated call:\n%s", k.log.String())
	}
	deadline := time.Now().Add(5 * time.Second)
	for k.delegation(t, id)["last_used_at"] == nil {
		if time.Now().After(deadline) {
			t.Fatal("last_used_at was never recorded")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Revoking ends the token at once; revoking again changes nothing.
	r = k.ts.do(t, "DELETE", delegationsPath(k.helper.ID)+"/"+id, apiKey(k.aliceKey), nil)
	expect(t, r, 200, "")
	if got := r.data(t); got["status"] != "revoked" || got["revoked_at"] == nil {
		t.Errorf("revoked = %v", got)
	}
	k.ts.refused(t, "GET", "/api/v1/me/chats", bearer(tok), nil, 401, "unauthorized", "")
	before2 := k.ts.snapshot(t)
	expect(t, k.ts.do(t, "DELETE", delegationsPath(k.helper.ID)+"/"+id, apiKey(k.aliceKey), nil), 200, "")
	k.ts.unchanged(t, before2)
}

func TestDelegationListing(t *testing.T) {
	k := newDelegationWorld(t)
	first, _ := k.grant(t, "profile:read")
	second, _ := k.grant(t, "chats:read")
	r := k.ts.do(t, "GET", delegationsPath(k.helper.ID), apiKey(k.aliceKey), nil)
	expect(t, r, 200, "")
	list := r.list(t)
	if len(list) != 2 || list[0].(map[string]any)["id"] != second || list[1].(map[string]any)["id"] != first {
		t.Fatalf("listing = %s, want newest first", r.body)
	}
	r = k.ts.do(t, "GET", delegationsPath(k.scout.ID), apiKey(k.aliceKey), nil)
	expect(t, r, 200, "")
	if len(r.list(t)) != 0 {
		t.Errorf("scout's delegations = %s, want none", r.body)
	}
	listing := func(name, path, key string, status int, code string) scenario {
		return refusalCase(name, apiKey(key), "GET", path, nil, status, code)
	}
	k.ts.run(t, []scenario{
		listing("someone else's agent", delegationsPath(k.rover.ID), k.aliceKey, 404, "not_found"),
		listing("an agent that does not exist", delegationsPath(nilID), k.aliceKey, 404, "not_found"),
		listing("not an id", delegationsPath("helper"), k.aliceKey, 404, "not_found"),
		listing("the agent itself", delegationsPath(k.helper.ID), k.helperKey, 403, "forbidden"),
	})
}

func TestDelegationCreateRefusals(t *testing.T) {
	k := newDelegationWorld(t)
	body := func(d map[string]any) map[string]any { return map[string]any{"delegation": d} }
	creating := func(name, agent string, body any, status int, code string, pointers ...string) scenario {
		return refusalCase(name, apiKey(k.aliceKey), "POST", delegationsPath(agent), body, status, code, pointers...)
	}
	k.ts.run(t, []scenario{
		creating("no body", k.helper.ID, nil, 422, "validation_error", "/delegation"),
		creating("no scopes", k.helper.ID, body(map[string]any{}), 422, "validation_error", "/delegation/scopes"),
		creating("empty scopes", k.helper.ID, body(map[string]any{"scopes": []string{}}), 422, "validation_error", "/delegation/scopes"),
		creating("unknown scope", k.helper.ID, body(map[string]any{"scopes": []string{"chats:read", "admin"}}), 422, "validation_error", "/delegation/scopes/1"),
		creating("scope twice", k.helper.ID, body(map[string]any{"scopes": []string{"chats:read", "chats:read"}}), 422, "validation_error", "/delegation/scopes/1"),
		creating("zero grant ttl", k.helper.ID, body(map[string]any{"scopes": []string{"chats:read"}, "grant_ttl_seconds": 0}), 422, "validation_error", "/delegation/grant_ttl_seconds"),
		creating("grant ttl too short", k.helper.ID, body(map[string]any{"scopes": []string{"chats:read"}, "grant_ttl_seconds": 5}), 422, "validation_error", "/delegation/grant_ttl_seconds"),
		creating("token ttl over a day", k.helper.ID, body(map[string]any{"scopes": []string{"chats:read"}, "token_ttl_seconds": 86401}), 422, "validation_error", "/delegation/token_ttl_seconds"),
		creating("ttl not a number", k.helper.ID, body(map[string]any{"scopes": []string{"chats:read"}, "token_ttl_seconds": "1h"}), 422, ""),
		creating("unknown field", k.helper.ID, body(map[string]any{"scopes": []string{"chats:read"}, "forever": true}), 400, "unknown_field"),
		creating("someone else's agent", k.rover.ID, body(map[string]any{"scopes": []string{"chats:read"}}), 404, "not_found"),
		creating("an agent that does not exist", nilID, body(map[string]any{"scopes": []string{"chats:read"}}), 404, "not_found"),
	})

	// A limit on live delegations per agent; revoked ones do not count.
	var ids []string
	for range store.MaxLiveDelegationsPerAgent {
		id, _ := k.grant(t, "profile:read")
		ids = append(ids, id)
	}
	k.ts.refused(t, "POST", delegationsPath(k.helper.ID), apiKey(k.aliceKey), body(map[string]any{"scopes": []string{"profile:read"}}), 403, "limit_reached", "")
	expect(t, k.ts.do(t, "DELETE", delegationsPath(k.helper.ID)+"/"+ids[0], apiKey(k.aliceKey), nil), 200, "")
	k.grant(t, "profile:read")
}

func TestDelegationRevokeRefusals(t *testing.T) {
	k := newDelegationWorld(t)
	id, _ := k.grant(t, "chats:read")
	revoking := func(name, path, key string, status int, code string) scenario {
		return refusalCase(name, apiKey(key), "DELETE", path, nil, status, code)
	}
	k.ts.run(t, []scenario{
		revoking("through another of her agents", delegationsPath(k.scout.ID)+"/"+id, k.aliceKey, 404, "not_found"),
		revoking("by someone else", delegationsPath(k.helper.ID)+"/"+id, k.bobKey, 404, "not_found"),
		revoking("unknown delegation", delegationsPath(k.helper.ID)+"/"+nilID, k.aliceKey, 404, "not_found"),
		revoking("not an id", delegationsPath(k.helper.ID)+"/latest", k.aliceKey, 404, "not_found"),
		revoking("by the agent", delegationsPath(k.helper.ID)+"/"+id, k.helperKey, 403, "forbidden"),
	})
	if got := k.delegation(t, id); got["status"] != "pending" {
		t.Errorf("after the refusals: %v", got)
	}
}

// Misusing a grant is refused, and (except where the refusal is the point)
// leaves the grant spendable by the agent it was made for.
func TestDelegationExchangeMisuse(t *testing.T) {
	k := newDelegationWorld(t)
	forged := "band_g_" + strings.Repeat("a", 52)
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, id, grant string)
		key    func(grant string) (string, any)
		status int
		code   string
	}{
		{"wrong grant_type", nil, func(g string) (string, any) {
			b := exchangeBody(g)
			b["grant_type"] = "client_credentials"
			return k.helperKey, b
		}, 422, "validation_error"},
		{"no subject_token", nil, func(g string) (string, any) {
			return k.helperKey, map[string]any{"grant_type": tokenExchangeGrant}
		}, 422, "validation_error"},
		{"wrong subject_token_type", nil, func(g string) (string, any) {
			b := exchangeBody(g)
			b["subject_token_type"] = "urn:ietf:params:oauth:token-type:access_token"
			return k.helperKey, b
		}, 422, "validation_error"},
		{"malformed grant", nil, func(string) (string, any) { return k.helperKey, exchangeBody("band_g_short") }, 401, "unauthorized"},
		{"unknown grant", nil, func(string) (string, any) { return k.helperKey, exchangeBody(forged) }, 401, "unauthorized"},
		{"the person's own key in place of a grant", nil, func(string) (string, any) { return k.helperKey, exchangeBody(k.aliceKey) }, 401, "unauthorized"},
		{"grant presented by another of her agents", nil, func(g string) (string, any) { return k.scoutKey, exchangeBody(g) }, 401, "unauthorized"},
		{"grant presented by someone else's agent", nil, func(g string) (string, any) { return k.roverKey, exchangeBody(g) }, 401, "unauthorized"},
		{"grant presented with the person's key", nil, func(g string) (string, any) { return k.aliceKey, exchangeBody(g) }, 403, "forbidden"},
		{"more scope than granted", nil, func(g string) (string, any) { return k.helperKey, exchangeBody(g, "chats:read", "contacts:write") }, 403, "forbidden"},
		{"a scope that does not exist", nil, func(g string) (string, any) { return k.helperKey, exchangeBody(g, "root") }, 403, "forbidden"},
		{"expired grant", func(t *testing.T, id, _ string) {
			k.ts.exec(t, `UPDATE delegations SET grant_expires_at = ? WHERE id = ?`, time.Now().Add(-time.Second).UnixMicro(), id)
		}, func(g string) (string, any) { return k.helperKey, exchangeBody(g) }, 401, "unauthorized"},
		{"revoked grant", func(t *testing.T, id, _ string) {
			expect(t, k.ts.do(t, "DELETE", delegationsPath(k.helper.ID)+"/"+id, apiKey(k.aliceKey), nil), 200, "")
		}, func(g string) (string, any) { return k.helperKey, exchangeBody(g) }, 401, "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, grant := k.grant(t, "chats:read", "chats:write")
			if tc.setup != nil {
				tc.setup(t, id, grant)
			}
			key, body := tc.key(grant)
			k.ts.refused(t, "POST", exchangePath, apiKey(key), body, tc.status, tc.code, "")
			if tc.setup == nil { // the refusal spent nothing
				k.exchange(t, grant)
			}
		})
	}
}

// A grant works once: presenting it again is taken as a leak, so the
// delegation is revoked and the token already issued stops working.
func TestDelegationGrantReuseRevokes(t *testing.T) {
	k := newDelegationWorld(t)
	id, grant := k.grant(t, "chats:read")
	tok := k.exchange(t, grant)
	expect(t, k.ts.do(t, "GET", "/api/v1/me/chats", bearer(tok), nil), 200, "")

	r := k.ts.do(t, "POST", exchangePath, apiKey(k.helperKey), exchangeBody(grant))
	expect(t, r, 401, "unauthorized")
	if !strings.Contains(string(r.body), "revoked") {
		t.Errorf("the refusal does not say the delegation was revoked: %s", r.body)
	}
	if got := k.delegation(t, id); got["status"] != "revoked" {
		t.Errorf("after the reuse: %v", got)
	}
	k.ts.refused(t, "GET", "/api/v1/me/chats", bearer(tok), nil, 401, "unauthorized", "")
}

func TestDelegatedTokenMisuse(t *testing.T) {
	k := newDelegationWorld(t)
	id, grant := k.grant(t, "chats:read", "chats:write", "contacts:read")
	tok := k.exchange(t, grant, "chats:read")
	now := time.Now()
	valid := delegatedClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: "chatd", Subject: k.alice.ID, Audience: jwt.ClaimStrings{delegatedAudience},
			ID: id, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute))},
		Act: actorClaim{Sub: k.helper.ID}, Scope: "chats:read",
	}
	with := func(f func(*delegatedClaims)) string { c := valid; f(&c); return k.sign(t, c) }
	expect(t, k.ts.do(t, "GET", "/api/v1/me/chats", bearer(k.sign(t, valid)), nil), 200, "") // the signing is right

	bobsID, _ := func() (string, string) {
		r := k.ts.do(t, "POST", delegationsPath(k.rover.ID), apiKey(k.bobKey), map[string]any{"delegation": map[string]any{"scopes": []string{"chats:read"}}})
		expect(t, r, 201, "")
		d := r.data(t)
		k.ts.do(t, "POST", exchangePath, apiKey(k.roverKey), exchangeBody(d["grant"].(string)))
		return d["id"].(string), ""
	}()

	refused := func(name, method, path, token string, body any, status int, code string) scenario {
		return refusalCase(name, bearer(token), method, path, body, status, code)
	}
	k.ts.run(t, []scenario{
		refused("a scope the token was not given", "POST", "/api/v1/me/chats", tok, map[string]any{"chat": map[string]any{}}, 403, "forbidden"),
		refused("a scope the delegation holds but the token left out", "GET", "/api/v1/me/contacts", tok, nil, 403, "forbidden"),
		refused("a part no scope covers", "GET", "/api/v1/me/memories", tok, nil, 403, "forbidden"),
		refused("the delegations themselves", "GET", delegationsPath(k.helper.ID), tok, nil, 403, "forbidden"),
		refused("a new delegation", "POST", delegationsPath(k.scout.ID), tok, map[string]any{"delegation": map[string]any{"scopes": []string{"chats:read"}}}, 403, "forbidden"),
		refused("the Agent API", "GET", "/api/v1/agent/me", tok, nil, 403, "forbidden"),
		refused("expired", "GET", "/api/v1/me/chats", with(func(c *delegatedClaims) {
			c.IssuedAt, c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Hour)), jwt.NewNumericDate(now.Add(-30*time.Minute))
		}), nil, 401, "unauthorized"),
		refused("no expiry", "GET", "/api/v1/me/chats", with(func(c *delegatedClaims) { c.ExpiresAt = nil }), nil, 401, "unauthorized"),
		refused("another audience", "GET", "/api/v1/me/chats", with(func(c *delegatedClaims) { c.Audience = jwt.ClaimStrings{"chatd:agent-api"} }), nil, 401, "unauthorized"),
		refused("another issuer", "GET", "/api/v1/me/chats", with(func(c *delegatedClaims) { c.Issuer = "elsewhere" }), nil, 401, "unauthorized"),
		refused("acting agent swapped", "GET", "/api/v1/me/chats", with(func(c *delegatedClaims) { c.Act.Sub = k.scout.ID }), nil, 401, "unauthorized"),
		refused("no acting agent", "GET", "/api/v1/me/chats", with(func(c *delegatedClaims) { c.Act.Sub = "" }), nil, 401, "unauthorized"),
		refused("someone else's delegation", "GET", "/api/v1/me/chats", with(func(c *delegatedClaims) { c.ID = bobsID }), nil, 401, "unauthorized"),
		refused("another person as subject", "GET", "/api/v1/me/chats", with(func(c *delegatedClaims) { c.Subject = k.bob.ID }), nil, 401, "unauthorized"),
		refused("unknown delegation", "GET", "/api/v1/me/chats", with(func(c *delegatedClaims) { c.ID = nilID }), nil, 401, "unauthorized"),
		refused("signed with another key", "GET", "/api/v1/me/chats", func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, valid).SignedString([]byte("a key chatd never had, long enough"))
			return s
		}(), nil, 401, "unauthorized"),
		refused("tampered scope", "GET", "/api/v1/me/contacts", func() string {
			parts := strings.Split(tok, ".")
			forged := strings.Split(with(func(c *delegatedClaims) { c.Scope = "chats:read contacts:read" }), ".")
			return parts[0] + "." + forged[1] + "." + parts[2]
		}(), nil, 401, "unauthorized"),
	})

	t.Run("on the socket", func(t *testing.T) {
		r := k.ts.upgrade(t, url.Values{"vsn": {"2.0.0"}, "token": {tok}}, nil)
		expect(t, r, 403, "forbidden")
	})
}

// A delegation ends with its agent.
func TestDelegationEndsWithTheAgent(t *testing.T) {
	k := newDelegationWorld(t)
	id, grant := k.grant(t, "chats:read")
	tok := k.exchange(t, grant)
	pending, pendingGrant := k.grant(t, "chats:read")
	expect(t, k.ts.do(t, "DELETE", "/api/v1/me/agents/"+k.helper.ID, apiKey(k.aliceKey), nil), 200, "")
	k.ts.refused(t, "GET", "/api/v1/me/chats", bearer(tok), nil, 401, "unauthorized", "")
	for _, d := range []string{id, pending} {
		var revoked *int64
		k.ts.queryRow(t, `SELECT revoked_at FROM delegations WHERE id = ?`, []any{d}, &revoked)
		if revoked == nil {
			t.Errorf("delegation %s outlived its agent", d)
		}
	}
	// Its grants are refused too: no agent is left to present them, and a
	// new agent under the same name is not the one they were made for.
	_, newKey := k.ts.agent(k.alice, "Helper")
	k.ts.refused(t, "POST", exchangePath, apiKey(newKey), exchangeBody(pendingGrant), 401, "unauthorized", "")
}

// walkBodies are valid bodies for the Human API routes without an id that
// take one (routeBodies has those with an id), so that a route that could
// mint a credential is asked in a way it would.
var walkBodies = map[string]any{
	"POST /api/v1/me/keys":            map[string]any{"key": map[string]any{"name": "laptop"}},
	"POST /api/v1/me/agents/register": map[string]any{"agent": map[string]any{"name": "Minted", "description": "outlives"}},
}

func walkBody(route string) any {
	if b, ok := walkBodies[route]; ok {
		return b
	}
	return routeBodies[route]
}

// secretInAnswer matches what a credential looks like in an answer.
var secretInAnswer = regexp.MustCompile(`band_[augs]_|thnv_[au]_|whsec_|"(access_token|api_key|grant|secret)"\s*:\s*"`)

// A delegated token never creates, reveals or rotates a credential, with any
// scopes: each route that answers with a secret refuses it (403, the same
// message, nothing written), and a walk over every Human API route finds no
// answer to it carrying a secret, so a new route that mints one is caught.
func TestDelegatedTokensNeverMintCredentials(t *testing.T) {
	t.Parallel() // its own server and database
	k := newDelegationWorld(t)
	_, grant := k.grant(t, store.DelegationScopes...)
	tok := k.exchange(t, grant)
	room := k.ts.room(t, k.helperKey, k.alice.ID)
	key := k.ts.do(t, "POST", keysPath, apiKey(k.aliceKey), map[string]any{"key": map[string]any{"name": "spare"}}).data(t)["id"].(string)
	delegation, _ := k.grant(t, "chats:read")
	// alice's own objects; the scout, not the helper acting for her, so
	// that deleting it on the walk leaves the token working.
	ids := map[string]string{":chat_id": room, "agents/:id": k.scout.ID, "keys/:id": key, ":delegation_id": delegation}
	fill := func(path string) string {
		for param, id := range ids {
			kind, name, found := strings.Cut(param, "/")
			if !found {
				path = strings.ReplaceAll(path, kind, id)
				continue
			}
			path = strings.ReplaceAll(path, kind+"/"+name, kind+"/"+id)
		}
		return strings.ReplaceAll(path, ":id", nilID)
	}

	for route := range credentialRoutes {
		method, path, _ := strings.Cut(route, " ")
		r := k.ts.refused(t, method, fill(path), bearer(tok), walkBody(route), 403, "forbidden", "")
		if msg := r.json(t)["error"].(map[string]any)["message"]; msg != store.ErrDelegatedCredential.Message {
			t.Errorf("%s: message %q", route, msg)
		}
	}

	for _, rt := range registeredRoutes(k.ts.srv) {
		if rt.aud != humansOnly {
			continue
		}
		route := rt.method + " " + rt.path
		r := k.ts.do(t, rt.method, fill(rt.path), bearer(tok), walkBody(route))
		if r.status == 401 {
			t.Fatalf("%s ended the delegated token: %s", route, r.body)
		}
		if r.status < 300 && secretInAnswer.Match(r.body) {
			t.Errorf("%s answered a delegated token with a secret: %s", route, r.body)
		}
	}
}
