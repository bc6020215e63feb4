package store

import (
	"context"
	"crypto/rand"
	"time"
)

// A person's consent, given in the web app, lets a registered client act on
// /mcp as one of the person's agents or as the person. It is answered with
// an authorization code, which the client exchanges once, with the PKCE
// verifier of the challenge it sent, for a grant's tokens
// (oauth_tokens.go). A delegated token never consents: that would mint a
// credential outliving the delegation.

// OAuth lifetimes and bounds. A code travels through the browser, so it
// lives minutes and works once; an access token is a bearer credential, so
// it lives an hour; a refresh token works once and is replaced by each use,
// so a client that keeps using chatd stays signed in, and one left unused
// for OAuthRefreshTTL is signed out.
const (
	OAuthCodeTTL              = 2 * time.Minute
	OAuthAccessTTL            = time.Hour
	OAuthRefreshTTL           = 30 * 24 * time.Hour
	MaxOAuthGrantsPerUser     = 100
	maxPendingOAuthCodes      = 20 // per person, unused and unexpired (docs/api/extensions.md)
	oauthCodePrefix           = "band_oc_"
	oauthAccessPrefix         = "band_oa_"
	oauthRefreshPrefix        = "band_or_"
	oauthTokenLen             = 8 + 52
	oauthCodeChallengeLen     = 43 // BASE64URL(SHA-256(verifier)), RFC 7636 §4.2
	oauthExpiredCodesPerPrune = 100
)

// OAuthAuthorization is what a person consents to: the client, where the
// code goes, its PKCE challenge (S256), the scope and resource it asked
// for, and whom it acts as (AgentID, or "" for the person).
type OAuthAuthorization struct {
	ClientID      string
	RedirectURI   string
	CodeChallenge string
	Scope         string
	Resource      string
	AgentID       string
}

// mintOAuthSecret returns a new random code or token with prefix.
func mintOAuthSecret(prefix string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return prefix + keyEncoding.EncodeToString(b)
}

// IsOAuthAccessToken reports whether token has the shape of an OAuth access
// token (checked before any lookup: a string of another shape is no such
// token).
func IsOAuthAccessToken(token string) bool {
	return len(token) == oauthTokenLen && token[:len(oauthAccessPrefix)] == oauthAccessPrefix
}

// ValidCodeChallenge reports whether challenge is an S256 PKCE challenge:
// 43 characters of base64url.
func ValidCodeChallenge(challenge string) bool {
	if len(challenge) != oauthCodeChallengeLen {
		return false
	}
	for _, c := range challenge {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// AuthorizeOAuthClient records the caller's consent and returns the
// one-time code for the client, shown this once and stored as a digest.
func (db *DB) AuthorizeOAuthClient(ctx context.Context, caller *User, a OAuthAuthorization) (string, error) {
	if err := refuseDelegated(ctx); err != nil {
		return "", err
	}
	if !ValidCodeChallenge(a.CodeChallenge) {
		return "", Problems{"/authorization/code_challenge": {"must be the S256 challenge: 43 characters of base64url"}}.Err(CodeValidation)
	}
	code := mintOAuthSecret(oauthCodePrefix)
	err := db.Write(ctx, func(tx *Tx) error {
		if err := checkOAuthConsent(tx, caller, &a); err != nil {
			return err
		}
		now := tx.Now()
		if err := pruneExpiredOAuthCodes(tx, now); err != nil {
			return err
		}
		if err := checkOAuthConsentLimits(tx, caller, now); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO oauth_codes (digest, client_id, user_id, agent_id, redirect_uri, code_challenge,
			scope, resource, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, keyDigest(code), a.ClientID, caller.ID,
			nullIfEmpty(a.AgentID), a.RedirectURI, a.CodeChallenge, a.Scope, a.Resource, now.Add(OAuthCodeTTL).UnixMicro())
		return err
	})
	if err != nil {
		return "", err
	}
	return code, nil
}

// checkOAuthConsent checks what the consent names: a registered client, one
// of its redirect URIs, and an agent the caller owns.
func checkOAuthConsent(tx *Tx, caller *User, a *OAuthAuthorization) error {
	client, err := oauthClient(tx, a.ClientID)
	if err != nil {
		return err
	}
	if !client.AllowsRedirect(a.RedirectURI) {
		return Problems{"/authorization/redirect_uri": {"is not one of the client's registered redirect URIs"}}.Err(CodeValidation)
	}
	if a.AgentID != "" {
		if _, err := ownedAgent(tx, caller, a.AgentID, "let an app act as it"); err != nil {
			return err
		}
	}
	return nil
}

// checkOAuthConsentLimits bounds a person's live grants and the codes they
// have been given and not yet used. Every such code may become a grant, so
// the grants and the codes together stay within MaxOAuthGrantsPerUser:
// redeeming the codes can then never take the person past it (and
// ExchangeOAuthCode checks again, for codes issued before this rule).
func checkOAuthConsentLimits(tx *Tx, caller *User, now time.Time) error {
	grants, err := countLiveOAuthGrants(tx, caller.ID, now)
	if err != nil {
		return err
	}
	var codes int
	if err := tx.QueryRow(`SELECT count(*) FROM oauth_codes WHERE user_id = ? AND used_at IS NULL AND expires_at > ?`,
		caller.ID, now.UnixMicro()).Scan(&codes); err != nil {
		return err
	}
	if grants+codes >= MaxOAuthGrantsPerUser {
		return limitReached("apps signed in, counting the authorizations not yet redeemed (sign one out first)",
			MaxOAuthGrantsPerUser, grants+codes)
	}
	if codes >= maxPendingOAuthCodes {
		return limitReached("authorization codes waiting to be used", maxPendingOAuthCodes, codes)
	}
	return nil
}

// countLiveOAuthGrants counts the person's live grants as ListOAuthGrants
// lists them: a grant the person cannot see (its agent deleted or given
// away) cannot be signed out either, so it does not count against them.
func countLiveOAuthGrants(q queryer, userID string, now time.Time) (int, error) {
	var n int
	err := q.QueryRow(`SELECT count(*) FROM oauth_grants g LEFT JOIN agents a ON a.id = g.agent_id
		WHERE g.user_id = ? AND g.revoked_at IS NULL AND g.expires_at > ?
		AND (g.agent_id IS NULL OR (a.deleted_at IS NULL AND a.owner_id = g.user_id))`,
		userID, now.UnixMicro()).Scan(&n)
	return n, err
}

// pruneExpiredOAuthCodes deletes some expired codes: a used code is kept
// until it expires, to recognize its reuse, and not a moment longer.
func pruneExpiredOAuthCodes(tx *Tx, now time.Time) error {
	_, err := tx.Exec(`DELETE FROM oauth_codes WHERE digest IN
		(SELECT digest FROM oauth_codes WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`,
		now.UnixMicro(), oauthExpiredCodesPerPrune)
	return err
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
