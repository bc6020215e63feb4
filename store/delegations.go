package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Delegations let a person's agent act on the Human API for them, within
// the scopes the person granted, without ever holding the person's key.
//
// The person creates a delegation for one of their agents and receives a
// one-time grant (band_g_...), which they hand to the agent. The agent,
// authenticated with its own key, exchanges the grant once for a short-lived
// token. A grant presented a second time is treated as stolen: the exchange
// is refused and the delegation revoked, which also ends the token already
// issued. Revoking, deleting the agent or the agent changing hands ends a
// delegation at once: every use of its token checks it here.
//
// A delegation's status: pending (grant not exchanged yet), active (token
// issued and not expired), expired (grant or token lapsed), revoked.

// DelegationScopes are what a delegation can grant: read or write on one
// part of the Human API. Managing delegations is never grantable.
var DelegationScopes = []string{
	"profile:read", "profile:write",
	"agents:read", "agents:write",
	"chats:read", "chats:write",
	"contacts:read", "contacts:write",
	"memories:read", "memories:write",
}

// Delegation bounds. Grants are short-lived because they travel between
// person and agent; tokens because they are bearer credentials.
const (
	DefaultGrantTTL            = 10 * time.Minute
	DefaultDelegationTokenTTL  = time.Hour
	MinDelegationTTL           = time.Minute
	MaxDelegationTTL           = 24 * time.Hour
	MaxLiveDelegationsPerAgent = 20
	delegationTouchPeriod      = time.Minute
	grantPrefix                = "band_g_"
)

// Delegation is a person's grant to one of their agents.
type Delegation struct {
	ID             string
	UserID         string
	Agent          *Agent
	Scopes         []string
	GrantExpiresAt time.Time
	TokenTTL       time.Duration
	ExchangedAt    *time.Time
	RevokedAt      *time.Time
	LastUsedAt     *time.Time
	InsertedAt     time.Time
}

// TokenExpiresAt is when the token issued for the delegation stops working
// (nil before the exchange).
func (d *Delegation) TokenExpiresAt() *time.Time {
	if d.ExchangedAt == nil {
		return nil
	}
	t := d.ExchangedAt.Add(d.TokenTTL)
	return &t
}

// Status is pending, active, expired or revoked at now.
func (d *Delegation) Status(now time.Time) string {
	switch {
	case d.RevokedAt != nil:
		return "revoked"
	case d.ExchangedAt == nil && now.Before(d.GrantExpiresAt):
		return "pending"
	case d.ExchangedAt != nil && now.Before(*d.TokenExpiresAt()):
		return "active"
	}
	return "expired"
}

// NewDelegation describes a delegation to create; zero TTLs take the
// defaults.
type NewDelegation struct {
	Scopes   []string
	GrantTTL time.Duration
	TokenTTL time.Duration
}

func (nd *NewDelegation) check() error {
	p := Problems{}
	if len(nd.Scopes) == 0 {
		p.Add("/delegation/scopes", "must name at least one scope")
	}
	seen := map[string]bool{}
	for i, s := range nd.Scopes {
		switch {
		case !slices.Contains(DelegationScopes, s):
			p.Add(fmt.Sprintf("/delegation/scopes/%d", i), "is not a scope; scopes are %v", DelegationScopes)
		case seen[s]:
			p.Add(fmt.Sprintf("/delegation/scopes/%d", i), "is listed twice")
		}
		seen[s] = true
	}
	for _, ttl := range []struct {
		v   *time.Duration
		def time.Duration
		at  string
	}{{&nd.GrantTTL, DefaultGrantTTL, "/delegation/grant_ttl_seconds"}, {&nd.TokenTTL, DefaultDelegationTokenTTL, "/delegation/token_ttl_seconds"}} {
		if *ttl.v == 0 {
			*ttl.v = ttl.def
		} else if *ttl.v < MinDelegationTTL || *ttl.v > MaxDelegationTTL {
			p.Add(ttl.at, "must be from %d to %d seconds", int(MinDelegationTTL.Seconds()), int(MaxDelegationTTL.Seconds()))
		}
	}
	return p.Err(CodeValidation)
}

const delegationColumns = `d.id, d.user_id, d.agent_id, d.scopes, d.grant_expires_at, d.token_ttl, d.exchanged_at, d.revoked_at,
	d.last_used_at, d.inserted_at`

func scanDelegation(row interface{ Scan(...any) error }) (*Delegation, string, error) {
	var d Delegation
	var agentID, scopes string
	var grantExp, ttl, ins int64
	var exchanged, revoked, used sql.NullInt64
	if err := row.Scan(&d.ID, &d.UserID, &agentID, &scopes, &grantExp, &ttl, &exchanged, &revoked, &used, &ins); err != nil {
		return nil, "", err
	}
	if err := json.Unmarshal([]byte(scopes), &d.Scopes); err != nil {
		return nil, "", err
	}
	d.GrantExpiresAt, d.TokenTTL, d.InsertedAt = fromMicros(grantExp), time.Duration(ttl)*time.Microsecond, fromMicros(ins)
	d.ExchangedAt, d.RevokedAt, d.LastUsedAt = nullMicros(exchanged), nullMicros(revoked), nullMicros(used)
	return &d, agentID, nil
}

func nullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// CreateDelegation lets agentID, which the caller owns, act for the caller
// within nd.Scopes. It returns the delegation and its one-time grant, which
// is shown this once and stored only as a digest.
func (db *DB) CreateDelegation(ctx context.Context, caller *User, agentID string, nd NewDelegation) (*Delegation, string, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, "", err
	}
	if err := nd.check(); err != nil {
		return nil, "", err
	}
	grant := mintGrant()
	var out *Delegation
	err := db.Write(ctx, func(tx *Tx) error {
		a, err := ownedAgent(tx, caller, agentID, "delegate to it")
		if err != nil {
			return err
		}
		now := tx.Now()
		var live int
		if err := tx.QueryRow(`SELECT count(*) FROM delegations WHERE agent_id = ? AND revoked_at IS NULL
			AND ((exchanged_at IS NULL AND grant_expires_at > ?) OR exchanged_at + token_ttl > ?)`,
			a.ID, now.UnixMicro(), now.UnixMicro()).Scan(&live); err != nil {
			return err
		}
		if live >= MaxLiveDelegationsPerAgent {
			return limitReached("delegations", MaxLiveDelegationsPerAgent, live)
		}
		scopes, _ := json.Marshal(nd.Scopes)
		d := &Delegation{ID: newID(), UserID: caller.ID, Agent: a, Scopes: nd.Scopes,
			GrantExpiresAt: now.Add(nd.GrantTTL), TokenTTL: nd.TokenTTL, InsertedAt: now}
		if _, err := tx.Exec(`INSERT INTO delegations (id, user_id, agent_id, scopes, grant_digest, grant_expires_at, token_ttl, inserted_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, d.ID, caller.ID, a.ID, string(scopes), keyDigest(grant),
			d.GrantExpiresAt.UnixMicro(), d.TokenTTL.Microseconds(), now.UnixMicro()); err != nil {
			return err
		}
		out = d
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, grant, nil
}

func mintGrant() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return grantPrefix + keyEncoding.EncodeToString(b)
}

// ListDelegations lists the delegations of an agent the caller owns, newest
// first.
func (db *DB) ListDelegations(ctx context.Context, caller *User, agentID string) ([]*Delegation, error) {
	var out []*Delegation
	err := db.readTx(ctx, func(q readQ) error {
		a, err := ownedAgent(q, caller, agentID, "see its delegations")
		if err != nil {
			return err
		}
		rows, err := q.Query(`SELECT `+delegationColumns+` FROM delegations d WHERE d.agent_id = ? AND d.user_id = ?
			ORDER BY d.inserted_at DESC, d.id DESC`, a.ID, caller.ID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, _, err := scanDelegation(rows)
			if err != nil {
				return err
			}
			d.Agent = a
			out = append(out, d)
		}
		return rows.Err()
	})
	return out, err
}

// RevokeDelegation ends a delegation: its grant can no longer be exchanged
// and its token stops working. Revoking a revoked delegation changes nothing.
func (db *DB) RevokeDelegation(ctx context.Context, caller *User, agentID, id string) (*Delegation, error) {
	var out *Delegation
	err := db.Write(ctx, func(tx *Tx) error {
		a, err := ownedAgent(tx, caller, agentID, "revoke its delegations")
		if err != nil {
			return err
		}
		if !ValidID(id) {
			return notFound("delegation")
		}
		d, _, err := scanDelegation(tx.QueryRow(`SELECT `+delegationColumns+` FROM delegations d
			WHERE d.id = ? AND d.agent_id = ? AND d.user_id = ?`, id, a.ID, caller.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("delegation")
		}
		if err != nil {
			return err
		}
		d.Agent = a
		if d.RevokedAt == nil {
			now := tx.Now()
			if _, err := tx.Exec(`UPDATE delegations SET revoked_at = ? WHERE id = ?`, now.UnixMicro(), d.ID); err != nil {
				return err
			}
			d.RevokedAt = &now
		}
		out = d
		return nil
	})
	return out, err
}

var errBadGrant = &Error{Code: CodeUnauthorized, Message: "invalid delegation grant"}

// ExchangeDelegationGrant redeems a grant for the agent it was made for,
// for scopes (all the delegation's when empty; asking for more is 403 and
// leaves the grant unspent). Unknown grants and grants made for another
// agent are refused alike.
func (db *DB) ExchangeDelegationGrant(ctx context.Context, agent *Agent, grant string, scopes []string) (*Delegation, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, err
	}
	if len(grant) != len(grantPrefix)+52 || grant[:len(grantPrefix)] != grantPrefix {
		return nil, errBadGrant
	}
	var out *Delegation
	var refusal *Error
	err := db.Write(ctx, func(tx *Tx) error {
		d, agentID, err := scanDelegation(tx.QueryRow(`SELECT `+delegationColumns+` FROM delegations d WHERE d.grant_digest = ?`,
			keyDigest(grant)))
		if errors.Is(err, sql.ErrNoRows) {
			refusal = errBadGrant
			return nil
		}
		if err != nil {
			return err
		}
		now := tx.Now()
		switch {
		case agentID != agent.ID || d.UserID != agent.OwnerID:
			refusal = errBadGrant
		case d.RevokedAt != nil:
			refusal = &Error{Code: CodeUnauthorized, Message: "the delegation was revoked"}
		case d.ExchangedAt != nil:
			// A grant works once. Seeing it again means it leaked: end the
			// delegation, so whoever holds its token loses it too. (The
			// transaction commits; only the answer is a refusal.)
			_, err := tx.Exec(`UPDATE delegations SET revoked_at = ? WHERE id = ?`, now.UnixMicro(), d.ID)
			refusal = &Error{Code: CodeUnauthorized, Message: "the delegation grant was already used; the delegation is now revoked"}
			return err
		case !now.Before(d.GrantExpiresAt):
			refusal = &Error{Code: CodeUnauthorized, Message: "the delegation grant has expired; ask for a new one"}
		case !isSubset(scopes, d.Scopes):
			refusal = &Error{Code: CodeForbidden, Message: "the scope asked for exceeds what the delegation grants",
				Details: map[string]any{"granted": d.Scopes}}
		default:
			if _, err := tx.Exec(`UPDATE delegations SET exchanged_at = ? WHERE id = ?`, now.UnixMicro(), d.ID); err != nil {
				return err
			}
			d.ExchangedAt, d.Agent = &now, agent
			if len(scopes) > 0 {
				d.Scopes = scopes
			}
			out = d
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if refusal != nil {
		return nil, refusal
	}
	return out, nil
}

// DelegatedPrincipal returns whom a delegated token acts for, after checking
// that its delegation still holds: exchanged, not revoked, the agent alive
// and still the person's. A token outliving its delegation is refused.
func (db *DB) DelegatedPrincipal(ctx context.Context, delegationID, userID, agentID string) (*Principal, error) {
	var d *Delegation
	var storedAgent string
	err := db.readTx(ctx, func(q readQ) error {
		var err error
		d, storedAgent, err = scanDelegation(q.QueryRow(`SELECT `+delegationColumns+` FROM delegations d WHERE d.id = ?`, delegationID))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrBadCredentials
	}
	if err != nil {
		return nil, err
	}
	if storedAgent != agentID || d.UserID != userID || d.RevokedAt != nil || d.ExchangedAt == nil {
		return nil, &Error{Code: CodeUnauthorized, Message: "the delegation behind this token was revoked"}
	}
	agent, err := db.AgentByID(ctx, agentID)
	if ErrorCode(err) == CodeNotFound || (err == nil && agent.OwnerID != userID) {
		return nil, &Error{Code: CodeUnauthorized, Message: "the delegated agent no longer acts for this person"}
	}
	if err != nil {
		return nil, err
	}
	user, err := db.UserByID(ctx, userID)
	if ErrorCode(err) == CodeNotFound {
		return nil, ErrBadCredentials
	}
	if err != nil {
		return nil, err
	}
	d.Agent = agent
	db.touchDelegation(d)
	return &Principal{User: user, Delegation: d}, nil
}

// touchDelegation records a use, at most once a minute and only when the
// writer has room: it is bookkeeping, not data.
func (db *DB) touchDelegation(d *Delegation) {
	t := now()
	if d.LastUsedAt != nil && t.Sub(*d.LastUsedAt) < delegationTouchPeriod {
		return
	}
	_ = db.WriteAsync(func(tx *Tx) error {
		_, err := tx.Exec(`UPDATE delegations SET last_used_at = ? WHERE id = ?`, t.UnixMicro(), d.ID)
		return err
	})
}

func isSubset(some, all []string) bool {
	for _, s := range some {
		if !slices.Contains(all, s) {
			return false
		}
	}
	return true
}

// A delegated token acts for a person within its scopes but never begets a
// credential: an agent holding one could otherwise mint itself a key that
// outlives the delegation's revocation. The server marks the context of a
// delegated request (WithDelegation), and every function that creates,
// reveals or rotates a secret refuses such a context (refuseDelegated),
// whichever route reached it.

type delegationCtxKey struct{}

// WithDelegation marks ctx as a request made with delegated token d.
func WithDelegation(ctx context.Context, d *Delegation) context.Context {
	return context.WithValue(ctx, delegationCtxKey{}, d)
}

// ErrDelegatedCredential refuses a delegated token a credential.
var ErrDelegatedCredential = &Error{Code: CodeForbidden,
	Message: "a delegated token never creates, reveals or rotates a credential (API keys, agent keys, delegation grants); " +
		"the person does that with their own key or sign-in"}

// refuseDelegated returns ErrDelegatedCredential for a delegated request.
func refuseDelegated(ctx context.Context) error {
	if d, _ := ctx.Value(delegationCtxKey{}).(*Delegation); d != nil {
		return ErrDelegatedCredential
	}
	return nil
}
