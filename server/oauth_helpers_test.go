package server

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// What the OAuth tests share: a client registered through the API, a PKCE
// pair, the browser's part of an authorization (following /oauth/authorize
// to the consent screen's link and answering the consent as a person), and
// form requests to the token and revocation endpoints.

const testRedirectURI = "http://127.0.0.1:5000/callback"

// formBody sends a request's body as a form.
func formBody(c cred) cred {
	return func(h http.Header) {
		c(h)
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
}

// basicAuth authenticates a form request with HTTP Basic as user and
// password.
func basicAuth(user, password string) cred {
	return formBody(func(h http.Header) {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
	})
}

// registerClient registers a client whose one redirect URI is
// testRedirectURI, and returns its id.
func (ts *testServer) registerClient(t testing.TB) string {
	t.Helper()
	r := ts.do(t, "POST", "/oauth/register", noCred, map[string]any{"client_name": "Test client",
		"redirect_uris": []string{testRedirectURI}, "token_endpoint_auth_method": "none"})
	expect(t, r, 201, "")
	return r.json(t)["client_id"].(string)
}

// pkce is a PKCE verifier and its S256 challenge.
type pkce struct{ verifier, challenge string }

func newPKCE() pkce {
	v := oauth2.GenerateVerifier()
	return pkce{v, oauth2.S256ChallengeFromVerifier(v)}
}

// authorization is an authorization request's parameters for clientID.
func (ts *testServer) authorization(clientID string, p pkce) url.Values {
	return url.Values{"client_id": {clientID}, "redirect_uri": {testRedirectURI}, "response_type": {"code"},
		"code_challenge": {p.challenge}, "code_challenge_method": {"S256"}, "state": {"xyz"}, "scope": {"mcp"},
		"resource": {ts.http.URL + "/mcp"}}
}

// authorize sends GET /oauth/authorize as a browser would, without
// following its redirect, and returns the answer (checked as do checks).
func (ts *testServer) authorize(t testing.TB, q url.Values) *response {
	t.Helper()
	client := *ts.http.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	path := "/oauth/authorize?" + q.Encode()
	res, err := client.Get(ts.http.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := &response{status: res.StatusCode, header: res.Header, body: b}
	ts.checkResponse(t, "GET", "/oauth/authorize", r)
	return r
}

// consentLink follows /oauth/authorize to the consent screen and returns
// the request its link carries.
func (ts *testServer) consentLink(t testing.TB, q url.Values) url.Values {
	t.Helper()
	r := ts.authorize(t, q)
	expect(t, r, 302, "")
	loc := r.header.Get("Location")
	link, ok := strings.CutPrefix(loc, "/#/oauth/")
	if !ok {
		t.Fatalf("authorize redirected to %q, not the consent screen", loc)
	}
	raw, err := url.PathUnescape(link)
	if err != nil {
		t.Fatal(err)
	}
	req, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// consentBody is the consent screen's answer to request: approve (as
// agentID, or the person when ""), or decline.
func consentBody(request url.Values, agentID string, approve bool) map[string]any {
	a := map[string]any{"approve": approve}
	for k := range request {
		a[k] = request.Get(k)
	}
	if agentID != "" {
		a["agent_id"] = agentID
	}
	return map[string]any{"authorization": a}
}

// consent answers request as the person of c, approving for agentID ("":
// the person), and returns where the browser is sent.
func (ts *testServer) consent(t testing.TB, c cred, request url.Values, agentID string) *url.URL {
	t.Helper()
	r := ts.do(t, "POST", "/api/v1/me/oauth/authorization", c, consentBody(request, agentID, true))
	expect(t, r, 201, "")
	u, err := url.Parse(r.data(t)["redirect_to"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// code runs the browser's part for clientID as the person of c, for
// agentID, and returns the code the client receives.
func (ts *testServer) code(t testing.TB, c cred, clientID string, p pkce, agentID string) string {
	t.Helper()
	back := ts.consent(t, c, ts.consentLink(t, ts.authorization(clientID, p)), agentID)
	if back.Query().Get("state") != "xyz" || back.Query().Get("iss") != ts.http.URL {
		t.Fatalf("the authorization response %s lacks the state or the issuer", back)
	}
	return back.Query().Get("code")
}

// tokenRequest posts form to the token endpoint.
func (ts *testServer) tokenRequest(t testing.TB, form url.Values) *response {
	t.Helper()
	return ts.do(t, "POST", "/oauth/token", formBody(noCred), form.Encode())
}

// exchangeForm is the token request that spends code.
func (ts *testServer) exchangeForm(clientID, code string, p pkce) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code},
		"redirect_uri": {testRedirectURI}, "code_verifier": {p.verifier}, "resource": {ts.http.URL + "/mcp"}}
}

// signedIn is a client signed in for a person: its tokens.
type signedIn struct {
	clientID, access, refresh string
}

// oauthSignIn registers a client and signs it in as the person of c, acting
// as agentID ("" for the person).
func (ts *testServer) oauthSignIn(t testing.TB, c cred, agentID string) signedIn {
	t.Helper()
	clientID := ts.registerClient(t)
	p := newPKCE()
	r := ts.tokenRequest(t, ts.exchangeForm(clientID, ts.code(t, c, clientID, p, agentID), p))
	expect(t, r, 200, "")
	body := r.json(t)
	return signedIn{clientID: clientID, access: body["access_token"].(string), refresh: body["refresh_token"].(string)}
}
