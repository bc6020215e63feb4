package server

import (
	"context"
	"strings"
	"testing"
	"time"
)

const peoplePath = "/api/v1/me/people"

// TestPeopleList: an organization's admin lists its people, oldest first,
// a page at a time; nobody else may, and other organizations' people are
// not in it.
func TestPeopleList(t *testing.T) {
	ts := newTestServer(t)
	_, aliceKey := ts.user("alice") // the organization's first: its admin
	_, bobKey := ts.user("bob")
	ts.user("carol", "Elsewhere")
	ts.user("dave")
	handles := func(r *response) string { return listedValues(t, r, "handle") }

	if got := ts.walkPages(t, peoplePath, "limit=2", apiKey(aliceKey), handles); got != "alice,bob|dave" {
		t.Fatalf("alice's people, two a page: %s", got)
	}
	r := ts.do(t, "GET", peoplePath, apiKey(aliceKey), nil)
	first := r.list(t)[0].(map[string]any)
	if first["role"] != "admin" || first["email"] != "alice@example.com" || first["name"] != "Alice Tester" {
		t.Fatalf("the first person listed: %v", first)
	}
	ts.run(t, []scenario{
		refusalCase("bob is no admin", apiKey(bobKey), "GET", peoplePath, nil, 403, "forbidden"),
		refusalCase("a limit too large", apiKey(aliceKey), "GET", peoplePath+"?limit=101", nil, 422, "validation_error", "/limit"),
		refusalCase("another listing's cursor", apiKey(aliceKey), "GET", peoplePath+"?cursor=abc.def", nil, 422, "invalid_cursor", "/cursor"),
	})
}

// removalWorld is an organization where the admin alice removes dave: dave
// has a password, a session, a key, a bearer token, an agent in alice's
// room and a room of his own where he is the only owner, a contact, and a
// message in the shared room.
type removalWorld struct {
	ts                            *testServer
	aliceKey, bobKey, daveKey     string
	daveID, botID, botKey         string
	session, token                string
	shared, davesRoom, daveSaidID string
}

func newRemovalWorld(t *testing.T) *removalWorld {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	_, bobKey := ts.user("bob")
	dave, daveKey := ts.user("dave")
	ts.agent(alice, "Helper")
	bot, botKey := ts.agent(dave, "Dave Bot")
	w := &removalWorld{ts: ts, aliceKey: aliceKey, bobKey: bobKey, daveKey: daveKey, daveID: dave.ID, botID: bot.ID, botKey: botKey}
	if err := ts.db.SetPassword(context.Background(), dave.ID, goodPassword); err != nil {
		t.Fatal(err)
	}
	w.session = ts.signIn(t, "dave", goodPassword)
	w.token = ts.token(dave, time.Hour)
	newRoom := func(key, title string) string {
		r := ts.do(t, "POST", humanChatsPath, apiKey(key), map[string]any{"chat": map[string]any{"title": title}})
		expect(t, r, 201, "")
		return r.data(t)["id"].(string)
	}
	add := func(key, room, id string) {
		expect(t, ts.do(t, "POST", humanChatsPath+"/"+room+"/participants", apiKey(key), participantBody(id, "")), 201, "")
	}
	w.shared = newRoom(aliceKey, "Shared")
	add(aliceKey, w.shared, dave.ID)
	add(daveKey, w.shared, bot.ID)
	said := ts.do(t, "POST", humanChatsPath+"/"+w.shared+"/messages", apiKey(daveKey),
		map[string]any{"message": map[string]any{"content": "@dave/dave-bot hello", "mentions": []any{map[string]any{"id": bot.ID}}}})
	expect(t, said, 201, "")
	w.daveSaidID = said.data(t)["id"].(string)
	w.davesRoom = newRoom(daveKey, "Dave's notes")
	add(daveKey, w.davesRoom, bot.ID)
	expect(t, ts.do(t, "POST", "/api/v1/me/contacts/requests", apiKey(bobKey), map[string]any{"contact_request": map[string]any{"recipient_handle": "dave"}}), 201, "")
	return w
}

// TestPeopleRemove: an admin removes a person: every credential of theirs
// stops working at once, their agents are deleted, they leave every room
// (a room they alone owned passes to the admin), nobody finds them any more,
// and what they wrote stays under their name. The refusals change nothing.
func TestPeopleRemove(t *testing.T) {
	w := newRemovalWorld(t)
	ts := w.ts
	_, carolKey := ts.user("carol", "Elsewhere")
	carol, _ := ts.db.UserByHandle(context.Background(), "carol")
	alice, _ := ts.db.UserByHandle(context.Background(), "alice")
	dave := peoplePath + "/" + w.daveID
	ts.run(t, []scenario{
		refusalCase("bob is no admin", apiKey(w.bobKey), "DELETE", dave, nil, 403, "forbidden"),
		refusalCase("an admin removing themselves", apiKey(w.aliceKey), "DELETE", peoplePath+"/"+alice.ID, nil, 403, "forbidden"),
		refusalCase("another organization's person", apiKey(w.aliceKey), "DELETE", peoplePath+"/"+carol.ID, nil, 404, "not_found"),
		refusalCase("another organization's admin", apiKey(carolKey), "DELETE", dave, nil, 404, "not_found"),
		refusalCase("nobody", apiKey(w.aliceKey), "DELETE", peoplePath+"/0190f5a0-0000-7000-8000-000000000000", nil, 404, "not_found"),
		refusalCase("not an id", apiKey(w.aliceKey), "DELETE", peoplePath+"/dave", nil, 404, "not_found"),
		refusalCase("an agent's key", apiKey(w.botKey), "DELETE", dave, nil, 403, "forbidden"),
	})

	expect(t, ts.doNoContent(t, "DELETE", dave, apiKey(w.aliceKey)), 204, "")

	// Every credential ends.
	for name, c := range map[string]cred{"key": apiKey(w.daveKey), "session": bearer(w.session), "token": bearer(w.token),
		"his agent's key": apiKey(w.botKey)} {
		if r := ts.do(t, "GET", "/api/v1/me", c, nil); r.status != 401 {
			t.Errorf("dave's %s answers %d after his removal, want 401", name, r.status)
		}
	}
	ts.refused(t, "POST", signInPath, noCred, map[string]any{"handle": "dave", "password": goodPassword}, 401, "unauthorized", "")

	// Nobody finds him; he and his agent are in no room; his own room is
	// alice's now; what he said stays, under his name.
	if got := listedValues(t, ts.do(t, "GET", peoplePath, apiKey(w.aliceKey), nil), "handle"); got != "alice,bob" {
		t.Errorf("people after the removal: %s", got)
	}
	if got := listedValues(t, ts.do(t, "GET", "/api/v1/me/peers", apiKey(w.bobKey), nil), "handle"); strings.Contains(got, "dave") {
		t.Errorf("bob's peers still hold dave: %s", got)
	}
	ts.refused(t, "POST", "/api/v1/me/contacts/resolve", apiKey(w.bobKey), map[string]any{"handle": "dave"}, 404, "not_found", "")
	if got := ts.do(t, "GET", "/api/v1/me/contacts/requests/sent?status=pending", apiKey(w.bobKey), nil).list(t); len(got) != 0 {
		t.Errorf("bob's pending request to dave is still pending: %v", got)
	}
	if got := listedValues(t, ts.do(t, "GET", humanChatsPath+"/"+w.shared+"/participants", apiKey(w.aliceKey), nil), "id"); strings.Contains(got, w.daveID) || strings.Contains(got, w.botID) {
		t.Errorf("the shared room still holds dave or his agent: %s", got)
	}
	owners := ts.do(t, "GET", humanChatsPath+"/"+w.davesRoom+"/participants", apiKey(w.aliceKey), nil)
	expect(t, owners, 200, "")
	if got := listedValues(t, owners, "role"); got != "owner" {
		t.Errorf("the roles in dave's room after his removal: %s, want alice's alone, owner", got)
	}
	said := ts.do(t, "GET", humanChatsPath+"/"+w.shared+"/messages", apiKey(w.aliceKey), nil).list(t)
	found := false
	for _, m := range said {
		if m := m.(map[string]any); m["id"] == w.daveSaidID {
			found = m["sender_name"] == "Dave Tester"
		}
	}
	if !found {
		t.Errorf("dave's message is gone or lost its sender: %v", said)
	}
	// Once.
	ts.refused(t, "DELETE", dave, apiKey(w.aliceKey), nil, 404, "not_found", "")
	if n := ts.count(t, `SELECT count(*) FROM agents WHERE owner_id = ? AND deleted_at IS NULL`, w.daveID); n != 0 {
		t.Errorf("dave still owns %d live agents", n)
	}
}

// An admin's open invitations end with the admin: removed, they can no
// longer bring anyone in through a link they made before. Another admin's
// stay open.
func TestPeopleRemoveEndsTheirInvitations(t *testing.T) {
	ts := newTestServer(t)
	_, aliceKey := ts.user("alice") // the organization's first: its admin
	const invitations = "/api/v1/me/invitations"
	const accept = "/api/v1/auth/accept-invitation"
	newcomer := func(token, handle string) map[string]any {
		return map[string]any{"token": token, "handle": handle, "name": "New Comer", "password": goodPassword}
	}
	invite := func(c cred, role string) string {
		r := ts.do(t, "POST", invitations, c, map[string]any{"invitation": map[string]any{"role": role}})
		expect(t, r, 201, "")
		return r.data(t)["token"].(string)
	}
	r := ts.do(t, "POST", accept, noCred, newcomer(invite(apiKey(aliceKey), "admin"), "erin"))
	expect(t, r, 201, "")
	erin := r.data(t)["user"].(map[string]any)["id"].(string)
	erinsLink := invite(bearer(r.data(t)["access_token"].(string)), "admin")
	alicesLink := invite(apiKey(aliceKey), "user")

	expect(t, ts.doNoContent(t, "DELETE", peoplePath+"/"+erin, apiKey(aliceKey)), 204, "")
	ts.refused(t, "POST", accept, noCred, newcomer(erinsLink, "sleeper"), 401, "unauthorized", "")
	expect(t, ts.do(t, "POST", accept, noCred, newcomer(alicesLink, "frank")), 201, "")
}
