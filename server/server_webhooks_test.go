package server

import (
	"regexp"
	"strings"
	"testing"
)

// Webhooks through the Agent API (server_webhooks.go): registering, the
// secret shown once, reading, removing and resuming, who may touch which
// endpoint, and every refusal, which changes nothing. What is sent, and
// when, is webhooks_delivery_test.go's.

const agentWebhooksPath = "/api/v1/agent/webhooks"

// webhookRequest is a create body for url, with a description unless it is "".
func webhookRequest(url, description string) map[string]any {
	w := map[string]any{"url": url}
	if description != "" {
		w["description"] = description
	}
	return map[string]any{"webhook": w}
}

var webhookSecretForm = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`)

// createWebhook registers url for the agent whose key is given and returns
// the answer's data.
func (ts *testServer) createWebhook(t testing.TB, agentKey, url string) map[string]any {
	t.Helper()
	r := ts.do(t, "POST", agentWebhooksPath, apiKey(agentKey), webhookRequest(url, ""))
	expect(t, r, 201, "")
	return r.data(t)
}

func TestWebhookRegistration(t *testing.T) {
	ts := newTestServer(t)
	k := newTeam(t, ts)
	created := registerSampleWebhooks(t, ts, k)

	id := created["id"].(string)
	t.Run("the secret is never answered again", func(t *testing.T) {
		for _, r := range []*response{
			ts.do(t, "GET", agentWebhooksPath, apiKey(k.helperKey), nil),
			ts.do(t, "GET", agentWebhooksPath+"/"+id, apiKey(k.helperKey), nil),
			ts.do(t, "POST", agentWebhooksPath+"/"+id+"/resume", apiKey(k.helperKey), nil),
		} {
			expect(t, r, 200, "")
			if strings.Contains(string(r.body), "secret") || strings.Contains(string(r.body), created["secret"].(string)) {
				t.Fatalf("the secret came back: %s", r.body)
			}
		}
	})
	t.Run("each agent lists its own, oldest first", func(t *testing.T) {
		if got := listedValues(t, ts.do(t, "GET", agentWebhooksPath, apiKey(k.helperKey), nil), "url"); got !=
			"http://127.0.0.1:8123/chatd,https://10.1.2.3:8443/hooks?agent=helper" {
			t.Fatalf("helper lists %s", got)
		}
		if got := listedValues(t, ts.do(t, "GET", agentWebhooksPath, apiKey(k.scoutKey), nil), "url"); got != "http://[::1]:9000/" {
			t.Fatalf("scout lists %s", got)
		}
		if got := ts.do(t, "GET", agentWebhooksPath, apiKey(k.lonerKey), nil).list(t); len(got) != 0 {
			t.Fatalf("loner lists %v", got)
		}
	})
	t.Run("the secret is stored as answered, to sign with", func(t *testing.T) {
		if n := ts.count(t, `SELECT count(*) FROM webhook_endpoints WHERE id = ? AND secret = ?`, id, created["secret"]); n != 1 {
			t.Fatal("the stored secret is not the one answered")
		}
	})
	t.Run("resuming an active webhook changes nothing", func(t *testing.T) {
		before := ts.snapshot(t)
		r := ts.do(t, "POST", agentWebhooksPath+"/"+id+"/resume", apiKey(k.helperKey), map[string]any{})
		expect(t, r, 200, "")
		if r.data(t)["status"] != "active" {
			t.Fatalf("%s", r.body)
		}
		ts.unchanged(t, before)
	})
	t.Run("removing", func(t *testing.T) {
		expect(t, ts.doNoContent(t, "DELETE", agentWebhooksPath+"/"+id, apiKey(k.helperKey)), 204, "")
		ts.refused(t, "GET", agentWebhooksPath+"/"+id, apiKey(k.helperKey), nil, 404, "not_found", "")
		ts.refused(t, "DELETE", agentWebhooksPath+"/"+id, apiKey(k.helperKey), nil, 404, "not_found", "")
		if got := listedValues(t, ts.do(t, "GET", agentWebhooksPath, apiKey(k.helperKey), nil), "url"); got != "https://10.1.2.3:8443/hooks?agent=helper" {
			t.Fatalf("helper lists %s", got)
		}
	})
}

func TestWebhookRegistrationRefusals(t *testing.T) {
	ts := newTestServer(t)
	k := newTeam(t, ts)
	helper := apiKey(k.helperKey)
	ts.createWebhook(t, k.helperKey, "http://127.0.0.1:8123/taken")
	ts.createWebhook(t, k.helperKey, "http://localhost:8124/taken")
	refuse := func(name string, body any, pointer string) scenario {
		return refusalCase(name, helper, "POST", agentWebhooksPath, body, 422, "validation_error", pointer)
	}
	address := func(url string) scenario {
		return refuse("the address of "+url, webhookRequest(url, ""), "/webhook/url")
	}

	ts.run(t, []scenario{
		refuse("no body", nil, "/webhook"),
		refuse("no url", map[string]any{"webhook": map[string]any{}}, "/webhook/url"),
		refuse("url null", map[string]any{"webhook": map[string]any{"url": nil}}, "/webhook/url"),
		refuse("url not a string", map[string]any{"webhook": map[string]any{"url": 42}}, "/webhook/url"),
		refuse("a blank url", webhookRequest("", ""), "/webhook/url"),
		refuse("not http", webhookRequest("ftp://127.0.0.1/", ""), "/webhook/url"),
		refuse("relative", webhookRequest("/hooks", ""), "/webhook/url"),
		refuse("with credentials", webhookRequest("http://me:pw@127.0.0.1/", ""), "/webhook/url"),
		refuse("with a fragment", webhookRequest("http://127.0.0.1/#x", ""), "/webhook/url"),
		refuse("a bad port", webhookRequest("http://127.0.0.1:0/", ""), "/webhook/url"),
		// IPv4 shorthands some resolvers take: 127.0.0.1 and 169.254.169.254.
		refuse("a decimal address", webhookRequest("http://2130706433/", ""), "/webhook/url"),
		refuse("a hexadecimal address", webhookRequest("http://0xA9FEA9FE/", ""), "/webhook/url"),
		refuse("an octal address", webhookRequest("http://0251.0376.0251.0376/", ""), "/webhook/url"),
		refuse("a short address", webhookRequest("http://127.1/", ""), "/webhook/url"),
		refuse("a description with a line break", webhookRequest("http://127.0.0.1/", "two\nlines"), "/webhook/description"),
		refuse("a description too long", webhookRequest("http://127.0.0.1/", strings.Repeat("x", 501)), "/webhook/description"),
		refuse("a description not a string", map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1/", "description": 1}},
			"/webhook/description"),

		// Link-local and cloud metadata addresses, by address or by name.
		address("http://169.254.169.254/latest/meta-data/"),
		address("http://169.254.10.1:8080/"),
		address("http://[::ffff:169.254.169.254]/"),
		address("http://[fd00:ec2::254]/"),
		address("http://[fe80::1]/"),
		address("http://100.100.100.200/"),
		address("http://metadata.google.internal/computeMetadata/v1/"),
		address("http://Metadata.Google.Internal./"),
		address("http://0.0.0.0:8080/"),
		address("http://224.0.0.1/"),

		refusalCase("a field it does not take", helper, "POST", agentWebhooksPath,
			map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1/", "secret": "whsec_mine"}}, 400, "unknown_field", "/webhook/secret"),
		refusalCase("the same URL again", helper, "POST", agentWebhooksPath, webhookRequest("http://127.0.0.1:8123/taken", ""),
			409, "conflict", "/webhook/url"),
		refusalCase("the same URL with its scheme and host in capitals", helper, "POST", agentWebhooksPath,
			webhookRequest("HTTP://LOCALHOST:8124/taken", ""), 409, "conflict", "/webhook/url"),
		refusalCase("a person's key", apiKey(k.aliceKey), "POST", agentWebhooksPath, webhookRequest("http://127.0.0.1/", ""), 403, "forbidden"),
		refusalCase("no key", nil, "POST", agentWebhooksPath, webhookRequest("http://127.0.0.1/", ""), 401, "unauthorized"),
	})

	t.Run("the message names the address and what it is", func(t *testing.T) {
		r := ts.do(t, "POST", agentWebhooksPath, helper, webhookRequest("http://169.254.169.254/", ""))
		want := "leads to 169.254.169.254, a cloud metadata address, which webhooks may not reach"
		if got := errorDetails(t, r)["/webhook/url"].([]any)[0]; got != want {
			t.Fatalf("%q, want %q", got, want)
		}
	})
	t.Run("more than ten", func(t *testing.T) {
		for i := 2; i < 10; i++ { // two are there already
			ts.createWebhook(t, k.helperKey, "http://127.0.0.1:8123/"+string(rune('a'+i)))
		}
		ts.refused(t, "POST", agentWebhooksPath, helper, webhookRequest("http://127.0.0.1:8123/over", ""), 403, "limit_reached", "")
	})
}

// An agent reaches its own webhooks only: another agent's, even one of the
// same owner, and ids that name nothing are not found.
func TestWebhooksAreTheirAgentsOwn(t *testing.T) {
	ts := newTestServer(t)
	k := newTeam(t, ts)
	id := ts.createWebhook(t, k.helperKey, "http://127.0.0.1:8123/helper")["id"].(string)
	other := apiKey(k.scoutKey)
	var scenarios []scenario
	for _, target := range []struct{ name, id string }{{"another agent's", id}, {"an unknown", nilID}, {"a malformed", "nope"}} {
		base := agentWebhooksPath + "/" + target.id
		scenarios = append(scenarios,
			refusalCase("read "+target.name, other, "GET", base, nil, 404, "not_found"),
			refusalCase("remove "+target.name, other, "DELETE", base, nil, 404, "not_found"),
			refusalCase("resume "+target.name, other, "POST", base+"/resume", nil, 404, "not_found"),
			refusalCase("read the log of "+target.name, other, "GET", base+"/deliveries", nil, 404, "not_found"),
		)
	}
	ts.run(t, scenarios)
	t.Run("the owner's own id, in upper case, is the same webhook", func(t *testing.T) {
		expect(t, ts.do(t, "GET", agentWebhooksPath+"/"+strings.ToUpper(id), apiKey(k.helperKey), nil), 200, "")
	})
	t.Run("the log's refusals", func(t *testing.T) {
		base := agentWebhooksPath + "/" + id + "/deliveries"
		ts.run(t, []scenario{
			refusalCase("limit 0", apiKey(k.helperKey), "GET", base+"?limit=0", nil, 422, "validation_error", "/limit"),
			refusalCase("a forged cursor", apiKey(k.helperKey), "GET", base+"?cursor=abc.def", nil, 422, "invalid_cursor", "/cursor"),
		})
	})
}

// The person who owns an agent manages its webhooks under
// /api/v1/me/agents/{id}/webhooks, the same webhooks the agent sees;
// anyone else's agent, and a webhook of another agent, are not found.
func TestOwnersManageTheirAgentsWebhooks(t *testing.T) {
	ts := newTestServer(t)
	k := newTeam(t, ts)
	alice := apiKey(k.aliceKey)
	base := "/api/v1/me/agents/" + k.helper.ID + "/webhooks"
	ownHook := ts.createWebhook(t, k.helperKey, "http://127.0.0.1:8123/by-the-agent")["id"].(string)
	scoutHook := ts.createWebhook(t, k.scoutKey, "http://127.0.0.1:8123/scout")["id"].(string)
	var byOwner string

	ts.run(t, []scenario{{
		name: "the owner registers one for the agent", method: "POST", path: base, cred: alice,
		body: webhookRequest("http://192.168.1.20:9000/hook", "registered by alice"), status: 201,
		check: func(t testing.TB, r *response) {
			d := r.data(t)
			if !webhookSecretForm.MatchString(d["secret"].(string)) || d["agent_id"] != k.helper.ID {
				t.Fatalf("%s", r.body)
			}
			byOwner = d["id"].(string)
		},
	}, {
		name: "the owner lists the agent's, whoever registered them", method: "GET", path: base, cred: alice, status: 200,
		check: func(t testing.TB, r *response) {
			if got := listedValues(t, r, "url"); got != "http://127.0.0.1:8123/by-the-agent,http://192.168.1.20:9000/hook" {
				t.Fatalf("%s", got)
			}
		},
	}})
	t.Run("the agent sees the one its owner registered", func(t *testing.T) {
		expect(t, ts.do(t, "GET", agentWebhooksPath+"/"+byOwner, apiKey(k.helperKey), nil), 200, "")
	})
	ts.run(t, []scenario{
		{name: "read", method: "GET", path: base + "/" + ownHook, cred: alice, status: 200},
		{name: "resume", method: "POST", path: base + "/" + ownHook + "/resume", cred: alice, status: 200},
		{name: "its log", method: "GET", path: base + "/" + ownHook + "/deliveries", cred: alice, status: 200},

		refusalCase("another person", apiKey(k.bobKey), "GET", base, nil, 404, "not_found"),
		refusalCase("another person registers", apiKey(k.bobKey), "POST", base, webhookRequest("http://127.0.0.1/", ""), 404, "not_found"),
		refusalCase("another person reads one", apiKey(k.bobKey), "GET", base+"/"+ownHook, nil, 404, "not_found"),
		refusalCase("another agent's webhook under this agent", alice, "GET", base+"/"+scoutHook, nil, 404, "not_found"),
		refusalCase("removing another agent's webhook under this agent", alice, "DELETE", base+"/"+scoutHook, nil, 404, "not_found"),
		refusalCase("an agent that is not there", alice, "GET", "/api/v1/me/agents/"+nilID+"/webhooks", nil, 404, "not_found"),
		refusalCase("a malformed agent id", alice, "GET", "/api/v1/me/agents/nope/webhooks", nil, 404, "not_found"),
		refusalCase("an agent's key", apiKey(k.helperKey), "GET", base, nil, 403, "forbidden"),
		refusalCase("a metadata address", alice, "POST", base, webhookRequest("http://[fd00:ec2::254]/", ""), 422, "validation_error",
			"/webhook/url"),
	})
	t.Run("the owner removes one", func(t *testing.T) {
		expect(t, ts.doNoContent(t, "DELETE", base+"/"+byOwner, alice), 204, "")
		ts.refused(t, "GET", agentWebhooksPath+"/"+byOwner, apiKey(k.helperKey), nil, 404, "not_found", "")
	})
}

// registerSampleWebhooks registers three webhooks of several forms, two for
// the helper and one for the scout, and returns the helper's first (with
// its secret).
func registerSampleWebhooks(t *testing.T, ts *testServer, k team) map[string]any {
	var created map[string]any
	ts.run(t, []scenario{{
		name: "an agent registers a webhook", method: "POST", path: agentWebhooksPath, cred: apiKey(k.helperKey),
		body: webhookRequest("http://127.0.0.1:8123/chatd", "my laptop"), status: 201,
		check: func(t testing.TB, r *response) {
			created = r.data(t)
			if !webhookSecretForm.MatchString(created["secret"].(string)) {
				t.Fatalf("secret %v", created["secret"])
			}
			want := map[string]any{"agent_id": k.helper.ID, "url": "http://127.0.0.1:8123/chatd", "description": "my laptop",
				"status": "active", "paused_at": nil, "pause_reason": nil, "consecutive_failures": float64(0)}
			for key, v := range want {
				if created[key] != v {
					t.Errorf("%s = %v, want %v", key, created[key], v)
				}
			}
		},
	}, {
		name: "a private address, an https URL with a port and query, no description", method: "POST", path: agentWebhooksPath,
		cred: apiKey(k.helperKey), body: webhookRequest("https://10.1.2.3:8443/hooks?agent=helper", ""), status: 201,
		check: func(t testing.TB, r *response) {
			if d := r.data(t); d["description"] != "" || d["url"] != "https://10.1.2.3:8443/hooks?agent=helper" {
				t.Fatalf("%v", d)
			}
		},
	}, {
		name: "an IPv6 loopback, description null", method: "POST", path: agentWebhooksPath, cred: apiKey(k.scoutKey),
		body: map[string]any{"webhook": map[string]any{"url": "http://[::1]:9000/", "description": nil}}, status: 201,
	}})
	return created
}
