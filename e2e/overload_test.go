package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// overloadClients post at once against a write queue of 8.
const overloadClients = 64

// A server whose write queue is full refuses writes with 503 and Retry-After
// instead of queueing without bound, and a refusal is clean: every message it
// answered 201 to is stored with its delivery, every message it refused left
// nothing behind, and the first write after the load is accepted at once.
// overloadClients clients post as fast as they can against --write-queue 8
// for CHATD_OVERLOAD_SECONDS (2 by default).
func TestOverloadRefusesCleanlyAndRecovers(t *testing.T) {
	skipIfShort(t, "runs a server under load")
	seconds := envInt(t, "CHATD_OVERLOAD_SECONDS", 2)
	o := newOverloadTarget(t)
	load := o.load(t, time.Duration(seconds)*time.Second)
	if t.Failed() {
		return
	}

	// The load is gone: the next write and the readiness probe succeed at once.
	recoveryStart := time.Now()
	if status, _, body, err := o.post(o.agents[0], o.agents[1], "overload probe after"); err != nil || status != 201 {
		t.Fatalf("the first write after the load: %d %s %v", status, body, err)
	}
	recovery := time.Since(recoveryStart).Round(10 * time.Microsecond)
	if status, body := o.srv.call(t, "GET", "/readyz", "", nil); status != 200 {
		t.Fatalf("readyz after the load: %d %s", status, body)
	}
	o.srv.stop(t)

	lost, halfApplied := load.compare(storedProbes(t, o.db, o.room))
	requests := len(load.acceptedLatency) + len(load.refusedLatency)
	summary := fmt.Sprintf("overload: --write-queue 8, %d clients for %ds: requests=%d (%.0f/s) 201=%d (p50 %v, p99 %v) 503=%d (p50 %v, p99 %v) "+
		"lost=%d refused_but_stored=%d; the first write after the load: 201 in %v",
		overloadClients, seconds, requests, float64(requests)/float64(seconds),
		len(load.acceptedLatency), percentile(load.acceptedLatency, 50), percentile(load.acceptedLatency, 99),
		len(load.refusedLatency), percentile(load.refusedLatency, 50), percentile(load.refusedLatency, 99), lost, halfApplied, recovery)
	t.Log(summary)
	fmt.Println(summary)
	if len(load.refused) == 0 {
		t.Errorf("no write was refused: %d clients did not fill a queue of 8", overloadClients)
	}
	if len(load.accepted) == 0 {
		t.Errorf("no write was accepted under load")
	}
	if lost != 0 || halfApplied != 0 {
		t.Errorf("%d acknowledged messages are missing, %d refused ones were stored", lost, halfApplied)
	}
}

// overloadTarget is a server with a write queue of 8 and a room of alice's
// where two agents mention each other.
type overloadTarget struct {
	srv      *serverProc
	db, room string
	agents   [2]created
	client   *http.Client
}

func newOverloadTarget(t *testing.T) *overloadTarget {
	o := &overloadTarget{}
	db, alice := newDatabaseWithAlice(t)
	o.db = db
	for i := range o.agents {
		o.agents[i] = registerAgent(t, o.db, "--name", fmt.Sprintf("Agent %d", i), "--description", "overload probe")
	}
	o.srv = startServer(t, o.db, "--write-queue", "8", "--rate-limit", "0", "--max-messages-per-room", "100000000")
	o.room = o.srv.createRoom(t, alice.APIKey, o.agents[0].ID, o.agents[1].ID)
	// Enough idle connections for every client: the load is on the writer,
	// not on connection setup.
	o.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: overloadClients}}
	return o
}

// post sends content as sender, mentioning the other agent.
func (o *overloadTarget) post(sender, mentioned created, content string) (int, http.Header, []byte, error) {
	j, _ := json.Marshal(map[string]any{"message": map[string]any{
		"content": content, "mentions": []map[string]string{{"id": mentioned.ID}}}})
	req, _ := http.NewRequest("POST", o.srv.url+"/api/v1/agent/chats/"+o.room+"/messages", bytes.NewReader(j))
	req.Header.Set("X-API-Key", sender.APIKey)
	res, err := o.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b, err
}

// overloadResult is what the clients saw: the messages accepted (by
// content, with their ids) and refused, and how long each answer took.
type overloadResult struct {
	mu                              sync.Mutex
	accepted                        map[string]string
	refused                         map[string]bool
	acceptedLatency, refusedLatency []time.Duration
}

// load has overloadClients clients post as fast as they can for d.
func (o *overloadTarget) load(t *testing.T, d time.Duration) *overloadResult {
	r := &overloadResult{accepted: map[string]string{}, refused: map[string]bool{}}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := 0; c < overloadClients; c++ {
		wg.Go(func() { o.loadClient(t, r, c, deadline) })
	}
	wg.Wait()
	return r
}

// loadClient posts until deadline; it stops at the first answer that is
// neither a 201 with an id nor a clean 503.
func (o *overloadTarget) loadClient(t *testing.T, r *overloadResult, c int, deadline time.Time) {
	sender, mentioned := o.agents[c%2], o.agents[(c+1)%2]
	for i := 0; time.Now().Before(deadline); i++ {
		content := fmt.Sprintf("overload probe c%d i%d", c, i)
		start := time.Now()
		status, header, body, err := o.post(sender, mentioned, content)
		took := time.Since(start)
		if err != nil {
			t.Error(err)
			return
		}
		switch status {
		case 201:
			id, ok := createdID(body)
			if !ok {
				t.Errorf("201 without a message id: %s", body)
				return
			}
			r.mu.Lock()
			r.accepted[content] = id
			r.acceptedLatency = append(r.acceptedLatency, took)
			r.mu.Unlock()
		case 503:
			if !cleanRefusal(header, body) {
				t.Errorf("a 503 without Retry-After or the envelope: %v %s", header, body)
				return
			}
			r.mu.Lock()
			r.refused[content] = true
			r.refusedLatency = append(r.refusedLatency, took)
			r.mu.Unlock()
		default:
			t.Errorf("post under load: %d %s", status, body)
			return
		}
	}
}

// cleanRefusal reports whether a 503 says when to retry, in Retry-After
// and in the error envelope alike.
func cleanRefusal(header http.Header, body []byte) bool {
	var out struct {
		Error struct {
			Code       string
			RetryAfter int `json:"retry_after"`
		}
	}
	after, _ := strconv.Atoi(header.Get("Retry-After"))
	return json.Unmarshal(body, &out) == nil && out.Error.Code == "service_unavailable" && after >= 1 && out.Error.RetryAfter == after
}

var overloadProbe = regexp.MustCompile(`overload probe c\d+ i\d+|overload probe after`)

// storedProbes reads the room's messages straight from the file, by the
// probe in their content, and fails the test for a message stored without
// exactly one delivery: each message is stored with its delivery, or not at
// all.
func storedProbes(t *testing.T, db, room string) map[string]string {
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT m.id, m.content, (SELECT count(*) FROM deliveries d WHERE d.message_seq = m.seq)
		FROM messages m WHERE m.room_id = ?`, room)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for rows.Next() {
		var id, content string
		var deliveries int
		if err := rows.Scan(&id, &content, &deliveries); err != nil {
			t.Fatal(err)
		}
		// The server prepends the mention to the content.
		stored[overloadProbe.FindString(content)] = id
		if deliveries != 1 {
			t.Errorf("message %s (%q) has %d deliveries, not 1", id, content, deliveries)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return stored
}

// compare counts the acknowledged messages that are not stored under the
// id acknowledged, and the refused ones that are stored.
func (r *overloadResult) compare(stored map[string]string) (lost, halfApplied int) {
	for content, id := range r.accepted {
		if stored[content] != id {
			lost++
		}
	}
	for content := range r.refused {
		if _, ok := stored[content]; ok {
			halfApplied++
		}
	}
	return lost, halfApplied
}

// percentile returns the p-th percentile of ds, rounded for printing.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return sorted[(len(sorted)-1)*p/100].Round(10 * time.Microsecond)
}
