package store

import (
	"context"
	"sort"
	"strings"
	"testing"
)

// The rules of contacts, called on the store directly (the HTTP tests pin
// the same rules through both APIs): a request's states, a request meeting
// the inverse one, removal in both directions, and the refusals.

// contactKit: alice (Acme) owns helper; carol (Other Org) owns scout; dave
// is of a third organization.
type contactKit struct {
	db                        *DB
	ctx                       context.Context
	alice, carol, dave        *User
	aliceA, carolA, daveA     Actor
	helperAgent               *Agent
	helper, scout             Actor
	aliceHandle, daveHandle   string
	helperHandle, scoutHandle string
}

func newContactKit(t *testing.T) *contactKit {
	t.Helper()
	db := openTestDB(t, Options{})
	ctx := context.Background()
	user := func(handle, org string) *User {
		u, _, err := db.CreateUser(ctx, NewUser{Handle: handle, Name: strings.ToUpper(handle[:1]) + handle[1:], Organization: org})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	k := &contactKit{db: db, ctx: ctx, alice: user("alice", "Acme"), carol: user("carol", "Other Org"), dave: user("dave", "Third Org")}
	k.aliceA, k.carolA, k.daveA = UserActor(k.alice), UserActor(k.carol), UserActor(k.dave)
	k.helperAgent, _ = mustAgent(t, db, k.alice, "Helper")
	scout, _ := mustAgent(t, db, k.carol, "Scout")
	k.helper, k.scout = AgentActor(k.helperAgent), AgentActor(scout)
	k.aliceHandle, k.daveHandle = "alice", "dave"
	k.helperHandle, k.scoutHandle = k.helperAgent.Handle, scout.Handle
	return k
}

func (k *contactKit) ask(t *testing.T, from Actor, toHandle string) *ContactRequest {
	t.Helper()
	r, err := k.db.AddContact(k.ctx, from, toHandle, nil, "/message")
	if err != nil {
		t.Fatalf("%s asks %s: %v", from.Handle, toHandle, err)
	}
	return r
}

// contacts lists the handles of p's contacts, sorted.
func (k *contactKit) contacts(t *testing.T, p Actor) string {
	t.Helper()
	page, err := k.db.ListContacts(k.ctx, p, PageRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range page.Items {
		out = append(out, c.Party.Handle)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// requests renders the requests p received (or sent) as
// "requester>recipient status", newest first.
func (k *contactKit) requests(t *testing.T, p Actor, received bool) string {
	t.Helper()
	page, err := k.db.ListContactRequests(k.ctx, p, received, nil, PageRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range page.Items {
		out = append(out, r.Requester.Handle+">"+r.Recipient.Handle+" "+r.Status)
	}
	return strings.Join(out, ",")
}

// TestContactRequestStates: a pending request is approved or rejected by its
// recipient, or cancelled by its requester, and stays as it was resolved;
// only approval makes contacts, in both directions.
func TestContactRequestStates(t *testing.T) {
	for _, tc := range []struct {
		action, want string
		contacts     bool
	}{
		{"approve", "approved", true},
		{"reject", "rejected", false},
		{"cancel", "cancelled", false},
	} {
		t.Run(tc.action, func(t *testing.T) {
			k := newContactKit(t)
			req := k.ask(t, k.helper, k.scoutHandle)
			if req.Status != "pending" || req.RespondedAt != nil || req.Requester.ID != k.helper.ID || req.Recipient.ID != k.scout.ID {
				t.Fatalf("request = %+v", req)
			}
			if k.contacts(t, k.helper)+k.contacts(t, k.scout) != "" {
				t.Fatal("a pending request made contacts")
			}
			by, wrong := k.scout, k.helper // the recipient answers; the requester cancels
			if tc.action == "cancel" {
				by, wrong = k.helper, k.scout
			}
			_, err := k.db.RespondContactRequest(k.ctx, wrong, tc.action, req.ID, "")
			wantCode(t, err, CodeForbidden)

			got, err := k.db.RespondContactRequest(k.ctx, by, tc.action, req.ID, "")
			if err != nil || got.ID != req.ID || got.Status != tc.want || got.RespondedAt == nil {
				t.Fatalf("%s: %+v, %v", tc.action, got, err)
			}
			want := ""
			if tc.contacts {
				want = k.scoutHandle + "|" + k.helperHandle
			}
			if both := k.contacts(t, k.helper) + "|" + k.contacts(t, k.scout); tc.contacts && both != want || !tc.contacts && both != "|" {
				t.Fatalf("contacts after %s: %s", tc.action, both)
			}
			if sent := k.requests(t, k.helper, false); sent != k.helperHandle+">"+k.scoutHandle+" "+tc.want {
				t.Fatalf("helper sent %s", sent)
			}

			// Resolved stays resolved: by id a conflict, by handle none pending.
			for _, again := range []struct {
				by     Actor
				action string
			}{{k.scout, "approve"}, {k.scout, "reject"}, {k.helper, "cancel"}} {
				_, err := k.db.RespondContactRequest(k.ctx, again.by, again.action, req.ID, "")
				wantCode(t, err, CodeConflict)
				other := k.helperHandle
				if again.action == "cancel" {
					other = k.scoutHandle
				}
				_, err = k.db.RespondContactRequest(k.ctx, again.by, again.action, "", other)
				wantCode(t, err, CodeNotFound)
			}
		})
	}
}

// TestContactRequestAnsweredByHandle: by handle, approve and reject answer
// the pending request the other party made to the caller, cancel the one
// the caller made to them.
func TestContactRequestAnsweredByHandle(t *testing.T) {
	k := newContactKit(t)
	k.ask(t, k.carolA, k.helperHandle)
	k.ask(t, k.helper, k.daveHandle)
	for _, tc := range []struct {
		action, handle string
		code           Code
	}{
		{"approve", "dave", CodeNotFound},               // the request goes the other way
		{"cancel", "carol", CodeNotFound},               // likewise
		{"approve", "@" + k.helperHandle, CodeNotFound}, // one's own handle
		{"approve", "nobody", CodeNotFound},
		{"approve", "a b", CodeBadRequest},
		{"accept", "carol", CodeValidation},
	} {
		_, err := k.db.RespondContactRequest(k.ctx, k.helper, tc.action, "", tc.handle)
		wantCode(t, err, tc.code)
	}
	if r, err := k.db.RespondContactRequest(k.ctx, k.helper, "approve", "", "@Carol"); err != nil || r.Status != "approved" {
		t.Fatalf("approve by handle: %+v, %v", r, err)
	}
	if r, err := k.db.RespondContactRequest(k.ctx, k.helper, "cancel", "", "dave"); err != nil || r.Status != "cancelled" {
		t.Fatalf("cancel by handle: %+v, %v", r, err)
	}
	// Someone else's request, or no request, is not found by id.
	foreign := k.ask(t, k.carolA, k.daveHandle)
	for _, id := range []string{foreign.ID, "0190a000-0000-7000-8000-000000000000", "req-1"} {
		_, err := k.db.RespondContactRequest(k.ctx, k.helper, "approve", id, "")
		wantCode(t, err, CodeNotFound)
	}
}

// TestAddContactMeetsTheInverseRequest: asking someone who asked you first
// approves their request; both are contacts and nothing stays pending.
func TestAddContactMeetsTheInverseRequest(t *testing.T) {
	k := newContactKit(t)
	first := k.ask(t, k.scout, k.aliceHandle)
	got, err := k.db.AddContact(k.ctx, k.aliceA, "@"+k.scoutHandle, str("hello"), "/message")
	if err != nil || got.ID != first.ID || got.Status != "approved" || got.Requester.ID != k.scout.ID {
		t.Fatalf("the meeting request: %+v, %v", got, err)
	}
	if a, s := k.contacts(t, k.aliceA), k.contacts(t, k.scout); a != k.scoutHandle || s != k.aliceHandle {
		t.Fatalf("contacts: alice %q, scout %q", a, s)
	}
	if r := k.requests(t, k.aliceA, true) + k.requests(t, k.aliceA, false) + k.requests(t, k.scout, true); strings.Contains(r, "pending") || r != k.scoutHandle+">alice approved" {
		t.Fatalf("requests: %s", r)
	}
	for _, p := range []struct {
		from Actor
		to   string
	}{{k.aliceA, k.scoutHandle}, {k.scout, "alice"}} {
		_, err := k.db.AddContact(k.ctx, p.from, p.to, nil, "/message")
		wantCode(t, err, CodeConflict)
	}
}

func TestAddContactRefusals(t *testing.T) {
	k := newContactKit(t)
	k.ask(t, k.helper, "carol")
	for _, tc := range []struct {
		name   string
		handle string
		code   Code
	}{
		{"self", k.helperHandle, CodeConflict},
		{"self, with @ and in capitals", "@" + strings.ToUpper(k.helperHandle), CodeConflict},
		{"already pending", "carol", CodeConflict},
		{"unknown person", "nobody", CodeNotFound},
		{"unknown agent", "carol/nobody", CodeNotFound},
		{"malformed", "x/y/z", CodeBadRequest},
	} {
		_, err := k.db.AddContact(k.ctx, k.helper, tc.handle, str("hi"), "/message")
		if ErrorCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	_, err := k.db.AddContact(k.ctx, k.helper, "nobody", str(strings.Repeat("é", MaxContactMessage+1)), "/contact_request/message")
	wantProblem(t, err, "/contact_request/message")
	_, err = k.db.AddContact(k.ctx, k.helper, k.scoutHandle, str("bell\x07"), "/message")
	wantProblem(t, err, "/message")

	// A blank message is none; the longest is kept whole.
	blank, err := k.db.AddContact(k.ctx, k.helper, k.scoutHandle, str("  \n "), "/message")
	if err != nil || blank.Message != nil {
		t.Fatalf("blank message: %+v, %v", blank, err)
	}
	long := strings.Repeat("é", MaxContactMessage)
	if r, err := k.db.AddContact(k.ctx, k.aliceA, "dave", str(" "+long+" "), "/message"); err != nil || *r.Message != long {
		t.Fatalf("longest message: %v", err)
	}
	if _, err := k.db.RespondContactRequest(k.ctx, k.carolA, "approve", "", k.helperHandle); err != nil {
		t.Fatal(err)
	}
	_, err = k.db.AddContact(k.ctx, k.helper, "carol", nil, "/message")
	wantCode(t, err, CodeConflict) // already contacts
}

// TestRemoveContactEndsBothDirections: a contact is named by the caller's
// record id, by the other party's id or by handle; removing it ends both
// records and tells each side of the party it lost.
func TestRemoveContactEndsBothDirections(t *testing.T) {
	k := newContactKit(t)
	connect := func() {
		t.Helper()
		r := k.ask(t, k.helper, "carol")
		if _, err := k.db.RespondContactRequest(k.ctx, k.carolA, "approve", r.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	recordOf := func(owner Actor) string {
		page, err := k.db.ListContacts(k.ctx, owner, PageRequest{Limit: 10})
		if err != nil || len(page.Items) != 1 {
			t.Fatalf("contacts of %s: %+v, %v", owner.Handle, page, err)
		}
		return page.Items[0].ID
	}
	for _, by := range []string{"record", "party", "handle"} {
		t.Run(by, func(t *testing.T) {
			connect()
			rec := record(k.db)
			helperRecord, carolRecord := recordOf(k.helper), recordOf(k.carolA)
			id, handle := map[string]string{"record": helperRecord, "party": k.carol.ID}[by], ""
			if by == "handle" {
				handle = "@carol"
			}
			// The other side's record is not the caller's to name.
			wantCode(t, k.db.RemoveContact(k.ctx, k.helper, carolRecord, ""), CodeNotFound)
			if err := k.db.RemoveContact(k.ctx, k.helper, id, handle); err != nil {
				t.Fatal(err)
			}
			if c := k.contacts(t, k.helper) + k.contacts(t, k.carolA); c != "" {
				t.Fatalf("contacts left: %s", c)
			}
			var removed []string
			rec.mu.Lock()
			for _, c := range rec.changes {
				if c.Kind == ContactRemoved {
					removed = append(removed, c.Contact.ID+" "+c.Contact.OwnerID+" lost "+c.Contact.Party.Handle)
				}
			}
			rec.mu.Unlock()
			sort.Strings(removed)
			want := []string{helperRecord + " " + k.helper.ID + " lost carol", carolRecord + " " + k.carol.ID + " lost " + k.helperHandle}
			sort.Strings(want)
			sameLines(t, "contact_removed", removed, want)
			wantCode(t, k.db.RemoveContact(k.ctx, k.helper, id, handle), CodeNotFound)
		})
	}
	wantCode(t, k.db.RemoveContact(k.ctx, k.helper, "", k.helperHandle), CodeNotFound)
	wantCode(t, k.db.RemoveContact(k.ctx, k.helper, "", "dave"), CodeNotFound)
	wantCode(t, k.db.RemoveContact(k.ctx, k.helper, "", "a b"), CodeBadRequest)
}

// TestDeletedAgentLeavesItsContacts: deleting an agent ends its contacts,
// cancels its pending requests, and listings name it as deleted.
func TestDeletedAgentLeavesItsContacts(t *testing.T) {
	k := newContactKit(t)
	approved := k.ask(t, k.helper, "carol")
	if _, err := k.db.RespondContactRequest(k.ctx, k.carolA, "approve", approved.ID, ""); err != nil {
		t.Fatal(err)
	}
	k.ask(t, k.helper, k.scoutHandle)
	k.ask(t, k.daveA, k.helperHandle)
	if _, err := k.db.DeleteAgent(k.ctx, k.alice, k.helperAgent.ID, false); err != nil {
		t.Fatal(err)
	}
	if c := k.contacts(t, k.carolA); c != "" {
		t.Fatalf("carol's contacts: %s", c)
	}
	for _, tc := range []struct {
		who      Actor
		received bool
		want     string
	}{
		{k.carolA, true, ">carol approved"},
		{k.scout, true, ">" + k.scoutHandle + " cancelled"},
		{k.daveA, false, "dave> cancelled"},
	} {
		page, err := k.db.ListContactRequests(k.ctx, tc.who, tc.received, nil, PageRequest{Limit: 10})
		if err != nil || len(page.Items) != 1 {
			t.Fatalf("%s's requests: %+v, %v", tc.who.Handle, page, err)
		}
		r := page.Items[0]
		gone := r.Requester
		if r.Requester.ID != k.helper.ID {
			gone = r.Recipient
		}
		if got := r.Requester.Handle + ">" + r.Recipient.Handle + " " + r.Status; got != tc.want || gone.ID != k.helper.ID || gone.Name != "(deleted)" {
			t.Fatalf("%s's request: %s, the deleted party %+v", tc.who.Handle, got, gone)
		}
	}
}

// TestPeersListTheRegistryBeforeContacts: a person's peers are the registry
// (the people of their organization, then their agents, each by name
// whatever its case) before their contacts, and someone both in the
// registry and a contact is listed once, as registry.
func TestPeersListTheRegistryBeforeContacts(t *testing.T) {
	k := newContactKit(t)
	bob, _, err := k.db.CreateUser(k.ctx, NewUser{Handle: "bob", Name: "Bob", Organization: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	mustAgent(t, k.db, k.alice, "apprentice")
	for _, met := range []struct{ asker, asked Actor }{{UserActor(bob), k.aliceA}, {k.scout, k.aliceA}} {
		k.ask(t, met.asker, met.asked.Handle)
		k.ask(t, met.asked, met.asker.Handle)
	}
	peers := func(f PeerFilter, pr PageRequest) string {
		t.Helper()
		page, err := k.db.ListPeers(k.ctx, k.aliceA, f, pr)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range page.Items {
			entry := p.Name + " " + p.Source
			if p.IsContact {
				entry += " contact"
			}
			out = append(out, entry)
		}
		if page.HasMore {
			out = append(out, "…")
		}
		return strings.Join(out, ", ")
	}
	if got, want := peers(PeerFilter{}, PageRequest{Limit: 10}),
		"Bob registry contact, apprentice registry, Helper registry, Scout contact contact"; got != want {
		t.Errorf("peers = %s, want %s", got, want)
	}
	if got, want := peers(PeerFilter{Type: PartyAgent}, PageRequest{Limit: 2}), "apprentice registry, Helper registry, …"; got != want {
		t.Errorf("agents = %s, want %s", got, want)
	}
	if got, want := peers(PeerFilter{}, PageRequest{Limit: 2, Offset: 2}), "Helper registry, Scout contact contact"; got != want {
		t.Errorf("second page = %s, want %s", got, want)
	}
}
