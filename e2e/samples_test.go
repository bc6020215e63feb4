package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The sample agents of examples/, each run as a developer runs it: chatd
// dev's lines pasted into its environment, a person mentioning it in the
// dev room, and its answer and the delivery's end awaited from the
// person's side.

func TestPythonSampleAgentRoundTrip(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		skipWithout(t, "python3 is not on the PATH: install Python 3 (the standard library is all it needs) to run examples/python/agent.py")
	}
	d := startDev(t, nil, "--addr", "127.0.0.1:0", "--agents", "1")
	env := paste(t, d.blocks[0])
	agent := startSample(t, "../examples/python", env, python, "agent.py")
	agent.await(t, "is working")
	roundTrip(t, d, env)
	agent.stop(t)
}

func TestNodeSampleAgentRoundTrip(t *testing.T) {
	node := nodeWith(t, "../examples/node/node_modules/phoenix", "examples/node/node_modules is missing: run npm ci in examples/node/ to run its sample agent")
	d := startDev(t, nil, "--addr", "127.0.0.1:0", "--agents", "1")
	env := paste(t, d.blocks[0])
	// A message sent before the agent runs is never pushed to it: it
	// finds it with /next when it joins the room.
	early := mention(t, d, env, "sent before the agent started")
	agent := startSample(t, "../examples/node", env, node, "agent.mjs")
	awaitAnswer(t, d, env, early, "sent before the agent started")
	agent.await(t, "processed "+early+" in ")
	// Posted once the agent listens in the room, a message reaches it as a
	// push.
	agent.await(t, "joined chat_room:")
	id := roundTrip(t, d, env)
	agent.await(t, "processed "+id+" in ")
	for _, line := range strings.Split(agent.out.String(), "\n") {
		if strings.Contains(line, "processed "+early) && !strings.HasSuffix(line, "(next)") ||
			strings.Contains(line, "processed "+id) && !strings.HasSuffix(line, "(push)") {
			t.Fatalf("a message came the wrong way: %s", line)
		}
	}
	agent.stop(t)
}

// sample is a running sample agent.
type sample struct {
	cmd  *exec.Cmd
	out  *liveOutput
	done <-chan struct{}
}

// startSample runs a sample agent in dir with nothing in its environment but
// the PATH and the pasted variables.
func startSample(t *testing.T, dir string, env map[string]string, name string, args ...string) *sample {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "POLL_SECONDS=0.2"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	s := &sample{cmd: cmd, out: &liveOutput{}}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	// Registered first, so it runs last: after the agent has exited.
	t.Cleanup(func() { t.Logf("%s %s printed:\n%s", name, strings.Join(args, " "), s.out) })
	s.done = start(t, cmd)
	return s
}

// await waits until the agent has printed text.
func (s *sample) await(t *testing.T, text string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.out.String(), text) {
		select {
		case <-s.done:
			t.Fatalf("the agent exited (%v) before printing %q", s.cmd.ProcessState, text)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not print %q within 30 s", text)
		}
	}
}

// stop sends SIGTERM and wants the agent to exit 0, promptly.
func (s *sample) stop(t *testing.T) {
	t.Helper()
	terminate(t, s.cmd, s.done, "the agent", 10*time.Second)
}

// roundTrip has the person of chatd dev's link mention the agent in the dev
// room, and waits for the agent's answer mentioning the person and for the
// delivery to end processed. It returns the message's id.
func roundTrip(t *testing.T, d *devProc, env map[string]string) string {
	t.Helper()
	started := time.Now()
	id := mention(t, d, env, "ping from the test")
	awaitAnswer(t, d, env, id, "ping from the test")
	t.Logf("round trip: mentioned, answered and processed in %s", time.Since(started).Round(time.Millisecond))
	return id
}

// mention has the person of chatd dev's link send text in the dev room,
// mentioning the agent, and returns the message's id.
func mention(t *testing.T, d *devProc, env map[string]string, text string) string {
	t.Helper()
	base := env["BAND_REST_URL"]
	room := dataArray(t, base, bearer(d.token), "/api/v1/me/chats")[0].(map[string]any)["id"].(string)
	sent := dataObject(t, base, bearer(d.token), "POST", "/api/v1/me/chats/"+room+"/messages",
		map[string]any{"message": map[string]any{"content": text, "mentions": []map[string]string{{"id": env["BAND_AGENT_ID"]}}}})
	return sent["id"].(string)
}

// awaitAnswer waits until the agent has answered the message id (whose
// text its answer quotes) mentioning the person, and its delivery to the
// agent is processed.
func awaitAnswer(t *testing.T, d *devProc, env map[string]string, id, text string) {
	t.Helper()
	base, agentID := env["BAND_REST_URL"], env["BAND_AGENT_ID"]
	person := dataObject(t, base, bearer(d.token), "GET", "/api/v1/me", nil)["id"].(string)
	room := dataArray(t, base, bearer(d.token), "/api/v1/me/chats")[0].(map[string]any)["id"].(string)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var answered bool
		var status any
		for _, m := range dataArray(t, base, bearer(d.token), "/api/v1/me/chats/"+room+"/messages") {
			m := m.(map[string]any)
			meta, _ := m["metadata"].(map[string]any)
			if m["id"] == id {
				status = meta["delivery_status"].(map[string]any)[agentID].(map[string]any)["status"]
			}
			if m["sender_id"] == agentID && mentions(meta, person) && strings.Contains(m["content"].(string), text) {
				answered = true
			}
		}
		if answered && status == "processed" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %q answered %v, its delivery %v", text, answered, status)
		}
	}
}

func mentions(meta map[string]any, id string) bool {
	list, _ := meta["mentions"].([]any)
	for _, m := range list {
		if m, ok := m.(map[string]any); ok && m["id"] == id {
			return true
		}
	}
	return false
}
