package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
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

// clientMetadata is the client metadata chatd reads from a registration:
// the rest is ignored (RFC 7591 §2), whatever its type, so a jwks object
// or a contacts list never stands in a client's way.
type clientMetadata struct {
	RedirectURIs  []string `json:"redirect_uris"`
	ClientName    string   `json:"client_name"`
	ClientURI     string   `json:"client_uri"`
	GrantTypes    []string `json:"grant_types"`
	ResponseTypes []string `json:"response_types"`
}

// clientMetadataTypes is what each field of clientMetadata holds, as the
// refusal of a value of another type says it.
var clientMetadataTypes = map[string]string{"redirect_uris": "an array of strings (URLs)", "client_name": "a string",
	"client_uri": "a string (a URL)", "grant_types": "an array of strings", "response_types": "an array of strings"}

// readClientMetadata reads a registration body. A body that is not a JSON
// object, or a field chatd reads holding a value of another type, is
// invalid_client_metadata (RFC 7591 §3.2.2), said in chatd's words: the
// field and the type it takes, every such field at once.
func readClientMetadata(raw []byte) (*clientMetadata, error) {
	refuse := func(format string, args ...any) error {
		return errorf(errorCode(store.CodeInvalidClientMetadata), format, args...)
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return nil, refuse("the body is not JSON: %s (at byte %d)", syntax.Error(), syntax.Offset)
		}
		if errors.Is(err, io.EOF) {
			return nil, refuse("the body is empty: it must be the client metadata, a JSON object")
		}
		return nil, refuse("the body is not JSON: it ends before the value does")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, refuse("the body must hold one JSON object, the client metadata, and nothing after it")
	}
	if _, ok := generic.(map[string]any); !ok {
		return nil, refuse("the body must be a JSON object: the client metadata")
	}
	var meta clientMetadata
	wrongType := store.Problems{}
	checkShape(generic, reflect.TypeOf(meta), "", store.Problems{}, wrongType)
	if len(wrongType) > 0 {
		var fields []string
		for pointer := range wrongType {
			field, _, _ := strings.Cut(strings.TrimPrefix(pointer, "/"), "/")
			if !slices.Contains(fields, field) {
				fields = append(fields, field)
			}
		}
		slices.Sort(fields)
		msgs := make([]string, len(fields))
		for i, f := range fields {
			msgs[i] = f + " must be " + clientMetadataTypes[f]
		}
		return nil, refuse("%s", strings.Join(msgs, "; "))
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, err // checkShape saw to every value json refuses: a bug
	}
	return &meta, nil
}

// registerOAuthClient is POST /oauth/register: 201 with the client's id.
func (s *Server) registerOAuthClient(w http.ResponseWriter, r *http.Request) error {
	raw, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	meta, err := readClientMetadata(raw)
	if err != nil {
		return err
	}
	if err := checkRegisteredTypes(meta); err != nil {
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
func checkRegisteredTypes(meta *clientMetadata) error {
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
