package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/server/webhook"
)

// addedWebhook is the --json output of add-webhook: the webhook as the API
// answers its creation.
type addedWebhook struct {
	ID, URL, Description, Status, Secret string
}

func addWebhook(t testing.TB, db string, flags ...string) addedWebhook {
	t.Helper()
	out := runChatd(t, nil, append(append([]string{"add-webhook", "--db", db}, flags...), "--json")...).ok(t).stdout
	var w addedWebhook
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.ID == "" {
		t.Fatalf("add-webhook --json printed %q (%v)", out, err)
	}
	return w
}

// The webhook commands refuse what the API refuses, with the API's words,
// and change nothing when they do.
func TestWebhookCommandsRefuse(t *testing.T) {
	db, _ := newDatabaseWithAlice(t)
	createUser(t, db, "bob", "Bob")
	registerAgent(t, db, "--owner", "alice", "--name", "Helper", "--description", "Answers questions")
	registerAgent(t, db, "--owner", "bob", "--name", "Rover", "--description", "Fetches what it is asked for")
	hook := addWebhook(t, db, "--agent", "alice/helper", "--url", "http://127.0.0.1:9/hook")

	before := countRows(t, db, "webhook_endpoints")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
		exit int
	}{
		{"no agent", nil, []string{"add-webhook", "--url", "http://127.0.0.1:9/a"}, "--agent is required", 2},
		{"no url", nil, []string{"add-webhook", "--agent", "alice/helper"}, "--url is required", 2},
		{"a person's handle", nil, []string{"add-webhook", "--agent", "alice", "--url", "http://x/"}, "--agent must be an agent's handle", 2},
		{"a bad range", nil, []string{"add-webhook", "--agent", "alice/helper", "--url", "http://x/", "--webhook-deny", "ten"}, `--webhook-deny: "ten" is not an address`, 2},
		{"a bad range in the environment", []string{"CHATD_WEBHOOK_ALLOW=nope"}, []string{"add-webhook", "--agent", "alice/helper", "--url", "http://x/"}, "--webhook-allow", 2},
		{"unknown agent", nil, []string{"add-webhook", "--agent", "alice/rover", "--url", "http://x/"}, "@alice has no agent with the handle alice/rover", 1},
		{"not http", nil, []string{"add-webhook", "--agent", "alice/helper", "--url", "ftp://example.com/"}, "--url must be an http:// or https:// URL", 2},
		{"a credential in the url", nil, []string{"add-webhook", "--agent", "alice/helper", "--url", "http://u:p@example.com/"}, "--url must not carry a user name", 2},
		{"a long description", nil, []string{"add-webhook", "--agent", "alice/helper", "--url", "http://127.0.0.1:9/d", "--description", strings.Repeat("d", 501)}, "--description", 2},
		{"a metadata address", nil, []string{"add-webhook", "--agent", "alice/helper", "--url", "http://169.254.169.254/latest"}, "--url leads to 169.254.169.254, a cloud metadata address, which webhooks may not reach", 2},
		{"a metadata name", nil, []string{"add-webhook", "--agent", "alice/helper", "--url", "http://metadata.google.internal/"}, "the name of a cloud metadata service", 2},
		{"a link-local address", nil, []string{"add-webhook", "--agent", "alice/helper", "--url", "http://[fe80::1]:8080/"}, "a link-local address", 2},
		{"a denied range", nil, []string{"add-webhook", "--agent", "alice/helper", "--url", "http://10.1.2.3/", "--webhook-deny", "10.0.0.0/8"}, "--url leads to 10.1.2.3, in a range this server denies webhooks", 2},
		{"a range denied in the environment", []string{"CHATD_WEBHOOK_DENY=10.0.0.0/8"}, []string{"add-webhook", "--agent", "alice/helper", "--url", "http://10.1.2.3/"}, "in a range this server denies webhooks", 2},
		{"the same url twice", nil, []string{"add-webhook", "--agent", "alice/helper", "--url", hook.URL}, hook.URL + " is already a webhook of Helper (@alice/helper)", 1},
		{"list: no agent", nil, []string{"list-webhooks"}, "--agent is required", 2},
		{"list: stray argument", nil, []string{"list-webhooks", "--agent", "alice/helper", hook.ID}, "takes 0 argument", 2},
		{"remove: no id", nil, []string{"remove-webhook", "--agent", "alice/helper"}, "takes 1 argument", 2},
		{"remove: another agent's", nil, []string{"remove-webhook", "--agent", "bob/rover", hook.ID}, "webhook not found", 1},
		{"remove: not an id", nil, []string{"remove-webhook", "--agent", "alice/helper", "nope"}, "webhook not found", 1},
		{"resume: unknown", nil, []string{"resume-webhook", "--agent", "alice/helper", "01a212ea-55ce-71e1-b7dc-8cd7964d2a7e"}, "webhook not found", 1},
		{"deliveries: a limit too high", nil, []string{"list-webhook-deliveries", "--agent", "alice/helper", hook.ID, "--limit", "101"}, "--limit must be from 1 to 100", 2},
		{"deliveries: another agent's", nil, []string{"list-webhook-deliveries", "--agent", "bob/rover", hook.ID}, "webhook not found", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runChatd(t, tc.env, append(tc.args, "--db", db)...)
			r.failsWithOneLine(t, tc.want)
			if r.code != tc.exit {
				t.Fatalf("exit %d, want %d", r.code, tc.exit)
			}
			if n := countRows(t, db, "webhook_endpoints"); n != before {
				t.Fatalf("%d webhooks after a refusal, want %d", n, before)
			}
		})
	}

	// --webhook-allow opens a range, the link-local one included.
	allowed := addWebhook(t, db, "--agent", "alice/helper", "--url", "http://169.254.10.5/hook", "--webhook-allow", "169.254.10.0/24")
	if allowed.Status != "active" {
		t.Fatalf("allowed = %+v", allowed)
	}
}

// A refused address reads the same from the command line and over HTTP:
// both go through the same check.
func TestWebhookCommandRefusesAsTheAPIDoes(t *testing.T) {
	db, alice := newDatabaseWithAlice(t)
	helper := registerAgent(t, db, "--owner", "alice", "--name", "Helper", "--description", "Answers questions")
	srv := startServer(t, db, "--webhook-deny", "10.0.0.0/8")
	defer srv.stop(t)
	for _, u := range []string{"http://10.9.8.7/hook", "http://169.254.169.254/", "http://[::ffff:169.254.1.1]/"} {
		status, body := srv.call(t, "POST", "/api/v1/me/agents/"+helper.ID+"/webhooks", alice.APIKey,
			map[string]any{"webhook": map[string]any{"url": u}})
		var answer struct {
			Error struct{ Details map[string][]string }
		}
		if status != 422 || json.Unmarshal(body, &answer) != nil || len(answer.Error.Details["/webhook/url"]) != 1 {
			t.Fatalf("POST %s: %d %s", u, status, body)
		}
		r := runChatd(t, []string{"CHATD_WEBHOOK_DENY=10.0.0.0/8"}, "add-webhook", "--db", db, "--agent", "alice/helper", "--url", u)
		r.failsWithOneLine(t, "chatd: --url "+answer.Error.Details["/webhook/url"][0]+"\n")
	}
	if n := countRows(t, db, "webhook_endpoints"); n != 0 {
		t.Fatalf("%d webhooks after the refusals", n)
	}
}

// signedReceiver answers every webhook request with its status of the
// moment and keeps each request.
type signedReceiver struct {
	mu       sync.Mutex
	status   int
	requests []*http.Request
	bodies   [][]byte
}

func (s *signedReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests, s.bodies = append(s.requests, r), append(s.bodies, body)
	status := s.status
	s.mu.Unlock()
	w.WriteHeader(status)
}

func (s *signedReceiver) answer(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

// await waits for the n-th request and returns it with its body.
func (s *signedReceiver) await(t testing.TB, n int) (*http.Request, []byte) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		s.mu.Lock()
		if len(s.requests) >= n {
			defer s.mu.Unlock()
			return s.requests[n-1], s.bodies[n-1]
		}
		s.mu.Unlock()
	}
	t.Fatalf("the receiver got no request #%d", n)
	return nil, nil
}

// checkSignature fails unless r carries the signature secret makes of it.
func checkSignature(t testing.TB, secret string, r *http.Request, body []byte) {
	t.Helper()
	ts, err := strconv.ParseInt(r.Header.Get(webhook.HeaderTimestamp), 10, 64)
	if err != nil {
		t.Fatalf("webhook-timestamp %q", r.Header.Get(webhook.HeaderTimestamp))
	}
	want, err := webhook.Sign(secret, r.Header.Get(webhook.HeaderID), ts, body)
	if err != nil || r.Header.Get(webhook.HeaderSignature) != want {
		t.Fatalf("webhook-signature %q, want %q (%v)", r.Header.Get(webhook.HeaderSignature), want, err)
	}
}

// The commands' whole round, with a server on the same database: a webhook
// added from the command line while the server runs is sent the agent's
// messages, signed with the secret printed once; one the receiver pauses
// (410 Gone) lists as paused with the reason and its log shows the attempt;
// resumed from the command line, the next server start sends it; removed,
// it is sent nothing more.
func TestWebhookCommandsWithAServer(t *testing.T) {
	db, alice := newDatabaseWithAlice(t)
	helper := registerAgent(t, db, "--owner", "alice", "--name", "Helper", "--description", "Answers questions")
	receiver := &signedReceiver{status: http.StatusGone}
	hs := httptest.NewServer(receiver)
	defer hs.Close()

	srv := startServer(t, db)
	text := runChatd(t, nil, "add-webhook", "--db", db, "--agent", "alice/helper", "--url", hs.URL+"/hook", "--description", "test receiver").ok(t).stdout
	secret := regexpSecret.FindString(text)
	if secret == "" || !strings.Contains(text, "shown only now") || !strings.Contains(text, "Added a webhook to Helper (@alice/helper)") {
		t.Fatalf("add-webhook printed %q", text)
	}
	room := srv.createRoom(t, alice.APIKey, helper.ID)
	post := func(content string) {
		if status, body := srv.call(t, "POST", "/api/v1/me/chats/"+room+"/messages", alice.APIKey, map[string]any{
			"message": map[string]any{"content": "@alice/helper " + content, "mentions": []map[string]string{{"id": helper.ID}}}}); status != 201 {
			t.Fatalf("post: %d %s", status, body)
		}
	}
	post("first")
	r, body := receiver.await(t, 1)
	checkSignature(t, secret, r, body)
	if !strings.Contains(string(body), "first") {
		t.Fatalf("the webhook carried %s", body)
	}
	id := webhookID(t, db)
	awaitPaused(t, db)
	srv.stop(t)

	listed := runChatd(t, nil, "list-webhooks", "--db", db, "--agent", "alice/helper").ok(t).stdout
	for _, want := range []string{id, "paused", hs.URL + "/hook", "test receiver", "410 Gone", "chatd resume-webhook --agent alice/helper " + id} {
		if !strings.Contains(listed, want) {
			t.Fatalf("list-webhooks does not say %q:\n%s", want, listed)
		}
	}
	log := runChatd(t, nil, "list-webhook-deliveries", "--db", db, "--agent", "alice/helper", id).ok(t).stdout
	if !regexpPendingRow.MatchString(log) {
		t.Fatalf("the delivery log does not show a pending delivery tried once, answered 410:\n%s", log)
	}
	resumed := runChatd(t, nil, "resume-webhook", "--db", db, "--agent", "alice/helper", id, "--json").ok(t).stdout
	if !strings.Contains(resumed, `"status":"active"`) || !strings.Contains(resumed, `"pause_reason":null`) {
		t.Fatalf("resume-webhook --json printed %s", resumed)
	}
	again := runChatd(t, nil, "resume-webhook", "--db", db, "--agent", "alice/helper", id).ok(t).stdout
	if !strings.Contains(again, "is not paused; nothing changed") {
		t.Fatalf("resuming again printed %q", again)
	}

	receiver.answer(http.StatusNoContent)
	srv = startServer(t, db)
	defer srv.stop(t)
	r, body = receiver.await(t, 2)
	checkSignature(t, secret, r, body)
	awaitDelivered(t, db, id)

	runChatd(t, nil, "remove-webhook", "--db", db, "--agent", "alice/helper", id).ok(t)
	if n := countRows(t, db, "webhook_endpoints") + countRows(t, db, "webhook_deliveries"); n != 0 {
		t.Fatalf("%d rows of the webhook left after its removal", n)
	}
	post("after the removal")
	time.Sleep(500 * time.Millisecond)
	receiver.mu.Lock()
	defer receiver.mu.Unlock()
	if len(receiver.requests) != 2 {
		t.Fatalf("the receiver got %d requests, want 2: none after the removal", len(receiver.requests))
	}
}

var (
	regexpSecret     = regexp.MustCompile(`whsec_[A-Za-z0-9+/]+=*`)
	regexpPendingRow = regexp.MustCompile(`(?m)pending, next [0-9-]+ [0-9:]+\s+1\s+410\s`)
)

// webhooksOf is list-webhooks --json of alice/helper.
func webhooksOf(t testing.TB, db string) []struct{ ID, Status string } {
	t.Helper()
	var out struct{ Data []struct{ ID, Status string } }
	raw := runChatd(t, nil, "list-webhooks", "--db", db, "--agent", "alice/helper", "--json").ok(t).stdout
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("list-webhooks --json printed %q: %v", raw, err)
	}
	return out.Data
}

func webhookID(t testing.TB, db string) string {
	t.Helper()
	hooks := webhooksOf(t, db)
	if len(hooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(hooks))
	}
	return hooks[0].ID
}

// eventually fails the test unless ok holds within 20 s.
func eventually(t testing.TB, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func awaitPaused(t testing.TB, db string) {
	t.Helper()
	eventually(t, "the webhook to be paused", func() bool { return webhooksOf(t, db)[0].Status == "paused" })
}

// awaitDelivered waits for the newest delivery of the webhook id to be
// delivered, as list-webhook-deliveries --json tells.
func awaitDelivered(t testing.TB, db, id string) {
	t.Helper()
	eventually(t, "the delivery to be delivered", func() bool {
		var out struct {
			Data []struct {
				Status         string
				Attempts       int
				LastStatusCode *int `json:"last_status_code"`
			}
			HasMore bool `json:"has_more"`
		}
		raw := runChatd(t, nil, "list-webhook-deliveries", "--db", db, "--agent", "alice/helper", id, "--json").ok(t).stdout
		if err := json.Unmarshal([]byte(raw), &out); err != nil || len(out.Data) != 1 || out.HasMore {
			t.Fatalf("list-webhook-deliveries --json printed %q (%v)", raw, err)
		}
		d := out.Data[0]
		return d.Status == "delivered" && d.Attempts == 2 && d.LastStatusCode != nil && *d.LastStatusCode == 204
	})
}
