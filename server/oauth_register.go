package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/chatd/chatd/store"
)

// Dynamic client registration (RFC 7591): POST /oauth/register, with no
// credential, as MCP clients do on first contact. chatd registers public
// clients only: the registration answers token_endpoint_auth_method "none"
// whatever was asked (RFC 7591 §3.2.1 lets the server choose) and issues no
// secret, since a native client could not keep one anyway; PKCE is what
// ties a code to the client that asked for it. Metadata chatd does not use
// is ignored, as §2 requires; what it keeps is bounded in the store.

// Registrations create rows and need no credential: besides the request
// rate of its address, each address may register registrationBurst clients
// at once and one a minute after that.
const (
	registrationRate  = 1.0 / 60
	registrationBurst = 20
)

// The grant and response types chatd's clients may name.
var (
	oauthGrantTypes    = []string{"authorization_code", "refresh_token"}
	oauthResponseTypes = []string{"code"}
)

// registerOAuthClient is POST /oauth/register: 201 with the client's id.
func (s *Server) registerOAuthClient(w http.ResponseWriter, r *http.Request) error {
	raw, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var meta oauthex.ClientRegistrationMetadata
	if err := json.Unmarshal(raw, &meta); err != nil {
		return errorf(errorCode(store.CodeInvalidClientMetadata), "the body is not client metadata as JSON: %s",
			strings.TrimPrefix(err.Error(), "json: "))
	}
	if err := checkRegisteredTypes(&meta); err != nil {
		return err
	}
	if err := s.underRegistrationLimit(r); err != nil {
		return err
	}
	c, err := s.db.RegisterOAuthClient(r.Context(), store.NewOAuthClient{Name: meta.ClientName, URI: meta.ClientURI,
		RedirectURIs: meta.RedirectURIs})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, &oauthex.ClientRegistrationResponse{
		ClientRegistrationMetadata: oauthex.ClientRegistrationMetadata{
			RedirectURIs:            c.RedirectURIs,
			TokenEndpointAuthMethod: "none",
			GrantTypes:              oauthGrantTypes,
			ResponseTypes:           oauthResponseTypes,
			ClientName:              c.Name,
			ClientURI:               c.URI,
			Scope:                   oauthScope,
		},
		ClientID:         c.ID,
		ClientIDIssuedAt: c.InsertedAt,
	})
	return nil
}

// checkRegisteredTypes refuses grant and response types chatd does not
// serve (the implicit flow, client credentials, ...).
func checkRegisteredTypes(meta *oauthex.ClientRegistrationMetadata) error {
	for _, g := range meta.GrantTypes {
		if !slices.Contains(oauthGrantTypes, g) {
			return errorf(errorCode(store.CodeInvalidClientMetadata), "grant_types may hold only %s", strings.Join(oauthGrantTypes, " and "))
		}
	}
	for _, rt := range meta.ResponseTypes {
		if !slices.Contains(oauthResponseTypes, rt) {
			return errorf(errorCode(store.CodeInvalidClientMetadata), "response_types may hold only code")
		}
	}
	return nil
}

// underRegistrationLimit takes one registration from the address's budget.
func (s *Server) underRegistrationLimit(r *http.Request) error {
	if s.registrations == nil {
		return nil
	}
	if st := s.registrations.allow(clientAddress(r), s.now()); !st.allowed {
		return rateLimited(codeRateLimited, "registrations", "too many client registrations from this address; retry after the delay in Retry-After", st)
	}
	return nil
}
