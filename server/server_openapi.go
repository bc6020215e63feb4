package server

import (
	"net/http"

	"github.com/chatd/chatd/server/openapi"
)

func (s *Server) openAPIRoutes() {
	s.handle("GET", "/api/v1/openapi.json", public, s.openAPIDocument)
}

// apiDocument is chatd's OpenAPI document (server/openapi), ready to serve
// like a web file: built into the binary, with a strong ETag so clients
// revalidate cheaply and see a new binary's document at once.
var apiDocument = newWebFile("openapi.json", openapi.JSON)

// openAPIDocument is GET /api/v1/openapi.json: the description of every
// route this server has, public like the web app that renders it at
// /docs/api.
func (s *Server) openAPIDocument(w http.ResponseWriter, r *http.Request) error {
	serveWebFile(w, r, apiDocument)
	return nil
}
