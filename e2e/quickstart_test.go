package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/apitest"
)

// TestQuickstartAnswersFollowTheOpenAPIDocument makes the quickstart's first
// account and agent (docs/quickstart.md, steps 2 and 3; TestDocsExamples runs
// the page itself) and checks what a person and an agent first read against
// the OpenAPI document: with the server running, a person made by create-user
// without --email (with a password from stdin), an agent, then their
// requests. A person without an email reads as <handle>@noreply.invalid,
// which UserDetails (email required, format email) accepts.
func TestQuickstartAnswersFollowTheOpenAPIDocument(t *testing.T) {
	oas, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "chatd.db")
	srv := startServer(t, db)
	text := runChatdWithInput(t, "a long enough password\n", "create-user", "--db", db, "--handle", "alice", "--name", "Alice Liddell",
		"--password-stdin").ok(t).stdout
	humanKey := keyIn(t, text, "band_u_")
	agentKey := keyIn(t, runChatd(t, nil, "register-agent", "--db", db, "--name", "Helper", "--description", "Answers questions").ok(t).stdout, "band_a_")
	token := strings.TrimSpace(runChatd(t, nil, "token", "--db", db, "--user", "alice").ok(t).stdout)

	get := func(path string, headers map[string]string) []byte {
		t.Helper()
		status, body, err := send(srv.url, "GET", path, headers, nil)
		if err != nil {
			t.Fatal(err)
		}
		if status != 200 {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		if oas.Documented("GET", path) {
			if err := oas.ValidateResponse("GET", path, status, body); err != nil {
				t.Errorf("GET %s: %v", path, err)
			}
		}
		return body
	}
	get("/api/v1/agent/me", map[string]string{"X-API-Key": agentKey})
	get("/api/v1/me/agents", map[string]string{"X-API-Key": humanKey})
	for path, headers := range map[string]map[string]string{
		"/api/v1/me":         {"Authorization": "Bearer " + token},
		"/api/v1/me/profile": {"X-API-Key": humanKey},
	} {
		var me struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(get(path, headers), &me); err != nil {
			t.Fatal(err)
		}
		if err := oas.ValidateSchema("UserDetails", me.Data); err != nil {
			t.Errorf("GET %s is not UserDetails: %v", path, err)
		}
		if !strings.Contains(string(me.Data), `"email":"alice@noreply.invalid"`) {
			t.Errorf("GET %s: %s", path, me.Data)
		}
	}
}

// keyIn returns the API key with the given prefix that a command printed.
func keyIn(t testing.TB, stdout, prefix string) string {
	t.Helper()
	for _, f := range strings.Fields(stdout) {
		if strings.HasPrefix(f, prefix) {
			return f
		}
	}
	t.Fatalf("no %s… key in %q", prefix, stdout)
	return ""
}
