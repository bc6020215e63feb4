package server

import "net/http"

// The people of an organization, chatd's own (store/people.go): its admins
// list them and remove someone; a removed person is signed out everywhere
// and can no longer sign in, and their agents are deleted.

var peopleListing = listing{defaultLimit: 20, maxLimit: 100}

func (s *Server) peopleRoutes() {
	s.handle("GET", "/api/v1/me/people", humansOnly, s.listPeople)
	s.handle("DELETE", "/api/v1/me/people/:id", humansOnly, s.removePerson)
}

// listPeople is GET /api/v1/me/people: the organization's people, oldest
// first, as UserDetails (admins only).
func (s *Server) listPeople(w http.ResponseWriter, r *http.Request) error {
	const scope = "me/people"
	pq, err := s.parsePage(r.URL.Query(), scope, peopleListing)
	if err != nil {
		return err
	}
	page, err := s.db.ListPeople(r.Context(), callerUser(r), pq.PageRequest)
	if err != nil {
		return err
	}
	return replyPage(w, viewsOf(page.Items, newUserView), s.meta(w, pq, scope, page.PageInfo))
}

// removePerson is DELETE /api/v1/me/people/{id}: 204 once the person is
// removed.
func (s *Server) removePerson(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.db.RemovePerson(r.Context(), callerUser(r), r.PathValue("id")); err != nil {
		return err
	}
	return noContent(w)
}
