package server

import (
	"net/http"

	"github.com/chatd/chatd/store"
)

// Contacts and contact requests. Both APIs share the store's one model of
// them; they differ in shapes: agents get the flat, handle-based views the
// SDKs model (AgentContact, Received/SentContactRequest), people the REST
// records (Contact, ContactRequest).

func (s *Server) contactRoutes() {
	s.handle("GET", "/api/v1/agent/contacts", agentsOnly, s.listContacts)
	s.handle("POST", "/api/v1/agent/contacts/add", agentsOnly, withBody(s, s.addAgentContact))
	s.handle("POST", "/api/v1/agent/contacts/remove", agentsOnly, withBody(s, s.removeContact))
	s.handle("GET", "/api/v1/agent/contacts/requests", agentsOnly, s.listAgentContactRequests)
	s.handle("POST", "/api/v1/agent/contacts/requests/respond", agentsOnly, withBody(s, s.respondAgentContactRequest))

	s.handle("GET", "/api/v1/me/contacts", humansOnly, s.listContacts)
	s.handle("POST", "/api/v1/me/contacts/remove", humansOnly, withBody(s, s.removeContact))
	s.handle("POST", "/api/v1/me/contacts/resolve", humansOnly, withBody(s, s.resolveHandle))
	s.handle("GET", "/api/v1/me/contacts/requests", humansOnly, s.listReceivedContactRequests)
	s.handle("POST", "/api/v1/me/contacts/requests", humansOnly, withBody(s, s.createContactRequest))
	s.handle("GET", "/api/v1/me/contacts/requests/sent", humansOnly, s.listSentContactRequests)
	s.handle("DELETE", "/api/v1/me/contacts/requests/:id", humansOnly, s.answerContactRequest("cancel"))
	s.handle("POST", "/api/v1/me/contacts/requests/:id/approve", humansOnly, s.answerContactRequest("approve"))
	s.handle("POST", "/api/v1/me/contacts/requests/:id/reject", humansOnly, s.answerContactRequest("reject"))
}

// contactListing pages contacts and contact requests (page/page_size only).
var contactListing = listing{defaultLimit: 20, maxLimit: 100}

// agentContactView is AgentContact.
type agentContactView struct {
	ID                string          `json:"id"`
	Handle            string          `json:"handle"`
	Name              string          `json:"name"`
	Type              store.PartyType `json:"type"`
	Description       *string         `json:"description"`
	IsExternal        *bool           `json:"is_external"`
	ListedInDirectory bool            `json:"listed_in_directory"`
	Tags              []string        `json:"tags"`
	InsertedAt        string          `json:"inserted_at"`
}

func newAgentContactView(c *store.Contact) agentContactView {
	p := c.Party
	return agentContactView{ID: c.ID, Handle: p.Handle, Name: p.Name, Type: p.Type, Description: p.Description,
		IsExternal: p.IsExternal, ListedInDirectory: p.ListedInDirectory, Tags: p.Tags, InsertedAt: timestamp(c.InsertedAt)}
}

// contactView is Contact (the Human API's record).
type contactView struct {
	ID          string          `json:"id"`
	ContactID   string          `json:"contact_id"`
	ContactType store.PartyType `json:"contact_type"`
	Status      string          `json:"status"`
	Source      string          `json:"source"`
	InsertedAt  string          `json:"inserted_at"`
	User        contactUserView `json:"user"`
}

type contactUserView struct {
	ID                string   `json:"id"`
	Handle            string   `json:"handle"`
	Name              string   `json:"name"`
	Email             string   `json:"email,omitempty"` // contacts see each other's email (a person's placeholder when none); agents have none
	ListedInDirectory bool     `json:"listed_in_directory"`
	Tags              []string `json:"tags"`
}

func newContactView(c *store.Contact) contactView {
	p := c.Party
	email := p.Email
	if p.Type == store.PartyUser {
		email = store.ReportedEmail(p.Handle, p.Email)
	}
	return contactView{ID: c.ID, ContactID: p.ID, ContactType: p.Type, Status: "active", Source: "request",
		InsertedAt: timestamp(c.InsertedAt),
		User:       contactUserView{ID: p.ID, Handle: p.Handle, Name: p.Name, Email: email, ListedInDirectory: p.ListedInDirectory, Tags: p.Tags}}
}

// partyRef is the {id, handle, name} of a request's requester or recipient.
type partyRef struct {
	ID     string `json:"id"`
	Handle string `json:"handle"`
	Name   string `json:"name"`
}

// contactRequestView is ContactRequest (the Human API's record).
type contactRequestView struct {
	ID            string          `json:"id"`
	RequesterID   string          `json:"requester_id"`
	RequesterType store.PartyType `json:"requester_type"`
	Requester     partyRef        `json:"requester"`
	RecipientID   string          `json:"recipient_id"`
	RecipientType store.PartyType `json:"recipient_type"`
	Recipient     partyRef        `json:"recipient"`
	Message       *string         `json:"message"`
	Status        string          `json:"status"`
	InsertedAt    string          `json:"inserted_at"`
	RespondedAt   *string         `json:"responded_at"`
}

func newContactRequestView(r *store.ContactRequest) contactRequestView {
	v := contactRequestView{ID: r.ID,
		RequesterID: r.Requester.ID, RequesterType: r.Requester.Type,
		Requester:   partyRef{ID: r.Requester.ID, Handle: r.Requester.Handle, Name: r.Requester.Name},
		RecipientID: r.Recipient.ID, RecipientType: r.Recipient.Type,
		Recipient: partyRef{ID: r.Recipient.ID, Handle: r.Recipient.Handle, Name: r.Recipient.Name},
		Message:   r.Message, Status: r.Status, InsertedAt: timestamp(r.InsertedAt), RespondedAt: optionalTimestamp(r.RespondedAt)}
	return v
}

// receivedRequestView is ReceivedContactRequest; from_name is always a
// string (the SDKs' models require one).
type receivedRequestView struct {
	ID         string  `json:"id"`
	FromHandle string  `json:"from_handle"`
	FromName   string  `json:"from_name"`
	Message    *string `json:"message"`
	Status     string  `json:"status"`
	InsertedAt string  `json:"inserted_at"`
}

func newReceivedRequestView(cr *store.ContactRequest) receivedRequestView {
	return receivedRequestView{ID: cr.ID, FromHandle: cr.Requester.Handle, FromName: cr.Requester.Name,
		Message: cr.Message, Status: cr.Status, InsertedAt: timestamp(cr.InsertedAt)}
}

// sentRequestView is SentContactRequest.
type sentRequestView struct {
	ID         string  `json:"id"`
	ToHandle   string  `json:"to_handle"`
	ToName     string  `json:"to_name"`
	Message    *string `json:"message"`
	Status     string  `json:"status"`
	InsertedAt string  `json:"inserted_at"`
}

func newSentRequestView(cr *store.ContactRequest) sentRequestView {
	return sentRequestView{ID: cr.ID, ToHandle: cr.Recipient.Handle, ToName: cr.Recipient.Name,
		Message: cr.Message, Status: cr.Status, InsertedAt: timestamp(cr.InsertedAt)}
}

// requestStatusView is the answer to an action on a request.
type requestStatusView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// listContacts is GET /agent/contacts and GET /me/contacts.
func (s *Server) listContacts(w http.ResponseWriter, r *http.Request) error {
	op, err := parseOffsetPage(r.URL.Query(), contactListing)
	if err != nil {
		return err
	}
	p := principal(r)
	page, err := s.db.ListContacts(r.Context(), p.Actor(), op.request())
	if err != nil {
		return err
	}
	if p.IsAgent() {
		return replyPage(w, viewsOf(page.Items, newAgentContactView), op.meta(page.Total))
	}
	return replyPage(w, viewsOf(page.Items, newContactView), op.meta(page.Total))
}

type addContactRequest struct {
	Handle  *string `json:"handle"`
	Message *string `json:"message"`
}

// addAgentContact is POST /agent/contacts/add: 201 {id, status} where status
// is approved when the other side had already asked.
func (s *Server) addAgentContact(w http.ResponseWriter, r *http.Request, req addContactRequest) error {
	if req.Handle == nil {
		return store.Errorf(store.CodeBadRequest, "handle is required")
	}
	cr, err := s.db.AddContact(r.Context(), principal(r).Actor(), *req.Handle, req.Message, "/message")
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, requestStatusView{ID: cr.ID, Status: cr.Status})
}

type createContactRequestBody struct {
	ContactRequest *struct {
		RecipientHandle *string `json:"recipient_handle"`
		Message         *string `json:"message"`
	} `json:"contact_request"`
}

// createContactRequest is POST /me/contacts/requests: 201 ContactRequest.
func (s *Server) createContactRequest(w http.ResponseWriter, r *http.Request, req createContactRequestBody) error {
	if req.ContactRequest == nil || req.ContactRequest.RecipientHandle == nil {
		return store.Errorf(store.CodeBadRequest, "contact_request.recipient_handle is required")
	}
	cr, err := s.db.AddContact(r.Context(), principal(r).Actor(), *req.ContactRequest.RecipientHandle,
		req.ContactRequest.Message, "/contact_request/message")
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, newContactRequestView(cr))
}

type removeContactRequest struct {
	ContactID *string `json:"contact_id"`
	Handle    *string `json:"handle"`
}

// removeContact is POST /agent/contacts/remove and /me/contacts/remove.
func (s *Server) removeContact(w http.ResponseWriter, r *http.Request, req removeContactRequest) error {
	id, handle, err := idOrHandle(req.ContactID, req.Handle, "contact_id")
	if err != nil {
		return err
	}
	if err := s.db.RemoveContact(r.Context(), principal(r).Actor(), id, handle); err != nil {
		return err
	}
	return reply(w, http.StatusOK, map[string]string{"status": "removed"})
}

// idOrHandle reads whom or what an agent's contact action names: the id
// when one is sent, else the handle; neither is 400, naming idField.
func idOrHandle(id, handle *string, idField string) (string, string, error) {
	switch {
	case id != nil && *id != "":
		return *id, "", nil
	case handle != nil && *handle != "":
		return "", *handle, nil
	}
	return "", "", store.Errorf(store.CodeBadRequest, "send %s or handle", idField)
}

// listAgentContactRequests is GET /agent/contacts/requests: the pending
// requests received and the sent ones with sent_status, each direction paged
// on its own by the same page and page_size.
func (s *Server) listAgentContactRequests(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	op, err := parseOffsetPage(q, contactListing)
	if err != nil {
		return err
	}
	p := store.Problems{}
	sentStatus := enumParam(q, "sent_status", "pending", []string{"pending", "approved", "rejected", "cancelled", "all"}, p)
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	actor := principal(r).Actor()
	received, err := s.db.ListContactRequests(r.Context(), actor, true, []string{"pending"}, op.request())
	if err != nil {
		return err
	}
	sent, err := s.db.ListContactRequests(r.Context(), actor, false, statusFilter(sentStatus), op.request())
	if err != nil {
		return err
	}
	direction := func(total int) map[string]int {
		return map[string]int{"total": total, "total_pages": op.meta(total).TotalPages}
	}
	listed := map[string]any{
		"received": viewsOf(received.Items, newReceivedRequestView),
		"sent":     viewsOf(sent.Items, newSentRequestView),
	}
	return replyPage(w, listed, map[string]any{
		"page": op.page, "page_size": op.pageSize,
		"received": direction(received.Total), "sent": direction(sent.Total),
	})
}

// statusFilter turns a status query value into the store's filter.
func statusFilter(status string) []string {
	if status == "all" {
		return nil
	}
	return []string{status}
}

type respondContactRequest struct {
	Action    *string `json:"action"`
	Handle    *string `json:"handle"`
	RequestID *string `json:"request_id"`
}

// respondAgentContactRequest is POST /agent/contacts/requests/respond.
func (s *Server) respondAgentContactRequest(w http.ResponseWriter, r *http.Request, req respondContactRequest) error {
	id, handle, err := idOrHandle(req.RequestID, req.Handle, "request_id")
	if err != nil {
		return err
	}
	action := ""
	if req.Action != nil {
		action = *req.Action
	}
	cr, err := s.db.RespondContactRequest(r.Context(), principal(r).Actor(), action, id, handle)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, requestStatusView{ID: cr.ID, Status: cr.Status})
}

// answerContactRequest is POST /me/contacts/requests/{id}/approve|reject and
// DELETE /me/contacts/requests/{id} (cancel).
func (s *Server) answerContactRequest(action string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != http.MethodDelete {
			if err := s.decodeBody(w, r, &emptyBody{}); err != nil {
				return err
			}
		}
		cr, err := s.db.RespondContactRequest(r.Context(), principal(r).Actor(), action, r.PathValue("id"), "")
		if err != nil {
			return err
		}
		return reply(w, http.StatusOK, requestStatusView{ID: cr.ID, Status: cr.Status})
	}
}

// listReceivedContactRequests is GET /me/contacts/requests: pending
// requests made to the caller.
func (s *Server) listReceivedContactRequests(w http.ResponseWriter, r *http.Request) error {
	return s.listHumanContactRequests(w, r, true, "pending")
}

// listSentContactRequests is GET /me/contacts/requests/sent?status=.
func (s *Server) listSentContactRequests(w http.ResponseWriter, r *http.Request) error {
	p := store.Problems{}
	status := enumParam(r.URL.Query(), "status", "all", []string{"all", "pending", "approved", "rejected", "cancelled"}, p)
	if err := p.Err(store.CodeValidation); err != nil {
		return err
	}
	return s.listHumanContactRequests(w, r, false, status)
}

func (s *Server) listHumanContactRequests(w http.ResponseWriter, r *http.Request, received bool, status string) error {
	op, err := parseOffsetPage(r.URL.Query(), contactListing)
	if err != nil {
		return err
	}
	page, err := s.db.ListContactRequests(r.Context(), principal(r).Actor(), received, statusFilter(status), op.request())
	if err != nil {
		return err
	}
	return replyPage(w, viewsOf(page.Items, newContactRequestView), op.meta(page.Total))
}

type resolveHandleRequest struct {
	Handle *string `json:"handle"`
}

// resolveHandle is POST /me/contacts/resolve: who a handle names, without
// their id or email (those are for contacts).
func (s *Server) resolveHandle(w http.ResponseWriter, r *http.Request, req resolveHandleRequest) error {
	if req.Handle == nil {
		return store.Errorf(store.CodeBadRequest, "handle is required")
	}
	p, err := s.db.ResolveHandle(r.Context(), *req.Handle)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, map[string]string{"handle": p.Handle, "name": p.Name, "type": string(p.Type)})
}

// contactsTopic is a person's or agent's own contacts channel.
func contactsTopic(id string, typ store.PartyType) string {
	if typ == store.PartyAgent {
		return "agent_contacts:" + id
	}
	return "user_contacts:" + id
}

// contactChange pushes a contact change to the contacts channels of those
// it concerns: agents get the flat payloads the SDKs model, people the REST
// records.
func (rt *realtime) contactChange(c store.Change) {
	switch c.Kind {
	case store.ContactRequestReceived:
		cr, to := c.ContactRequest, c.ContactRequest.Recipient
		var payload any = newContactRequestView(cr)
		if to.Type == store.PartyAgent {
			payload = newReceivedRequestEvent(cr)
		}
		rt.hub.Broadcast(contactsTopic(to.ID, to.Type), string(c.Kind), payloadJSON(payload), nil)
	case store.ContactRequestUpdated:
		cr := c.ContactRequest
		payload := payloadJSON(requestStatusView{ID: cr.ID, Status: cr.Status})
		for _, p := range []*store.Party{cr.Requester, cr.Recipient} {
			rt.hub.Broadcast(contactsTopic(p.ID, p.Type), string(c.Kind), payload, nil)
		}
	case store.ContactAdded:
		ct := c.Contact
		rt.hub.Broadcast(contactsTopic(ct.OwnerID, ct.OwnerType), string(c.Kind), payloadJSON(newContactAddedEvent(ct)), nil)
	case store.ContactRemoved:
		ct := c.Contact
		rt.hub.Broadcast(contactsTopic(ct.OwnerID, ct.OwnerType), string(c.Kind), payloadJSON(newContactRemovedEvent(ct)), nil)
	}
}

// The contact pushes name only what they carry: a field the SDKs' models
// make optional is absent rather than null when it does not apply. The
// optional parts are embedded pointers, whose fields encoding/json leaves
// out when the pointer is nil.

// receivedRequestEvent is contact_request_received on an agent's channel:
// ReceivedContactRequest without a message when there is none.
type receivedRequestEvent struct {
	ID         string  `json:"id"`
	FromHandle string  `json:"from_handle"`
	FromName   string  `json:"from_name"`
	Message    *string `json:"message,omitempty"`
	Status     string  `json:"status"`
	InsertedAt string  `json:"inserted_at"`
}

func newReceivedRequestEvent(cr *store.ContactRequest) receivedRequestEvent {
	return receivedRequestEvent(newReceivedRequestView(cr))
}

// contactPartyView names the other side of a contact.
type contactPartyView struct {
	Handle string          `json:"handle"`
	Name   string          `json:"name"`
	Type   store.PartyType `json:"type"`
}

// contactAddedEvent is contact_added: the record and whom it names, with
// an agent's directory fields, and, on an agent's own channel, an agent's
// description and is_external too.
type contactAddedEvent struct {
	ID string `json:"id"`
	contactPartyView
	InsertedAt string `json:"inserted_at"`
	*contactDirectoryView
	*contactAgentDetailsView
}

type contactDirectoryView struct {
	ListedInDirectory bool     `json:"listed_in_directory"`
	Tags              []string `json:"tags"`
}

type contactAgentDetailsView struct {
	Description *string `json:"description"`
	IsExternal  *bool   `json:"is_external"`
}

func newContactAddedEvent(ct *store.Contact) contactAddedEvent {
	p := ct.Party
	ev := contactAddedEvent{ID: ct.ID, contactPartyView: contactPartyView{Handle: p.Handle, Name: p.Name, Type: p.Type},
		InsertedAt: timestamp(ct.InsertedAt)}
	if p.Type == store.PartyAgent {
		ev.contactDirectoryView = &contactDirectoryView{ListedInDirectory: p.ListedInDirectory, Tags: p.Tags}
		if ct.OwnerType == store.PartyAgent {
			ev.contactAgentDetailsView = &contactAgentDetailsView{Description: p.Description, IsExternal: p.IsExternal}
		}
	}
	return ev
}

// contactRemovedEvent is contact_removed. The SDKs need only the record's
// id; the party it named, when known, says who is gone without a lookup
// (the record is gone too).
type contactRemovedEvent struct {
	ID string `json:"id"`
	*contactPartyView
}

func newContactRemovedEvent(ct *store.Contact) contactRemovedEvent {
	ev := contactRemovedEvent{ID: ct.ID}
	if p := ct.Party; p != nil {
		ev.contactPartyView = &contactPartyView{Handle: p.Handle, Name: p.Name, Type: p.Type}
	}
	return ev
}
