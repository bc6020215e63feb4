package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
)

// An acknowledged write is a committed, synced write: a server killed with
// SIGKILL in the middle of a write storm loses none of the writes it answered
// 201 to. Three rounds, each killing the server at a different moment.
func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	skipIfShort(t, "kills and restarts a server")
	db, alice := newDatabaseWithAlice(t)
	serverArgs := []string{"--sync", "full", "--max-agents-per-user", "1000000"}

	acked := map[string]bool{}
	for round := 0; round < 3; round++ {
		srv := startServer(t, db, serverArgs...)
		storm := startWriteStorm(8, func(w, i int) (string, bool) {
			status, body, err := srv.try("POST", "/api/v1/me/agents/register", alice.APIKey, map[string]any{
				"agent": map[string]any{"name": fmt.Sprintf("r%dw%di%d", round, w, i), "description": "durability probe"}})
			if err != nil {
				return "", false // the server is gone
			}
			if status != 201 {
				t.Errorf("register: %d %s", status, body)
				return "", false
			}
			var out struct {
				Data struct {
					Agent struct{ ID string }
				}
			}
			if err := json.Unmarshal(body, &out); err != nil || out.Data.Agent.ID == "" {
				t.Errorf("201 without an agent id: %s", body)
				return "", false
			}
			return out.Data.Agent.ID, true
		})
		storm.waitFor((round+1)*150 - len(acked))
		srv.kill(t)
		storm.halt()
		for _, id := range storm.ackedSoFar() {
			acked[id] = true
		}
	}

	srv := startServer(t, db, serverArgs...)
	present := map[string]bool{}
	srv.eachItem(t, "/api/v1/me/agents?limit=100", alice.APIKey, func(item json.RawMessage) {
		var a struct{ ID string }
		json.Unmarshal(item, &a)
		present[a.ID] = true
	})
	lost := 0
	for id := range acked {
		if !present[id] {
			lost++
		}
	}
	t.Logf("acknowledged %d writes over 3 SIGKILLs; %d present after restart (unacknowledged writes that committed count too); lost %d",
		len(acked), len(present), lost)
	if len(acked) < 450 {
		t.Fatalf("only %d writes were acknowledged; the test did not exercise the server", len(acked))
	}
	if lost != 0 {
		t.Fatalf("%d acknowledged writes were lost", lost)
	}
}
