package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/apitest"
)

// The official TypeScript MCP SDK signs in to a real `chatd serve` with
// OAuth on its own (mcp_oauth.mjs): discovery from /mcp's 401, dynamic
// registration, PKCE, the person's consent (the script plays the browser
// and the person, who picks their agent), the code exchange, a tool call as
// the agent, and a refresh when its access token stops working. The person
// then sees the client in their grants, signs it out, and its tokens stop
// working.
func TestMCPTypeScriptOAuthSignIn(t *testing.T) {
	node := nodeWith(t, "node_modules/@modelcontextprotocol/sdk",
		"e2e/node_modules/@modelcontextprotocol/sdk is missing: run npm ci in e2e/ to run the MCP client test")
	db, alice := newDatabaseWithAlice(t)
	helper := registerAgent(t, db, "--name", "Helper", "--description", "Answers questions")
	addr := apitest.FreeAddr(t)
	base := "http://" + addr
	srv := startServer(t, db, "--addr", addr)

	script := exec.Command(node, "mcp_oauth.mjs")
	script.Env = append(os.Environ(), "CHATD_URL="+base, "PERSON_KEY="+alice.APIKey, "AGENT_ID="+helper.ID)
	stdout, _ := script.StdoutPipe()
	script.Stderr = os.Stderr
	out := &lines{ch: make(chan map[string]any, 100)}
	exited := start(t, script)
	go out.read(stdout)
	step := func(name string) map[string]any {
		t.Helper()
		return out.await(t, name, func(e map[string]any) bool { return e["step"] == name || e["step"] == "failed" })
	}

	if r := step("registered"); r["auth_method"] != "none" {
		t.Fatalf("registered %v", r)
	}
	if a := step("authorize"); !strings.HasPrefix(a["url"].(string), base+"/oauth/authorize?") {
		t.Fatalf("the SDK opened %v", a["url"])
	}
	if c := step("consent"); c["client"] != "chatd e2e (TypeScript SDK)" || c["resource"] != base+"/mcp" {
		t.Fatalf("the consent screen showed %v", c)
	}
	if r := step("redirected"); r["state"] != "e2e-state" || r["iss"] != base {
		t.Fatalf("redirected %v", r)
	}
	if me := step("whoami"); me["id"] != helper.ID || me["handle"] != helper.Handle {
		t.Fatalf("whoami = %v, want %s", me, helper.Handle)
	}
	if r := step("refreshed"); r["id"] != helper.ID || r["rotated"] != true {
		t.Fatalf("after the refresh: %v", r)
	}
	step("closed")
	select {
	case <-exited:
		if code := script.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("mcp_oauth.mjs exited %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("mcp_oauth.mjs did not exit")
	}

	grants := dataArray(t, base, apiKey(alice.APIKey), "/api/v1/me/oauth/grants")
	if len(grants) != 1 || grants[0].(map[string]any)["agent_handle"] != helper.Handle {
		t.Fatalf("alice's grants: %v", grants)
	}
	grantID := grants[0].(map[string]any)["id"].(string)
	if status, b, err := send(base, "DELETE", "/api/v1/me/oauth/grants/"+grantID, apiKey(alice.APIKey), nil); err != nil || status != 204 {
		t.Fatalf("signing the client out: %d %s %v", status, b, err)
	}
	if left := dataArray(t, base, apiKey(alice.APIKey), "/api/v1/me/oauth/grants"); len(left) != 0 {
		t.Fatalf("grants after signing the client out: %v", left)
	}
	srv.stop(t)
}
