package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// largeRoomMessages is how many messages the large room holds.
const largeRoomMessages = 10000

// TestWebAppLargeRoom opens a room of 10,000 messages (text, with agents'
// thoughts and tool calls between them) in Chromium and measures what a
// person waits for (web_large.mjs): the time until the room's messages are
// painted, the long tasks while it opens and while the person scrolls back
// through its history, and the JavaScript and CSS the first load fetches,
// compressed, which must stay within 200 KB. It prints the figures; the
// thresholds it fails on are generous, for a busy two-core machine.
func TestWebAppLargeRoom(t *testing.T) {
	skipIfShort(t, "it writes 10,000 messages and drives Chromium")
	node := nodeWith(t, "node_modules/playwright-core", "e2e/node_modules/playwright-core is missing: run npm ci in e2e/")
	chromium := findChromium()
	if chromium == "" {
		skipWithout(t, "chromium is not installed (apt-get install chromium, or set CHATD_CHROMIUM)")
	}
	srv := startServer(t, filepath.Join(t.TempDir(), "chatd.db"), "--rate-limit", "0", "--sync", "normal")
	defer srv.stop(t)
	token, room := seedLargeRoom(t, srv)

	shots, err := filepath.Abs("screenshots")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	profile := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), webTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "web_large.mjs")
	cmd.Env = append(os.Environ(), "CHATD_URL="+srv.url, "TOKEN="+token, "ROOM="+room, "CHROMIUM="+chromium,
		"SCREENSHOTS="+shots, "PROFILE_DIR="+profile, fmt.Sprintf("MESSAGES=%d", largeRoomMessages))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		killUsing(profile)
		return nil
	}
	cmd.WaitDelay = 10 * time.Second
	out := &testLog{t: t}
	cmd.Stdout = out
	cmd.Stderr = out
	err = cmd.Run()
	out.flush()
	killUsing(profile)
	if ctx.Err() != nil {
		t.Fatalf("web_large.mjs did not finish within %s", webTimeout)
	}
	if err != nil {
		t.Fatalf("node web_large.mjs: %v", err)
	}
}

// seedLargeRoom creates the first person, an agent and a room of theirs,
// and fills the room with largeRoomMessages messages from the agent, many
// writers at once; it answers the person's session token and the room.
func seedLargeRoom(t *testing.T, srv *serverProc) (token, room string) {
	t.Helper()
	link := srv.awaitSetup(t).link
	setupToken := link[strings.LastIndex(link, "/")+1:]
	out := dataObject(t, srv.url, nil, "POST", "/api/v1/auth/setup", map[string]any{
		"token": setupToken, "handle": "alice", "name": "Alice", "password": "correct-horse-42"})
	token = out["access_token"].(string)
	me := out["user"].(map[string]any)["id"].(string)
	reg := dataObject(t, srv.url, bearer(token), "POST", "/api/v1/me/agents/register",
		map[string]any{"agent": map[string]any{"name": "Helper", "description": "answers in the large room"}})
	agentKey := reg["credentials"].(map[string]any)["api_key"].(string)
	agentID := reg["agent"].(map[string]any)["id"].(string)
	room = dataObject(t, srv.url, bearer(token), "POST", "/api/v1/me/chats", map[string]any{"chat": map[string]any{"title": "Ten thousand"}})["id"].(string)
	dataObject(t, srv.url, bearer(token), "POST", "/api/v1/me/chats/"+room+"/participants",
		map[string]any{"participant": map[string]any{"participant_id": agentID}})

	started := time.Now()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > largeRoomMessages || failed.Load() != nil {
					return
				}
				path, body := largeRoomMessage(room, me, i)
				status, b, err := send(srv.url, "POST", path, apiKey(agentKey), body)
				if err != nil || status != 201 {
					failed.Store(fmt.Sprintf("message %d: %d %s %v", i, status, b, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
	t.Logf("wrote %d messages in %s", largeRoomMessages, time.Since(started).Round(time.Millisecond))
	return token, room
}

// largeRoomMessage is the i-th message: mostly text for alice, some in
// Markdown, and every tenth pair an agent's thought and tool call.
func largeRoomMessage(room, me string, i int) (string, any) {
	switch i % 10 {
	case 3:
		return "/api/v1/agent/chats/" + room + "/events", map[string]any{"event": map[string]any{
			"message_type": "thought", "content": fmt.Sprintf("thinking about item %d", i)}}
	case 4:
		call, _ := json.Marshal(map[string]any{"name": "search", "args": map[string]any{"q": fmt.Sprint(i)}})
		return "/api/v1/agent/chats/" + room + "/events", map[string]any{"event": map[string]any{
			"message_type": "tool_call", "content": string(call)}}
	case 7:
		return "/api/v1/agent/chats/" + room + "/messages", map[string]any{"message": map[string]any{
			"content": fmt.Sprintf("@alice item %d: **done**, see `log-%d` and\n\n- one\n- two", i, i), "mentions": []any{map[string]any{"id": me}}}}
	}
	return "/api/v1/agent/chats/" + room + "/messages", map[string]any{"message": map[string]any{
		"content": fmt.Sprintf("@alice item %d of the long history", i), "mentions": []any{map[string]any{"id": me}}}}
}
