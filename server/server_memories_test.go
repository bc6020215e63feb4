package server

import (
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// Memories (spec "Memory"; wire contract §3.1 and §3.2 Memories, §4
// Memory): storing, the visibility rule across two organizations, the
// listings' filters and paging, the lifecycle through both APIs, and the
// --memories switch.

// memoriesWorld: organization A holds alice (agents a1 and a2) and bob (agent
// b1); organization B holds carol (agent c1). Callers are named by those
// names; ids maps them (and stored memories, by label) to ids.
type memoriesWorld struct {
	ts   *testServer
	ids  map[string]string
	keys map[string]string
}

func isPersonLabel(who string) bool { return who == "alice" || who == "bob" || who == "carol" }

func newMemoriesWorld(t *testing.T, opts ...func(*store.Options)) *memoriesWorld {
	t.Helper()
	k := &memoriesWorld{ts: newTestServer(t, opts...), ids: map[string]string{}, keys: map[string]string{}}
	users := map[string]*store.User{}
	for _, u := range []struct{ name, org string }{{"alice", store.DefaultOrganization}, {"bob", store.DefaultOrganization}, {"carol", "globex"}} {
		user, key := k.ts.user(u.name, u.org)
		users[u.name], k.ids[u.name], k.keys[u.name] = user, user.ID, key
	}
	for _, a := range []struct{ name, owner string }{{"a1", "alice"}, {"a2", "alice"}, {"b1", "bob"}, {"c1", "carol"}} {
		agent, key := k.ts.agent(users[a.owner], "Agent "+a.name)
		k.ids[a.name], k.keys[a.name] = agent.ID, key
	}
	return k
}

func (k *memoriesWorld) cred(who string) cred { return apiKey(k.keys[who]) }

// path is a memory path in the API of who: rest is "", "/<id>" or
// "/<id>/<action>".
func (k *memoriesWorld) path(who, rest string) string {
	if isPersonLabel(who) {
		return "/api/v1/me/memories" + rest
	}
	return "/api/v1/agent/memories" + rest
}

// listingRefusal makes the scenarios of who's listing with a query refused
// 422 validation_error at a pointer.
func (k *memoriesWorld) listingRefusal(who string) func(query, pointer string) scenario {
	return func(query, pointer string) scenario {
		return refusalCase("refused "+query, k.cred(who), "GET", k.path(who, "?"+query), nil, 422, "validation_error", pointer)
	}
}

// absent removes a field from memoryBody's defaults.
var absent = &struct{}{}

// memoryBody is a valid create body with the fields of over set (or removed,
// for absent).
func memoryBody(over map[string]any) map[string]any {
	m := map[string]any{"content": "the user prefers tea", "system": "long_term", "type": "semantic", "segment": "user",
		"thought": "worth remembering"}
	for key, v := range over {
		if v == absent {
			delete(m, key)
		} else {
			m[key] = v
		}
	}
	return map[string]any{"memory": m}
}

// store stores a memory as agent who and returns it; label, when not "",
// names it in k.ids.
func (k *memoriesWorld) store(t testing.TB, who, label string, over map[string]any) map[string]any {
	t.Helper()
	r := k.ts.do(t, "POST", k.path(who, ""), k.cred(who), memoryBody(over))
	expect(t, r, 201, "")
	d := r.data(t)
	if label != "" {
		k.ids[label] = d["id"].(string)
	}
	return d
}

// ownerOf is the owner of each agent of memoriesWorld.
var ownerOf = map[string]string{"a1": "alice", "a2": "alice", "b1": "bob", "c1": "carol"}

// party is who as the Human API names a memory's source agent (typ "") or
// subject (typ "User" or "Agent").
func (k *memoriesWorld) party(who, typ string) map[string]any {
	p := map[string]any{"id": k.ids[who]}
	if owner, ok := ownerOf[who]; ok {
		p["name"], p["handle"] = "Agent "+who, owner+"/agent-"+who
	} else {
		p["name"], p["handle"] = strings.ToUpper(who[:1])+who[1:]+" Tester", who
	}
	if typ != "" {
		p["type"] = typ
	}
	return p
}

// about is the subject of a subject-scope memory.
func (k *memoriesWorld) about(who string) map[string]any {
	return map[string]any{"subject_id": k.ids[who]}
}

// list returns the ids of a listing as who (query holds filters), after
// checking that metadata and meta are the same object.
func (k *memoriesWorld) list(t testing.TB, who, query string) []string {
	t.Helper()
	r := k.ts.do(t, "GET", k.path(who, "?"+query), k.cred(who), nil)
	expect(t, r, 200, "")
	body := r.json(t)
	if !reflect.DeepEqual(body["metadata"], body["meta"]) {
		t.Fatalf("metadata %v and meta %v differ", body["metadata"], body["meta"])
	}
	var ids []string
	for _, m := range r.list(t) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	return ids
}

// labels names the ids of a listing by their labels in k.ids, sorted.
func (k *memoriesWorld) labels(ids []string) string {
	names := map[string]string{}
	for label, id := range k.ids {
		names[id] = label
	}
	out := []string{}
	for _, id := range ids {
		if n, ok := names[id]; ok {
			out = append(out, n)
		} else {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// delete sends DELETE /me/memories/{id}; its 204 is checked apart (the
// OpenAPI document gives the 204 a JSON body, which no 204 has).
func (k *memoriesWorld) delete(t testing.TB, who, id string) *response {
	t.Helper()
	return k.ts.doNoContent(t, "DELETE", k.path(who, "/"+id), k.cred(who))
}

func TestMemoryCreate(t *testing.T) {
	t.Parallel() // its own server and database
	k := newMemoriesWorld(t)
	roomID := k.ts.room(t, k.keys["a1"])
	foreignRoomID := k.ts.room(t, k.keys["b1"])

	t.Run("about a subject", func(t *testing.T) { memoryAboutASubject(t, k) })
	t.Run("organization-wide, with metadata and a room", func(t *testing.T) {
		ref := k.store(t, "a1", "", k.about("alice"))["id"].(string)
		d := k.store(t, "a1", "", map[string]any{"scope": "organization", "system": "sensory", "type": "echoic", "segment": "guideline",
			"chat_room_id": roomID, "metadata": map[string]any{"tags": []any{" team ", "lunch"}, "references": []any{ref}}})
		if d["scope"] != "organization" || d["subject_id"] != nil || d["chat_room_id"] != roomID {
			t.Errorf("stored %v", d)
		}
		if got := string(mustJSON(t, d["metadata"])); got != `{"references":["`+ref+`"],"tags":["team","lunch"]}` {
			t.Errorf("metadata = %s", got)
		}
	})
	t.Run("about itself, and about an agent of another person of the organization", func(t *testing.T) {
		k.store(t, "a1", "", k.about("a1"))
		k.store(t, "a1", "", k.about("b1"))
	})

	k.ts.run(t, memoryCreateRefusals(k, foreignRoomID))
	t.Run("unknown fields", func(t *testing.T) {
		k.ts.refused(t, "POST", k.path("a1", ""), k.cred("a1"), memoryBody(map[string]any{"scope": "organization", "importance": 3}),
			400, "unknown_field", "/memory/importance")
		body := memoryBody(map[string]any{"scope": "organization"})
		body["agent_id"] = k.ids["a1"]
		k.ts.refused(t, "POST", k.path("a1", ""), k.cred("a1"), body, 400, "unknown_field", "/agent_id")
		k.ts.refused(t, "POST", k.path("a1", ""), k.cred("a1"), `{"memory":`, 400, "invalid_json", "")
	})
}

func memoryAboutASubject(t *testing.T, k *memoriesWorld) {
	d := k.store(t, "a1", "", map[string]any{"content": "  likes green tea\nin the morning  ", "subject_id": k.ids["alice"]})
	want := map[string]any{"content": "likes green tea\nin the morning", "system": "long_term", "type": "semantic", "segment": "user",
		"scope": "subject", "status": "active", "thought": "worth remembering", "subject_id": k.ids["alice"],
		"source_agent_id": k.ids["a1"], "chat_room_id": nil, "metadata": nil, "superseded_by": nil}
	for key, v := range want {
		if !reflect.DeepEqual(d[key], v) {
			t.Errorf("%s = %#v, want %#v", key, d[key], v)
		}
	}
	for _, key := range []string{"id", "organization_id", "inserted_at", "updated_at"} {
		if s, _ := d[key].(string); s == "" {
			t.Errorf("%s missing in %v", key, d)
		}
	}
	// The same memory reads back through both APIs; the Human API adds
	// the names of its source agent and subject.
	if _, ok := d["source_agent"]; ok {
		t.Errorf("the Agent API names the source agent: %v", d)
	}
	r := k.ts.do(t, "GET", k.path("a1", "/"+d["id"].(string)), k.cred("a1"), nil)
	expect(t, r, 200, "")
	if !reflect.DeepEqual(r.data(t), d) {
		t.Errorf("a1 reads %v, want %v", r.data(t), d)
	}
	human := map[string]any{"source_agent": k.party("a1", ""), "subject": k.party("alice", "User")}
	for key, v := range d {
		human[key] = v
	}
	r = k.ts.do(t, "GET", k.path("alice", "/"+d["id"].(string)), k.cred("alice"), nil)
	expect(t, r, 200, "")
	if !reflect.DeepEqual(r.data(t), human) {
		t.Errorf("alice reads %v, want %v", r.data(t), human)
	}
}

// memoryCreateRefusals are the 422 refusals of a memory a1 stores;
// foreignRoomID is a room a1 cannot read.
func memoryCreateRefusals(k *memoriesWorld, foreignRoomID string) []scenario {
	tags := make([]any, 33)
	for i := range tags {
		tags[i] = "t"
	}
	refs := make([]any, 33)
	for i := range refs {
		refs[i] = nilID
	}
	invalid := func(name string, body any, pointer string) scenario {
		return refusalCase(name, k.cred("a1"), "POST", k.path("a1", ""), body, 422, "validation_error", pointer)
	}
	return []scenario{
		invalid("no memory", map[string]any{}, "/memory"),
		invalid("memory null", map[string]any{"memory": nil}, "/memory"),
		invalid("no content", memoryBody(map[string]any{"content": absent}), "/memory/content"),
		invalid("blank content", memoryBody(map[string]any{"content": " \n\t "}), "/memory/content"),
		invalid("content too long", memoryBody(map[string]any{"content": strings.Repeat("é", store.MaxMemoryContent+1)}), "/memory/content"),
		invalid("content not a string", memoryBody(map[string]any{"content": 42}), "/memory/content"),
		invalid("content with a NUL", memoryBody(map[string]any{"content": "a\x00b"}), "/memory/content"),
		invalid("no system", memoryBody(map[string]any{"system": absent}), "/memory/system"),
		invalid("unknown system", memoryBody(map[string]any{"system": "short_term"}), "/memory/system"),
		invalid("no type", memoryBody(map[string]any{"type": absent}), "/memory/type"),
		invalid("unknown type", memoryBody(map[string]any{"type": "vivid"}), "/memory/type"),
		invalid("sensory with a semantic type", memoryBody(map[string]any{"system": "sensory", "type": "semantic"}), "/memory/type"),
		invalid("working with a sensory type", memoryBody(map[string]any{"system": "working", "type": "iconic"}), "/memory/type"),
		invalid("long_term with a sensory type", memoryBody(map[string]any{"type": "haptic"}), "/memory/type"),
		invalid("no segment", memoryBody(map[string]any{"segment": absent}), "/memory/segment"),
		invalid("unknown segment", memoryBody(map[string]any{"segment": "system"}), "/memory/segment"),
		invalid("no thought", memoryBody(map[string]any{"thought": absent}), "/memory/thought"),
		invalid("thought too long", memoryBody(map[string]any{"thought": strings.Repeat("x", store.MaxMemoryThought+1)}), "/memory/thought"),
		invalid("unknown scope", memoryBody(map[string]any{"scope": "self"}), "/memory/scope"),
		invalid("agent scope with a subject", memoryBody(map[string]any{"scope": "agent", "subject_id": k.ids["a1"]}), "/memory/subject_id"),
		invalid("subject scope without a subject", memoryBody(nil), "/memory/subject_id"),
		invalid("subject id not a UUID", memoryBody(map[string]any{"subject_id": "alice"}), "/memory/subject_id"),
		invalid("subject who does not exist", memoryBody(map[string]any{"subject_id": nilID}), "/memory/subject_id"),
		invalid("subject of another organization", memoryBody(k.about("carol")), "/memory/subject_id"),
		invalid("agent subject of another organization", memoryBody(k.about("c1")), "/memory/subject_id"),
		invalid("organization scope with a subject", memoryBody(map[string]any{"scope": "organization", "subject_id": k.ids["alice"]}), "/memory/subject_id"),
		invalid("room not readable", memoryBody(map[string]any{"scope": "organization", "chat_room_id": foreignRoomID}), "/memory/chat_room_id"),
		invalid("room that does not exist", memoryBody(map[string]any{"scope": "organization", "chat_room_id": nilID}), "/memory/chat_room_id"),
		invalid("room id not a UUID", memoryBody(map[string]any{"scope": "organization", "chat_room_id": "lobby"}), "/memory/chat_room_id"),
		invalid("metadata not an object", memoryBody(map[string]any{"scope": "organization", "metadata": []any{"x"}}), "/memory/metadata"),
		invalid("metadata with another key", memoryBody(map[string]any{"scope": "organization", "metadata": map[string]any{"source": "chat"}}), "/memory/metadata/source"),
		invalid("tags not strings", memoryBody(map[string]any{"scope": "organization", "metadata": map[string]any{"tags": []any{1}}}), "/memory/metadata/tags"),
		invalid("too many tags", memoryBody(map[string]any{"scope": "organization", "metadata": map[string]any{"tags": tags}}), "/memory/metadata/tags"),
		invalid("blank tag", memoryBody(map[string]any{"scope": "organization", "metadata": map[string]any{"tags": []any{"ok", " "}}}), "/memory/metadata/tags/1"),
		invalid("tag too long", memoryBody(map[string]any{"scope": "organization", "metadata": map[string]any{"tags": []any{strings.Repeat("t", 65)}}}), "/memory/metadata/tags/0"),
		invalid("reference not a UUID", memoryBody(map[string]any{"scope": "organization", "metadata": map[string]any{"references": []any{"m1"}}}), "/memory/metadata/references/0"),
		invalid("too many references", memoryBody(map[string]any{"scope": "organization", "metadata": map[string]any{"references": refs}}), "/memory/metadata/references"),
	}
}

func TestMemoryQuota(t *testing.T) {
	k := newMemoriesWorld(t, func(o *store.Options) { o.Limits.MemoriesPerAgent = 2 })
	first := k.store(t, "a1", "", k.about("alice"))["id"].(string)
	k.store(t, "a1", "", k.about("alice"))
	r := k.ts.refused(t, "POST", k.path("a1", ""), k.cred("a1"), memoryBody(k.about("alice")), 403, "limit_reached", "")
	details := errorDetails(t, r)
	if details["resource"] != "memories" || details["limit"] != 2.0 || details["current"] != 2.0 {
		t.Errorf("details = %v", details)
	}
	// A replacement counts too: superseding with one is refused whole.
	k.ts.refused(t, "POST", k.path("a1", "/"+first+"/supersede"), k.cred("a1"), memoryBody(k.about("alice")), 403, "limit_reached", "")
	// The quota is per agent, and counts what is stored, whatever its status.
	k.store(t, "a2", "", k.about("alice"))
	expect(t, k.ts.do(t, "POST", k.path("a1", "/"+first+"/archive"), k.cred("a1"), nil), 200, "")
	k.ts.refused(t, "POST", k.path("a1", ""), k.cred("a1"), memoryBody(k.about("alice")), 403, "limit_reached", "")
	expect(t, k.delete(t, "alice", first), 204, "")
	k.store(t, "a1", "", k.about("alice"))
}

// The visibility rule across two organizations: each caller lists exactly
// the memories it sees and reads those (404 for the others).
func TestMemoryVisibility(t *testing.T) {
	k := newMemoriesWorld(t)
	org := map[string]any{"scope": "organization"}
	memories := []struct {
		label, by string
		over      map[string]any
		seenBy    string
	}{
		{"orgA", "a1", org, "alice bob a1 a2 b1"},
		{"a1-about-alice", "a1", k.about("alice"), "alice a1 a2"},
		{"a1-about-b1", "a1", k.about("b1"), "alice bob a1 a2 b1"},
		{"a2-about-a1", "a2", k.about("a1"), "alice a1 a2"},
		{"b1-about-bob", "b1", k.about("bob"), "bob b1"},
		{"b1-about-b1", "b1", k.about("b1"), "bob b1"},
		{"b1-about-alice", "b1", k.about("alice"), "alice bob b1"},
		{"b1-about-a2", "b1", k.about("a2"), "alice bob a2 b1"},
		{"orgB", "c1", org, "carol c1"},
		{"c1-about-carol", "c1", k.about("carol"), "carol c1"},
		{"c1-about-c1", "c1", k.about("c1"), "carol c1"},
	}
	for _, m := range memories {
		k.store(t, m.by, m.label, m.over)
	}
	for _, who := range []string{"alice", "bob", "carol", "a1", "a2", "b1", "c1"} {
		t.Run(who, func(t *testing.T) {
			listed := " " + k.labels(k.list(t, who, "status=all&limit=100")) + " "
			for _, m := range memories {
				sees := strings.Contains(" "+m.seenBy+" ", " "+who+" ")
				if strings.Contains(listed, " "+m.label+" ") != sees {
					t.Errorf("%s lists %s: %v, want %v", who, m.label, !sees, sees)
				}
				r := k.ts.do(t, "GET", k.path(who, "/"+k.ids[m.label]), k.cred(who), nil)
				if sees {
					expect(t, r, 200, "")
				} else {
					expect(t, r, 404, "not_found")
				}
			}
		})
	}
	// Ids that are no memory at all read as missing, like invisible ones; an
	// id in upper case is the same id (RFC 9562), but not in braces.
	for _, who := range []string{"a1", "alice"} {
		r := k.ts.do(t, "GET", k.path(who, "/"+strings.ToUpper(k.ids["orgA"])), k.cred(who), nil)
		if expect(t, r, 200, ""); r.data(t)["id"] != k.ids["orgA"] {
			t.Fatalf("%s reads %v by the upper-case id of %s", who, r.data(t)["id"], k.ids["orgA"])
		}
	}
	for _, id := range []string{nilID, "nope", "{" + k.ids["orgA"] + "}"} {
		expect(t, k.ts.do(t, "GET", k.path("a1", "/"+url.PathEscape(id)), k.cred("a1"), nil), 404, "not_found")
		expect(t, k.ts.do(t, "GET", k.path("alice", "/"+url.PathEscape(id)), k.cred("alice"), nil), 404, "not_found")
	}
}

// On the Human API a memory names its source agent and its subject
// (chatd's source_agent and subject), in every answer that carries it; the
// Agent API does not. A deleted agent is named by no one: its own memories
// go with it, and a memory about it keeps subject_id with a null subject.
// A name never comes from another organization: the API stores nothing
// across organizations, so the states where a memory points there are
// written by hand, and even then no name or handle of theirs comes out.
func TestMemoryNames(t *testing.T) {
	k := newMemoriesWorld(t)
	org := map[string]any{"scope": "organization"}
	gone, goneKey := k.ts.agent(mustUser(t, k, "alice"), "Agent gone")
	k.ids["gone"], k.keys["gone"] = gone.ID, goneKey
	k.store(t, "a1", "a1-about-alice", k.about("alice"))
	k.store(t, "a1", "orgA", org)
	k.store(t, "b1", "b1-about-alice", k.about("alice"))
	k.store(t, "a1", "a1-about-b1", k.about("b1"))
	k.store(t, "b1", "b1-about-a2", k.about("a2"))
	k.store(t, "a2", "by-a2", org)
	k.store(t, "gone", "by-gone", k.about("alice"))
	k.store(t, "a1", "foreign-subject", k.about("alice"))
	k.store(t, "a1", "foreign-source", org)
	k.store(t, "c1", "c1-about-carol", k.about("carol"))
	k.store(t, "c1", "orgB", org)

	// a2 is deleted as the API deletes agents: the memories it stored go,
	// the one about it stays. gone is deleted by hand, keeping its memory,
	// which the API never does.
	if _, err := k.ts.db.DeleteAgent(t.Context(), mustUser(t, k, "alice"), k.ids["a2"], false); err != nil {
		t.Fatal(err)
	}
	k.ts.exec(t, `UPDATE agents SET deleted_at = updated_at WHERE id = ?`, k.ids["gone"])
	k.ts.exec(t, `UPDATE memories SET subject_id = ? WHERE id = ?`, k.ids["carol"], k.ids["foreign-subject"])
	k.ts.exec(t, `UPDATE memories SET source_agent_id = ? WHERE id = ?`, k.ids["c1"], k.ids["foreign-source"])

	for _, tc := range []memoryNaming{
		{"alice", "a1-about-alice", "", 200, k.party("a1", ""), k.party("alice", "User")},
		{"alice", "orgA", "", 200, k.party("a1", ""), nil},
		{"bob", "orgA", "", 200, k.party("a1", ""), nil},
		{"alice", "b1-about-alice", "", 200, k.party("b1", ""), k.party("alice", "User")},
		{"bob", "b1-about-alice", "", 200, k.party("b1", ""), k.party("alice", "User")},
		{"alice", "a1-about-b1", "", 200, k.party("a1", ""), k.party("b1", "Agent")},
		{"bob", "a1-about-b1", "", 200, k.party("a1", ""), k.party("b1", "Agent")},
		{"alice", "b1-about-a2", "", 200, k.party("b1", ""), nil},
		{"bob", "b1-about-a2", "", 200, k.party("b1", ""), nil},
		{"alice", "by-a2", "", 404, nil, nil},
		{"alice", "by-gone", "", 200, nil, k.party("alice", "User")},
		{"alice", "foreign-subject", "", 200, k.party("a1", ""), nil},
		{"alice", "foreign-source", "", 200, nil, nil},
		{"bob", "foreign-source", "", 200, nil, nil},
		{"carol", "a1-about-alice", "", 404, nil, nil},
		{"carol", "foreign-source", "", 404, nil, nil},
		{"carol", "c1-about-carol", "", 200, k.party("c1", ""), k.party("carol", "User")},
		{"carol", "orgB", "", 200, k.party("c1", ""), nil},
		{"a1", "a1-about-alice", "", 200, absent, absent},
		{"b1", "a1-about-b1", "", 200, absent, absent},
		{"a1", "orgA", "archive", 200, absent, absent},
		{"alice", "a1-about-alice", "archive", 200, k.party("a1", ""), k.party("alice", "User")},
		{"alice", "a1-about-alice", "restore", 200, k.party("a1", ""), k.party("alice", "User")},
		{"alice", "a1-about-alice", "supersede", 200, k.party("a1", ""), k.party("alice", "User")},
		{"alice", "by-gone", "archive", 200, nil, k.party("alice", "User")},
		{"a1", "foreign-subject", "supersede", 200, absent, absent},
	} {
		t.Run(strings.TrimSpace(tc.who+" "+tc.action+" "+tc.label), func(t *testing.T) { k.checkNaming(t, tc) })
	}

	// Listings name the same: every item of each person's listing names
	// its source agent and subject as reading it does.
	t.Run("listings name as reading does", func(t *testing.T) { memoryListingsNameAsReadingDoes(t, k) })

	// Nothing of organization B reaches organization A, and nothing of A
	// reaches B, in any answer: no name, no handle (an agent's handle
	// starts with its owner's).
	t.Run("no name of one organization reaches the other", func(t *testing.T) { memoryNamesStayInTheirOrganization(t, k) })
}

func memoryListingsNameAsReadingDoes(t *testing.T, k *memoriesWorld) {
	for _, who := range []string{"alice", "bob", "carol"} {
		t.Run("listed by "+who, func(t *testing.T) {
			r := k.ts.do(t, "GET", k.path(who, "?status=all&limit=100"), k.cred(who), nil)
			expect(t, r, 200, "")
			for _, item := range r.list(t) {
				m := item.(map[string]any)
				one := k.ts.do(t, "GET", k.path(who, "/"+m["id"].(string)), k.cred(who), nil)
				expect(t, one, 200, "")
				d := one.data(t)
				for _, key := range []string{"source_agent", "subject"} {
					if _, ok := m[key]; !ok || !reflect.DeepEqual(m[key], d[key]) {
						t.Errorf("%s lists %s with %s %v, reads %v", who, m["id"], key, m[key], d[key])
					}
				}
			}
		})
	}
}

func memoryNamesStayInTheirOrganization(t *testing.T, k *memoriesWorld) {
	leaks := map[string][]string{
		"alice": {"Carol", "carol", "Agent c1"},
		"bob":   {"Carol", "carol", "Agent c1"},
		"carol": {"Alice", "alice", "Bob", "bob", "Agent a1", "Agent b1", "Agent gone"},
	}
	for who, words := range leaks {
		var bodies []string
		r := k.ts.do(t, "GET", k.path(who, "?status=all&limit=100"), k.cred(who), nil)
		expect(t, r, 200, "")
		bodies = append(bodies, string(r.body))
		for _, label := range []string{"foreign-subject", "foreign-source", "orgA", "orgB", "c1-about-carol"} {
			if r := k.ts.do(t, "GET", k.path(who, "/"+k.ids[label]), k.cred(who), nil); r.status == 200 {
				bodies = append(bodies, string(r.body))
			}
		}
		for _, body := range bodies {
			for _, w := range words {
				if strings.Contains(body, w) {
					t.Errorf("%s is answered %q, which holds %q", who, body, w)
				}
			}
		}
	}
}

// memoryNaming is how who reads (or archives, restores, supersedes: action)
// the memory labelled label: the status, and the source agent and subject
// it names (nil: null; absent: not in the answer).
type memoryNaming struct {
	who, label, action string
	status             int
	source, subject    any
}

func (k *memoriesWorld) checkNaming(t *testing.T, tc memoryNaming) {
	method, rest := "GET", "/"+k.ids[tc.label]
	if tc.action != "" {
		method, rest = "POST", rest+"/"+tc.action
	}
	r := k.ts.do(t, method, k.path(tc.who, rest), k.cred(tc.who), nil)
	if tc.status != 200 {
		expect(t, r, tc.status, "not_found")
		return
	}
	expect(t, r, 200, "")
	d := r.data(t)
	if d["id"] != k.ids[tc.label] {
		t.Fatalf("answered %v", d)
	}
	for key, want := range map[string]any{"source_agent": tc.source, "subject": tc.subject} {
		got, ok := d[key]
		switch {
		case want == absent && ok:
			t.Errorf("%s = %v, want it absent", key, got)
		case want != absent && !ok:
			t.Errorf("%s is absent, want %v", key, want)
		case want != absent && !reflect.DeepEqual(got, want):
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
}

func TestMemoryAgentFilters(t *testing.T) {
	k := newMemoriesWorld(t)
	k.store(t, "a1", "m1", map[string]any{"content": "alpha bravo", "system": "working", "type": "episodic", "subject_id": k.ids["alice"]})
	k.store(t, "a1", "m2", map[string]any{"content": "Alpha charlie", "system": "sensory", "type": "iconic", "segment": "tool", "scope": "organization"})
	k.store(t, "a1", "m3", map[string]any{"content": "delta", "type": "procedural", "segment": "guideline", "subject_id": k.ids["a2"]})
	k.store(t, "a1", "m4", map[string]any{"content": "echo álpha", "segment": "agent", "subject_id": k.ids["alice"]})
	k.store(t, "b1", "fox", map[string]any{"content": "foxtrot alpha", "scope": "organization"})
	k.store(t, "b1", "hidden", map[string]any{"content": "alpha hidden", "subject_id": k.ids["bob"]})
	k.store(t, "c1", "foreign", map[string]any{"content": "alpha foreign", "scope": "organization"})
	expect(t, k.ts.do(t, "POST", k.path("a1", "/"+k.ids["m3"]+"/archive"), k.cred("a1"), nil), 200, "")
	expect(t, k.ts.do(t, "POST", k.path("a1", "/"+k.ids["m4"]+"/supersede"), k.cred("a1"), nil), 200, "")

	for _, tc := range []struct{ query, want string }{
		{"", "fox m1 m2"},
		{"status=active", "fox m1 m2"},
		{"status=all", "fox m1 m2 m3 m4"},
		{"status=archived", "m3"},
		{"status=superseded", "m4"},
		{"system=sensory", "m2"},
		{"system=long_term&status=all", "fox m3 m4"},
		{"type=episodic", "m1"},
		{"segment=guideline&status=all", "m3"},
		{"segment=tool&system=sensory&type=iconic", "m2"},
		{"scope=organization", "fox m2"},
		{"scope=all", "fox m1 m2"},
		{"scope=subject&subject_id=" + k.ids["alice"], "m1"},
		{"scope=subject&subject_id=" + k.ids["alice"] + "&status=all", "m1 m4"},
		{"scope=subject&subject_id=" + strings.ToUpper(k.ids["alice"]), "m1"},
		{"subject_id=" + k.ids["alice"], "fox m1 m2"},
		{"scope=all&subject_id=" + k.ids["alice"], "fox m1 m2"},
		{"subject_id=" + k.ids["a2"] + "&status=archived", "m3"},
		{"scope=subject&subject_id=" + k.ids["bob"], ""},
		{"scope=subject&subject_id=" + k.ids["carol"], ""},
		{"subject_id=" + k.ids["carol"], "fox m2"},
		{"content_query=alpha", "fox m1 m2"},
		{"content_query=ALPHA&status=all", "fox m1 m2 m4"},
		{"content_query=alpha+bravo", "m1"},
		{"content_query=bravo+alpha", "m1"},
		{"content_query=alp*", "fox m1 m2"},
		{"content_query=alpha+OR+delta&status=all", ""},
		{"content_query=delta&status=all&segment=guideline", "m3"},
		{"content_query=foreign", ""},
		{"content_query=hidden", ""},
	} {
		t.Run(tc.query, func(t *testing.T) {
			if got := k.labels(k.list(t, "a1", tc.query)); got != tc.want {
				t.Errorf("a1 lists %q, want %q", got, tc.want)
			}
		})
	}
	refused := k.listingRefusal("a1")
	k.ts.run(t, []scenario{
		// a1
		refused("scope=self", "/scope"),
		refused("scope=about_me", "/scope"),
		refused("scope=subject", "/subject_id"),
		refused("scope=subject&subject_id=", "/subject_id"),
		refused("subject_id=alice", "/subject_id"),
		refused("system=short_term", "/system"),
		refused("type=vivid", "/type"),
		refused("segment=system", "/segment"),
		refused("status=deleted", "/status"),
		refused("status=", "/status"),
		refused("content_query=", "/content_query"),
		refused("content_query=+%09+", "/content_query"),
		refused("content_query=%00", "/content_query"),
		refused("content_query=%ff", "/content_query"),
		refused("content_query="+strings.Repeat("a", 1001), "/content_query"),
		refused("content_query="+strings.Repeat("a+", 33), "/content_query"),
		refused("limit=0", "/limit"),
		refused("limit=101", "/limit"),
		refused("page_size=51", "/page_size"),
		refused("page=0", "/page"),
	})
}

// No content_query is an FTS syntax error: every input answers 200 or 422.
func TestMemorySearchOddInputs(t *testing.T) {
	t.Parallel() // its own server and database
	k := newMemoriesWorld(t)
	k.store(t, "a1", "plain", map[string]any{"content": `he said "NEAR(a b)" OR -not * col:x`, "scope": "organization"})
	inputs := []string{`"`, `""`, `"""`, `*`, `**`, `"*`, `NEAR(`, `NEAR(a b, 2)`, `-`, `-a`, `a OR`, `OR`, `AND`, `NOT`, `a AND NOT b`,
		`(`, `)`, `()`, `{content}: a`, `content:a`, `col:x`, `^a`, `a + b`, `'`, `\`, `%`, `_`, `a*b`, `*a`, `a"b`, `é`, `𝕏`, "\u200b",
		`NEAR`, `said "near(a`, "a\u00a0b", `;DROP TABLE memories;--`, `'); SELECT 1; --`}
	for _, in := range inputs {
		for _, who := range []string{"a1", "alice"} {
			r := k.ts.do(t, "GET", k.path(who, "?status=all&content_query="+url.QueryEscape(in)), k.cred(who), nil)
			if r.status != 200 && r.status != 422 {
				t.Errorf("%s content_query %q: %d %s", who, in, r.status, r.body)
			}
		}
	}
	// Operators are plain words: the memory holding them is found by them.
	for _, in := range []string{`NEAR(a`, `OR`, `"near`, `col:x`, `-not`, `NEAR(a b)" or`} {
		if got := k.labels(k.list(t, "a1", "content_query="+url.QueryEscape(in))); got != "plain" {
			t.Errorf("content_query %q lists %q, want plain", in, got)
		}
	}
}

func TestMemoryPaging(t *testing.T) {
	t.Parallel() // its own server and database
	k := newMemoriesWorld(t)
	var want []string // newest first
	for i := 0; i < 25; i++ {
		id := k.store(t, "a1", "", k.about("alice"))["id"].(string)
		want = append([]string{id}, want...)
	}
	for _, who := range []string{"a1", "alice"} {
		k.checkPaging(t, who, want)
	}
	// A cursor belongs to its listing.
	agentCursor := k.ts.do(t, "GET", k.path("a1", "?limit=5"), k.cred("a1"), nil).meta(t)["next_cursor"].(string)
	k.ts.refused(t, "GET", k.path("alice", "?cursor="+url.QueryEscape(agentCursor)), k.cred("alice"), nil, 422, "invalid_cursor", "/cursor")
}

// checkPaging pages through who's memories, want (newest first), by
// cursor and by the legacy page and page_size, and has the mixes refused.
func (k *memoriesWorld) checkPaging(t *testing.T, who string, want []string) {
	t.Run(who+" cursor", func(t *testing.T) {
		got := k.ts.walkPages(t, k.path(who, ""), "limit=7", k.cred(who), func(r *response) string {
			body := r.json(t)
			if !reflect.DeepEqual(body["metadata"], body["meta"]) {
				t.Errorf("metadata %v and meta %v differ", body["metadata"], body["meta"])
			}
			if r.header.Get("Deprecation") != "" {
				t.Errorf("cursor paging is not deprecated")
			}
			return listedValues(t, r, "id")
		})
		if pages := strings.Split(got, "|"); len(pages) != 4 || strings.Join(pages, ",") != strings.Join(want, ",") {
			t.Errorf("pages %s\nwant %s", got, strings.Join(want, ","))
		}
		all := k.list(t, who, "limit=100")
		if strings.Join(all, ",") != strings.Join(want, ",") {
			t.Errorf("limit=100 lists %v", all)
		}
	})
	t.Run(who+" legacy", func(t *testing.T) {
		var got []string
		for page := 1; page <= 4; page++ {
			r := k.ts.do(t, "GET", k.path(who, "?page_size=10&page="+strconv.Itoa(page)), k.cred(who), nil)
			expect(t, r, 200, "")
			if r.header.Get("Deprecation") == "" || r.header.Get("Sunset") == "" {
				t.Errorf("page %d: no Deprecation and Sunset headers", page)
			}
			body := r.json(t)
			m := r.meta(t)
			if !reflect.DeepEqual(m, body["meta"]) {
				t.Errorf("metadata %v and meta %v differ", m, body["meta"])
			}
			if m["page"] != float64(page) || m["page_size"] != 10.0 || m["total_count"] != 25.0 || m["total_pages"] != 3.0 {
				t.Errorf("page %d metadata %v", page, m)
			}
			if _, ok := m["has_more"]; !ok {
				t.Errorf("page %d metadata lacks the cursor fields: %v", page, m)
			}
			if s := listedValues(t, r, "id"); s != "" {
				got = append(got, s)
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("pages %v\nwant %v", got, want)
		}
		r := k.ts.do(t, "GET", k.path(who, "?page_size=50"), k.cred(who), nil)
		expect(t, r, 200, "")
		if n := len(r.list(t)); n != 25 {
			t.Errorf("page_size=50 lists %d", n)
		}
	})
	t.Run(who+" refused", func(t *testing.T) {
		first := k.ts.do(t, "GET", k.path(who, "?limit=5"), k.cred(who), nil)
		cursor := first.meta(t)["next_cursor"].(string)
		refused := func(query, code string, pointers ...string) scenario {
			return refusalCase(query, k.cred(who), "GET", k.path(who, "?"+query), nil, 422, code, pointers...)
		}
		k.ts.run(t, []scenario{
			refused("page_size=51", "validation_error", "/page_size"),
			refused("page=1&limit=5", "validation_error"),
			refused("page_size=5&cursor="+url.QueryEscape(cursor), "validation_error"),
			refused("cursor=nonsense", "invalid_cursor", "/cursor"),
			refused("cursor="+url.QueryEscape(cursor[:len(cursor)-2]), "invalid_cursor", "/cursor"),
		})
	})
}

func TestMemoryHumanFilters(t *testing.T) {
	t.Parallel() // its own server and database
	k := newMemoriesWorld(t)
	mine := k.ts.do(t, "POST", "/api/v1/agent/chats", k.cred("a1"), map[string]any{}) // alice reads it through a1
	expect(t, mine, 201, "")
	theirs := k.ts.do(t, "POST", "/api/v1/agent/chats", k.cred("b1"), map[string]any{})
	expect(t, theirs, 201, "")
	mineID, theirsID := mine.data(t)["id"].(string), theirs.data(t)["id"].(string)

	k.store(t, "a1", "about-alice", map[string]any{"content": "tea", "subject_id": k.ids["alice"]})
	k.store(t, "b1", "b1-about-alice", map[string]any{"content": "coffee", "system": "sensory", "type": "haptic", "subject_id": k.ids["alice"]})
	k.store(t, "a1", "about-a1", map[string]any{"content": "tea", "subject_id": k.ids["a1"], "chat_room_id": mineID})
	k.store(t, "b1", "orgA-in-their-room", map[string]any{"content": "water", "scope": "organization", "chat_room_id": theirsID})
	k.store(t, "a2", "orgA", map[string]any{"content": "juice", "scope": "organization"})
	k.store(t, "b1", "about-bob", map[string]any{"content": "tea", "subject_id": k.ids["bob"]})
	k.store(t, "c1", "orgB", map[string]any{"content": "tea", "scope": "organization"})
	expect(t, k.ts.do(t, "POST", k.path("alice", "/"+k.ids["about-alice"]+"/archive"), k.cred("alice"), nil), 200, "")

	for _, tc := range []struct{ who, query, want string }{
		{"alice", "", "about-a1 b1-about-alice orgA orgA-in-their-room"},
		{"alice", "scope=all&status=all", "about-a1 about-alice b1-about-alice orgA orgA-in-their-room"},
		{"alice", "scope=about_me&status=all", "about-alice b1-about-alice"},
		{"alice", "scope=about_me", "b1-about-alice"},
		{"alice", "scope=organization", "orgA orgA-in-their-room"},
		{"alice", "scope=room", "about-a1"},
		{"alice", "scope=room&chat_room_id=" + mineID, "about-a1"},
		{"alice", "scope=room&chat_room_id=" + theirsID, ""},
		{"alice", "chat_room_id=" + theirsID, "orgA-in-their-room"},
		{"alice", "chat_room_id=" + nilID, ""},
		{"alice", "system=sensory", "b1-about-alice"},
		{"alice", "content_query=tea&status=all", "about-a1 about-alice"},
		{"alice", "status=archived", "about-alice"},
		{"bob", "", "about-bob b1-about-alice orgA orgA-in-their-room"},
		{"bob", "scope=room", "orgA-in-their-room"},
		{"bob", "scope=about_me", "about-bob"},
		{"carol", "", "orgB"},
		{"carol", "scope=about_me", ""},
		{"carol", "chat_room_id=" + theirsID, ""},
	} {
		t.Run(tc.who+" "+tc.query, func(t *testing.T) {
			if got := k.labels(k.list(t, tc.who, tc.query)); got != tc.want {
				t.Errorf("%s lists %q, want %q", tc.who, got, tc.want)
			}
		})
	}
	refused := k.listingRefusal("alice")
	k.ts.run(t, []scenario{
		// alice
		refused("scope=subject", "/scope"),
		refused("scope=mine", "/scope"),
		refused("chat_room_id=lobby", "/chat_room_id"),
		refused("status=gone", "/status"),
		refused("type=x", "/type"),
		refused("content_query=%20", "/content_query"),
		refused("limit=101", "/limit"),
	})
}

func TestMemoryAgentLifecycle(t *testing.T) {
	t.Parallel() // its own server and database
	k := newMemoriesWorld(t)
	mem := k.store(t, "a1", "m", k.about("alice"))
	id := mem["id"].(string)
	act := func(who, action string, body any) *response {
		return k.ts.do(t, "POST", k.path(who, "/"+id+"/"+action), k.cred(who), body)
	}

	// Only the source agent changes a memory: a2 sees it (403), b1 and c1
	// do not (404).
	for _, action := range []string{"archive", "supersede"} {
		k.ts.refused(t, "POST", k.path("a2", "/"+id+"/"+action), k.cred("a2"), nil, 403, "forbidden", "")
		k.ts.refused(t, "POST", k.path("b1", "/"+id+"/"+action), k.cred("b1"), nil, 404, "not_found", "")
		k.ts.refused(t, "POST", k.path("c1", "/"+id+"/"+action), k.cred("c1"), nil, 404, "not_found", "")
		k.ts.refused(t, "POST", k.path("a1", "/"+nilID+"/"+action), k.cred("a1"), nil, 404, "not_found", "")
		k.ts.refused(t, "POST", k.path("a1", "/nope/"+action), k.cred("a1"), nil, 404, "not_found", "")
		k.ts.refused(t, "POST", k.path("a1", "/"+id+"/"+action), k.cred("a1"), map[string]any{"reason": "old"}, 400, "unknown_field", "/reason")
	}

	time.Sleep(2 * time.Millisecond)
	r := act("a1", "archive", nil)
	expect(t, r, 200, "")
	archived := r.data(t)
	if archived["status"] != "archived" || !(archived["updated_at"].(string) > mem["updated_at"].(string)) {
		t.Fatalf("archived: %v", archived)
	}
	// Archiving again changes nothing.
	before := k.ts.snapshot(t)
	r = act("a1", "archive", map[string]any{})
	expect(t, r, 200, "")
	if !reflect.DeepEqual(r.data(t), archived) {
		t.Errorf("archived again: %v, want %v", r.data(t), archived)
	}
	k.ts.unchanged(t, before)

	// An archived memory can be superseded; then it is final.
	r = act("a1", "supersede", nil)
	expect(t, r, 200, "")
	if d := r.data(t); d["status"] != "superseded" || d["superseded_by"] != nil {
		t.Fatalf("superseded: %v", d)
	}
	k.ts.refused(t, "POST", k.path("a1", "/"+id+"/supersede"), k.cred("a1"), nil, 409, "conflict", "")
	k.ts.refused(t, "POST", k.path("a1", "/"+id+"/supersede"), k.cred("a1"), memoryBody(k.about("alice")), 409, "conflict", "")
	k.ts.refused(t, "POST", k.path("a1", "/"+id+"/archive"), k.cred("a1"), nil, 422, "validation_error", "")
}

// scope "agent" (newer servers accept it) is a memory an agent keeps about
// itself: stored and answered as a subject memory whose subject is the
// storing agent, so every client reads a documented scope; scope=agent
// lists the memories about the caller.
func TestMemoryAgentScope(t *testing.T) {
	t.Parallel() // its own server and database
	k := newMemoriesWorld(t)
	self1 := k.store(t, "a1", "self1", map[string]any{"scope": "agent", "segment": "agent", "content": "I answer in French"})
	if self1["scope"] != "subject" || self1["subject_id"] != k.ids["a1"] || self1["source_agent_id"] != k.ids["a1"] {
		t.Fatalf("an agent-scope memory reads %v", self1)
	}
	k.store(t, "a2", "aboutA1", k.about("a1"))
	k.store(t, "a2", "self2", map[string]any{"scope": "agent"})
	k.store(t, "b1", "self3", map[string]any{"scope": "agent"})
	k.store(t, "a1", "org", map[string]any{"scope": "organization"})
	for _, tc := range []struct{ who, query, want string }{
		{"a1", "scope=agent", "aboutA1 self1"},
		{"a2", "scope=agent", "self2"},
		{"b1", "scope=agent", "self3"},
		{"c1", "scope=agent", ""},
		{"a1", "scope=subject&subject_id=" + k.ids["a1"], "aboutA1 self1"},
		// The visibility rule is that of any memory about an agent: its
		// owner and the owner's agents see it, others of the organization
		// do not.
		{"a2", "scope=subject&subject_id=" + k.ids["a1"], "aboutA1 self1"},
		{"b1", "scope=subject&subject_id=" + k.ids["a1"], ""},
		{"alice", "scope=all", "aboutA1 org self1 self2"},
		{"bob", "scope=all", "org self3"},
	} {
		if got := k.labels(k.list(t, tc.who, tc.query)); got != tc.want {
			t.Errorf("%s lists ?%s = %q, want %q", tc.who, tc.query, got, tc.want)
		}
	}
	// A replacement may be agent-scope too.
	r := k.ts.do(t, "POST", k.path("a1", "/"+k.ids["self1"]+"/supersede"), k.cred("a1"),
		memoryBody(map[string]any{"scope": "agent", "content": "I answer in the asker's language"}))
	expect(t, r, 200, "")
	k.ids["self1b"] = r.data(t)["superseded_by"].(string)
	if got := k.labels(k.list(t, "a1", "scope=agent")); got != "aboutA1 self1b" {
		t.Errorf("after the supersede a1 lists %q", got)
	}
	k.ts.refused(t, "POST", k.path("a1", "/"+k.ids["self1b"]+"/supersede"), k.cred("a1"),
		memoryBody(map[string]any{"scope": "agent", "subject_id": k.ids["alice"]}), 422, "validation_error", "/memory/subject_id")
}

func TestMemorySupersedeWithReplacement(t *testing.T) {
	t.Parallel() // its own server and database
	k := newMemoriesWorld(t)
	old := k.store(t, "a1", "old", map[string]any{"content": "alice drinks coffee", "subject_id": k.ids["alice"]})["id"].(string)

	// An invalid replacement leaves everything as it was.
	for _, tc := range []struct {
		name    string
		body    any
		pointer string
	}{
		{"bad pairing", memoryBody(map[string]any{"system": "sensory", "subject_id": k.ids["alice"]}), "/memory/type"},
		{"no content", memoryBody(map[string]any{"content": absent, "subject_id": k.ids["alice"]}), "/memory/content"},
		{"foreign subject", memoryBody(k.about("carol")), "/memory/subject_id"},
		{"unreadable room", memoryBody(map[string]any{"scope": "organization", "chat_room_id": nilID}), "/memory/chat_room_id"},
		{"bad metadata", memoryBody(map[string]any{"scope": "organization", "metadata": map[string]any{"x": 1}}), "/memory/metadata/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k.ts.refused(t, "POST", k.path("a1", "/"+old+"/supersede"), k.cred("a1"), tc.body, 422, "validation_error", tc.pointer)
		})
	}
	k.ts.refused(t, "POST", k.path("a2", "/"+old+"/supersede"), k.cred("a2"), memoryBody(k.about("alice")), 403, "forbidden", "")

	r := k.ts.do(t, "POST", k.path("a1", "/"+old+"/supersede"), k.cred("a1"),
		memoryBody(map[string]any{"content": "alice drinks tea now", "subject_id": k.ids["alice"], "metadata": map[string]any{"references": []any{old}}}))
	expect(t, r, 200, "")
	d := r.data(t)
	next, _ := d["superseded_by"].(string)
	if d["id"] != old || d["status"] != "superseded" || next == "" {
		t.Fatalf("superseded: %v", d)
	}
	r = k.ts.do(t, "GET", k.path("alice", "/"+next), k.cred("alice"), nil)
	expect(t, r, 200, "")
	if n := r.data(t); n["content"] != "alice drinks tea now" || n["status"] != "active" || n["source_agent_id"] != k.ids["a1"] ||
		n["updated_at"] != d["updated_at"] {
		t.Errorf("replacement: %v", n)
	}
	k.ids["new"] = next
	if got := k.labels(k.list(t, "a1", "subject_id="+k.ids["alice"])); got != "new" {
		t.Errorf("active memories about alice: %q", got)
	}
	if got := k.labels(k.list(t, "alice", "content_query=drinks&status=all")); got != "new old" {
		t.Errorf("search: %q", got)
	}
	// The human route takes no replacement.
	k.ts.refused(t, "POST", k.path("alice", "/"+next+"/supersede"), k.cred("alice"), memoryBody(k.about("alice")), 400, "unknown_field", "/memory")
}

func TestMemoryHumanLifecycle(t *testing.T) {
	t.Parallel() // its own server and database
	k := newMemoriesWorld(t)
	mine := k.store(t, "a1", "mine", map[string]any{"content": "zebra crossing", "subject_id": k.ids["alice"]})
	k.store(t, "b1", "mine-by-b1", k.about("alice"))
	k.store(t, "a1", "orgA", map[string]any{"scope": "organization"})
	k.store(t, "a1", "about-a1", k.about("a1"))
	k.store(t, "b1", "about-bob", k.about("bob"))
	k.store(t, "c1", "orgB", map[string]any{"scope": "organization"})
	id := k.ids["mine"]
	act := func(who, label, action string) *response {
		return k.ts.do(t, "POST", k.path(who, "/"+k.ids[label]+"/"+action), k.cred(who), nil)
	}

	// Only the person a memory is about changes it: what alice sees but is
	// not about her is 403, what she does not see 404.
	t.Run("only the person a memory is about changes it", func(t *testing.T) { memoryChangesAreForItsSubject(t, k) })

	k.ts.refused(t, "POST", k.path("alice", "/"+id+"/restore"), k.cred("alice"), nil, 422, "validation_error", "")
	time.Sleep(2 * time.Millisecond)
	r := act("alice", "mine", "archive")
	expect(t, r, 200, "")
	if d := r.data(t); d["status"] != "archived" || !(d["updated_at"].(string) > mine["updated_at"].(string)) || d["chat_room_id"] != nil {
		t.Fatalf("archived: %v", d)
	}
	expect(t, act("alice", "mine", "archive"), 200, "")
	time.Sleep(2 * time.Millisecond)
	r = act("alice", "mine", "restore")
	expect(t, r, 200, "")
	if d := r.data(t); d["status"] != "active" {
		t.Fatalf("restored: %v", d)
	}
	r = act("alice", "mine", "supersede")
	expect(t, r, 200, "")
	if d := r.data(t); d["status"] != "superseded" || d["superseded_by"] != nil {
		t.Fatalf("superseded: %v", d)
	}
	k.ts.refused(t, "POST", k.path("alice", "/"+id+"/supersede"), k.cred("alice"), nil, 409, "conflict", "")
	k.ts.refused(t, "POST", k.path("alice", "/"+id+"/restore"), k.cred("alice"), nil, 422, "validation_error", "")
	k.ts.refused(t, "POST", k.path("alice", "/"+id+"/archive"), k.cred("alice"), nil, 422, "validation_error", "")
	k.ts.refused(t, "POST", k.path("alice", "/"+id+"/archive"), k.cred("alice"), `{"x":1}`, 400, "unknown_field", "/x")

	// Deleting is for good, search entry included; a memory about alice
	// stored by bob's agent is hers to delete too.
	// On PostgreSQL a memory's search entry is a column of its row.
	searchEntries := `SELECT count(*) FROM memories_fts_docsize`
	if onPostgres {
		searchEntries = `SELECT count(*) FROM memories WHERE search IS NOT NULL`
	}
	entries := k.ts.count(t, searchEntries)
	expect(t, k.delete(t, "alice", id), 204, "")
	if n := k.ts.count(t, searchEntries); n != entries-1 {
		t.Errorf("search entries %d -> %d", entries, n)
	}
	expect(t, k.ts.do(t, "GET", k.path("alice", "/"+id), k.cred("alice"), nil), 404, "not_found")
	expect(t, k.ts.do(t, "GET", k.path("a1", "/"+id), k.cred("a1"), nil), 404, "not_found")
	if got := k.list(t, "alice", "status=all&content_query=zebra"); len(got) != 0 {
		t.Errorf("the deleted memory is still found: %v", got)
	}
	expect(t, k.delete(t, "alice", id), 404, "not_found")
	expect(t, k.delete(t, "alice", k.ids["mine-by-b1"]), 204, "")
	expect(t, k.ts.do(t, "GET", k.path("bob", "/"+k.ids["mine-by-b1"]), k.cred("bob"), nil), 404, "not_found")
}

func memoryChangesAreForItsSubject(t *testing.T, k *memoriesWorld) {
	for _, action := range []string{"archive", "restore", "supersede"} {
		refused := func(who, label string, status int, code string) scenario {
			return refusalCase(action+" "+label+" as "+who, k.cred(who), "POST", k.path(who, "/"+k.ids[label]+"/"+action), nil, status, code)
		}
		k.ts.run(t, []scenario{
			refused("alice", "orgA", 403, "forbidden"),
			refused("alice", "about-a1", 403, "forbidden"),
			refused("alice", "about-bob", 404, "not_found"),
			refused("alice", "orgB", 404, "not_found"),
			refused("bob", "mine-by-b1", 403, "forbidden"),
			refused("bob", "mine", 404, "not_found"),
			refused("carol", "mine", 404, "not_found"),
		})
		k.ts.refused(t, "POST", k.path("alice", "/"+nilID+"/"+action), k.cred("alice"), nil, 404, "not_found", "")
	}
	deleting := func(who, label string, status int, code string) scenario {
		return refusalCase("delete "+label+" as "+who, k.cred(who), "DELETE", k.path(who, "/"+k.ids[label]), nil, status, code)
	}
	k.ts.run(t, []scenario{
		deleting("alice", "orgA", 403, "forbidden"),
		deleting("alice", "about-a1", 403, "forbidden"),
		deleting("alice", "about-bob", 404, "not_found"),
		deleting("bob", "mine-by-b1", 403, "forbidden"),
		deleting("carol", "mine", 404, "not_found"),
	})
}

// memoryRoutes is every memory route, with an id where it takes one.
func memoryRoutes(id string) []struct{ method, path string } {
	return []struct{ method, path string }{
		{"GET", "/api/v1/agent/memories"},
		{"POST", "/api/v1/agent/memories"},
		{"GET", "/api/v1/agent/memories/" + id},
		{"POST", "/api/v1/agent/memories/" + id + "/archive"},
		{"POST", "/api/v1/agent/memories/" + id + "/supersede"},
		{"GET", "/api/v1/me/memories"},
		{"GET", "/api/v1/me/memories/" + id},
		{"DELETE", "/api/v1/me/memories/" + id},
		{"POST", "/api/v1/me/memories/" + id + "/archive"},
		{"POST", "/api/v1/me/memories/" + id + "/restore"},
		{"POST", "/api/v1/me/memories/" + id + "/supersede"},
	}
}

// Agent keys are refused on every /me/memories route and human credentials
// on every /agent/memories route, before anything else.
func TestMemoryRoutesAudience(t *testing.T) {
	k := newMemoriesWorld(t)
	id := k.store(t, "a1", "", k.about("alice"))["id"].(string)
	tok := k.ts.token(mustUser(t, k, "alice"), time.Hour)
	for _, rt := range memoryRoutes(id) {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			if strings.HasPrefix(rt.path, "/api/v1/me/") {
				k.ts.refused(t, rt.method, rt.path, k.cred("a1"), memoryBody(nil), 403, "forbidden", "")
				return
			}
			k.ts.refused(t, rt.method, rt.path, k.cred("alice"), memoryBody(nil), 403, "forbidden", "")
			k.ts.refused(t, rt.method, rt.path, bearer(tok), memoryBody(nil), 403, "forbidden", "")
		})
	}
	// A bearer token works on the human routes.
	r := k.ts.do(t, "GET", "/api/v1/me/memories/"+id, bearer(tok), nil)
	expect(t, r, 200, "")
}

func mustUser(t testing.TB, k *memoriesWorld, who string) *store.User {
	t.Helper()
	u, err := k.ts.db.UserByID(t.Context(), k.ids[who])
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// With --memories=false every memory route answers 403 feature_disabled,
// after authentication: bad credentials are still 401 and the wrong kind
// of key still 403 forbidden.
func TestMemoriesSwitchedOff(t *testing.T) {
	t.Parallel() // its own server and database
	ts := newTestServerWith(t, func(c *Config) { c.DisableMemories = true })
	alice, humanKey := ts.user("alice")
	_, agentKey := ts.agent(alice, "Helper")
	for _, rt := range memoryRoutes(nilID) {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			right, wrong := agentKey, humanKey
			if strings.HasPrefix(rt.path, "/api/v1/me/") {
				right, wrong = humanKey, agentKey
			}
			r := ts.refused(t, rt.method, rt.path, apiKey(right), memoryBody(nil), 403, "feature_disabled", "")
			if msg := r.json(t)["error"].(map[string]any)["message"]; msg != "memories are switched off on this server" {
				t.Errorf("message %q", msg)
			}
			ts.refused(t, rt.method, rt.path, apiKey(wrong), nil, 403, "forbidden", "")
			ts.refused(t, rt.method, rt.path, apiKey("band_a_"+strings.Repeat("z", 52)), nil, 401, "unauthorized", "")
			ts.refused(t, rt.method, rt.path, noCred, nil, 401, "unauthorized", "")
		})
	}
}
