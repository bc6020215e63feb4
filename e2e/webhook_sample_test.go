package e2e

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// examples/webhook, run as a developer runs it: it registers its own
// webhook, does what came before it started (the inbox keeps it), is
// called for a new message and answers it, refuses a request chatd did
// not sign, and removes its webhook when stopped.
func TestWebhookSampleAgentRoundTrip(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "webhook-agent")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/webhook").CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/webhook: %v\n%s", err, out)
	}
	d := startDev(t, nil, "--addr", "127.0.0.1:0", "--agents", "1")
	env := paste(t, d.blocks[0])
	early := mention(t, d, env, "sent before the agent started")

	agent := startSample(t, t.TempDir(), env, bin, "-listen", "127.0.0.1:0")
	agent.await(t, "listening on ")
	awaitAnswer(t, d, env, early, "sent before the agent started")
	agent.await(t, "processed "+early)
	id := roundTrip(t, d, env)
	agent.await(t, "heard of "+id)
	agent.await(t, "processed "+id)

	addr := regexp.MustCompile(`listening on (\S+):`).FindStringSubmatch(agent.out.String())[1]
	forged, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader(`{"type":"message.created"}`))
	if err != nil {
		t.Fatal(err)
	}
	forged.Body.Close()
	if forged.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unsigned request answered %d, want 401", forged.StatusCode)
	}
	agent.await(t, "refused a request")

	agent.stop(t)
	if hooks := dataArray(t, env["BAND_REST_URL"], apiKey(env["BAND_API_KEY"]), "/api/v1/agent/webhooks"); len(hooks) != 0 {
		t.Fatalf("the stopped agent left its webhook: %v", hooks)
	}
}
