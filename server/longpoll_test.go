package server

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// heldPolls is how many long-polls the server holds now.
func (ts *testServer) heldPolls() int {
	ts.srv.waiters.mu.Lock()
	defer ts.srv.waiters.mu.Unlock()
	return ts.srv.waiters.polls.total
}

// awaitHeldPolls waits until the server holds n long-polls.
func (ts *testServer) awaitHeldPolls(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ts.heldPolls() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %d long-polls, want %d", ts.heldPolls(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawPoll sends a long-poll on a connection of its own and returns the
// connection, to read the answer from.
func (k *inboxKit) rawPoll(t *testing.T, path, requestID string) *bufio.Reader {
	t.Helper()
	conn, err := net.Dial("tcp", k.ts.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: chatd\r\nX-API-Key: %s\r\nX-Request-Id: %s\r\n\r\n", path, k.workerKey, requestID)
	return bufio.NewReader(conn)
}

// A held poll is answered on the connection the server took over: the
// same answer as ever (the kit's held requests are checked against the API
// document), then the connection closes. A message there at the first look
// is answered on a connection that stays.
func TestHeldPollAnswersOnTheConnectionItTookOver(t *testing.T) {
	k := newInboxKit(t, nil)
	next := agentChatsPath + "/" + k.first + "/messages/next?wait=20"

	answer := k.held(t, next)
	k.ts.awaitHeldPolls(t, 1)
	id := k.post(t, k.first, "@alice/worker wake up")
	if got := <-answer; got.status != 200 || got.data(t)["id"] != id {
		t.Fatalf("answered %d %s, want message %s", got.status, got.body, id)
	}

	conn := k.rawPoll(t, next, "held-poll-1")
	res, err := http.ReadResponse(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || res.Close || !strings.Contains(string(body), id) {
		t.Fatalf("a message there at once: %d (closes: %v) %s; want %s on a connection that stays", res.StatusCode, res.Close, body, id)
	}

	conn = k.rawPoll(t, agentChatsPath+"/"+k.second+"/messages/next?wait=1", "held-poll-2")
	res, err = http.ReadResponse(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ReadByte(); res.StatusCode != 204 || !res.Close || res.ContentLength > 0 || err != io.EOF ||
		res.Header.Get("X-Request-Id") != "held-poll-2" {
		t.Fatalf("a wait with nothing: %d (closes: %v, length %d, then %v) %v; want a bare 204, with its request id, and the end of the connection",
			res.StatusCode, res.Close, res.ContentLength, err, res.Header)
	}
}

// A held poll ends with its credential: the agent's key replaced, it
// answers 401 at once.
func TestHeldPollEndsWithItsCredential(t *testing.T) {
	k := newInboxKit(t, nil)
	answer := k.held(t, "/api/v1/agent/inbox/next?wait=60&claim=true")
	k.ts.awaitHeldPolls(t, 1)
	expect(t, k.ts.do(t, "POST", "/api/v1/me/agents/"+k.worker.ID+"/rotate-key", apiKey(k.aliceKey), nil), 200, "")
	select {
	case got := <-answer:
		expect(t, got.response, 401, "unauthorized")
	case <-time.After(10 * time.Second):
		t.Fatal("a held poll outlived its key")
	}
}

// A claim poll whose client left claims nothing: the message it would
// have taken goes to the next worker.
func TestHeldPollOfAClientThatLeftClaimsNothing(t *testing.T) {
	k := newInboxKit(t, nil)
	conn, err := net.Dial("tcp", k.ts.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /api/v1/agent/inbox/next?wait=30&claim=true HTTP/1.1\r\nHost: chatd\r\nX-API-Key: %s\r\n\r\n", k.workerKey)
	k.ts.awaitHeldPolls(t, 1)
	conn.Close()
	id := k.post(t, k.first, "@alice/worker for whoever is there")
	k.ts.awaitHeldPolls(t, 0)

	got := k.ts.do(t, "GET", "/api/v1/agent/inbox/next?claim=true", apiKey(k.workerKey), nil)
	if got.data(t)["id"] != id {
		t.Fatalf("the next claim took %v, want %s, which the client that left must not have taken", got.data(t)["id"], id)
	}
}

// Long-polls are bounded per credential; a poll answered frees its place.
func TestHeldPollsAreBounded(t *testing.T) {
	k := newInboxKit(t, func(c *Config) { c.MaxHeldPollsPerKey = 2 })
	next := agentChatsPath + "/" + k.first + "/messages/next"
	first, second := k.held(t, next+"?wait=30"), k.held(t, next+"?wait=30")
	k.ts.awaitHeldPolls(t, 2)
	k.ts.run(t, []scenario{
		refusalCase("a third poll of the same key", apiKey(k.workerKey), "GET", next+"?wait=30", nil, 429, "too_many_requests"),
	})
	expect(t, k.ts.doNoContent(t, "GET", next, apiKey(k.workerKey)), 204, "") // without a wait: not held, not bounded
	k.post(t, k.first, "@alice/worker one for both")
	for _, answer := range []<-chan heldResponse{first, second} {
		expect(t, (<-answer).response, 200, "")
	}
	k.ts.awaitHeldPolls(t, 0)
	again := k.held(t, next+"?wait=1")
	expect(t, (<-again).response, 200, "") // the message is not processed yet: /next shows it again
}

// Eight workers of one agent hold claim polls while 300 messages arrive in
// 20 rooms; each message is taken exactly once.
func TestHeldClaimPollsRace(t *testing.T) {
	k := newInboxKit(t, func(c *Config) { c.DisableRateLimit = true })
	rooms := []string{k.first, k.second}
	for len(rooms) < 20 {
		rooms = append(rooms, k.ts.room(t, k.posterKey, k.worker.ID))
	}
	workers := k.claimers(t, 8, "/api/v1/agent/inbox/next?claim=true&wait=2")
	posted := map[string]bool{}
	for i := range 300 {
		posted[k.post(t, rooms[i%len(rooms)], fmt.Sprint("@alice/worker task ", i))] = true
	}
	workers.wait(t, posted)
}

// A held poll's request is logged once, when it is answered, with the
// status it was answered with.
func TestHeldPollIsLoggedWhenAnswered(t *testing.T) {
	var log syncBuffer
	k := newInboxKit(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	res, err := http.ReadResponse(k.rawPoll(t, "/api/v1/agent/inbox/next?wait=1", "held-poll-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	k.ts.awaitHeldPolls(t, 0)
	var lines []string
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "request_id=held-poll-1") {
			lines = append(lines, line)
		}
	}
	if res.StatusCode != 204 || len(lines) != 1 || !strings.Contains(lines[0], "status=204") {
		t.Fatalf("answered %d, logged %q; want 204, logged once with its status", res.StatusCode, lines)
	}
}
