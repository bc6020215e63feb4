package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/apitest"
	"github.com/chatd/chatd/server/webhook"
	"github.com/chatd/chatd/store"
)

// What the webhook dispatcher (webhooks.go) sends, to receivers in the
// test: signatures that verify with the test's own implementation of the
// Standard Webhooks scheme, every message delivered in order across a
// receiver's outage and across a restart, a slow receiver that delays no
// one else, the delivery log, pausing and resuming, and the address check
// when sending.

// quickRetries retries within milliseconds instead of seconds.
func quickRetries(c *Config) {
	c.Webhooks.RetryBase, c.Webhooks.RetryMax = 20*time.Millisecond, 100*time.Millisecond
}

// hookRequest is one request a receiver got.
type hookRequest struct {
	id, timestamp string
	body          []byte
	signature     error // nil when the signature verified
	answered      int
	payload       struct {
		Type      string `json:"type"`
		Timestamp string `json:"timestamp"`
		Data      struct {
			AgentID string         `json:"agent_id"`
			Message map[string]any `json:"message"`
		} `json:"data"`
	}
}

// content is the text of the message a request carried, without the
// mentions chatd writes in front.
func (h hookRequest) content() string {
	words := strings.Fields(h.payload.Data.Message["content"].(string))
	return words[len(words)-1]
}

// hookReceiver is a webhook receiver: it records every request, verifies
// its signature, and answers what answer says (204 when nil).
type hookReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	secret   string
	requests []hookRequest
	answer   func(n int) int // the status of the nth request, from 1
	hold     <-chan struct{} // when set, requests wait for it to close
	arrived  atomic.Int32    // requests that arrived, answered or not
}

func newHookReceiver(t testing.TB) *hookReceiver {
	h := &hookReceiver{}
	h.srv = httptest.NewServer(h)
	t.Cleanup(h.srv.Close)
	return h
}

// newHookReceiverAt starts a receiver on addr (one that was free).
func newHookReceiverAt(t testing.TB, addr string) *hookReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	h := &hookReceiver{}
	h.srv = httptest.NewUnstartedServer(h)
	h.srv.Listener.Close()
	h.srv.Listener = ln
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.arrived.Add(1)
	if h.hold != nil {
		select {
		case <-h.hold:
		case <-r.Context().Done():
			return
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	req := hookRequest{id: r.Header.Get("webhook-id"), timestamp: r.Header.Get("webhook-timestamp"), body: body}
	req.signature = verifyStandardWebhook(h.secret, r.Header, body, time.Now())
	if err := json.Unmarshal(body, &req.payload); err != nil {
		req.signature = fmt.Errorf("the body is not the payload: %v", err)
	}
	req.answered = http.StatusNoContent
	if h.answer != nil {
		req.answered = h.answer(len(h.requests) + 1)
	}
	h.requests = append(h.requests, req)
	w.WriteHeader(req.answered)
}

// verifyStandardWebhook checks a request as a receiver following the
// Standard Webhooks specification would, written here from the
// specification rather than with chatd's own signing code: the key is the
// base64 after whsec_; the signed content is "id.timestamp.body"; the
// header lists "v1,<base64 HMAC-SHA256>" entries separated by spaces, one
// of which must match; and the timestamp must be within five minutes.
func verifyStandardWebhook(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		return fmt.Errorf("the secret %q is not whsec_ and base64", secret)
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	seconds, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || id == "" {
		return fmt.Errorf("webhook-id %q, webhook-timestamp %q", id, ts)
	}
	if skew := now.Sub(time.Unix(seconds, 0)); skew > 5*time.Minute || skew < -5*time.Minute {
		return fmt.Errorf("the timestamp is %v away", skew)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := mac.Sum(nil)
	for _, entry := range strings.Fields(h.Get("webhook-signature")) {
		version, sig, _ := strings.Cut(entry, ",")
		got, err := base64.StdEncoding.DecodeString(sig)
		if version == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no signature of %q matches", h.Get("webhook-signature"))
}

func (h *hookReceiver) setSecret(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.secret = s
}

func (h *hookReceiver) snapshot() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.requests...)
}

// accepted is the messages the receiver answered 2xx, in arrival order.
func (h *hookReceiver) accepted() []hookRequest {
	var out []hookRequest
	for _, r := range h.snapshot() {
		if r.answered < 300 {
			out = append(out, r)
		}
	}
	return out
}

// contents lists what requests carried, comma-separated.
func contents(reqs []hookRequest) string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.content())
	}
	return strings.Join(out, ",")
}

// eventually polls cond until it holds, failing after a generous deadline
// (never a timing assertion).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// hookWorld: newTeam's alice, helper and scout, with a webhook each where a
// test registers one.
type hookWorld struct {
	team
}

// register registers a webhook at receiver's URL (plus path) for the agent
// whose key is given, hands the receiver the secret, and returns the id.
func (w *hookWorld) register(t testing.TB, agentKey string, h *hookReceiver, path string) string {
	t.Helper()
	d := w.ts.createWebhook(t, agentKey, h.srv.URL+path)
	h.setSecret(d["secret"].(string))
	return d["id"].(string)
}

// post has alice send a message in the room to the agent and returns its id.
func (w *hookWorld) post(t testing.TB, content string, to *store.Agent) string {
	t.Helper()
	r := w.ts.do(t, "POST", humanChatsPath+"/"+w.room+"/messages", apiKey(w.aliceKey),
		map[string]any{"message": map[string]any{"content": content, "mentions": []any{map[string]any{"id": to.ID}}}})
	expect(t, r, 201, "")
	return r.data(t)["id"].(string)
}

// log reads a webhook's delivery log as the agent, oldest first.
func (w *hookWorld) log(t testing.TB, agentKey, hook string) []map[string]any {
	t.Helper()
	r := w.ts.do(t, "GET", agentWebhooksPath+"/"+hook+"/deliveries?limit=100", apiKey(agentKey), nil)
	expect(t, r, 200, "")
	var out []map[string]any
	for _, it := range r.list(t) {
		out = append([]map[string]any{it.(map[string]any)}, out...)
	}
	return out
}

// allDelivered reports whether every line of a log is delivered.
func allDelivered(log []map[string]any) bool {
	for _, line := range log {
		if line["status"] != "delivered" {
			return false
		}
	}
	return true
}

func (w *hookWorld) hook(t testing.TB, agentKey, hook string) map[string]any {
	t.Helper()
	r := w.ts.do(t, "GET", agentWebhooksPath+"/"+hook, apiKey(agentKey), nil)
	expect(t, r, 200, "")
	return r.data(t)
}

func newHookWorld(t testing.TB, configure func(*Config)) *hookWorld {
	ts := newTestServerWith(t, configure)
	return &hookWorld{team: newTeam(t, ts)}
}

func TestWebhooksDeliverSignedMessagesToTheirAgent(t *testing.T) {
	w := newHookWorld(t, nil)
	helperHook, scoutHook := newHookReceiver(t), newHookReceiver(t)
	hook := w.register(t, w.helperKey, helperHook, "/helper")
	w.register(t, w.scoutKey, scoutHook, "/scout")
	sent := []string{w.post(t, "one", w.helper), w.post(t, "two", w.helper), w.post(t, "elsewhere", w.scout), w.post(t, "three", w.helper)}

	eventually(t, "three deliveries to helper", func() bool { return len(helperHook.accepted()) == 3 })
	eventually(t, "one to scout", func() bool { return len(scoutHook.accepted()) == 1 })
	got := helperHook.snapshot()
	if contents(got) != "one,two,three" || contents(scoutHook.snapshot()) != "elsewhere" {
		t.Fatalf("helper got %s, scout %s", contents(got), contents(scoutHook.snapshot()))
	}
	// The receiver's answer is recorded after it came.
	eventually(t, "the log to show the deliveries", func() bool { return allDelivered(w.log(t, w.helperKey, hook)) })
	log := w.log(t, w.helperKey, hook)
	for i, r := range got {
		if r.signature != nil {
			t.Errorf("request %d: %v", i+1, r.signature)
		}
		p := r.payload
		if p.Type != "message.created" || p.Data.AgentID != w.helper.ID || p.Data.Message["id"] != []string{sent[0], sent[1], sent[3]}[i] ||
			p.Data.Message["chat_room_id"] != w.room || p.Data.Message["sender_id"] != w.alice.ID {
			t.Errorf("request %d: payload %s", i+1, r.body)
		}
		if meta := p.Data.Message["metadata"].(map[string]any); meta["status"] == nil {
			t.Errorf("request %d: the message lacks the agent's own delivery state: %s", i+1, r.body)
		}
		if r.id != log[i]["id"] {
			t.Errorf("request %d: webhook-id %s, the log's id %s", i+1, r.id, log[i]["id"])
		}
	}
	for i, line := range log {
		if line["status"] != "delivered" || line["attempts"] != float64(1) || line["last_status_code"] != float64(204) ||
			line["last_latency_ms"] == nil || line["last_error"] != nil || line["completed_at"] == nil || line["next_attempt_at"] != nil {
			t.Errorf("log line %d: %v", i+1, line)
		}
	}
	if hook := w.hook(t, w.helperKey, hook); hook["consecutive_failures"] != float64(0) || hook["status"] != "active" {
		t.Errorf("webhook after deliveries: %v", hook)
	}

	t.Run("the log pages by cursor, newest first", func(t *testing.T) {
		pages := w.ts.walkPages(t, agentWebhooksPath+"/"+hook+"/deliveries", "limit=2", apiKey(w.helperKey), func(r *response) string {
			var out []string
			for _, it := range r.list(t) {
				for i, line := range log {
					if line["id"] == it.(map[string]any)["id"] {
						out = append(out, []string{"one", "two", "three"}[i])
					}
				}
			}
			return strings.Join(out, ",")
		})
		if pages != "three,two|one" {
			t.Fatalf("pages %s", pages)
		}
	})
}

// A receiver that is down (nothing listening), then failing (503), then up
// gets every message, in the order they were sent: the first blocks the
// others until it is delivered, and each is retried under one webhook-id.
func TestWebhooksDeliverEverythingInOrderAfterAnOutage(t *testing.T) {
	w := newHookWorld(t, quickRetries)
	addr := apitest.FreeAddr(t)
	d := w.ts.createWebhook(t, w.helperKey, "http://"+addr+"/hook")
	hook, secret := d["id"].(string), d["secret"].(string)
	for _, c := range []string{"m1", "m2", "m3", "m4", "m5"} {
		w.post(t, c, w.helper)
	}

	eventually(t, "three refused attempts at the first message", func() bool {
		return w.log(t, w.helperKey, hook)[0]["attempts"].(float64) >= 3
	})
	log := w.log(t, w.helperKey, hook)
	if first := log[0]; first["status"] != "pending" || first["last_status_code"] != nil ||
		!strings.Contains(first["last_error"].(string), "connection refused") || first["next_attempt_at"] == nil {
		t.Fatalf("the first message while the receiver is down: %v", first)
	}
	for _, line := range log[1:] {
		if line["attempts"] != float64(0) {
			t.Fatalf("a later message was attempted before the first was delivered: %v", line)
		}
	}

	h := newHookReceiverAt(t, addr)
	h.setSecret(secret)
	h.answer = func(n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	eventually(t, "every message delivered", func() bool { return len(h.accepted()) == 5 })
	if got := contents(h.accepted()); got != "m1,m2,m3,m4,m5" {
		t.Fatalf("delivered in the order %s", got)
	}
	all := h.snapshot()
	if contents(all) != "m1,m1,m1,m2,m3,m4,m5" {
		t.Fatalf("requests %s, want m1 twice refused then delivered, then the rest once each", contents(all))
	}
	if all[0].id != all[1].id || all[1].id != all[2].id || all[2].id == all[3].id {
		t.Fatalf("webhook-ids %s %s %s %s: retries must keep the id, messages must not share it", all[0].id, all[1].id, all[2].id, all[3].id)
	}
	for i, r := range all {
		if r.signature != nil {
			t.Errorf("request %d: %v", i+1, r.signature)
		}
	}
	eventually(t, "the log to show every delivery", func() bool { return allDelivered(w.log(t, w.helperKey, hook)) })
	if first := w.log(t, w.helperKey, hook)[0]; first["attempts"].(float64) < 6 || first["last_status_code"] != float64(200) || first["last_error"] != nil {
		t.Fatalf("the first message's line: %v", first)
	}
}

// A receiver that takes its time holds one worker, for its own endpoint
// only: another agent's messages go out meanwhile.
func TestASlowReceiverDoesNotDelayOtherAgents(t *testing.T) {
	w := newHookWorld(t, func(c *Config) { c.Webhooks.Workers = 2 })
	slow, fast := newHookReceiver(t), newHookReceiver(t)
	release := make(chan struct{})
	slow.hold = release
	defer close(release)
	w.register(t, w.helperKey, slow, "/slow")
	w.register(t, w.scoutKey, fast, "/fast")
	for _, c := range []string{"s1", "s2", "s3"} {
		w.post(t, c, w.helper)
	}
	eventually(t, "the slow receiver to be sent the first message", func() bool { return slow.arrived.Load() == 1 })
	start := time.Now()
	w.post(t, "f1", w.scout)
	w.post(t, "f2", w.scout)
	eventually(t, "the other agent's messages", func() bool { return len(fast.accepted()) == 2 })
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the other agent's messages took %v behind a slow receiver", took)
	}
	if got := contents(fast.accepted()); got != "f1,f2" {
		t.Fatalf("the other agent got %s", got)
	}
	if n := slow.arrived.Load(); n != 1 {
		t.Fatalf("the slow receiver was sent %d requests at once, want 1", n)
	}
}

// A SQLite file's one server sends every webhook: it claims none, so a
// send writes nothing to the database beside the record of its attempt.
func TestWebhookSendsOfTheOneServerClaimNothing(t *testing.T) {
	w := newHookWorld(t, nil)
	if w.ts.db.SharesChanges() {
		t.Skip("PostgreSQL's nodes claim what they send (webhooks_cluster_test.go)")
	}
	slow := newHookReceiver(t)
	release := make(chan struct{})
	slow.hold = release
	w.register(t, w.helperKey, slow, "/slow")
	w.post(t, "s1", w.helper)
	eventually(t, "the receiver to be sent the message", func() bool { return slow.arrived.Load() == 1 })
	if n := w.ts.count(t, `SELECT count(*) FROM leases`); n != 0 {
		t.Fatalf("%d leases held while a webhook is sent", n)
	}
	close(release)
	eventually(t, "the message to be accepted", func() bool { return len(slow.accepted()) == 1 })
	if held := w.ts.db.LeasesHeld()["webhook"]; held != 0 {
		t.Fatalf("%d webhook claims held", held)
	}
}

// The queue is in the database: a server stopped while its receiver is
// down delivers everything, in order, once it is started again on the same
// file.
func TestWebhookQueueSurvivesARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chatd.db")
	addr := apitest.FreeAddr(t)
	first, stopFirst := startServerAt(t, path, quickRetries)
	k := &hookWorld{team: newTeam(t, first)}
	d := first.createWebhook(t, k.helperKey, "http://"+addr+"/hook")
	hook, secret := d["id"].(string), d["secret"].(string)
	for _, c := range []string{"r1", "r2", "r3"} {
		k.post(t, c, k.helper)
	}
	eventually(t, "an attempt at the first message", func() bool { return k.log(t, k.helperKey, hook)[0]["attempts"].(float64) >= 1 })
	stopFirst()

	h := newHookReceiverAt(t, addr)
	h.setSecret(secret)
	second, _ := startServerAt(t, path, quickRetries)
	k.ts = second
	eventually(t, "every message delivered after the restart", func() bool { return len(h.accepted()) == 3 })
	if got := contents(h.snapshot()); got != "r1,r2,r3" {
		t.Fatalf("after the restart: %s", got)
	}
	log := k.log(t, k.helperKey, hook)
	for i, r := range h.snapshot() {
		if r.signature != nil || r.id != log[i]["id"] {
			t.Errorf("request %d: %v, id %s, the log's %s", i+1, r.signature, r.id, log[i]["id"])
		}
	}
}

// startServerAt starts a server on the database at path (a SQLite file,
// or a PostgreSQL URL), as newTestServerWith does on a new one; stop ends
// it (as the test's end does).
func startServerAt(t *testing.T, path string, configure func(*Config)) (ts *testServer, stop func()) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := store.Open(path, store.Options{Schema: testSchema, PostgresSchema: testPostgresSchema, Logger: logger, Sync: store.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{DB: db, Logger: logger, Version: "test", DisableAuthFailureLimit: true}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	oas, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	ts = &testServer{t: t, db: db, srv: srv, http: httptest.NewServer(srv.Handler()), oas: oas}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Close()
			ts.http.Close()
			db.Close()
		})
	}
	t.Cleanup(stop)
	return ts, stop
}

// An endpoint whose attempts keep failing is paused, with the reason, and
// is sent nothing until it is resumed; then its queue goes out in order.
func TestWebhooksPauseAfterARunOfFailuresUntilResumed(t *testing.T) {
	w := newHookWorld(t, func(c *Config) { quickRetries(c); c.Webhooks.PauseAfter = 3 })
	h := newHookReceiver(t)
	var up sync.Mutex
	failing := true
	h.answer = func(int) int {
		up.Lock()
		defer up.Unlock()
		if failing {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	hook := w.register(t, w.helperKey, h, "/flaky")
	w.post(t, "p1", w.helper)
	w.post(t, "p2", w.helper)

	eventually(t, "the webhook to pause", func() bool { return w.hook(t, w.helperKey, hook)["status"] == "paused" })
	paused := w.hook(t, w.helperKey, hook)
	if reason := paused["pause_reason"].(string); !strings.Contains(reason, "3 failed attempts in a row") ||
		!strings.Contains(reason, "500 Internal Server Error") || paused["paused_at"] == nil || paused["consecutive_failures"] != float64(3) {
		t.Fatalf("paused: %v", paused)
	}
	time.Sleep(300 * time.Millisecond) // several retry periods
	if n := len(h.snapshot()); n != 3 {
		t.Fatalf("a paused webhook was sent %d requests, want the 3 before the pause", n)
	}

	up.Lock()
	failing = false
	up.Unlock()
	r := w.ts.do(t, "POST", agentWebhooksPath+"/"+hook+"/resume", apiKey(w.helperKey), nil)
	expect(t, r, 200, "")
	if d := r.data(t); d["status"] != "active" || d["pause_reason"] != nil || d["paused_at"] != nil || d["consecutive_failures"] != float64(0) {
		t.Fatalf("resumed: %v", d)
	}
	eventually(t, "the queue to go out", func() bool { return len(h.accepted()) == 2 })
	if got := contents(h.snapshot()); got != "p1,p1,p1,p1,p2" {
		t.Fatalf("requests %s", got)
	}

	t.Run("410 Gone pauses at once", func(t *testing.T) {
		gone := newHookReceiver(t)
		gone.answer = func(int) int { return http.StatusGone }
		id := w.register(t, w.scoutKey, gone, "/gone")
		w.post(t, "g1", w.scout)
		eventually(t, "the webhook to pause", func() bool { return w.hook(t, w.scoutKey, id)["status"] == "paused" })
		if reason := w.hook(t, w.scoutKey, id)["pause_reason"]; !strings.Contains(reason.(string), "410 Gone") {
			t.Fatalf("reason %v", reason)
		}
		if line := w.log(t, w.scoutKey, id)[0]; line["status"] != "pending" || line["attempts"] != float64(1) {
			t.Fatalf("the message after 410: %v", line)
		}
	})
}

// The address is checked again when sending, after resolution: a webhook
// that leads to a metadata address (here stored behind the API's back, as a
// name resolving there would arrive) is refused at the connection, and the
// log says so.
func TestWebhooksRefuseMetadataAddressesWhenSending(t *testing.T) {
	w := newHookWorld(t, quickRetries)
	hook := w.ts.createWebhook(t, w.helperKey, "http://127.0.0.1:9/placeholder")["id"].(string)
	w.ts.exec(t, `UPDATE webhook_endpoints SET url = 'http://169.254.169.254/latest/meta-data/' WHERE id = ?`, hook)
	w.post(t, "secret-please", w.helper)
	eventually(t, "an attempt", func() bool { return w.log(t, w.helperKey, hook)[0]["attempts"].(float64) >= 1 })
	line := w.log(t, w.helperKey, hook)[0]
	if line["last_error"] != "169.254.169.254 is a cloud metadata address, which webhooks may not reach" || line["last_status_code"] != nil {
		t.Fatalf("the attempt: %v", line)
	}
}

// The retry schedule with the defaults: the first retry within about 5 s,
// then four times longer each time up to 2 h, a receiver's Retry-After
// when it asks for longer, and nothing more a day after the message.
func TestWebhookRetrySchedule(t *testing.T) {
	d := &webhookDispatcher{cfg: WebhookConfig{}.withDefaults()}
	now := time.Now()
	failed := webhook.Result{StatusCode: 500, Err: errors.New("the receiver answered 500 Internal Server Error"), Latency: time.Millisecond}
	send := func(attempts int, age time.Duration) *store.WebhookSend {
		return &store.WebhookSend{DeliveryID: "d", EndpointID: "e", Attempts: attempts, InsertedAt: now.Add(-age)}
	}
	within := func(t *testing.T, a store.WebhookAttempt, lo, hi time.Duration) {
		t.Helper()
		if wait := time.Until(a.RetryAt); a.RetryAt.IsZero() || wait < lo-time.Second || wait > hi {
			t.Fatalf("retry in %v, want %v..%v", wait, lo, hi)
		}
	}
	t.Run("the first retry", func(t *testing.T) { within(t, d.outcome(send(0, 0), now, failed), 4*time.Second, 6*time.Second) })
	t.Run("the third", func(t *testing.T) {
		within(t, d.outcome(send(2, time.Minute), now, failed), 64*time.Second, 96*time.Second)
	})
	t.Run("the tenth, at the cap", func(t *testing.T) {
		within(t, d.outcome(send(9, 5*time.Hour), now, failed), 96*time.Minute, 144*time.Minute)
	})
	t.Run("a day on, given up", func(t *testing.T) {
		if a := d.outcome(send(17, 23*time.Hour+59*time.Minute), now, failed); !a.RetryAt.IsZero() || a.Error == "" {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("Retry-After", func(t *testing.T) {
		busy := failed
		busy.StatusCode, busy.RetryAfter = 503, 10*time.Minute
		within(t, d.outcome(send(0, 0), now, busy), 10*time.Minute, 10*time.Minute)
	})
	t.Run("410 pauses", func(t *testing.T) {
		gone := failed
		gone.StatusCode = 410
		if a := d.outcome(send(0, 0), now, gone); a.PauseNow == "" || a.RetryAt.IsZero() {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("success", func(t *testing.T) {
		if a := d.outcome(send(3, time.Hour), now, webhook.Result{StatusCode: 200}); a.Error != "" || !a.RetryAt.IsZero() || a.PauseNow != "" {
			t.Fatalf("%+v", a)
		}
	})
}

// The operator's lists: a denied range is refused when registering and
// when sending; an allowed one is reachable though refused by default.
func TestWebhookAddressListsOfTheOperator(t *testing.T) {
	w := newHookWorld(t, func(c *Config) {
		quickRetries(c)
		c.Webhooks.Deny = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		c.Webhooks.Allow = []netip.Prefix{netip.MustParsePrefix("169.254.7.0/24")}
	})
	r := w.ts.do(t, "POST", agentWebhooksPath, apiKey(w.helperKey), webhookRequest("http://127.0.0.1:9/denied", ""))
	expect(t, r, 422, "validation_error")
	if got := errorDetails(t, r)["/webhook/url"].([]any)[0]; got != "leads to 127.0.0.1, in a range this server denies webhooks, which webhooks may not reach" {
		t.Fatalf("%q", got)
	}
	w.ts.createWebhook(t, w.helperKey, "http://169.254.7.7/allowed")

	receiver := newHookReceiver(t) // on 127.0.0.1, which is denied
	hook := w.ts.createWebhook(t, w.scoutKey, "http://[::1]:9/placeholder")["id"].(string)
	w.ts.exec(t, `UPDATE webhook_endpoints SET url = ? WHERE id = ?`, receiver.srv.URL+"/denied", hook)
	w.post(t, "nope", w.scout)
	eventually(t, "an attempt", func() bool { return w.log(t, w.scoutKey, hook)[0]["attempts"].(float64) >= 1 })
	if line := w.log(t, w.scoutKey, hook)[0]; !strings.HasSuffix(line["last_error"].(string), "in a range this server denies webhooks, which webhooks may not reach") {
		t.Fatalf("the attempt: %v", line)
	}
	if n := receiver.arrived.Load(); n != 0 {
		t.Fatalf("the denied receiver was sent %d requests", n)
	}
}
