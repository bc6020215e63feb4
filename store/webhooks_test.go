package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// webhookKit: alice owns the agents poster, worker and other; bob owns
// none. poster made room, with worker and other in it.
type webhookKit struct {
	db                        *DB
	alice, bob                *User
	poster, worker, stranger  Actor
	room                      string
	aliceActor, bobActor      Actor
	workerHooks, strangerHook []string
}

func newWebhookKit(t *testing.T) *webhookKit {
	t.Helper()
	db := openTestDB(t, Options{})
	ctx := context.Background()
	k := &webhookKit{db: db}
	k.alice, _ = mustUser(t, db, "alice")
	k.bob, _ = mustUser(t, db, "bob")
	poster, _ := mustAgent(t, db, k.alice, "Poster")
	worker, _ := mustAgent(t, db, k.alice, "Worker")
	stranger, _ := mustAgent(t, db, k.alice, "Other")
	k.poster, k.worker, k.stranger = AgentActor(poster), AgentActor(worker), AgentActor(stranger)
	k.aliceActor, k.bobActor = UserActor(k.alice), UserActor(k.bob)
	room, err := db.CreateRoom(ctx, k.poster, NewRoom{})
	if err != nil {
		t.Fatal(err)
	}
	k.room = room.ID
	for _, id := range []string{worker.ID, stranger.ID} {
		if _, err := db.AddParticipant(ctx, k.poster, room.ID, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	k.workerHooks = []string{k.hook(t, k.worker, "http://127.0.0.1:9001/a"), k.hook(t, k.worker, "https://receiver.example/b")}
	k.strangerHook = []string{k.hook(t, k.stranger, "http://127.0.0.1:9002/")}
	drain(db.WebhooksQueued())
	return k
}

func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// hook registers an endpoint for the agent, as the agent, and returns its id.
func (k *webhookKit) hook(t *testing.T, agent Actor, url string) string {
	t.Helper()
	w, secret, err := k.db.CreateWebhook(context.Background(), agent, agent.ID, NewWebhook{URL: url})
	if err != nil {
		t.Fatalf("create webhook %s: %v", url, err)
	}
	if !strings.HasPrefix(secret, WebhookSecretPrefix) || len(secret) != len(WebhookSecretPrefix)+44 {
		t.Fatalf("secret %q is not whsec_ and 32 bytes in base64", secret)
	}
	return w.ID
}

// post sends a message in the room mentioning the agents given.
func (k *webhookKit) post(t *testing.T, content string, mentioned ...Actor) *Message {
	t.Helper()
	var mentions []MentionInput
	for _, a := range mentioned {
		mentions = append(mentions, MentionInput{ID: &a.ID})
	}
	m, err := k.db.SendText(context.Background(), k.poster, k.room, TextInput{Content: content, Mentions: mentions})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// queued is the messages queued for an endpoint (the last word of each,
// after the mentions chatd writes in front), in message order, with their
// status.
func (k *webhookKit) queued(t *testing.T, endpoint string) string {
	t.Helper()
	rows, err := k.db.read.Query(k.db.dialect.bind(`SELECT m.content, d.status FROM webhook_deliveries d JOIN messages m ON m.seq = d.message_seq
		WHERE d.endpoint_id = ? ORDER BY d.message_seq`), endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var content, status string
		rows.Scan(&content, &status)
		words := strings.Fields(content)
		out = append(out, words[len(words)-1]+":"+status)
	}
	return strings.Join(out, ",")
}

func TestSendTextQueuesTheMessageForEachWebhookOfTheAgentsItAddresses(t *testing.T) {
	k := newWebhookKit(t)
	k.post(t, "first", k.worker)
	k.post(t, "second", k.stranger)
	k.post(t, "third", k.worker, k.stranger)

	for _, endpoint := range k.workerHooks {
		if got := k.queued(t, endpoint); got != "first:pending,third:pending" {
			t.Errorf("worker's endpoint queued %q", got)
		}
	}
	if got := k.queued(t, k.strangerHook[0]); got != "second:pending,third:pending" {
		t.Errorf("the other agent's endpoint queued %q", got)
	}
	select {
	case <-k.db.WebhooksQueued():
	default:
		t.Error("queuing did not wake the sender")
	}
	queued := k.db.QueuedWebhookEndpoints()
	slices.Sort(queued)
	want := append(slices.Clone(k.workerHooks), k.strangerHook...)
	slices.Sort(want)
	if !slices.Equal(queued, want) || len(k.db.QueuedWebhookEndpoints()) != 0 {
		t.Errorf("the sender is told of endpoints %v, want each with a delivery once: %v", queued, want)
	}

	t.Run("a refused message queues nothing", func(t *testing.T) {
		before := rawCount(t, k.db, `SELECT count(*) FROM webhook_deliveries`)
		missing := newID()
		_, err := k.db.SendText(context.Background(), k.poster, k.room, TextInput{Content: "x",
			Mentions: []MentionInput{{ID: &k.worker.ID}, {ID: &missing}}})
		if err == nil {
			t.Fatal("a mention of someone outside the room was accepted")
		}
		if after := rawCount(t, k.db, `SELECT count(*) FROM webhook_deliveries`); after != before {
			t.Fatalf("deliveries %d -> %d", before, after)
		}
	})
}

// attempt records a failed attempt at the endpoint's next delivery, to be
// retried after retry (0: given up).
func (k *webhookKit) fail(t *testing.T, endpoint string, retry time.Duration, pauseAfter int) *WebhookSend {
	t.Helper()
	s := k.next(t, endpoint, time.Now())
	if s == nil {
		t.Fatal("nothing due")
	}
	a := WebhookAttempt{DeliveryID: s.DeliveryID, EndpointID: endpoint, MessageSeq: s.MessageSeq, At: time.Now(), Latency: 12 * time.Millisecond,
		StatusCode: 503, Error: "the receiver answered 503 Service Unavailable", PauseAfter: pauseAfter}
	if retry > 0 {
		a.RetryAt = time.Now().Add(retry)
	}
	if err := k.db.RecordWebhookAttempt(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return s
}

func (k *webhookKit) succeed(t *testing.T, endpoint string) *WebhookSend {
	t.Helper()
	s := k.next(t, endpoint, time.Now())
	if s == nil {
		t.Fatal("nothing due")
	}
	if err := k.db.RecordWebhookAttempt(context.Background(), WebhookAttempt{DeliveryID: s.DeliveryID, EndpointID: endpoint, MessageSeq: s.MessageSeq,
		At: time.Now(), Latency: 3 * time.Millisecond, StatusCode: 204}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (k *webhookKit) next(t *testing.T, endpoint string, at time.Time) *WebhookSend {
	t.Helper()
	s, _, err := k.db.NextWebhookSend(context.Background(), endpoint, at)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWebhookDeliveriesGoInMessageOrderOneAtATime(t *testing.T) {
	k := newWebhookKit(t)
	endpoint := k.workerHooks[0]
	one, two := k.post(t, "one", k.worker), k.post(t, "two", k.worker)
	k.post(t, "three", k.worker)

	s := k.next(t, endpoint, time.Now())
	if s == nil || s.Message.ID != one.ID || s.Attempts != 0 || s.Secret == "" || s.URL != "http://127.0.0.1:9001/a" || s.AgentID != k.worker.ID {
		t.Fatalf("first send = %+v, want message one", s)
	}
	if len(s.Message.Deliveries) != 1 || s.Message.Deliveries[0].AgentID != k.worker.ID {
		t.Fatalf("the message carries deliveries %+v, want the worker's own", s.Message.Deliveries)
	}

	t.Run("a failure holds the endpoint's later messages back", func(t *testing.T) {
		k.fail(t, endpoint, time.Hour, 0)
		held, at, err := k.db.NextWebhookSend(context.Background(), endpoint, time.Now())
		if err != nil || held != nil || at.Before(time.Now().Add(59*time.Minute)) {
			t.Fatalf("while the first waits for its retry: %+v due %v (%v), want nothing, due in an hour", held, at, err)
		}
		s := k.next(t, endpoint, time.Now().Add(2*time.Hour))
		if s == nil || s.Message.ID != one.ID || s.Attempts != 1 {
			t.Fatalf("after the retry time: %+v, want message one again, attempted once", s)
		}
		due, err := k.db.WebhooksDue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range due {
			if d.EndpointID == endpoint && d.At.Before(time.Now().Add(59*time.Minute)) {
				t.Fatalf("due at %v, want in an hour", d.At)
			}
		}
	})

	t.Run("giving up ends the delivery failed and the next is due", func(t *testing.T) {
		rawExec(t, k.db, `UPDATE webhook_deliveries SET next_attempt_at = 0 WHERE endpoint_id = ?`, endpoint)
		k.fail(t, endpoint, 0, 0)
		if s := k.next(t, endpoint, time.Now()); s == nil || s.Message.ID != two.ID {
			t.Fatalf("after giving up: %+v, want message two", s)
		}
	})

	t.Run("a success ends the delivery and the next is due", func(t *testing.T) {
		k.succeed(t, endpoint)
		if got := k.queued(t, endpoint); got != "one:failed,two:delivered,three:pending" {
			t.Fatalf("queue %q", got)
		}
	})

	t.Run("the log, newest first", func(t *testing.T) {
		page, err := k.db.ListWebhookDeliveries(context.Background(), k.worker, k.worker.ID, endpoint, PageRequest{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 3 {
			t.Fatalf("%d lines, want 3", len(page.Items))
		}
		three, two, one := page.Items[0], page.Items[1], page.Items[2]
		if three.Status != "pending" || three.Attempts != 0 || three.NextAttemptAt == nil || three.LastAttemptAt != nil || three.CompletedAt != nil {
			t.Errorf("three: %+v", three)
		}
		if two.Status != "delivered" || two.Attempts != 1 || *two.LastStatusCode != 204 || *two.LastLatency != 3*time.Millisecond ||
			two.LastError != nil || two.CompletedAt == nil || two.NextAttemptAt != nil || two.RoomID != k.room {
			t.Errorf("two: %+v", two)
		}
		if one.Status != "failed" || one.Attempts != 2 || *one.LastStatusCode != 503 || one.LastError == nil || one.CompletedAt == nil {
			t.Errorf("one: %+v", one)
		}
	})
}

func TestWebhookPausesAfterARunOfFailuresAndResumes(t *testing.T) {
	k := newWebhookKit(t)
	endpoint := k.workerHooks[0]
	k.post(t, "one", k.worker)
	k.post(t, "two", k.worker)
	k.succeed(t, endpoint)
	hook := func() *Webhook {
		w, err := k.db.Webhook(context.Background(), k.worker, k.worker.ID, endpoint)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	for i := 1; i <= 3; i++ {
		rawExec(t, k.db, `UPDATE webhook_deliveries SET next_attempt_at = 0 WHERE endpoint_id = ?`, endpoint)
		k.fail(t, endpoint, time.Minute, 3)
		if w := hook(); w.ConsecutiveFailures != i || (w.PausedAt != nil) != (i == 3) {
			t.Fatalf("after %d failures: %+v", i, w)
		}
	}
	w := hook()
	if w.PauseReason == nil || !strings.Contains(*w.PauseReason, "3 failed attempts in a row") || !strings.Contains(*w.PauseReason, "503") {
		t.Fatalf("pause reason %v", w.PauseReason)
	}
	if s := k.next(t, endpoint, time.Now().Add(time.Hour)); s != nil {
		t.Fatal("a paused endpoint was given a delivery")
	}
	due, _ := k.db.WebhooksDue(context.Background())
	for _, d := range due {
		if d.EndpointID == endpoint {
			t.Fatal("a paused endpoint is due")
		}
	}

	drain(k.db.WebhooksQueued())
	k.db.QueuedWebhookEndpoints()
	resumed, err := k.db.ResumeWebhook(context.Background(), k.aliceActor, k.worker.ID, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.PausedAt != nil || resumed.PauseReason != nil || resumed.ConsecutiveFailures != 0 {
		t.Fatalf("resumed: %+v", resumed)
	}
	if s := k.next(t, endpoint, time.Now()); s == nil {
		t.Fatal("the queue is not due at once after resuming")
	}
	select {
	case <-k.db.WebhooksQueued():
	default:
		t.Error("resuming did not wake the sender")
	}
	if queued := k.db.QueuedWebhookEndpoints(); !slices.Equal(queued, []string{endpoint}) {
		t.Errorf("resuming told the sender of %v, want %s", queued, endpoint)
	}

	t.Run("the receiver's refusal pauses at once", func(t *testing.T) {
		s := k.next(t, endpoint, time.Now())
		err := k.db.RecordWebhookAttempt(context.Background(), WebhookAttempt{DeliveryID: s.DeliveryID, EndpointID: endpoint, MessageSeq: s.MessageSeq,
			At: time.Now(), StatusCode: 410, Error: "the receiver answered 410 Gone", RetryAt: time.Now(),
			PauseNow: "the receiver answered 410 Gone: it wants no more deliveries", PauseAfter: 100})
		if err != nil {
			t.Fatal(err)
		}
		if w := hook(); w.PausedAt == nil || *w.PauseReason != "the receiver answered 410 Gone: it wants no more deliveries" {
			t.Fatalf("after 410: %+v", w)
		}
	})
}

func TestWebhookAccessIsTheAgentsAndItsOwners(t *testing.T) {
	k := newWebhookKit(t)
	ctx := context.Background()
	endpoint := k.workerHooks[0]
	for _, c := range []struct {
		name  string
		actor Actor
		agent string
	}{
		{"another agent, for the worker", k.poster, k.worker.ID},
		{"another agent, as if its own", k.poster, k.poster.ID},
		{"another person", k.bobActor, k.worker.ID},
		{"the owner, through another agent", k.aliceActor, k.poster.ID},
		{"a malformed agent id", k.aliceActor, "nope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := k.db.Webhook(ctx, c.actor, c.agent, endpoint)
			wantCode(t, err, CodeNotFound)
			_, err = k.db.ListWebhookDeliveries(ctx, c.actor, c.agent, endpoint, PageRequest{Limit: 1})
			wantCode(t, err, CodeNotFound)
			_, err = k.db.ResumeWebhook(ctx, c.actor, c.agent, endpoint)
			wantCode(t, err, CodeNotFound)
			wantCode(t, k.db.DeleteWebhook(ctx, c.actor, c.agent, endpoint), CodeNotFound)
		})
	}
	t.Run("the owner", func(t *testing.T) {
		hooks, err := k.db.ListWebhooks(ctx, k.aliceActor, k.worker.ID)
		if err != nil || len(hooks) != 2 || hooks[0].ID != k.workerHooks[0] || hooks[1].ID != k.workerHooks[1] {
			t.Fatalf("alice lists %v, %v", hooks, err)
		}
		if _, _, err := k.db.CreateWebhook(ctx, k.aliceActor, k.worker.ID, NewWebhook{URL: "http://10.0.0.7/hook"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("bob cannot register one for alice's agent", func(t *testing.T) {
		_, _, err := k.db.CreateWebhook(ctx, k.bobActor, k.worker.ID, NewWebhook{URL: "http://10.0.0.8/hook"})
		wantCode(t, err, CodeNotFound)
	})
}

func TestCreateWebhookRefusals(t *testing.T) {
	k := newWebhookKit(t)
	ctx := context.Background()
	long := "http://h/" + strings.Repeat("a", 2048)
	for _, c := range []struct{ url, description, pointer, want string }{
		{"", "", "/webhook/url", "can't be blank"},
		{long, "", "/webhook/url", "at most 2048 bytes"},
		{"http://h/a b", "", "/webhook/url", "spaces"},
		{"ftp://h/", "", "/webhook/url", "http:// or https://"},
		{"/relative", "", "/webhook/url", "http:// or https://"},
		{"http:///path", "", "/webhook/url", "must name a host"},
		{"http:opaque", "", "/webhook/url", "must name a host"},
		{"http://user:pw@h/", "", "/webhook/url", "user name or password"},
		{"http://h/#frag", "", "/webhook/url", "fragment"},
		{"http://h:99999/", "", "/webhook/url", "port"},
		{"http://h:/", "", "/webhook/url", "empty port"},
		{"http://[nothost]/", "", "/webhook/url", "not a valid URL"},
		{"http://%zz/", "", "/webhook/url", "not a valid URL"},
		{"http://h/", "line\nbreak", "/webhook/description", "control characters"},
		{"http://h/", strings.Repeat("d", 501), "/webhook/description", "at most 500"},
	} {
		t.Run(c.url+" "+c.description, func(t *testing.T) {
			_, _, err := k.db.CreateWebhook(ctx, k.worker, k.worker.ID, NewWebhook{URL: c.url, Description: c.description})
			wantCode(t, err, CodeValidation)
			msgs := err.(*Error).Details.(Problems)[c.pointer]
			if len(msgs) != 1 || !strings.Contains(msgs[0], c.want) {
				t.Fatalf("problems %v, want %q at %s", err.(*Error).Details, c.want, c.pointer)
			}
		})
	}
	t.Run("the same URL twice", func(t *testing.T) {
		_, _, err := k.db.CreateWebhook(ctx, k.worker, k.worker.ID, NewWebhook{URL: "http://127.0.0.1:9001/a"})
		wantCode(t, err, CodeConflict)
	})
	t.Run("more than the limit", func(t *testing.T) {
		for i := 2; i < MaxWebhooksPerAgent; i++ {
			k.hook(t, k.worker, "http://127.0.0.1:9001/more"+string(rune('a'+i)))
		}
		_, _, err := k.db.CreateWebhook(ctx, k.worker, k.worker.ID, NewWebhook{URL: "http://127.0.0.1:9001/over"})
		wantCode(t, err, CodeLimitReached)
	})
}

func TestDeletingAWebhookOrItsAgentDropsItsQueue(t *testing.T) {
	k := newWebhookKit(t)
	ctx := context.Background()
	k.post(t, "one", k.worker, k.stranger)
	s := k.next(t, k.workerHooks[0], time.Now())

	if err := k.db.DeleteWebhook(ctx, k.worker, k.worker.ID, k.workerHooks[0]); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, k.db, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = ?`, k.workerHooks[0]); n != 0 {
		t.Fatalf("%d deliveries left behind", n)
	}
	// An attempt that was in flight when its endpoint went records nothing.
	if err := k.db.RecordWebhookAttempt(ctx, WebhookAttempt{DeliveryID: s.DeliveryID, EndpointID: s.EndpointID, MessageSeq: s.MessageSeq, At: time.Now(),
		Error: "late", PauseAfter: 1}); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, k.db, `SELECT count(*) FROM webhook_endpoints WHERE id = ?`, k.workerHooks[0]); n != 0 {
		t.Fatal("the late attempt brought the endpoint back")
	}

	if _, err := k.db.DeleteAgent(ctx, k.alice, k.worker.ID, false); err != nil {
		t.Fatal(err)
	}
	if n := rawCount(t, k.db, `SELECT count(*) FROM webhook_endpoints WHERE agent_id = ?`, k.worker.ID); n != 0 {
		t.Fatalf("%d endpoints of a deleted agent", n)
	}
	if n := rawCount(t, k.db, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = ?`, k.strangerHook[0]); n != 1 {
		t.Fatalf("the stranger's queue holds %d, want 1", n)
	}
}
