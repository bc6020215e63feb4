package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// A grant is a person's consent that tokens were issued for: a client acting
// on /mcp as one of the person's agents or as the person. The person lists
// and revokes their grants like their keys; an access token works while its
// grant is live and its agent still the person's, which every use checks
// here (one indexed read, no cache, as for sign-in sessions).

// OAuthGrant is a live grant as its person sees it.
type OAuthGrant struct {
	ID          string
	ClientID    string
	ClientName  string
	ClientURI   string
	AgentID     string // "" when the client acts as the person
	AgentHandle string
	AgentName   string
	Scope       string
	Resource    string
	InsertedAt  time.Time
	ExpiresAt   time.Time // when the newest refresh token lapses
	LastUsedAt  *time.Time
}

const oauthGrantTouchPeriod = time.Minute

var errBadOAuthToken = &Error{Code: CodeUnauthorized,
	Message: "invalid, expired or revoked OAuth access token: refresh it, or sign in again"}

// AuthenticateOAuth returns whom an OAuth access token acts as: the agent
// (Principal.Agent) or the person (Principal.User), with the grant's id.
func (db *DB) AuthenticateOAuth(ctx context.Context, token string) (*Principal, error) {
	if !IsOAuthAccessToken(token) {
		return nil, errBadOAuthToken
	}
	var grantID, userID string
	var agentID sql.NullString
	var lastUsed sql.NullInt64
	err := db.queryRow(ctx, `SELECT g.id, g.user_id, g.agent_id, g.last_used_at FROM oauth_tokens t
		JOIN oauth_grants g ON g.id = t.grant_id WHERE t.digest = ? AND t.kind = 'access' AND t.expires_at > ?
		AND g.revoked_at IS NULL`, keyDigest(token), now().UnixMicro()).Scan(&grantID, &userID, &agentID, &lastUsed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errBadOAuthToken
	}
	if err != nil {
		return nil, err
	}
	p := &Principal{OAuthGrantID: grantID}
	if agentID.Valid {
		p.Agent, err = db.AgentByID(ctx, agentID.String)
		if err == nil && p.Agent.OwnerID != userID {
			return nil, errBadOAuthToken
		}
	} else {
		p.User, err = db.UserByID(ctx, userID)
	}
	if ErrorCode(err) == CodeNotFound {
		return nil, errBadOAuthToken
	}
	if err != nil {
		return nil, err
	}
	db.touchOAuthGrant(grantID, lastUsed)
	return p, nil
}

// touchOAuthGrant records a grant's use, at most once a minute and only
// when the writer has room: it is bookkeeping, not data.
func (db *DB) touchOAuthGrant(id string, last sql.NullInt64) {
	t := now()
	if last.Valid && t.Sub(fromMicros(last.Int64)) < oauthGrantTouchPeriod {
		return
	}
	_ = db.WriteAsync(func(tx *Tx) error {
		_, err := tx.Exec(`UPDATE oauth_grants SET last_used_at = ? WHERE id = ?`, t.UnixMicro(), id)
		return err
	})
}

const oauthGrantColumns = `g.id, g.client_id, c.name, c.uri, coalesce(g.agent_id, ''), coalesce(a.handle, ''),
	coalesce(a.name, ''), g.scope, g.resource, g.inserted_at, g.expires_at, g.last_used_at`

func scanOAuthGrant(row interface{ Scan(...any) error }) (*OAuthGrant, error) {
	var g OAuthGrant
	var ins, exp int64
	var used sql.NullInt64
	if err := row.Scan(&g.ID, &g.ClientID, &g.ClientName, &g.ClientURI, &g.AgentID, &g.AgentHandle, &g.AgentName,
		&g.Scope, &g.Resource, &ins, &exp, &used); err != nil {
		return nil, err
	}
	g.InsertedAt, g.ExpiresAt, g.LastUsedAt = fromMicros(ins), fromMicros(exp), nullMicros(used)
	return &g, nil
}

// ListOAuthGrants lists the caller's live grants, newest first: neither
// revoked nor lapsed, and not acting as an agent since deleted.
func (db *DB) ListOAuthGrants(ctx context.Context, caller *User) ([]*OAuthGrant, error) {
	rows, err := db.query(ctx, `SELECT `+oauthGrantColumns+` FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id
		LEFT JOIN agents a ON a.id = g.agent_id WHERE g.user_id = ? AND g.revoked_at IS NULL AND g.expires_at > ?
		AND (g.agent_id IS NULL OR (a.deleted_at IS NULL AND a.owner_id = g.user_id))
		ORDER BY g.inserted_at DESC, g.id DESC`, caller.ID, now().UnixMicro())
	if err != nil {
		return nil, err
	}
	return scanAll(rows, scanOAuthGrant)
}

// RevokeOAuthGrant ends one of the caller's grants: its tokens stop working
// at once, and the MCP sessions opened with them close (CredentialsEnded).
// Another person's grant, or one already ended, is not found.
func (db *DB) RevokeOAuthGrant(ctx context.Context, caller *User, id string) error {
	if !ValidID(id) {
		return notFound("OAuth grant")
	}
	return db.Write(ctx, func(tx *Tx) error {
		now := tx.Now()
		var live bool
		if err := tx.QueryRow(`SELECT EXISTS (SELECT 1 FROM oauth_grants WHERE id = ? AND user_id = ? AND revoked_at IS NULL
			AND expires_at > ?)`, id, caller.ID, now.UnixMicro()).Scan(&live); err != nil {
			return err
		}
		if !live {
			return notFound("OAuth grant")
		}
		return db.revokeOAuthGrant(tx, id, now)
	})
}
