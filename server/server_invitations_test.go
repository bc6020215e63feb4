package server

import (
	"bytes"
	"context"
	"testing"
)

// TestInvitations: an admin invites; the invited person accepts with a
// handle, a name and a password, joins the organization with the role,
// and is signed in; the link works once. Someone who is no admin cannot
// invite, list or revoke; a revoked link is refused. Refusals change
// nothing.
func TestInvitations(t *testing.T) {
	ts := newTestServer(t)
	admin, adminKey := ts.user("alice") // the organization's first: its admin
	_, bobKey := ts.user("bob")
	_, carolKey := ts.user("carol", "Elsewhere")
	const path = "/api/v1/me/invitations"
	const accept = "/api/v1/auth/accept-invitation"
	newcomer := func(token, handle string) map[string]any {
		return map[string]any{"token": token, "handle": handle, "name": "New Comer", "password": goodPassword}
	}

	r := ts.do(t, "POST", path, apiKey(adminKey), map[string]any{"invitation": map[string]any{}})
	expect(t, r, 201, "")
	inv := r.data(t)
	token := inv["token"].(string)
	if inv["role"] != "user" || inv["invited_by"] == "" || len(token) < 20 {
		t.Fatalf("invitation %s", r.body)
	}
	r = ts.do(t, "POST", path, apiKey(adminKey), map[string]any{"invitation": map[string]any{"role": "admin"}})
	expect(t, r, 201, "")
	revoked := r.data(t)
	if got := listedValues(t, ts.do(t, "GET", path, apiKey(adminKey), nil), "id"); got != revoked["id"].(string)+","+inv["id"].(string) {
		t.Fatalf("open invitations: %s", got)
	}
	if got := ts.do(t, "GET", path, apiKey(adminKey), nil); bytes.Contains(got.body, []byte(token)) {
		t.Fatal("the listing shows a token")
	}

	ts.run(t, []scenario{
		refusalCase("bob is no admin", apiKey(bobKey), "POST", path, map[string]any{"invitation": map[string]any{}}, 403, "forbidden"),
		refusalCase("bob lists", apiKey(bobKey), "GET", path, nil, 403, "forbidden"),
		refusalCase("bob revokes", apiKey(bobKey), "DELETE", path+"/"+inv["id"].(string), nil, 403, "forbidden"),
		refusalCase("another organization's", apiKey(carolKey), "DELETE", path+"/"+inv["id"].(string), nil, 404, "not_found"),
		refusalCase("a role that is none", apiKey(adminKey), "POST", path, map[string]any{"invitation": map[string]any{"role": "owner"}}, 422, "validation_error", "/invitation/role"),
		refusalCase("no such token", noCred, "POST", accept, newcomer("band_i_nope", "dave"), 401, "unauthorized"),
		refusalCase("a handle taken", noCred, "POST", accept, newcomer(token, "bob"), 409, "conflict"),
		refusalCase("a short password", noCred, "POST", accept, map[string]any{"token": token, "handle": "dave", "name": "Dave", "password": "short"}, 422, "validation_error", "/password"),
	})

	expect(t, ts.doNoContent(t, "DELETE", path+"/"+revoked["id"].(string), apiKey(adminKey)), 204, "")
	ts.refused(t, "POST", accept, noCred, newcomer(revoked["token"].(string), "erin"), 401, "unauthorized", "")

	r = ts.do(t, "POST", accept, noCred, newcomer(token, "dave"))
	expect(t, r, 201, "")
	user := r.data(t)["user"].(map[string]any)
	if user["handle"] != "dave" || user["role"] != "user" {
		t.Fatalf("the new person: %v", user)
	}
	dave, err := ts.db.UserByHandle(context.Background(), "dave")
	if err != nil || dave.OrganizationID != admin.OrganizationID {
		t.Fatalf("dave joined %v (%v), want alice's organization", dave, err)
	}
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(r.data(t)["access_token"].(string)), nil), 200, "")
	ts.signIn(t, "dave", goodPassword)
	// Once.
	ts.refused(t, "POST", accept, noCred, newcomer(token, "frank"), 401, "unauthorized", "")
	if got := ts.do(t, "GET", path, apiKey(adminKey), nil).list(t); len(got) != 0 {
		t.Fatalf("open invitations after both ended: %v", got)
	}
}

// TestRoutesWithoutRoomTasks: invitations, people and attention marks have
// nothing to do with room tasks (--disable-room-tasks), and stay when those
// are turned off.
func TestRoutesWithoutRoomTasks(t *testing.T) {
	ts := newTestServerWith(t, func(c *Config) { c.DisableRoomTasks = true })
	_, aliceKey := ts.user("alice")
	room := ts.do(t, "POST", humanChatsPath, apiKey(aliceKey), map[string]any{"chat": map[string]any{"title": "Plain"}})
	expect(t, room, 201, "")
	expect(t, ts.do(t, "GET", "/api/v1/me/invitations", apiKey(aliceKey), nil), 200, "")
	expect(t, ts.do(t, "GET", "/api/v1/me/people", apiKey(aliceKey), nil), 200, "")
	expect(t, ts.do(t, "GET", humanChatsPath+"/"+room.data(t)["id"].(string)+"/done", apiKey(aliceKey), nil), 200, "")
}
