package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	chatdphx "github.com/chatd/chatd/server/phx"
	"github.com/chatd/chatd/store"
)

type phxConn = chatdphx.Conn

// socketURL is the socket endpoint with query parameters.
func (ts *testServer) socketURL(params url.Values) string {
	u, _ := url.Parse(ts.http.URL)
	u.Scheme, u.Path, u.RawQuery = "ws", "/api/v1/socket/websocket", params.Encode()
	return u.String()
}

// socketWorld: alice owns a poster and a worker agent; the poster's room has
// the worker, alice and bob in it.
type socketWorld struct {
	ts                             *testServer
	aliceKey, bobKey, carolKey     string
	posterKey, workerKey, workerID string
	aliceID, bobID                 string
	room                           string
}

func newSocketWorld(t *testing.T) *socketWorld { return newSocketWorldOn(t, newTestServer(t)) }

// newSocketWorldOn makes the world's people, agents and room on ts.
func newSocketWorldOn(t *testing.T, ts *testServer) *socketWorld {
	alice, aliceKey := ts.user("alice")
	bob, bobKey := ts.user("bob")
	_, carolKey := ts.user("carol", "Elsewhere")
	_, posterKey := ts.agent(alice, "Poster")
	worker, workerKey := ts.agent(alice, "Worker")
	w := &socketWorld{ts: ts, aliceKey: aliceKey, bobKey: bobKey, carolKey: carolKey, posterKey: posterKey,
		workerKey: workerKey, workerID: worker.ID, aliceID: alice.ID, bobID: bob.ID}
	w.room = ts.do(t, "POST", "/api/v1/agent/chats", apiKey(posterKey), map[string]any{}).data(t)["id"].(string)
	for _, id := range []string{worker.ID, alice.ID} {
		expect(t, ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/participants", apiKey(posterKey),
			map[string]any{"participant": map[string]any{"participant_id": id}}), 201, "")
	}
	expect(t, ts.do(t, "POST", "/api/v1/me/chats/"+w.room+"/participants", apiKey(aliceKey),
		map[string]any{"participant": map[string]any{"participant_id": bob.ID}}), 201, "")
	return w
}

// pushLog records the pushes a socket client receives, for a test to wait
// for and count.
type pushLog struct {
	mu     sync.Mutex
	events []push
}

type push struct {
	topic, event string
	payload      map[string]any
}

func (l *pushLog) record(topic, event string, payload map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, push{topic, event, payload})
}

// listener is a raw client that joins topics and records every push.
type listener struct {
	pushLog
	raw    *rawSocket
	closed chan struct{}
	code   int // the close code, once closed with one (guarded by mu)
}

// newListener connects with key (in the query), joins topics and records
// what arrives from then on.
func newListener(t *testing.T, ts *testServer, key string, topics ...string) *listener {
	t.Helper()
	return newListenerWith(t, ts, url.Values{"api_key": {key}}, topics...)
}

// newListenerWith is newListener with the credential (and agent_id, if any)
// given as query parameters.
func newListenerWith(t *testing.T, ts *testServer, params url.Values, topics ...string) *listener {
	t.Helper()
	params.Set("vsn", "2.0.0")
	raw, err := dialRaw(t, ts.socketURL(params), nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{raw: raw, closed: make(chan struct{})}
	for i, topic := range topics {
		ref := fmt.Sprint(i + 1)
		raw.send(t, `["`+ref+`","`+ref+`","`+topic+`","phx_join",{}]`)
		m := raw.next(t)
		// A push on a topic joined a moment ago (presence, say) may come
		// before this reply: it is recorded like any other.
		for m[1] == nil {
			topic, _ := m[2].(string)
			event, _ := m[3].(string)
			payload, _ := m[4].(map[string]any)
			l.record(topic, event, payload)
			m = raw.next(t)
		}
		if m[1] != ref || m[4].(map[string]any)["status"] != "ok" {
			t.Fatalf("joining %s: %v", topic, m)
		}
	}
	go l.read()
	return l
}

func (l *listener) read() {
	defer close(l.closed)
	rd := l.raw.reader()
	for {
		_ = l.raw.conn.SetReadDeadline(time.Now().Add(time.Minute))
		b, err := wsutil.ReadServerText(rd)
		if err != nil {
			var closed wsutil.ClosedError
			if errors.As(err, &closed) {
				l.mu.Lock()
				l.code = int(closed.Code)
				l.mu.Unlock()
			}
			return
		}
		var m []any
		if json.Unmarshal(b, &m) != nil || len(m) != 5 {
			continue
		}
		topic, _ := m[2].(string)
		event, _ := m[3].(string)
		payload, _ := m[4].(map[string]any)
		l.record(topic, event, payload)
	}
}

// await waits for a push of event on topic that satisfies match.
func (l *pushLog) await(t *testing.T, topic, event string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for _, e := range l.events {
			if e.topic == topic && e.event == event && (match == nil || match(e.payload)) {
				l.mu.Unlock()
				return e.payload
			}
		}
		l.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %s on %s", event, topic)
	return nil
}

// awaitClose waits for the server to close the connection and fails the
// test unless it closed with code; what names the connection.
func (l *listener) awaitClose(t *testing.T, code int, what string) {
	t.Helper()
	select {
	case <-l.closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s stayed open", what)
	}
	if l.code != code {
		t.Fatalf("%s closed with %d, want %d", what, l.code, code)
	}
}

// isClosed reports whether the connection has ended.
func (l *listener) isClosed() bool {
	select {
	case <-l.closed:
		return true
	default:
		return false
	}
}

// count counts recorded pushes of event on topic.
func (l *pushLog) count(topic, event string) int { return l.countOf(topic, event, nil) }

// countOf counts recorded pushes of event on topic that satisfy match (nil:
// all of them).
func (l *pushLog) countOf(topic, event string, match func(map[string]any) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.topic == topic && e.event == event && (match == nil || match(e.payload)) {
			n++
		}
	}
	return n
}

func (w *socketWorld) post(t *testing.T, content string, mention string) string {
	t.Helper()
	r := w.ts.do(t, "POST", "/api/v1/agent/chats/"+w.room+"/messages", apiKey(w.posterKey),
		map[string]any{"message": map[string]any{"content": content, "mentions": []map[string]string{{"id": mention}}}})
	expect(t, r, 201, "")
	return r.data(t)["id"].(string)
}

// postUnseen posts content to the worker and checks that s is not pushed
// it: the next frame s gets is the reply to a heartbeat (ref) sent after
// the post. what says what a push would mean.
func (w *socketWorld) postUnseen(t *testing.T, s *rawSocket, content, ref, what string) {
	t.Helper()
	w.post(t, content, w.workerID)
	s.send(t, `["","`+ref+`","phoenix","heartbeat",{}]`)
	if m := s.next(t); m[1] != ref {
		t.Fatalf("%s: %v", what, m)
	}
}

func TestSocketJoinsAreAuthorized(t *testing.T) {
	w := newSocketWorld(t)
	worker, carol, alice := w.dial(t, w.workerKey), w.dial(t, w.carolKey), w.dial(t, w.aliceKey)
	for i, tc := range []struct {
		c     *rawSocket
		topic string
	}{
		{worker, "agent_rooms:" + w.aliceID}, // not itself
		{worker, "agent_control:00000000-0000-7000-8000-000000000000"},
		{worker, "user_rooms:" + w.aliceID},  // agents have no user topics
		{alice, "agent_rooms:" + w.workerID}, // people have no agent topics
		{alice, "user_rooms:" + w.bobID},     // someone else's
		{carol, "chat_room:" + w.room},       // not in the room
		{carol, "room_participants:" + w.room},
		{carol, "room_tasks:" + w.room},
		{worker, "chat_room:00000000-0000-7000-8000-000000000000"},
		{worker, "tasks:" + w.aliceID}, // unknown kinds of topic
		{worker, "phoenix"},
	} {
		ref := fmt.Sprint(i + 1)
		tc.c.send(t, `["`+ref+`","`+ref+`","`+tc.topic+`","phx_join",{}]`)
		m := tc.c.next(t)
		reply := m[4].(map[string]any)
		if m[1] != ref || reply["status"] != "error" || reply["response"].(map[string]any)["reason"] != "unauthorized" {
			t.Errorf("joining %s: %v, want an unauthorized error", tc.topic, m)
		}
	}
	// A refused join subscribes to nothing.
	w.postUnseen(t, carol, "hello", "99", "an unauthorized join received")
}

func TestSocketLosingAccessEndsTheSubscription(t *testing.T) {
	w := newSocketWorld(t)
	chat := "chat_room:" + w.room
	bob := newListener(t, w.ts, w.bobKey, chat)
	expect(t, w.ts.do(t, "DELETE", "/api/v1/agent/chats/"+w.room+"/participants/"+w.bobID, apiKey(w.posterKey), nil), 200, "")
	time.Sleep(100 * time.Millisecond)
	w.post(t, "after bob left", w.aliceID)
	time.Sleep(100 * time.Millisecond)
	if n := bob.count(chat, "message_created"); n != 0 {
		t.Fatalf("bob still receives the room after leaving it: %d messages", n)
	}
	if s := w.ts.srv.rt.hub.Stats(); s.Subscriptions != 0 {
		t.Fatalf("%d subscriptions remain", s.Subscriptions)
	}
}

// rawSocket is a bare WebSocket client for what the libraries hide: refused
// upgrades, exact frames, and a client that stops reading.
type rawSocket struct {
	conn net.Conn
	br   *bufio.Reader
}

func dialRaw(t *testing.T, target string, header http.Header) (*rawSocket, error) {
	t.Helper()
	d := ws.Dialer{Header: ws.HandshakeHeaderHTTP(header), Timeout: 10 * time.Second}
	conn, br, _, err := d.Dial(context.Background(), target)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { conn.Close() })
	return &rawSocket{conn: conn, br: br}, nil
}

func (r *rawSocket) send(t *testing.T, frame string) {
	t.Helper()
	if err := wsutil.WriteClientText(r.conn, []byte(frame)); err != nil {
		t.Fatal(err)
	}
}

func (r *rawSocket) reader() net.Conn {
	if r.br != nil && r.br.Buffered() > 0 {
		return &prefixedConn{Conn: r.conn, r: r.br}
	}
	return r.conn
}

type prefixedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *prefixedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// next reads one text message, decoded.
func (r *rawSocket) next(t *testing.T) []any {
	t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := wsutil.ReadServerText(r.reader())
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var msg []any
	if err := json.Unmarshal(b, &msg); err != nil || len(msg) != 5 {
		t.Fatalf("not a V2 message: %s", b)
	}
	return msg
}

// upgrade sends an upgrade request over plain HTTP and returns the answer.
func (ts *testServer) upgrade(t *testing.T, params url.Values, header http.Header) *response {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.http.URL+"/api/v1/socket/websocket?"+params.Encode(), nil)
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	res, err := ts.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := &response{status: res.StatusCode, header: res.Header}
	if res.StatusCode != http.StatusSwitchingProtocols {
		r.body, _ = io.ReadAll(res.Body)
		ts.checkResponse(t, "GET", "/api/v1/socket/websocket", r)
	}
	return r
}

func TestSocketUpgradeRefusals(t *testing.T) {
	w := newSocketWorld(t)
	v := func(kv ...string) url.Values {
		q := url.Values{"vsn": {"2.0.0"}}
		for i := 0; i < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return q
	}
	keyHeader := func(k string) http.Header { return http.Header{"X-Api-Key": {k}} }
	for _, tc := range []struct {
		name   string
		params url.Values
		header http.Header
		status int
		code   string
	}{
		{"no credentials", v(), nil, 401, "unauthorized"},
		{"unknown key", v("api_key", "band_a_"+strings.Repeat("q", 52)), nil, 401, "unauthorized"},
		{"bad token", v("token", "x.y.z"), nil, 401, "unauthorized"},
		{"bad on_conflict", v("on_conflict", "evict"), keyHeader(w.workerKey), 400, "invalid_on_conflict"},
		{"agent_id of another agent", v("agent_id", w.aliceID), keyHeader(w.workerKey), 403, "forbidden"},
		{"a person's key with someone else's agent", v("agent_id", w.workerID), keyHeader(w.bobKey), 403, "forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := w.ts.upgrade(t, tc.params, tc.header)
			expect(t, r, tc.status, tc.code)
		})
	}
	// Credentials from the header win over the query, as the SDK comment says.
	if r := w.ts.upgrade(t, v("api_key", "band_a_"+strings.Repeat("q", 52)), keyHeader(w.workerKey)); r.status != 101 {
		t.Fatalf("header credentials refused: %d %s", r.status, r.body)
	}
}

func TestSocketCredentialsAndIdentity(t *testing.T) {
	w := newSocketWorld(t)
	tok := w.ts.token(mustUserByHandle(t, w.ts, "alice"), time.Hour)
	for _, tc := range []struct {
		name   string
		params url.Values
		header http.Header
		topic  string // a topic only the expected identity may join
	}{
		{"agent key in the header (TypeScript SDK)", url.Values{"agent_id": {w.workerID}}, http.Header{"X-Api-Key": {w.workerKey}}, "agent_rooms:" + w.workerID},
		{"agent key in the query (jam)", url.Values{"api_key": {w.workerKey}}, nil, "agent_rooms:" + w.workerID},
		{"person's key", url.Values{"api_key": {w.aliceKey}}, nil, "user_rooms:" + w.aliceID},
		{"person's token", url.Values{"token": {tok}}, nil, "user_rooms:" + w.aliceID},
		{"owner's key acting as its agent", url.Values{"api_key": {w.aliceKey}, "agent_id": {w.workerID}}, nil, "agent_rooms:" + w.workerID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.params.Set("vsn", "2.0.0")
			s, err := dialRaw(t, w.ts.socketURL(tc.params), tc.header)
			if err != nil {
				t.Fatal(err)
			}
			s.send(t, `["1","1","`+tc.topic+`","phx_join",{}]`)
			reply := s.next(t)
			if reply[0] != "1" || reply[1] != "1" || reply[3] != "phx_reply" || reply[4].(map[string]any)["status"] != "ok" {
				t.Fatalf("join reply = %v", reply)
			}
		})
	}
}

func TestSocketProtocolDetails(t *testing.T) {
	w := newSocketWorld(t)
	s := w.dial(t, w.workerKey)
	// nshafer/phx: "" join_ref and null payload; refs echo back as strings.
	s.send(t, `["","7","phoenix","heartbeat",null]`)
	if m := s.next(t); m[0] != nil || m[1] != "7" || m[2] != "phoenix" || m[3] != "phx_reply" || m[4].(map[string]any)["status"] != "ok" {
		t.Fatalf("heartbeat reply = %v", m)
	}
	// phoenix.js: a null join_ref on a join makes the join's ref its join_ref.
	s.send(t, `[null,"8","chat_room:`+w.room+`","phx_join",{}]`)
	if m := s.next(t); m[0] != "8" || m[1] != "8" {
		t.Fatalf("join reply = %v", m)
	}
	id := w.post(t, "ping", w.workerID)
	if m := s.next(t); m[0] != "8" || m[1] != nil || m[3] != "message_created" || m[4].(map[string]any)["id"] != id {
		t.Fatalf("push = %v, want join_ref 8 and ref null", m)
	}
	// Channels are read-only for clients.
	s.send(t, `["8","9","chat_room:`+w.room+`","shout",{}]`)
	if m := s.next(t); m[1] != "9" || m[4].(map[string]any)["status"] != "error" {
		t.Fatalf("reply to a client event = %v", m)
	}
	// Leaving is answered, then the channel closes, and pushes stop.
	s.send(t, `["8","10","chat_room:`+w.room+`","phx_leave",{}]`)
	if m := s.next(t); m[1] != "10" || m[3] != "phx_reply" {
		t.Fatalf("leave reply = %v", m)
	}
	if m := s.next(t); m[3] != "phx_close" {
		t.Fatalf("after the leave reply: %v", m)
	}
	w.postUnseen(t, s, "after leaving", "11", "a push arrived after leaving")
}

func TestSocketSupersedeAndReject(t *testing.T) {
	w := newSocketWorld(t)
	params := url.Values{"vsn": {"2.0.0"}, "agent_id": {w.workerID}}
	header := http.Header{"X-Api-Key": {w.workerKey}}
	first, err := dialRaw(t, w.ts.socketURL(params), header)
	if err != nil {
		t.Fatal(err)
	}
	first.send(t, `["1","1","agent_control:`+w.workerID+`","phx_join",{}]`)
	first.next(t)

	// on_conflict=reject refuses a second connection with 409.
	rejectParams := url.Values{"vsn": {"2.0.0"}, "agent_id": {w.workerID}, "on_conflict": {"reject"}}
	expect(t, w.ts.upgrade(t, rejectParams, header), 409, "connection_conflict")

	// The default, supersede: the first connection is told, then closed.
	second, err := dialRaw(t, w.ts.socketURL(params), header)
	if err != nil {
		t.Fatal(err)
	}
	m := first.next(t)
	if m[0] != "1" || m[2] != "agent_control:"+w.workerID || m[3] != "supersede" || m[4].(map[string]any)["reason"] != "superseded" {
		t.Fatalf("superseded connection got %v", m)
	}
	_ = first.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = wsutil.ReadServerText(first.reader())
	var closed wsutil.ClosedError
	if !errors.As(err, &closed) || closed.Code != 1008 {
		t.Fatalf("superseded connection: %v, want a 1008 close", err)
	}
	second.send(t, `["","2","phoenix","heartbeat",{}]`)
	if m := second.next(t); m[1] != "2" {
		t.Fatalf("the new connection: %v", m)
	}
}

func TestSocketConnectionLimits(t *testing.T) {
	w := newSocketWorld(t)
	w.ts.srv.maxSocketsPerKey = 2
	params := url.Values{"vsn": {"2.0.0"}, "api_key": {w.aliceKey}}
	for i := 0; i < 2; i++ {
		if _, err := dialRaw(t, w.ts.socketURL(params), nil); err != nil {
			t.Fatal(err)
		}
	}
	r := w.ts.upgrade(t, params, nil)
	expect(t, r, 429, "too_many_requests")
	if r.header.Get("Retry-After") == "" || r.json(t)["error"].(map[string]any)["retry_after"] != float64(1) {
		t.Fatalf("429 without retry_after: %v %s", r.header, r.body)
	}
	// Another credential is not affected, until the global bound.
	if _, err := dialRaw(t, w.ts.socketURL(url.Values{"vsn": {"2.0.0"}, "api_key": {w.bobKey}}), nil); err != nil {
		t.Fatal(err)
	}
	w.ts.srv.maxSockets = 3
	expect(t, w.ts.upgrade(t, url.Values{"vsn": {"2.0.0"}, "api_key": {w.workerKey}}, nil), 429, "too_many_requests")
}

func TestSocketSlowConsumerIsCutOffWhileOthersKeepReceiving(t *testing.T) {
	w := newSocketWorld(t)
	params := func(key string) string {
		return w.ts.socketURL(url.Values{"vsn": {"2.0.0"}, "api_key": {key}})
	}
	slow, err := dialRaw(t, params(w.bobKey), nil)
	if err != nil {
		t.Fatal(err)
	}
	slow.send(t, `["1","1","chat_room:`+w.room+`","phx_join",{}]`)
	slow.next(t)
	fast := newListener(t, w.ts, w.aliceKey, "chat_room:"+w.room)
	// bob stops reading; big messages fill his socket buffers, then his
	// queue, and the server lets him go.
	// How much is needed depends on the kernel's socket buffers, so alice
	// posts until the server gives up on bob (or far past any sane buffer).
	big := strings.Repeat("x", 30000)
	const most = 4000
	topic := "chat_room:" + w.room
	deadline := time.Now().Add(2 * time.Minute) // -race on a loaded machine posts slowly
	n := 0
	for ; n < most && w.ts.srv.rt.hub.Stats().SlowConsumers == 0; n++ {
		w.post(t, fmt.Sprintf("%d %s", n, big), w.aliceID)
		// Let alice keep up, as a live client does: on a loaded machine a
		// burst could otherwise outrun even a reading client, and the test
		// is about the one that does not read.
		for n%20 == 19 && fast.count(topic, "message_created") < n+1-40 {
			if time.Now().After(deadline) {
				t.Fatalf("the fast consumer fell behind: %d of %d messages", fast.count(topic, "message_created"), n+1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if w.ts.srv.rt.hub.Stats().SlowConsumers == 0 {
		t.Fatalf("the slow consumer was never cut off after %d messages of 30 KB", n)
	}
	for fast.count(topic, "message_created") < n {
		if time.Now().After(deadline) {
			select {
			case <-fast.closed:
				t.Fatalf("the fast consumer was cut off too (close code %d), with %d of %d messages", fast.code, fast.count(topic, "message_created"), n)
			default:
			}
			t.Fatalf("the fast consumer got %d of %d messages", fast.count(topic, "message_created"), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("bob was cut off after %d messages", n)
}

func TestSocketDeletedAgentIsDisconnected(t *testing.T) {
	w := newSocketWorld(t)
	c := newListener(t, w.ts, w.workerKey, "agent_rooms:"+w.workerID)
	expect(t, w.ts.do(t, "DELETE", "/api/v1/me/agents/"+w.workerID, apiKey(w.aliceKey), nil), 200, "")
	c.awaitClose(t, 1008, "a deleted agent's connection") // 1008: terminal, the key was revoked
}

func TestSocketRoomEvents(t *testing.T) {
	w := newSocketWorld(t)
	rooms := "agent_rooms:" + w.workerID
	worker := newListener(t, w.ts, w.workerKey, rooms)
	alice := newListener(t, w.ts, w.aliceKey, "room_participants:"+w.room)
	// alice creates a room and adds the worker: room_added.
	room := w.ts.do(t, "POST", "/api/v1/me/chats", apiKey(w.aliceKey), map[string]any{}).data(t)["id"].(string)
	expect(t, w.ts.do(t, "POST", "/api/v1/me/chats/"+room+"/participants", apiKey(w.aliceKey),
		map[string]any{"participant": map[string]any{"participant_id": w.workerID}}), 201, "")
	added := worker.await(t, rooms, "room_added", func(p map[string]any) bool { return p["id"] == room })
	for _, k := range []string{"title", "status", "type", "inserted_at", "updated_at"} {
		if _, ok := added[k].(string); !ok {
			t.Errorf("room_added.%s = %v, want a string", k, added[k])
		}
	}
	// Removing it: room_removed with the strings the TypeScript SDK requires.
	expect(t, w.ts.do(t, "DELETE", "/api/v1/me/chats/"+room+"/participants/"+w.workerID, apiKey(w.aliceKey), nil), 200, "")
	removed := worker.await(t, rooms, "room_removed", func(p map[string]any) bool { return p["id"] == room })
	for _, k := range []string{"title", "status", "type", "removed_at"} {
		if _, ok := removed[k].(string); !ok {
			t.Errorf("room_removed.%s = %v, want a string", k, removed[k])
		}
	}
	// Participants of the main room.
	dave, _ := w.ts.user("dave")
	expect(t, w.ts.do(t, "POST", "/api/v1/me/chats/"+w.room+"/participants", apiKey(w.aliceKey),
		map[string]any{"participant": map[string]any{"participant_id": dave.ID}}), 201, "")
	p := alice.await(t, "room_participants:"+w.room, "participant_added", func(p map[string]any) bool { return p["id"] == dave.ID })
	if p["type"] != "User" || p["name"] != "Dave Tester" || p["role"] != "member" {
		t.Fatalf("participant_added = %v", p)
	}
	expect(t, w.ts.do(t, "DELETE", "/api/v1/me/chats/"+w.room+"/participants/"+dave.ID, apiKey(w.aliceKey), nil), 200, "")
	alice.await(t, "room_participants:"+w.room, "participant_removed", func(p map[string]any) bool { return p["id"] == dave.ID })

	// Deleting the room (alice stands behind the poster, its owner):
	// room_deleted on the room's topic, room_removed to every member, and
	// the room's subscriptions end.
	posterID := mustAgentIDByKey(t, w.ts, w.posterKey)
	poster := newListener(t, w.ts, w.posterKey, "agent_rooms:"+posterID)
	expect(t, w.ts.do(t, "DELETE", "/api/v1/me/chats/"+w.room, apiKey(w.aliceKey), nil), 204, "")
	alice.await(t, "room_participants:"+w.room, "room_deleted", func(p map[string]any) bool { return p["id"] == w.room })
	poster.await(t, "agent_rooms:"+posterID, "room_removed", func(p map[string]any) bool { return p["id"] == w.room })
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := 0
		w.ts.srv.rt.hub.Each("room_participants:"+w.room, func(*phxConn, string) { left++ })
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions to the deleted room remain", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustUserByHandle(t *testing.T, ts *testServer, handle string) *store.User {
	t.Helper()
	u, err := ts.db.UserByHandle(t.Context(), handle)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func mustAgentIDByKey(t *testing.T, ts *testServer, key string) string {
	t.Helper()
	p, err := ts.db.Authenticate(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return p.Agent.ID
}

// An upgrade gobwas/ws would refuse in text/plain is refused before it, in
// the envelope: whatever is wrong with the handshake, and a plain GET.
func TestSocketHandshakeRefusals(t *testing.T) {
	ts := newTestServer(t)
	u, _ := ts.user("alice")
	_, agentKey := ts.agent(u, "Helper")
	addr := ts.serveOnSocket(t)
	const path = "/api/v1/socket/websocket?vsn=2.0.0&api_key="
	good := map[string]string{"Host": "chatd", "Connection": "Upgrade", "Upgrade": "websocket",
		"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	request := func(version string, change map[string]string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "GET %s%s %s\r\n", path, agentKey, version)
		for k, v := range good {
			if nv, ok := change[k]; ok {
				v = nv
			}
			if v != "" {
				fmt.Fprintf(&b, "%s: %s\r\n", k, v)
			}
		}
		return b.String() + "\r\n"
	}
	all := map[string]string{}
	for k := range good {
		if k != "Host" {
			all[k] = ""
		}
	}
	for _, tc := range []struct {
		name    string
		request string
		status  int
		code    string
		header  [2]string
	}{
		{"a plain GET", request("HTTP/1.1", all), 426, "upgrade_required", [2]string{"Upgrade", "websocket"}},
		{"a plain GET without credentials", "GET /api/v1/socket/websocket HTTP/1.1\r\nHost: chatd\r\n\r\n", 426, "upgrade_required", [2]string{"Upgrade", "websocket"}},
		{"no Upgrade", request("HTTP/1.1", map[string]string{"Upgrade": ""}), 426, "upgrade_required", [2]string{}},
		{"Upgrade: h2c", request("HTTP/1.1", map[string]string{"Upgrade": "h2c"}), 426, "upgrade_required", [2]string{}},
		{"Connection: keep-alive", request("HTTP/1.1", map[string]string{"Connection": "keep-alive"}), 426, "upgrade_required", [2]string{}},
		{"a Connection gobwas cannot read", request("HTTP/1.1", map[string]string{"Connection": "keep-alive;x, Upgrade"}), 426, "upgrade_required", [2]string{}},
		{"a tab in Connection", request("HTTP/1.1", map[string]string{"Connection": "keep-alive,\tUpgrade"}), 426, "upgrade_required", [2]string{}},
		{"HTTP/1.0", request("HTTP/1.0", nil), 400, "invalid_handshake", [2]string{}},
		{"no key", request("HTTP/1.1", map[string]string{"Sec-WebSocket-Key": ""}), 400, "invalid_handshake", [2]string{}},
		{"a short key", request("HTTP/1.1", map[string]string{"Sec-WebSocket-Key": "c2hvcnQ="}), 400, "invalid_handshake", [2]string{}},
		{"a key that is not base64", request("HTTP/1.1", map[string]string{"Sec-WebSocket-Key": "!!!!!!!!!!!!!!!!!!!!!!!!"}), 400, "invalid_handshake", [2]string{}},
		{"no version", request("HTTP/1.1", map[string]string{"Sec-WebSocket-Version": ""}), 400, "invalid_handshake", [2]string{}},
		{"version 8", request("HTTP/1.1", map[string]string{"Sec-WebSocket-Version": "8"}), 426, "upgrade_required", [2]string{"Sec-Websocket-Version", "13"}},
		{"the right handshake", request("HTTP/1.1", map[string]string{"Connection": "keep-alive, Upgrade", "Upgrade": "WebSocket"}), 101, "", [2]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			responses, raw, err := exchange(addr, tc.request, 10*time.Second)
			if err != nil || len(responses) != 1 {
				t.Fatalf("%v, %d responses; read %q", err, len(responses), raw)
			}
			r := responses[0]
			if r.status != tc.status {
				t.Fatalf("status %d, want %d; read %q", r.status, tc.status, raw)
			}
			if tc.status == 101 {
				return
			}
			if p := envelopeProblem(r, false); p != "" {
				t.Fatalf("%s; read %q", p, raw)
			}
			if code := r.code(t); code != tc.code {
				t.Fatalf("code %q, want %q", code, tc.code)
			}
			if tc.header[0] != "" && r.header.Get(tc.header[0]) != tc.header[1] {
				t.Fatalf("%s: %q, want %q", tc.header[0], r.header.Get(tc.header[0]), tc.header[1])
			}
		})
	}
}
