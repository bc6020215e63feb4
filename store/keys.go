package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base32"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// KeyKind says whom an API key authenticates.
type KeyKind string

const (
	AgentKey KeyKind = "agent"
	UserKey  KeyKind = "user"
)

// New keys carry the band_a_ / band_u_ prefixes; keys from the earlier
// Thenvoi platform (thnv_a_ / thnv_u_) keep working when adopted.
var keyPrefixes = map[string]KeyKind{
	"band_a_": AgentKey,
	"thnv_a_": AgentKey,
	"band_u_": UserKey,
	"thnv_u_": UserKey,
}

var mintPrefix = map[KeyKind]string{AgentKey: "band_a_", UserKey: "band_u_"}

// keyEncoding spells the 256 random bits of a key in lower-case letters and
// digits, so a key survives a double-click, a shell and a URL unquoted.
var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

const (
	minKeyBody  = 24  // characters after the prefix of an adopted key
	maxKeyLen   = 200 // longer credentials are refused before hashing
	displayLen  = 12  // characters of a key kept for display ("band_a_k3j9x")
	touchPeriod = time.Minute
)

// KindOfKey returns the kind a key's prefix announces, or "" for a string
// that cannot be a chatd key (checked before any database lookup).
func KindOfKey(key string) KeyKind {
	if len(key) > maxKeyLen || len(key) < 7+minKeyBody {
		return ""
	}
	kind := keyPrefixes[key[:7]]
	if kind == "" {
		return ""
	}
	for i := 7; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return ""
		}
	}
	return kind
}

// mintKey returns a new random key of kind.
func mintKey(kind KeyKind) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return mintPrefix[kind] + keyEncoding.EncodeToString(b)
}

func keyDigest(key string) []byte {
	d := sha256.Sum256([]byte(key))
	return d[:]
}

// insertKey stores the digest of key (minting one when key is "") for a user
// or an agent and returns the key.
func insertKey(tx *Tx, kind KeyKind, ownerID, key string) (string, error) {
	if key == "" {
		key = mintKey(kind)
	} else if KindOfKey(key) != kind {
		msg := "must start with " + mintPrefix[kind] + " or " + strings.Replace(mintPrefix[kind], "band", "thnv", 1) +
			" followed by at least 24 letters, digits, '-' or '_'"
		return "", Problems{"/api_key": {msg}}.Err(CodeValidation)
	}
	userID, agentID := sql.NullString{}, sql.NullString{}
	if kind == UserKey {
		userID = sql.NullString{String: ownerID, Valid: true}
	} else {
		agentID = sql.NullString{String: ownerID, Valid: true}
	}
	_, err := tx.Exec(`INSERT INTO api_keys (id, digest, prefix, user_id, agent_id, inserted_at) VALUES (?, ?, ?, ?, ?, ?)`,
		newID(), keyDigest(key), key[:displayLen], userID, agentID, tx.Now().UnixMicro())
	if isConstraint(err) {
		return "", &Error{Code: CodeConflict, Message: "that api key is already in use"}
	}
	return key, err
}

// Principal is who a credential authenticates: a human (User set) or an
// agent (Agent set; its owner is Agent.OwnerID). Principals are shared
// between requests through the credential cache: treat them as read-only.
type Principal struct {
	KeyID string // empty for bearer tokens
	// SessionID is set for a session token (a sign-in), which signing out
	// ends; tokens minted by `chatd token` have none.
	SessionID string
	// Expires is when a bearer token stops working; zero for API keys.
	Expires time.Time
	User    *User
	Agent   *Agent
	// Delegation is set when an agent acts for User through a delegated
	// token: User is whom the request acts for, Delegation.Agent who acts.
	Delegation *Delegation
	// OAuthGrantID is set for an OAuth access token (/mcp only): the grant
	// it was issued for, whose revocation ends what the token opened.
	OAuthGrantID string

	lastUsed atomic.Int64 // unix microseconds of the last recorded use
}

// IsAgent reports whether the principal is an agent.
func (p *Principal) IsAgent() bool { return p.Agent != nil }

// ErrBadCredentials is returned for a key or token that authenticates nobody.
var ErrBadCredentials = &Error{Code: CodeUnauthorized, Message: "invalid API key"}

// Authenticate returns the principal of an API key.
func (db *DB) Authenticate(ctx context.Context, key string) (*Principal, error) {
	kind := KindOfKey(key)
	if kind == "" {
		return nil, ErrBadCredentials
	}
	digest := keyDigest(key)
	if p := db.creds.get(string(digest)); p != nil {
		return p, nil
	}
	// Remember the cache's generation before reading, so that a principal
	// read before an invalidation is not cached after it.
	gen := db.creds.generation()
	var (
		p               Principal
		stored          []byte
		userID, agentID sql.NullString
		lastUsed        sql.NullInt64
	)
	err := db.queryRow(ctx,
		`SELECT id, digest, user_id, agent_id, last_used_at FROM api_keys WHERE digest = ?`, digest).
		Scan(&p.KeyID, &stored, &userID, &agentID, &lastUsed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrBadCredentials
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(stored, digest) != 1 {
		return nil, ErrBadCredentials
	}
	if lastUsed.Valid {
		p.lastUsed.Store(lastUsed.Int64)
	}
	switch {
	case userID.Valid && kind == UserKey:
		p.User, err = db.UserByID(ctx, userID.String)
	case agentID.Valid && kind == AgentKey:
		p.Agent, err = db.AgentByID(ctx, agentID.String)
	default:
		// A key whose prefix contradicts what it is stored for: refuse it
		// rather than guess which API it was meant for.
		return nil, ErrBadCredentials
	}
	if ErrorCode(err) == CodeNotFound {
		return nil, ErrBadCredentials
	}
	if err != nil {
		return nil, err
	}
	db.creds.put(string(digest), &p, gen)
	return &p, nil
}

// AuthenticateCached is Authenticate without the database: it knows only
// the keys used in the last credTTL. The HTTP layer uses it for callers
// whose address has spent its failed-authentication budget, so that a
// stream of guessed keys costs no reads while the keys in use keep working.
func (db *DB) AuthenticateCached(key string) (*Principal, error) {
	if KindOfKey(key) == "" {
		return nil, ErrBadCredentials
	}
	if p := db.creds.get(string(keyDigest(key))); p != nil {
		return p, nil
	}
	return nil, ErrBadCredentials
}

// TouchKey records that the principal's key was used, at most once a minute
// per key and only when the writer has room: it is bookkeeping, not data.
func (db *DB) TouchKey(p *Principal) {
	if p.KeyID == "" {
		return
	}
	t := now()
	last := p.lastUsed.Load()
	if t.Sub(time.UnixMicro(last)) < touchPeriod || !p.lastUsed.CompareAndSwap(last, t.UnixMicro()) {
		return
	}
	id := p.KeyID
	_ = db.WriteAsync(func(tx *Tx) error {
		_, err := tx.Exec(`UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`,
			t.UnixMicro(), id, t.Add(-touchPeriod).UnixMicro())
		return err
	})
}

// credCache remembers the principals of recently used API keys, so that a
// request does not read the database just to learn who sent it. Entries
// live credTTL at most; anything that changes or revokes a principal (an
// agent deleted, a key rotated, a profile edited) clears the cache when it
// commits. Other chatd processes (the CLI) write to the same file: the
// writer notices their commits within a second (otherProcessWrote) and
// clears the cache then.
type credCache struct {
	mu  sync.Mutex
	m   map[string]credEntry
	gen uint64
	// held counts the writes under way that end credentials (endCredentials).
	// While one is, the cache neither answers nor remembers: its commit is
	// visible to other readers before the writer gets to invalidate the
	// cache, and nobody may be authenticated from a copy older than that.
	held int
}

// endCredentials makes the cache step aside while tx, which ends some
// credentials (a key deleted or replaced, an agent or person deleted),
// commits, and empties it once the batch has ended.
func (db *DB) endCredentials(tx *Tx) {
	tx.shared.CredentialsEnded = true
	db.creds.hold()
	tx.Finally(db.creds.release)
}

func (c *credCache) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held++
	c.m = nil
	c.gen++
}

func (c *credCache) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held--
	c.m = nil
	c.gen++
}

type credEntry struct {
	p       *Principal
	expires time.Time
}

const (
	credTTL        = 30 * time.Second
	maxCachedCreds = 10000
)

func (c *credCache) get(digest string) *Principal {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[digest]
	if c.held > 0 || !ok || time.Now().After(e.expires) {
		return nil
	}
	return e.p
}

func (c *credCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *credCache) put(digest string, p *Principal, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || c.held > 0 {
		return // invalidated while p was being read, or a write is ending credentials
	}
	if c.m == nil || len(c.m) >= maxCachedCreds {
		c.m = map[string]credEntry{}
	}
	c.m[digest] = credEntry{p: p, expires: time.Now().Add(credTTL)}
}

// invalidate drops every cached principal.
func (c *credCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
	c.gen++
}

// KeyInfo describes a stored key without revealing it.
type KeyInfo struct {
	ID         string
	Name       string // "" for keys made before keys had names
	Prefix     string
	InsertedAt time.Time
	LastUsedAt *time.Time
}

const keyInfoColumns = `id, name, prefix, inserted_at, last_used_at`

func scanKeyInfo(row interface{ Scan(...any) error }) (KeyInfo, error) {
	var k KeyInfo
	var ins int64
	var last sql.NullInt64
	if err := row.Scan(&k.ID, &k.Name, &k.Prefix, &ins, &last); err != nil {
		return KeyInfo{}, err
	}
	k.InsertedAt = time.UnixMicro(ins).UTC()
	if last.Valid {
		t := time.UnixMicro(last.Int64).UTC()
		k.LastUsedAt = &t
	}
	return k, nil
}

// AgentKeys lists the keys of an agent (for tests and operators).
func (db *DB) AgentKeys(ctx context.Context, agentID string) ([]KeyInfo, error) {
	return db.keyInfos(ctx, `WHERE agent_id = ? ORDER BY id`, agentID)
}

// keyInfos lists the keys that where (a WHERE and ORDER BY clause of
// chatd's own, never input) selects.
func (db *DB) keyInfos(ctx context.Context, where string, args ...any) ([]KeyInfo, error) {
	rows, err := db.query(ctx, `SELECT `+keyInfoColumns+` FROM api_keys `+where, args...)
	if err != nil {
		return nil, err
	}
	return scanAll(rows, scanKeyInfo)
}

// HeldCredentials are what open connections were opened with, by id: API
// keys, sign-in sessions, OAuth grants, and the people they act as (a
// token from `chatd token` has no session, and ends with its person).
type HeldCredentials struct{ Keys, Sessions, Grants, People []string }

// EndedCredentials returns which of the held ids no longer authenticate
// anyone: keys deleted or replaced (RotateAgentKey), sessions signed out,
// ended by a new password, or expired, grants revoked or lapsed, people
// removed. Connections opened with them are closed.
func (db *DB) EndedCredentials(ctx context.Context, held HeldCredentials) (map[string]bool, error) {
	ended := make(map[string]bool)
	at := now().UnixMicro()
	heldIDs := `SELECT value FROM ` + db.dialect.jsonTextRows
	for _, c := range []struct {
		ids   []string
		query string
		args  []any
	}{
		{held.Keys, heldIDs + ` WHERE NOT EXISTS (SELECT 1 FROM api_keys WHERE id = value)`, nil},
		{held.Sessions, heldIDs + ` WHERE NOT EXISTS
			(SELECT 1 FROM sessions WHERE id = value AND revoked_at IS NULL AND expires_at > ?)`, []any{at}},
		{held.Grants, heldIDs + ` WHERE NOT EXISTS
			(SELECT 1 FROM oauth_grants WHERE id = value AND revoked_at IS NULL AND expires_at > ?)`, []any{at}},
		{held.People, heldIDs + ` WHERE NOT EXISTS
			(SELECT 1 FROM users WHERE id = value AND removed_at IS NULL)`, nil},
	} {
		if err := db.collectIDs(ctx, ended, c.ids, c.query, c.args...); err != nil {
			return nil, err
		}
	}
	return ended, nil
}

// collectIDs adds to set the ids among ids that query (which takes them as
// a JSON array in its first parameter, then args) returns.
func (db *DB) collectIDs(ctx context.Context, set map[string]bool, ids []string, query string, args ...any) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	rows, err := db.query(ctx, query, append([]any{string(list)}, args...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		set[id] = true
	}
	return rows.Err()
}
