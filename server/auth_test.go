package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// authedRoutes is every route that takes credentials, with the audience it
// serves. Each route's own tests cover its successes; this table covers who
// gets in.
var authedRoutes = append([]authedRoute{
	{"GET", "/api/v1/agent/me", agentsOnly},
	{"GET", "/api/v1/agent/peers", agentsOnly},
	{"GET", "/api/v1/agent/chats", agentsOnly},
	{"POST", "/api/v1/agent/chats", agentsOnly},
	{"GET", "/api/v1/agent/chats/" + nilID, agentsOnly},
	{"PATCH", "/api/v1/agent/chats/" + nilID, agentsOnly},
	{"GET", "/api/v1/agent/chats/" + nilID + "/participants", agentsOnly},
	{"POST", "/api/v1/agent/chats/" + nilID + "/participants", agentsOnly},
	{"DELETE", "/api/v1/agent/chats/" + nilID + "/participants/" + nilID, agentsOnly},
	{"GET", "/api/v1/agent/chats/" + nilID + "/messages", agentsOnly},
	{"POST", "/api/v1/agent/chats/" + nilID + "/messages", agentsOnly},
	{"GET", "/api/v1/agent/chats/" + nilID + "/messages/next", agentsOnly},
	{"POST", "/api/v1/agent/chats/" + nilID + "/messages/" + nilID + "/processing", agentsOnly},
	{"POST", "/api/v1/agent/chats/" + nilID + "/messages/" + nilID + "/processed", agentsOnly},
	{"POST", "/api/v1/agent/chats/" + nilID + "/messages/" + nilID + "/failed", agentsOnly},
	{"POST", "/api/v1/agent/chats/" + nilID + "/events", agentsOnly},
	{"GET", "/api/v1/agent/chats/" + nilID + "/context", agentsOnly},
	{"POST", "/api/v1/agent/chats/" + nilID + "/activity", agentsOnly},
	{"GET", "/api/v1/agent/chats/" + nilID + "/board", agentsOnly},
	{"PUT", "/api/v1/agent/chats/" + nilID + "/board", agentsOnly},
	{"GET", "/api/v1/me", humansOnly},
	{"GET", "/api/v1/me/profile", humansOnly},
	{"PUT", "/api/v1/me/profile", humansOnly},
	{"GET", "/api/v1/me/agents", humansOnly},
	{"POST", "/api/v1/me/agents/register", humansOnly},
	{"DELETE", "/api/v1/me/agents/" + nilID, humansOnly},
	{"POST", "/api/v1/me/agents/" + nilID + "/rotate-key", humansOnly},
	{"GET", "/api/v1/me/peers", humansOnly},
	{"GET", "/api/v1/me/chats/" + nilID + "/presence", humansOnly},
	{"GET", "/api/v1/me/chats/" + nilID + "/tasks", humansOnly},
	{"GET", "/api/v1/me/chats/" + nilID + "/done", humansOnly},
	{"POST", "/api/v1/me/password", humansOnly},
	{"GET", "/api/v1/me/presence", humansOnly},
	{"POST", "/api/v1/me/invitations", humansOnly},
	{"GET", "/api/v1/me/invitations", humansOnly},
	{"DELETE", "/api/v1/me/invitations/" + nilID, humansOnly},
	{"GET", "/api/v1/me/people", humansOnly},
	{"DELETE", "/api/v1/me/people/" + nilID, humansOnly},
	{"GET", "/api/v1/me/sessions", humansOnly},
	{"DELETE", "/api/v1/me/sessions/" + nilID, humansOnly},
	{"PUT", "/api/v1/me/chats/" + nilID + "/messages/" + nilID + "/done", humansOnly},
	{"DELETE", "/api/v1/me/chats/" + nilID + "/messages/" + nilID + "/done", humansOnly},
	{"GET", "/api/v1/me/chats", humansOnly},
	{"POST", "/api/v1/me/chats", humansOnly},
	{"GET", "/api/v1/me/chats/" + nilID, humansOnly},
	{"PATCH", "/api/v1/me/chats/" + nilID, humansOnly},
	{"DELETE", "/api/v1/me/chats/" + nilID, humansOnly},
	{"POST", "/api/v1/me/chats/" + nilID + "/read", humansOnly},
	{"GET", "/api/v1/me/chats/" + nilID + "/participants", humansOnly},
	{"POST", "/api/v1/me/chats/" + nilID + "/participants", humansOnly},
	{"PATCH", "/api/v1/me/chats/" + nilID + "/participants/" + nilID, humansOnly},
	{"DELETE", "/api/v1/me/chats/" + nilID + "/participants/" + nilID, humansOnly},
	{"GET", "/api/v1/me/chats/" + nilID + "/messages", humansOnly},
	{"POST", "/api/v1/me/chats/" + nilID + "/messages", humansOnly},
	{"GET", "/api/v1/me/chats/" + nilID + "/board", humansOnly},
	{"GET", "/api/v1/me/search", humansOnly},
	{"GET", "/api/v1/agent/search", agentsOnly},
	{"PUT", "/api/v1/me/chats/" + nilID + "/board", humansOnly},
	{"POST", "/api/v1/agent/chats/" + nilID + "/files", agentsOnly},
	{"GET", "/api/v1/agent/chats/" + nilID + "/files/" + nilID, agentsOnly},
	{"POST", "/api/v1/me/chats/" + nilID + "/files", humansOnly},
	{"GET", "/api/v1/me/chats/" + nilID + "/files/" + nilID, humansOnly},
	{"POST", "/api/v1/me/chats/bulk-delete", humansOnly},
	{"POST", "/api/v1/me/agents/bulk-delete", humansOnly},
	{"GET", "/api/v1/me/bulk-deletions/" + nilID, humansOnly},
	{"GET", "/api/v1/me/organization/retention", humansOnly},
	{"PUT", "/api/v1/me/organization/retention", humansOnly},
	{"GET", "/api/v1/me/organization/stats", humansOnly},
	{"GET", "/api/v1/me/chats/" + nilID + "/retention", humansOnly},
	{"PUT", "/api/v1/me/chats/" + nilID + "/retention", humansOnly},

	{"GET", "/api/v1/agent/contacts", agentsOnly},
	{"POST", "/api/v1/agent/contacts/add", agentsOnly},
	{"POST", "/api/v1/agent/contacts/remove", agentsOnly},
	{"GET", "/api/v1/agent/contacts/requests", agentsOnly},
	{"POST", "/api/v1/agent/contacts/requests/respond", agentsOnly},
	{"GET", "/api/v1/me/contacts", humansOnly},
	{"POST", "/api/v1/me/contacts/remove", humansOnly},
	{"POST", "/api/v1/me/contacts/resolve", humansOnly},
	{"GET", "/api/v1/me/contacts/requests", humansOnly},
	{"POST", "/api/v1/me/contacts/requests", humansOnly},
	{"GET", "/api/v1/me/contacts/requests/sent", humansOnly},
	{"DELETE", "/api/v1/me/contacts/requests/" + nilID, humansOnly},
	{"POST", "/api/v1/me/contacts/requests/" + nilID + "/approve", humansOnly},
	{"POST", "/api/v1/me/contacts/requests/" + nilID + "/reject", humansOnly},

	{"GET", "/api/v1/me/agents/" + nilID + "/delegations", humansOnly},
	{"POST", "/api/v1/me/agents/" + nilID + "/delegations", humansOnly},
	{"DELETE", "/api/v1/me/agents/" + nilID + "/delegations/" + nilID, humansOnly},
	{"POST", "/api/v1/agent/delegation/token", agentsOnly},

	{"POST", "/api/v1/auth/sign-out", humansOnly},
	{"GET", "/api/v1/me/keys", humansOnly},
	{"POST", "/api/v1/me/keys", humansOnly},
	{"DELETE", "/api/v1/me/keys/" + nilID, humansOnly},

	{"GET", "/api/v1/agent/memories", agentsOnly},
	{"POST", "/api/v1/agent/memories", agentsOnly},
	{"GET", "/api/v1/agent/memories/" + nilID, agentsOnly},
	{"POST", "/api/v1/agent/memories/" + nilID + "/archive", agentsOnly},
	{"POST", "/api/v1/agent/memories/" + nilID + "/supersede", agentsOnly},
	{"GET", "/api/v1/me/memories", humansOnly},
	{"GET", "/api/v1/me/memories/" + nilID, humansOnly},
	{"DELETE", "/api/v1/me/memories/" + nilID, humansOnly},
	{"POST", "/api/v1/me/memories/" + nilID + "/archive", humansOnly},
	{"POST", "/api/v1/me/memories/" + nilID + "/restore", humansOnly},
	{"POST", "/api/v1/me/memories/" + nilID + "/supersede", humansOnly},

	{"GET", "/api/v1/agent/chats/" + nilID + "/tasks", agentsOnly},
	{"POST", "/api/v1/agent/chats/" + nilID + "/tasks", agentsOnly},
	{"GET", "/api/v1/agent/chats/" + nilID + "/tasks/" + nilID, agentsOnly},
	{"POST", "/api/v1/agent/chats/" + nilID + "/tasks/" + nilID, agentsOnly},
	{"GET", "/api/v1/agent/chats/" + nilID + "/tasks/" + nilID + "/history", agentsOnly},
	{"GET", "/api/v1/agent/inbox", agentsOnly},
	{"GET", "/api/v1/agent/inbox/next", agentsOnly},
	{"GET", "/api/v1/me/oauth/authorization", humansOnly},
	{"POST", "/api/v1/me/oauth/authorization", humansOnly},
	{"GET", "/api/v1/me/oauth/grants", humansOnly},
	{"DELETE", "/api/v1/me/oauth/grants/" + nilID, humansOnly},
	{"POST", "/mcp", anyCaller},
	{"GET", "/mcp", anyCaller},
	{"DELETE", "/mcp", anyCaller},
}, append(webhookAuthedRoutes(), messageChangeAuthedRoutes()...)...)

type authedRoute struct {
	method, path string
	aud          audience
}

// webhookAuthedRoutes are the webhook routes, the same under the Agent API
// and, for an agent's owner, under the Human API.
func webhookAuthedRoutes() []authedRoute {
	var routes []authedRoute
	for _, base := range []authedRoute{{"", "/api/v1/agent/webhooks", agentsOnly}, {"", "/api/v1/me/agents/" + nilID + "/webhooks", humansOnly}} {
		one := base.path + "/" + nilID
		for _, r := range [][2]string{{"GET", base.path}, {"POST", base.path}, {"GET", one}, {"DELETE", one}, {"POST", one + "/resume"}, {"GET", one + "/deliveries"}} {
			routes = append(routes, authedRoute{r[0], r[1], base.aud})
		}
	}
	return routes
}

func messageChangeAuthedRoutes() []authedRoute {
	var routes []authedRoute
	for _, base := range []authedRoute{{"", "/api/v1/agent/chats", agentsOnly}, {"", "/api/v1/me/chats", humansOnly}} {
		one := base.path + "/" + nilID + "/messages/" + nilID
		for _, r := range [][2]string{{"PATCH", one}, {"DELETE", one}, {"GET", one + "/edits"}, {"GET", one + "/replies"},
			{"POST", one + "/reactions"}, {"DELETE", one + "/reactions/%F0%9F%91%8D"}} {
			routes = append(routes, authedRoute{r[0], r[1], base.aud})
		}
	}
	return routes
}

// nilID is a well-formed id that names nothing.
const nilID = "00000000-0000-7000-8000-000000000000"

// Every route the router serves that takes credentials is in authedRoutes.
func TestAuthTableCoversEveryRoute(t *testing.T) {
	ts := newTestServer(t)
	listed := map[string]bool{}
	for _, rt := range authedRoutes {
		listed[rt.method+" "+rt.path] = true
	}
	for _, rt := range registeredRoutes(ts.srv) {
		if rt.aud == public {
			continue
		}
		path := strings.NewReplacer(":chat_id", nilID, ":delegation_id", nilID, ":webhook_id", nilID, ":id", nilID,
			":emoji", "%F0%9F%91%8D").Replace(rt.path)
		if !listed[rt.method+" "+path] {
			t.Errorf("%s %s is not in authedRoutes", rt.method, rt.path)
		}
	}
}

func TestEveryRouteEnforcesItsAudience(t *testing.T) {
	t.Parallel() // its own server and database
	ts := newTestServer(t)
	alice, humanKey := ts.user("alice")
	_, agentKey := ts.agent(alice, "Helper")
	tok := ts.token(alice, time.Hour)

	type outcome struct {
		status int
		code   string
	}
	allowed := outcome{}
	for _, rt := range authedRoutes {
		cases := []struct {
			name string
			cred cred
			want outcome
		}{
			{"no credentials", noCred, outcome{401, "unauthorized"}},
			{"unknown key", apiKey("band_a_" + strings.Repeat("z", 52)), outcome{401, "unauthorized"}},
			{"garbage key", apiKey("hello"), outcome{401, "unauthorized"}},
			{"bad bearer token", bearer("not.a.jwt"), outcome{401, "unauthorized"}},
			{"basic auth", func(h http.Header) { h.Set("Authorization", "Basic YTpi") }, outcome{401, "unauthorized"}},
			{"key and token together", both(apiKey(humanKey), bearer(tok)), outcome{400, "conflicting_credentials"}},
			{"agent key", apiKey(agentKey), map[audience]outcome{agentsOnly: allowed, humansOnly: {403, "forbidden"}}[rt.aud]},
			{"human key", apiKey(humanKey), map[audience]outcome{agentsOnly: {403, "forbidden"}, humansOnly: allowed}[rt.aud]},
			{"bearer token", bearer(tok), map[audience]outcome{agentsOnly: {403, "forbidden"}, humansOnly: allowed}[rt.aud]},
		}
		for _, tc := range cases {
			t.Run(rt.method+" "+rt.path+"/"+tc.name, func(t *testing.T) {
				before := ts.snapshot(t)
				r := ts.do(t, rt.method, rt.path, tc.cred, nil)
				if tc.want == allowed {
					if r.status == 401 || r.status == 403 || r.errorCode(t) == "conflicting_credentials" {
						t.Fatalf("refused: %d %s", r.status, r.body)
					}
					return
				}
				expect(t, r, tc.want.status, tc.want.code)
				ts.unchanged(t, before)
			})
		}
	}
}

func TestBearerTokens(t *testing.T) {
	ts := newTestServer(t)
	alice, _ := ts.user("alice")
	secret, _ := ts.db.ServerSecret(t.Context())
	key := deriveKey(secret, "chatd/jwt/v1")
	sign := func(method jwt.SigningMethod, k any, claims jwt.Claims) string {
		s, err := jwt.NewWithClaims(method, claims).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := time.Now()
	valid := jwt.RegisteredClaims{Issuer: "chatd", Subject: alice.ID, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}
	with := func(f func(*jwt.RegisteredClaims)) jwt.RegisteredClaims { c := valid; f(&c); return c }

	for _, tc := range []struct {
		name  string
		token string
		ok    bool
	}{
		{"issued by chatd token", ts.token(alice, time.Minute), true},
		{"hand-made valid", sign(jwt.SigningMethodHS256, key, valid), true},
		{"lowercase scheme", "", true},
		{"expired", sign(jwt.SigningMethodHS256, key, with(func(c *jwt.RegisteredClaims) {
			c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Hour))
		})), false},
		// The parser's leeway is for clocks that disagree on the issue
		// time; a token's end is its end.
		{"expired a second ago", sign(jwt.SigningMethodHS256, key, with(func(c *jwt.RegisteredClaims) {
			c.IssuedAt = jwt.NewNumericDate(now.Add(-time.Minute))
			c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Second))
		})), false},
		{"issued a few seconds ahead of this clock", sign(jwt.SigningMethodHS256, key, with(func(c *jwt.RegisteredClaims) {
			c.IssuedAt = jwt.NewNumericDate(now.Add(5 * time.Second))
		})), true},
		{"no expiry", sign(jwt.SigningMethodHS256, key, with(func(c *jwt.RegisteredClaims) { c.ExpiresAt = nil })), false},
		{"issued in the future", sign(jwt.SigningMethodHS256, key, with(func(c *jwt.RegisteredClaims) {
			c.IssuedAt = jwt.NewNumericDate(now.Add(time.Hour))
		})), false},
		{"other issuer", sign(jwt.SigningMethodHS256, key, with(func(c *jwt.RegisteredClaims) { c.Issuer = "evil" })), false},
		{"unknown user", sign(jwt.SigningMethodHS256, key, with(func(c *jwt.RegisteredClaims) {
			c.Subject = "0190a000-0000-7000-8000-000000000000"
		})), false},
		{"subject not a uuid", sign(jwt.SigningMethodHS256, key, with(func(c *jwt.RegisteredClaims) { c.Subject = "alice" })), false},
		{"wrong key", sign(jwt.SigningMethodHS256, []byte("some other secret of enough length"), valid), false},
		{"raw server secret as key", sign(jwt.SigningMethodHS256, secret, valid), false},
		{"HS512", sign(jwt.SigningMethodHS512, key, valid), false},
		{"alg none", sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := bearer(tc.token)
			if tc.name == "lowercase scheme" {
				c = func(h http.Header) { h.Set("Authorization", "bearer "+ts.token(alice, time.Minute)) }
			}
			r := ts.do(t, "GET", "/api/v1/me", c, nil)
			if tc.ok {
				expect(t, r, 200, "")
				if r.data(t)["id"] != alice.ID {
					t.Fatalf("authenticated as %v", r.data(t)["id"])
				}
				return
			}
			expect(t, r, 401, "unauthorized")
		})
	}
}

func TestAgentKeyStopsWorkingWhenTheAgentIsDeleted(t *testing.T) {
	ts := newTestServer(t)
	alice, humanKey := ts.user("alice")
	agent, agentKey := ts.agent(alice, "Helper")
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(agentKey), nil), 200, "")
	expect(t, ts.do(t, "DELETE", "/api/v1/me/agents/"+agent.ID, apiKey(humanKey), nil), 200, "")
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(agentKey), nil), 401, "unauthorized")
}

func registeredRoutes(s *Server) []registeredRoute { return s.registered }
