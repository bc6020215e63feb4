package server

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// OAuth sign-in for MCP clients, as the MCP authorization specification
// (2025-06-18 and 2025-11-25) has a remote client discover and use it: the
// client meets /mcp's 401 and its WWW-Authenticate header, reads the
// protected-resource metadata (RFC 9728) and the authorization server's
// (RFC 8414), registers itself (RFC 7591), sends the person's browser to
// /oauth/authorize with a PKCE challenge (S256 only) and the /mcp URL as
// its resource (RFC 8707), and trades the code for tokens at /oauth/token;
// refresh tokens rotate, and /oauth/revoke (RFC 7009) signs it out. The
// person consents in the web app (#/oauth/…, through the Human API routes
// of oauth_authorize.go), choosing whom the client acts as: one of their
// agents (the agent tools) or themselves (the human tools). The tokens work
// on /mcp only (auth.go says why); the person lists and revokes their
// grants like their keys, and a revocation closes the MCP sessions the
// grant opened within a second (credentials.go).
//
// The libraries. The MCP Go SDK (already linked) gives the metadata and
// registration types (oauthex) and serves the protected-resource document
// (auth.ProtectedResourceMetadataHandler); golang.org/x/oauth2 (linked
// through it) computes PKCE's S256 challenge. For the token endpoint two
// server libraries were measured against chatd's binary (go build -trimpath
// -ldflags=-s; 21.1 MiB and 27 linked modules before):
//
//   - github.com/ory/fosite v0.49.0: complete and careful (PKCE, refresh
//     rotation with reuse detection, RFC 7009), but +7.2 MiB (28.7 MiB,
//     +34%) and +48 linked modules (75; the module graph 73 → 501):
//     gRPC, OpenTelemetry with its Jaeger, Zipkin and OTLP exporters,
//     gobuffalo/pop, logrus, ristretto, pulled by fosite's core through
//     ory/x, so leaving its compose package out does not shed them. Its
//     storage contract is some fifteen methods persisting whole serialized
//     requests (client, session, form).
//   - github.com/go-oauth2/oauth2/v4 v4.5.4: +94 KB and one module, with
//     authorization code, PKCE and refresh. It has no RFC 7009, 7591, 8414,
//     9728 or 8707, and what it has fits badly: its manager compares and
//     removes tokens by their raw value (chatd keeps only digests), its
//     refresh grant never checks that the refresh token is the requesting
//     client's, rotation stores the new pair before it removes the old (two
//     racing refreshes both win), and it answers invalid_grant with 401
//     where RFC 6749 §5.2 says 400.
//
// Neither is used. What is hand-written is small and kept beside the store's
// single-write rules (store/oauth_*.go): form parsing and the error format
// here, the grant decisions there, each tested against the RFC's cases
// (server_oauth_test.go, store/oauth_test.go), and driven by both official
// SDKs' own OAuth clients (oauth_flow_test.go, e2e/mcp_oauth_test.go). The
// whole feature, consent screen and OpenAPI document included, costs the
// binary 0.2 MiB and no module. The endpoints answer in
// OAuth's error format ({"error", "error_description"}, RFC 6749 §5.2), not
// chatd's envelope: the clients that call them parse that one.

// oauthScope is the one scope chatd grants: access to /mcp as the
// consented principal. Other requested scopes are ignored (RFC 6749 §3.3),
// and the token response says what was granted.
const oauthScope = "mcp"

// oauthRoutes registers the OAuth endpoints: the discovery documents and
// the protocol endpoints are public (they answer in OAuth's error format);
// the consent and the grants are the Human API's.
func (s *Server) oauthRoutes() {
	s.handle("GET", "/.well-known/oauth-protected-resource", public, s.protectedResourceMetadata)
	s.handle("GET", "/.well-known/oauth-protected-resource/mcp", public, s.protectedResourceMetadata)
	s.handle("GET", "/.well-known/oauth-authorization-server", public, s.authorizationServerMetadata)
	s.handle("POST", "/oauth/register", public, s.oauthEndpoint(s.registerOAuthClient))
	s.handle("GET", "/oauth/authorize", public, s.oauthEndpoint(s.oauthAuthorize))
	s.handle("POST", "/oauth/token", public, s.oauthEndpoint(s.oauthToken))
	s.handle("POST", "/oauth/revoke", public, s.oauthEndpoint(s.oauthRevoke))
	s.handle("GET", "/api/v1/me/oauth/authorization", humansOnly, s.oauthConsentRequest)
	s.handle("POST", "/api/v1/me/oauth/authorization", humansOnly, withBody(s, s.oauthConsent))
	s.handle("GET", "/api/v1/me/oauth/grants", humansOnly, s.listOAuthGrants)
	s.handle("DELETE", "/api/v1/me/oauth/grants/:id", humansOnly, s.revokeOAuthGrant)
}

// publicBase is the URL clients reach chatd at: Config.PublicURL, or else
// the scheme and host this request came to. Behind a TLS reverse proxy the
// operator sets --public-url, since what the proxy forwards says http.
func (s *Server) publicBase(r *http.Request) string {
	if s.publicURL != "" {
		return s.publicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// mcpResource is the resource OAuth tokens are for (RFC 8707): the /mcp URL.
func (s *Server) mcpResource(r *http.Request) string { return s.publicBase(r) + "/mcp" }

// protectedResourceMetadataURL is where /mcp's 401 points clients: the
// document for the /mcp resource (RFC 9728 §3.1).
func (s *Server) protectedResourceMetadataURL(r *http.Request) string {
	return s.publicBase(r) + "/.well-known/oauth-protected-resource/mcp"
}

// challengeMCPClient tells an MCP client refused for its credentials where
// to learn how to sign in (RFC 9728 §5.1), and, when it sent a bearer
// token, that the token is no good (RFC 6750 §3.1). The answer stays in
// chatd's envelope.
func (s *Server) challengeMCPClient(w http.ResponseWriter, r *http.Request) {
	challenge := fmt.Sprintf("Bearer resource_metadata=%q, scope=%q", s.protectedResourceMetadataURL(r), oauthScope)
	if r.Header.Get("Authorization") != "" {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
}

// protectedResourceMetadata serves RFC 9728's document for /mcp, at its own
// well-known URL and at the root one that clients probe last: chatd has one
// protected resource, so both describe it.
func (s *Server) protectedResourceMetadata(w http.ResponseWriter, r *http.Request) error {
	auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               s.mcpResource(r),
		AuthorizationServers:   []string{s.publicBase(r)},
		ScopesSupported:        []string{oauthScope},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "chatd MCP",
		ResourceDocumentation:  s.publicBase(r) + "/docs/api",
	}).ServeHTTP(w, r)
	return nil
}

// authorizationServerMetadata is RFC 8414's document. Only what chatd does
// is listed: public clients (no secret; PKCE S256 is what binds a code to
// its client), codes and refresh tokens, and the iss parameter of RFC 9207
// on every authorization response.
type authorizationServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	ResponseModesSupported            []string `json:"response_modes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	RevocationAuthMethodsSupported    []string `json:"revocation_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ServiceDocumentation              string   `json:"service_documentation"`
	IssParameterSupported             bool     `json:"authorization_response_iss_parameter_supported"`
}

func (s *Server) authorizationServerMetadata(w http.ResponseWriter, r *http.Request) error {
	base := s.publicBase(r)
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, authorizationServerMetadata{
		Issuer:                            base,
		AuthorizationEndpoint:             base + "/oauth/authorize",
		TokenEndpoint:                     base + "/oauth/token",
		RegistrationEndpoint:              base + "/oauth/register",
		RevocationEndpoint:                base + "/oauth/revoke",
		ScopesSupported:                   []string{oauthScope},
		ResponseTypesSupported:            []string{"code"},
		ResponseModesSupported:            []string{"query"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethodsSupported: []string{"none"},
		RevocationAuthMethodsSupported:    []string{"none"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		ServiceDocumentation:              base + "/docs/api",
		IssParameterSupported:             true,
	})
	return nil
}

// grantedScope is the scope a request is granted, whatever it asked for.
func grantedScope(string) string { return oauthScope }

// withQuery is uri with params added to its query (its own kept).
func withQuery(uri string, params url.Values) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	q := u.Query()
	for k, vs := range params {
		for _, v := range vs {
			if v != "" {
				q.Set(k, v)
			}
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// oauthResourceProblem is why resource is not /mcp's, or "". A trailing
// slash is forgiven (oauthex.MatchesResource), as clients differ on it.
func (s *Server) oauthResourceProblem(r *http.Request, resource string) string {
	if resource == "" || oauthex.MatchesResource([]string{resource}, s.mcpResource(r)) {
		return ""
	}
	return "resource must be this server's MCP endpoint, " + s.mcpResource(r)
}
