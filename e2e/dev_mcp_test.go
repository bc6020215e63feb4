package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var devMCPLine = regexp.MustCompile(`^# Or over MCP \(docs/mcp\.md\): claude mcp add --transport http (\S+) (\S+) --header '([^:]+): ([^']+)'$`)

// The MCP line chatd dev prints for an agent names a URL and header that
// open an MCP session acting as that agent.
func TestDevMCPLineActsAsItsAgent(t *testing.T) {
	d := startDev(t, nil, "--addr", "127.0.0.1:0", "--agents", "1")
	defer d.stop(t)
	var m []string
	for _, line := range strings.Split(d.blocks[0], "\n") {
		if m = devMCPLine.FindStringSubmatch(line); m != nil {
			break
		}
	}
	if m == nil {
		t.Fatalf("no MCP line in the agent's block:\n%s", d.blocks[0])
	}
	name, url, header, value := m[1], m[2], m[3], m[4]
	if name != "chatd-agent-1" {
		t.Errorf("the MCP server is named %q, want chatd-agent-1", name)
	}
	post := func(session, body string) (*http.Response, string) {
		req, err := http.NewRequest("POST", url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(header, value)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, body := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	session := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != 200 || session == "" {
		t.Fatalf("initialize: %d %s", res.StatusCode, body)
	}
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if _, body = post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami"}}`); !strings.Contains(body, `\"handle\":\"dev/agent-1\"`) {
		t.Fatalf("whoami over the printed line: %s", body)
	}
}
