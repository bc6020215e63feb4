package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Webhooks: an agent registers endpoints (URLs), and chatd POSTs each new
// text message addressed to the agent to each of them. This file keeps the
// endpoints, the outbox and the delivery log; sending is the server's
// (server/webhooks.go).
//
// The outbox is durable: SendText writes one webhook delivery per endpoint
// of each agent the message is addressed to, in the message's own
// transaction, so a committed message is never without its deliveries and a
// restart (or a crash) loses none. A delivery stays pending until an
// attempt succeeds or the sender gives up on it; an attempt is recorded
// after it ended, so one cut short by a crash is made again, with the same
// id (delivery is at least once; receivers deduplicate by the webhook-id
// header). An endpoint is sent its pending deliveries one at a time, in
// message order: the first pending one blocks those after it.
//
// Who manages an agent's endpoints: the agent itself, and the person who
// owns it; anyone else is answered not found.

// MaxWebhooksPerAgent bounds the endpoints of one agent: each is sent every
// message, so a few are plenty, and the bound keeps a message's fan-out small.
const MaxWebhooksPerAgent = 10

// maxWebhookURLLen bounds a webhook's URL, in bytes.
const maxWebhookURLLen = 2048

// WebhookSecretPrefix starts every signing secret, as Standard Webhooks
// writes symmetric secrets: the rest is the key, base64-encoded.
const WebhookSecretPrefix = "whsec_"

// Webhook is an endpoint an agent registered. Its secret is not here: it is
// answered once, by CreateWebhook, and read again only to sign (WebhookSend).
type Webhook struct {
	ID                  string
	AgentID             string
	URL                 string
	Description         string
	ConsecutiveFailures int // failed attempts since the last success
	PausedAt            *time.Time
	PauseReason         *string // set when PausedAt is
	InsertedAt          time.Time
	UpdatedAt           time.Time
}

// NewWebhook is what CreateWebhook needs.
type NewWebhook struct {
	URL         string
	Description string // optional
}

const webhookColumns = `e.id, e.agent_id, e.url, e.description, e.consecutive_failures, e.paused_at, e.pause_reason, e.inserted_at, e.updated_at`

func scanWebhook(row interface{ Scan(...any) error }) (*Webhook, error) {
	var w Webhook
	var paused sql.NullInt64
	var reason sql.NullString
	var ins, upd int64
	if err := row.Scan(&w.ID, &w.AgentID, &w.URL, &w.Description, &w.ConsecutiveFailures, &paused, &reason, &ins, &upd); err != nil {
		return nil, err
	}
	w.PausedAt, w.PauseReason = optionalMicros(paused), nullString(reason)
	w.InsertedAt, w.UpdatedAt = fromMicros(ins), fromMicros(upd)
	return &w, nil
}

// WebhookURLPointer is where a body carries a webhook's URL: the problems
// of a URL, the store's and the server's address checks alike, are
// reported there.
const WebhookURLPointer = "/webhook/url"

// ParseWebhookURL checks a webhook URL's form and returns it parsed: an
// absolute http or https URL with a host, without user information (it
// would be a credential shown in every listing) or a fragment (never sent),
// of at most 2048 bytes. Where it may lead is the server's to check.
func ParseWebhookURL(raw string) (*url.URL, error) {
	refuse := func(msg string) (*url.URL, error) {
		return nil, Problems{WebhookURLPointer: {msg}}.Err(CodeValidation)
	}
	switch {
	case raw == "":
		return refuse("can't be blank")
	case len(raw) > maxWebhookURLLen:
		return refuse("must be at most " + strconv.Itoa(maxWebhookURLLen) + " bytes long")
	case !utf8.ValidString(raw) || strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return refuse("must not contain spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return refuse("is not a valid URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return refuse("must be an http:// or https:// URL")
	case u.Opaque != "" || u.Host == "":
		return refuse("must name a host (http://host/path)")
	case u.User != nil:
		return refuse("must not carry a user name or password")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return refuse("must not have a fragment (#...)")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return refuse("has a port that is not a number from 1 to 65535")
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return refuse("has an empty port")
	}
	if u.Hostname() == "" {
		return refuse("must name a host (http://host/path)")
	}
	if strings.Contains(u.Host, "[") && net.ParseIP(u.Hostname()) == nil {
		return refuse("has a bracketed host that is not an IPv6 address")
	}
	if numericHost(u.Hostname()) {
		return refuse("has a numeric host that is not an IPv4 address in dotted decimal (such as 127.0.0.1)")
	}
	return u, nil
}

// numericHost reports whether host reads as a number but not as an IP
// address: the shorthands some resolvers take for IPv4 (2130706433,
// 0x7f000001, 127.1, 0177.0.0.1). No top-level domain is numeric, so such
// a host names no site; refused, it cannot slip an address past the
// checks that read addresses in dotted decimal.
func numericHost(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if net.ParseIP(host) != nil {
		return false
	}
	last := strings.ToLower(host[strings.LastIndex(host, ".")+1:])
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// caseFoldedURL is raw, which parsed as u, with its scheme and host in
// lower case: they name the same place in any case, so that the same
// address given twice is one webhook. The rest is kept as given (a path's
// case matters); a host written in a form that does not read back as u's
// keeps raw whole.
func caseFoldedURL(u *url.URL, raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || len(rest) < len(u.Host) || !strings.EqualFold(rest[:len(u.Host)], u.Host) {
		return raw
	}
	return strings.ToLower(scheme) + "://" + strings.ToLower(rest[:len(u.Host)]) + rest[len(u.Host):]
}

// mintWebhookSecret returns a new signing secret: 32 random bytes (Standard
// Webhooks asks at least 24), base64-encoded after the whsec_ prefix.
func mintWebhookSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// webhookAgent checks that actor may manage the webhooks of agentID: the
// agent itself, or the person who owns it (a live agent). Anyone else, and
// a malformed or unknown id, is not found.
func webhookAgent(q queryer, actor Actor, agentID string) error {
	if actor.IsAgent() {
		if actor.ID != agentID {
			return notFound("agent")
		}
		return nil
	}
	if !ValidID(agentID) {
		return notFound("agent")
	}
	var n int
	if err := q.QueryRow(`SELECT count(*) FROM agents a WHERE a.id = ? AND a.owner_id = ? AND `+liveAgent, agentID, actor.ID).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return notFound("agent")
	}
	return nil
}

// loadWebhook returns an endpoint of agentID, which actor may manage, or
// not_found.
func loadWebhook(q queryer, actor Actor, agentID, id string) (*Webhook, error) {
	if err := webhookAgent(q, actor, agentID); err != nil {
		return nil, err
	}
	if !ValidID(id) {
		return nil, notFound("webhook")
	}
	w, err := scanWebhook(q.QueryRow(`SELECT `+webhookColumns+` FROM webhook_endpoints e WHERE e.id = ? AND e.agent_id = ?`, id, agentID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("webhook")
	}
	return w, err
}

// CreateWebhook registers an endpoint for agentID and returns it with its
// signing secret, which is answered this once. The secret is a credential:
// a delegated token may not create one.
func (db *DB) CreateWebhook(ctx context.Context, actor Actor, agentID string, nw NewWebhook) (*Webhook, string, error) {
	if err := refuseDelegated(ctx); err != nil {
		return nil, "", err
	}
	p := Problems{}
	if u, err := ParseWebhookURL(nw.URL); err != nil {
		var e *Error
		errors.As(err, &e)
		for ptr, msgs := range e.Details.(Problems) {
			p[ptr] = msgs
		}
	} else {
		nw.URL = caseFoldedURL(u, nw.URL)
	}
	description, msg := cleanText(nw.Description, 0, maxDescriptionLen)
	if msg != "" {
		p.Add("/webhook/description", "%s", msg)
	}
	if err := p.Err(CodeValidation); err != nil {
		return nil, "", err
	}
	var out *Webhook
	secret := mintWebhookSecret()
	err := db.Write(ctx, func(tx *Tx) error {
		if err := webhookAgent(tx, actor, agentID); err != nil {
			return err
		}
		var count, same int
		if err := tx.QueryRow(`SELECT count(*), count(*) FILTER (WHERE url = ?) FROM webhook_endpoints WHERE agent_id = ?`,
			nw.URL, agentID).Scan(&count, &same); err != nil {
			return err
		}
		if same > 0 {
			return Problems{WebhookURLPointer: {"is already a webhook of the agent"}}.Err(CodeConflict)
		}
		if count >= MaxWebhooksPerAgent {
			return limitReached("webhooks", MaxWebhooksPerAgent, count)
		}
		id, ts := newID(), tx.Now().UnixMicro()
		if _, err := tx.Exec(`INSERT INTO webhook_endpoints (id, agent_id, url, description, secret, inserted_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, id, agentID, nw.URL, description, secret, ts, ts); err != nil {
			return err
		}
		out = &Webhook{ID: id, AgentID: agentID, URL: nw.URL, Description: description, InsertedAt: tx.Now(), UpdatedAt: tx.Now()}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, secret, nil
}

// Webhook returns one endpoint of agentID.
func (db *DB) Webhook(ctx context.Context, actor Actor, agentID, id string) (*Webhook, error) {
	var w *Webhook
	err := db.readTx(ctx, func(q readQ) (err error) {
		w, err = loadWebhook(q, actor, agentID, id)
		return err
	})
	return w, err
}

// ListWebhooks lists the endpoints of agentID, oldest first: all of them,
// as there are at most MaxWebhooksPerAgent.
func (db *DB) ListWebhooks(ctx context.Context, actor Actor, agentID string) ([]*Webhook, error) {
	var out []*Webhook
	err := db.readTx(ctx, func(q readQ) error {
		if err := webhookAgent(q, actor, agentID); err != nil {
			return err
		}
		rows, err := q.Query(`SELECT `+webhookColumns+` FROM webhook_endpoints e WHERE e.agent_id = ? ORDER BY e.inserted_at, e.id`, agentID)
		if err != nil {
			return err
		}
		out, err = scanAll(rows, scanWebhook)
		return err
	})
	return out, err
}

// DeleteWebhook removes an endpoint and, with it, its queue and its
// delivery log. An attempt in flight still ends, but is recorded nowhere.
func (db *DB) DeleteWebhook(ctx context.Context, actor Actor, agentID, id string) error {
	return db.Write(ctx, func(tx *Tx) error {
		w, err := loadWebhook(tx, actor, agentID, id)
		if err != nil {
			return err
		}
		_, err = tx.Exec(`DELETE FROM webhook_endpoints WHERE id = ?`, w.ID)
		return err
	})
}

// ResumeWebhook unpauses an endpoint: its failure count starts again from
// zero and its pending deliveries are due at once, in order. Resuming an
// endpoint that is not paused changes nothing.
func (db *DB) ResumeWebhook(ctx context.Context, actor Actor, agentID, id string) (*Webhook, error) {
	var out *Webhook
	err := db.Write(ctx, func(tx *Tx) error {
		w, err := loadWebhook(tx, actor, agentID, id)
		if err != nil {
			return err
		}
		out = w
		if w.PausedAt == nil {
			return nil
		}
		ts := tx.Now().UnixMicro()
		if _, err := tx.Exec(`UPDATE webhook_endpoints SET paused_at = NULL, pause_reason = NULL, consecutive_failures = 0, updated_at = ?
			WHERE id = ?`, ts, w.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE webhook_deliveries SET next_attempt_at = ? WHERE endpoint_id = ?
			AND message_seq > (SELECT sent_through FROM webhook_endpoints WHERE id = ?)`, ts, w.ID, w.ID); err != nil {
			return err
		}
		w.PausedAt, w.PauseReason, w.ConsecutiveFailures, w.UpdatedAt = nil, nil, 0, tx.Now()
		tx.AfterCommit(func() { db.webhooks.poke(w.ID) })
		return nil
	})
	return out, err
}

// WebhookDelivery is one line of an endpoint's delivery log: a message the
// endpoint is or was to be sent, and how its attempts went.
type WebhookDelivery struct {
	ID             string // the webhook-id header of every attempt
	MessageSeq     int64
	MessageID      string
	RoomID         string
	Status         string // pending, delivered, failed
	Attempts       int
	NextAttemptAt  *time.Time // pending only
	LastAttemptAt  *time.Time
	LastStatusCode *int // the receiver's answer to the last attempt; nil when it gave none
	LastLatency    *time.Duration
	LastError      *string
	InsertedAt     time.Time
	CompletedAt    *time.Time
}

const webhookDeliveryColumns = `d.id, d.message_seq, m.id, m.room_id, d.status, d.attempts, d.next_attempt_at, d.last_attempt_at,
	d.last_status_code, d.last_latency_ms, d.last_error, d.inserted_at, d.completed_at`

func scanWebhookDelivery(row interface{ Scan(...any) error }) (*WebhookDelivery, error) {
	var d WebhookDelivery
	var next, ins int64
	var last, code, latency, completed sql.NullInt64
	var lastErr sql.NullString
	if err := row.Scan(&d.ID, &d.MessageSeq, &d.MessageID, &d.RoomID, &d.Status, &d.Attempts, &next, &last,
		&code, &latency, &lastErr, &ins, &completed); err != nil {
		return nil, err
	}
	if d.Status == "pending" {
		t := fromMicros(next)
		d.NextAttemptAt = &t
	}
	d.LastAttemptAt, d.CompletedAt, d.LastError = optionalMicros(last), optionalMicros(completed), nullString(lastErr)
	if code.Valid {
		c := int(code.Int64)
		d.LastStatusCode = &c
	}
	if latency.Valid {
		l := time.Duration(latency.Int64) * time.Millisecond
		d.LastLatency = &l
	}
	d.InsertedAt = fromMicros(ins)
	return &d, nil
}

// WebhookDeliveryKeyset is the paging position just after d.
func WebhookDeliveryKeyset(d *WebhookDelivery) *Keyset { return &Keyset{Int: d.MessageSeq, ID: d.ID} }

// ListWebhookDeliveries reads an endpoint's delivery log, newest message
// first.
func (db *DB) ListWebhookDeliveries(ctx context.Context, actor Actor, agentID, id string, pr PageRequest) (*Page[*WebhookDelivery], error) {
	var page *Page[*WebhookDelivery]
	err := db.readTx(ctx, func(q readQ) error {
		w, err := loadWebhook(q, actor, agentID, id)
		if err != nil {
			return err
		}
		page, err = listPageIn(q, `SELECT `+webhookDeliveryColumns+` FROM webhook_deliveries d JOIN messages m ON m.seq = d.message_seq`,
			[]string{"d.endpoint_id = ?"}, []any{w.ID}, sortSpec{column: "d.message_seq", idCol: "d.id", descend: true}, pr, scanWebhookDelivery)
		return err
	})
	if err != nil {
		return nil, err
	}
	if n := len(page.Items); n > 0 {
		page.Next = WebhookDeliveryKeyset(page.Items[n-1])
	}
	return page, nil
}

// enqueueWebhooks queues the message at seq for every endpoint of the agent,
// inside the transaction that stores the message.
func (db *DB) enqueueWebhooks(tx *Tx, agentID string, seq int64) error {
	endpoints, err := scanStrings(tx.Query(`SELECT id FROM webhook_endpoints WHERE agent_id = ?`, agentID))
	if err != nil {
		return err
	}
	ts := tx.Now().UnixMicro()
	for _, endpoint := range endpoints {
		if _, err := tx.Exec(`INSERT INTO webhook_deliveries (id, endpoint_id, message_seq, next_attempt_at, inserted_at) VALUES (?, ?, ?, ?, ?)`,
			newID(), endpoint, seq, ts, ts); err != nil {
			return err
		}
	}
	if len(endpoints) > 0 {
		tx.AfterCommit(func() { db.webhooks.poke(endpoints...) })
	}
	return nil
}

// webhookWake tells the sender which endpoints had deliveries queued or
// were resumed, so that it looks at those alone rather than at every
// endpoint for each message. Its channel holds at most one wake-up: the
// sender takes every endpoint noted since its last look when it wakes.
type webhookWake struct {
	ch        chan struct{}
	mu        sync.Mutex
	endpoints map[string]struct{}
}

func newWebhookWake() *webhookWake {
	return &webhookWake{ch: make(chan struct{}, 1), endpoints: map[string]struct{}{}}
}

// poke notes the endpoints and wakes the sender. It never blocks: it runs
// after commit, on the writer goroutine.
func (w *webhookWake) poke(endpoints ...string) {
	w.mu.Lock()
	for _, id := range endpoints {
		w.endpoints[id] = struct{}{}
	}
	w.mu.Unlock()
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// WebhooksQueued receives when webhook deliveries were queued or an endpoint
// was resumed (by this process), so that the sender need not poll for new
// work; QueuedWebhookEndpoints says which endpoints.
func (db *DB) WebhooksQueued() <-chan struct{} { return db.webhooks.ch }

// QueuedWebhookEndpoints returns the endpoints that had deliveries queued,
// or were resumed, since it was last called, and forgets them.
func (db *DB) QueuedWebhookEndpoints() []string {
	w := db.webhooks
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.endpoints))
	for id := range w.endpoints {
		out = append(out, id)
	}
	clear(w.endpoints)
	return out
}

// WebhookDue is when an endpoint's next delivery is due.
type WebhookDue struct {
	EndpointID string
	At         time.Time
}

// WebhooksDue lists the endpoints that have pending deliveries and are not
// paused, each with when its first pending delivery (in message order) is
// due, the earliest first.
func (db *DB) WebhooksDue(ctx context.Context) ([]WebhookDue, error) {
	rows, err := db.query(ctx, `SELECT e.id, d.next_attempt_at FROM webhook_endpoints e
		JOIN webhook_deliveries d ON d.endpoint_id = e.id AND d.message_seq = (SELECT min(h.message_seq) FROM webhook_deliveries h
			WHERE h.endpoint_id = e.id AND h.message_seq > e.sent_through)
		WHERE e.paused_at IS NULL ORDER BY d.next_attempt_at, e.id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []WebhookDue
	for rows.Next() {
		var due WebhookDue
		var at int64
		if err := rows.Scan(&due.EndpointID, &at); err != nil {
			return nil, err
		}
		due.At = fromMicros(at)
		out = append(out, due)
	}
	return out, rows.Err()
}

// WebhookSend is what sending one delivery takes.
type WebhookSend struct {
	DeliveryID string // the webhook-id header
	EndpointID string
	MessageSeq int64
	URL        string
	Secret     string
	AgentID    string
	Attempts   int // made before this one
	InsertedAt time.Time
	// Message is the message to send, with the agent's own delivery state
	// of it attached.
	Message *Message
}

// NextWebhookSend returns the first pending delivery of an endpoint, in
// message order, when it is due at the time given. When it is not due yet
// it returns nil and when it is due; when there is none (or the endpoint is
// paused or gone), nil and the zero time.
func (db *DB) NextWebhookSend(ctx context.Context, endpointID string, at time.Time) (*WebhookSend, time.Time, error) {
	var out *WebhookSend
	var due time.Time
	err := db.readTx(ctx, func(q readQ) error {
		var s WebhookSend
		var seq, next, ins int64
		err := q.QueryRow(`SELECT d.id, d.message_seq, d.attempts, d.next_attempt_at, d.inserted_at, e.id, e.url, e.secret, e.agent_id
			FROM webhook_endpoints e JOIN webhook_deliveries d ON d.endpoint_id = e.id AND d.message_seq > e.sent_through
			WHERE e.id = ? AND e.paused_at IS NULL ORDER BY d.message_seq LIMIT 1`, endpointID).
			Scan(&s.DeliveryID, &seq, &s.Attempts, &next, &ins, &s.EndpointID, &s.URL, &s.Secret, &s.AgentID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if due = fromMicros(next); due.After(at) {
			return nil
		}
		s.InsertedAt, s.MessageSeq = fromMicros(ins), seq
		if s.Message, err = messageBySeq(q, seq); err != nil {
			return err
		}
		if err := attachMessageDetails(q, []*Message{s.Message}, s.AgentID); err != nil {
			return err
		}
		out = &s
		return nil
	})
	return out, due, err
}

// WebhookAttempt is how one attempt at a delivery went, and what follows
// from it: the sender decides the retry schedule and when to stop, the
// store records it all in one write.
type WebhookAttempt struct {
	DeliveryID string
	EndpointID string
	MessageSeq int64     // the delivery's message: WebhookSend.MessageSeq
	At         time.Time // when the attempt started
	Latency    time.Duration
	StatusCode int    // the receiver's status; 0 when it gave none
	Error      string // why it failed; "" when it was delivered
	// RetryAt is when to try a failed delivery again; zero gives up on it
	// (it ends failed, and the endpoint's next delivery becomes due).
	RetryAt time.Time
	// PauseNow pauses the endpoint with this reason (the receiver said it
	// wants no more); PauseAfter pauses it when its consecutive failures
	// reach it (0: never).
	PauseNow   string
	PauseAfter int
}

// maxWebhookErrorLen bounds the error recorded for an attempt, in runes.
const maxWebhookErrorLen = 500

// RecordWebhookAttempt records an attempt's outcome on its delivery and its
// endpoint: a success ends the delivery and clears the endpoint's failure
// count; a failure schedules the next attempt (or gives up) and counts
// against the endpoint, which is paused when PauseNow or PauseAfter says
// so. An attempt at a delivery that is no longer pending (its endpoint was
// deleted meanwhile) records nothing.
func (db *DB) RecordWebhookAttempt(ctx context.Context, a WebhookAttempt) error {
	var code any
	if a.StatusCode != 0 {
		code = a.StatusCode
	}
	var lastErr any
	if a.Error != "" {
		msg := strings.ToValidUTF8(a.Error, "?")
		if utf8.RuneCountInString(msg) > maxWebhookErrorLen {
			msg = string([]rune(msg)[:maxWebhookErrorLen-1]) + "…"
		}
		lastErr = msg
	}
	return db.Write(ctx, func(tx *Tx) error {
		ts, at, latency := tx.Now().UnixMicro(), a.At.UnixMicro(), a.Latency.Milliseconds()
		var status string
		next := a.RetryAt.UnixMicro()
		var completed any
		switch {
		case a.Error == "":
			status, completed, next = "delivered", ts, at
		case a.RetryAt.IsZero():
			status, completed, next = "failed", ts, at
		default:
			status = "pending"
		}
		res, err := tx.Exec(`UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, next_attempt_at = ?, last_attempt_at = ?,
			last_status_code = ?, last_latency_ms = ?, last_error = ?, completed_at = ?
			WHERE endpoint_id = ? AND message_seq = ? AND id = ? AND status = 'pending'`,
			status, next, at, code, latency, lastErr, completed, a.EndpointID, a.MessageSeq, a.DeliveryID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		// Ended, the delivery moves its endpoint's sent_through to it; one
		// to be retried leaves it where it is.
		var sentThrough int64
		if status != "pending" {
			sentThrough = a.MessageSeq
		}
		if a.Error == "" {
			_, err = tx.Exec(`UPDATE webhook_endpoints SET consecutive_failures = 0, sent_through = ? WHERE id = ?`, sentThrough, a.EndpointID)
			return err
		}
		var failures int
		if err := tx.QueryRow(`UPDATE webhook_endpoints SET consecutive_failures = consecutive_failures + 1,
			sent_through = CASE WHEN sent_through > ? THEN sent_through ELSE ? END WHERE id = ? RETURNING consecutive_failures`,
			sentThrough, sentThrough, a.EndpointID).Scan(&failures); err != nil {
			return err
		}
		reason := a.PauseNow
		if reason == "" && a.PauseAfter > 0 && failures >= a.PauseAfter {
			reason = "paused after " + strconv.Itoa(failures) + " failed attempts in a row; the last: " + lastErr.(string)
		}
		if reason == "" {
			return nil
		}
		_, err = tx.Exec(`UPDATE webhook_endpoints SET paused_at = ?, pause_reason = ?, updated_at = ? WHERE id = ? AND paused_at IS NULL`,
			ts, reason, ts, a.EndpointID)
		return err
	})
}
