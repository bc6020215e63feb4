package server

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// A socket lives no longer than its credential: each way a person's
// credential ends closes the connections opened with it (1008, which the
// SDKs do not retry), and only those. Agent keys replaced by a rotation and
// deleted agents are covered with rotation and deletion
// (server_my_agents_test.go, server_socket_test.go); a person's password set
// by the CLI against a running server in e2e/cli_test.go.
func TestSocketsEndWithTheirCredential(t *testing.T) {
	const password = "a long enough password"
	type world struct {
		ts                 *testServer
		aliceKey, spareKey string // spareKey from POST /me/keys; spareID its id
		spareID, agentID   string
		sessions           [2]string // two sign-ins
		alice              *store.User
	}
	setUp := func(t *testing.T) *world {
		ts := newTestServer(t)
		alice, aliceKey := ts.user("alice")
		agent, _ := ts.agent(alice, "Helper")
		if err := ts.db.SetPassword(context.Background(), alice.ID, password); err != nil {
			t.Fatal(err)
		}
		spare := ts.do(t, "POST", keysPath, apiKey(aliceKey), map[string]any{"key": map[string]any{"name": "laptop"}}).data(t)
		w := &world{ts: ts, aliceKey: aliceKey, spareKey: spare["api_key"].(string), spareID: spare["id"].(string),
			agentID: agent.ID, alice: alice}
		for i := range w.sessions {
			w.sessions[i] = ts.signIn(t, "alice", password)
		}
		return w
	}
	// Each socket is opened with one credential; as alice unless agent_id.
	sockets := map[string]func(w *world) url.Values{
		"key":              func(w *world) url.Values { return url.Values{"api_key": {w.aliceKey}} },
		"spare key":        func(w *world) url.Values { return url.Values{"api_key": {w.spareKey}} },
		"spare key, agent": func(w *world) url.Values { return url.Values{"api_key": {w.spareKey}, "agent_id": {w.agentID}} },
		"session 0":        func(w *world) url.Values { return url.Values{"token": {w.sessions[0]}} },
		"session 1":        func(w *world) url.Values { return url.Values{"token": {w.sessions[1]}} },
		"short token": func(w *world) url.Values {
			return url.Values{"token": {w.ts.token(w.alice, 2*time.Second)}}
		},
		"hour's token": func(w *world) url.Values {
			return url.Values{"token": {w.ts.token(w.alice, time.Hour)}}
		},
	}
	for _, tc := range []struct {
		name   string
		end    func(t *testing.T, w *world)
		closed []string // the sockets that must close; the others stay
	}{
		{"a key deleted", func(t *testing.T, w *world) {
			expect(t, w.ts.do(t, "DELETE", keysPath+"/"+w.spareID, apiKey(w.aliceKey), nil), 204, "")
		}, []string{"spare key", "spare key, agent", "short token"}},
		{"signed out", func(t *testing.T, w *world) {
			expect(t, w.ts.do(t, "POST", signOutPath, bearer(w.sessions[0]), nil), 204, "")
		}, []string{"session 0", "short token"}},
		{"password set", func(t *testing.T, w *world) {
			if err := w.ts.db.SetPassword(context.Background(), w.alice.ID, "another long password"); err != nil {
				t.Fatal(err)
			}
		}, []string{"session 0", "session 1", "short token"}},
		{"a token expired", func(t *testing.T, w *world) {}, []string{"short token"}},
		{"removed by an admin", func(t *testing.T, w *world) {
			root, rootKey := w.ts.user("operator")
			w.ts.exec(t, `UPDATE users SET role = 'admin' WHERE id = ?`, root.ID)
			expect(t, w.ts.doNoContent(t, "DELETE", "/api/v1/me/people/"+w.alice.ID, apiKey(rootKey)), 204, "")
		}, []string{"key", "spare key", "spare key, agent", "session 0", "session 1", "short token", "hour's token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := setUp(t)
			open := map[string]*listener{}
			for name, params := range sockets {
				topic := "user_rooms:" + w.alice.ID
				if params(w).Has("agent_id") {
					topic = "agent_rooms:" + w.agentID
				}
				open[name] = newListenerWith(t, w.ts, params(w), topic)
			}
			tc.end(t, w)
			for _, name := range tc.closed {
				open[name].awaitClose(t, 1008, "the socket opened with the "+name)
				delete(open, name)
			}
			time.Sleep(200 * time.Millisecond)
			for name, l := range open {
				if l.isClosed() {
					t.Errorf("the socket opened with the %s closed too", name)
				}
			}
		})
	}
}
