package server

import (
	"fmt"
	"math/rand"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/chatd/chatd/store"
)

// Scenario tests of contacts and contact requests, for both APIs (spec
// "Contact and contact request", "States and transitions: Contact request",
// the Contacts endpoints; wire contract §3.1 and §3.2 Contacts, §4 Contact
// and Contact requests, §5.5 and §5.6 contact channels): the request life
// cycle, the two-way contact an approval makes, contacts as peers across
// organizations, what deleting an agent does to its contacts, and the pushes
// on the contacts channels.

// contactsParty is a person or an agent, with its key.
type contactsParty struct {
	handle, id, name, key string
	agent                 bool
	user                  *store.User // people only
}

// cred is p's key; a nil party is a caller without credentials.
func (p *contactsParty) cred() cred {
	if p == nil {
		return noCred
	}
	return apiKey(p.key)
}

// contactsWorld drives one test server and labels the requests it makes (#1, #2,
// ...) so that listings compare as readable strings.
type contactsWorld struct {
	ts     *testServer
	labels map[string]string
}

func newContactsWorld(t *testing.T) *contactsWorld {
	return &contactsWorld{ts: newTestServer(t), labels: map[string]string{}}
}

func (k *contactsWorld) human(handle string, org ...string) *contactsParty {
	u, key := k.ts.user(handle, org...)
	return &contactsParty{handle: u.Handle, id: u.ID, name: u.Name(), key: key, user: u}
}

// twoOrganizations is alice with her agent helper, and carol, of another
// organization, with hers, scout.
func (k *contactsWorld) twoOrganizations() (alice, carol, helper, scout *contactsParty) {
	alice, carol = k.human("alice"), k.human("carol", "Other Org")
	return alice, carol, k.bot(alice, "Helper"), k.bot(carol, "Scout")
}

func (k *contactsWorld) bot(owner *contactsParty, name string) *contactsParty {
	a, key := k.ts.agent(owner.user, name)
	return &contactsParty{handle: a.Handle, id: a.ID, name: a.Name, key: key, agent: true}
}

// label names a request id in listings.
func (k *contactsWorld) label(id string) string {
	if l, ok := k.labels[id]; ok {
		return l
	}
	l := fmt.Sprintf("#%d", len(k.labels)+1)
	k.labels[id] = l
	return l
}

// addContactCall is the call that asks for a contact as from: the agent API's
// {handle, message}, or the human API's {contact_request: {recipient_handle,
// message}}. fields holds "handle" and "message" (either may be missing).
func addContactCall(from *contactsParty, fields map[string]any) (string, any) {
	if from.agent {
		return "/api/v1/agent/contacts/add", fields
	}
	cr := map[string]any{}
	for k, v := range fields {
		if k == "handle" {
			k = "recipient_handle"
		}
		cr[k] = v
	}
	return "/api/v1/me/contacts/requests", map[string]any{"contact_request": cr}
}

// addMessagePointer is the JSON Pointer of the message in from's add call.
func addMessagePointer(from *contactsParty) string {
	if from.agent {
		return "/message"
	}
	return "/contact_request/message"
}

// add asks for the party with handle as from.
func (k *contactsWorld) add(t testing.TB, from *contactsParty, handle string) *response {
	t.Helper()
	path, body := addContactCall(from, map[string]any{"handle": handle})
	return k.ts.do(t, "POST", path, from.cred(), body)
}

// request asks to as from (with a message, if one is given) and returns
// the new pending request's id.
func (k *contactsWorld) request(t testing.TB, from, to *contactsParty, message ...string) string {
	t.Helper()
	fields := map[string]any{"handle": to.handle}
	if len(message) > 0 {
		fields["message"] = message[0]
	}
	path, body := addContactCall(from, fields)
	r := k.ts.do(t, "POST", path, from.cred(), body)
	expect(t, r, 201, "")
	d := r.data(t)
	if d["status"] != "pending" {
		t.Fatalf("%s asks %s: %s, want a pending request", from.handle, to.handle, r.body)
	}
	id := d["id"].(string)
	k.label(id)
	return id
}

var statusAfter = map[string]string{"approve": "approved", "reject": "rejected", "cancel": "cancelled"}

// respondCall is how p answers request id by id: the agent API's respond
// with request_id, or the human API's approve, reject and DELETE (cancel).
func respondCall(p *contactsParty, action, id string) (method, path string, body any) {
	if p.agent {
		return "POST", "/api/v1/agent/contacts/requests/respond", map[string]any{"action": action, "request_id": id}
	}
	if action == "cancel" {
		return "DELETE", "/api/v1/me/contacts/requests/" + id, nil
	}
	return "POST", "/api/v1/me/contacts/requests/" + id + "/" + action, nil
}

// respond answers request id as p and checks the {id, status} answer.
func (k *contactsWorld) respond(t testing.TB, p *contactsParty, action, id string) {
	t.Helper()
	method, path, body := respondCall(p, action, id)
	r := k.ts.do(t, method, path, p.cred(), body)
	expect(t, r, 200, "")
	sameJSON(t, method+" "+path, r.data(t), map[string]any{"id": id, "status": statusAfter[action]})
}

// askAndSettle has from ask each of to; then the first approves, the second
// rejects, and from cancels its request to the third. It returns the
// requests' ids, in the order of to.
func (k *contactsWorld) askAndSettle(t testing.TB, from *contactsParty, to []*contactsParty) []string {
	t.Helper()
	var ids []string
	for _, p := range to {
		ids = append(ids, k.request(t, from, p))
	}
	k.respond(t, to[0], "approve", ids[0])
	k.respond(t, to[1], "reject", ids[1])
	k.respond(t, from, "cancel", ids[2])
	return ids
}

// connect makes from and to contacts: from asks, to approves.
func (k *contactsWorld) connect(t testing.TB, from, to *contactsParty) {
	t.Helper()
	k.respond(t, to, "approve", k.request(t, from, to))
}

func contactsPath(p *contactsParty) string {
	if p.agent {
		return "/api/v1/agent/contacts"
	}
	return "/api/v1/me/contacts"
}

func removeContactPath(p *contactsParty) string { return contactsPath(p) + "/remove" }

// contactItems is p's first page of 100 contacts.
func (k *contactsWorld) contactItems(t testing.TB, p *contactsParty) []map[string]any {
	t.Helper()
	r := k.ts.do(t, "GET", contactsPath(p)+"?page_size=100", p.cred(), nil)
	expect(t, r, 200, "")
	var out []map[string]any
	for _, it := range r.list(t) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// contactHandle is the handle of a contact in either API's shape.
func contactHandle(p *contactsParty, c map[string]any) string {
	if p.agent {
		return c["handle"].(string)
	}
	return c["user"].(map[string]any)["handle"].(string)
}

// contacts renders p's contacts as their handles, oldest first.
func (k *contactsWorld) contacts(t testing.TB, p *contactsParty) string {
	t.Helper()
	var hs []string
	for _, c := range k.contactItems(t, p) {
		hs = append(hs, contactHandle(p, c))
	}
	return strings.Join(hs, ",")
}

// recordOf is p's contact record id for other ("" when not a contact).
func (k *contactsWorld) recordOf(t testing.TB, p, other *contactsParty) string {
	t.Helper()
	for _, c := range k.contactItems(t, p) {
		if contactHandle(p, c) == other.handle {
			return c["id"].(string)
		}
	}
	return ""
}

// requests renders p's requests, newest first, each "#n from>to status":
// the pending ones p received and all those p sent.
func (k *contactsWorld) requests(t testing.TB, p *contactsParty) (received, sent string) {
	t.Helper()
	var rec, snt []string
	if p.agent {
		r := k.ts.do(t, "GET", "/api/v1/agent/contacts/requests?sent_status=all&page_size=100", p.cred(), nil)
		expect(t, r, 200, "")
		d := r.data(t)
		for _, it := range d["received"].([]any) {
			m := it.(map[string]any)
			rec = append(rec, fmt.Sprintf("%s %v>%s %v", k.label(m["id"].(string)), m["from_handle"], p.handle, m["status"]))
		}
		for _, it := range d["sent"].([]any) {
			m := it.(map[string]any)
			snt = append(snt, fmt.Sprintf("%s %s>%v %v", k.label(m["id"].(string)), p.handle, m["to_handle"], m["status"]))
		}
		return strings.Join(rec, ","), strings.Join(snt, ",")
	}
	render := func(path string) []string {
		r := k.ts.do(t, "GET", path, p.cred(), nil)
		expect(t, r, 200, "")
		var out []string
		for _, it := range r.list(t) {
			m := it.(map[string]any)
			from, to := m["requester"].(map[string]any), m["recipient"].(map[string]any)
			out = append(out, fmt.Sprintf("%s %v>%v %v", k.label(m["id"].(string)), from["handle"], to["handle"], m["status"]))
		}
		return out
	}
	rec = render("/api/v1/me/contacts/requests?page_size=100")
	snt = render("/api/v1/me/contacts/requests/sent?page_size=100")
	return strings.Join(rec, ","), strings.Join(snt, ",")
}

// removedPayload is the contact_removed payload of record id, naming who.
func removedPayload(id string, who *contactsParty) map[string]any {
	return map[string]any{"id": id, "handle": who.handle, "name": who.name, "type": partyType(who)}
}

// withID matches a push about id.
func withID(id string) func(map[string]any) bool {
	return func(p map[string]any) bool { return p["id"] == id }
}

// TestContactsAdd: a request between any two kinds of party, in or across
// organizations, is made pending and shows in both parties' listings in
// each API's shape; nobody is a contact yet.
func TestContactsAdd(t *testing.T) {
	k := newContactsWorld(t)
	alice, bob := k.human("alice"), k.human("bob")
	carol := k.human("carol", "Other Org")
	helper, scout := k.bot(alice, "Helper"), k.bot(carol, "Scout")
	for _, tc := range []struct {
		name         string
		from, to     *contactsParty
		message      any
		savedMessage any
	}{
		{"agent to agent across organizations", helper, scout, "hi scout", "hi scout"},
		{"agent to a person across organizations", scout, alice, nil, nil},
		{"person to an agent of the organization", bob, helper, "  padded  ", "padded"},
		{"person to a person across organizations", alice, carol, "line one\nline two", "line one\nline two"},
		{"person to a person of the organization", bob, alice, "   ", nil},
		{"agent to its owner, handle with @", helper, alice, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fields := map[string]any{"handle": tc.to.handle}
			if tc.name == "agent to its owner, handle with @" {
				fields["handle"] = "@" + tc.to.handle
			}
			if tc.message != nil {
				fields["message"] = tc.message
			}
			path, body := addContactCall(tc.from, fields)
			r := k.ts.do(t, "POST", path, tc.from.cred(), body)
			expect(t, r, 201, "")
			d := r.data(t)
			id, _ := d["id"].(string)
			if !store.ValidID(id) {
				t.Fatalf("request id %v", d["id"])
			}
			if tc.from.agent {
				sameJSON(t, "agent answer", d, map[string]any{"id": id, "status": "pending"})
			} else {
				checkRequestView(t, d, id, tc.from, tc.to, tc.savedMessage, "pending", false)
			}
			k.label(id)

			// The recipient sees it received, the requester sent.
			k.checkPendingRequest(t, tc.to, true, id, tc.from, tc.to, tc.savedMessage)
			k.checkPendingRequest(t, tc.from, false, id, tc.from, tc.to, tc.savedMessage)
			// A request makes no contact.
			for _, p := range []*contactsParty{tc.from, tc.to} {
				for _, c := range k.contactItems(t, p) {
					if h := contactHandle(p, c); h == tc.from.handle || h == tc.to.handle {
						t.Fatalf("%s has %s as a contact before any approval", p.handle, h)
					}
				}
			}
		})
	}
}

// agentRequestItems is one direction of an agent's request listing (sent
// with every status).
func (k *contactsWorld) agentRequestItems(t testing.TB, p *contactsParty, direction string) []map[string]any {
	t.Helper()
	r := k.ts.do(t, "GET", "/api/v1/agent/contacts/requests?sent_status=all&page_size=100", p.cred(), nil)
	expect(t, r, 200, "")
	var out []map[string]any
	for _, it := range r.data(t)[direction].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// humanRequestItems is a human request listing (path with its query).
func (k *contactsWorld) humanRequestItems(t testing.TB, p *contactsParty, path string) []map[string]any {
	t.Helper()
	if !strings.Contains(path, "?") {
		path += "?page_size=100"
	}
	r := k.ts.do(t, "GET", path, p.cred(), nil)
	expect(t, r, 200, "")
	var out []map[string]any
	for _, it := range r.list(t) {
		out = append(out, it.(map[string]any))
	}
	return out
}

func findByID(t testing.TB, items []map[string]any, id string) map[string]any {
	t.Helper()
	for _, it := range items {
		if it["id"] == id {
			return it
		}
	}
	t.Fatalf("request %s not listed in %v", id, items)
	return nil
}

func partyType(p *contactsParty) string {
	if p.agent {
		return "Agent"
	}
	return "User"
}

// checkRequestView checks a human API ContactRequest.
// checkPendingRequest finds request id, from from to to and pending, among
// p's received requests (or sent ones) and checks it in the shape of p's
// API.
func (k *contactsWorld) checkPendingRequest(t testing.TB, p *contactsParty, received bool, id string, from, to *contactsParty, message any) {
	t.Helper()
	if !p.agent {
		path := "/api/v1/me/contacts/requests/sent"
		if received {
			path = "/api/v1/me/contacts/requests"
		}
		checkRequestView(t, findByID(t, k.humanRequestItems(t, p, path), id), id, from, to, message, "pending", false)
		return
	}
	direction, side, other, keys := "sent", "to", to, "id,inserted_at,message,status,to_handle,to_name"
	if received {
		direction, side, other, keys = "received", "from", from, "from_handle,from_name,id,inserted_at,message,status"
	}
	it := findByID(t, k.agentRequestItems(t, p, direction), id)
	sameJSON(t, direction+" request keys", strings.Join(keysOf(it), ","), keys)
	if it[side+"_handle"] != other.handle || it[side+"_name"] != other.name || it["status"] != "pending" ||
		!reflect.DeepEqual(it["message"], message) {
		t.Fatalf("%s request = %v", direction, it)
	}
}

func checkRequestView(t testing.TB, v map[string]any, id string, from, to *contactsParty, message any, status string, responded bool) {
	t.Helper()
	want := map[string]any{
		"id": id, "requester_id": from.id, "requester_type": partyType(from),
		"requester":    map[string]any{"id": from.id, "handle": from.handle, "name": from.name},
		"recipient_id": to.id, "recipient_type": partyType(to),
		"recipient": map[string]any{"id": to.id, "handle": to.handle, "name": to.name},
		"message":   message, "status": status,
	}
	got := map[string]any{}
	for k, x := range v {
		got[k] = x
	}
	ins, _ := got["inserted_at"].(string)
	resp, hasResp := got["responded_at"]
	delete(got, "inserted_at")
	delete(got, "responded_at")
	sameJSON(t, "ContactRequest", got, want)
	if ins == "" || !hasResp {
		t.Fatalf("ContactRequest lacks inserted_at or responded_at: %v", v)
	}
	if _, isString := resp.(string); isString != responded {
		t.Fatalf("responded_at = %v, want it set: %v", resp, responded)
	}
}

// TestContactsAddMeetsTheInverseRequest: asking someone who had already
// asked you approves their request at once; both are contacts and nothing
// stays pending.
func TestContactsAddMeetsTheInverseRequest(t *testing.T) {
	k := newContactsWorld(t)
	alice := k.human("alice")
	carol, dave := k.human("carol", "Other Org"), k.human("dave", "Third Org")
	helper, scout := k.bot(alice, "Helper"), k.bot(carol, "Scout")
	for _, tc := range []struct {
		name     string
		from, to *contactsParty // from asked first; to adds from
	}{
		{"agent and agent across organizations", helper, scout},
		{"person asked an agent", dave, helper},
		{"agent asked a person", scout, alice},
		{"person and person across organizations", alice, carol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := k.request(t, tc.from, tc.to, "first")
			r := k.add(t, tc.to, "@"+tc.from.handle)
			expect(t, r, 201, "")
			d := r.data(t)
			if tc.to.agent {
				sameJSON(t, "agent answer", d, map[string]any{"id": id, "status": "approved"})
			} else {
				// The human API answers with the request it approved.
				checkRequestView(t, d, id, tc.from, tc.to, "first", "approved", true)
			}
			if !strings.Contains(","+k.contacts(t, tc.from)+",", ","+tc.to.handle+",") ||
				!strings.Contains(","+k.contacts(t, tc.to)+",", ","+tc.from.handle+",") {
				t.Fatalf("not contacts both ways: %s has %q, %s has %q", tc.from.handle, k.contacts(t, tc.from), tc.to.handle, k.contacts(t, tc.to))
			}
			// The first request is approved; nothing is pending either way.
			for _, p := range []*contactsParty{tc.from, tc.to} {
				rec, sent := k.requests(t, p)
				if strings.Contains(rec+sent, "pending") {
					t.Fatalf("%s still has pending requests: received %q, sent %q", p.handle, rec, sent)
				}
			}
			_, sent := k.requests(t, tc.from)
			if want := k.label(id) + " " + tc.from.handle + ">" + tc.to.handle + " approved"; !strings.Contains(sent, want) {
				t.Fatalf("%s sent %q, want %q among them", tc.from.handle, sent, want)
			}
			// And now each side is "already contacts".
			for _, p := range [][2]*contactsParty{{tc.from, tc.to}, {tc.to, tc.from}} {
				path, body := addContactCall(p[0], map[string]any{"handle": p[1].handle})
				k.ts.refused(t, "POST", path, p[0].cred(), body, 409, "conflict", "")
			}
		})
	}
}

func TestContactsAddRefusals(t *testing.T) {
	k := newContactsWorld(t)
	alice, carol, helper, scout := k.twoOrganizations()
	gone := k.bot(alice, "Gone")
	expect(t, k.ts.do(t, "DELETE", "/api/v1/me/agents/"+gone.id, alice.cred(), nil), 200, "")
	k.connect(t, helper, carol) // helper and carol are contacts
	k.connect(t, scout, alice)  // so are alice and scout
	k.request(t, helper, alice) // helper's request to alice is pending
	k.request(t, alice, carol)  // so is alice's to carol

	k.ts.run(t, addRefusals(helper, alice))

	// The limit itself is accepted, counted in characters.
	long := strings.Repeat("é", 500)
	id := k.request(t, helper, scout, long)
	if it := findByID(t, k.agentRequestItems(t, scout, "received"), id); it["message"] != long {
		t.Fatalf("a 500-character message was stored as %v", it["message"])
	}
	erin := k.human("erin")
	r := k.ts.do(t, "POST", "/api/v1/me/contacts/requests", carol.cred(),
		map[string]any{"contact_request": map[string]any{"recipient_handle": "ERIN", "message": long}})
	expect(t, r, 201, "")
	if d := r.data(t); d["recipient_id"] != erin.id || d["message"] != long || d["status"] != "pending" {
		t.Fatalf("carol asks ERIN: %s", r.body)
	}
}

// addRefusals are the refused requests for a contact, by helper (an agent)
// and alice (a person), in the world of TestContactsAddRefusals.
func addRefusals(helper, alice *contactsParty) []scenario {
	var cases []scenario
	for _, as := range []*contactsParty{helper, alice} {
		as := as
		call := func(name string, fields map[string]any, status int, code string, pointers ...string) {
			path, body := addContactCall(as, fields)
			cases = append(cases, scenario{name: as.handle + ": " + name, cred: as.cred(), method: "POST", path: path, body: body,
				status: status, code: code, pointers: pointers})
		}
		for _, h := range []string{"a b", "@", "x/y/z", "", "   ", "alice/", "/helper", "al!ce", "carol/sc out", "@@carol", "c"} {
			call(fmt.Sprintf("bad handle %q", h), map[string]any{"handle": h}, 400, "bad_request")
		}
		call("missing handle", map[string]any{}, 400, "bad_request")
		call("missing handle, with a message", map[string]any{"message": "hi"}, 400, "bad_request")
		call("null handle", map[string]any{"handle": nil}, 400, "bad_request")
		handleAt := "/handle"
		if !as.agent {
			handleAt = "/contact_request/recipient_handle"
		}
		call("handle of the wrong type", map[string]any{"handle": 5}, 422, "validation_error", handleAt)
		call("unknown person", map[string]any{"handle": "nobody"}, 404, "not_found")
		call("unknown agent", map[string]any{"handle": "carol/nobody"}, 404, "not_found")
		call("agent of an unknown person", map[string]any{"handle": "nobody/scout"}, 404, "not_found")
		call("deleted agent", map[string]any{"handle": "alice/gone"}, 404, "not_found")
		call("self", map[string]any{"handle": as.handle}, 409, "conflict")
		call("self, with @ and in capitals", map[string]any{"handle": "@" + strings.ToUpper(as.handle)}, 409, "conflict")
		contact, pending := "carol", "alice"
		if !as.agent {
			contact, pending = "carol/scout", "carol"
		}
		call("already contacts", map[string]any{"handle": contact}, 409, "conflict")
		call("already contacts, with @", map[string]any{"handle": "@" + contact}, 409, "conflict")
		call("already pending", map[string]any{"handle": pending, "message": "again"}, 409, "conflict")
		at := addMessagePointer(as)
		call("message over 500 characters", map[string]any{"handle": "carol/scout", "message": strings.Repeat("m", 501)}, 422, "validation_error", at)
		call("message over 500 characters, unknown handle", map[string]any{"handle": "nobody", "message": strings.Repeat("é", 501)}, 422, "validation_error", at)
		call("message with a control character", map[string]any{"handle": "carol/scout", "message": "bell\x07"}, 422, "validation_error", at)
		call("message of the wrong type", map[string]any{"handle": "carol/scout", "message": 5}, 422, "validation_error", at)
	}
	cases = append(cases,
		scenario{name: "agent: unknown field", cred: helper.cred(), method: "POST", path: "/api/v1/agent/contacts/add",
			body: map[string]any{"handle": "carol/scout", "note": "x"}, status: 400, code: "unknown_field", pointers: []string{"/note"}},
		scenario{name: "person: unknown field in contact_request", cred: alice.cred(), method: "POST", path: "/api/v1/me/contacts/requests",
			body: map[string]any{"contact_request": map[string]any{"recipient_handle": "alice/helper", "note": "x"}}, status: 400, code: "unknown_field", pointers: []string{"/contact_request/note"}},
		scenario{name: "person: unknown top-level field", cred: alice.cred(), method: "POST", path: "/api/v1/me/contacts/requests",
			body: map[string]any{"contact_request": map[string]any{"recipient_handle": "alice/helper"}, "handle": "x"}, status: 400, code: "unknown_field", pointers: []string{"/handle"}},
		scenario{name: "person: the agent API's body", cred: alice.cred(), method: "POST", path: "/api/v1/me/contacts/requests",
			body: map[string]any{"handle": "alice/helper"}, status: 400, code: "unknown_field", pointers: []string{"/handle"}},
		scenario{name: "person: no contact_request", cred: alice.cred(), method: "POST", path: "/api/v1/me/contacts/requests",
			body: map[string]any{}, status: 400, code: "bad_request"},
		scenario{name: "person: null contact_request", cred: alice.cred(), method: "POST", path: "/api/v1/me/contacts/requests",
			body: map[string]any{"contact_request": nil}, status: 400, code: "bad_request"},
		scenario{name: "agent: not JSON", cred: helper.cred(), method: "POST", path: "/api/v1/agent/contacts/add",
			body: `{"handle":`, status: 400, code: "invalid_json"},
		scenario{name: "person: not JSON", cred: alice.cred(), method: "POST", path: "/api/v1/me/contacts/requests",
			body: `{"contact_request":`, status: 400, code: "invalid_json"},
		scenario{name: "person's key on the agent route", cred: alice.cred(), method: "POST", path: "/api/v1/agent/contacts/add",
			body: map[string]any{"handle": "carol/scout"}, status: 403, code: "forbidden"},
		scenario{name: "agent's key on the human route", cred: helper.cred(), method: "POST", path: "/api/v1/me/contacts/requests",
			body: map[string]any{"contact_request": map[string]any{"recipient_handle": "carol/scout"}}, status: 403, code: "forbidden"},
		scenario{name: "no credentials, agent route", method: "POST", path: "/api/v1/agent/contacts/add",
			body: map[string]any{"handle": "carol/scout"}, status: 401, code: "unauthorized"},
		scenario{name: "no credentials, human route", method: "POST", path: "/api/v1/me/contacts/requests",
			body: map[string]any{"contact_request": map[string]any{"recipient_handle": "carol/scout"}}, status: 401, code: "unauthorized"},
	)
	return cases
}

// TestContactsLists: both APIs' contact records, oldest first, paged.
func TestContactsLists(t *testing.T) {
	k := newContactsWorld(t)
	alice, carol, helper, scout := k.twoOrganizations()
	k.connect(t, helper, carol)
	k.connect(t, scout, helper)
	k.connect(t, alice, helper)
	k.connect(t, carol, alice)

	// The agent API: AgentContact, the contact record's id.
	t.Run("the agent API lists AgentContacts", func(t *testing.T) { contactsAgentListShape(t, k, helper, carol, scout, alice) })

	// The human API: Contact, with contact_id the other party.
	t.Run("the human API lists Contacts", func(t *testing.T) { contactsHumanListShape(t, k, carol, helper, alice) })
	// Each side has its own record of the contact.
	if a, b := k.recordOf(t, helper, carol), k.recordOf(t, carol, helper); a == "" || b == "" || a == b {
		t.Fatalf("records %q and %q", a, b)
	}

	t.Run("paging", func(t *testing.T) { contactsListPages(t, k, helper, carol, scout) })
	// Someone with no contacts has an empty list.
	loner := k.human("loner")
	r := k.ts.do(t, "GET", "/api/v1/me/contacts", loner.cred(), nil)
	expect(t, r, 200, "")
	if len(r.list(t)) != 0 || !reflect.DeepEqual(r.meta(t), offsetMetaJSON(1, 20, 0, 0)) {
		t.Fatalf("loner's contacts: %s", r.body)
	}

	var cases []scenario
	for _, p := range []*contactsParty{helper, carol} {
		for _, q := range []struct{ query, pointer string }{
			{"page=0", "/page"}, {"page_size=0", "/page_size"}, {"page_size=101", "/page_size"}, {"page_size=x", "/page_size"},
		} {
			cases = append(cases, scenario{name: p.handle + " " + q.query, cred: p.cred(), method: "GET", path: contactsPath(p) + "?" + q.query,
				status: 422, code: "validation_error", pointers: []string{q.pointer}})
		}
	}
	cases = append(cases,
		scenario{name: "person's key on the agent list", cred: carol.cred(), method: "GET", path: "/api/v1/agent/contacts", status: 403, code: "forbidden"},
		scenario{name: "agent's key on the human list", cred: helper.cred(), method: "GET", path: "/api/v1/me/contacts", status: 403, code: "forbidden"},
		scenario{name: "no credentials", method: "GET", path: "/api/v1/agent/contacts", status: 401, code: "unauthorized"},
	)
	k.ts.run(t, cases)
}

func contactsAgentListShape(t *testing.T, k *contactsWorld, helper, carol, scout, alice *contactsParty) {
	items := k.contactItems(t, helper)
	if got := k.contacts(t, helper); got != "carol,carol/scout,alice" {
		t.Fatalf("helper's contacts = %s", got)
	}
	for i, want := range []struct {
		p          *contactsParty
		typ        string
		agentsOnly bool
	}{{carol, "User", false}, {scout, "Agent", true}, {alice, "User", false}} {
		c := items[i]
		sameJSON(t, "AgentContact keys", strings.Join(keysOf(c), ","), "description,handle,id,inserted_at,is_external,listed_in_directory,name,tags,type")
		if c["handle"] != want.p.handle || c["name"] != want.p.name || c["type"] != want.typ || !store.ValidID(c["id"].(string)) ||
			c["id"] == want.p.id || c["inserted_at"] == "" {
			t.Errorf("contact %d = %v", i, c)
		}
		if _, ok := c["listed_in_directory"].(bool); !ok {
			t.Errorf("contact %d listed_in_directory = %v", i, c["listed_in_directory"])
		}
		_, tagsList := c["tags"].([]any)
		_, external := c["is_external"].(bool)
		if want.agentsOnly != (c["description"] == "Scout does things") || want.agentsOnly != tagsList || want.agentsOnly != external {
			t.Errorf("contact %d: agent fields %v", i, c)
		}
	}
}

func contactsHumanListShape(t *testing.T, k *contactsWorld, carol, helper, alice *contactsParty) {
	cs := k.contactItems(t, carol)
	if got := k.contacts(t, carol); got != "alice/helper,alice" {
		t.Fatalf("carol's contacts = %s", got)
	}
	for i, want := range []*contactsParty{helper, alice} {
		c := cs[i]
		sameJSON(t, "Contact keys", strings.Join(keysOf(c), ","), "contact_id,contact_type,id,inserted_at,source,status,user")
		if c["contact_id"] != want.id || c["contact_type"] != partyType(want) || c["status"] != "active" || c["source"] != "request" ||
			c["id"] == want.id || !store.ValidID(c["id"].(string)) {
			t.Errorf("carol's contact %d = %v", i, c)
		}
		u := c["user"].(map[string]any)
		if u["id"] != want.id || u["handle"] != want.handle || u["name"] != want.name {
			t.Errorf("carol's contact %d user = %v", i, u)
		}
		// Contacts see each other's email; agents have none.
		if want.agent {
			if _, ok := u["email"]; ok {
				t.Errorf("an agent contact has an email: %v", u)
			}
			if _, ok := u["tags"].([]any); !ok {
				t.Errorf("an agent contact's tags = %v", u["tags"])
			}
		} else if u["email"] != want.handle+"@example.com" {
			t.Errorf("a person contact's email = %v", u["email"])
		}
	}
}

func contactsListPages(t *testing.T, k *contactsWorld, helper, carol, scout *contactsParty) {
	for _, tc := range []struct {
		p            *contactsParty
		query, names string
		meta         map[string]any
	}{
		{helper, "", "carol,carol/scout,alice", offsetMetaJSON(1, 20, 3, 1)},
		{helper, "page_size=2", "carol,carol/scout", offsetMetaJSON(1, 2, 3, 2)},
		{helper, "page=2&page_size=2", "alice", offsetMetaJSON(2, 2, 3, 2)},
		{helper, "page=3&page_size=2", "", offsetMetaJSON(3, 2, 3, 2)},
		{carol, "page_size=1&page=2", "alice", offsetMetaJSON(2, 1, 2, 2)},
		{scout, "", "alice/helper", offsetMetaJSON(1, 20, 1, 1)},
	} {
		r := k.ts.do(t, "GET", contactsPath(tc.p)+"?"+tc.query, tc.p.cred(), nil)
		expect(t, r, 200, "")
		var hs []string
		for _, it := range r.list(t) {
			hs = append(hs, contactHandle(tc.p, it.(map[string]any)))
		}
		if got := strings.Join(hs, ","); got != tc.names {
			t.Errorf("%s ?%s = %s, want %s", tc.p.handle, tc.query, got, tc.names)
		}
		if m := r.meta(t); !reflect.DeepEqual(m, tc.meta) {
			t.Errorf("%s ?%s metadata = %v, want %v", tc.p.handle, tc.query, m, tc.meta)
		}
	}
}

// TestContactsAgentRequestListing: received requests are always the
// pending ones; sent ones are filtered by sent_status (pending by default);
// each direction is paged on its own by the same page and page_size, newest
// first, with its own total and total_pages.
func TestContactsAgentRequestListing(t *testing.T) {
	k := newContactsWorld(t)
	owner := k.human("owner")
	hub := k.bot(owner, "Hub")
	var us []*contactsParty
	for i := 1; i <= 12; i++ {
		us = append(us, k.human(fmt.Sprintf("u%02d", i), "Many"))
	}
	// u01..u05 ask hub; hub rejects u05.
	for _, u := range us[:5] {
		k.request(t, u, hub, "from "+u.handle)
	}
	expect(t, k.ts.do(t, "POST", "/api/v1/agent/contacts/requests/respond", hub.cred(), map[string]any{"action": "reject", "handle": "u05"}), 200, "")
	// hub asks u06..u12; u06 approves, u07 rejects, hub cancels its request to u08.
	out := k.askAndSettle(t, hub, us[5:])

	t.Run("paging and the sent_status filter, per direction", func(t *testing.T) { agentRequestPages(t, k, hub) })

	// The shapes: ReceivedContactRequest and SentContactRequest.
	t.Run("the ReceivedContactRequest and SentContactRequest shapes", func(t *testing.T) { agentRequestShapes(t, k, hub, out) })

	var cases []scenario
	for _, q := range []struct{ query, pointer string }{
		{"page_size=101", "/page_size"},
		{"page_size=0", "/page_size"},
		{"page=0", "/page"},
		{"page=x", "/page"},
		{"sent_status=bogus", "/sent_status"},
		{"sent_status=expired", "/sent_status"},
		{"sent_status=ALL", "/sent_status"},
		{"sent_status=", "/sent_status"},
	} {
		cases = append(cases, scenario{name: q.query, cred: hub.cred(), method: "GET", path: "/api/v1/agent/contacts/requests?" + q.query,
			status: 422, code: "validation_error", pointers: []string{q.pointer}})
	}
	cases = append(cases,
		scenario{name: "person's key", cred: owner.cred(), method: "GET", path: "/api/v1/agent/contacts/requests", status: 403, code: "forbidden"},
		scenario{name: "no credentials", method: "GET", path: "/api/v1/agent/contacts/requests", status: 401, code: "unauthorized"})
	k.ts.run(t, cases)
}

func agentRequestPages(t *testing.T, k *contactsWorld, hub *contactsParty) {
	direction := func(total, pages int) map[string]any {
		return map[string]any{"total": float64(total), "total_pages": float64(pages)}
	}
	meta := func(page, size int, rec, sent map[string]any) map[string]any {
		return map[string]any{"page": float64(page), "page_size": float64(size), "received": rec, "sent": sent}
	}
	const pending4 = "u12:pending,u11:pending,u10:pending,u09:pending"
	const all7 = pending4 + ",u08:cancelled,u07:rejected,u06:approved"
	for _, tc := range []struct {
		query, received, sent string
		meta                  map[string]any
	}{
		{"", "u04,u03,u02,u01", pending4, meta(1, 20, direction(4, 1), direction(4, 1))},
		{"sent_status=pending", "u04,u03,u02,u01", pending4, meta(1, 20, direction(4, 1), direction(4, 1))},
		{"sent_status=all", "u04,u03,u02,u01", all7, meta(1, 20, direction(4, 1), direction(7, 1))},
		{"sent_status=approved", "u04,u03,u02,u01", "u06:approved", meta(1, 20, direction(4, 1), direction(1, 1))},
		{"sent_status=rejected", "u04,u03,u02,u01", "u07:rejected", meta(1, 20, direction(4, 1), direction(1, 1))},
		{"sent_status=cancelled", "u04,u03,u02,u01", "u08:cancelled", meta(1, 20, direction(4, 1), direction(1, 1))},
		// page_size applies per direction: up to 2 x page_size items.
		{"page_size=3", "u04,u03,u02", "u12:pending,u11:pending,u10:pending", meta(1, 3, direction(4, 2), direction(4, 2))},
		{"page=2&page_size=3", "u01", "u09:pending", meta(2, 3, direction(4, 2), direction(4, 2))},
		{"page=2&page_size=3&sent_status=all", "u01", "u09:pending,u08:cancelled,u07:rejected", meta(2, 3, direction(4, 2), direction(7, 3))},
		{"page=3&page_size=3&sent_status=all", "", "u06:approved", meta(3, 3, direction(4, 2), direction(7, 3))},
		{"page=9&page_size=3", "", "", meta(9, 3, direction(4, 2), direction(4, 2))},
		{"page_size=1&sent_status=all", "u04", "u12:pending", meta(1, 1, direction(4, 4), direction(7, 7))},
		{"page_size=100&sent_status=all", "u04,u03,u02,u01", all7, meta(1, 100, direction(4, 1), direction(7, 1))},
	} {
		r := k.ts.do(t, "GET", "/api/v1/agent/contacts/requests?"+tc.query, hub.cred(), nil)
		expect(t, r, 200, "")
		d := r.data(t)
		var rec, sent []string
		for _, it := range d["received"].([]any) {
			m := it.(map[string]any)
			if m["status"] != "pending" {
				t.Errorf("?%s: a received request is %v", tc.query, m["status"])
			}
			rec = append(rec, m["from_handle"].(string))
		}
		for _, it := range d["sent"].([]any) {
			m := it.(map[string]any)
			sent = append(sent, fmt.Sprintf("%v:%v", m["to_handle"], m["status"]))
		}
		if got := strings.Join(rec, ","); got != tc.received {
			t.Errorf("?%s received = %s, want %s", tc.query, got, tc.received)
		}
		if got := strings.Join(sent, ","); got != tc.sent {
			t.Errorf("?%s sent = %s, want %s", tc.query, got, tc.sent)
		}
		if m := r.meta(t); !reflect.DeepEqual(m, tc.meta) {
			t.Errorf("?%s metadata = %v, want %v", tc.query, m, tc.meta)
		}
	}
}

func agentRequestShapes(t *testing.T, k *contactsWorld, hub *contactsParty, out []string) {
	rec := k.agentRequestItems(t, hub, "received")[0]
	sameJSON(t, "received keys", strings.Join(keysOf(rec), ","), "from_handle,from_name,id,inserted_at,message,status")
	if rec["from_handle"] != "u04" || rec["from_name"] != "U04 Tester" || rec["message"] != "from u04" || rec["inserted_at"] == "" {
		t.Errorf("received = %v", rec)
	}
	sent := k.agentRequestItems(t, hub, "sent")[0]
	sameJSON(t, "sent keys", strings.Join(keysOf(sent), ","), "id,inserted_at,message,status,to_handle,to_name")
	if sent["to_handle"] != "u12" || sent["to_name"] != "U12 Tester" || sent["message"] != nil || sent["id"] != out[6] {
		t.Errorf("sent = %v", sent)
	}
}

// TestContactsHumanRequestListing: GET /me/contacts/requests lists the
// pending requests received; /sent every sent one (status=all by default)
// or one status.
func TestContactsHumanRequestListing(t *testing.T) {
	k := newContactsWorld(t)
	hub := k.human("hub")
	var us []*contactsParty
	for i := 1; i <= 8; i++ {
		us = append(us, k.human(fmt.Sprintf("u%02d", i), "Many"))
	}
	bot := k.bot(us[0], "Bot One")
	// u01, u01/bot-one, u02 and u03 ask hub; hub rejects u03.
	var in []string
	for _, p := range []*contactsParty{us[0], bot, us[1], us[2]} {
		in = append(in, k.request(t, p, hub, "from "+p.handle))
	}
	k.respond(t, hub, "reject", in[3])
	// hub asks u04..u08; u04 approves, u05 rejects, hub cancels u06.
	out := k.askAndSettle(t, hub, us[3:])

	t.Run("paging and the status filter", func(t *testing.T) { humanRequestPages(t, k, hub) })
	// The records, in the ContactRequest shape.
	t.Run("the records, in the ContactRequest shape", func(t *testing.T) { humanRequestRecords(t, k, hub, in, bot, out, us) })

	var cases []scenario
	for _, q := range []struct{ path, pointer string }{
		{"/api/v1/me/contacts/requests/sent?status=bogus", "/status"},
		{"/api/v1/me/contacts/requests/sent?status=expired", "/status"},
		{"/api/v1/me/contacts/requests/sent?status=Pending", "/status"},
		{"/api/v1/me/contacts/requests/sent?page_size=101", "/page_size"},
		{"/api/v1/me/contacts/requests?page_size=101", "/page_size"},
		{"/api/v1/me/contacts/requests?page=0", "/page"},
	} {
		cases = append(cases, scenario{name: q.path, cred: hub.cred(), method: "GET", path: q.path, status: 422, code: "validation_error", pointers: []string{q.pointer}})
	}
	cases = append(cases,
		scenario{name: "agent key, received", cred: bot.cred(), method: "GET", path: "/api/v1/me/contacts/requests", status: 403, code: "forbidden"},
		scenario{name: "agent key, sent", cred: bot.cred(), method: "GET", path: "/api/v1/me/contacts/requests/sent", status: 403, code: "forbidden"},
		scenario{name: "no credentials", method: "GET", path: "/api/v1/me/contacts/requests/sent", status: 401, code: "unauthorized"})
	k.ts.run(t, cases)
}

func humanRequestPages(t *testing.T, k *contactsWorld, hub *contactsParty) {
	render := func(r *response, withStatus bool) string {
		var s []string
		for _, it := range r.list(t) {
			m := it.(map[string]any)
			h := m["requester"].(map[string]any)["handle"].(string)
			if m["requester_id"] == hub.id {
				h = m["recipient"].(map[string]any)["handle"].(string)
			}
			if withStatus {
				h += ":" + m["status"].(string)
			}
			s = append(s, h)
		}
		return strings.Join(s, ",")
	}
	const all = "u08:pending,u07:pending,u06:cancelled,u05:rejected,u04:approved"
	for _, tc := range []struct {
		path, list string
		meta       map[string]any
	}{
		{"/api/v1/me/contacts/requests", "u02:pending,u01/bot-one:pending,u01:pending", offsetMetaJSON(1, 20, 3, 1)},
		{"/api/v1/me/contacts/requests?page_size=2", "u02:pending,u01/bot-one:pending", offsetMetaJSON(1, 2, 3, 2)},
		{"/api/v1/me/contacts/requests?page=2&page_size=2", "u01:pending", offsetMetaJSON(2, 2, 3, 2)},
		{"/api/v1/me/contacts/requests/sent", all, offsetMetaJSON(1, 20, 5, 1)},
		{"/api/v1/me/contacts/requests/sent?status=all", all, offsetMetaJSON(1, 20, 5, 1)},
		{"/api/v1/me/contacts/requests/sent?status=pending", "u08:pending,u07:pending", offsetMetaJSON(1, 20, 2, 1)},
		{"/api/v1/me/contacts/requests/sent?status=approved", "u04:approved", offsetMetaJSON(1, 20, 1, 1)},
		{"/api/v1/me/contacts/requests/sent?status=rejected", "u05:rejected", offsetMetaJSON(1, 20, 1, 1)},
		{"/api/v1/me/contacts/requests/sent?status=cancelled", "u06:cancelled", offsetMetaJSON(1, 20, 1, 1)},
		{"/api/v1/me/contacts/requests/sent?status=all&page=2&page_size=2", "u06:cancelled,u05:rejected", offsetMetaJSON(2, 2, 5, 3)},
		{"/api/v1/me/contacts/requests/sent?page=4&page_size=2", "", offsetMetaJSON(4, 2, 5, 3)},
	} {
		r := k.ts.do(t, "GET", tc.path, hub.cred(), nil)
		expect(t, r, 200, "")
		if got := render(r, true); got != tc.list {
			t.Errorf("%s = %s, want %s", tc.path, got, tc.list)
		}
		if m := r.meta(t); !reflect.DeepEqual(m, tc.meta) {
			t.Errorf("%s metadata = %v, want %v", tc.path, m, tc.meta)
		}
	}
}

func humanRequestRecords(t *testing.T, k *contactsWorld, hub *contactsParty, in []string, bot *contactsParty, out []string, us []*contactsParty) {
	checkRequestView(t, findByID(t, k.humanRequestItems(t, hub, "/api/v1/me/contacts/requests"), in[1]), in[1], bot, hub, "from u01/bot-one", "pending", false)
	sentItems := k.humanRequestItems(t, hub, "/api/v1/me/contacts/requests/sent")
	checkRequestView(t, findByID(t, sentItems, out[0]), out[0], hub, us[3], nil, "approved", true)
	checkRequestView(t, findByID(t, sentItems, out[2]), out[2], hub, us[5], nil, "cancelled", true)
	checkRequestView(t, findByID(t, sentItems, out[4]), out[4], hub, us[7], nil, "pending", false)
	// The requester of a rejected request still sees it as rejected.
	checkRequestView(t, findByID(t, k.humanRequestItems(t, us[2], "/api/v1/me/contacts/requests/sent"), in[3]), in[3], us[2], hub, "from u03", "rejected", true)
}

// TestContactsRespond: the agent API's respond, by request_id or by the
// other party's handle: approve and reject by the recipient, cancel by the
// requester, each to its final state.
func TestContactsRespond(t *testing.T) {
	k := newContactsWorld(t)
	alice := k.human("alice")
	carol, dave := k.human("carol", "Other Org"), k.human("dave", "Third Org")
	helper, scout, ranger := k.bot(alice, "Helper"), k.bot(carol, "Scout"), k.bot(dave, "Ranger")

	for _, tc := range []struct {
		name     string
		other    *contactsParty // the requester (approve, reject) or the recipient (cancel)
		action   string
		byHandle string // "" to answer by request_id
	}{
		{"approve by handle", carol, "approve", "carol"},
		{"approve by request_id", scout, "approve", ""},
		{"reject by handle with @", dave, "reject", "@dave"},
		{"reject by request_id", ranger, "reject", ""},
		{"cancel by handle", alice, "cancel", "alice"},
		{"cancel by request_id", dave, "cancel", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var id string
			if tc.action == "cancel" {
				id = k.request(t, helper, tc.other)
			} else {
				id = k.request(t, tc.other, helper)
			}
			body := map[string]any{"action": tc.action}
			if tc.byHandle != "" {
				body["handle"] = tc.byHandle
			} else {
				body["request_id"] = id
			}
			r := k.ts.do(t, "POST", "/api/v1/agent/contacts/requests/respond", helper.cred(), body)
			expect(t, r, 200, "")
			status := statusAfter[tc.action]
			sameJSON(t, "answer", r.data(t), map[string]any{"id": id, "status": status})
			// The request's state as its requester lists it.
			requester, recipient := tc.other, helper
			if tc.action == "cancel" {
				requester, recipient = helper, tc.other
			}
			if requester.agent {
				if it := findByID(t, k.agentRequestItems(t, requester, "sent"), id); it["status"] != status {
					t.Fatalf("request is %v, want %s", it["status"], status)
				}
			} else {
				checkRequestView(t, findByID(t, k.humanRequestItems(t, requester, "/api/v1/me/contacts/requests/sent"), id), id, requester, recipient, nil, status, true)
			}
			// No longer among the recipient's received (pending) ones.
			rec, _ := k.requests(t, recipient)
			if strings.Contains(rec, k.label(id)+" ") {
				t.Fatalf("%s still lists %s as received: %s", recipient.handle, k.label(id), rec)
			}
			contacts := "," + k.contacts(t, helper) + ","
			if made := strings.Contains(contacts, ","+tc.other.handle+","); made != (tc.action == "approve") {
				t.Fatalf("after %s, helper's contacts are %s", tc.action, contacts)
			}
		})
	}
	if got := k.contacts(t, helper); got != "carol,carol/scout" {
		t.Fatalf("helper's contacts = %s", got)
	}
	if got := k.contacts(t, carol); got != "alice/helper" {
		t.Fatalf("carol's contacts = %s", got)
	}
}

func TestContactsRespondRefusals(t *testing.T) {
	k := newContactsWorld(t)
	alice := k.human("alice")
	carol, dave := k.human("carol", "Other Org"), k.human("dave", "Third Org")
	helper, scout, ranger := k.bot(alice, "Helper"), k.bot(carol, "Scout"), k.bot(dave, "Ranger")
	inbound := k.request(t, scout, helper)  // pending, helper is the recipient
	outbound := k.request(t, helper, carol) // pending, helper is the requester
	approved := k.request(t, dave, helper)
	k.respond(t, helper, "approve", approved)
	rejected := k.request(t, ranger, helper)
	k.respond(t, helper, "reject", rejected)
	cancelled := k.request(t, helper, alice)
	k.respond(t, helper, "cancel", cancelled)
	foreign := k.request(t, carol, dave) // helper is no party to it

	const path = "/api/v1/agent/contacts/requests/respond"
	byID := func(action, id string) map[string]any { return map[string]any{"action": action, "request_id": id} }
	byHandle := func(action, h string) map[string]any { return map[string]any{"action": action, "handle": h} }
	as := func(p *contactsParty, name string, body any, status int, code string, pointers ...string) scenario {
		return scenario{name: name, cred: p.cred(), method: "POST", path: path, body: body, status: status, code: code, pointers: pointers}
	}
	k.ts.run(t, []scenario{
		// Only the recipient approves or rejects; only the requester cancels.
		as(helper, "approve a request one sent", byID("approve", outbound), 403, "forbidden"),
		as(helper, "reject a request one sent", byID("reject", outbound), 403, "forbidden"),
		as(helper, "cancel a request one received", byID("cancel", inbound), 403, "forbidden"),
		as(scout, "the requester approves", byID("approve", inbound), 403, "forbidden"),
		as(scout, "the requester rejects", byID("reject", inbound), 403, "forbidden"),
		// By handle: there must be a pending request the right way.
		as(helper, "approve by handle, request goes the other way", byHandle("approve", "carol"), 404, "not_found"),
		as(helper, "cancel by handle, request goes the other way", byHandle("cancel", "carol/scout"), 404, "not_found"),
		as(helper, "approve by handle, no request at all", byHandle("approve", "alice"), 404, "not_found"),
		as(helper, "approve by handle, request already approved", byHandle("approve", "dave"), 404, "not_found"),
		as(helper, "reject by handle, request already rejected", byHandle("reject", "dave/ranger"), 404, "not_found"),
		as(helper, "cancel by handle, request already cancelled", byHandle("cancel", "alice"), 404, "not_found"),
		as(helper, "approve by own handle", byHandle("approve", "alice/helper"), 404, "not_found"),
		as(helper, "unknown handle", byHandle("approve", "nobody"), 404, "not_found"),
		as(helper, "bad handle format", byHandle("approve", "a b"), 400, "bad_request"),
		as(helper, "bad agent handle format", byHandle("reject", "x/y/z"), 400, "bad_request"),
		// By id: someone else's request is not found.
		as(helper, "someone else's request", byID("approve", foreign), 404, "not_found"),
		as(helper, "someone else's request, cancel", byID("cancel", foreign), 404, "not_found"),
		as(helper, "unknown request id", byID("approve", nilID), 404, "not_found"),
		as(helper, "malformed request id", byID("approve", "req-1"), 404, "not_found"),
		// Resolved requests stay resolved.
		as(helper, "approve an approved request", byID("approve", approved), 409, "conflict"),
		as(helper, "reject an approved request", byID("reject", approved), 409, "conflict"),
		as(helper, "approve a rejected request", byID("approve", rejected), 409, "conflict"),
		as(helper, "reject a rejected request", byID("reject", rejected), 409, "conflict"),
		as(helper, "cancel a cancelled request", byID("cancel", cancelled), 409, "conflict"),
		{name: "the requester cancels an approved request", cred: dave.cred(), method: "DELETE", path: "/api/v1/me/contacts/requests/" + approved, status: 409, code: "conflict"},
		as(ranger, "cancel a rejected request", byID("cancel", rejected), 409, "conflict"),
		// Malformed calls.
		as(helper, "neither request_id nor handle", map[string]any{"action": "approve"}, 400, "bad_request"),
		as(helper, "empty request_id and handle", map[string]any{"action": "approve", "request_id": "", "handle": ""}, 400, "bad_request"),
		as(helper, "empty body", nil, 400, "bad_request"),
		as(helper, "bad action", byID("accept", inbound), 422, "validation_error", "/action"),
		as(helper, "action in capitals", byID("APPROVE", inbound), 422, "validation_error", "/action"),
		as(helper, "no action", map[string]any{"request_id": inbound}, 422, "validation_error", "/action"),
		as(helper, "bad action by handle", byHandle("block", "carol/scout"), 422, "validation_error", "/action"),
		as(helper, "request_id of the wrong type", map[string]any{"action": "approve", "request_id": 7}, 422, "validation_error", "/request_id"),
		as(helper, "unknown field", map[string]any{"action": "approve", "request_id": inbound, "reason": "x"}, 400, "unknown_field", "/reason"),
		as(helper, "not JSON", `{"action":`, 400, "invalid_json"),
		as(alice, "a person's key", byID("approve", inbound), 403, "forbidden"),
		as(nil, "no credentials", byID("approve", inbound), 401, "unauthorized"),
	})
	// The pending ones are still there to answer.
	k.respond(t, helper, "approve", inbound)
	k.respond(t, helper, "cancel", outbound)
}

// TestContactsHumanRespond: approve, reject and cancel (DELETE) by id.
func TestContactsHumanRespond(t *testing.T) {
	t.Run("answers", humanRespondAnswers)
	t.Run("refusals", humanRespondRefusals) // on a world of its own
}

func humanRespondAnswers(t *testing.T) {
	k := newContactsWorld(t)
	alice, erin := k.human("alice"), k.human("erin")
	carol, dave := k.human("carol", "Other Org"), k.human("dave", "Third Org")
	helper, scout := k.bot(alice, "Helper"), k.bot(carol, "Scout")

	for _, tc := range []struct {
		name                    string
		requester, recipient, p *contactsParty // p answers
		action                  string
	}{
		{"approve a person's request", carol, alice, alice, "approve"},
		{"approve an agent's request", helper, carol, carol, "approve"},
		{"reject an agent's request", scout, alice, alice, "reject"},
		{"reject a person's request", dave, alice, alice, "reject"},
		{"cancel a request to a person", alice, dave, alice, "cancel"},
		{"cancel a request to an agent", erin, scout, erin, "cancel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := k.request(t, tc.requester, tc.recipient, "please")
			k.respond(t, tc.p, tc.action, id)
			status := statusAfter[tc.action]
			if !tc.requester.agent {
				checkRequestView(t, findByID(t, k.humanRequestItems(t, tc.requester, "/api/v1/me/contacts/requests/sent?status="+status), id),
					id, tc.requester, tc.recipient, "please", status, true)
			} else if it := findByID(t, k.agentRequestItems(t, tc.requester, "sent"), id); it["status"] != status {
				t.Fatalf("request is %v", it["status"])
			}
			contacts := "," + k.contacts(t, tc.recipient) + ","
			if made := strings.Contains(contacts, ","+tc.requester.handle+","); made != (tc.action == "approve") {
				t.Fatalf("after %s, %s's contacts are %s", tc.action, tc.recipient.handle, contacts)
			}
		})
	}
}

func humanRespondRefusals(t *testing.T) {
	k := newContactsWorld(t)
	alice, erin := k.human("alice"), k.human("erin")
	carol, dave := k.human("carol", "Other Org"), k.human("dave", "Third Org")
	helper, scout := k.bot(alice, "Helper"), k.bot(carol, "Scout")
	inbound := k.request(t, dave, alice)
	outbound := k.request(t, alice, carol)
	approved := k.request(t, scout, alice)
	k.respond(t, alice, "approve", approved)
	rejected := k.request(t, helper, alice)
	k.respond(t, alice, "reject", rejected)
	cancelled := k.request(t, alice, erin)
	k.respond(t, alice, "cancel", cancelled)
	foreign := k.request(t, carol, dave)

	const base = "/api/v1/me/contacts/requests/"
	call := func(p *contactsParty, name, action, id string, status int, code string) scenario {
		method, path, body := respondCall(&contactsParty{}, action, id)
		return scenario{name: name, cred: p.cred(), method: method, path: path, body: body, status: status, code: code}
	}
	var cases []scenario
	cases = append(cases,
		call(alice, "approve a request one sent", "approve", outbound, 403, "forbidden"),
		call(alice, "reject a request one sent", "reject", outbound, 403, "forbidden"),
		call(alice, "cancel a request one received", "cancel", inbound, 403, "forbidden"),
		call(dave, "the requester approves", "approve", inbound, 403, "forbidden"),
		call(alice, "approve an approved request", "approve", approved, 409, "conflict"),
		call(alice, "reject an approved request", "reject", approved, 409, "conflict"),
		call(alice, "approve a rejected request", "approve", rejected, 409, "conflict"),
		call(alice, "reject a rejected request", "reject", rejected, 409, "conflict"),
		call(alice, "cancel a cancelled request", "cancel", cancelled, 409, "conflict"),
		call(erin, "approve a cancelled request", "approve", cancelled, 409, "conflict"),
		call(carol, "cancel an approved request one did not send", "cancel", approved, 404, "not_found"),
	)
	for _, action := range []string{"approve", "reject", "cancel"} {
		cases = append(cases,
			call(alice, action+" someone else's request", action, foreign, 404, "not_found"),
			call(alice, action+" an unknown request", action, nilID, 404, "not_found"),
			call(alice, action+" a malformed id", action, "req-1", 404, "not_found"),
			call(helper, action+" with an agent's key", action, inbound, 403, "forbidden"),
			call(nil, action+" without credentials", action, inbound, 401, "unauthorized"),
		)
	}
	cases = append(cases,
		scenario{name: "approve with an unknown field", cred: alice.cred(), method: "POST", path: base + inbound + "/approve",
			body: map[string]any{"note": "x"}, status: 400, code: "unknown_field", pointers: []string{"/note"}},
		scenario{name: "reject with an unknown field", cred: alice.cred(), method: "POST", path: base + inbound + "/reject",
			body: map[string]any{"reason": "x"}, status: 400, code: "unknown_field", pointers: []string{"/reason"}},
	)
	k.ts.run(t, cases)
	// An empty JSON body is fine.
	r := k.ts.do(t, "POST", base+inbound+"/approve", alice.cred(), map[string]any{})
	expect(t, r, 200, "")
	k.respond(t, alice, "cancel", outbound)
}

// TestContactsResolve: who a handle names, without id or email.
func TestContactsResolve(t *testing.T) {
	k := newContactsWorld(t)
	alice := k.human("alice")
	carol := k.human("carol", "Other Org")
	scout := k.bot(carol, "Scout")
	gone := k.bot(alice, "Gone")
	expect(t, k.ts.do(t, "DELETE", "/api/v1/me/agents/"+gone.id, alice.cred(), nil), 200, "")
	for _, tc := range []struct {
		handle string
		want   *contactsParty
	}{
		{"carol", carol},
		{"@carol", carol},
		{"  @carol ", carol},
		{"CAROL", carol},
		{"carol/scout", scout},
		{"@carol/scout", scout},
		{"alice", alice}, // oneself
	} {
		r := k.ts.do(t, "POST", "/api/v1/me/contacts/resolve", alice.cred(), map[string]any{"handle": tc.handle})
		expect(t, r, 200, "")
		sameJSON(t, "resolve "+tc.handle, r.data(t), map[string]any{"handle": tc.want.handle, "name": tc.want.name, "type": partyType(tc.want)})
	}
	const path = "/api/v1/me/contacts/resolve"
	res := func(name string, body any, status int, code string, pointers ...string) scenario {
		return scenario{name: name, cred: alice.cred(), method: "POST", path: path, body: body, status: status, code: code, pointers: pointers}
	}
	cases := []scenario{
		res("no handle", map[string]any{}, 400, "bad_request"),
		res("empty body", nil, 400, "bad_request"),
		res("empty handle", map[string]any{"handle": ""}, 400, "bad_request"),
	}
	for _, h := range []string{"a b", "@", "x/y/z", "carol/", "c@rol"} {
		cases = append(cases, res("bad format "+h, map[string]any{"handle": h}, 400, "bad_request"))
	}
	cases = append(cases,
		res("unknown person", map[string]any{"handle": "nobody"}, 404, "not_found"),
		res("unknown agent", map[string]any{"handle": "carol/nobody"}, 404, "not_found"),
		res("deleted agent", map[string]any{"handle": "alice/gone"}, 404, "not_found"),
		res("handle of the wrong type", map[string]any{"handle": 1}, 422, "validation_error", "/handle"),
		res("unknown field", map[string]any{"handle": "carol", "id": "x"}, 400, "unknown_field", "/id"),
		scenario{name: "agent key", cred: scout.cred(), method: "POST", path: path, body: map[string]any{"handle": "carol"}, status: 403, code: "forbidden"},
		scenario{name: "no credentials", method: "POST", path: path, body: map[string]any{"handle": "carol"}, status: 401, code: "unauthorized"},
	)
	k.ts.run(t, cases)
}

// TestContactsRemove: a contact named by the caller's record id, by the
// other party's id or by handle ends in both directions; it can be made
// again.
func TestContactsRemove(t *testing.T) {
	k := newContactsWorld(t)
	alice, carol, helper, scout := k.twoOrganizations()
	k.connect(t, helper, carol)
	k.connect(t, scout, helper)
	k.connect(t, alice, carol)

	for _, tc := range []struct {
		name     string
		p, other *contactsParty
		by       string // "record", "party" or a handle
	}{
		{"agent by its record id", helper, carol, "record"},
		{"agent by the other party's id", helper, scout, "party"},
		{"agent by handle", helper, carol, "carol"},
		{"agent by handle with @", scout, helper, "@alice/helper"},
		{"person by its record id", carol, helper, "record"},
		{"person by the other party's id", carol, alice, "party"},
		{"person by handle", alice, carol, "@carol"},
		{"person by an agent's handle", carol, helper, "alice/helper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body map[string]any
			switch tc.by {
			case "record":
				body = map[string]any{"contact_id": k.recordOf(t, tc.p, tc.other)}
			case "party":
				body = map[string]any{"contact_id": tc.other.id}
			default:
				body = map[string]any{"handle": tc.by}
			}
			r := k.ts.do(t, "POST", removeContactPath(tc.p), tc.p.cred(), body)
			expect(t, r, 200, "")
			sameJSON(t, "answer", r.data(t), map[string]any{"status": "removed"})
			if k.recordOf(t, tc.p, tc.other) != "" || k.recordOf(t, tc.other, tc.p) != "" {
				t.Fatalf("still contacts: %s has %s, %s has %s", tc.p.handle, k.contacts(t, tc.p), tc.other.handle, k.contacts(t, tc.other))
			}
			// Removing again finds nothing.
			k.ts.refused(t, "POST", removeContactPath(tc.p), tc.p.cred(), body, 404, "not_found", "")
			// And they can become contacts again: a new request, approved.
			k.connect(t, tc.other, tc.p)
			if k.recordOf(t, tc.p, tc.other) == "" || k.recordOf(t, tc.other, tc.p) == "" {
				t.Fatalf("not contacts again after re-adding")
			}
		})
	}

	t.Run("refusals", func(t *testing.T) { removeRefusals(t, k, helper, carol, alice, scout) })
}

func removeRefusals(t *testing.T, k *contactsWorld, helper, carol, alice, scout *contactsParty) {
	rm := func(p *contactsParty, name string, body any, status int, code string, pointers ...string) scenario {
		return scenario{name: name, cred: p.cred(), method: "POST", path: removeContactPath(p), body: body, status: status, code: code, pointers: pointers}
	}
	var cases []scenario
	for _, p := range []*contactsParty{helper, carol} {
		cases = append(cases,
			rm(p, p.handle+": neither", map[string]any{}, 400, "bad_request"),
			rm(p, p.handle+": empty body", nil, 400, "bad_request"),
			rm(p, p.handle+": both empty", map[string]any{"contact_id": "", "handle": ""}, 400, "bad_request"),
			rm(p, p.handle+": unknown id", map[string]any{"contact_id": nilID}, 404, "not_found"),
			rm(p, p.handle+": malformed id", map[string]any{"contact_id": "contact-1"}, 404, "not_found"),
			rm(p, p.handle+": unknown handle", map[string]any{"handle": "nobody"}, 404, "not_found"),
			rm(p, p.handle+": bad handle", map[string]any{"handle": "a b"}, 400, "bad_request"),
			rm(p, p.handle+": own handle", map[string]any{"handle": p.handle}, 404, "not_found"),
			rm(p, p.handle+": contact_id of the wrong type", map[string]any{"contact_id": 3}, 422, "validation_error", "/contact_id"),
			rm(p, p.handle+": unknown field", map[string]any{"handle": "carol", "both": true}, 400, "unknown_field", "/both"),
		)
	}
	cases = append(cases,
		// Not a contact, however named.
		rm(helper, "not a contact, by handle", map[string]any{"handle": "alice"}, 404, "not_found"),
		rm(helper, "not a contact, by id", map[string]any{"contact_id": alice.id}, 404, "not_found"),
		rm(carol, "not a contact, agent handle", map[string]any{"handle": "carol/scout"}, 404, "not_found"),
		// The other side's record id is not the caller's.
		rm(helper, "the other side's record id", map[string]any{"contact_id": k.recordOf(t, carol, helper)}, 404, "not_found"),
		rm(carol, "the other side's record id, person", map[string]any{"contact_id": k.recordOf(t, helper, carol)}, 404, "not_found"),
		// A record of someone else's contact.
		rm(alice, "someone else's record id", map[string]any{"contact_id": k.recordOf(t, helper, scout)}, 404, "not_found"),
		scenario{name: "person's key on the agent route", cred: carol.cred(), method: "POST", path: "/api/v1/agent/contacts/remove",
			body: map[string]any{"handle": "alice/helper"}, status: 403, code: "forbidden"},
		scenario{name: "agent's key on the human route", cred: helper.cred(), method: "POST", path: "/api/v1/me/contacts/remove",
			body: map[string]any{"handle": "carol"}, status: 403, code: "forbidden"},
		scenario{name: "no credentials", method: "POST", path: "/api/v1/me/contacts/remove",
			body: map[string]any{"handle": "carol"}, status: 401, code: "unauthorized"},
	)
	k.ts.run(t, cases)
}

// peers renders p's peers as handle:source:is_contact, in order, and checks
// total_count when the listing is not paged.
func (k *contactsWorld) peers(t testing.TB, p *contactsParty, query string) string {
	t.Helper()
	path := "/api/v1/me/peers"
	if p.agent {
		path = "/api/v1/agent/peers"
	}
	r := k.ts.do(t, "GET", path+"?"+query, p.cred(), nil)
	expect(t, r, 200, "")
	var out []string
	for _, it := range r.list(t) {
		m := it.(map[string]any)
		out = append(out, fmt.Sprintf("%v:%v:%v", m["handle"], m["source"], m["is_contact"]))
	}
	if query == "" {
		if n := r.meta(t)["total_count"]; n != float64(len(out)) {
			t.Fatalf("%s peers: total_count %v for %d peers", p.handle, n, len(out))
		}
	}
	return strings.Join(out, ",")
}

// TestContactsArePeers: an approved contact, of any organization, is a
// peer (is_contact true, source contact, after the registry entries) who
// can be added to rooms; a registry peer who is also a contact is listed
// once, as registry, with is_contact true. A pending request or a removed
// contact makes no peer.
func TestContactsArePeers(t *testing.T) {
	k := newContactsWorld(t)
	alice, bob := k.human("alice"), k.human("bob")
	carol := k.human("carol", "Other Org")
	helper := k.bot(alice, "Helper")
	k.bot(alice, "Sibling")
	scout := k.bot(carol, "Scout")

	const helperRegistry = "alice:registry:false,alice/sibling:registry:false"
	const aliceRegistry = "bob:registry:false,alice/helper:registry:false,alice/sibling:registry:false"
	peersAre := func(p *contactsParty, query, want string) {
		t.Helper()
		if got := k.peers(t, p, query); got != want {
			t.Fatalf("%s's peers ?%s =\n  %s\nwant\n  %s", p.handle, query, got, want)
		}
	}
	peersAre(helper, "", helperRegistry)
	peersAre(alice, "", aliceRegistry)

	room := k.ts.room(t, helper.key)
	humanRoom := k.ts.do(t, "POST", "/api/v1/me/chats", alice.cred(), map[string]any{"chat": map[string]any{}})
	expect(t, humanRoom, 201, "")
	hroom := humanRoom.data(t)["id"].(string)
	agentAdd := "/api/v1/agent/chats/" + room + "/participants"
	humanAdd := "/api/v1/me/chats/" + hroom + "/participants"

	// Pending requests make no peers.
	toCarol := k.request(t, helper, carol)
	toScout := k.request(t, alice, scout)
	fromBob := k.request(t, bob, alice)
	fromScout := k.request(t, scout, helper)
	peersAre(helper, "", helperRegistry)
	peersAre(alice, "", aliceRegistry)
	k.ts.run(t, []scenario{
		{name: "agent adds a person it only asked", cred: helper.cred(), method: "POST", path: agentAdd, body: participantBody(carol.id, ""), status: 404, code: "not_found"},
		{name: "agent adds an agent that only asked it", cred: helper.cred(), method: "POST", path: agentAdd, body: participantBody(scout.id, ""), status: 404, code: "not_found"},
		{name: "person adds an agent she only asked", cred: alice.cred(), method: "POST", path: humanAdd, body: participantBody(scout.id, ""), status: 404, code: "not_found"},
	})

	k.respond(t, carol, "approve", toCarol)
	k.respond(t, scout, "approve", toScout)
	k.respond(t, alice, "approve", fromBob)
	k.respond(t, helper, "approve", fromScout)

	peersAre(helper, "", helperRegistry+",carol:contact:true,carol/scout:contact:true")
	peersAre(helper, "page=2&page_size=2", "carol:contact:true,carol/scout:contact:true")
	// Bob, in alice's organization, is listed once, as registry.
	peersAre(alice, "", "bob:registry:true,alice/helper:registry:false,alice/sibling:registry:false,carol/scout:contact:true")
	peersAre(alice, "type=Agent", "alice/helper:registry:false,alice/sibling:registry:false,carol/scout:contact:true")
	peersAre(alice, "type=User", "bob:registry:true")
	peersAre(bob, "", "alice:registry:true")
	peersAre(carol, "", "carol/scout:registry:false,alice/helper:contact:true")
	peersAre(scout, "", "carol:registry:false,alice:contact:true,alice/helper:contact:true")

	// A contact peer has the Peer fields of its kind.
	t.Run("a contact peer has the Peer fields of its kind", func(t *testing.T) { contactPeerFields(t, k, helper, carol, scout) })

	// Now they can be added to rooms, and not_in_chat leaves them out.
	expect(t, k.ts.do(t, "POST", agentAdd, helper.cred(), participantBody(carol.id, "")), 201, "")
	expect(t, k.ts.do(t, "POST", agentAdd, helper.cred(), participantBody(scout.id, "")), 201, "")
	expect(t, k.ts.do(t, "POST", humanAdd, alice.cred(), participantBody(scout.id, "")), 201, "")
	peersAre(helper, "not_in_chat="+room, "alice:registry:false,alice/sibling:registry:false")
	peersAre(alice, "not_in_chat="+hroom, "bob:registry:true,alice/helper:registry:false,alice/sibling:registry:false")

	// Removed, carol is no peer any more (she stays in the room she is in).
	expect(t, k.ts.do(t, "POST", "/api/v1/agent/contacts/remove", helper.cred(), map[string]any{"handle": "carol"}), 200, "")
	peersAre(helper, "", helperRegistry+",carol/scout:contact:true")
	peersAre(carol, "", "carol/scout:registry:false")
	other := k.ts.room(t, helper.key)
	k.ts.run(t, []scenario{refusalCase("a former contact", helper.cred(), "POST", agentChatsPath+"/"+other+"/participants", participantBody(carol.id, ""), 404, "not_found")})
	// Bob, no longer a contact, is still a registry peer.
	expect(t, k.ts.do(t, "POST", "/api/v1/me/contacts/remove", alice.cred(), map[string]any{"contact_id": bob.id}), 200, "")
	peersAre(alice, "", "bob:registry:false,alice/helper:registry:false,alice/sibling:registry:false,carol/scout:contact:true")
}

func contactPeerFields(t *testing.T, k *contactsWorld, helper, carol, scout *contactsParty) {
	r := k.ts.do(t, "GET", "/api/v1/agent/peers?page=2&page_size=2", helper.cred(), nil)
	expect(t, r, 200, "")
	if !reflect.DeepEqual(r.meta(t), offsetMetaJSON(2, 2, 4, 2)) {
		t.Fatalf("metadata = %v", r.meta(t))
	}
	c, s := r.list(t)[0].(map[string]any), r.list(t)[1].(map[string]any)
	if c["id"] != carol.id || c["name"] != "Carol Tester" || c["type"] != "User" || c["description"] != nil || c["is_external"] != nil {
		t.Errorf("person contact peer = %v", c)
	}
	if s["id"] != scout.id || s["name"] != "Scout" || s["type"] != "Agent" || s["description"] != "Scout does things" {
		t.Errorf("agent contact peer = %v", s)
	}
	if _, ok := s["tags"].([]any); !ok {
		t.Errorf("agent contact peer tags = %v", s["tags"])
	}
}

// TestContactsAgentDeletion: deleting an agent (DELETE /me/agents/{id} by
// its owner) ends its contacts in both directions and cancels its pending
// requests, sent and received; the other sides hear of it.
func TestContactsAgentDeletion(t *testing.T) {
	k := newContactsWorld(t)
	alice := k.human("alice")
	carol, erin := k.human("carol", "Other Org"), k.human("erin", "Other Org")
	dave := k.human("dave", "Third Org")
	helper, scout := k.bot(alice, "Helper"), k.bot(carol, "Scout")
	k.connect(t, helper, carol)
	k.connect(t, scout, helper)
	k.connect(t, carol, erin) // no business of helper's
	toDave := k.request(t, helper, dave)
	fromErin := k.request(t, erin, helper)
	untouched := k.request(t, carol, dave)
	carolsRecord, scoutsRecord := k.recordOf(t, carol, helper), k.recordOf(t, scout, helper)

	cl := newListener(t, k.ts, carol.key, "user_contacts:"+carol.id)
	sl := newListener(t, k.ts, scout.key, "agent_contacts:"+scout.id)
	dl := newListener(t, k.ts, dave.key, "user_contacts:"+dave.id)
	el := newListener(t, k.ts, erin.key, "user_contacts:"+erin.id)

	k.ts.run(t, []scenario{{name: "someone else deletes it", cred: carol.cred(), method: "DELETE", path: "/api/v1/me/agents/" + helper.id, status: 404, code: "not_found"}})
	expect(t, k.ts.do(t, "DELETE", "/api/v1/me/agents/"+helper.id, alice.cred(), nil), 200, "")

	// Its contacts are gone, both ways.
	if got := k.contacts(t, carol); got != "erin" {
		t.Errorf("carol's contacts = %s, want erin", got)
	}
	if got := k.contacts(t, scout); got != "" {
		t.Errorf("scout's contacts = %s, want none", got)
	}
	if n := k.ts.count(t, `SELECT count(*) FROM contacts WHERE owner_id = ? OR contact_id = ?`, helper.id, helper.id); n != 0 {
		t.Errorf("%d contact rows of the deleted agent remain", n)
	}
	// Its pending requests, both ways, are cancelled; others are not.
	for _, id := range []string{toDave, fromErin} {
		var st string
		if k.ts.queryRow(t, `SELECT status || ':' || CASE WHEN responded_at IS NOT NULL THEN 1 ELSE 0 END FROM contact_requests WHERE id = ?`, []any{id}, &st); st != "cancelled:1" {
			t.Errorf("request %s is %s, want cancelled with a response time", k.label(id), st)
		}
	}
	if it := findByID(t, k.humanRequestItems(t, erin, "/api/v1/me/contacts/requests/sent?status=cancelled"), fromErin); it["recipient_id"] != helper.id {
		t.Errorf("erin's cancelled request = %v", it)
	}
	if rec, _ := k.requests(t, dave); rec != k.label(untouched)+" carol>dave pending" {
		t.Errorf("dave's received requests = %s", rec)
	}
	if it := findByID(t, k.humanRequestItems(t, erin, "/api/v1/me/contacts/requests/sent"), fromErin); it["status"] != "cancelled" {
		t.Errorf("erin's request = %v", it)
	}
	// The other sides heard of it.
	sameJSON(t, "carol's contact_removed", cl.await(t, "user_contacts:"+carol.id, "contact_removed", withID(carolsRecord)), removedPayload(carolsRecord, helper))
	sameJSON(t, "scout's contact_removed", sl.await(t, "agent_contacts:"+scout.id, "contact_removed", withID(scoutsRecord)), removedPayload(scoutsRecord, helper))
	sameJSON(t, "dave's contact_request_updated", dl.await(t, "user_contacts:"+dave.id, "contact_request_updated", withID(toDave)),
		map[string]any{"id": toDave, "status": "cancelled"})
	sameJSON(t, "erin's contact_request_updated", el.await(t, "user_contacts:"+erin.id, "contact_request_updated", withID(fromErin)),
		map[string]any{"id": fromErin, "status": "cancelled"})

	// The freed handle names a new agent, a stranger to all of them.
	fresh := k.bot(alice, "Helper")
	if fresh.handle != helper.handle {
		t.Fatalf("new agent's handle %s", fresh.handle)
	}
	if got := k.contacts(t, fresh); got != "" {
		t.Fatalf("the new agent has contacts: %s", got)
	}
	if rec, sent := k.requests(t, fresh); rec != "" || sent != "" {
		t.Fatalf("the new agent has requests: %s / %s", rec, sent)
	}
	k.request(t, erin, fresh)
	k.request(t, fresh, dave)
	k.request(t, carol, fresh)
}

// modelRequest is a request as the model knows it.
type modelRequest struct {
	id       string
	from, to int
	status   string
}

// contactsModel is what the API should show: the requests and the contacts.
type contactsModel struct {
	reqs    []*modelRequest
	contact map[[2]int]bool
}

func pairOf(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

func (m *contactsModel) pending(from, to int) *modelRequest {
	for _, r := range m.reqs {
		if r.from == from && r.to == to && r.status == "pending" {
			return r
		}
	}
	return nil
}

// TestContactsStateModel drives random operations among two people of
// different organizations and an agent of each, through both APIs, and
// after every step compares every party's contacts and request listings
// with a model of the state table; the model also predicts every status.
func TestContactsStateModel(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel() // each seed has its own server
			runContactsModel(t, seed, 90)
		})
	}
}

// modelRun is one random walk of TestContactsStateModel: the parties, the
// model of what the API should show, and the statuses the walk has seen.
type modelRun struct {
	t    *testing.T
	k    *contactsWorld
	ps   []*contactsParty
	m    *contactsModel
	rng  *rand.Rand
	seen map[int]int
}

var modelRefusalCodes = map[int]string{403: "forbidden", 404: "not_found", 409: "conflict"}

func runContactsModel(t *testing.T, seed int64, steps int) {
	k := newContactsWorld(t)
	alice, bob := k.human("alice", "Acme"), k.human("bob", "Bobco")
	w := &modelRun{t: t, k: k, ps: []*contactsParty{alice, k.bot(alice, "Axel"), bob, k.bot(bob, "Byron")},
		m: &contactsModel{contact: map[[2]int]bool{}}, rng: rand.New(rand.NewSource(seed)), seen: map[int]int{}}
	for step := 1; step <= steps; step++ {
		a, b := w.rng.Intn(len(w.ps)), w.rng.Intn(len(w.ps))
		var what string
		switch op := w.rng.Intn(12); {
		case op < 5:
			what = w.add(step, a, b)
		case op < 9:
			if len(w.m.reqs) == 0 {
				continue
			}
			what = w.respondByID(step, a)
		case op < 10:
			what = w.respondByHandle(step, a, b)
		default:
			what = w.remove(step, a, b)
		}
		w.check(step, what)
	}
	t.Logf("statuses seen: %v", w.seen)
	for _, s := range []int{200, 201, 403, 404, 409} {
		if w.seen[s] == 0 {
			t.Errorf("the walk never saw a %d; lengthen it", s)
		}
	}
}

// check compares every party's contacts and requests with the model.
func (w *modelRun) check(step int, what string) {
	t, k, m := w.t, w.k, w.m
	t.Helper()
	for i, p := range w.ps {
		var want []string
		for j, q := range w.ps {
			if i != j && m.contact[pairOf(i, j)] {
				want = append(want, q.handle)
			}
		}
		var got []string
		if c := k.contacts(t, p); c != "" {
			got = strings.Split(c, ",")
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("step %d (%s): %s's contacts = %v, want %v", step, what, p.handle, got, want)
		}
		var wantRec, wantSent []string
		for x := len(m.reqs) - 1; x >= 0; x-- {
			r := m.reqs[x]
			line := fmt.Sprintf("%s %s>%s %s", k.label(r.id), w.ps[r.from].handle, w.ps[r.to].handle, r.status)
			if r.to == i && r.status == "pending" {
				wantRec = append(wantRec, line)
			}
			if r.from == i {
				wantSent = append(wantSent, line)
			}
		}
		rec, sent := k.requests(t, p)
		if rec != strings.Join(wantRec, ",") {
			t.Fatalf("step %d (%s): %s received\n  %s\nwant\n  %s", step, what, p.handle, rec, strings.Join(wantRec, ","))
		}
		if sent != strings.Join(wantSent, ",") {
			t.Fatalf("step %d (%s): %s sent\n  %s\nwant\n  %s", step, what, p.handle, sent, strings.Join(wantSent, ","))
		}
	}
}

// call sends a call the model expects to succeed with 200/201 or be
// refused with status (and change nothing).
func (w *modelRun) call(p *contactsParty, method, path string, body any, status int) *response {
	t := w.t
	t.Helper()
	w.seen[status]++
	if status >= 400 {
		w.k.ts.refused(t, method, path, p.cred(), body, status, modelRefusalCodes[status], "")
		return nil
	}
	r := w.k.ts.do(t, method, path, p.cred(), body)
	expect(t, r, status, "")
	return r
}

// add: a asks b.
func (w *modelRun) add(step, a, b int) string {
	t, m, ps := w.t, w.m, w.ps
	what := ps[a].handle + " adds " + ps[b].handle
	t.Logf("step %d: %s", step, what)
	path, body := addContactCall(ps[a], map[string]any{"handle": ps[b].handle})
	if a == b || m.contact[pairOf(a, b)] || m.pending(a, b) != nil {
		w.call(ps[a], "POST", path, body, 409)
		return what
	}
	d := w.call(ps[a], "POST", path, body, 201).data(t)
	if inv := m.pending(b, a); inv != nil {
		if d["id"] != inv.id || d["status"] != "approved" {
			t.Fatalf("step %d (%s): %v, want %s approved", step, what, d, w.k.label(inv.id))
		}
		inv.status = "approved"
		m.contact[pairOf(a, b)] = true
		return what
	}
	if d["status"] != "pending" {
		t.Fatalf("step %d (%s): %v, want pending", step, what, d)
	}
	id := d["id"].(string)
	w.k.label(id)
	m.reqs = append(m.reqs, &modelRequest{id: id, from: a, to: b, status: "pending"})
	return what
}

// respondByID: someone (mostly one of its parties) answers a request by id.
func (w *modelRun) respondByID(step, a int) string {
	t, m, ps := w.t, w.m, w.ps
	r := m.reqs[w.rng.Intn(len(m.reqs))]
	if w.rng.Intn(3) > 0 {
		a = []int{r.from, r.to}[w.rng.Intn(2)]
	}
	action := []string{"approve", "reject", "cancel"}[w.rng.Intn(3)]
	what := fmt.Sprintf("%s %ss %s", ps[a].handle, action, w.k.label(r.id))
	t.Logf("step %d: %s", step, what)
	method, path, body := respondCall(ps[a], action, r.id)
	status := 200
	switch {
	case a != r.from && a != r.to:
		status = 404
	case action == "cancel" && a != r.from, action != "cancel" && a != r.to:
		status = 403
	case r.status != "pending":
		status = 409
	}
	if res := w.call(ps[a], method, path, body, status); res != nil {
		sameJSON(t, what, res.data(t), map[string]any{"id": r.id, "status": statusAfter[action]})
		r.status = statusAfter[action]
		if action == "approve" {
			m.contact[pairOf(r.from, r.to)] = true
		}
	}
	return what
}

// respondByHandle: an agent (a, or a person's agent) answers b by handle.
func (w *modelRun) respondByHandle(step, a, b int) string {
	t, m, ps := w.t, w.m, w.ps
	if !ps[a].agent {
		a++ // the person's agent
	}
	action := []string{"approve", "reject", "cancel"}[w.rng.Intn(3)]
	what := fmt.Sprintf("%s %ss by handle %s", ps[a].handle, action, ps[b].handle)
	t.Logf("step %d: %s", step, what)
	r := m.pending(b, a)
	if action == "cancel" {
		r = m.pending(a, b)
	}
	body := map[string]any{"action": action, "handle": ps[b].handle}
	if r == nil {
		w.call(ps[a], "POST", "/api/v1/agent/contacts/requests/respond", body, 404)
		return what
	}
	res := w.call(ps[a], "POST", "/api/v1/agent/contacts/requests/respond", body, 200)
	sameJSON(t, what, res.data(t), map[string]any{"id": r.id, "status": statusAfter[action]})
	r.status = statusAfter[action]
	if action == "approve" {
		m.contact[pairOf(a, b)] = true
	}
	return what
}

// remove: a removes b, by handle, by b's id or by a record id.
func (w *modelRun) remove(step, a, b int) string {
	t, k, ps := w.t, w.k, w.ps
	var body map[string]any
	switch w.rng.Intn(3) {
	case 0:
		body = map[string]any{"handle": "@" + ps[b].handle}
	case 1:
		body = map[string]any{"contact_id": ps[b].id}
	default:
		rec := k.recordOf(t, ps[a], ps[b])
		if rec == "" {
			rec = k.recordOf(t, ps[b], ps[a]) // b's record of a, if any: not a's to name
		}
		if rec == "" {
			rec = nilID
		}
		body = map[string]any{"contact_id": rec}
	}
	what := fmt.Sprintf("%s removes %s by %v", ps[a].handle, ps[b].handle, body)
	t.Logf("step %d: %s", step, what)
	if a == b || !w.m.contact[pairOf(a, b)] {
		w.call(ps[a], "POST", removeContactPath(ps[a]), body, 404)
		return what
	}
	w.call(ps[a], "POST", removeContactPath(ps[a]), body, 200)
	delete(w.m.contact, pairOf(a, b))
	return what
}

// contactsStory is the cast of TestContactsRealtime, each party listening
// on its contacts channel.
type contactsStory struct {
	k                          *contactsWorld
	carol, helper, scout       *contactsParty
	ht, ct, st                 string    // the topics of helper, carol and scout
	hl, cl, sl                 *listener // and their listeners
	helpersCarol, carolsHelper string    // their contact records, once they are contacts
	helpersScout, scoutsHelper string
}

// updated checks that the listener hears contact_request_updated {id, status}.
func (s *contactsStory) updated(t *testing.T, l *listener, topic, id, status string) {
	t.Helper()
	sameJSON(t, topic+" contact_request_updated", l.await(t, topic, "contact_request_updated", withID(id)),
		map[string]any{"id": id, "status": status})
}

// TestContactsRealtime: the contacts channels of an agent and a person
// carry contact_request_received (flat for agents, the ContactRequest
// record for people), contact_request_updated {id, status} to both sides,
// contact_added to both sides (name always a string) and contact_removed
// {id}, each side with its own record id.
func TestContactsRealtime(t *testing.T) {
	k := newContactsWorld(t)
	alice := k.human("alice")
	s := &contactsStory{k: k, carol: k.human("carol", "Other Org")}
	s.helper, s.scout = k.bot(alice, "Helper"), k.bot(s.carol, "Scout")
	s.ht, s.ct, s.st = "agent_contacts:"+s.helper.id, "user_contacts:"+s.carol.id, "agent_contacts:"+s.scout.id
	s.hl = newListener(t, k.ts, s.helper.key, s.ht)
	s.cl = newListener(t, k.ts, s.carol.key, s.ct)
	s.sl = newListener(t, k.ts, s.scout.key, s.st)

	t.Run("a person hears of a request as a ContactRequest, and both of its rejection", s.personHearsOfARequest)
	t.Run("an agent hears of a request in its flat payload, and both of its approval", s.agentHearsOfARequest)
	t.Run("two agents hear of their request and contact", s.agentsBecomeContacts)
	t.Run("both hear of a cancelled request", s.requestIsCancelled)
	t.Run("each side hears of its own record removed", s.contactsAreRemoved)
	t.Run("each heard every event once", s.eachEventIsHeardOnce)
}

// personHearsOfARequest: helper asks carol; she hears of it as a
// ContactRequest; she rejects it, and both sides hear {id, status}.
func (s *contactsStory) personHearsOfARequest(t *testing.T) {
	id := s.k.request(t, s.helper, s.carol, "hello carol")
	p := s.cl.await(t, s.ct, "contact_request_received", withID(id))
	if err := s.k.ts.oas.ValidateSchema("ContactRequest", mustJSON(t, p)); err != nil {
		t.Errorf("contact_request_received for a person is not a ContactRequest: %v", err)
	}
	checkRequestView(t, p, id, s.helper, s.carol, "hello carol", "pending", false)
	s.k.respond(t, s.carol, "reject", id)
	s.updated(t, s.hl, s.ht, id, "rejected")
	s.updated(t, s.cl, s.ct, id, "rejected")
}

// agentHearsOfARequest: carol asks helper, with no message (the agent's
// flat payload); helper approves by handle: the update, then
// contact_added, to both.
func (s *contactsStory) agentHearsOfARequest(t *testing.T) {
	id := s.k.request(t, s.carol, s.helper)
	p := s.hl.await(t, s.ht, "contact_request_received", withID(id))
	sameJSON(t, "agent contact_request_received keys", strings.Join(keysOf(p), ","), "from_handle,from_name,id,inserted_at,status")
	if p["from_handle"] != "carol" || p["from_name"] != "Carol Tester" || p["status"] != "pending" || p["inserted_at"] == "" {
		t.Errorf("agent contact_request_received = %v", p)
	}
	expect(t, s.k.ts.do(t, "POST", "/api/v1/agent/contacts/requests/respond", s.helper.cred(), map[string]any{"action": "approve", "handle": "carol"}), 200, "")
	s.updated(t, s.hl, s.ht, id, "approved")
	s.updated(t, s.cl, s.ct, id, "approved")
	s.helpersCarol, s.carolsHelper = s.k.recordOf(t, s.helper, s.carol), s.k.recordOf(t, s.carol, s.helper)
	p = s.hl.await(t, s.ht, "contact_added", withID(s.helpersCarol))
	sameJSON(t, "agent's contact_added (person) keys", strings.Join(keysOf(p), ","), "handle,id,inserted_at,name,type")
	if p["handle"] != "carol" || p["name"] != "Carol Tester" || p["type"] != "User" {
		t.Errorf("helper's contact_added = %v", p)
	}
	p = s.cl.await(t, s.ct, "contact_added", withID(s.carolsHelper))
	sameJSON(t, "person's contact_added (agent) keys", strings.Join(keysOf(p), ","), "handle,id,inserted_at,listed_in_directory,name,tags,type")
	if p["handle"] != "alice/helper" || p["name"] != "Helper" || p["type"] != "Agent" {
		t.Errorf("carol's contact_added = %v", p)
	}
}

// agentsBecomeContacts: scout asks helper with a message; helper approves
// by id.
func (s *contactsStory) agentsBecomeContacts(t *testing.T) {
	id := s.k.request(t, s.scout, s.helper, "hi from scout")
	p := s.hl.await(t, s.ht, "contact_request_received", withID(id))
	sameJSON(t, "agent contact_request_received keys", strings.Join(keysOf(p), ","), "from_handle,from_name,id,inserted_at,message,status")
	if p["from_handle"] != "carol/scout" || p["from_name"] != "Scout" || p["message"] != "hi from scout" {
		t.Errorf("agent contact_request_received = %v", p)
	}
	s.k.respond(t, s.helper, "approve", id)
	s.updated(t, s.hl, s.ht, id, "approved")
	s.updated(t, s.sl, s.st, id, "approved")
	s.helpersScout, s.scoutsHelper = s.k.recordOf(t, s.helper, s.scout), s.k.recordOf(t, s.scout, s.helper)
	for _, tc := range []struct {
		l             *listener
		topic, record string
		other         *contactsParty
	}{{s.hl, s.ht, s.helpersScout, s.scout}, {s.sl, s.st, s.scoutsHelper, s.helper}} {
		p = tc.l.await(t, tc.topic, "contact_added", withID(tc.record))
		sameJSON(t, "agent's contact_added (agent) keys", strings.Join(keysOf(p), ","), "description,handle,id,inserted_at,is_external,listed_in_directory,name,tags,type")
		if p["handle"] != tc.other.handle || p["name"] != tc.other.name || p["type"] != "Agent" || p["description"] != tc.other.name+" does things" {
			t.Errorf("%s contact_added = %v", tc.topic, p)
		}
	}
}

// requestIsCancelled: carol asks scout and cancels: both hear it.
func (s *contactsStory) requestIsCancelled(t *testing.T) {
	id := s.k.request(t, s.carol, s.scout)
	if p := s.sl.await(t, s.st, "contact_request_received", withID(id)); p["from_handle"] != "carol" || p["from_name"] != "Carol Tester" {
		t.Errorf("scout's contact_request_received = %v", p)
	}
	s.k.respond(t, s.carol, "cancel", id)
	s.updated(t, s.cl, s.ct, id, "cancelled")
	s.updated(t, s.sl, s.st, id, "cancelled")
}

// contactsAreRemoved: carol removes helper; helper removes scout: each side
// hears of its own record.
func (s *contactsStory) contactsAreRemoved(t *testing.T) {
	expect(t, s.k.ts.do(t, "POST", "/api/v1/me/contacts/remove", s.carol.cred(), map[string]any{"handle": "alice/helper"}), 200, "")
	sameJSON(t, "carol's contact_removed", s.cl.await(t, s.ct, "contact_removed", withID(s.carolsHelper)), removedPayload(s.carolsHelper, s.helper))
	sameJSON(t, "helper's contact_removed", s.hl.await(t, s.ht, "contact_removed", withID(s.helpersCarol)), removedPayload(s.helpersCarol, s.carol))
	expect(t, s.k.ts.do(t, "POST", "/api/v1/agent/contacts/remove", s.helper.cred(), map[string]any{"contact_id": s.helpersScout}), 200, "")
	sameJSON(t, "helper's contact_removed", s.hl.await(t, s.ht, "contact_removed", withID(s.helpersScout)), removedPayload(s.helpersScout, s.scout))
	sameJSON(t, "scout's contact_removed", s.sl.await(t, s.st, "contact_removed", withID(s.scoutsHelper)), removedPayload(s.scoutsHelper, s.helper))
}

// eachEventIsHeardOnce: after a last request to carol (once it is there,
// so is all before it), each listener counts what it heard.
func (s *contactsStory) eachEventIsHeardOnce(t *testing.T) {
	id := s.k.request(t, s.helper, s.carol)
	s.cl.await(t, s.ct, "contact_request_received", withID(id))
	for _, tc := range []struct {
		l                                *listener
		topic                            string
		received, updated, added, remove int
	}{
		{s.hl, s.ht, 2, 3, 2, 2},
		{s.cl, s.ct, 2, 3, 1, 1},
		{s.sl, s.st, 1, 2, 1, 1},
	} {
		got := [4]int{tc.l.count(tc.topic, "contact_request_received"), tc.l.count(tc.topic, "contact_request_updated"),
			tc.l.count(tc.topic, "contact_added"), tc.l.count(tc.topic, "contact_removed")}
		if want := [4]int{tc.received, tc.updated, tc.added, tc.remove}; got != want {
			t.Errorf("%s: received/updated/added/removed = %v, want %v", tc.topic, got, want)
		}
	}
}

// TestContactsSocketJoins: one joins only one's own contacts channel, of
// one's own kind.
func TestContactsSocketJoins(t *testing.T) {
	k := newContactsWorld(t)
	alice, bob := k.human("alice"), k.human("bob")
	helper, other := k.bot(alice, "Helper"), k.bot(bob, "Other")
	dial := func(key string) *rawSocket {
		s, err := dialRaw(t, k.ts.socketURL(url.Values{"vsn": {"2.0.0"}, "api_key": {key}}), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	h, a := dial(helper.key), dial(alice.key)
	for i, tc := range []struct {
		c     *rawSocket
		topic string
	}{
		{h, "agent_contacts:" + other.id},  // another agent's
		{h, "user_contacts:" + alice.id},   // its owner's
		{h, "user_contacts:" + helper.id},  // agents have no user topics
		{a, "user_contacts:" + bob.id},     // another person's
		{a, "agent_contacts:" + helper.id}, // her own agent's
		{a, "agent_contacts:" + alice.id},  // people have no agent topics
		{h, "agent_contacts:" + nilID},
		{a, "user_contacts:"},
	} {
		ref := fmt.Sprint(i + 1)
		tc.c.send(t, `["`+ref+`","`+ref+`","`+tc.topic+`","phx_join",{}]`)
		m := tc.c.next(t)
		reply, _ := m[4].(map[string]any)
		resp, _ := reply["response"].(map[string]any)
		if m[1] != ref || reply["status"] != "error" || resp["reason"] != "unauthorized" {
			t.Errorf("joining %s: %v, want an unauthorized error", tc.topic, m)
		}
	}
	// A refused join subscribes to nothing: bob hears alice's request on
	// his channel, alice's socket does not.
	k.request(t, alice, bob)
	k.request(t, other, helper)
	for _, c := range []*rawSocket{a, h} {
		c.send(t, `["","99","phoenix","heartbeat",{}]`)
		if m := c.next(t); m[1] != "99" {
			t.Fatalf("a refused join received %v", m)
		}
	}
	// One's own channel joins (newListener fails the test otherwise).
	newListener(t, k.ts, alice.key, "user_contacts:"+alice.id)
	newListener(t, k.ts, helper.key, "agent_contacts:"+helper.id)
}
