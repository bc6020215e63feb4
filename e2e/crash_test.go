package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws/wsutil"
)

// A Jepsen-style check of the whole message path across crashes: people and
// agents post messages mentioning agents while the agents work through their
// deliveries (/next, /processing, /processed) and listen on the socket, and
// the server is killed with SIGKILL at a random moment, as soon as a
// checkpoint is seen writing to the database file, or while `chatd backup`
// copies the database. After the last
// restart every acknowledged message must be in the room's history under the
// id it was acknowledged with, and every mentioned agent must have been served
// it. Short by default; CHATD_CRASH_ROUNDS and CHATD_CRASH_SECONDS (the most a
// round runs before its kill) make it longer.
func TestCrashLosesNoAcknowledgedMessage(t *testing.T) {
	skipIfShort(t, "kills and restarts a server")
	rounds := envInt(t, "CHATD_CRASH_ROUNDS", 4)
	roundSeconds := envInt(t, "CHATD_CRASH_SECONDS", 2)
	db, alice := newDatabaseWithAlice(t)
	h := &crashHistory{acked: map[string]ackedMessage{},
		ids: map[string]map[string]bool{}, served: map[servedKey]int{}, pushed: map[servedKey]bool{}}
	var agentIDs []string
	for i := 0; i < 3; i++ {
		agent := registerAgent(t, db, "--name", fmt.Sprintf("Worker %d", i), "--description", "crash probe")
		h.agents = append(h.agents, agent)
		agentIDs = append(agentIDs, agent.ID)
	}

	srv := startServer(t, db, crashServerFlags...)
	h.room = srv.createRoom(t, alice.APIKey, agentIDs...)
	kinds := map[string]int{}
	for round := 0; round < rounds; round++ {
		if round > 0 {
			srv = startServer(t, db, crashServerFlags...)
		}
		kind := crashKind(round, rounds)
		kinds[kind]++
		h.runRound(t, srv, db, round, alice, kind, time.Duration(roundSeconds)*time.Second)
	}

	// Every delivery still owed is served now.
	srv = startServer(t, db, crashServerFlags...)
	var drained sync.WaitGroup
	for i := range h.agents {
		drained.Go(func() { h.drain(t, srv, i) })
	}
	drained.Wait()
	if t.Failed() {
		t.FailNow()
	}
	history := h.readHistory(t, srv, alice.APIKey)
	srv.stop(t)
	integrity := integrityCheck(t, db)

	c := h.compare(t, history)
	summary := fmt.Sprintf("crash: rounds=%d (random %d, checkpoint %d, backup %d) acknowledged=%d lost=%d "+
		"deliveries=%d pushed=%d never_served=%d duplicate_serves=%d content_under_two_ids=%d committed_unacknowledged=%d integrity=%s",
		rounds, kinds["random"], kinds["checkpoint"], kinds["backup"], len(h.acked), c.lost,
		c.servedPairs, c.pushedPairs, c.neverServed, c.duplicateServes, c.underTwoIDs, c.unacknowledged, integrity)
	t.Log(summary)
	fmt.Println(summary)
	if len(h.acked) < 20*rounds {
		t.Errorf("only %d messages were acknowledged; the test did not exercise the server", len(h.acked))
	}
	if integrity != "ok" {
		t.Errorf("integrity_check: %s", integrity)
	}
}

// crashServerFlags run the server with every commit synced and nothing to
// slow the clients down or stop them posting.
var crashServerFlags = []string{"--sync", "full", "--rate-limit", "0", "--max-messages-per-room", "100000000"}

// crashKind is how round ends (see kill): the third round (or the last of
// fewer) during a backup, every other one as a checkpoint starts, the rest
// at random.
func crashKind(round, rounds int) string {
	switch {
	case round == 2 || (rounds < 3 && round == rounds-1):
		return "backup"
	case round%2 == 1:
		return "checkpoint"
	}
	return "random"
}

// runRound has every agent work and listen and six clients post against
// srv until kill has ended it the way kind says.
func (h *crashHistory) runRound(t *testing.T, srv *serverProc, db string, round int, alice created, kind string, limit time.Duration) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range h.agents {
		wg.Go(func() { h.work(t, srv, i, stop) })
		wg.Go(func() { h.listen(t, srv, i, stop) })
	}
	senders := append([]created{alice}, h.agents...)
	for c := 0; c < 6; c++ {
		wg.Go(func() { h.post(t, srv, round, c, senders[c%len(senders)], c%len(senders) == 0, stop) })
	}
	h.kill(t, srv, db, kind, limit)
	close(stop)
	wg.Wait()
}

// crashCounts are the test's figures: acknowledged messages lost, mentions
// never served, served and pushed, serves beyond the first, contents stored
// under two ids, and messages committed whose answer was lost with the
// server.
type crashCounts struct {
	lost, neverServed, servedPairs, pushedPairs, duplicateServes, underTwoIDs, unacknowledged int
}

// compare holds what the clients saw to the history read after the last
// restart, and fails the test for each message lost, never served, or
// stored under two ids.
func (h *crashHistory) compare(t *testing.T, history map[string]string) crashCounts {
	var c crashCounts
	for token, m := range h.acked {
		if history[token] != m.id {
			c.lost++
			t.Errorf("acknowledged message %s (%s) is not in the history", m.id, token)
		}
		for _, agent := range m.mentions {
			n := h.served[servedKey{m.id, agent}]
			if h.pushed[servedKey{m.id, agent}] {
				c.pushedPairs++
			}
			if n == 0 {
				c.neverServed++
				t.Errorf("acknowledged message %s was never served to %s", m.id, h.agents[agent].Handle)
				continue
			}
			c.servedPairs++
			c.duplicateServes += n - 1
		}
	}
	for token, id := range history {
		h.see(token, id)
		if _, ok := h.acked[token]; !ok {
			c.unacknowledged++ // committed, but the answer was lost with the server
		}
	}
	for token, ids := range h.ids {
		if len(ids) > 1 {
			c.underTwoIDs++
			t.Errorf("%s was stored under %d ids", token, len(ids))
		}
	}
	return c
}

// crashHistory is what the clients saw: acknowledged messages, and which
// message each agent was served (by /next or a push).
type crashHistory struct {
	room   string
	agents []created

	mu     sync.Mutex
	acked  map[string]ackedMessage    // by the content's probe token
	ids    map[string]map[string]bool // probe token → every id seen carrying it
	served map[servedKey]int          // how many times /next served it
	pushed map[servedKey]bool
}

type ackedMessage struct {
	id       string
	mentions []int // indexes into agents
}

type servedKey struct {
	message string
	agent   int
}

// probeToken finds the unique part of a probe message's content (the server
// may prepend mentions to it).
var probeToken = regexp.MustCompile(`probe-r\d+-c\d+-i\d+`)

func (h *crashHistory) see(token, id string) {
	if h.ids[token] == nil {
		h.ids[token] = map[string]bool{}
	}
	h.ids[token][id] = true
}

func (h *crashHistory) sawServed(agent int, id, content string, pushed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if pushed {
		h.pushed[servedKey{id, agent}] = true
	} else {
		h.served[servedKey{id, agent}]++
	}
	if token := probeToken.FindString(content); token != "" {
		h.see(token, id)
	}
}

// post sends messages until stop, each mentioning a random set of the agents
// other than the sender. It returns when the server is gone.
func (h *crashHistory) post(t *testing.T, srv *serverProc, round, client int, sender created, human bool, stop chan struct{}) {
	path := "/api/v1/agent/chats/" + h.room + "/messages"
	if human {
		path = "/api/v1/me/chats/" + h.room + "/messages"
	}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		var mentions []int
		var refs []map[string]string
		for a, agent := range h.agents {
			if agent.ID != sender.ID && (rand.IntN(2) == 0 || len(mentions) == 0 && a == len(h.agents)-1) {
				mentions = append(mentions, a)
				refs = append(refs, map[string]string{"id": agent.ID})
			}
		}
		if len(mentions) == 0 { // the sender was the last agent
			mentions, refs = []int{0}, []map[string]string{{"id": h.agents[0].ID}}
		}
		token := fmt.Sprintf("probe-r%d-c%d-i%d", round, client, i)
		status, body, err := srv.try("POST", path, sender.APIKey, map[string]any{
			"message": map[string]any{"content": "please look at " + token, "mentions": refs}})
		switch {
		case err != nil:
			return // the server is gone
		case status == 503:
			time.Sleep(10 * time.Millisecond)
			continue
		case status != 201:
			t.Errorf("post: %d %s", status, body)
			return
		}
		id, ok := createdID(body)
		if !ok {
			t.Errorf("201 without a message id: %s", body)
			return
		}
		h.mu.Lock()
		h.acked[token] = ackedMessage{id: id, mentions: mentions}
		h.see(token, id)
		h.mu.Unlock()
	}
}

// work is an agent's delivery loop until stop or the server's death.
func (h *crashHistory) work(t *testing.T, srv *serverProc, agent int, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		switch status, err := h.workOne(t, srv, agent); {
		case err != nil:
			return
		case status != 200:
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// drain works through an agent's messages until /next has nothing left.
func (h *crashHistory) drain(t *testing.T, srv *serverProc, agent int) {
	for {
		switch status, err := h.workOne(t, srv, agent); {
		case err != nil:
			t.Error(err)
			return
		case status == 204:
			return
		case status == 503:
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// workOne takes the next message, if any, and processes it; it returns the
// status /next answered. An error means the server did not answer.
func (h *crashHistory) workOne(t *testing.T, srv *serverProc, agent int) (int, error) {
	key := h.agents[agent].APIKey
	base := "/api/v1/agent/chats/" + h.room + "/messages/"
	status, body, err := srv.try("GET", base+"next", key, nil)
	if err != nil || status == 204 || status == 503 {
		return status, err
	}
	var next struct{ Data struct{ ID, Content string } }
	if status != 200 || json.Unmarshal(body, &next) != nil || next.Data.ID == "" {
		t.Errorf("next: %d %s", status, body)
		return status, fmt.Errorf("next: %d", status)
	}
	h.sawServed(agent, next.Data.ID, next.Data.Content, false)
	for _, step := range []string{"processing", "processed"} {
		status, body, err := srv.try("POST", base+next.Data.ID+"/"+step, key, map[string]any{})
		if err != nil {
			return 200, err
		}
		if status != 200 && status != 503 {
			t.Errorf("%s: %d %s", step, status, body)
			return 200, fmt.Errorf("%s: %d", step, status)
		}
	}
	return 200, nil
}

// listen records the message_created pushes an agent gets on the room's
// topic until stop or the server's death.
func (h *crashHistory) listen(t *testing.T, srv *serverProc, agent int, stop chan struct{}) {
	conn, err := srv.dialSocket("api_key=" + url.QueryEscape(h.agents[agent].APIKey))
	if err != nil {
		return // the server is gone already
	}
	go func() { <-stop; conn.Close() }()
	if err := wsutil.WriteClientText(conn, []byte(`["1","1","chat_room:`+h.room+`","phx_join",{}]`)); err != nil {
		return
	}
	for {
		frame, err := wsutil.ReadServerText(conn)
		if err != nil {
			return
		}
		var push []json.RawMessage
		if json.Unmarshal(frame, &push) != nil || len(push) != 5 {
			t.Errorf("not a Phoenix V2 frame: %s", frame)
			return
		}
		var event string
		var msg struct{ ID, Content string }
		if json.Unmarshal(push[3], &event) != nil || event != "message_created" || json.Unmarshal(push[4], &msg) != nil {
			continue
		}
		h.sawServed(agent, msg.ID, msg.Content, true)
	}
}

// kill SIGKILLs the server after up to limit of load: at a random moment, as
// soon as a checkpoint starts writing to the database file (in WAL mode
// nothing else writes there), or while `chatd backup` reads the database.
func (h *crashHistory) kill(t *testing.T, srv *serverProc, db, kind string, limit time.Duration) {
	warmup := 200*time.Millisecond + rand.N(limit/2)
	time.Sleep(warmup)
	var backupDone chan error
	switch kind {
	case "random":
		time.Sleep(rand.N(limit - warmup))
	case "checkpoint":
		before := fileState(db)
		for deadline := time.Now().Add(limit + 5*time.Second); fileState(db) == before; time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatal("no checkpoint wrote to the database file while messages were posted")
			}
		}
	case "backup":
		backup := chatdCommand(nil, "backup", "--db", db, filepath.Join(filepath.Dir(db), "backup.db"), "--force")
		if err := backup.Start(); err != nil {
			t.Fatal(err)
		}
		backupDone = make(chan error, 1)
		go func() { backupDone <- backup.Wait() }()
		time.Sleep(rand.N(10 * time.Millisecond))
	}
	srv.kill(t)
	if backupDone != nil {
		// Whether the copy finished or not, it must not harm the database; a
		// copy it did finish passed its own integrity check.
		select {
		case err := <-backupDone:
			t.Logf("the backup ended before the kill: %v", err)
		default:
			t.Logf("the server was killed while the backup ran; the backup ended with: %v", <-backupDone)
		}
	}
}

// fileState changes whenever the file is written.
func fileState(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String()
}

// readHistory returns the probe messages of the room's history, as a person
// reads them, by probe token.
func (h *crashHistory) readHistory(t *testing.T, srv *serverProc, key string) map[string]string {
	byToken := map[string]string{}
	srv.eachItem(t, "/api/v1/me/chats/"+h.room+"/messages?limit=100", key, func(item json.RawMessage) {
		var m struct{ ID, Content string }
		json.Unmarshal(item, &m)
		if token := probeToken.FindString(m.Content); token != "" {
			if other, ok := byToken[token]; ok && other != m.ID {
				t.Errorf("%s is in the history twice, as %s and %s", token, other, m.ID)
			}
			byToken[token] = m.ID
		}
	})
	return byToken
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s must be a positive integer, not %q", name, v)
	}
	return n
}
