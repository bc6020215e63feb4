package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// A server whose write queue is full refuses writes with 503 and Retry-After
// instead of queueing without bound, and a refusal is clean: every message it
// answered 201 to is stored with its delivery, every message it refused left
// nothing behind, and the first write after the load is accepted at once.
// 64 clients post as fast as they can against --write-queue 8 for
// CHATD_OVERLOAD_SECONDS (2 by default).
func TestOverloadRefusesCleanlyAndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server under load")
	}
	const clients = 64
	seconds := envInt(t, "CHATD_OVERLOAD_SECONDS", 2)
	db := newDatabase(t, filepath.Join(t.TempDir(), "chatd.db"))
	alice := createUser(t, db, "alice", "Alice")
	var agents [2]created
	for i := range agents {
		agents[i] = registerAgent(t, db, "--name", fmt.Sprintf("Agent %d", i), "--description", "overload probe")
	}
	srv := startServer(t, db, "--write-queue", "8", "--rate-limit", "0", "--max-messages-per-room", "100000000")
	room := srv.createRoom(t, alice.APIKey, agents[0].ID, agents[1].ID)

	// Enough idle connections for every client: the load is on the writer,
	// not on connection setup.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	post := func(sender, mentioned created, content string) (int, http.Header, []byte, error) {
		j, _ := json.Marshal(map[string]any{"message": map[string]any{
			"content": content, "mentions": []map[string]string{{"id": mentioned.ID}}}})
		req, _ := http.NewRequest("POST", srv.url+"/api/v1/agent/chats/"+room+"/messages", bytes.NewReader(j))
		req.Header.Set("X-API-Key", sender.APIKey)
		res, err := client.Do(req)
		if err != nil {
			return 0, nil, nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, b, err
	}

	var mu sync.Mutex
	accepted := map[string]string{} // content → message id
	refused := map[string]bool{}
	var acceptedLatency, refusedLatency []time.Duration
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sender, mentioned := agents[c%2], agents[(c+1)%2]
			for i := 0; time.Now().Before(deadline); i++ {
				content := fmt.Sprintf("overload probe c%d i%d", c, i)
				start := time.Now()
				status, header, body, err := post(sender, mentioned, content)
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
					mu.Lock()
					accepted[content] = id
					acceptedLatency = append(acceptedLatency, took)
					mu.Unlock()
				case 503:
					var out struct {
						Error struct {
							Code       string
							RetryAfter int `json:"retry_after"`
						}
					}
					after, _ := strconv.Atoi(header.Get("Retry-After"))
					if json.Unmarshal(body, &out) != nil || out.Error.Code != "service_unavailable" || after < 1 || out.Error.RetryAfter != after {
						t.Errorf("a 503 without Retry-After or the envelope: %v %s", header, body)
						return
					}
					mu.Lock()
					refused[content] = true
					refusedLatency = append(refusedLatency, took)
					mu.Unlock()
				default:
					t.Errorf("post under load: %d %s", status, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// The load is gone: the next write and the readiness probe succeed at once.
	recoveryStart := time.Now()
	if status, _, body, err := post(agents[0], agents[1], "overload probe after"); err != nil || status != 201 {
		t.Fatalf("the first write after the load: %d %s %v", status, body, err)
	}
	recovery := time.Since(recoveryStart).Round(10 * time.Microsecond)
	if status, body := srv.call(t, "GET", "/readyz", "", nil); status != 200 {
		t.Fatalf("readyz after the load: %d %s", status, body)
	}
	srv.stop(t)

	// Straight from the file: each message with its delivery, or nothing.
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
	lost, halfApplied := 0, 0
	for content, id := range accepted {
		if stored[content] != id {
			lost++
		}
	}
	for content := range refused {
		if _, ok := stored[content]; ok {
			halfApplied++
		}
	}

	requests := len(acceptedLatency) + len(refusedLatency)
	summary := fmt.Sprintf("overload: --write-queue 8, %d clients for %ds: requests=%d (%.0f/s) 201=%d (p50 %v, p99 %v) 503=%d (p50 %v, p99 %v) "+
		"lost=%d refused_but_stored=%d; the first write after the load: 201 in %v",
		clients, seconds, requests, float64(requests)/float64(seconds),
		len(acceptedLatency), percentile(acceptedLatency, 50), percentile(acceptedLatency, 99),
		len(refusedLatency), percentile(refusedLatency, 50), percentile(refusedLatency, 99), lost, halfApplied, recovery)
	t.Log(summary)
	fmt.Println(summary)
	if len(refused) == 0 {
		t.Errorf("no write was refused: %d clients did not fill a queue of 8", clients)
	}
	if len(accepted) == 0 {
		t.Errorf("no write was accepted under load")
	}
	if lost != 0 || halfApplied != 0 {
		t.Errorf("%d acknowledged messages are missing, %d refused ones were stored", lost, halfApplied)
	}
}

var overloadProbe = regexp.MustCompile(`overload probe c\d+ i\d+|overload probe after`)

// percentile returns the p-th percentile of ds, rounded for printing.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return sorted[(len(sorted)-1)*p/100].Round(10 * time.Microsecond)
}
