package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// OAuth clients: the MCP clients (Claude Code, an IDE, an SDK's client)
// that registered themselves with chatd's authorization server through
// dynamic client registration (RFC 7591). A client is public: it holds no
// secret, and what keeps a stolen code useless is PKCE (oauth_codes.go).
// Registration needs no credential, so the table is bounded: at
// MaxOAuthClients, clients registered more than a day ago that never
// obtained a code make room for new ones.

// OAuth client bounds.
const (
	MaxOAuthClients         = 1000
	MaxOAuthRedirectURIs    = 10
	MaxOAuthURILen          = 2000
	MaxOAuthClientNameLen   = 100
	unusedOAuthClientMaxAge = 24 * time.Hour
)

// OAuthClient is a registered client.
type OAuthClient struct {
	ID           string
	Name         string // "" when the client gave none
	URI          string // its home page, or ""
	RedirectURIs []string
	InsertedAt   time.Time
}

// NewOAuthClient is what a client registers.
type NewOAuthClient struct {
	Name         string
	URI          string
	RedirectURIs []string
}

// check refuses metadata chatd does not take, with RFC 7591's codes:
// invalid_redirect_uri for a redirect URI, invalid_client_metadata for the
// rest. Pointers name the registration request's fields.
func (nc *NewOAuthClient) check() error {
	redirects := Problems{}
	switch {
	case len(nc.RedirectURIs) == 0:
		redirects.Add("/redirect_uris", "must list at least one redirect URI")
	case len(nc.RedirectURIs) > MaxOAuthRedirectURIs:
		redirects.Add("/redirect_uris", "may list at most %d redirect URIs", MaxOAuthRedirectURIs)
	}
	for i, u := range nc.RedirectURIs {
		if msg := redirectURIProblem(u); msg != "" {
			redirects.Add(Pointer("redirect_uris", i), "%s", msg)
		}
	}
	if err := redirects.Err(CodeInvalidRedirectURI); err != nil {
		return err
	}
	other := Problems{}
	nc.Name = strings.TrimSpace(nc.Name)
	if utf8.RuneCountInString(nc.Name) > MaxOAuthClientNameLen || strings.ContainsFunc(nc.Name, unicode.IsControl) {
		other.Add("/client_name", "must be at most %d characters, without control characters", MaxOAuthClientNameLen)
	}
	if nc.URI != "" {
		if u, err := url.Parse(nc.URI); err != nil || len(nc.URI) > MaxOAuthURILen || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			other.Add("/client_uri", "must be an http or https URL of at most %d characters", MaxOAuthURILen)
		}
	}
	return other.Err(CodeInvalidClientMetadata)
}

// OAuthRedirectURIProblem says what is wrong with a redirect URI, or "":
// chatd takes https URLs, and http ones on a loopback host (a native
// client's own listener, RFC 8252 §7.3), absolute, without a fragment or
// user info, with no port or one from 1 to 65535. It holds for the URIs a
// client registers and for the one each authorization names.
func OAuthRedirectURIProblem(raw string) string { return redirectURIProblem(raw) }

func redirectURIProblem(raw string) string {
	if len(raw) > MaxOAuthURILen {
		return fmt.Sprintf("must be at most %d characters", MaxOAuthURILen)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil && strings.Contains(err.Error(), "invalid port"), err == nil && !validPort(u.Port()):
		return "must have no port or one from 1 to 65535"
	case err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "":
		return "must be an absolute URL"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not have a fragment"
	case u.User != nil:
		return "must not carry user information"
	case u.Scheme == "https":
		return ""
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return ""
	}
	return "must be https, or http on a loopback address (127.0.0.1, [::1] or localhost)"
}

// validPort reports whether port, as url.URL.Port gives it (digits or ""),
// is none or a TCP port: 1 to 65535. url.Parse takes any run of digits.
func validPort(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// AllowsRedirect reports whether uri is one of the client's redirect URIs:
// the same string, or, for an http loopback URI, the same but for the port,
// which a native client picks when it starts listening (RFC 8252 §7.3). A
// URI chatd would not register (a port past 65535, say) is none, whatever
// was registered before the rule.
func (c *OAuthClient) AllowsRedirect(uri string) bool {
	if redirectURIProblem(uri) != "" {
		return false
	}
	for _, registered := range c.RedirectURIs {
		if uri == registered || sameLoopbackRedirect(registered, uri) {
			return true
		}
	}
	return false
}

func sameLoopbackRedirect(registered, uri string) bool {
	r, err1 := url.Parse(registered)
	u, err2 := url.Parse(uri)
	if err1 != nil || err2 != nil || r.Scheme != "http" || u.Scheme != "http" || !isLoopbackHost(r.Hostname()) {
		return false
	}
	if r.Hostname() != u.Hostname() || u.User != nil || u.Fragment != "" {
		return false
	}
	return r.EscapedPath() == u.EscapedPath() && r.RawQuery == u.RawQuery
}

// RegisterOAuthClient registers a client.
func (db *DB) RegisterOAuthClient(ctx context.Context, nc NewOAuthClient) (*OAuthClient, error) {
	if err := nc.check(); err != nil {
		return nil, err
	}
	redirects, _ := json.Marshal(nc.RedirectURIs)
	var out *OAuthClient
	err := db.Write(ctx, func(tx *Tx) error {
		now := tx.Now()
		if err := makeRoomForOAuthClient(tx, now); err != nil {
			return err
		}
		c := &OAuthClient{ID: newID(), Name: nc.Name, URI: nc.URI, RedirectURIs: nc.RedirectURIs, InsertedAt: now}
		if _, err := tx.Exec(`INSERT INTO oauth_clients (id, name, uri, redirect_uris, inserted_at) VALUES (?, ?, ?, ?, ?)`,
			c.ID, c.Name, c.URI, string(redirects), now.UnixMicro()); err != nil {
			return err
		}
		out = c
		return nil
	})
	return out, err
}

// makeRoomForOAuthClient refuses a registration beyond MaxOAuthClients,
// after dropping the clients that were registered over a day ago and never
// got as far as a code: abandoned registrations, or a flood of them.
func makeRoomForOAuthClient(tx *Tx, now time.Time) error {
	count := func() (int, error) {
		var n int
		err := tx.QueryRow(`SELECT count(*) FROM oauth_clients`).Scan(&n)
		return n, err
	}
	n, err := count()
	if err != nil || n < MaxOAuthClients {
		return err
	}
	if _, err := tx.Exec(`DELETE FROM oauth_clients WHERE inserted_at < ? AND last_used_at IS NULL
		AND NOT EXISTS (SELECT 1 FROM oauth_codes WHERE client_id = oauth_clients.id)
		AND NOT EXISTS (SELECT 1 FROM oauth_grants WHERE client_id = oauth_clients.id)`,
		now.Add(-unusedOAuthClientMaxAge).UnixMicro()); err != nil {
		return err
	}
	if n, err = count(); err != nil || n < MaxOAuthClients {
		return err
	}
	return limitReached("registered OAuth clients", MaxOAuthClients, n)
}

const oauthClientColumns = `id, name, uri, redirect_uris, inserted_at`

func scanOAuthClient(row interface{ Scan(...any) error }) (*OAuthClient, error) {
	var c OAuthClient
	var redirects string
	var ins int64
	if err := row.Scan(&c.ID, &c.Name, &c.URI, &redirects, &ins); err != nil {
		return nil, err
	}
	c.InsertedAt = fromMicros(ins)
	return &c, json.Unmarshal([]byte(redirects), &c.RedirectURIs)
}

// OAuthClient returns a registered client; an unknown id is not_found.
func (db *DB) OAuthClient(ctx context.Context, id string) (*OAuthClient, error) {
	var c *OAuthClient
	err := db.readTx(ctx, func(q readQ) error {
		var err error
		c, err = oauthClient(q, id)
		return err
	})
	return c, err
}

func oauthClient(q queryer, id string) (*OAuthClient, error) {
	if !ValidID(id) {
		return nil, notFound("OAuth client")
	}
	c, err := scanOAuthClient(q.QueryRow(`SELECT `+oauthClientColumns+` FROM oauth_clients WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("OAuth client")
	}
	return c, err
}
