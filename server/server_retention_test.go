package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// Scenario tests of retention and storage (chatd's own; see
// store/retention.go and store/purge.go): the organization's default, a
// room's own periods, the admin's statistics, and the purge they start.

const organizationPath = "/api/v1/me/organization"

func retentionBody(text, event, file any) map[string]any {
	return map[string]any{"retention": map[string]any{"text_days": text, "event_days": event, "file_days": file}}
}

// period reads one kind of an answered setting: -1 for null.
func period(t testing.TB, v map[string]any, kind string) int {
	t.Helper()
	switch d := v[kind].(type) {
	case nil:
		return -1
	case float64:
		return int(d)
	}
	t.Fatalf("%s is %v", kind, v[kind])
	return 0
}

// Everyone in the organization reads its retention; only an admin sets it.
func TestRetentionOfTheOrganization(t *testing.T) {
	ts := newTestServer(t)
	k := newTeam(t, ts) // alice is the organization's first person: its admin; bob is not
	path := organizationPath + "/retention"
	ts.run(t, []scenario{
		{name: "kept forever until set", method: "GET", path: path, cred: apiKey(k.bobKey), status: 200,
			check: func(t testing.TB, r *response) {
				d := r.data(t)
				if period(t, d, "text_days")+period(t, d, "event_days")+period(t, d, "file_days") != -3 || d["updated_at"] != nil {
					t.Fatalf("a new organization's retention: %v", d)
				}
			}},
		{name: "an admin sets it", method: "PUT", path: path, cred: apiKey(k.aliceKey), body: retentionBody(365, 30, nil), status: 200,
			check: func(t testing.TB, r *response) {
				d := r.data(t)
				if period(t, d, "text_days") != 365 || period(t, d, "event_days") != 30 || period(t, d, "file_days") != -1 || d["updated_at"] == nil {
					t.Fatalf("set: %v", d)
				}
			}},
		{name: "a kind left out is kept forever", method: "PUT", path: path, cred: apiKey(k.aliceKey),
			body: map[string]any{"retention": map[string]any{"event_days": 30}}, status: 200,
			check: func(t testing.TB, r *response) {
				if d := r.data(t); period(t, d, "text_days") != -1 || period(t, d, "event_days") != 30 {
					t.Fatalf("set: %v", d)
				}
			}},
		{name: "the others read it", method: "GET", path: path, cred: bearer(ts.token(k.bob, time.Hour)), status: 200,
			check: func(t testing.TB, r *response) {
				if period(t, r.data(t), "event_days") != 30 {
					t.Fatalf("read: %v", r.data(t))
				}
			}},
		refusalCase("a person who is not an admin", apiKey(k.bobKey), "PUT", path, retentionBody(1, 1, 1), 403, "forbidden"),
		refusalCase("an agent", apiKey(k.helperKey), "PUT", path, retentionBody(1, 1, 1), 403, "forbidden"),
		refusalCase("no days", apiKey(k.aliceKey), "PUT", path, retentionBody(0, nil, nil), 422, "validation_error", "/retention/text_days"),
		refusalCase("a century and a day", apiKey(k.aliceKey), "PUT", path, retentionBody(nil, 36501, nil), 422, "validation_error",
			"/retention/event_days"),
		refusalCase("negative, twice", apiKey(k.aliceKey), "PUT", path, retentionBody(-1, nil, -5), 422, "validation_error",
			"/retention/text_days", "/retention/file_days"),
		refusalCase("not a number", apiKey(k.aliceKey), "PUT", path, retentionBody("30", nil, nil), 422, "validation_error", "/retention/text_days"),
		refusalCase("a fraction", apiKey(k.aliceKey), "PUT", path, retentionBody(1.5, nil, nil), 422, "validation_error", "/retention/text_days"),
		refusalCase("no retention", apiKey(k.aliceKey), "PUT", path, map[string]any{}, 422, "validation_error", "/retention"),
		refusalCase("an unknown kind", apiKey(k.aliceKey), "PUT", path, map[string]any{"retention": map[string]any{"memory_days": 3}},
			400, "unknown_field", "/retention/memory_days"),
	})
}

// A room's readers read its retention; its owner sets it; it can only
// shorten the organization's.
func TestRetentionOfARoom(t *testing.T) {
	ts := newTestServer(t)
	k := newTeam(t, ts)
	shared := ts.do(t, "POST", humanChatsPath, apiKey(k.aliceKey), map[string]any{}).data(t)["id"].(string) // alice's
	expect(t, ts.do(t, "POST", humanChatsPath+"/"+shared+"/participants", apiKey(k.aliceKey), participantBody(k.bob.ID, "")), 201, "")
	path := humanChatsPath + "/" + shared + "/retention"
	expect(t, ts.do(t, "PUT", organizationPath+"/retention", apiKey(k.aliceKey), retentionBody(30, 30, nil)), 200, "")
	ts.run(t, []scenario{
		{name: "as the organization until set", method: "GET", path: path, cred: apiKey(k.bobKey), status: 200,
			check: func(t testing.TB, r *response) {
				d := r.data(t)
				eff := d["effective"].(map[string]any)
				if period(t, d, "text_days") != -1 || period(t, eff, "text_days") != 30 || period(t, eff, "file_days") != -1 {
					t.Fatalf("a new room's retention: %v", d)
				}
			}},
		{name: "the owner shortens events, asks more of text", method: "PUT", path: path, cred: apiKey(k.aliceKey),
			body: retentionBody(90, 7, 14), status: 200,
			check: func(t testing.TB, r *response) {
				d := r.data(t)
				eff, org := d["effective"].(map[string]any), d["organization"].(map[string]any)
				if period(t, d, "text_days") != 90 || period(t, eff, "text_days") != 30 || period(t, eff, "event_days") != 7 ||
					period(t, eff, "file_days") != 14 || period(t, org, "event_days") != 30 {
					t.Fatalf("set: %v", d)
				}
			}},
		refusalCase("a member who is not the owner", apiKey(k.bobKey), "PUT", path, retentionBody(1, 1, 1), 403, "forbidden"),
		refusalCase("someone outside the room", apiKey(k.bobKey), "GET", humanChatsPath+"/"+k.room+"/retention", nil, 404, "not_found"),
		refusalCase("someone outside the room, setting", apiKey(k.bobKey), "PUT", humanChatsPath+"/"+k.room+"/retention",
			retentionBody(1, 1, 1), 404, "not_found"),
		refusalCase("a room of nobody's", apiKey(k.aliceKey), "GET", humanChatsPath+"/"+nilID+"/retention", nil, 404, "not_found"),
		refusalCase("out of bounds", apiKey(k.aliceKey), "PUT", path, retentionBody(nil, nil, 0), 422, "validation_error", "/retention/file_days"),
		refusalCase("an agent key", apiKey(k.helperKey), "GET", path, nil, 403, "forbidden"),
	})
}

// Only an organization's admin reads the statistics, with the titles of
// the rooms they may read: another's room shows its size, not its title.
func TestRetentionStatistics(t *testing.T) {
	ts := newTestServer(t)
	k := newTeam(t, ts)
	say(t, ts, k.helperKey, k.room, k.scout.ID, "a message for the figures")
	_, bobbotKey := ts.agent(k.bob, "Bobbot")
	r := ts.do(t, "POST", agentChatsPath, apiKey(bobbotKey), map[string]any{"chat": map[string]any{"title": "Bob's plans"}})
	expect(t, r, 201, "")
	bobs := r.data(t)["id"].(string)
	expect(t, ts.do(t, "POST", agentChatsPath+"/"+bobs+"/participants", apiKey(bobbotKey), participantBody(k.bob.ID, "")), 201, "")
	say(t, ts, bobbotKey, bobs, k.bob.ID, "one")
	say(t, ts, bobbotKey, bobs, k.bob.ID, "two")
	ts.run(t, []scenario{
		{name: "an admin", method: "GET", path: organizationPath + "/stats", cred: apiKey(k.aliceKey), status: 200,
			check: func(t testing.TB, r *response) {
				d := r.data(t)
				db, org := d["database"].(map[string]any), d["organization"].(map[string]any)
				tables := db["tables"].(map[string]any)
				largest := org["largest_rooms_by_messages"].([]any)
				if db["bytes"].(float64) <= 0 || tables["messages"] != float64(3) || org["messages"] != float64(3) ||
					len(largest) != 2 || len(org["messages_per_day"].([]any)) != 30 {
					t.Fatalf("stats: %s", r.body)
				}
				theirs, ours := largest[0].(map[string]any), largest[1].(map[string]any)
				if theirs["id"] != bobs || theirs["title"] != nil || theirs["readable"] != false || theirs["messages"] != float64(2) {
					t.Fatalf("a room the admin does not read: %v", theirs)
				}
				if ours["id"] != k.room || ours["readable"] != true {
					t.Fatalf("a room the admin reads: %v", ours)
				}
			}},
		refusalCase("a person who is not an admin", apiKey(k.bobKey), "GET", organizationPath+"/stats", nil, 403, "forbidden"),
	})
}

// say posts a text message as the agent whose key is given, mentioning
// someone, and returns its id.
func say(t testing.TB, ts *testServer, key, room, mention, content string) string {
	t.Helper()
	r := ts.do(t, "POST", agentChatsPath+"/"+room+"/messages", apiKey(key),
		map[string]any{"message": map[string]any{"content": content, "mentions": []any{map[string]any{"id": mention}}}})
	expect(t, r, 201, "")
	return r.data(t)["id"].(string)
}

// Delegated tokens reach a room's retention with the chats scopes, and
// never the organization's settings or statistics.
func TestRetentionWithADelegatedToken(t *testing.T) {
	ts := newTestServer(t)
	k := newTeam(t, ts)
	tok := ts.delegatedToken(t, k.aliceKey, k.helper.ID, k.helperKey, "chats:read", "chats:write", "profile:read", "profile:write")
	room := humanChatsPath + "/" + k.room + "/retention"
	expect(t, ts.do(t, "GET", room, bearer(tok), nil), 200, "")
	expect(t, ts.do(t, "PUT", room, bearer(tok), retentionBody(nil, 3, nil)), 200, "")
	for _, c := range []struct{ method, path string }{
		{"GET", organizationPath + "/retention"}, {"PUT", organizationPath + "/retention"}, {"GET", organizationPath + "/stats"},
	} {
		ts.refused(t, c.method, c.path, bearer(tok), retentionBody(1, 1, 1), 403, "forbidden", "")
	}
}

// A setting wakes the purge: an old message goes at once, a new one stays,
// and the room's count follows.
func TestRetentionSettingStartsThePurge(t *testing.T) {
	ts := newTestServer(t)
	k := newTeam(t, ts)
	old := say(t, ts, k.helperKey, k.room, k.scout.ID, "from long ago")
	say(t, ts, k.helperKey, k.room, k.scout.ID, "from today")
	err := ts.db.Write(context.Background(), func(tx *store.Tx) error {
		_, err := tx.Exec(`UPDATE messages SET inserted_at = ? WHERE id = ?`, time.Now().Add(-48*time.Hour).UnixMicro(), old)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, ts.do(t, "PUT", humanChatsPath+"/"+k.room+"/retention", apiKey(k.aliceKey), retentionBody(1, nil, nil)), 200, "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := ts.do(t, "GET", humanChatsPath+"/"+k.room+"/messages", apiKey(k.aliceKey), nil)
		expect(t, r, 200, "")
		var contents []string
		for _, m := range r.list(t) {
			contents = append(contents, m.(map[string]any)["content"].(string))
		}
		if got := strings.Join(contents, "|"); !strings.Contains(got, "long ago") {
			if !strings.Contains(got, "from today") {
				t.Fatalf("the new message went too: %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the purge did not run after the setting")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := ts.db.PurgeStats(); st.Texts != 1 {
		t.Fatalf("purged: %+v", st)
	}
}
