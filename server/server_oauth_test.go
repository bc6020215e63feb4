package server

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// The OAuth endpoints, one table each: what they answer, and every refusal
// with its OAuth error code (or, on the Human API, its envelope code), the
// database unchanged. oauth_flow_test.go signs a real client in.

// oauthBody is the body of r as an object, for OAuth's answers (which have
// no data member).
func oauthBody(t testing.TB, r *response) map[string]any { t.Helper(); return r.json(t) }

func TestOAuthMetadata(t *testing.T) {
	ts := newTestServer(t)
	base := ts.http.URL
	resource := func(t testing.TB, r *response) {
		t.Helper()
		b := oauthBody(t, r)
		if b["resource"] != base+"/mcp" || b["authorization_servers"].([]any)[0] != base {
			t.Fatalf("protected-resource metadata %v", b)
		}
		if r.header.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatal("the metadata is not readable from every origin")
		}
	}
	ts.run(t, []scenario{
		{name: "resource metadata for /mcp", method: "GET", path: "/.well-known/oauth-protected-resource/mcp", status: 200, check: resource},
		{name: "resource metadata at the root", method: "GET", path: "/.well-known/oauth-protected-resource", status: 200, check: resource},
		{name: "server metadata", method: "GET", path: "/.well-known/oauth-authorization-server", status: 200,
			check: func(t testing.TB, r *response) {
				b := oauthBody(t, r)
				want := map[string]any{"issuer": base, "authorization_endpoint": base + "/oauth/authorize",
					"token_endpoint": base + "/oauth/token", "registration_endpoint": base + "/oauth/register",
					"revocation_endpoint": base + "/oauth/revoke", "authorization_response_iss_parameter_supported": true}
				for k, v := range want {
					if b[k] != v {
						t.Errorf("%s = %v, want %v", k, b[k], v)
					}
				}
				sameJSON(t, "code challenge methods", b["code_challenge_methods_supported"], []string{"S256"})
				sameJSON(t, "auth methods", b["token_endpoint_auth_methods_supported"], []string{"none"})
			}},
		refusalCase("no OpenID configuration", noCred, "GET", "/.well-known/openid-configuration", nil, 404, "not_found"),
		refusalCase("metadata is read-only", noCred, "POST", "/.well-known/oauth-authorization-server", nil, 405, "method_not_allowed"),
	})
}

// The operator's --public-url names the server in every document and in
// the resource tokens are for, whatever host a request came to.
func TestOAuthMetadataOfAPublicURL(t *testing.T) {
	ts := newTestServerWith(t, func(c *Config) { c.PublicURL = "https://chat.example/" })
	r := ts.do(t, "GET", "/.well-known/oauth-authorization-server", noCred, nil)
	if b := oauthBody(t, r); b["issuer"] != "https://chat.example" || b["token_endpoint"] != "https://chat.example/oauth/token" {
		t.Fatalf("metadata %v", b)
	}
	r = ts.do(t, "POST", "/mcp", noCred, `{}`)
	expect(t, r, 401, "unauthorized")
	if got := r.header.Get("WWW-Authenticate"); !strings.Contains(got, `resource_metadata="https://chat.example/.well-known/oauth-protected-resource/mcp"`) {
		t.Fatalf("WWW-Authenticate = %q", got)
	}
}

// /mcp's 401 tells an OAuth client where to start, in the envelope; a bad
// bearer token is named invalid_token.
func TestMCPChallengesClientsWithoutCredentials(t *testing.T) {
	ts := newTestServer(t)
	metadata := `resource_metadata="` + ts.http.URL + `/.well-known/oauth-protected-resource/mcp"`
	challenged := func(invalidToken bool) func(testing.TB, *response) {
		return func(t testing.TB, r *response) {
			got := r.header.Get("WWW-Authenticate")
			if !strings.HasPrefix(got, "Bearer ") || !strings.Contains(got, metadata) ||
				strings.Contains(got, `error="invalid_token"`) != invalidToken {
				t.Fatalf("WWW-Authenticate = %q", got)
			}
		}
	}
	ts.run(t, []scenario{
		{name: "no credentials", method: "POST", path: "/mcp", body: `{}`, status: 401, code: "unauthorized", check: challenged(false)},
		{name: "an unknown access token", method: "POST", path: "/mcp", cred: bearer("band_oa_" + strings.Repeat("a", 52)),
			body: `{}`, status: 401, code: "unauthorized", check: challenged(true)},
		{name: "not on the REST API", method: "GET", path: "/api/v1/me", cred: bearer("band_oa_" + strings.Repeat("a", 52)),
			status: 401, code: "unauthorized", check: func(t testing.TB, r *response) {
				if r.header.Get("WWW-Authenticate") != "" {
					t.Fatal("a REST route challenges for OAuth")
				}
			}},
	})
}

func TestOAuthRegistration(t *testing.T) {
	ts := newTestServer(t)
	register := func(name string, body any, status int, code string) scenario {
		return scenario{name: name, method: "POST", path: "/oauth/register", body: body, status: status, code: code}
	}
	meta := func(fields map[string]any) map[string]any {
		m := map[string]any{"client_name": "Claude Code", "redirect_uris": []string{"http://localhost:33418/callback"}}
		for k, v := range fields {
			m[k] = v
		}
		return m
	}
	ts.run(t, []scenario{
		{name: "a public client", method: "POST", path: "/oauth/register", status: 201,
			body: meta(map[string]any{"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
				"token_endpoint_auth_method": "client_secret_basic", "jwks_uri": "https://ignored.example/jwks", "software_id": "x"}),
			check: func(t testing.TB, r *response) {
				b := oauthBody(t, r)
				if b["client_id"] == "" || b["client_secret"] != nil || b["token_endpoint_auth_method"] != "none" ||
					b["client_name"] != "Claude Code" || b["client_id_issued_at"] == nil || r.header.Get("Cache-Control") != "no-store" {
					t.Fatalf("registration %v", b)
				}
			}},
		register("no redirect URI", meta(map[string]any{"redirect_uris": []string{}}), 400, "invalid_redirect_uri"),
		register("http off loopback", meta(map[string]any{"redirect_uris": []string{"http://app.example/cb"}}), 400, "invalid_redirect_uri"),
		register("a fragment", meta(map[string]any{"redirect_uris": []string{"https://app.example/cb#x"}}), 400, "invalid_redirect_uri"),
		register("a custom scheme", meta(map[string]any{"redirect_uris": []string{"cursor://oauth/cb"}}), 400, "invalid_redirect_uri"),
		register("a loopback port past 65535", meta(map[string]any{"redirect_uris": []string{"http://127.0.0.1:99999/callback"}}),
			400, "invalid_redirect_uri"),
		register("an https port past 65535", meta(map[string]any{"redirect_uris": []string{"https://app.example:70000/cb"}}),
			400, "invalid_redirect_uri"),
		register("eleven redirect URIs", meta(map[string]any{"redirect_uris": strings.Split(strings.Repeat("https://a.example/cb,", 11), ",")[:11]}),
			400, "invalid_redirect_uri"),
		register("the implicit grant", meta(map[string]any{"grant_types": []string{"implicit"}}), 400, "invalid_client_metadata"),
		register("a token response", meta(map[string]any{"response_types": []string{"token"}}), 400, "invalid_client_metadata"),
		register("a name too long", meta(map[string]any{"client_name": strings.Repeat("n", 101)}), 400, "invalid_client_metadata"),
		register("a client_uri that is no URL", meta(map[string]any{"client_uri": "not a url"}), 400, "invalid_client_metadata"),
		register("not JSON", "redirect_uris=https://a.example", 400, "invalid_client_metadata"),
		register("not an object", `["https://a.example"]`, 400, "invalid_client_metadata"),
		register("no body", "", 400, "invalid_client_metadata"),
		register("two objects", `{"redirect_uris": ["https://a.example/cb"]} {}`, 400, "invalid_client_metadata"),
		{name: "metadata chatd does not read, of any type", method: "POST", path: "/oauth/register", status: 201,
			body: meta(map[string]any{"jwks": map[string]any{"keys": []any{}}, "contacts": "ops@example.com", "logo_uri": 7})},
	})
	// A value of the wrong type is named by its field and the type it
	// takes, in chatd's words, every such field at once.
	for _, tc := range []struct{ name, body, want string }{
		{"redirect_uris a string", `{"redirect_uris": "x"}`, "redirect_uris must be an array of strings (URLs)"},
		{"a redirect URI a number", `{"redirect_uris": [1]}`, "redirect_uris must be an array of strings (URLs)"},
		{"two fields", `{"redirect_uris": ["https://a.example/cb"], "client_name": 5, "grant_types": "authorization_code"}`,
			"client_name must be a string; grant_types must be an array of strings"},
		{"not an object", `"x"`, "the body must be a JSON object: the client metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.try(t, register(tc.name, tc.body, 400, "invalid_client_metadata"))
			if got := oauthBody(t, r)["error_description"]; got != tc.want {
				t.Fatalf("error_description = %q, want %q", got, tc.want)
			}
		})
	}
}

// GET /oauth/authorize: a request it can answer goes to the consent
// screen; a client or redirect URI that does not check out is answered to
// the browser; anything else goes back to the client as an error.
func TestOAuthAuthorize(t *testing.T) {
	ts := newTestServer(t)
	clientID := ts.registerClient(t)
	p := newPKCE()
	with := func(changes map[string]string) url.Values {
		q := ts.authorization(clientID, p)
		for k, v := range changes {
			if v == "" {
				q.Del(k)
			} else {
				q.Set(k, v)
			}
		}
		return q
	}
	t.Run("to the consent screen", func(t *testing.T) {
		got := ts.consentLink(t, with(nil))
		sameJSON(t, "the consent screen's request", got, with(nil))
		// A client with one redirect URI may leave it out.
		if got := ts.consentLink(t, with(map[string]string{"redirect_uri": ""})); got.Get("redirect_uri") != testRedirectURI {
			t.Fatalf("redirect_uri %q", got.Get("redirect_uri"))
		}
	})
	for _, tc := range []struct{ name, param, value string }{
		{"an unknown client", "client_id", "00000000-0000-7000-8000-000000000000"},
		{"a redirect URI not the client's", "redirect_uri", "http://127.0.0.1:5000/elsewhere"},
		{"a loopback port past 65535", "redirect_uri", "http://127.0.0.1:99999/callback"},
		{"loopback port 0", "redirect_uri", "http://127.0.0.1:0/callback"},
		{"a loopback port that is no number", "redirect_uri", "http://127.0.0.1:port/callback"},
		{"no client", "client_id", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.snapshot(t)
			r := ts.authorize(t, with(map[string]string{tc.param: tc.value}))
			expect(t, r, 400, "invalid_request")
			ts.unchanged(t, before)
		})
	}
	for _, tc := range []struct{ name, param, value, code string }{
		{"no PKCE", "code_challenge", "", "invalid_request"},
		{"a challenge of the wrong shape", "code_challenge", "short", "invalid_request"},
		{"plain PKCE", "code_challenge_method", "plain", "invalid_request"},
		{"the implicit flow", "response_type", "token", "unsupported_response_type"},
		{"another resource", "resource", "https://elsewhere.example/mcp", "invalid_target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.authorize(t, with(map[string]string{tc.param: tc.value}))
			expect(t, r, 302, "")
			back, err := url.Parse(r.header.Get("Location"))
			if err != nil || !strings.HasPrefix(back.String(), testRedirectURI+"?") {
				t.Fatalf("redirected to %q", r.header.Get("Location"))
			}
			q := back.Query()
			if q.Get("error") != tc.code || q.Get("state") != "xyz" || q.Get("iss") != ts.http.URL || q.Get("error_description") == "" {
				t.Fatalf("the client is told %v, want %s with the state and issuer", q, tc.code)
			}
		})
	}
	t.Run("a state too long to send back", func(t *testing.T) {
		before := ts.snapshot(t)
		r := ts.authorize(t, with(map[string]string{"state": strings.Repeat("s", 20000), "code_challenge_method": "plain"}))
		expect(t, r, 400, "invalid_request")
		if loc := r.header.Get("Location"); loc != "" || len(r.body) > 1000 {
			t.Fatalf("the refused state came back: Location of %d bytes, body of %d", len(loc), len(r.body))
		}
		ts.unchanged(t, before)
		// The longest state taken goes back whole.
		long := strings.Repeat("s", 2000)
		r = ts.authorize(t, with(map[string]string{"state": long, "code_challenge_method": "plain"}))
		expect(t, r, 302, "")
		if back, err := url.Parse(r.header.Get("Location")); err != nil || back.Query().Get("state") != long {
			t.Fatalf("redirected to %q, want the state whole", r.header.Get("Location"))
		}
	})
	t.Run("a repeated parameter", func(t *testing.T) {
		r := ts.authorize(t, with(nil))
		expect(t, r, 302, "")
		q := with(nil)
		q.Add("client_id", clientID)
		expect(t, ts.authorize(t, q), 400, "invalid_request")
	})
}

// The consent on the Human API: described, approved for an agent or the
// person, declined; refused for what a person may not consent to.
func TestOAuthConsent(t *testing.T) {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	helper, helperKey := ts.agent(alice, "Helper")
	_, bobKey := ts.user("bob")
	clientID := ts.registerClient(t)
	p := newPKCE()
	request := ts.consentLink(t, ts.authorization(clientID, p))
	const path = "/api/v1/me/oauth/authorization"
	answer := func(changes map[string]any, approve bool) map[string]any {
		b := consentBody(request, "", approve)
		for k, v := range changes {
			b["authorization"].(map[string]any)[k] = v
		}
		return b
	}
	delegated := ts.delegatedToken(t, aliceKey, helper.ID, helperKey, "agents:read")
	ts.run(t, []scenario{
		{name: "described", method: "GET", path: path + "?" + request.Encode(), cred: apiKey(aliceKey), status: 200,
			check: func(t testing.TB, r *response) {
				d := r.data(t)
				if d["client"].(map[string]any)["name"] != "Test client" || d["redirect_uri"] != testRedirectURI || d["resource"] != ts.http.URL+"/mcp" {
					t.Fatalf("consent request %v", d)
				}
			}},
		{name: "declined", method: "POST", path: path, cred: apiKey(aliceKey), body: answer(nil, false), status: 200,
			check: func(t testing.TB, r *response) {
				back, _ := url.Parse(r.data(t)["redirect_to"].(string))
				if back.Query().Get("error") != "access_denied" || back.Query().Get("code") != "" || back.Query().Get("state") != "xyz" {
					t.Fatalf("declined to %s", back)
				}
			}},
		refusalCase("described: an unknown client", apiKey(aliceKey), "GET", path+"?client_id=00000000-0000-7000-8000-000000000000", nil, 404, "not_found"),
		refusalCase("described: no PKCE", apiKey(aliceKey), "GET", path+"?"+withoutParam(request, "code_challenge"), nil, 422, "validation_error", "/code_challenge"),
		refusalCase("an unknown client", apiKey(aliceKey), "POST", path, answer(map[string]any{"client_id": "00000000-0000-7000-8000-000000000000"}, true), 404, "not_found"),
		refusalCase("another redirect URI", apiKey(aliceKey), "POST", path, answer(map[string]any{"redirect_uri": "https://evil.example/cb"}, true),
			422, "validation_error", "/authorization/redirect_uri"),
		refusalCase("a loopback port past 65535", apiKey(aliceKey), "POST", path,
			answer(map[string]any{"redirect_uri": "http://127.0.0.1:99999/callback"}, true), 422, "validation_error", "/authorization/redirect_uri"),
		refusalCase("plain PKCE", apiKey(aliceKey), "POST", path, answer(map[string]any{"code_challenge_method": "plain"}, true),
			422, "validation_error", "/authorization/code_challenge_method"),
		refusalCase("another resource", apiKey(aliceKey), "POST", path, answer(map[string]any{"resource": "https://elsewhere.example/mcp"}, true),
			422, "validation_error", "/authorization/resource"),
		refusalCase("another person's agent", apiKey(bobKey), "POST", path, answer(map[string]any{"agent_id": helper.ID}, true), 404, "not_found"),
		{name: "every problem at once", method: "POST", path: path, cred: apiKey(aliceKey),
			body:   map[string]any{"authorization": map[string]any{"client_id": clientID, "approve": true, "resource": "https://elsewhere.example/mcp"}},
			status: 422, code: "validation_error", pointers: []string{"/authorization/response_type", "/authorization/code_challenge",
				"/authorization/code_challenge_method", "/authorization/resource"},
			check: func(t testing.TB, r *response) {
				e := r.json(t)["error"].(map[string]any)
				if msg := e["message"].(string); msg != "/authorization/code_challenge is required: PKCE's S256 challenge, 43 characters of base64url (and 3 more)" {
					t.Fatalf("message %q", msg)
				}
				for pointer, msgs := range e["details"].(map[string]any) {
					name := pointer[strings.LastIndex(pointer, "/")+1:]
					for _, m := range msgs.([]any) {
						if strings.HasPrefix(m.(string), name) {
							t.Errorf("%s: %q repeats the field", pointer, m)
						}
					}
				}
			}},
		refusalCase("no answer", apiKey(aliceKey), "POST", path, map[string]any{"authorization": map[string]any{"client_id": clientID}},
			422, "validation_error", "/authorization/approve"),
		refusalCase("an agent's key", apiKey(helperKey), "POST", path, answer(nil, true), 403, "forbidden"),
		refusalCase("a delegated token", bearer(delegated), "POST", path, answer(nil, true), 403, "forbidden"),
		refusalCase("a delegated token lists no grants", bearer(delegated), "GET", "/api/v1/me/oauth/grants", nil, 403, "forbidden"),
	})
	t.Run("approved for an agent", func(t *testing.T) {
		back := ts.consent(t, apiKey(aliceKey), request, helper.ID)
		q := back.Query()
		if !strings.HasPrefix(q.Get("code"), "band_oc_") || q.Get("state") != "xyz" || q.Get("iss") != ts.http.URL {
			t.Fatalf("approved to %s", back)
		}
	})
}

func withoutParam(q url.Values, name string) string {
	c := url.Values{}
	for k, v := range q {
		if k != name {
			c[k] = v
		}
	}
	return c.Encode()
}

// delegatedToken is a token the agent of agentKey holds for the person of
// key, by delegation.
func (ts *testServer) delegatedToken(t testing.TB, key, agentID, agentKey string, scopes ...string) string {
	t.Helper()
	d := ts.do(t, "POST", delegationsPath(agentID), apiKey(key), map[string]any{"delegation": map[string]any{"scopes": scopes}})
	expect(t, d, 201, "")
	r := ts.do(t, "POST", exchangePath, apiKey(agentKey), exchangeBody(d.data(t)["grant"].(string)))
	expect(t, r, 200, "")
	return r.data(t)["access_token"].(string)
}

// The token endpoint's refusals of a code, each leaving the code unspent
// and the database as it was; then the code's one use, and its second,
// which revokes what the first obtained.
func TestOAuthCodeExchange(t *testing.T) {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	helper, _ := ts.agent(alice, "Helper")
	clientID, otherClient := ts.registerClient(t), ts.registerClient(t)
	p := newPKCE()
	code := ts.code(t, apiKey(aliceKey), clientID, p, helper.ID)
	good := ts.exchangeForm(clientID, code, p)
	with := func(name, value string) string {
		f := url.Values{}
		for k, v := range good {
			f[k] = v
		}
		if value == "" {
			f.Del(name)
		} else {
			f.Set(name, value)
		}
		return f.Encode()
	}
	token := func(name, body string, status int, code string) scenario {
		return scenario{name: name, method: "POST", path: "/oauth/token", cred: formBody(noCred), body: body, status: status, code: code}
	}
	ts.run(t, []scenario{
		token("a verifier that does not match", with("code_verifier", newPKCE().verifier), 400, "invalid_grant"),
		token("a verifier of the wrong shape", with("code_verifier", "short"), 400, "invalid_request"),
		token("no verifier", with("code_verifier", ""), 400, "invalid_request"),
		token("another redirect URI", with("redirect_uri", "http://127.0.0.1:5000/other"), 400, "invalid_grant"),
		token("another client", with("client_id", otherClient), 400, "invalid_grant"),
		token("an unknown client", with("client_id", "00000000-0000-7000-8000-000000000000"), 401, "invalid_client"),
		token("no client", with("client_id", ""), 401, "invalid_client"),
		token("another resource", with("resource", "https://elsewhere.example/mcp"), 400, "invalid_target"),
		token("an unknown code", with("code", "band_oc_"+strings.Repeat("a", 52)), 400, "invalid_grant"),
		token("the client credentials grant", with("grant_type", "client_credentials"), 400, "unsupported_grant_type"),
		token("no grant type", with("grant_type", ""), 400, "invalid_request"),
		token("a repeated parameter", with("", "")+"&code="+url.QueryEscape(code), 400, "invalid_request"),
		{name: "JSON", method: "POST", path: "/oauth/token", body: map[string]any{"grant_type": "authorization_code"}, status: 400, code: "invalid_request"},
	})
	t.Run("an expired code", func(t *testing.T) {
		p := newPKCE()
		expired := ts.code(t, apiKey(aliceKey), clientID, p, "")
		ts.exec(t, `UPDATE oauth_codes SET expires_at = ? WHERE digest = (SELECT digest FROM oauth_codes ORDER BY expires_at DESC LIMIT 1)`,
			time.Now().Add(-time.Second).UnixMicro())
		ts.try(t, token("expired", ts.exchangeForm(clientID, expired, p).Encode(), 400, "invalid_grant"))
	})

	r := ts.tokenRequest(t, good)
	expect(t, r, 200, "")
	b := oauthBody(t, r)
	if b["token_type"] != "Bearer" || b["expires_in"] != float64(3600) || b["scope"] != "mcp" || r.header.Get("Cache-Control") != "no-store" ||
		!strings.HasPrefix(b["access_token"].(string), "band_oa_") || !strings.HasPrefix(b["refresh_token"].(string), "band_or_") {
		t.Fatalf("token response %v", b)
	}
	access := b["access_token"].(string)
	cs := ts.mcpSession(t, bearer(access))
	if me := toolOK(t, cs, "whoami", nil)["agent"].(map[string]any); me["id"] != helper.ID {
		t.Fatalf("whoami = %v", me)
	}
	again := ts.tokenRequest(t, good)
	expect(t, again, 400, "invalid_grant")
	expect(t, ts.do(t, "POST", "/mcp", bearer(access), `{}`), 401, "unauthorized")
}

// A refresh token works once: it gives the next pair, and its second use
// revokes the grant. Revocation (RFC 7009) signs a client out.
func TestOAuthRefreshAndRevoke(t *testing.T) {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	first := ts.oauthSignIn(t, apiKey(aliceKey), "")
	refresh := func(token, clientID string) *response {
		return ts.tokenRequest(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {clientID}})
	}
	ts.run(t, []scenario{
		{name: "another client's refresh token", method: "POST", path: "/oauth/token", cred: formBody(noCred), status: 400, code: "invalid_grant",
			body: url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.refresh}, "client_id": {ts.registerClient(t)}}.Encode()},
		{name: "no refresh token", method: "POST", path: "/oauth/token", cred: formBody(noCred), status: 400, code: "invalid_request",
			body: url.Values{"grant_type": {"refresh_token"}, "client_id": {first.clientID}}.Encode()},
		{name: "an access token as a refresh token", method: "POST", path: "/oauth/token", cred: formBody(noCred), status: 400, code: "invalid_grant",
			body: url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.access}, "client_id": {first.clientID}}.Encode()},
	})
	r := refresh(first.refresh, first.clientID)
	expect(t, r, 200, "")
	next := oauthBody(t, r)
	cs := ts.mcpSession(t, bearer(next["access_token"].(string)))
	if me := toolOK(t, cs, "whoami", nil)["user"].(map[string]any); me["id"] != alice.ID {
		t.Fatalf("whoami = %v, want alice herself", me)
	}
	expect(t, refresh(first.refresh, first.clientID), 400, "invalid_grant")
	expect(t, ts.do(t, "POST", "/mcp", bearer(next["access_token"].(string)), `{}`), 401, "unauthorized")

	// Revocation, by the client.
	second := ts.oauthSignIn(t, apiKey(aliceKey), "")
	revoke := func(name, form string, status int, code string) scenario {
		return scenario{name: name, method: "POST", path: "/oauth/revoke", cred: formBody(noCred), body: form, status: status, code: code}
	}
	ts.run(t, []scenario{
		revoke("no token", url.Values{"client_id": {second.clientID}}.Encode(), 400, "invalid_request"),
		revoke("an unknown client", url.Values{"client_id": {"00000000-0000-7000-8000-000000000000"}, "token": {second.refresh}}.Encode(), 401, "invalid_client"),
		{name: "an unknown token is no error", method: "POST", path: "/oauth/revoke", cred: formBody(noCred), status: 200,
			body: url.Values{"client_id": {second.clientID}, "token": {"band_or_nothing"}}.Encode()},
		{name: "another client's token is left alone", method: "POST", path: "/oauth/revoke", cred: formBody(noCred), status: 200,
			body: url.Values{"client_id": {first.clientID}, "token": {second.refresh}}.Encode()},
	})
	expect(t, ts.do(t, "GET", "/api/v1/me/oauth/grants", apiKey(aliceKey), nil), 200, "")
	r = ts.do(t, "POST", "/oauth/revoke", formBody(noCred), url.Values{"client_id": {second.clientID}, "token": {second.refresh},
		"token_type_hint": {"refresh_token"}}.Encode())
	expect(t, r, 200, "")
	expect(t, ts.do(t, "POST", "/mcp", bearer(second.access), `{}`), 401, "unauthorized")
	if n := len(ts.do(t, "GET", "/api/v1/me/oauth/grants", apiKey(aliceKey), nil).list(t)); n != 0 {
		t.Fatalf("%d grants listed after both ended", n)
	}
}

// The person's list of signed-in clients, and signing one out.
func TestOAuthGrants(t *testing.T) {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	helper, _ := ts.agent(alice, "Helper")
	_, bobKey := ts.user("bob")
	asHelper := ts.oauthSignIn(t, apiKey(aliceKey), helper.ID)
	ts.oauthSignIn(t, apiKey(aliceKey), "")
	r := ts.do(t, "GET", "/api/v1/me/oauth/grants", apiKey(aliceKey), nil)
	expect(t, r, 200, "")
	list := r.list(t)
	if len(list) != 2 || list[0].(map[string]any)["agent_id"] != nil || list[1].(map[string]any)["agent_handle"] != helper.Handle {
		t.Fatalf("grants, newest first: %v", list)
	}
	id := list[1].(map[string]any)["id"].(string)
	ts.run(t, []scenario{
		{name: "nobody else's", method: "GET", path: "/api/v1/me/oauth/grants", cred: apiKey(bobKey), status: 200,
			check: func(t testing.TB, r *response) {
				if n := len(r.list(t)); n != 0 {
					t.Fatalf("bob sees %d grants", n)
				}
			}},
		refusalCase("another person's grant", apiKey(bobKey), "DELETE", "/api/v1/me/oauth/grants/"+id, nil, 404, "not_found"),
		refusalCase("no such grant", apiKey(aliceKey), "DELETE", "/api/v1/me/oauth/grants/"+nilID, nil, 404, "not_found"),
	})
	expect(t, ts.doNoContent(t, "DELETE", "/api/v1/me/oauth/grants/"+id, apiKey(aliceKey)), 204, "")
	expect(t, ts.do(t, "DELETE", "/api/v1/me/oauth/grants/"+id, apiKey(aliceKey), nil), 404, "not_found")
	expect(t, ts.do(t, "POST", "/mcp", bearer(asHelper.access), `{}`), 401, "unauthorized")
	expect(t, ts.tokenRequest(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {asHelper.refresh},
		"client_id": {asHelper.clientID}}), 400, "invalid_grant")
}

// seedGrants signs clientID in n times for u through the store, as n
// earlier sign-ins would have.
func (ts *testServer) seedGrants(t testing.TB, u *store.User, clientID string, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		p := newPKCE()
		code, err := ts.db.AuthorizeOAuthClient(ctx, u, store.OAuthAuthorization{ClientID: clientID, RedirectURI: testRedirectURI,
			CodeChallenge: p.challenge, Scope: "mcp", Resource: ts.http.URL + "/mcp"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.db.ExchangeOAuthCode(ctx, store.OAuthCodeExchange{ClientID: clientID, Code: code,
			RedirectURI: testRedirectURI, Challenge: p.challenge}); err != nil {
			t.Fatal(err)
		}
	}
}

// The limit of 100 live grants a person holds at every step: a consent
// counts the codes waiting with the grants, so a person with 99 apps signed
// in gets one code, not twenty, and redeeming it makes 100; every further
// consent is 403 limit_reached and changes nothing, until the person signs
// an app out. Apart from that, at most 20 codes wait at once.
func TestOAuthGrantLimit(t *testing.T) {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	_, bobKey := ts.user("bob")
	clientID := ts.registerClient(t)
	ts.seedGrants(t, alice, clientID, store.MaxOAuthGrantsPerUser-1)
	const path = "/api/v1/me/oauth/authorization"
	grants := func(t testing.TB) []any {
		t.Helper()
		list := ts.do(t, "GET", "/api/v1/me/oauth/grants", apiKey(aliceKey), nil).list(t)
		if len(list) > store.MaxOAuthGrantsPerUser {
			t.Fatalf("%d live grants, more than %d", len(list), store.MaxOAuthGrantsPerUser)
		}
		return list
	}
	limited := func(t testing.TB, r *response) {
		t.Helper()
		if d := r.json(t)["error"].(map[string]any)["details"].(map[string]any); d["limit"] != float64(store.MaxOAuthGrantsPerUser) {
			t.Fatalf("limit_reached details %v", d)
		}
	}

	p := newPKCE()
	request := ts.consentLink(t, ts.authorization(clientID, p))
	back := ts.consent(t, apiKey(aliceKey), request, "")
	for i := range 19 {
		ts.try(t, scenario{name: fmt.Sprintf("consent %d past the limit", i+2), method: "POST", path: path, cred: apiKey(aliceKey),
			body: consentBody(request, "", true), status: 403, code: "limit_reached", check: limited})
		grants(t)
	}
	expect(t, ts.tokenRequest(t, ts.exchangeForm(clientID, back.Query().Get("code"), p)), 200, "")
	list := grants(t)
	if len(list) != store.MaxOAuthGrantsPerUser {
		t.Fatalf("%d live grants after the one code, want %d", len(list), store.MaxOAuthGrantsPerUser)
	}
	ts.try(t, scenario{name: "a consent at 100 grants", method: "POST", path: path, cred: apiKey(aliceKey),
		body: consentBody(request, "", true), status: 403, code: "limit_reached", check: limited})

	// Signing one out makes room for one.
	expect(t, ts.doNoContent(t, "DELETE", "/api/v1/me/oauth/grants/"+list[0].(map[string]any)["id"].(string), apiKey(aliceKey)), 204, "")
	ts.consent(t, apiKey(aliceKey), request, "")
	ts.try(t, scenario{name: "a consent past the limit again", method: "POST", path: path, cred: apiKey(aliceKey),
		body: consentBody(request, "", true), status: 403, code: "limit_reached", check: limited})

	// Bob has no grants: 20 codes may wait, not 21.
	for range 20 {
		ts.consent(t, apiKey(bobKey), request, "")
	}
	ts.try(t, scenario{name: "a 21st code waiting", method: "POST", path: path, cred: apiKey(bobKey),
		body: consentBody(request, "", true), status: 403, code: "limit_reached", check: func(t testing.TB, r *response) {
			if d := r.json(t)["error"].(map[string]any)["details"].(map[string]any); d["limit"] != float64(20) {
				t.Fatalf("limit_reached details %v", d)
			}
		}})
}

// A client that authenticated with HTTP Basic and is refused as
// invalid_client is challenged for Basic (RFC 6749 §5.2), on the token and
// the revocation endpoints alike.
func TestOAuthBasicAuthIsChallenged(t *testing.T) {
	ts := newTestServer(t)
	clientID := ts.registerClient(t)
	challenged := func(want bool) func(testing.TB, *response) {
		return func(t testing.TB, r *response) {
			t.Helper()
			if got := r.header.Get("WWW-Authenticate"); (got == `Basic realm="chatd"`) != want {
				t.Fatalf("WWW-Authenticate = %q, want a Basic challenge: %v", got, want)
			}
		}
	}
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"x"}}.Encode()
	revoke := url.Values{"token": {"x"}}.Encode()
	ts.run(t, []scenario{
		{name: "token: a client secret", method: "POST", path: "/oauth/token", cred: basicAuth(clientID, "pw"), body: refresh,
			status: 401, code: "invalid_client", check: challenged(true)},
		{name: "token: an unknown client", method: "POST", path: "/oauth/token", cred: basicAuth(nilID, ""), body: refresh,
			status: 401, code: "invalid_client", check: challenged(true)},
		{name: "revoke: a client secret", method: "POST", path: "/oauth/revoke", cred: basicAuth(clientID, "pw"), body: revoke,
			status: 401, code: "invalid_client", check: challenged(true)},
		{name: "revoke: an unknown client", method: "POST", path: "/oauth/revoke", cred: basicAuth(nilID, ""), body: revoke,
			status: 401, code: "invalid_client", check: challenged(true)},
		{name: "token: the client known, the grant not", method: "POST", path: "/oauth/token", cred: basicAuth(clientID, ""), body: refresh,
			status: 400, code: "invalid_grant", check: challenged(false)},
	})
}
