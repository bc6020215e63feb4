package server

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// Scenario tests of bulk deletion: the POST queues a job, the store's worker
// runs it, the test polls it as a client would.

const (
	bulkChatsPath  = "/api/v1/me/chats/bulk-delete"
	bulkAgentsPath = "/api/v1/me/agents/bulk-delete"
	bulkJobsPath   = "/api/v1/me/bulk-deletions/"
)

var bulkJobKeys = "completed_at,failed,force,id,inserted_at,processed,resource_type,results,started_at,status,succeeded,total"

// checkBulkJob checks the BulkDeletionJob shape and its counters.
func checkBulkJob(t testing.TB, job map[string]any) {
	t.Helper()
	var keys []string
	for k := range job {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, ","); got != bulkJobKeys {
		t.Fatalf("job keys %s, want %s", got, bulkJobKeys)
	}
	results := job["results"].([]any)
	succeeded, failed := 0, 0
	for _, r := range results {
		item := r.(map[string]any)
		switch item["status"] {
		case "succeeded":
			succeeded++
			if item["error"] != nil {
				t.Fatalf("a succeeded item with an error: %v", item)
			}
		case "failed":
			failed++
			e, _ := item["error"].(map[string]any)
			if e["code"] == nil || e["message"] == nil || len(e) != 2 {
				t.Fatalf("failed item error %v", item["error"])
			}
		case "pending":
			if item["error"] != nil {
				t.Fatalf("a pending item with an error: %v", item)
			}
		default:
			t.Fatalf("item status %v", item["status"])
		}
	}
	if job["total"] != float64(len(results)) || job["succeeded"] != float64(succeeded) || job["failed"] != float64(failed) ||
		job["processed"] != float64(succeeded+failed) {
		t.Fatalf("counters of %v", job)
	}
}

// bulkOutcome renders a job's results as "status[/code]" in order.
func bulkOutcome(job map[string]any) string {
	var out []string
	for _, r := range job["results"].([]any) {
		item := r.(map[string]any)
		s := item["status"].(string)
		if e, ok := item["error"].(map[string]any); ok {
			s += "/" + e["code"].(string)
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

// bulkIDsOf returns the results' ids in order.
func bulkIDsOf(job map[string]any) []string {
	var ids []string
	for _, r := range job["results"].([]any) {
		ids = append(ids, r.(map[string]any)["id"].(string))
	}
	return ids
}

// startBulk submits a job and checks the 202.
func (ts *testServer) startBulk(t testing.TB, path string, c cred, body any) map[string]any {
	t.Helper()
	r := ts.do(t, "POST", path, c, body)
	expect(t, r, 202, "")
	job := r.data(t)
	checkBulkJob(t, job)
	if job["status"] != "queued" || job["processed"] != float64(0) || job["started_at"] != nil || job["completed_at"] != nil {
		t.Fatalf("a new job: %v", job)
	}
	return job
}

// awaitBulk polls a job until it ended.
func (ts *testServer) awaitBulk(t testing.TB, id string, c cred) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := ts.do(t, "GET", bulkJobsPath+id, c, nil)
		expect(t, r, 200, "")
		job := r.data(t)
		checkBulkJob(t, job)
		if job["status"] == "completed" || job["status"] == "failed" {
			if job["started_at"] == nil || job["completed_at"] == nil {
				t.Fatalf("an ended job without its times: %v", job)
			}
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not end: %v", id, job)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBulkDeleteRefusals(t *testing.T) {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	_, agentKey := ts.agent(alice, "Helper")
	many := make([]string, store.MaxBulkIDs+1)
	for i := range many {
		many[i] = fmt.Sprintf("id-%d", i)
	}
	refused := func(name, path string, c cred, body any, status int, code string, pointers ...string) scenario {
		return refusalCase(name, c, "POST", path, body, status, code, pointers...)
	}
	ts.run(t, []scenario{
		refused("no ids", bulkChatsPath, apiKey(aliceKey), map[string]any{}, 422, "validation_error", "/ids"),
		refused("an empty body", bulkAgentsPath, apiKey(aliceKey), nil, 422, "validation_error", "/ids"),
		refused("null ids", bulkChatsPath, apiKey(aliceKey), map[string]any{"ids": nil}, 422, "validation_error", "/ids"),
		refused("empty ids", bulkChatsPath, apiKey(aliceKey), map[string]any{"ids": []string{}}, 422, "validation_error", "/ids"),
		refused("101 ids", bulkChatsPath, apiKey(aliceKey), map[string]any{"ids": many}, 422, "validation_error", "/ids"),
		refused("101 agent ids", bulkAgentsPath, apiKey(aliceKey), map[string]any{"ids": many}, 422, "validation_error", "/ids"),
		refused("a repeated id", bulkChatsPath, apiKey(aliceKey), map[string]any{"ids": []string{"a", "b", "c", "a"}}, 422, "validation_error", "/ids/3"),
		refused("a number", bulkChatsPath, apiKey(aliceKey), map[string]any{"ids": []any{"a", 3}}, 422, "validation_error", "/ids/1"),
		refused("a null id", bulkAgentsPath, apiKey(aliceKey), map[string]any{"ids": []any{"a", nil}}, 422, "validation_error", "/ids/1"),
		refused("ids not a list", bulkChatsPath, apiKey(aliceKey), map[string]any{"ids": "a,b"}, 422, "validation_error", "/ids"),
		refused("force not a boolean", bulkAgentsPath, apiKey(aliceKey), map[string]any{"ids": []string{"a"}, "force": "yes"}, 422, "validation_error", "/force"),
		refused("force on chats", bulkChatsPath, apiKey(aliceKey), map[string]any{"ids": []string{"a"}, "force": true}, 400, "unknown_field", "/force"),
		refused("an unknown field", bulkAgentsPath, apiKey(aliceKey), map[string]any{"ids": []string{"a"}, "all": true}, 400, "unknown_field", "/all"),
		refused("not JSON", bulkChatsPath, apiKey(aliceKey), `{"ids": [`, 400, "invalid_json"),
		refused("an agent key", bulkChatsPath, apiKey(agentKey), map[string]any{"ids": []string{"a"}}, 403, "forbidden"),
		refused("an agent key on agents", bulkAgentsPath, apiKey(agentKey), map[string]any{"ids": []string{"a"}}, 403, "forbidden"),
		refused("no credentials", bulkChatsPath, noCred, map[string]any{"ids": []string{"a"}}, 401, "unauthorized"),
		refused("another name at its place", "/api/v1/me/chats/"+nilID, apiKey(aliceKey), map[string]any{"ids": []string{"a"}}, 405, "method_not_allowed"),
		refused("another name beside register", "/api/v1/me/agents/bulk-remove", apiKey(aliceKey), map[string]any{"ids": []string{"a"}}, 405, "method_not_allowed"),
	})
}

func TestBulkDeleteChats(t *testing.T) {
	k := newRoomsWorld(t)
	ts := k.ts
	alice, bob, carol := k.human("alice"), k.human("bob"), k.human("carol")
	mine := k.newRoom(t, alice, "mine", nil)
	k.add(t, alice, mine, bob, "")
	alsoMine := k.newRoom(t, alice, "also mine", nil)
	bobs := k.newRoom(t, bob, "bob's", nil)
	k.add(t, bob, bobs, alice, "")
	carols := k.newRoom(t, carol, "carol's", nil)

	// Bob watches his room list and the room being deleted.
	l := newListener(t, ts, bob.keyOf(t), "user_rooms:"+bob.id, "room_participants:"+mine)

	ids := []string{mine, bobs, carols, nilID, "room-1", alsoMine}
	job := ts.startBulk(t, bulkChatsPath, alice.cred, map[string]any{"ids": ids})
	if job["resource_type"] != "chat" || job["force"] != false || job["total"] != float64(6) ||
		!reflect.DeepEqual(bulkIDsOf(job), ids) || bulkOutcome(job) != "pending,pending,pending,pending,pending,pending" {
		t.Fatalf("new job %v", job)
	}
	done := ts.awaitBulk(t, job["id"].(string), alice.cred)
	if want := "succeeded,failed/forbidden,failed/not_found,failed/not_found,failed/not_found,succeeded"; done["status"] != "completed" || bulkOutcome(done) != want {
		t.Fatalf("job %v %s, want completed %s", done["status"], bulkOutcome(done), want)
	}
	if !reflect.DeepEqual(bulkIDsOf(done), ids) || done["id"] != job["id"] || done["inserted_at"] != job["inserted_at"] {
		t.Fatalf("the polled job is not the submitted one: %v", done)
	}

	// The deleted rooms are gone, the refused ones are not.
	for _, tc := range []struct {
		as     roomsParty
		room   string
		status int
	}{
		{alice, mine, 404}, {bob, mine, 404}, {alice, alsoMine, 404},
		{alice, bobs, 200}, {bob, bobs, 200}, {carol, carols, 200},
	} {
		expect(t, ts.do(t, "GET", tc.as.room(tc.room), tc.as.cred, nil), tc.status, "")
	}
	// As the single DELETE publishes it.
	removed := l.await(t, "user_rooms:"+bob.id, "room_removed", func(p map[string]any) bool { return p["id"] == mine })
	if removed["removed_at"] == nil {
		t.Fatalf("room_removed without removed_at: %v", removed)
	}
	l.await(t, "room_participants:"+mine, "room_deleted", nil)
	if n := l.count("user_rooms:"+bob.id, "room_removed"); n != 1 {
		t.Fatalf("bob got %d room_removed, want 1 (his own room stays)", n)
	}

	// Only its creator sees the job.
	path := bulkJobsPath + job["id"].(string)
	poll := func(name, path string, c cred, status int, code string) scenario {
		return refusalCase("poll/"+name, c, "GET", path, nil, status, code)
	}
	ts.run(t, []scenario{
		poll("someone else", path, bob.cred, 404, "not_found"),
		poll("an unknown job", bulkJobsPath+nilID, alice.cred, 404, "not_found"),
		poll("a malformed id", bulkJobsPath+"job-1", alice.cred, 404, "not_found"),
		poll("no credentials", path, noCred, 401, "unauthorized"),
	})
}

// keyOf returns the API key behind a human's credentials.
func (a roomsParty) keyOf(t testing.TB) string {
	t.Helper()
	h := map[string][]string{}
	a.cred(h)
	if len(h["X-Api-Key"]) != 1 {
		t.Fatalf("%s has no API key", a.name)
	}
	return h["X-Api-Key"][0]
}

func TestBulkDeleteAgents(t *testing.T) {
	k := newRoomsWorld(t)
	ts := k.ts
	alice, bob, carol := k.human("alice"), k.human("bob"), k.human("carol", "Other Org")
	plain := k.bot(alice, "Plain")
	worker := k.bot(alice, "Worker")
	shared := k.bot(bob, "Shared")
	hidden := k.bot(carol, "Hidden")
	k.ts.exec(t, `UPDATE agents SET shared_with_organization = 1 WHERE id = ?`, shared.id)

	// The worker processed a message: it has execution history.
	room := k.newRoom(t, alice, "work", nil)
	k.add(t, alice, room, worker, "")
	r := k.send(t, alice, room, "Please @alice/worker", worker)
	expect(t, r, 201, "")
	msg := r.data(t)["id"].(string)
	for _, step := range []string{"processing", "processed"} {
		expect(t, ts.do(t, "POST", worker.room(room, "messages", msg, step), worker.cred, nil), 200, "")
	}
	l := newListener(t, ts, worker.keyOf(t), "agent_rooms:"+worker.id)

	ids := []string{plain.id, worker.id, shared.id, hidden.id, "bot-1"}
	job := ts.startBulk(t, bulkAgentsPath, alice.cred, map[string]any{"ids": ids})
	if job["resource_type"] != "agent" || job["force"] != false {
		t.Fatalf("new job %v", job)
	}
	done := ts.awaitBulk(t, job["id"].(string), alice.cred)
	if want := "succeeded,failed/execution_history_exists,failed/forbidden,failed/not_found,failed/not_found"; done["status"] != "completed" || bulkOutcome(done) != want {
		t.Fatalf("job %v %s, want completed %s", done["status"], bulkOutcome(done), want)
	}
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", plain.cred, nil), 401, "unauthorized")
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", worker.cred, nil), 200, "")
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", shared.cred, nil), 200, "")

	job = ts.startBulk(t, bulkAgentsPath, alice.cred, map[string]any{"ids": []string{worker.id}, "force": true})
	if job["force"] != true {
		t.Fatalf("new job %v", job)
	}
	if done := ts.awaitBulk(t, job["id"].(string), alice.cred); bulkOutcome(done) != "succeeded" {
		t.Fatalf("forced job %s", bulkOutcome(done))
	}
	// As the single DELETE does: its key stops working and its connection
	// ends.
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", worker.cred, nil), 401, "unauthorized")
	select {
	case <-l.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("a deleted agent's connection stayed open")
	}
	if l.code != 1008 {
		t.Fatalf("closed with %d, want 1008", l.code)
	}
	list := ts.do(t, "GET", "/api/v1/me/agents", alice.cred, nil).list(t)
	if len(list) != 0 {
		t.Fatalf("alice still has agents: %v", list)
	}
}

// A storage error on an item fails the job there; the rest is untouched.
func TestBulkDeleteJobFails(t *testing.T) {
	k := newRoomsWorld(t)
	ts := k.ts
	alice := k.human("alice")
	a, b, c := k.newRoom(t, alice, "a", nil), k.newRoom(t, alice, "b", nil), k.newRoom(t, alice, "c", nil)
	ts.failRoomDeletion(t, b)
	job := ts.startBulk(t, bulkChatsPath, alice.cred, map[string]any{"ids": []string{a, b, nilID, c}})
	done := ts.awaitBulk(t, job["id"].(string), alice.cred)
	if want := "succeeded,failed/delete_failed,failed/not_attempted,failed/not_attempted"; done["status"] != "failed" || bulkOutcome(done) != want {
		t.Fatalf("job %v %s, want failed %s", done["status"], bulkOutcome(done), want)
	}
	if msg := done["results"].([]any)[1].(map[string]any)["error"].(map[string]any)["message"].(string); strings.Contains(msg, "simulated") {
		t.Fatalf("the item error echoes internals: %q", msg)
	}
	expect(t, ts.do(t, "GET", alice.room(a), alice.cred, nil), 404, "not_found")
	expect(t, ts.do(t, "GET", alice.room(b), alice.cred, nil), 200, "")
	expect(t, ts.do(t, "GET", alice.room(c), alice.cred, nil), 200, "")
}

func TestBulkDeleteQueueFull(t *testing.T) {
	ts := newTestServer(t, func(o *store.Options) { o.BulkQueue = 1 })
	_, aliceKey := ts.user("alice")
	_, bobKey := ts.user("bob")
	// Without a worker the first job stays open.
	ts.db.StopBulkWorker()
	first := ts.startBulk(t, bulkChatsPath, apiKey(aliceKey), map[string]any{"ids": []string{nilID}})
	for _, tc := range []struct {
		name, path, key string
	}{
		{"someone else's chats", bulkChatsPath, bobKey},
		{"agents", bulkAgentsPath, aliceKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.refused(t, "POST", tc.path, apiKey(tc.key), map[string]any{"ids": []string{nilID}}, 503, "service_unavailable", "")
			if r.header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
		})
	}
	ts.db.StartBulkWorker()
	if done := ts.awaitBulk(t, first["id"].(string), apiKey(aliceKey)); bulkOutcome(done) != "failed/not_found" {
		t.Fatalf("job %s", bulkOutcome(done))
	}
	ts.startBulk(t, bulkChatsPath, apiKey(bobKey), map[string]any{"ids": []string{nilID}})
}

func TestBulkDeleteWriteQueueFull(t *testing.T) {
	ts := newTestServer(t, func(o *store.Options) { o.QueueSize = 2 })
	_, key := ts.user("alice")
	release := ts.fillWriteQueue(t)
	defer release()
	for _, path := range []string{bulkChatsPath, bulkAgentsPath} {
		r := ts.refused(t, "POST", path, apiKey(key), map[string]any{"ids": []string{nilID}}, 503, "service_unavailable", "")
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("%s: 503 without Retry-After", path)
		}
	}
}

// A delegated token starts jobs with the write scope of their part and polls
// them with its read scope.
func TestBulkDeleteDelegated(t *testing.T) {
	k := newDelegationWorld(t)
	_, grant := k.grant(t, "chats:read", "chats:write")
	chatsOnly := k.exchange(t, grant)
	job := k.ts.startBulk(t, bulkChatsPath, bearer(chatsOnly), map[string]any{"ids": []string{nilID}})
	k.ts.awaitBulk(t, job["id"].(string), bearer(chatsOnly))
	k.ts.refused(t, "POST", bulkAgentsPath, bearer(chatsOnly), map[string]any{"ids": []string{nilID}}, 403, "forbidden", "")

	agentsJob := k.ts.startBulk(t, bulkAgentsPath, apiKey(k.aliceKey), map[string]any{"ids": []string{nilID}})
	k.ts.awaitBulk(t, agentsJob["id"].(string), apiKey(k.aliceKey))
	k.ts.refused(t, "GET", bulkJobsPath+agentsJob["id"].(string), bearer(chatsOnly), nil, 403, "forbidden", "")
	_, grant = k.grant(t, "chats:read", "chats:write")
	writeOnly := k.exchange(t, grant, "chats:write")
	k.ts.refused(t, "GET", bulkJobsPath+job["id"].(string), bearer(writeOnly), nil, 403, "forbidden", "")
}
