package server

import (
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
)

// Scenario tests of search, GET /me/search and GET /agent/search: who
// finds what, the filters, both orders, paging, snippets, and every
// refusal, with hostile queries among them.

const (
	humanSearchPath = "/api/v1/me/search"
	agentSearchPath = "/api/v1/agent/search"
)

// searchWorld is messagesWorld with messages about "mercury" where each
// party may and may not read them. In room (alice's, with bob, helper and
// coder): m1 alice to helper, m2 coder's thought, m3 helper to alice, m4
// coder to bob. agents is helper's room with coder only (alice reads it
// through her agents), left a room bob left, private a room bob was never
// in, gone a deleted room, and elsewhere carol's, of another
// organization.
type searchWorld struct {
	*messagesWorld
	agents, left, private, elsewhere string
}

func newSearchWorld(t *testing.T) *searchWorld {
	t.Helper()
	w := &searchWorld{messagesWorld: newMessagesWorld(t)}
	w.mustSend(t, "m1", w.alice, w.room, "please deploy mercury to staging", byID(w.helper))
	w.event(t, "m2", w.coder, w.room, "thought", "the mercury logs look clean", nil)
	w.mustSend(t, "m3", w.helper, w.room, "mercury deployed to staging", byID(w.alice))
	w.mustSend(t, "m4", w.coder, w.room, "a mercury rollback plan, just in case", byID(w.bob))

	w.agents = w.newRoom(t, w.helper, "agents")
	w.add(t, w.helper, w.agents, w.coder)
	w.mustSend(t, "a1", w.helper, w.agents, "mercury between agents", byID(w.coder))

	w.left = w.newRoom(t, w.alice, "left")
	w.add(t, w.alice, w.left, w.bob)
	w.mustSend(t, "l1", w.bob, w.left, "mercury before bob left", byID(w.alice))
	expect(t, w.ts.do(t, "DELETE", w.bob.at(w.left, "participants", w.bob.id), w.bob.cred, nil), 200, "")

	w.private = w.newRoom(t, w.alice, "private")
	w.add(t, w.alice, w.private, w.helper)
	w.mustSend(t, "p1", w.alice, w.private, "mercury in private", byID(w.helper))

	gone := w.newRoom(t, w.alice, "gone")
	w.add(t, w.alice, gone, w.helper)
	w.mustSend(t, "g1", w.alice, gone, "mercury in a deleted room", byID(w.helper))
	expect(t, w.ts.do(t, "DELETE", w.alice.at(gone), w.alice.cred, nil), 204, "")

	carolbot := w.bot(w.carol, "Carolbot")
	w.elsewhere = w.newRoom(t, w.carol, "elsewhere")
	w.add(t, w.carol, w.elsewhere, carolbot)
	w.mustSend(t, "e1", w.carol, w.elsewhere, "mercury in another organization", byID(carolbot))
	return w
}

// searchPath is the search route of p's API.
func searchPath(p messagesParty) string {
	if p.typ == "Agent" {
		return agentSearchPath
	}
	return humanSearchPath
}

// search is what p finds with query, as labels.
func (w *searchWorld) search(t testing.TB, p messagesParty, query string) string {
	t.Helper()
	return w.names(t, w.get(t, p, searchPath(p)+"?"+query))
}

// Who finds what: a person every message of the rooms they read, through
// their agents too; an agent what it sent and what mentions it, in the rooms
// it is in; nobody a left, foreign, deleted or never-joined room.
func TestSearchVisibility(t *testing.T) {
	w := newSearchWorld(t)
	for _, c := range []struct {
		name string
		who  messagesParty
		want string // newest first
	}{
		{"alice: her rooms, and her agents' room", w.alice, "p1,l1,a1,m4,m3,m2,m1"},
		{"bob: not the room he left, nor those he was never in", w.bob, "m4,m3,m2,m1"},
		{"carol: her organization's room only", w.carol, "e1"},
		{"helper: what it sent and what mentions it, in its rooms", w.helper, "p1,a1,m3,m1"},
		{"coder: its own thought and message, and what mentions it", w.coder, "a1,m4,m2"},
		{"idle: in no room", w.idle, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := w.search(t, c.who, "q=mercury&sort=newest"); got != c.want {
				t.Errorf("found %s, want %s", got, c.want)
			}
		})
	}
	t.Run("an agent sees its own delivery state", func(t *testing.T) {
		m1 := w.byLabel(t, w.get(t, w.helper, agentSearchPath+"?q=deploy+mercury"), "m1")
		meta := m1["metadata"].(map[string]any)
		if meta["status"] != "pending" || m1["chat_room_id"] != w.room {
			t.Errorf("helper's m1: %v", m1)
		}
	})
	t.Run("a person sees every agent's delivery state", func(t *testing.T) {
		m1 := w.byLabel(t, w.get(t, w.alice, humanSearchPath+"?q=deploy+mercury"), "m1")
		if ds := m1["metadata"].(map[string]any)["delivery_status"].(map[string]any); ds[w.helper.id] == nil {
			t.Errorf("alice's m1: %v", m1)
		}
	})
}

// The filters narrow what the caller may read, never widen it.
func TestSearchFilters(t *testing.T) {
	w := newSearchWorld(t)
	m3 := w.byLabel(t, w.get(t, w.alice, humanSearchPath+"?q=mercury"), "m3")["inserted_at"].(string)
	m2 := w.byLabel(t, w.get(t, w.alice, humanSearchPath+"?q=mercury"), "m2")["inserted_at"].(string)
	for _, c := range []struct {
		name  string
		who   messagesParty
		query string
		want  string
	}{
		{"one room", w.alice, "chat_id=" + w.room, "m4,m3,m2,m1"},
		{"one room, its id in capitals", w.alice, "chat_id=" + strings.ToUpper(w.room), "m4,m3,m2,m1"},
		{"one sender", w.alice, "sender_id=" + w.coder.id, "a1x,m4,m2"},
		{"one type", w.alice, "message_type=thought", "m2"},
		{"text only", w.bob, "message_type=text", "m4,m3,m1"},
		{"after", w.alice, "after=" + url.QueryEscape(m3), "p1,l1,a1,m4"},
		{"before", w.alice, "before=" + url.QueryEscape(m3), "m2,m1"},
		{"between", w.alice, "after=" + url.QueryEscape(m2) + "&before=" + url.QueryEscape(m3), ""},
		{"all of them", w.alice, "chat_id=" + w.room + "&sender_id=" + w.coder.id + "&message_type=text", "m4"},
		{"an agent, one room", w.helper, "chat_id=" + w.room, "m3,m1"},
		{"an agent, another's messages", w.helper, "sender_id=" + w.coder.id, ""},
		{"an agent, its own events", w.coder, "message_type=thought", "m2"},
		{"a sender nobody is", w.alice, "sender_id=" + unknownID, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := strings.ReplaceAll(c.want, "a1x,", "") // a1 is helper's
			if got := w.search(t, c.who, "q=mercury&sort=newest&"+c.query); got != want {
				t.Errorf("found %s, want %s", got, want)
			}
		})
	}
}

// Both orders, and cursor paging through each: the pages together are the
// whole result, in order, each hit once.
func TestSearchOrdersAndPaging(t *testing.T) {
	w := newSearchWorld(t)
	w.mustSend(t, "r1", w.alice, w.room, "mercury mercury mercury, mercury everywhere", byID(w.helper))
	w.mustSend(t, "r2", w.alice, w.room, "a long message that names the planet mercury once among many other words of no interest at all", byID(w.helper))

	relevance := w.search(t, w.alice, "q=mercury&limit=100")
	if !strings.HasPrefix(relevance, "r1,") || !strings.Contains(relevance, "r2") {
		t.Errorf("most relevant first: %s", relevance)
	}
	scores := w.get(t, w.alice, humanSearchPath+"?q=mercury").list(t)
	for i := 1; i < len(scores); i++ {
		if scores[i-1].(map[string]any)["score"].(float64) < scores[i].(map[string]any)["score"].(float64) {
			t.Errorf("scores not descending: %v", scores)
		}
	}
	newest := w.search(t, w.alice, "q=mercury&sort=newest&limit=100")
	if newest != "r2,r1,p1,l1,a1,m4,m3,m2,m1" {
		t.Errorf("newest first: %s", newest)
	}
	for _, c := range []struct{ query, whole string }{
		{"q=mercury&limit=2", relevance},
		{"q=mercury&sort=newest&limit=2", newest},
		{"q=mercury&sort=relevance&limit=4", relevance},
	} {
		t.Run(c.query, func(t *testing.T) {
			pages := w.walk(t, w.alice, humanSearchPath, c.query)
			if strings.ReplaceAll(pages, "|", ",") != c.whole {
				t.Errorf("pages %s, want %s", pages, c.whole)
			}
		})
	}
	t.Run("an agent's pages", func(t *testing.T) {
		if pages := w.walk(t, w.helper, agentSearchPath, "q=mercury&limit=1&sort=newest"); pages != "r2|r1|p1|a1|m3|m1" {
			t.Errorf("helper's pages: %s", pages)
		}
	})
}

// A snippet marks each match between « and »; the text's own « and » read
// as ‹ and ›, so the markers are never ambiguous.
func TestSearchSnippets(t *testing.T) {
	w := newSearchWorld(t)
	w.mustSend(t, "s1", w.alice, w.room, "the «Café» <b>menu</b> is ready", byID(w.helper))
	for _, c := range []struct{ query, label, want string }{
		{"q=cafe", "s1", "@alice/helper the ‹«Café»› <b>menu</b> is ready"},
		{"q=%22mercury+rollback%22", "m4", "@bob a «mercury rollback» plan, just in case"},
		{"q=deploy*", "m3", "@alice mercury «deployed» to staging"},
	} {
		got := w.byLabel(t, w.get(t, w.alice, humanSearchPath+"?"+c.query), c.label)["snippet"]
		if got != c.want {
			t.Errorf("%s: snippet %q, want %q", c.query, got, c.want)
		}
	}
}

// What a person may type: operators and punctuation are plain words or
// separators, never an error; what holds no word, or too much, is refused
// at /q.
func TestSearchQueries(t *testing.T) {
	w := newSearchWorld(t)
	w.mustSend(t, "u1", w.alice, w.room, "東京 deploy: mercury-7 (NEAR the end) AND done", byID(w.helper))
	for _, c := range []struct{ q, want string }{
		{`NEAR(`, "u1"},
		{`AND`, "u1"},
		{`"mercury`, "u1,m4,m3,m2,m1"},
		{`mercury-7`, "u1"},
		{`-mercury`, "u1,m4,m3,m2,m1"},
		{`東京`, "u1"},
		{`mercury*`, "u1,m4,m3,m2,m1"},
		{`"deploy mercury"`, "u1,m1"},
		{`content:mercury`, ""}, // "content mercury", as a phrase
		{`mercury OR nothing`, ""},
		{`mercury NOT staging`, ""},
		{`(mercury)`, "u1,m4,m3,m2,m1"},
		{`mercury "`, "u1,m4,m3,m2,m1"},
		{"mercury\x00", "u1,m4,m3,m2,m1"},
	} {
		t.Run(c.q, func(t *testing.T) {
			if got := w.search(t, w.bob, "sort=newest&q="+url.QueryEscape(c.q)); got != c.want {
				t.Errorf("found %s, want %s", got, c.want)
			}
		})
	}
}

func TestSearchRefusals(t *testing.T) {
	w := newSearchWorld(t)
	cursor := w.get(t, w.alice, humanSearchPath+"?q=mercury&limit=1").meta(t)["next_cursor"].(string)
	newestCursor := w.get(t, w.alice, humanSearchPath+"?q=mercury&limit=1&sort=newest").meta(t)["next_cursor"].(string)
	agentCursor := w.get(t, w.helper, agentSearchPath+"?q=mercury&limit=1").meta(t)["next_cursor"].(string)
	get := func(name string, p messagesParty, query string, status int, code string, pointers ...string) scenario {
		return scenario{name: name, cred: p.cred, method: "GET", path: searchPath(p) + "?" + query, status: status, code: code, pointers: pointers}
	}
	a := w.alice
	var rows []scenario
	for _, p := range []messagesParty{w.alice, w.helper} {
		rows = append(rows,
			get(p.label+": no q", p, "", 422, "validation_error", "/q"),
			get(p.label+": an empty q", p, "q=", 422, "validation_error", "/q"),
			get(p.label+": a lone quote", p, "q=%22", 422, "validation_error", "/q"),
			get(p.label+": a lone star", p, "q=*", 422, "validation_error", "/q"),
			get(p.label+": a lone minus", p, "q=-", 422, "validation_error", "/q"),
			get(p.label+": an emoji", p, "q="+url.QueryEscape("🚀"), 422, "validation_error", "/q"),
			get(p.label+": a one-letter prefix", p, "q=m*", 422, "validation_error", "/q"),
			get(p.label+": 257 characters", p, "q="+strings.Repeat("m", 257), 422, "validation_error", "/q"),
			get(p.label+": 17 words", p, "q="+url.QueryEscape(strings.Repeat("mercury ", 17)), 422, "validation_error", "/q"),
			get(p.label+": a room it does not read", p, "q=mercury&chat_id="+w.elsewhere, 404, "not_found"),
			get(p.label+": an unknown room", p, "q=mercury&chat_id="+unknownID, 404, "not_found"),
		)
	}
	rows = append(rows,
		get("a room bob left", w.bob, "q=mercury&chat_id="+w.left, 404, "not_found"),
		get("a room bob was never in", w.bob, "q=mercury&chat_id="+w.private, 404, "not_found"),
		get("a room the agent is not in", w.coder, "q=mercury&chat_id="+w.private, 404, "not_found"),
		get("a room id that is no UUID", a, "q=mercury&chat_id=room", 422, "validation_error", "/chat_id"),
		get("a sender id that is no UUID", a, "q=mercury&sender_id=bob", 422, "validation_error", "/sender_id"),
		get("an unknown message type", a, "q=mercury&message_type=note", 422, "validation_error", "/message_type"),
		get("an unknown sort", a, "q=mercury&sort=oldest", 422, "validation_error", "/sort"),
		get("after is no date-time", a, "q=mercury&after=yesterday", 422, "validation_error", "/after"),
		get("before is no date-time", a, "q=mercury&before=2026-13-01", 422, "validation_error", "/before"),
		get("before not after after", a, "q=mercury&after=2026-01-02T00:00:00Z&before=2026-01-01T00:00:00Z", 422, "validation_error", "/before"),
		get("the deprecated page", a, "q=mercury&page=1", 422, "validation_error", "/page"),
		get("the deprecated page_size", a, "q=mercury&page_size=5", 422, "validation_error", "/page_size"),
		get("limit 0", a, "q=mercury&limit=0", 422, "validation_error", "/limit"),
		get("limit 101", a, "q=mercury&limit=101", 422, "validation_error", "/limit"),
		get("every problem at once", a, "q=&sort=x&message_type=y", 422, "validation_error", "/q", "/sort", "/message_type"),
		get("a garbage cursor", a, "q=mercury&cursor=garbage", 422, "invalid_cursor", "/cursor"),
		get("a tampered cursor", a, "q=mercury&cursor="+url.QueryEscape(flipChar(cursor, len(cursor)-5)), 422, "invalid_cursor", "/cursor"),
		get("a cursor of another query", a, "q=staging&cursor="+url.QueryEscape(cursor), 422, "invalid_cursor", "/cursor"),
		get("a cursor of another filter", a, "q=mercury&message_type=text&cursor="+url.QueryEscape(cursor), 422, "invalid_cursor", "/cursor"),
		get("a cursor of the other order", a, "q=mercury&cursor="+url.QueryEscape(newestCursor), 422, "invalid_cursor", "/cursor"),
		get("an agent's cursor on the Human API", a, "q=mercury&cursor="+url.QueryEscape(agentCursor), 422, "invalid_cursor", "/cursor"),
		scenario{name: "an agent on the Human API", cred: w.helper.cred, method: "GET", path: humanSearchPath + "?q=mercury", status: 403, code: "forbidden"},
		scenario{name: "a person on the Agent API", cred: a.cred, method: "GET", path: agentSearchPath + "?q=mercury", status: 403, code: "forbidden"},
		scenario{name: "no credentials", method: "GET", path: humanSearchPath + "?q=mercury", status: 401, code: "unauthorized"},
	)
	w.ts.run(t, rows)
}

// Whatever q holds, the answer is hits or a refusal at /q: never a 500.
func TestSearchAnyQueryIsAnsweredCleanly(t *testing.T) {
	w := newSearchWorld(t)
	pieces := []string{`"`, `*`, `-`, `+`, `^`, `(`, `)`, `:`, `NEAR`, `NEAR(`, `AND`, `OR`, `NOT`, `mercury`, `7`, `café`,
		`東京`, ` `, "\t", "\x00", `'`, `\`, `%`, `&`, `#`, `content`, `rank`, `*"`, `"*`, "\u0301", "🚀", `m`, `me`, "\uFFFD"}
	rng := rand.New(rand.NewPCG(20, 2))
	for i := range 300 {
		var b strings.Builder
		for range 1 + rng.IntN(10) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		p := []messagesParty{w.alice, w.helper}[i%2]
		r := w.ts.do(t, "GET", searchPath(p)+"?sort="+[]string{"relevance", "newest"}[i%3%2]+"&q="+url.QueryEscape(b.String()), p.cred, nil)
		switch {
		case r.status == 200:
		case r.status == 422 && errorDetails(t, r)["/q"] != nil:
		default:
			t.Fatalf("q=%q: %d %s", b.String(), r.status, r.body)
		}
	}
}

// The search tool is the caller's search route: the same hits, the same
// refusals, with pointers naming the tool's arguments.
func TestSearchMCPTool(t *testing.T) {
	w := newSearchWorld(t)
	type hitList struct {
		Results []struct {
			ID      string `json:"id"`
			Snippet string `json:"snippet"`
		} `json:"results"`
		Metadata map[string]any `json:"metadata"`
	}
	for _, c := range []struct {
		who  messagesParty
		args map[string]any
		want string
	}{
		{w.alice, map[string]any{"query": "mercury", "sort": "newest"}, "p1,l1,a1,m4,m3,m2,m1"},
		{w.helper, map[string]any{"query": "mercury", "sort": "newest"}, "p1,a1,m3,m1"},
		{w.alice, map[string]any{"query": "mercury", "room_id": w.room, "sender_id": w.coder.id, "message_type": "text"}, "m4"},
		{w.alice, map[string]any{"query": "mercury", "sort": "newest", "limit": 2}, "p1,l1"},
	} {
		var got hitList
		remarshal(t, toolOK(t, w.ts.mcpSession(t, c.who.cred), "search", c.args), &got)
		var labels []string
		for _, r := range got.Results {
			labels = append(labels, w.labels[r.ID])
		}
		if strings.Join(labels, ",") != c.want {
			t.Errorf("%s search(%v) = %v, want %s", c.who.label, c.args, labels, c.want)
		}
	}
	cs := w.ts.mcpSession(t, w.alice.cred)
	for _, c := range []struct {
		args          map[string]any
		code, pointer string
	}{
		{map[string]any{"query": "*"}, "validation_error", "/query"},
		{map[string]any{"query": "mercury", "room_id": "room"}, "validation_error", "/room_id"},
		{map[string]any{"query": "mercury", "room_id": w.elsewhere}, "not_found", ""},
		{map[string]any{"query": "mercury", "cursor": "garbage"}, "invalid_cursor", "/cursor"},
	} {
		env := toolRefused(t, cs, "search", c.args, c.code)
		if c.pointer != "" {
			details, _ := env["details"].(map[string]any)
			if details[c.pointer] == nil || !strings.HasPrefix(env["message"].(string), c.pointer) {
				t.Errorf("search(%v) refused with %v, want the problem at %s", c.args, env, c.pointer)
			}
		}
	}
}

// A delegated token searches its person's rooms with chats:read, and only
// with it.
func TestSearchWithADelegatedToken(t *testing.T) {
	k := newDelegationWorld(t)
	room := k.ts.room(t, k.helperKey, k.alice.ID)
	expect(t, k.ts.do(t, "POST", agentChatsPath+"/"+room+"/messages", apiKey(k.helperKey),
		msgOf("content", "the mercury plan", "mentions", []any{mentionOf("id", k.alice.ID)})), 201, "")
	_, reader := k.grant(t, "chats:read")
	_, other := k.grant(t, "contacts:read")
	r := k.ts.do(t, "GET", humanSearchPath+"?q=mercury", bearer(k.exchange(t, reader)), nil)
	expect(t, r, 200, "")
	if len(r.list(t)) != 1 {
		t.Errorf("chats:read found %s", r.body)
	}
	k.ts.refused(t, "GET", humanSearchPath+"?q=mercury", bearer(k.exchange(t, other)), nil, 403, "forbidden", "")
}
