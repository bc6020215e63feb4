package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

func TestRegisterAgent(t *testing.T) {
	ts := newTestServer(t)
	alice, key := ts.user("alice")

	r := ts.do(t, "POST", "/api/v1/me/agents/register", apiKey(key),
		map[string]any{"agent": map[string]any{"name": "Weather Bot", "description": "Tells the weather"}})
	expect(t, r, 201, "")
	d := r.data(t)
	agent := d["agent"].(map[string]any)
	apiKeyOut := d["credentials"].(map[string]any)["api_key"].(string)
	if agent["name"] != "Weather Bot" || agent["owner_id"] != alice.ID || agent["handle"] != "alice/weather-bot" || agent["description"] != "Tells the weather" {
		t.Fatalf("agent = %v", agent)
	}
	if !strings.HasPrefix(apiKeyOut, "band_a_") {
		t.Fatalf("api key %q", apiKeyOut)
	}
	me := ts.do(t, "GET", "/api/v1/agent/me", apiKey(apiKeyOut), nil)
	expect(t, me, 200, "")
	if me.data(t)["id"] != agent["id"] {
		t.Fatal("the returned key does not authenticate the new agent")
	}

	// The API cannot choose a slug, so a taken one gets the next free suffix.
	r = ts.do(t, "POST", "/api/v1/me/agents/register", apiKey(key),
		map[string]any{"agent": map[string]any{"name": "Weather  bot", "description": "Another one", "tags": []string{"wx"}, "bio": "Line one\nline two"}})
	expect(t, r, 201, "")
	if h := r.data(t)["agent"].(map[string]any)["handle"]; h != "alice/weather-bot-2" {
		t.Fatalf("handle = %v, want alice/weather-bot-2", h)
	}
}

func TestRegisterAgentRefusals(t *testing.T) {
	ts := newTestServer(t, func(o *store.Options) { o.Limits = store.Limits{AgentsPerUser: 2, TagsPerAgent: 2} })
	alice, key := ts.user("alice")
	ts.agent(alice, "Existing")
	agentBody := func(fields map[string]any) map[string]any { return map[string]any{"agent": fields} }

	register := func(name string, body any, status int, code string, pointers ...string) scenario {
		return refusalCase(name, apiKey(key), "POST", "/api/v1/me/agents/register", body, status, code, pointers...)
	}
	ts.run(t, []scenario{
		register("no body", nil, 422, "validation_error", "/agent"),
		register("missing name", agentBody(map[string]any{"description": "Does things"}), 422, "validation_error", "/agent/name"),
		register("missing description", agentBody(map[string]any{"name": "Bot"}), 422, "validation_error", "/agent/description"),
		// The Band Python SDK refuses to start an agent whose profile has no
		// description, so chatd never makes one.
		register("null description", agentBody(map[string]any{"name": "Bot", "description": nil}), 422, "validation_error", "/agent/description"),
		register("empty description", agentBody(map[string]any{"name": "Bot", "description": ""}), 422, "validation_error", "/agent/description"),
		register("whitespace description", agentBody(map[string]any{"name": "Bot", "description": " \t\n "}), 422, "validation_error", "/agent/description"),
		register("invisible description", agentBody(map[string]any{"name": "Bot", "description": "\u200b\u2060"}), 422, "validation_error", "/agent/description"),
		register("description of the wrong type", agentBody(map[string]any{"name": "Bot", "description": 7}), 422, "validation_error", "/agent/description"),
		register("name too short", agentBody(map[string]any{"name": "B", "description": "Does things"}), 422, "validation_error", "/agent/name"),
		register("name too long", agentBody(map[string]any{"name": strings.Repeat("n", 101), "description": "d"}), 422, "validation_error", "/agent/name"),
		register("name with control character", agentBody(map[string]any{"name": "Bot\x00", "description": "d"}), 422, "validation_error", "/agent/name"),
		register("description too long", agentBody(map[string]any{"name": "Bot", "description": strings.Repeat("d", 501)}), 422, "validation_error", "/agent/description"),
		register("name without letters for a slug", agentBody(map[string]any{"name": "???", "description": "d"}), 422, "validation_error", "/agent/slug"),
		register("name of the wrong type", agentBody(map[string]any{"name": 42, "description": "d"}), 422, "validation_error", "/agent/name"),
		register("unknown field", agentBody(map[string]any{"name": "Bot", "description": "d", "is_global": true}), 400, "unknown_field", "/agent/is_global"),
		register("too many tags", agentBody(map[string]any{"name": "Bot", "description": "d", "tags": []string{"a", "b", "c"}}), 403, "limit_reached"),
		register("blank tag", agentBody(map[string]any{"name": "Bot", "description": "d", "tags": []string{"ok", " "}}), 422, "validation_error", "/agent/tags/1"),
	})

	t.Run("agent quota", func(t *testing.T) {
		ts.agent(alice, "Second")
		r := ts.refused(t, "POST", "/api/v1/me/agents/register", apiKey(key),
			agentBody(map[string]any{"name": "Third", "description": "One too many"}), 403, "limit_reached", "")
		details := errorDetails(t, r)
		if details["resource"] != "agents" || details["limit"] != float64(2) || details["current"] != float64(2) {
			t.Fatalf("details = %v", details)
		}
	})
}

// An agent an older chatd registered without a description keeps it null:
// chatd makes none up, and GET /agent/me answers what is stored (the Band
// Python SDK refuses such an agent; docs/troubleshooting.md says what to do).
func TestAgentStoredWithoutADescription(t *testing.T) {
	ts := newTestServer(t)
	alice, _ := ts.user("alice")
	a, key := ts.agent(alice, "Old Timer")
	ts.exec(t, `UPDATE agents SET description = NULL WHERE id = ?`, a.ID)
	me := ts.do(t, "GET", "/api/v1/agent/me", apiKey(key), nil)
	expect(t, me, 200, "")
	if d, ok := me.data(t)["description"]; !ok || d != nil {
		t.Fatalf("description = %v (present %v), want null", d, ok)
	}
}

func TestWritesAnswer503WhenTheWriteQueueIsFull(t *testing.T) {
	ts := newTestServer(t, func(o *store.Options) { o.QueueSize = 2 })
	alice, key := ts.user("alice")
	agent, _ := ts.agent(alice, "Helper")
	writes := []struct {
		method, path string
		body         any
	}{
		{"PUT", "/api/v1/me/profile", map[string]any{"user": map[string]any{"first_name": "Al"}}},
		{"POST", "/api/v1/me/agents/register", map[string]any{"agent": map[string]any{"name": "Bot", "description": "d"}}},
		{"DELETE", "/api/v1/me/agents/" + agent.ID, nil},
		{"POST", "/api/v1/me/agents/" + agent.ID + "/rotate-key", nil},
	}
	before := ts.snapshot(t)
	release := ts.fillWriteQueue(t)
	for _, w := range writes {
		r := ts.do(t, w.method, w.path, apiKey(key), w.body)
		expect(t, r, 503, "service_unavailable")
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", w.method, w.path)
		}
	}
	// Reads do not queue behind writes.
	expect(t, ts.do(t, "GET", "/api/v1/me/agents", apiKey(key), nil), 200, "")
	expect(t, ts.do(t, "GET", "/readyz", noCred, nil), 503, "service_unavailable")
	release()
	ts.unchanged(t, before)
	expect(t, ts.do(t, "PUT", "/api/v1/me/profile", apiKey(key), writes[0].body), 200, "")
}

func TestDeleteAgent(t *testing.T) {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	_, bobKey := ts.user("bob")
	_, carolKey := ts.user("carol", "Other Org")
	private, _ := ts.agent(alice, "Private")
	shared, _ := ts.agent(alice, "Shared")
	ts.exec(t, `UPDATE agents SET shared_with_organization = 1 WHERE id = ?`, shared.ID)

	deleting := func(name, key, path string, status int, code string) scenario {
		return refusalCase(name, apiKey(key), "DELETE", path, nil, status, code)
	}
	ts.run(t, []scenario{
		deleting("another person's private agent", bobKey, "/api/v1/me/agents/"+private.ID, 404, "not_found"),
		deleting("an agent shared with my organization", bobKey, "/api/v1/me/agents/"+shared.ID, 403, "forbidden"),
		deleting("an agent shared with another organization", carolKey, "/api/v1/me/agents/"+shared.ID, 404, "not_found"),
		deleting("unknown id", aliceKey, "/api/v1/me/agents/0190a000-0000-7000-8000-000000000000", 404, "not_found"),
		deleting("malformed id", aliceKey, "/api/v1/me/agents/not-a-uuid", 404, "not_found"),
		deleting("bad force value", aliceKey, "/api/v1/me/agents/"+private.ID+"?force=maybe", 422, "validation_error"),
	})

	r := ts.do(t, "DELETE", "/api/v1/me/agents/"+private.ID+"?force=true", apiKey(aliceKey), nil)
	expect(t, r, 200, "")
	if d := r.data(t); d["id"] != private.ID || d["name"] != "Private" || d["executions_deleted"] != float64(0) {
		t.Fatalf("deleted = %v", d)
	}

	// An agent that processed a message goes only with force.
	busy, busyKey := ts.agent(alice, "Busy")
	room := ts.room(t, busyKey, alice.ID)
	msg := ts.do(t, "POST", "/api/v1/me/chats/"+room+"/messages", apiKey(aliceKey),
		map[string]any{"message": map[string]any{"content": "please", "mentions": []any{map[string]any{"id": busy.ID}}}})
	expect(t, msg, 201, "")
	expect(t, ts.do(t, "POST", "/api/v1/agent/chats/"+room+"/messages/"+msg.data(t)["id"].(string)+"/processing", apiKey(busyKey), nil), 200, "")
	ts.refused(t, "DELETE", "/api/v1/me/agents/"+busy.ID, apiKey(aliceKey), nil, 422, "execution_history_exists", "/force")
	r = ts.do(t, "DELETE", "/api/v1/me/agents/"+busy.ID+"?force=true", apiKey(aliceKey), nil)
	expect(t, r, 200, "")
	if d := r.data(t); d["executions_deleted"] != float64(1) {
		t.Fatalf("deleted with its history = %v", d)
	}
	expect(t, ts.do(t, "DELETE", "/api/v1/me/agents/"+private.ID, apiKey(aliceKey), nil), 404, "not_found")
	list := ts.do(t, "GET", "/api/v1/me/agents", apiKey(aliceKey), nil).list(t)
	if len(list) != 1 || list[0].(map[string]any)["id"] != shared.ID {
		t.Fatalf("agents after delete = %v", list)
	}
}

func TestListMyAgents(t *testing.T) {
	ts := newTestServer(t)
	alice, key := ts.user("alice")
	bob, _ := ts.user("bob")
	ts.agent(bob, "Not Yours")
	var ids []string
	for _, name := range []string{"Charlie", "alpha", "Bravo", "delta", "Echo"} {
		a, _ := ts.agent(alice, name)
		ids = append(ids, a.ID)
	}

	r := ts.do(t, "GET", "/api/v1/me/agents", apiKey(key), nil)
	expect(t, r, 200, "")
	if got := listedValues(t, r, "name"); got != "Echo,delta,Bravo,alpha,Charlie" {
		t.Fatalf("default order (newest first) = %s", got)
	}
	meta := r.meta(t)
	if meta["has_more"] != false || meta["limit"] != float64(20) || meta["next_cursor"] != nil {
		t.Fatalf("metadata = %v", meta)
	}
	// The document: "responses always include both metadata shapes during
	// the transition".
	if meta["page"] != float64(1) || meta["page_size"] != float64(20) || meta["total_count"] != float64(5) || meta["total_pages"] != float64(1) {
		t.Fatalf("cursor mode lacks the offset fields: %v", meta)
	}
	if len(meta["available_filters"].([]any)) != 3 || len(meta["sortable_fields"].([]any)) != 3 {
		t.Fatalf("filters/sorts = %v", meta)
	}
	if r.header.Get("Deprecation") != "" {
		t.Fatal("cursor mode is not deprecated")
	}

	// Walk by name with a cursor, two at a time.
	if got := ts.walkPages(t, "/api/v1/me/agents", "sort=name&order=asc&limit=2", apiKey(key), func(r *response) string { return listedValues(t, r, "name") }); got != "alpha,Bravo|Charlie,delta|Echo" {
		t.Fatalf("walk = %s", got)
	}

	// Filters.
	if got := listedValues(t, ts.do(t, "GET", "/api/v1/me/agents?name=HA", apiKey(key), nil), "name"); got != "alpha,Charlie" {
		t.Fatalf("name filter = %s", got)
	}
	if got := listedValues(t, ts.do(t, "GET", "/api/v1/me/agents?is_external=false", apiKey(key), nil), "name"); got != "" {
		t.Fatalf("is_external=false = %s", got)
	}

	// Deprecated page/page_size: still served, with totals and headers.
	t.Run("the deprecated page and page_size", func(t *testing.T) { myAgentsPagesByPage(t, ts, key) })

	// A cursor is valid only for the listing and sort it came from.
	t.Run("refusals", func(t *testing.T) { myAgentsListingRefusals(t, ts, key) })

	// Other people's agents never show, however the listing is asked for.
	r = ts.do(t, "GET", fmt.Sprintf("/api/v1/me/agents?limit=100&name=%s", url.QueryEscape("Yours")), apiKey(key), nil)
	if got := listedValues(t, r, "name"); got != "" {
		t.Fatalf("saw bob's agent: %s", got)
	}
}

func myAgentsPagesByPage(t *testing.T, ts *testServer, key string) {
	page := ts.do(t, "GET", "/api/v1/me/agents?page=2&page_size=2&sort=name&order=asc", apiKey(key), nil)
	expect(t, page, 200, "")
	if got := listedValues(t, page, "name"); got != "Charlie,delta" {
		t.Fatalf("page 2 = %s", got)
	}
	pageMeta := page.json(t)["metadata"].(map[string]any)
	if pageMeta["page"] != float64(2) || pageMeta["page_size"] != float64(2) || pageMeta["total_count"] != float64(5) || pageMeta["total_pages"] != float64(3) || pageMeta["has_more"] != true {
		t.Fatalf("page metadata = %v", pageMeta)
	}
	if page.header.Get("Deprecation") != "@1790812800" || page.header.Get("Sunset") != "Thu, 01 Oct 2026 00:00:00 GMT" {
		t.Fatalf("headers: Deprecation %q Sunset %q", page.header.Get("Deprecation"), page.header.Get("Sunset"))
	}
}

func myAgentsListingRefusals(t *testing.T, ts *testServer, key string) {
	byName := ts.do(t, "GET", "/api/v1/me/agents?sort=name&limit=1", apiKey(key), nil).json(t)["metadata"].(map[string]any)["next_cursor"].(string)
	cursor := url.QueryEscape(byName)
	tampered := url.QueryEscape(flipChar(byName, len(byName)-5))
	refused := func(name, query, code string) scenario {
		return refusalCase(name, apiKey(key), "GET", "/api/v1/me/agents?"+query, nil, 422, code)
	}
	ts.run(t, []scenario{
		refused("cursor with another sort", "sort=inserted_at&cursor="+cursor, "invalid_cursor"),
		refused("cursor with another order", "sort=name&order=asc&cursor="+cursor, "invalid_cursor"),
		refused("tampered cursor", "sort=name&cursor="+tampered, "invalid_cursor"),
		refused("garbage cursor", "cursor=%00%01zz", "invalid_cursor"),
		refused("limit 0", "limit=0", "validation_error"),
		refused("limit 101", "limit=101", "validation_error"),
		refused("limit not a number", "limit=ten", "validation_error"),
		refused("page 0", "page=0", "validation_error"),
		refused("page_size 101", "page_size=101", "validation_error"),
		refused("cursor and page", "cursor="+cursor+"&page=1", "validation_error"),
		refused("limit and page_size", "limit=5&page_size=5", "validation_error"),
		refused("bad sort", "sort=handle", "validation_error"),
		refused("bad order", "order=up", "validation_error"),
		refused("bad boolean", "listed_in_directory=yes", "validation_error"),
	})
}

func rotatePath(agentID string) string { return "/api/v1/me/agents/" + agentID + "/rotate-key" }

// Rotating an agent's key: only its owner, as a person, may do it; the old
// key is refused at once, over REST and on the agent's open socket, and the
// agent keeps its rooms.
func TestRotateAgentKey(t *testing.T) {
	k := newDelegationWorld(t) // alice owns helper and scout; bob (another organization) owns rover
	ts := k.ts
	_, daveKey := ts.user("dave") // alice's organization
	ts.exec(t, `UPDATE agents SET shared_with_organization = 1, is_global = 1 WHERE id = ?`, k.scout.ID)
	_, allScopes := k.grant(t, store.DelegationScopes...)
	delegatedTok := k.exchange(t, allScopes)

	rotation := func(name string, c cred, path string, status int, code string) scenario {
		return refusalCase(name, c, "POST", path, nil, status, code)
	}
	ts.run(t, []scenario{
		rotation("another person's agent", apiKey(k.bobKey), rotatePath(k.helper.ID), 404, "not_found"),
		rotation("an agent the caller sees but does not own", apiKey(daveKey), rotatePath(k.scout.ID), 404, "not_found"),
		rotation("unknown id", apiKey(k.aliceKey), rotatePath(nilID), 404, "not_found"),
		rotation("malformed id", apiKey(k.aliceKey), rotatePath("not-a-uuid"), 404, "not_found"),
		rotation("the agent's own key", apiKey(k.helperKey), rotatePath(k.helper.ID), 403, "forbidden"),
		rotation("another agent's key", apiKey(k.scoutKey), rotatePath(k.helper.ID), 403, "forbidden"),
		rotation("a delegated token with every scope", bearer(delegatedTok), rotatePath(k.helper.ID), 403, "forbidden"),
		rotation("no credentials", noCred, rotatePath(k.helper.ID), 401, "unauthorized"),
	})

	room := ts.room(t, k.helperKey, k.alice.ID)
	helperSocket := newListener(t, ts, k.helperKey, "agent_rooms:"+k.helper.ID)
	scoutSocket := newListener(t, ts, k.scoutKey, "agent_rooms:"+k.scout.ID)
	aliceSocket := newListener(t, ts, k.aliceKey, "user_rooms:"+k.alice.ID)
	_, pendingGrant := k.grant(t, "chats:read")

	r := ts.do(t, "POST", rotatePath(k.helper.ID), apiKey(k.aliceKey), nil)
	expect(t, r, 200, "")
	d := r.data(t)
	agent := d["agent"].(map[string]any)
	newKey, _ := d["credentials"].(map[string]any)["api_key"].(string)
	if agent["id"] != k.helper.ID || agent["handle"] != "alice/helper" || agent["owner_id"] != k.alice.ID || agent["name"] != "Helper" {
		t.Fatalf("agent = %v", agent)
	}
	if !strings.HasPrefix(newKey, "band_a_") || newKey == k.helperKey {
		t.Fatalf("new key %q", newKey)
	}
	// The same shape as registering.
	reg := ts.do(t, "POST", "/api/v1/me/agents/register", apiKey(k.aliceKey),
		map[string]any{"agent": map[string]any{"name": "Shape", "description": "Compared"}}).data(t)
	if fmt.Sprint(keysOf(reg)) != fmt.Sprint(keysOf(d)) || fmt.Sprint(keysOf(reg["agent"].(map[string]any))) != fmt.Sprint(keysOf(agent)) {
		t.Fatalf("answer %v differs in shape from register's %v", d, reg)
	}

	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(k.helperKey), nil), 401, "unauthorized")
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(newKey), nil), 200, "")
	rooms := ts.do(t, "GET", "/api/v1/agent/chats", apiKey(newKey), nil).list(t)
	if len(rooms) != 1 || rooms[0].(map[string]any)["id"] != room {
		t.Fatalf("the agent's rooms after rotation: %v", rooms)
	}
	helperSocket.awaitClose(t, 1008, "the connection opened with the old key") // 1008: terminal
	for name, l := range map[string]*listener{"another agent's": scoutSocket, "the owner's": aliceSocket} {
		if l.isClosed() {
			t.Errorf("%s connection was closed too", name)
		}
	}

	// Delegations: the token exchanged with the old key ends; a pending
	// grant is exchanged with the new key, never the old one.
	expect(t, ts.do(t, "GET", "/api/v1/me/chats", bearer(delegatedTok), nil), 401, "unauthorized")
	expect(t, ts.do(t, "POST", exchangePath, apiKey(k.helperKey), exchangeBody(pendingGrant)), 401, "unauthorized")
	expect(t, ts.do(t, "POST", exchangePath, apiKey(newKey), exchangeBody(pendingGrant)), 200, "")

	// The rotation may be routed after the agent reconnected with its new
	// key: that connection stays.
	t.Run("a connection opened with the new key stays", func(t *testing.T) { rotatingLeavesNewKeyConnections(t, k, ts, newKey) })

	// A connection as the agent through its owner's credentials does not
	// use the agent's key: rotating leaves it open. A session token may
	// rotate too.
	t.Run("a connection as the agent through its owner's key stays", func(t *testing.T) { rotatingLeavesOwnersAgentConnections(t, k, ts) })
}

func rotatingLeavesNewKeyConnections(t *testing.T, k *delegationWorld, ts *testServer, newKey string) {
	fresh := newListener(t, ts, newKey, "agent_rooms:"+k.helper.ID)
	ts.srv.rt.publish(store.Change{Kind: store.CredentialsEnded, Agent: k.helper})
	time.Sleep(200 * time.Millisecond)
	if fresh.isClosed() {
		t.Fatal("the connection opened with the new key was closed")
	}
}

func rotatingLeavesOwnersAgentConnections(t *testing.T, k *delegationWorld, ts *testServer) {
	asOwner, err := dialRaw(t, ts.socketURL(url.Values{"vsn": {"2.0.0"}, "agent_id": {k.scout.ID}}), http.Header{"X-Api-Key": {k.aliceKey}})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, ts.do(t, "POST", rotatePath(k.scout.ID), bearer(ts.token(k.alice, time.Hour)), nil), 200, "")
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(k.scoutKey), nil), 401, "unauthorized")
	time.Sleep(200 * time.Millisecond)
	asOwner.send(t, `["","7","phoenix","heartbeat",{}]`)
	if m := asOwner.next(t); m[1] != "7" {
		t.Fatalf("the owner's connection as the agent: %v", m)
	}
}
