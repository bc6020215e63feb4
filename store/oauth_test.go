package store

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The OAuth rules the HTTP tests cannot reach or pin down as closely: which
// redirect URIs a client may register and use, the bound on registered
// clients, and a grant's life: exchange, rotation, reuse, revocation, and
// its agent's deletion.

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

const testVerifier = "a-verifier-of-more-than-forty-three-characters-0123456789"

func TestOAuthRedirectURIs(t *testing.T) {
	for _, tc := range []struct {
		uri string
		ok  bool
	}{
		{"https://app.example/callback", true},
		{"https://app.example/callback?tenant=1", true},
		{"http://127.0.0.1:33418/callback", true},
		{"http://[::1]/cb", true},
		{"http://localhost:8000/oauth/callback", true},
		{"http://app.example/callback", false},
		{"http://192.168.1.5/callback", false},
		{"https://app.example/callback#frag", false},
		{"https://user:pw@app.example/callback", false},
		{"cursor://anysphere.cursor-retrieval/oauth", false},
		{"/callback", false},
		{"javascript:alert(1)", false},
		{"https://" + strings.Repeat("a", MaxOAuthURILen) + ".example/", false},
		{"http://127.0.0.1:65535/callback", true},
		{"http://127.0.0.1:1/callback", true},
		{"http://127.0.0.1:99999/callback", false},
		{"http://127.0.0.1:65536/callback", false},
		{"http://[::1]:0/callback", false},
		{"http://127.0.0.1:abc/callback", false},
		{"http://127.0.0.1:-1/callback", false},
		{"https://app.example:70000/callback", false},
	} {
		if got := redirectURIProblem(tc.uri) == ""; got != tc.ok {
			t.Errorf("redirectURIProblem(%q) accepts: %v, want %v", tc.uri, got, tc.ok)
		}
	}

	c := &OAuthClient{RedirectURIs: []string{"http://127.0.0.1:1234/cb", "https://app.example/cb"}}
	for _, tc := range []struct {
		uri string
		ok  bool
	}{
		{"http://127.0.0.1:1234/cb", true},
		{"http://127.0.0.1:5678/cb", true}, // a loopback listener picks its port (RFC 8252 §7.3)
		{"http://127.0.0.1/cb", true},
		{"http://127.0.0.1:5678/other", false},
		{"http://127.0.0.1:5678/cb?x=1", false},
		{"http://localhost:1234/cb", false},
		{"https://app.example/cb", true},
		{"https://app.example:8443/cb", false},
		{"https://app.example/cb/", false},
		{"http://127.0.0.1:65535/cb", true},
		{"http://127.0.0.1:99999/cb", false},
		{"http://127.0.0.1:0/cb", false},
		{"http://127.0.0.1:x/cb", false},
	} {
		if got := c.AllowsRedirect(tc.uri); got != tc.ok {
			t.Errorf("AllowsRedirect(%q) = %v, want %v", tc.uri, got, tc.ok)
		}
	}
	// One registered before ports were checked is no redirect URI either.
	old := &OAuthClient{RedirectURIs: []string{"http://127.0.0.1:99999/cb"}}
	if old.AllowsRedirect("http://127.0.0.1:99999/cb") {
		t.Error("a registered redirect URI with port 99999 is allowed")
	}
}

// Registration needs no credential, so the clients are bounded; at the
// bound, clients registered over a day ago and never used make room.
func TestOAuthClientsAreBounded(t *testing.T) {
	db := openTestDB(t, Options{})
	ctx := context.Background()
	old := time.Now().Add(-48 * time.Hour).UnixMicro()
	if err := db.Write(ctx, func(tx *Tx) error {
		for i := range MaxOAuthClients {
			inserted := time.Now().UnixMicro()
			if i < 10 {
				inserted = old // abandoned registrations
			}
			if _, err := tx.Exec(`INSERT INTO oauth_clients (id, name, redirect_uris, inserted_at) VALUES (?, 'c', '[]', ?)`,
				newID(), inserted); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	nc := NewOAuthClient{Name: "Claude Code", RedirectURIs: []string{"http://localhost:5000/callback"}}
	if _, err := db.RegisterOAuthClient(ctx, nc); err != nil {
		t.Fatalf("at the bound with abandoned clients: %v", err)
	}
	if n := rawCount(t, db, `SELECT count(*) FROM oauth_clients`); n != MaxOAuthClients-10+1 {
		t.Fatalf("%d clients after the abandoned ones made room, want %d", n, MaxOAuthClients-9)
	}
	for range 9 {
		if _, err := db.RegisterOAuthClient(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	_, err := db.RegisterOAuthClient(ctx, nc)
	wantCode(t, err, CodeLimitReached)
}

// oauthWorld is a database with alice, her agent helper and a registered
// client.
type oauthWorld struct {
	db     *DB
	alice  *User
	helper *Agent
	client *OAuthClient
	rec    *recorder
}

func newOAuthWorld(t *testing.T) *oauthWorld {
	t.Helper()
	w := &oauthWorld{db: openTestDB(t, Options{})}
	w.alice, _ = mustUser(t, w.db, "alice")
	w.helper, _ = mustAgent(t, w.db, w.alice, "Helper")
	var err error
	w.client, err = w.db.RegisterOAuthClient(context.Background(),
		NewOAuthClient{Name: "Claude Code", RedirectURIs: []string{"http://127.0.0.1:5000/callback"}})
	if err != nil {
		t.Fatal(err)
	}
	w.rec = record(w.db)
	return w
}

// signIn runs a consent for agentID ("" for alice herself) and exchanges
// its code.
func (w *oauthWorld) signIn(t *testing.T, agentID string) *OAuthTokens {
	t.Helper()
	ctx := context.Background()
	code, err := w.db.AuthorizeOAuthClient(ctx, w.alice, OAuthAuthorization{ClientID: w.client.ID,
		RedirectURI: "http://127.0.0.1:5000/callback", CodeChallenge: s256(testVerifier), Scope: "mcp",
		Resource: "http://chatd.test/mcp", AgentID: agentID})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := w.db.ExchangeOAuthCode(ctx, OAuthCodeExchange{ClientID: w.client.ID, Code: code,
		RedirectURI: "http://127.0.0.1:5000/callback", Challenge: s256(testVerifier)})
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

func (w *oauthWorld) refresh(refresh string) (*OAuthTokens, error) {
	return w.db.RefreshOAuthTokens(context.Background(), OAuthRefresh{ClientID: w.client.ID, RefreshToken: refresh})
}

// works reports whether an access token authenticates, and as whom.
func (w *oauthWorld) works(t *testing.T, access string) string {
	t.Helper()
	p, err := w.db.AuthenticateOAuth(context.Background(), access)
	switch {
	case ErrorCode(err) == CodeUnauthorized:
		return "refused"
	case err != nil:
		t.Fatal(err)
	case p.Agent != nil:
		return "agent " + p.Agent.Handle
	}
	return "person " + p.User.Handle
}

func TestOAuthGrantLife(t *testing.T) {
	w := newOAuthWorld(t)
	first := w.signIn(t, w.helper.ID)
	if got := w.works(t, first.Access); got != "agent alice/helper" {
		t.Fatalf("the access token works as %s", got)
	}
	if got := w.works(t, first.Refresh); got != "refused" {
		t.Fatalf("a refresh token works as an access token: %s", got)
	}

	second, err := w.refresh(first.Refresh)
	if err != nil {
		t.Fatal(err)
	}
	if second.GrantID != first.GrantID || second.Access == first.Access || second.Refresh == first.Refresh {
		t.Fatalf("refresh gave %+v after %+v", second, first)
	}
	if w.works(t, first.Access) != "agent alice/helper" || w.works(t, second.Access) != "agent alice/helper" {
		t.Fatal("the access tokens of a grant stop working when it is refreshed")
	}

	// The spent refresh token comes back: it leaked. The grant ends.
	w.rec.reset()
	_, err = w.refresh(first.Refresh)
	wantCode(t, err, CodeInvalidGrant)
	if got := w.rec.kinds(); fmt.Sprint(got) != "[credentials_ended]" {
		t.Fatalf("reuse published %v", got)
	}
	if w.works(t, second.Access) != "refused" {
		t.Fatal("the grant's newest access token works after its refresh token was reused")
	}
	_, err = w.refresh(second.Refresh)
	wantCode(t, err, CodeInvalidGrant)
	ended, err := w.db.EndedCredentials(context.Background(), HeldCredentials{Grants: []string{first.GrantID}})
	if err != nil || !ended[first.GrantID] {
		t.Fatalf("EndedCredentials = %v, %v; want the grant ended", ended, err)
	}
}

// A code works once; its second use revokes what the first obtained.
func TestOAuthCodeReuseRevokesTheGrant(t *testing.T) {
	w := newOAuthWorld(t)
	ctx := context.Background()
	code, err := w.db.AuthorizeOAuthClient(ctx, w.alice, OAuthAuthorization{ClientID: w.client.ID,
		RedirectURI: "http://127.0.0.1:5000/callback", CodeChallenge: s256(testVerifier), Scope: "mcp", Resource: "r"})
	if err != nil {
		t.Fatal(err)
	}
	x := OAuthCodeExchange{ClientID: w.client.ID, Code: code, RedirectURI: "http://127.0.0.1:5000/callback", Challenge: s256(testVerifier)}
	tokens, err := w.db.ExchangeOAuthCode(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.works(t, tokens.Access); got != "person alice" {
		t.Fatalf("the token works as %s, want alice herself", got)
	}
	_, err = w.db.ExchangeOAuthCode(ctx, x)
	wantCode(t, err, CodeInvalidGrant)
	if w.works(t, tokens.Access) != "refused" {
		t.Fatal("the tokens of a reused code still work")
	}
}

// Deleting the agent a grant acts as ends the grant's tokens, and takes it
// off the person's list.
func TestOAuthGrantOfADeletedAgent(t *testing.T) {
	w := newOAuthWorld(t)
	ctx := context.Background()
	tokens := w.signIn(t, w.helper.ID)
	self := w.signIn(t, "")
	if list, err := w.db.ListOAuthGrants(ctx, w.alice); err != nil || len(list) != 2 {
		t.Fatalf("grants %v, %v", list, err)
	}
	if _, err := w.db.DeleteAgent(ctx, w.alice, w.helper.ID, true); err != nil {
		t.Fatal(err)
	}
	if w.works(t, tokens.Access) != "refused" {
		t.Fatal("a deleted agent's token works")
	}
	_, err := w.refresh(tokens.Refresh)
	wantCode(t, err, CodeInvalidGrant)
	list, err := w.db.ListOAuthGrants(ctx, w.alice)
	if err != nil || len(list) != 1 || list[0].ID != self.GrantID {
		t.Fatalf("grants after the agent's deletion: %v, %v", list, err)
	}
	if err := w.db.RevokeOAuthGrant(ctx, w.alice, self.GrantID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, w.db.RevokeOAuthGrant(ctx, w.alice, self.GrantID), CodeNotFound)
	if w.works(t, self.Access) != "refused" {
		t.Fatal("a revoked grant's token works")
	}
}

// RFC 7009: a client revokes its own tokens' grant; another client's token,
// or an unknown one, is answered alike and changes nothing.
func TestRevokeOAuthToken(t *testing.T) {
	w := newOAuthWorld(t)
	ctx := context.Background()
	tokens := w.signIn(t, "")
	other, err := w.db.RegisterOAuthClient(ctx, NewOAuthClient{RedirectURIs: []string{"https://other.example/cb"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.db.RevokeOAuthToken(ctx, other.ID, tokens.Refresh); err != nil {
		t.Fatal(err)
	}
	if err := w.db.RevokeOAuthToken(ctx, w.client.ID, "band_or_unknown"); err != nil {
		t.Fatal(err)
	}
	if w.works(t, tokens.Access) != "person alice" {
		t.Fatal("another client revoked the grant")
	}
	wantCode(t, w.db.RevokeOAuthToken(ctx, newID(), tokens.Refresh), CodeInvalidClient)
	if err := w.db.RevokeOAuthToken(ctx, w.client.ID, tokens.Access); err != nil {
		t.Fatal(err)
	}
	if w.works(t, tokens.Access) != "refused" {
		t.Fatal("a revoked access token works")
	}
	_, err = w.refresh(tokens.Refresh)
	wantCode(t, err, CodeInvalidGrant)
}

// What has ended is not kept: a revoked grant's tokens go at once, and a
// person's ended grants when they sign a client in again.
func TestEndedOAuthGrantsAreDropped(t *testing.T) {
	w := newOAuthWorld(t)
	ctx := context.Background()
	first := w.signIn(t, "")
	if err := w.db.RevokeOAuthGrant(ctx, w.alice, first.GrantID); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, w.db, `SELECT count(*) FROM oauth_tokens WHERE grant_id = ?`, first.GrantID); n != 0 {
		t.Fatalf("%d tokens of a revoked grant are kept", n)
	}
	w.signIn(t, "")
	if n := rawCount(t, w.db, `SELECT count(*) FROM oauth_grants WHERE id = ?`, first.GrantID); n != 0 {
		t.Fatal("a revoked grant is kept after the next sign-in")
	}
	if n := rawCount(t, w.db, `SELECT count(*) FROM oauth_grants`); n != 1 {
		t.Fatalf("%d grants, want the live one", n)
	}
}

// seedOAuthGrants gives alice n live grants of the world's client, written
// directly (as a database from before a rule would hold them).
func (w *oauthWorld) seedOAuthGrants(t *testing.T, n int) {
	t.Helper()
	now := time.Now()
	if err := w.db.Write(context.Background(), func(tx *Tx) error {
		for range n {
			if _, err := tx.Exec(`INSERT INTO oauth_grants (id, client_id, user_id, scope, resource, inserted_at, expires_at)
				VALUES (?, ?, ?, 'mcp', 'r', ?, ?)`, newID(), w.client.ID, w.alice.ID, now.UnixMicro(),
				now.Add(OAuthRefreshTTL).UnixMicro()); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The limit on a person's grants holds when codes are redeemed, not only
// when they are given: with 99 grants and 20 codes waiting (issued before
// the consent counted waiting codes), the first redemption makes 100 and
// every other is refused as invalid_grant, the code left unspent and the
// database as it was; once the person signs an app out, a refused code is
// redeemed.
func TestOAuthGrantLimitAtRedemption(t *testing.T) {
	w := newOAuthWorld(t)
	ctx := context.Background()
	w.seedOAuthGrants(t, MaxOAuthGrantsPerUser-1)
	codes := make([]string, maxPendingOAuthCodes)
	if err := w.db.Write(ctx, func(tx *Tx) error {
		for i := range codes {
			codes[i] = mintOAuthSecret(oauthCodePrefix)
			if _, err := tx.Exec(`INSERT INTO oauth_codes (digest, client_id, user_id, redirect_uri, code_challenge, scope, resource,
				expires_at) VALUES (?, ?, ?, ?, ?, 'mcp', 'r', ?)`, keyDigest(codes[i]), w.client.ID, w.alice.ID,
				"http://127.0.0.1:5000/callback", s256(testVerifier), time.Now().Add(OAuthCodeTTL).UnixMicro()); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	exchange := func(code string) (*OAuthTokens, error) {
		return w.db.ExchangeOAuthCode(ctx, OAuthCodeExchange{ClientID: w.client.ID, Code: code,
			RedirectURI: "http://127.0.0.1:5000/callback", Challenge: s256(testVerifier)})
	}
	live := func() int {
		list, err := w.db.ListOAuthGrants(ctx, w.alice)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	var first *OAuthTokens
	for i, code := range codes {
		before := rawCount(t, w.db, `SELECT count(*) FROM oauth_codes WHERE used_at IS NULL`)
		tokens, err := exchange(code)
		switch {
		case i == 0 && err != nil:
			t.Fatalf("the code that makes the 100th grant: %v", err)
		case i == 0:
			first = tokens
		default:
			wantCode(t, err, CodeInvalidGrant)
			if !strings.Contains(err.Error(), "sign one out") {
				t.Fatalf("refused with %q", err)
			}
			if after := rawCount(t, w.db, `SELECT count(*) FROM oauth_codes WHERE used_at IS NULL`); after != before {
				t.Fatalf("a refused redemption spent a code: %d unused, then %d", before, after)
			}
		}
		if n := live(); n != MaxOAuthGrantsPerUser {
			t.Fatalf("after redemption %d: %d live grants, want %d", i+1, n, MaxOAuthGrantsPerUser)
		}
	}
	if err := w.db.RevokeOAuthGrant(ctx, w.alice, first.GrantID); err != nil {
		t.Fatal(err)
	}
	if _, err := exchange(codes[1]); err != nil {
		t.Fatalf("a refused code after a sign-out: %v", err)
	}
	if n := live(); n != MaxOAuthGrantsPerUser {
		t.Fatalf("%d live grants, want %d", n, MaxOAuthGrantsPerUser)
	}
}

// At consent, the codes waiting count with the live grants: a person at
// 99 grants gets one more code, not twenty. Grants the person cannot see
// (their agent deleted) do not count.
func TestOAuthConsentCountsWaitingCodes(t *testing.T) {
	w := newOAuthWorld(t)
	ctx := context.Background()
	w.signIn(t, w.helper.ID)
	w.seedOAuthGrants(t, MaxOAuthGrantsPerUser-2)
	consent := func() error {
		_, err := w.db.AuthorizeOAuthClient(ctx, w.alice, OAuthAuthorization{ClientID: w.client.ID,
			RedirectURI: "http://127.0.0.1:5000/callback", CodeChallenge: s256(testVerifier), Scope: "mcp", Resource: "r"})
		return err
	}
	if err := consent(); err != nil {
		t.Fatalf("the consent for the 100th: %v", err)
	}
	wantCode(t, consent(), CodeLimitReached)
	if n := rawCount(t, w.db, `SELECT count(*) FROM oauth_codes WHERE used_at IS NULL`); n != 1 {
		t.Fatalf("%d codes waiting, want 1", n)
	}
	if _, err := w.db.DeleteAgent(ctx, w.alice, w.helper.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := consent(); err != nil {
		t.Fatalf("a consent after a grant's agent was deleted: %v", err)
	}
}
