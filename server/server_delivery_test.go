package server

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// The agent delivery workflow: GET .../messages/next, then /processing and
// /processed or /failed per message (spec "Message delivery status (per
// agent)" and "Agent message workflow"; wire contract §3.1 Messages, §6.1).

// deliveryWorld is a world for delivery tests: alice owns a poster agent, which
// creates rooms and mentions a worker agent in them; a bystander agent sits
// in the rooms without being mentioned; an outsider agent is in none.
type deliveryWorld struct {
	ts                              *testServer
	owner                           *store.User
	ownerKey                        string
	poster, worker, bystander, away *store.Agent
	posterKey, workerKey, awayKey   string
	bystanderKey                    string
}

func newDeliveryWorld(t *testing.T, opts ...func(*store.Options)) *deliveryWorld {
	t.Helper()
	return newDeliveryWorldOn(t, newTestServer(t, opts...))
}

func newDeliveryWorldOn(t *testing.T, ts *testServer) *deliveryWorld {
	t.Helper()
	k := &deliveryWorld{ts: ts}
	k.owner, k.ownerKey = k.ts.user("alice")
	k.poster, k.posterKey = k.ts.agent(k.owner, "Poster")
	k.worker, k.workerKey = k.ts.agent(k.owner, "Worker")
	k.bystander, k.bystanderKey = k.ts.agent(k.owner, "Bystander")
	k.away, k.awayKey = k.ts.agent(k.owner, "Outsider")
	return k
}

// room creates a room as the poster and adds the worker and the bystander.
func (k *deliveryWorld) room(t testing.TB) string {
	t.Helper()
	return k.ts.room(t, k.posterKey, k.worker.ID, k.bystander.ID)
}

// post sends a text message from the poster mentioning one agent and
// returns the message id.
func (k *deliveryWorld) post(t testing.TB, room string, mention *store.Agent) string {
	t.Helper()
	r := k.ts.do(t, "POST", "/api/v1/agent/chats/"+room+"/messages", apiKey(k.posterKey),
		map[string]any{"message": map[string]any{"content": "hi", "mentions": []any{map[string]any{"id": mention.ID}}}})
	expect(t, r, 201, "")
	return r.data(t)["id"].(string)
}

func deliveryPath(room, msg, action string) string {
	return "/api/v1/agent/chats/" + room + "/messages/" + msg + "/" + action
}

// mark posts /processing, /processed or /failed as the worker.
func (k *deliveryWorld) mark(t testing.TB, room, msg, action string, body any) *response {
	t.Helper()
	return k.ts.do(t, "POST", deliveryPath(room, msg, action), apiKey(k.workerKey), body)
}

// failBody is the body of /failed.
func failBody(reason string) map[string]any { return map[string]any{"error": reason} }

// bodyFor is a valid body for action.
func markBody(action string) any {
	if action == "failed" {
		return failBody("boom")
	}
	return nil
}

// next is GET .../messages/next as the agent with key. Its 204 is checked
// apart: the OpenAPI document describes it in the operation's prose but does
// not list it among the responses.
func (k *deliveryWorld) next(t testing.TB, key, room string) *response {
	t.Helper()
	return k.ts.doNoContent(t, "GET", "/api/v1/agent/chats/"+room+"/messages/next", apiKey(key))
}

// nextID is the id /next serves the worker, "" for 204.
func (k *deliveryWorld) nextID(t testing.TB, room string) string {
	t.Helper()
	r := k.next(t, k.workerKey, room)
	switch r.status {
	case 204:
		return ""
	case 200:
		return r.data(t)["id"].(string)
	}
	t.Fatalf("/next: status %d: %s", r.status, r.body)
	return ""
}

// listIDs lists the worker's messages with a status filter ("" for none),
// in order.
func (k *deliveryWorld) listIDs(t testing.TB, room, status string) []string {
	t.Helper()
	path := "/api/v1/agent/chats/" + room + "/messages?limit=100"
	if status != "" {
		path += "&status=" + status
	}
	r := k.ts.do(t, "GET", path, apiKey(k.workerKey), nil)
	expect(t, r, 200, "")
	ids := []string{}
	for _, m := range r.list(t) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	return ids
}

// deliveryState is the worker's delivery state of one message.
type deliveryState struct {
	Status         string          `json:"status"`
	CurrentAttempt int             `json:"current_attempt"`
	Attempts       []store.Attempt `json:"attempts"`
	ProcessedAt    *string         `json:"processed_at"`
}

// findMessage returns the metadata of message id in a listing.
func messageMetadata(t testing.TB, r *response, id string) map[string]any {
	t.Helper()
	for _, m := range r.list(t) {
		if m := m.(map[string]any); m["id"] == id {
			return m["metadata"].(map[string]any)
		}
	}
	t.Fatalf("message %s is not in %s", id, r.body)
	return nil
}

// state reads the worker's delivery state of msg from both views: the
// human history (metadata.delivery_status[worker]) and the worker's own
// listing (metadata.status, current_attempt, attempts at the top level).
// The two must agree.
func (k *deliveryWorld) state(t testing.TB, room, msg string) deliveryState {
	t.Helper()
	r := k.ts.do(t, "GET", "/api/v1/me/chats/"+room+"/messages?limit=100", apiKey(k.ownerKey), nil)
	expect(t, r, 200, "")
	statuses, ok := messageMetadata(t, r, msg)["delivery_status"].(map[string]any)
	if !ok {
		t.Fatalf("no delivery_status in the human view: %s", r.body)
	}
	if len(statuses) != 1 || statuses[k.worker.ID] == nil {
		t.Fatalf("delivery_status = %v, want one entry, for the worker", statuses)
	}
	var human deliveryState
	remarshal(t, statuses[k.worker.ID], &human)

	r = k.ts.do(t, "GET", "/api/v1/agent/chats/"+room+"/messages?status=all&limit=100", apiKey(k.workerKey), nil)
	expect(t, r, 200, "")
	var own deliveryState
	remarshal(t, messageMetadata(t, r, msg), &own)
	own.ProcessedAt = human.ProcessedAt // the agent view has no processed_at of its own
	if !jsonEqual(t, own, human) {
		t.Fatalf("the agent view %+v and the human view %+v disagree", own, human)
	}
	return human
}

// outcome checks a /processing, /processed or /failed answer.
func expectOutcome(t testing.TB, r *response, msg, status string, attempt int) {
	t.Helper()
	expect(t, r, 200, "")
	d := r.data(t)
	want := map[string]any{"id": msg, "status": status, "attempt_number": float64(attempt), "success": true}
	if !jsonEqual(t, d, want) {
		t.Fatalf("outcome = %v, want %v", d, want)
	}
}

// TestDeliveryStateTable walks every row of the spec's state table (and the
// store's "anything else" row) on a fresh message each. The spec's "none"
// (no delivery status yet) reads as "pending" in the API.
func TestDeliveryStateTable(t *testing.T) {
	t.Parallel() // its own server and database
	k := newDeliveryWorld(t)
	for _, tc := range []struct {
		name    string
		setup   []string // actions bringing the message to the starting state
		trigger string
		status  int    // answer to the trigger
		code    string // its error code
		// the state afterwards (on 200) or the unchanged state (on 422)
		after   string
		attempt int
		check   func(k *deliveryWorld, t *testing.T, room, msg string, before, after deliveryState)
	}{
		{name: "none → processing", trigger: "processing", status: 200, after: "processing", attempt: 1,
			check: (*deliveryWorld).startsTheFirstAttempt},
		{name: "processing → processing while live is a no-op", setup: []string{"processing"}, trigger: "processing",
			status: 200, after: "processing", attempt: 1,
			check: (*deliveryWorld).changedNothing},
		{name: "processing → processed", setup: []string{"processing"}, trigger: "processed",
			status: 200, after: "processed", attempt: 1,
			check: (*deliveryWorld).isProcessed},
		{name: "processing → failed", setup: []string{"processing"}, trigger: "failed",
			status: 200, after: "failed", attempt: 1,
			check: (*deliveryWorld).failedForARetry},
		{name: "failed → processing starts a fresh attempt", setup: []string{"processing", "failed"}, trigger: "processing",
			status: 200, after: "processing", attempt: 2,
			check: (*deliveryWorld).startsAFreshAttempt},
		{name: "processed → processing reopens the message", setup: []string{"processing", "processed"}, trigger: "processing",
			status: 200, after: "processing", attempt: 2,
			check: (*deliveryWorld).isReopened},
		{name: "processing → failed → processing → processed", setup: []string{"processing", "failed", "processing"},
			trigger: "processed", status: 200, after: "processed", attempt: 2},
		// No active attempt: 422, nothing changes.
		{name: "none → processed", trigger: "processed", status: 422, code: "no_active_attempt", after: "pending"},
		{name: "none → failed", trigger: "failed", status: 422, code: "no_active_attempt", after: "pending"},
		{name: "failed → processed", setup: []string{"processing", "failed"}, trigger: "processed",
			status: 422, code: "no_active_attempt", after: "failed", attempt: 1},
		{name: "failed → failed", setup: []string{"processing", "failed"}, trigger: "failed",
			status: 422, code: "no_active_attempt", after: "failed", attempt: 1},
		{name: "processed → processed", setup: []string{"processing", "processed"}, trigger: "processed",
			status: 422, code: "no_active_attempt", after: "processed", attempt: 1},
		{name: "processed → failed", setup: []string{"processing", "processed"}, trigger: "failed",
			status: 422, code: "no_active_attempt", after: "processed", attempt: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			room := k.room(t)
			msg := k.post(t, room, k.worker)
			for _, a := range tc.setup {
				expect(t, k.mark(t, room, msg, a, markBody(a)), 200, "")
			}
			before := k.state(t, room, msg)
			snap := k.ts.snapshot(t)
			r := k.mark(t, room, msg, tc.trigger, markBody(tc.trigger))
			after := k.state(t, room, msg)
			if tc.status == 200 {
				expectOutcome(t, r, msg, tc.after, tc.attempt)
			} else {
				expect(t, r, tc.status, tc.code)
				k.ts.unchanged(t, snap)
			}
			if after.Status != tc.after || after.CurrentAttempt != tc.attempt || len(after.Attempts) != tc.attempt {
				t.Fatalf("state = %+v, want status %s at attempt %d", after, tc.after, tc.attempt)
			}
			if tc.trigger == "processing" && before.Status == "processing" {
				// "no-op: no new attempt, no timestamp reset": not a byte changes.
				k.ts.unchanged(t, snap)
			}
			if tc.check != nil {
				tc.check(k, t, room, msg, before, after)
			}
		})
	}
}

// startsTheFirstAttempt: the first attempt starts, and the message is still
// served and listed.
func (k *deliveryWorld) startsTheFirstAttempt(t *testing.T, room, msg string, _, s deliveryState) {
	if len(s.Attempts) != 1 {
		t.Fatalf("attempts = %+v", s.Attempts)
	}
	a := s.Attempts[0]
	if a.AttemptNumber != 1 || a.Status != "processing" || a.StartedAt == "" || a.CompletedAt != nil || a.Error != nil {
		t.Fatalf("attempt = %+v", a)
	}
	if _, err := time.Parse(time.RFC3339Nano, a.StartedAt); err != nil {
		t.Fatalf("started_at %q: %v", a.StartedAt, err)
	}
	// A message in processing is still served (a crashed worker's).
	if got := k.nextID(t, room); got != msg {
		t.Fatalf("/next = %q, want the processing message", got)
	}
	if !slices.Contains(k.listIDs(t, room, ""), msg) || !slices.Contains(k.listIDs(t, room, "processing"), msg) {
		t.Fatal("a processing message left the default or processing listing")
	}
}

// changedNothing: the no-op left the delivery as it was.
func (k *deliveryWorld) changedNothing(t *testing.T, _, _ string, before, s deliveryState) {
	if !jsonEqual(t, before, s) {
		t.Fatalf("the no-op changed the delivery: before %+v, after %+v", before, s)
	}
}

// isProcessed: the attempt is completed, processed_at set, and the message
// neither served nor listed as pending.
func (k *deliveryWorld) isProcessed(t *testing.T, room, msg string, before, s deliveryState) {
	a := s.Attempts[0]
	if len(s.Attempts) != 1 || a.Status != "processed" || a.CompletedAt == nil || a.Error != nil ||
		a.StartedAt != before.Attempts[0].StartedAt {
		t.Fatalf("attempts = %+v", s.Attempts)
	}
	if s.ProcessedAt == nil {
		t.Fatal("processed_at not set")
	}
	if got := k.nextID(t, room); got != "" {
		t.Fatalf("/next served %s after /processed", got)
	}
	if slices.Contains(k.listIDs(t, room, ""), msg) || slices.Contains(k.listIDs(t, room, "pending"), msg) {
		t.Fatal("a processed message stayed in the default or pending listing")
	}
	if !slices.Contains(k.listIDs(t, room, "processed"), msg) || !slices.Contains(k.listIDs(t, room, "all"), msg) {
		t.Fatal("a processed message is missing from ?status=processed or ?status=all")
	}
}

// failedForARetry: the attempt failed with its error, and the message stays
// available for a retry.
func (k *deliveryWorld) failedForARetry(t *testing.T, room, msg string, _, s deliveryState) {
	a := s.Attempts[0]
	if len(s.Attempts) != 1 || a.Status != "failed" || a.CompletedAt == nil || a.Error == nil || *a.Error != "boom" {
		t.Fatalf("attempts = %+v", s.Attempts)
	}
	if s.ProcessedAt != nil {
		t.Fatal("a failed message has processed_at")
	}
	// It stays available for a retry.
	if got := k.nextID(t, room); got != msg {
		t.Fatalf("/next = %q, want the failed message", got)
	}
	for _, f := range []string{"", "failed", "pending", "all"} {
		if !slices.Contains(k.listIDs(t, room, f), msg) {
			t.Fatalf("a failed message is missing from the listing with status=%q", f)
		}
	}
}

// startsAFreshAttempt: a second attempt starts beside the failed one.
func (k *deliveryWorld) startsAFreshAttempt(t *testing.T, _, _ string, before, s deliveryState) {
	if len(s.Attempts) != 2 || !jsonEqual(t, s.Attempts[0], before.Attempts[0]) ||
		s.Attempts[1].AttemptNumber != 2 || s.Attempts[1].Status != "processing" || s.Attempts[1].CompletedAt != nil {
		t.Fatalf("attempts = %+v", s.Attempts)
	}
}

// isReopened: the message is open again: a second attempt, no processed_at,
// served and listed.
func (k *deliveryWorld) isReopened(t *testing.T, room, msg string, before, s deliveryState) {
	if len(s.Attempts) != 2 || !jsonEqual(t, s.Attempts[0], before.Attempts[0]) || s.Attempts[1].Status != "processing" {
		t.Fatalf("attempts = %+v", s.Attempts)
	}
	if s.ProcessedAt != nil {
		t.Fatal("a reopened message keeps processed_at")
	}
	if got := k.nextID(t, room); got != msg {
		t.Fatalf("/next = %q, want the reopened message", got)
	}
	if !slices.Contains(k.listIDs(t, room, ""), msg) {
		t.Fatal("a reopened message is missing from the default listing")
	}
}

func TestDeliveryFailedNeedsAnError(t *testing.T) {
	k := newDeliveryWorld(t)
	room := k.room(t)
	msg := k.post(t, room, k.worker)
	expect(t, k.mark(t, room, msg, "processing", nil), 200, "")
	failed := func(name string, body any, status int, code string, pointers ...string) scenario {
		return refusalCase(name, apiKey(k.workerKey), "POST", deliveryPath(room, msg, "failed"), body, status, code, pointers...)
	}
	k.ts.run(t, []scenario{
		failed("no body", nil, 422, "validation_error", "/error"),
		failed("empty object", map[string]any{}, 422, "validation_error", "/error"),
		failed("null error", map[string]any{"error": nil}, 422, "validation_error", "/error"),
		failed("empty error", failBody(""), 422, "validation_error", "/error"),
		failed("blank error", failBody("   "), 422, "validation_error", "/error"),
		failed("error of the wrong type", map[string]any{"error": 42}, 422, "validation_error", "/error"),
		failed("error too long", failBody(strings.Repeat("e", store.MaxErrorLen+1)), 422, "validation_error", "/error"),
		failed("unknown field", map[string]any{"error": "boom", "retry": true}, 400, "unknown_field", "/retry"),
		failed("not JSON", "{", 400, "invalid_json"),
	})
	// The longest error is accepted, as is one with surrounding blanks
	// (recorded trimmed).
	expectOutcome(t, k.mark(t, room, msg, "failed", failBody("  boom \n")), msg, "failed", 1)
	if e := k.state(t, room, msg).Attempts[0].Error; e == nil || *e != "boom" {
		t.Fatalf("error recorded as %v", e)
	}
	expect(t, k.mark(t, room, msg, "processing", nil), 200, "")
	expectOutcome(t, k.mark(t, room, msg, "failed", failBody(strings.Repeat("é", store.MaxErrorLen))), msg, "failed", 2)
}

// TestDeliveryBodies: /processing and /processed take no body or {} (the jam
// client sends {}); anything else is refused before the state changes.
func TestDeliveryBodies(t *testing.T) {
	k := newDeliveryWorld(t)
	room := k.room(t)
	for _, body := range []any{nil, "", map[string]any{}, "{}", " { } "} {
		msg := k.post(t, room, k.worker)
		expectOutcome(t, k.mark(t, room, msg, "processing", body), msg, "processing", 1)
		expectOutcome(t, k.mark(t, room, msg, "processed", body), msg, "processed", 1)
	}
	msg := k.post(t, room, k.worker)
	for _, action := range []string{"processing", "processed"} {
		refused := func(name string, body any, code string) scenario {
			return refusalCase(action+", "+name, apiKey(k.workerKey), "POST", deliveryPath(room, msg, action), body, 400, code)
		}
		k.ts.run(t, []scenario{
			refused("a status", map[string]any{"status": "processing"}, "unknown_field"),
			refused("an error", map[string]any{"error": "boom"}, "unknown_field"),
			refused("half an object", "{", "invalid_json"),
			refused("two objects", "{}{}", "invalid_json"),
		})
		expect(t, k.mark(t, room, msg, action, map[string]any{}), 200, "")
	}
}

// TestDeliveryNext: /next serves the oldest message not processed, and 204
// when there is none; a stuck processing message is served again, oldest
// first (crash recovery).
func TestDeliveryNext(t *testing.T) {
	k := newDeliveryWorld(t)
	room := k.room(t)
	if got := k.nextID(t, room); got != "" {
		t.Fatalf("/next on an empty room = %s", got)
	}
	m1 := k.post(t, room, k.worker)
	theirs := k.post(t, room, k.bystander) // not the worker's
	m2 := k.post(t, room, k.worker)
	m3 := k.post(t, room, k.worker)

	r := k.next(t, k.workerKey, room)
	expect(t, r, 200, "")
	d := r.data(t)
	meta := d["metadata"].(map[string]any)
	if d["id"] != m1 || d["chat_room_id"] != room || d["message_type"] != "text" || d["sender_id"] != k.poster.ID ||
		meta["status"] != "pending" || meta["current_attempt"] != float64(0) {
		t.Fatalf("/next = %s", r.body)
	}

	// A worker takes m1 and crashes: m1 is served again, before m2.
	expect(t, k.mark(t, room, m1, "processing", nil), 200, "")
	if got := k.nextID(t, room); got != m1 {
		t.Fatalf("/next = %s, want the stuck m1", got)
	}
	// The restarted worker reclaims it: still attempt 1 (the attempt is live).
	expectOutcome(t, k.mark(t, room, m1, "processing", nil), m1, "processing", 1)
	expectOutcome(t, k.mark(t, room, m1, "processed", nil), m1, "processed", 1)
	// m2 fails and stays first in line; m3 waits behind it.
	expect(t, k.mark(t, room, m2, "processing", nil), 200, "")
	expect(t, k.mark(t, room, m2, "failed", failBody("boom")), 200, "")
	expect(t, k.mark(t, room, m3, "processing", nil), 200, "")
	if got := k.nextID(t, room); got != m2 {
		t.Fatalf("/next = %s, want the failed m2", got)
	}
	if got := k.listIDs(t, room, ""); !slices.Equal(got, []string{m2, m3}) {
		t.Fatalf("default listing = %v, want [m2 m3]", got)
	}
	expect(t, k.mark(t, room, m2, "processing", nil), 200, "")
	expect(t, k.mark(t, room, m2, "processed", nil), 200, "")
	expect(t, k.mark(t, room, m3, "processed", nil), 200, "")
	if got := k.nextID(t, room); got != "" {
		t.Fatalf("/next = %s after everything was processed", got)
	}
	// The bystander's own queue is untouched by the worker's work.
	r = k.next(t, k.bystanderKey, room)
	expect(t, r, 200, "")
	if r.data(t)["id"] != theirs {
		t.Fatalf("the bystander was served %s, want its own message", r.data(t)["id"])
	}
	// The poster is mentioned by nothing.
	expect(t, k.next(t, k.posterKey, room), 204, "")
}

// TestDeliveryNotFound: a message the agent cannot see in the room, and a
// room it is not in, are 404 on every delivery endpoint, and nothing
// changes.
func TestDeliveryNotFound(t *testing.T) {
	k := newDeliveryWorld(t)
	room, other := k.room(t), k.room(t)
	mine := k.post(t, room, k.worker)
	elsewhere := k.post(t, other, k.worker) // mentions the worker, in another room
	notMine := k.post(t, room, k.bystander)
	// Only a mention of kind "mention" delivers; a reference does not.
	r := k.ts.do(t, "POST", "/api/v1/agent/chats/"+room+"/messages", apiKey(k.posterKey), map[string]any{"message": map[string]any{
		"content": "see @alice/worker", "mentions": []any{
			map[string]any{"id": k.bystander.ID},
			map[string]any{"id": k.worker.ID, "kind": "reference"},
		}}})
	expect(t, r, 201, "")
	referenced := r.data(t)["id"].(string)
	cases := []struct {
		name, key, room, msg string
	}{
		{"unknown message id", k.workerKey, room, "0190a000-0000-7000-8000-000000000000"},
		{"malformed message id", k.workerKey, room, "not-a-uuid"},
		{"message of another room that mentions the agent", k.workerKey, room, elsewhere},
		{"message in the room that does not mention the agent", k.workerKey, room, notMine},
		{"message that only references the agent", k.workerKey, room, referenced},
		{"the sender's own message", k.posterKey, room, mine},
		{"room the agent is not in", k.awayKey, room, mine},
		{"unknown room", k.workerKey, "0190a000-0000-7000-8000-000000000000", mine},
		{"malformed room id", k.workerKey, "nope", mine},
	}
	var refusals []scenario
	for _, tc := range cases {
		for _, action := range []string{"processing", "processed", "failed"} {
			refusals = append(refusals, refusalCase(tc.name+", "+action, apiKey(tc.key), "POST", deliveryPath(tc.room, tc.msg, action), markBody(action), 404, "not_found"))
		}
	}
	k.ts.run(t, refusals)
	expect(t, k.next(t, k.awayKey, room), 404, "not_found")
	expect(t, k.ts.do(t, "GET", "/api/v1/agent/chats/"+room+"/messages", apiKey(k.awayKey), nil), 404, "not_found")
	expect(t, k.next(t, k.workerKey, "0190a000-0000-7000-8000-000000000000"), 404, "not_found")
	// The worker's own message is still untouched and first in line.
	if got := k.nextID(t, room); got != mine {
		t.Fatalf("/next = %s", got)
	}
}

// TestDeliveryHumanView follows metadata.delivery_status in the human
// history (and metadata.status/attempts in the agent's listing) through a
// full retry cycle.
func TestDeliveryHumanView(t *testing.T) {
	k := newDeliveryWorld(t)
	room := k.room(t)
	msg := k.post(t, room, k.worker)
	attempt := func(n int, status string, err *string) store.Attempt {
		return store.Attempt{AttemptNumber: n, Status: status, Error: err}
	}
	boom := "boom"
	for _, st := range []struct {
		action   string
		status   string
		attempts []store.Attempt
	}{
		{"", "pending", nil},
		{"processing", "processing", []store.Attempt{attempt(1, "processing", nil)}},
		{"failed", "failed", []store.Attempt{attempt(1, "failed", &boom)}},
		{"processing", "processing", []store.Attempt{attempt(1, "failed", &boom), attempt(2, "processing", nil)}},
		{"processed", "processed", []store.Attempt{attempt(1, "failed", &boom), attempt(2, "processed", nil)}},
		{"processing", "processing", []store.Attempt{attempt(1, "failed", &boom), attempt(2, "processed", nil), attempt(3, "processing", nil)}},
	} {
		if st.action != "" {
			expect(t, k.mark(t, room, msg, st.action, markBody(st.action)), 200, "")
		}
		s := k.state(t, room, msg)
		if s.Status != st.status || s.CurrentAttempt != len(st.attempts) || len(s.Attempts) != len(st.attempts) {
			t.Fatalf("after %s: state %+v, want %s with %d attempts", st.action, s, st.status, len(st.attempts))
		}
		if (s.ProcessedAt != nil) != (st.status == "processed") {
			t.Fatalf("after %s: processed_at = %v", st.action, s.ProcessedAt)
		}
		for i, a := range s.Attempts {
			w := st.attempts[i]
			if a.AttemptNumber != w.AttemptNumber || a.Status != w.Status || !jsonEqual(t, a.Error, w.Error) ||
				a.StartedAt == "" || (a.CompletedAt == nil) != (a.Status == "processing") {
				t.Fatalf("after %s: attempt %d = %+v, want %+v", st.action, i, a, w)
			}
			if a.CompletedAt != nil && *a.CompletedAt < a.StartedAt {
				t.Fatalf("attempt %+v completed before it started", a)
			}
		}
	}
}

// TestDeliveryAttemptTimeout: a /processing after the attempt timeout
// closes the old attempt as failed (abandoned) and starts a new one.
func TestDeliveryAttemptTimeout(t *testing.T) {
	k := newDeliveryWorld(t, func(o *store.Options) { o.AttemptTimeout = 50 * time.Millisecond })
	room := k.room(t)
	msg := k.post(t, room, k.worker)
	expectOutcome(t, k.mark(t, room, msg, "processing", nil), msg, "processing", 1)
	time.Sleep(120 * time.Millisecond)
	expectOutcome(t, k.mark(t, room, msg, "processing", nil), msg, "processing", 2)
	s := k.state(t, room, msg)
	if len(s.Attempts) != 2 {
		t.Fatalf("attempts = %+v", s.Attempts)
	}
	old, cur := s.Attempts[0], s.Attempts[1]
	if old.Status != "failed" || old.CompletedAt == nil || old.Error == nil || !strings.HasPrefix(*old.Error, "abandoned") {
		t.Fatalf("the timed-out attempt = %+v, want failed with an abandoned error", old)
	}
	if cur.AttemptNumber != 2 || cur.Status != "processing" || cur.CompletedAt != nil || cur.StartedAt < *old.CompletedAt {
		t.Fatalf("the new attempt = %+v", cur)
	}
	// The new attempt completes normally.
	expectOutcome(t, k.mark(t, room, msg, "processed", nil), msg, "processed", 2)
}

// TestDeliveryTwoWorkersOneKey: two workers drain one agent's queue
// concurrently. Delivery is at least once: nothing is lost, duplicates are
// allowed.
func TestDeliveryTwoWorkersOneKey(t *testing.T) {
	k := newDeliveryWorld(t)
	room := k.room(t)
	const n = 40
	posted := make([]string, n)
	for i := range posted {
		posted[i] = k.post(t, room, k.worker)
	}

	tally := &deliveryTally{taken: map[string]int{}, processed: map[string]int{}}
	var wg sync.WaitGroup
	for _, name := range []string{"worker A", "worker B"} {
		wg.Add(1)
		go func() { defer wg.Done(); k.drain(t, room, name, 20*n, tally) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	if got := k.listIDs(t, room, "processed"); !slices.Equal(got, posted) {
		t.Fatalf("processed listing has %d messages, want all %d in order", len(got), n)
	}
	if got := k.listIDs(t, room, ""); len(got) != 0 {
		t.Fatalf("default listing still has %v", got)
	}
	expect(t, k.next(t, k.workerKey, room), 204, "")
	duplicates, reopened := 0, 0
	for _, id := range posted {
		if tally.processed[id] == 0 {
			t.Errorf("message %s was never processed successfully", id)
		}
		duplicates += tally.taken[id] - 1
		if tally.processed[id] > 1 {
			reopened++
		}
	}
	t.Logf("%d messages: %d duplicate deliveries (taken by both workers), %d processed again after a stale /processing reopened them, %d /processed lost a race",
		n, duplicates, reopened, tally.lostRaces)
}

// deliveryTally is what two workers sharing one key saw.
type deliveryTally struct {
	mu        sync.Mutex
	taken     map[string]int // /processing answered 200, per message: times a worker took it
	processed map[string]int // successful /processed per message (>1: it was reopened)
	lostRaces int            // /processed refused because the other worker finished first
}

// drain takes and processes what /next serves the worker's key in room
// until it answers 204 (within maxSteps), counting into tally.
func (k *deliveryWorld) drain(t *testing.T, room, name string, maxSteps int, tally *deliveryTally) {
	for steps := 0; steps < maxSteps; steps++ {
		r := k.next(t, k.workerKey, room)
		if r.status == 204 {
			return
		}
		if r.status != 200 {
			t.Errorf("%s: /next status %d: %s", name, r.status, r.body)
			return
		}
		var env struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.body, &env); err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		id := env.Data.ID
		if r := k.mark(t, room, id, "processing", map[string]any{}); r.status != 200 {
			t.Errorf("%s: /processing %s: %d %s", name, id, r.status, r.body)
			return
		}
		tally.mu.Lock()
		tally.taken[id]++
		tally.mu.Unlock()
		r = k.mark(t, room, id, "processed", map[string]any{})
		tally.mu.Lock()
		switch {
		case r.status == 200:
			tally.processed[id]++
		case r.status == 422 && r.errorCode(t) == "no_active_attempt":
			tally.lostRaces++ // the other worker's /processed came first
		default:
			t.Errorf("%s: /processed %s: %d %s", name, id, r.status, r.body)
		}
		tally.mu.Unlock()
	}
	t.Errorf("%s: /next never answered 204", name)
}

// deliveryModel is the state machine of the spec, for one agent and its
// messages: status ("pending" before any attempt) and attempt count.
type deliveryModel struct {
	ids      []string // posting order
	status   map[string]string
	attempts map[string]int
}

// apply runs an action on the model and returns the expected HTTP status,
// delivery status and attempt number.
func (m *deliveryModel) apply(action, id string) (int, string, int) {
	st, ok := m.status[id]
	if !ok {
		return 404, "", 0
	}
	switch action {
	case "processing":
		if st != "processing" {
			m.attempts[id]++
			m.status[id] = "processing"
		}
	case "processed", "failed":
		if st != "processing" {
			return 422, st, m.attempts[id]
		}
		m.status[id] = action
	}
	return 200, m.status[id], m.attempts[id]
}

func (m *deliveryModel) next() string {
	for _, id := range m.ids {
		if m.status[id] != "processed" {
			return id
		}
	}
	return ""
}

// list is the listing with a status filter (see "List messages (agent)").
func (m *deliveryModel) list(filter string) []string {
	out := []string{}
	for _, id := range m.ids {
		st := m.status[id]
		var in bool
		switch filter {
		case "":
			in = st != "processed"
		case "pending":
			in = st == "pending" || st == "failed" // failed has no active attempt
		case "all":
			in = true
		default:
			in = st == filter
		}
		if in {
			out = append(out, id)
		}
	}
	return out
}

// TestDeliveryMatchesModel drives random operations over HTTP and against
// deliveryModel, comparing every answer.
func TestDeliveryMatchesModel(t *testing.T) {
	t.Parallel() // its own server and database
	// A thousand requests with one key as fast as loopback allows: far
	// beyond any agent's pace, so the per-credential limit is off here.
	k := newDeliveryWorldOn(t, newTestServerWith(t, func(c *Config) { c.DisableRateLimit = true }))
	for _, seed := range []int64{1, 2, 3, 20260115} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			room := k.room(t)
			m := &deliveryModel{status: map[string]string{}, attempts: map[string]int{}}
			for range 5 {
				id := k.post(t, room, k.worker)
				m.ids = append(m.ids, id)
				m.status[id] = "pending"
			}
			// Targets the model says are 404: another agent's message.
			targets := append(slices.Clone(m.ids), k.post(t, room, k.bystander))
			filters := []string{"", "pending", "processing", "processed", "failed", "all"}
			names := func(ids []string) string { // m0..m4, and m5 for the bystander's
				var out []string
				for _, id := range ids {
					out = append(out, fmt.Sprintf("m%d", slices.Index(targets, id)))
				}
				return "[" + strings.Join(out, " ") + "]"
			}
			var trace []string
			fail := func(format string, args ...any) {
				t.Helper()
				last := trace[max(0, len(trace)-20):]
				t.Fatalf("seed %d, after ... %s:\n"+format, append([]any{seed, strings.Join(last, " ")}, args...)...)
			}
			for step := range 250 {
				switch op := rng.Intn(10); {
				case op < 6: // a transition
					action := []string{"processing", "processing", "processed", "failed"}[rng.Intn(4)]
					i := rng.Intn(len(targets))
					trace = append(trace, fmt.Sprintf("%s(m%d)", action, i))
					wantCode, wantStatus, wantAttempt := m.apply(action, targets[i])
					r := k.mark(t, room, targets[i], action, markBody(action))
					if r.status != wantCode {
						fail("step %d: %s m%d = %d %s, want %d", step, action, i, r.status, r.body, wantCode)
					}
					if r.status == 200 {
						d := r.data(t)
						if d["status"] != wantStatus || d["attempt_number"] != float64(wantAttempt) {
							fail("step %d: %s m%d = %s, want %s at attempt %d", step, action, i, r.body, wantStatus, wantAttempt)
						}
					}
				case op < 8:
					trace = append(trace, "next")
					if got, want := k.nextID(t, room), m.next(); got != want {
						fail("step %d: /next = %s, want %s", step, names([]string{got}), names([]string{want}))
					}
				default:
					f := filters[rng.Intn(len(filters))]
					trace = append(trace, "list("+f+")")
					if got, want := k.listIDs(t, room, f), m.list(f); !slices.Equal(got, want) {
						fail("step %d: listing status=%q = %s, want %s", step, f, names(got), names(want))
					}
				}
			}
			// Finally, every message's full state.
			for i, id := range m.ids {
				s := k.state(t, room, id)
				if s.Status != m.status[id] || s.CurrentAttempt != m.attempts[id] || len(s.Attempts) != m.attempts[id] {
					fail("m%d: state %+v, want %s at attempt %d", i, s, m.status[id], m.attempts[id])
				}
				for j, a := range s.Attempts {
					if a.AttemptNumber != j+1 || (a.Status == "processing") != (j == len(s.Attempts)-1 && s.Status == "processing") {
						fail("m%d: attempts %+v", i, s.Attempts)
					}
				}
			}
		})
	}
}
