package store

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The token endpoint's two grants (RFC 6749 §4.1.3 and §6, as OAuth 2.1
// tightens them): a code, with its PKCE verifier, for a new grant's first
// token pair; a refresh token for the grant's next pair. Each is decided in
// one write, so a code or refresh token is spent exactly once however many
// requests race with it. Presenting a spent one again means it leaked: the
// grant it belongs to is revoked (OAuth 2.1 §4.3.1, §6.1), in a write that
// commits although the answer is a refusal.

// OAuthTokens is a grant's new token pair, shown once.
type OAuthTokens struct {
	GrantID         string
	Scope           string
	Access          string
	Refresh         string
	AccessExpiresAt time.Time
}

// OAuthCodeExchange is a token request with grant_type authorization_code.
// Challenge is the S256 challenge the server computed from the request's
// code_verifier; Resource is "" when the request named none.
type OAuthCodeExchange struct {
	ClientID    string
	Code        string
	RedirectURI string
	Challenge   string
	Resource    string
}

func invalidGrant(msg string) *Error { return &Error{Code: CodeInvalidGrant, Message: msg} }

var errUnknownOAuthClient = &Error{Code: CodeInvalidClient, Message: "no registered client has this client_id"}

// oauthCode is a stored authorization code.
type oauthCode struct {
	clientID, userID, redirectURI, challenge, scope, resource string
	agentID, grantID                                          sql.NullString
	expiresAt                                                 int64
	usedAt                                                    sql.NullInt64
}

// ExchangeOAuthCode spends a code for the first tokens of a new grant.
func (db *DB) ExchangeOAuthCode(ctx context.Context, x OAuthCodeExchange) (*OAuthTokens, error) {
	var out *OAuthTokens
	var refusal *Error
	err := db.Write(ctx, func(tx *Tx) error {
		if _, err := oauthClient(tx, x.ClientID); err != nil {
			refusal = errUnknownOAuthClient
			return nil
		}
		var c oauthCode
		err := tx.QueryRow(`SELECT client_id, user_id, agent_id, redirect_uri, code_challenge, scope, resource, expires_at,
			used_at, grant_id FROM oauth_codes WHERE digest = ?`, keyDigest(x.Code)).Scan(&c.clientID, &c.userID, &c.agentID,
			&c.redirectURI, &c.challenge, &c.scope, &c.resource, &c.expiresAt, &c.usedAt, &c.grantID)
		if errors.Is(err, sql.ErrNoRows) {
			refusal = invalidGrant("the authorization code is unknown")
			return nil
		}
		if err != nil {
			return err
		}
		now := tx.Now()
		if c.usedAt.Valid {
			refusal = invalidGrant("the authorization code was already used; the tokens issued for it are revoked")
			return db.revokeOAuthGrant(tx, c.grantID.String, now)
		}
		if refusal = c.refusal(x, now); refusal != nil {
			return nil
		}
		if refusal, err = checkOAuthSubject(tx, c.userID, c.agentID); refusal != nil || err != nil {
			return err
		}
		if refusal, err = checkOAuthGrantLimit(tx, c.userID, now); refusal != nil || err != nil {
			return err
		}
		out, err = startOAuthGrant(tx, x, c, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	if refusal != nil {
		return nil, refusal
	}
	return out, nil
}

// refusal is why the exchange x may not spend the unused code c, or nil.
func (c *oauthCode) refusal(x OAuthCodeExchange, now time.Time) *Error {
	switch {
	case c.clientID != x.ClientID:
		return invalidGrant("the authorization code was issued to another client")
	case now.UnixMicro() >= c.expiresAt:
		return invalidGrant("the authorization code has expired; authorize again")
	case c.redirectURI != x.RedirectURI:
		return invalidGrant("redirect_uri differs from the authorization request's")
	case subtle.ConstantTimeCompare([]byte(c.challenge), []byte(x.Challenge)) != 1:
		return invalidGrant("the code_verifier does not match the code_challenge")
	case x.Resource != "" && x.Resource != c.resource:
		return &Error{Code: CodeInvalidTarget, Message: "resource differs from the authorization request's"}
	}
	return nil
}

// startOAuthGrant makes the grant of a spent code and its first tokens,
// and drops the person's grants that have ended (with their codes and
// tokens, by cascade): nothing reads them again, and a person signing
// clients in and out for years would otherwise pile them up.
func startOAuthGrant(tx *Tx, x OAuthCodeExchange, c oauthCode, now time.Time) (*OAuthTokens, error) {
	if _, err := tx.Exec(`DELETE FROM oauth_grants WHERE user_id = ? AND (revoked_at IS NOT NULL OR expires_at <= ?)`,
		c.userID, now.UnixMicro()); err != nil {
		return nil, err
	}
	grantID := newID()
	if _, err := tx.Exec(`INSERT INTO oauth_grants (id, client_id, user_id, agent_id, scope, resource, inserted_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, grantID, c.clientID, c.userID, c.agentID, c.scope, c.resource,
		now.UnixMicro(), now.Add(OAuthRefreshTTL).UnixMicro()); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(`UPDATE oauth_codes SET used_at = ?, grant_id = ? WHERE digest = ?`,
		now.UnixMicro(), grantID, keyDigest(x.Code)); err != nil {
		return nil, err
	}
	return issueOAuthTokens(tx, grantID, c.clientID, c.scope, now)
}

// issueOAuthTokens mints and stores a grant's next token pair, and extends
// the grant to the new refresh token's expiry.
func issueOAuthTokens(tx *Tx, grantID, clientID, scope string, now time.Time) (*OAuthTokens, error) {
	t := &OAuthTokens{GrantID: grantID, Scope: scope, Access: mintOAuthSecret(oauthAccessPrefix),
		Refresh: mintOAuthSecret(oauthRefreshPrefix), AccessExpiresAt: now.Add(OAuthAccessTTL)}
	refreshExpires := now.Add(OAuthRefreshTTL)
	if _, err := tx.Exec(`INSERT INTO oauth_tokens (digest, grant_id, kind, inserted_at, expires_at) VALUES
		(?, ?, 'access', ?, ?), (?, ?, 'refresh', ?, ?)`,
		keyDigest(t.Access), grantID, now.UnixMicro(), t.AccessExpiresAt.UnixMicro(),
		keyDigest(t.Refresh), grantID, now.UnixMicro(), refreshExpires.UnixMicro()); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(`UPDATE oauth_grants SET expires_at = ? WHERE id = ?`, refreshExpires.UnixMicro(), grantID); err != nil {
		return nil, err
	}
	_, err := tx.Exec(`UPDATE oauth_clients SET last_used_at = ? WHERE id = ?`, now.UnixMicro(), clientID)
	return t, err
}

// checkOAuthSubject refuses a grant whose person is gone, or whose agent
// was deleted or is no longer the person's.
func checkOAuthSubject(q queryer, userID string, agentID sql.NullString) (*Error, error) {
	var ok bool
	err := q.QueryRow(`SELECT EXISTS (SELECT 1 FROM users WHERE id = ? AND removed_at IS NULL) AND (CAST(? AS TEXT) IS NULL OR EXISTS
		(SELECT 1 FROM agents WHERE id = ? AND owner_id = ? AND deleted_at IS NULL))`,
		userID, agentID, agentID, userID).Scan(&ok)
	if err != nil || ok {
		return nil, err
	}
	return invalidGrant("the agent this grant acts as was deleted or changed hands"), nil
}

// checkOAuthGrantLimit refuses a code whose grant would take its person
// past MaxOAuthGrantsPerUser. The consent keeps grants and waiting codes
// within the limit together, so this refuses only codes issued before that
// rule; it is checked here, in the write that would add the grant, so that
// nothing can slip between the count and the insert. RFC 6749 §5.2 leaves
// the token endpoint no code of its own for a quota: the code cannot be
// redeemed, which is invalid_grant, and the code stays unspent (the refusal
// changes nothing), so the client may redeem it once the person has signed
// another app out, within its 2 minutes.
func checkOAuthGrantLimit(tx *Tx, userID string, now time.Time) (*Error, error) {
	n, err := countLiveOAuthGrants(tx, userID, now)
	if err != nil || n < MaxOAuthGrantsPerUser {
		return nil, err
	}
	return invalidGrant(fmt.Sprintf("the person already has %d apps signed in, the most there may be; "+
		"they must sign one out before this one can be", n)), nil
}

// OAuthRefresh is a token request with grant_type refresh_token.
type OAuthRefresh struct {
	ClientID     string
	RefreshToken string
	Resource     string
}

// oauthRefreshRow is a stored refresh token with its grant.
type oauthRefreshRow struct {
	expiresAt                                  int64
	rotatedAt, revokedAt                       sql.NullInt64
	grantID, clientID, userID, scope, resource string
	agentID                                    sql.NullString
}

// RefreshOAuthTokens spends a refresh token for its grant's next pair.
func (db *DB) RefreshOAuthTokens(ctx context.Context, x OAuthRefresh) (*OAuthTokens, error) {
	var out *OAuthTokens
	var refusal *Error
	err := db.Write(ctx, func(tx *Tx) error {
		if _, err := oauthClient(tx, x.ClientID); err != nil {
			refusal = errUnknownOAuthClient
			return nil
		}
		var r oauthRefreshRow
		err := tx.QueryRow(`SELECT t.expires_at, t.rotated_at, g.revoked_at, g.id, g.client_id, g.user_id, g.scope, g.resource,
			g.agent_id FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id WHERE t.digest = ? AND t.kind = 'refresh'`,
			keyDigest(x.RefreshToken)).Scan(&r.expiresAt, &r.rotatedAt, &r.revokedAt, &r.grantID, &r.clientID, &r.userID,
			&r.scope, &r.resource, &r.agentID)
		if errors.Is(err, sql.ErrNoRows) {
			refusal = invalidGrant("the refresh token is unknown")
			return nil
		}
		if err != nil {
			return err
		}
		now := tx.Now()
		if refusal = r.refusal(x, now); refusal != nil {
			if r.rotatedAt.Valid && !r.revokedAt.Valid && r.clientID == x.ClientID {
				return db.revokeOAuthGrant(tx, r.grantID, now)
			}
			return nil
		}
		if refusal, err = checkOAuthSubject(tx, r.userID, r.agentID); refusal != nil || err != nil {
			return err
		}
		out, err = rotateOAuthRefresh(tx, x.RefreshToken, r, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	if refusal != nil {
		return nil, refusal
	}
	return out, nil
}

// refusal is why the request x may not spend the refresh token r, or nil.
func (r *oauthRefreshRow) refusal(x OAuthRefresh, now time.Time) *Error {
	switch {
	case r.clientID != x.ClientID:
		return invalidGrant("the refresh token was issued to another client")
	case r.revokedAt.Valid:
		return invalidGrant("the grant was revoked; authorize again")
	case r.rotatedAt.Valid:
		return invalidGrant("the refresh token was already used; the grant is now revoked")
	case now.UnixMicro() >= r.expiresAt:
		return invalidGrant("the refresh token has expired; authorize again")
	case x.Resource != "" && x.Resource != r.resource:
		return &Error{Code: CodeInvalidTarget, Message: "resource differs from the one the grant is for"}
	}
	return nil
}

// rotateOAuthRefresh marks the refresh token used, drops the grant's
// expired tokens, and issues the next pair. The previous access token works
// until it expires: a request already under way with it is not cut short.
func rotateOAuthRefresh(tx *Tx, refresh string, r oauthRefreshRow, now time.Time) (*OAuthTokens, error) {
	if _, err := tx.Exec(`UPDATE oauth_tokens SET rotated_at = ? WHERE digest = ?`, now.UnixMicro(), keyDigest(refresh)); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(`DELETE FROM oauth_tokens WHERE grant_id = ? AND expires_at <= ?`, r.grantID, now.UnixMicro()); err != nil {
		return nil, err
	}
	return issueOAuthTokens(tx, r.grantID, r.clientID, r.scope, now)
}

// revokeOAuthGrant ends a grant and every token of it (deleted: a revoked
// grant's tokens are refused whatever they are), and has what it opened
// (MCP sessions) closed (CredentialsEnded).
func (db *DB) revokeOAuthGrant(tx *Tx, grantID string, now time.Time) error {
	res, err := tx.Exec(`UPDATE oauth_grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, now.UnixMicro(), grantID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		db.publish(tx, Change{Kind: CredentialsEnded})
	}
	_, err = tx.Exec(`DELETE FROM oauth_tokens WHERE grant_id = ?`, grantID)
	return err
}

// RevokeOAuthToken revokes, for the client that holds it, the grant of an
// access or refresh token (RFC 7009): the client signs out, and every token
// of the grant stops working. A token that is unknown, already revoked or
// another client's is answered the same, as done: the client may not learn
// more, and has nothing left to do.
func (db *DB) RevokeOAuthToken(ctx context.Context, clientID, token string) error {
	return db.Write(ctx, func(tx *Tx) error {
		if _, err := oauthClient(tx, clientID); err != nil {
			return errUnknownOAuthClient
		}
		var grantID string
		err := tx.QueryRow(`SELECT g.id FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
			WHERE t.digest = ? AND g.client_id = ?`, keyDigest(token), clientID).Scan(&grantID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		return db.revokeOAuthGrant(tx, grantID, tx.Now())
	})
}
