package server

import (
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The metadata of every listing the OpenAPI document describes, in each
// paging mode it takes: the key sets below follow what the document says of
// each listing (its schema and the descriptions of its fields), and ts.do
// validates every answer against the document besides.
//
//   - Cursor listings carry has_more, limit and next_cursor in both modes;
//     the offset fields (page, page_size, total_count, total_pages) answer the
//     deprecated page/page_size only ("offset mode only; omitted in cursor
//     mode", "(deprecated)", "offset fields on the deprecated path").
//   - GET /me/agents says "responses always include both metadata shapes
//     during the transition": the offset fields come in cursor mode too.
//   - Listings the document pages by page/page_size only answer the offset
//     fields whatever else the query holds.
//   - Memories and an agent's context carry a deprecated twin, meta.

var (
	cursorKeys   = []string{"has_more", "limit", "next_cursor"}
	offsetKeys   = []string{"page", "page_size", "total_count", "total_pages"}
	bothKeys     = append(append([]string{}, cursorKeys...), offsetKeys...)
	agentsExtras = []string{"available_filters", "sortable_fields"}
)

func sorted(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	sort.Strings(out)
	return out
}

type metaWorld struct {
	ts                   *testServer
	alice, helper        *contactsParty
	room, task, memoryID string
}

// newMetaWorld: alice and bob are contacts; alice's agents helper and scout;
// a room of helper's with alice, where alice mentioned helper; a task; an
// organization memory.
func newMetaWorld(t *testing.T) *metaWorld {
	k := newContactsWorld(t)
	w := &metaWorld{ts: k.ts, alice: k.human("alice")}
	bob := k.human("bob")
	w.helper = k.bot(w.alice, "Helper")
	k.bot(w.alice, "Scout")
	k.bot(w.alice, "Sorter")
	k.connect(t, w.alice, bob)
	k.connect(t, w.helper, bob)
	w.room = w.ts.room(t, w.helper.key, w.alice.id)
	for i := 0; i < 3; i++ {
		expect(t, w.ts.do(t, "POST", "/api/v1/me/chats/"+w.room+"/messages", w.alice.cred(),
			map[string]any{"message": map[string]any{"content": "hello", "mentions": []any{map[string]any{"id": w.helper.id}}}}), 201, "")
	}
	r := w.ts.do(t, "POST", tasksPath(w.room), w.helper.cred(), map[string]any{"subject": "Plan"})
	expect(t, r, 201, "")
	w.task = r.data(t)["id"].(string)
	r = w.ts.do(t, "POST", "/api/v1/agent/memories", w.helper.cred(), memoryBody(map[string]any{"scope": "organization"}))
	expect(t, r, 201, "")
	w.memoryID = r.data(t)["id"].(string)
	return w
}

func TestListingMetadataShapes(t *testing.T) {
	w := newMetaWorld(t)
	human, agent := w.alice.cred(), w.helper.cred()
	room := "/api/v1/agent/chats/" + w.room
	myRoom := "/api/v1/me/chats/" + w.room
	cursor, page := "limit=1", "page=1&page_size=1"
	for _, tc := range []struct {
		path  string
		c     cred
		query string
		keys  []string
		twin  bool // a deprecated meta equal to metadata
	}{
		{room + "/messages", agent, cursor, sorted(cursorKeys, []string{"status_filter"}), false},
		{room + "/messages", agent, page, sorted(bothKeys, []string{"status_filter"}), false},
		{room + "/context", agent, cursor, sorted(cursorKeys), true},
		{room + "/context", agent, page, sorted(bothKeys), true},
		{room + "/tasks", agent, cursor, sorted(cursorKeys), false},
		{room + "/tasks/" + w.task + "/history", agent, cursor, sorted(cursorKeys), false},
		{"/api/v1/agent/memories", agent, cursor, sorted(cursorKeys), true},
		{"/api/v1/agent/memories", agent, page, sorted(bothKeys), true},
		{"/api/v1/me/memories", human, cursor, sorted(cursorKeys), true},
		{"/api/v1/me/memories", human, page, sorted(bothKeys), true},
		{"/api/v1/me/chats", human, cursor, sorted(cursorKeys), false},
		{"/api/v1/me/chats", human, page, sorted(bothKeys), false},
		{myRoom + "/messages", human, cursor, sorted(cursorKeys), false},
		{myRoom + "/messages", human, page, sorted(bothKeys), false},
		{myRoom + "/participants", human, cursor, sorted(cursorKeys), false},
		{myRoom + "/participants", human, page, sorted(bothKeys), false},
		{"/api/v1/me/agents", human, cursor, sorted(bothKeys, agentsExtras), false},
		{"/api/v1/me/agents", human, "", sorted(bothKeys, agentsExtras), false},
		{"/api/v1/me/agents", human, page, sorted(bothKeys, agentsExtras), false},
		// Offset-only listings, whatever the query.
		{"/api/v1/agent/chats", agent, page, sorted(offsetKeys), false},
		{"/api/v1/agent/chats", agent, cursor, sorted(offsetKeys), false},
		{"/api/v1/agent/peers", agent, page, sorted(offsetKeys), false},
		{"/api/v1/agent/contacts", agent, page, sorted(offsetKeys), false},
		{"/api/v1/agent/contacts", agent, cursor, sorted(offsetKeys), false},
		{"/api/v1/agent/contacts/requests", agent, page, []string{"page", "page_size", "received", "sent"}, false},
		{"/api/v1/me/peers", human, page, sorted(offsetKeys), false},
		{"/api/v1/me/peers", human, cursor, sorted(offsetKeys), false},
		{"/api/v1/me/contacts", human, page, sorted(offsetKeys), false},
		{"/api/v1/me/contacts/requests", human, page, sorted(offsetKeys), false},
		{"/api/v1/me/contacts/requests/sent", human, page, sorted(offsetKeys), false},
	} {
		t.Run(tc.path+"?"+tc.query, func(t *testing.T) {
			r := w.ts.do(t, "GET", tc.path+"?"+tc.query, tc.c, nil)
			expect(t, r, 200, "")
			if !w.ts.oas.Documented("GET", tc.path) {
				t.Fatalf("%s is not in the document", tc.path)
			}
			m := r.meta(t)
			if got := keysOf(m); !reflect.DeepEqual(got, tc.keys) {
				t.Errorf("metadata keys = %v, want %v", got, tc.keys)
			}
			twin, has := r.json(t)["meta"]
			if has != tc.twin || (has && !reflect.DeepEqual(twin, any(m))) {
				t.Errorf("meta = %v (present %v), metadata %v", twin, has, m)
			}
			// The deprecated parameters are announced as such where the
			// listing has a cursor; offset-only listings page that way alone.
			offsetOnly := tc.keys[0] == "page"
			want := strings.Contains(tc.query, "page=") && !offsetOnly
			if got := r.header.Get("Deprecation") != ""; got != want {
				t.Errorf("Deprecation header %q, want one: %v", r.header.Get("Deprecation"), want)
			}
		})
	}
}

// In cursor mode /me/agents numbers its pages by the rows before each page,
// in pages of the requested limit, under any filter and order.
func TestMyAgentsCursorPagesCarryPageNumbers(t *testing.T) {
	w := newMetaWorld(t) // alice owns Helper, Scout and Sorter
	for query, want := range map[string]string{
		// page/page_size/total_count/total_pages/items, page by page
		"limit=2&sort=name&order=asc":    "1/2/3/2/2 2/2/3/2/1",
		"limit=1&name=s&order=desc":      "1/1/2/2/1 2/1/2/2/1",
		"limit=3":                        "1/3/3/1/3",
		"limit=5&is_external=false&name": "1/5/0/0/0",
	} {
		var seen []string
		q := query
		for i := 0; i < 5; i++ {
			r := w.ts.do(t, "GET", "/api/v1/me/agents?"+q, w.alice.cred(), nil)
			expect(t, r, 200, "")
			m := r.meta(t)
			seen = append(seen, strings.Join([]string{
				num(m["page"]), num(m["page_size"]), num(m["total_count"]), num(m["total_pages"]), strconv.Itoa(len(r.list(t)))}, "/"))
			if r.header.Get("Deprecation") != "" {
				t.Errorf("cursor mode is not deprecated: %v", r.header)
			}
			if m["has_more"] != true {
				break
			}
			q = query + "&cursor=" + url.QueryEscape(m["next_cursor"].(string))
		}
		if got := strings.Join(seen, " "); got != want {
			t.Errorf("?%s: pages = %s, want %s", query, got, want)
		}
	}
}

func num(v any) string {
	f, ok := v.(float64)
	if !ok {
		return "?"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
