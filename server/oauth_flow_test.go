package server

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/chatd/chatd/store"
)

// The whole sign-in as a real client does it: the official Go SDK's MCP
// client, with the SDK's own OAuth handler, meets /mcp's 401, discovers the
// metadata, registers, has the browser authorize (the test plays the
// browser and the person signed in to the web app, who picks their agent),
// exchanges the code, and calls whoami as that agent. Revoking the grant
// in the person's list then ends the session within about a second, and
// the tokens with it.
func TestOAuthSignInWithTheGoSDK(t *testing.T) {
	w := newMCPWorld(t)
	ts := w.ts
	session := bearer(ts.signInToken(t, w.alice))

	browser := &playedBrowser{ts: ts, t: t, person: session, agentID: w.helper.ID}
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "Go SDK test", RedirectURIs: []string{testRedirectURI}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}}},
		AuthorizationCodeFetcher: browser.authorize,
		Client:                   ts.http.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "chatd-oauth-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.http.URL + "/mcp",
		HTTPClient: ts.http.Client(), OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatalf("connect with OAuth: %v", err)
	}
	defer cs.Close()
	if browser.visits != 1 {
		t.Fatalf("the browser was sent to authorize %d times, want once", browser.visits)
	}
	if me := toolOK(t, cs, "whoami", nil)["agent"].(map[string]any); me["id"] != w.helper.ID {
		t.Fatalf("whoami = %v, want the agent the person chose", me)
	}

	grants := ts.do(t, "GET", "/api/v1/me/oauth/grants", session, nil)
	expect(t, grants, 200, "")
	list := grants.list(t)
	if len(list) != 1 || list[0].(map[string]any)["agent_handle"] != w.helper.Handle || list[0].(map[string]any)["client_name"] != "Go SDK test" {
		t.Fatalf("grants = %v", list)
	}
	grantID := list[0].(map[string]any)["id"].(string)

	waiting := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait_for_message",
			Arguments: map[string]any{"timeout_seconds": 60}})
		waiting <- err
	}()
	time.Sleep(200 * time.Millisecond)
	browser.closed = true // a second sign-in is not wanted
	revoked := time.Now()
	expect(t, ts.doNoContent(t, "DELETE", "/api/v1/me/oauth/grants/"+grantID, session), 204, "")
	select {
	case <-waiting:
		t.Logf("the session ended %v after the revocation", time.Since(revoked).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("the MCP session outlived its grant")
	}
	token, err := handler.TokenSource(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := token.Token()
	if err != nil {
		t.Fatal(err)
	}
	expect(t, ts.do(t, "POST", "/mcp", bearer(tok.AccessToken), `{}`), 401, "unauthorized")
}

// signInToken signs u in as the web app does and returns the session's
// bearer token.
func (ts *testServer) signInToken(t testing.TB, u *store.User) string {
	t.Helper()
	const password = "correct horse battery staple"
	if err := ts.db.SetPassword(context.Background(), u.ID, password); err != nil {
		t.Fatal(err)
	}
	r := ts.do(t, "POST", "/api/v1/auth/sign-in", noCred, map[string]any{"handle": u.Handle, "password": password})
	expect(t, r, 200, "")
	return r.data(t)["access_token"].(string)
}

// playedBrowser is the person's browser: it opens the authorization URL,
// lands on the web app's consent screen, and answers it as the person,
// choosing agentID; then it reads the code from where the client is sent.
type playedBrowser struct {
	ts      *testServer
	t       testing.TB
	person  cred
	agentID string
	visits  int
	closed  bool
}

func (b *playedBrowser) authorize(_ context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	if b.closed {
		return nil, errors.New("no more sign-ins")
	}
	b.visits++
	u, err := url.Parse(args.URL)
	if err != nil {
		return nil, err
	}
	back := b.ts.consent(b.t, b.person, b.ts.consentLink(b.t, u.Query()), b.agentID)
	q := back.Query()
	if q.Get("error") != "" {
		return nil, errors.New(q.Get("error_description"))
	}
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}
