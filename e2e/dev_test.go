package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws/wsutil"

	"github.com/chatd/chatd/store"
)

// devProc is a running `chatd dev` and what it printed up to its Ready
// line.
type devProc struct {
	cmd    *exec.Cmd
	done   <-chan struct{}
	stderr *liveOutput
	// cwd is the directory it runs in, empty unless it writes there.
	cwd string
	// link opens the web app signed in; token is the session it carries.
	link, token, password string
	// blocks are each agent's lines as printed, to be pasted.
	blocks []string
}

var (
	devLinkLine     = regexp.MustCompile(`^#   (http://\S+/#/session/(\S+))$`)
	devPasswordLine = regexp.MustCompile(`^# @dev's password: (\S+)$`)
)

// startDev runs chatd dev with args, in an empty directory of its own and
// an environment without CHATD_* variables but env, and reads what it
// prints until it is ready. It is killed when the test ends if it is still
// running.
func startDev(t *testing.T, env []string, args ...string) *devProc {
	t.Helper()
	cmd := devCommand(t, env, args...)
	d := &devProc{cmd: cmd, stderr: &liveOutput{}, cwd: cmd.Dir}
	cmd.Stderr = d.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: after the process has exited.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chatd dev %v printed on stderr:\n%s", args, d.stderr)
		}
	})
	d.done = start(t, cmd)
	ready := make(chan bool, 1)
	go d.read(stdout, ready)
	select {
	case ok := <-ready:
		if !ok {
			<-d.done
			t.Fatalf("chatd dev %v exited %d before it was ready; stderr:\n%s", args, cmd.ProcessState.ExitCode(), d.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("chatd dev was not ready within a minute; stderr:\n%s", d.stderr)
	}
	if d.link == "" || d.password == "" || len(d.blocks) == 0 {
		t.Fatalf("chatd dev printed no link, password or agent: %+v", d)
	}
	return d
}

// read collects the link, the password and the agents' blocks, and says
// whether the Ready line came.
func (d *devProc) read(stdout interface{ Read([]byte) (int, error) }, ready chan<- bool) {
	sc := bufio.NewScanner(stdout)
	block := -1
	for sc.Scan() {
		line := sc.Text()
		switch m, p := devLinkLine.FindStringSubmatch(line), devPasswordLine.FindStringSubmatch(line); {
		case m != nil:
			d.link, d.token = m[1], m[2]
		case p != nil:
			d.password = p[1]
		case strings.HasPrefix(line, "# Agent "):
			d.blocks = append(d.blocks, line+"\n")
			block = len(d.blocks) - 1
		case block >= 0 && line != "":
			d.blocks[block] += line + "\n"
		case line == "":
			block = -1
		}
		if strings.HasPrefix(line, "# Ready.") {
			ready <- true
			for sc.Scan() { // nothing more is expected; keep the pipe open
			}
			return
		}
	}
	ready <- false
}

// devCommand is chatd dev with args, to run in an empty directory with an
// environment without CHATD_* variables but env.
func devCommand(t *testing.T, env []string, args ...string) *exec.Cmd {
	cmd := chatdCommand(env, append([]string{"dev", "--log-level", "warn"}, args...)...)
	cmd.Dir = t.TempDir()
	return cmd
}

// stop ends chatd dev with SIGTERM and wants it to exit 0.
func (d *devProc) stop(t *testing.T) {
	t.Helper()
	terminate(t, d.cmd, d.done, "chatd dev", 30*time.Second)
}

// bandVars names the variables the Band SDKs read, as dev prints them.
var bandVars = []string{"BAND_REST_URL", "BAND_WS_URL", "BAND_AGENT_ID", "BAND_API_KEY"}

// paste runs an agent's block as a developer's shell would, in a shell that
// has nothing else in its environment, and returns what the variables hold
// there: a tiny command prints them.
func paste(t *testing.T, block string) map[string]string {
	t.Helper()
	script := block + `printf '%s\n' "$BAND_REST_URL" "$BAND_WS_URL" "$BAND_AGENT_ID" "$BAND_API_KEY"` + "\n"
	sh := exec.Command("sh", "-c", script)
	sh.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(bandVars) {
		t.Fatalf("the pasted lines printed %q", out)
	}
	env := map[string]string{}
	for i, name := range bandVars {
		if got[i] == "" {
			t.Fatalf("pasting %q left %s empty", block, name)
		}
		env[name] = got[i]
	}
	return env
}

func TestDevPrintsLinesThatWorkWhenPasted(t *testing.T) {
	d := startDev(t, nil, "--addr", "127.0.0.1:0", "--agents", "3")
	if len(d.blocks) != 3 {
		t.Fatalf("chatd dev --agents 3 printed %d agents", len(d.blocks))
	}
	var ids []string
	for _, block := range d.blocks {
		env := paste(t, block)
		base, key := env["BAND_REST_URL"], env["BAND_API_KEY"]
		me := dataObject(t, base, apiKey(key), "GET", "/api/v1/agent/me", nil)
		if me["id"] != env["BAND_AGENT_ID"] || !strings.HasPrefix(me["handle"].(string), "dev/agent-") {
			t.Fatalf("the pasted key is %v %v, the pasted id %s", me["id"], me["handle"], env["BAND_AGENT_ID"])
		}
		ids = append(ids, env["BAND_AGENT_ID"])
		rooms := dataArray(t, base, apiKey(key), "/api/v1/agent/chats")
		if len(rooms) != 1 || rooms[0].(map[string]any)["title"] != "Dev room" {
			t.Fatalf("the agent is in %v, want the one Dev room", rooms)
		}
		joinControl(t, env)
	}
	// One room, with the person and every agent.
	env := paste(t, d.blocks[0])
	room := dataArray(t, env["BAND_REST_URL"], apiKey(env["BAND_API_KEY"]), "/api/v1/agent/chats")[0].(map[string]any)["id"].(string)
	members := map[string]string{}
	for _, p := range dataArray(t, env["BAND_REST_URL"], apiKey(env["BAND_API_KEY"]), "/api/v1/agent/chats/"+room+"/participants") {
		p := p.(map[string]any)
		members[p["id"].(string)] = p["type"].(string)
	}
	for _, id := range ids {
		if members[id] != "Agent" {
			t.Fatalf("agent %s is not in the room: %v", id, members)
		}
	}
	if len(members) != 4 {
		t.Fatalf("the room holds %v, want the person and 3 agents", members)
	}

	// The link's token is a session of @dev, who is in that room; the
	// password signs in too.
	person := dataObject(t, env["BAND_REST_URL"], bearer(d.token), "GET", "/api/v1/me", nil)
	if person["handle"] != "dev" || members[person["id"].(string)] != "User" {
		t.Fatalf("the link signs in %v, not the person in the room %v", person, members)
	}
	if status := signIn(t, env["BAND_REST_URL"], "dev", d.password); status != 200 {
		t.Fatalf("signing in with the printed password: %d", status)
	}

	// Stopping removes the throwaway database.
	dir := throwawayDir(t, d)
	d.stop(t)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the throwaway database's directory %s is still there (%v)", dir, err)
	}
	if !strings.Contains(d.stderr.String(), "removed the throwaway database") {
		t.Fatalf("chatd dev did not say it removed the throwaway database:\n%s", d.stderr)
	}
	if left, _ := os.ReadDir(d.cwd); len(left) != 0 {
		t.Fatalf("chatd dev left %v in the directory it ran in", left)
	}
}

// throwawayDir is the directory of the throwaway database dev named on
// stderr.
func throwawayDir(t *testing.T, d *devProc) string {
	t.Helper()
	m := regexp.MustCompile(`chatd: database (\S+) \(throwaway`).FindStringSubmatch(d.stderr.String())
	if m == nil {
		t.Fatalf("chatd dev did not name its throwaway database:\n%s", d.stderr)
	}
	return filepath.Dir(m[1])
}

// joinControl opens the pasted BAND_WS_URL as an SDK does (key in the
// x-api-key header, agent_id and vsn in the query) and joins the agent's
// control topic, which both SDKs require.
func joinControl(t *testing.T, env map[string]string) {
	t.Helper()
	conn, err := dialWebSocket(env["BAND_WS_URL"]+"?vsn=2.0.0&agent_id="+env["BAND_AGENT_ID"], http.Header{"X-Api-Key": {env["BAND_API_KEY"]}})
	if err != nil {
		t.Fatalf("dial %s: %v", env["BAND_WS_URL"], err)
	}
	defer conn.Close()
	topic := "agent_control:" + env["BAND_AGENT_ID"]
	join, _ := json.Marshal([]any{"1", "1", topic, "phx_join", map[string]any{}})
	if err := wsutil.WriteClientText(conn, join); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	frame, err := wsutil.ReadServerText(conn)
	if err != nil {
		t.Fatal(err)
	}
	var reply []json.RawMessage
	if json.Unmarshal(frame, &reply) != nil || len(reply) != 5 || !strings.Contains(string(reply[4]), `"status":"ok"`) {
		t.Fatalf("joining %s answered %s", topic, frame)
	}
}

// A database named with --db is kept and reused; --reset starts it afresh;
// a database with real people is used only when --db names it, and never
// reset.
func TestDevNamedDatabases(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "dev.db")

	first := startDev(t, nil, "--db", mine, "--addr", "127.0.0.1:0", "--agents", "1")
	a1 := paste(t, first.blocks[0])
	base := a1["BAND_REST_URL"]
	room := dataArray(t, base, apiKey(a1["BAND_API_KEY"]), "/api/v1/agent/chats")[0].(map[string]any)["id"].(string)
	person := dataObject(t, base, bearer(first.token), "GET", "/api/v1/me", nil)["id"].(string)
	dataObject(t, base, apiKey(a1["BAND_API_KEY"]), "POST", "/api/v1/agent/chats/"+room+"/messages",
		map[string]any{"message": map[string]any{"content": "kept?", "mentions": []map[string]string{{"id": person}}}})
	first.stop(t)

	// The second run finds the same person, agent and room, adds a second
	// agent, and gives new keys and a new password: the old ones stop.
	second := startDev(t, nil, "--db", mine, "--addr", "127.0.0.1:0", "--agents", "2")
	b1, b2 := paste(t, second.blocks[0]), paste(t, second.blocks[1])
	base = b1["BAND_REST_URL"]
	if b1["BAND_AGENT_ID"] != a1["BAND_AGENT_ID"] || b1["BAND_API_KEY"] == a1["BAND_API_KEY"] {
		t.Fatalf("the second run's first agent is %v, the first run's %v: want the same agent with a new key", b1, a1)
	}
	if status := keyStatus(t, base, a1["BAND_API_KEY"]); status != 401 {
		t.Fatalf("the first run's key answers %d, want 401", status)
	}
	for _, env := range []map[string]string{b1, b2} {
		rooms := dataArray(t, base, apiKey(env["BAND_API_KEY"]), "/api/v1/agent/chats")
		if len(rooms) != 1 || rooms[0].(map[string]any)["id"] != room {
			t.Fatalf("%s is in %v, want the first run's room %s", env["BAND_AGENT_ID"], rooms, room)
		}
	}
	if got := len(dataArray(t, base, bearer(second.token), "/api/v1/me/chats/"+room+"/messages")); got != 1 {
		t.Fatalf("the room kept %d messages, want 1", got)
	}
	if signIn(t, base, "dev", first.password) != 401 || signIn(t, base, "dev", second.password) != 200 {
		t.Fatal("the first run's password still signs in, or the second's does not")
	}
	second.stop(t)

	// --reset: a new database, nothing of the old one.
	third := startDev(t, nil, "--db", mine, "--addr", "127.0.0.1:0", "--agents", "1", "--reset")
	c1 := paste(t, third.blocks[0])
	if c1["BAND_AGENT_ID"] == a1["BAND_AGENT_ID"] || !strings.Contains(third.stderr.String(), "--reset removed "+mine) {
		t.Fatalf("--reset kept the agent %s; stderr:\n%s", c1["BAND_AGENT_ID"], third.stderr)
	}
	third.stop(t)
}

func TestDevRefusals(t *testing.T) {
	dir := t.TempDir()
	theirs := filepath.Join(dir, "theirs.db")
	newDatabase(t, theirs)
	runChatd(t, nil, "create-user", "--db", theirs, "--handle", "alice", "--name", "Alice").ok(t)
	before := fileDigest(t, theirs)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"CHATD_DB with real people", []string{"CHATD_DB=" + theirs}, nil, 2,
			"CHATD_DB names " + theirs + ", which holds people chatd dev did not make (alice): name it with --db"},
		{"reset with real people", nil, []string{"--db", theirs, "--reset"}, 1,
			"holds people chatd dev did not make (alice): --reset starts afresh only a database of chatd dev's own, so nothing was removed"},
		{"reset without a database", nil, []string{"--reset"}, 2, "--reset starts afresh a database named with --db"},
		{"no agents", nil, []string{"--agents", "0"}, 2, "--agents must be from 1 to 20, not 0"},
		{"too many agents", []string{"CHATD_DEV_AGENTS=21"}, nil, 2, "--agents (set by CHATD_DEV_AGENTS) must be from 1 to 20, not 21"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devRefuses(t, tc.env, tc.code, tc.want, append(tc.args, "--addr", "127.0.0.1:0")...)
			if fileDigest(t, theirs) != before {
				t.Fatal("the refused chatd dev changed the database")
			}
		})
	}
	t.Run("a database a server is running on", func(t *testing.T) {
		srv := startServer(t, theirs)
		devRefuses(t, nil, 1, "another chatd serve (or a restore) is using "+theirs, "--db", theirs, "--addr", "127.0.0.1:0")
		srv.stop(t)
	})
	t.Run("an address that is taken", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		devRefuses(t, nil, 1, "address already in use: choose another with --addr", "--addr", ln.Addr().String())
	})
	t.Run("real people named with --db", func(t *testing.T) {
		// The database gets dev's person beside alice, in an organization
		// of its own.
		d := startDev(t, nil, "--db", theirs, "--addr", "127.0.0.1:0")
		env := paste(t, d.blocks[0])
		if keyStatus(t, env["BAND_REST_URL"], env["BAND_API_KEY"]) != 200 {
			t.Fatal("the agent's key does not work beside alice")
		}
		d.stop(t)
		for org, want := range map[string]string{"chatd dev": "alice", "default": "dev"} {
			if got, err := store.PeopleOutside(context.Background(), theirs, org, 10); err != nil || strings.Join(got, ",") != want {
				t.Fatalf("people outside %q: %v %v, want %s", org, got, err, want)
			}
		}
	})
	t.Run("a real person with dev's handle", func(t *testing.T) {
		// Never taken over.
		taken := filepath.Join(dir, "taken.db")
		newDatabase(t, taken)
		runChatd(t, nil, "create-user", "--db", taken, "--handle", "dev", "--name", "Dev Eloper").ok(t)
		devRefuses(t, nil, 1, `the handle @dev belongs to a person chatd dev did not make (of the organization "default")`,
			"--db", taken, "--addr", "127.0.0.1:0")
	})
}

// devRefuses runs chatd dev with args and wants it to exit with code,
// saying want.
func devRefuses(t *testing.T, env []string, code int, want string, args ...string) {
	t.Helper()
	cmd := devCommand(t, env, args...)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != code || !strings.Contains(string(out), want) {
		t.Fatalf("chatd dev %v: exit %v (want %d): %v\n%s\nwant it to say %q", args, cmd.ProcessState.ExitCode(), code, err, out, want)
	}
}

// keyStatus is the status GET /api/v1/agent/me answers an agent key.
func keyStatus(t *testing.T, base, key string) int {
	t.Helper()
	status, _, err := send(base, "GET", "/api/v1/agent/me", apiKey(key), nil)
	if err != nil {
		t.Fatal(err)
	}
	return status
}
