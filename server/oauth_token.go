package server

import (
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/chatd/chatd/store"
)

// The token endpoint (RFC 6749 §3.2, §4.1.3, §6) and the revocation
// endpoint (RFC 7009). Both take a form (application/x-www-form-urlencoded)
// with each parameter once, from a public client naming itself by
// client_id (in the form, or as the user of HTTP Basic with an empty
// password). The store decides each grant in one write (store/oauth_tokens.go);
// this file reads the request and writes the answer, which is never cached
// (Cache-Control: no-store). A refused code, refresh token or client spends
// from the address's failed-authentication budget, as a bad key does.

// tokenResponse is a successful token response (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// readOAuthForm reads a form body within the body limit; a parameter sent
// twice is refused (RFC 6749 §3.1, §3.2).
func (s *Server) readOAuthForm(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return nil, errorf(codeOAuthInvalidRequest, "the body must be application/x-www-form-urlencoded")
	}
	raw, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return nil, errorf(codeOAuthInvalidRequest, "the body is not a form: %v", err)
	}
	for name, vs := range form {
		if len(vs) > 1 {
			return nil, errorf(codeOAuthInvalidRequest, "%s is repeated", name)
		}
	}
	return form, nil
}

// oauthClientID is the client a token or revocation request names: its
// client_id, or the user of HTTP Basic (with no password: chatd issues no
// secrets).
func oauthClientID(r *http.Request, form url.Values) (string, error) {
	id := form.Get("client_id")
	if user, pass, ok := r.BasicAuth(); ok {
		switch {
		case pass != "":
			return "", errorf(errorCode(store.CodeInvalidClient), "chatd's clients are public: they send no client secret")
		case id != "" && id != user:
			return "", errorf(codeOAuthInvalidRequest, "client_id differs from the client of the Authorization header")
		}
		id = user
	}
	if id == "" {
		return "", errorf(errorCode(store.CodeInvalidClient), "client_id is required")
	}
	return store.NormalizeID(id), nil
}

// oauthToken is POST /oauth/token.
func (s *Server) oauthToken(w http.ResponseWriter, r *http.Request) error {
	form, err := s.readOAuthForm(w, r)
	if err != nil {
		return err
	}
	var tokens *store.OAuthTokens
	err = s.underAuthFailureLimit(r, "oauth", func() error {
		clientID, err := oauthClientID(r, form)
		if err != nil {
			return err
		}
		switch gt := form.Get("grant_type"); gt {
		case "authorization_code":
			tokens, err = s.exchangeOAuthCode(r, form, clientID)
		case "refresh_token":
			tokens, err = s.refreshOAuthTokens(r, form, clientID)
		case "":
			err = errorf(codeOAuthInvalidRequest, "grant_type is required")
		default:
			err = errorf(codeOAuthUnsupportedGrantType, "grant_type must be authorization_code or refresh_token")
		}
		return err
	})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, tokenResponse{AccessToken: tokens.Access, TokenType: "Bearer",
		ExpiresIn: int(time.Until(tokens.AccessExpiresAt).Round(time.Second).Seconds()), RefreshToken: tokens.Refresh,
		Scope: tokens.Scope})
	return nil
}

// required reads parameters that must be there.
func required(form url.Values, names ...string) error {
	for _, name := range names {
		if form.Get(name) == "" {
			return errorf(codeOAuthInvalidRequest, "%s is required", name)
		}
	}
	return nil
}

// checkedResource is the request's resource when it names /mcp (the
// canonical URL, for the store to compare with the grant's), "" when it
// names none.
func (s *Server) checkedResource(r *http.Request, form url.Values) (string, error) {
	resource := form.Get("resource")
	if resource == "" {
		return "", nil
	}
	if msg := s.oauthResourceProblem(r, resource); msg != "" {
		return "", errorf(errorCode(store.CodeInvalidTarget), "%s", msg)
	}
	return s.mcpResource(r), nil
}

// exchangeOAuthCode is grant_type authorization_code: the verifier must be
// PKCE's (RFC 7636 §4.1), and its S256 challenge the code's.
func (s *Server) exchangeOAuthCode(r *http.Request, form url.Values, clientID string) (*store.OAuthTokens, error) {
	if err := required(form, "code", "redirect_uri", "code_verifier"); err != nil {
		return nil, err
	}
	verifier := form.Get("code_verifier")
	if !validCodeVerifier(verifier) {
		return nil, errorf(codeOAuthInvalidRequest, "code_verifier must be 43 to 128 letters, digits, '-', '.', '_' or '~'")
	}
	resource, err := s.checkedResource(r, form)
	if err != nil {
		return nil, err
	}
	return s.db.ExchangeOAuthCode(r.Context(), store.OAuthCodeExchange{ClientID: clientID, Code: form.Get("code"),
		RedirectURI: form.Get("redirect_uri"), Challenge: oauth2.S256ChallengeFromVerifier(verifier), Resource: resource})
}

// refreshOAuthTokens is grant_type refresh_token. A scope asked for is
// ignored: the grant's is all there is.
func (s *Server) refreshOAuthTokens(r *http.Request, form url.Values, clientID string) (*store.OAuthTokens, error) {
	if err := required(form, "refresh_token"); err != nil {
		return nil, err
	}
	resource, err := s.checkedResource(r, form)
	if err != nil {
		return nil, err
	}
	return s.db.RefreshOAuthTokens(r.Context(), store.OAuthRefresh{ClientID: clientID, RefreshToken: form.Get("refresh_token"),
		Resource: resource})
}

// validCodeVerifier reports whether v is a PKCE code verifier (RFC 7636 §4.1).
func validCodeVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	return !strings.ContainsFunc(v, func(c rune) bool {
		return !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~", c))
	})
}

// oauthRevoke is POST /oauth/revoke (RFC 7009): 200 with no body, whether
// the token was the client's and is now revoked or was never valid; the
// grant it belongs to ends, and every token of it.
func (s *Server) oauthRevoke(w http.ResponseWriter, r *http.Request) error {
	form, err := s.readOAuthForm(w, r)
	if err != nil {
		return err
	}
	err = s.underAuthFailureLimit(r, "oauth", func() error {
		clientID, err := oauthClientID(r, form)
		if err != nil {
			return err
		}
		if err := required(form, "token"); err != nil {
			return err
		}
		return s.db.RevokeOAuthToken(r.Context(), clientID, form.Get("token"))
	})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	return nil
}
