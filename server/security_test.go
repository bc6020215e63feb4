package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// securityWorld is two organizations, each with a person, an agent and a room;
// organization B also holds one of every other kind of object, made through
// the API, for organization A to reach for.
type securityWorld struct {
	ts                   *testServer
	aliceKey, aAgentKey  string            // organization A's person and agent
	ownRoom, foreignRoom string            // A's room, B's room
	own, foreign         map[string]string // ids by the path segment that names them
}

func newSecurityWorld(t *testing.T) *securityWorld {
	ts := newTestServer(t)
	alice, aliceKey := ts.user("alice")
	aAgent, aAgentKey := ts.agent(alice, "Helper")
	carol, carolKey := ts.user("carol", "globex")
	ts.user("dave", "globex")
	cAgent, cAgentKey := ts.agent(carol, "Rival")
	w := &securityWorld{ts: ts, aliceKey: aliceKey, aAgentKey: aAgentKey}
	w.ownRoom = ts.room(t, aAgentKey, alice.ID)
	w.foreignRoom = ts.room(t, cAgentKey, carol.ID)
	rb := "/api/v1/agent/chats/" + w.foreignRoom

	created := func(r *response) string {
		t.Helper()
		expect(t, r, 201, "")
		return r.data(t)["id"].(string)
	}
	msg := created(ts.do(t, "POST", "/api/v1/me/chats/"+w.foreignRoom+"/messages", apiKey(carolKey),
		map[string]any{"message": map[string]any{"content": "over to you", "mentions": []any{map[string]any{"id": cAgent.ID}}}}))
	task := created(ts.do(t, "POST", rb+"/tasks", apiKey(cAgentKey), map[string]any{"subject": "Plan the heist"}))
	file := created(ts.do(t, "POST", rb+"/files", fileHeaders(cAgentKey, "plans.txt", hexDigest([]byte("secret")), "text/plain"), []byte("secret")))
	memory := created(ts.do(t, "POST", "/api/v1/agent/memories", apiKey(cAgentKey), memoryBody(map[string]any{"scope": "organization"})))
	request := created(ts.do(t, "POST", "/api/v1/me/contacts/requests", apiKey(carolKey),
		map[string]any{"contact_request": map[string]any{"recipient_handle": "dave"}}))
	delegation := created(ts.do(t, "POST", "/api/v1/me/agents/"+cAgent.ID+"/delegations", apiKey(carolKey),
		map[string]any{"delegation": map[string]any{"scopes": []string{"chats:read"}}}))
	key := created(ts.do(t, "POST", "/api/v1/me/keys", apiKey(carolKey), map[string]any{"key": map[string]any{"name": "laptop"}}))
	// After the message: nothing is queued for it, so nothing is sent while
	// the probes compare the database before and after.
	hook := created(ts.do(t, "POST", "/api/v1/agent/webhooks", apiKey(cAgentKey),
		map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:9/rival"}}))
	spare := created(ts.do(t, "POST", "/api/v1/me/chats", apiKey(carolKey), map[string]any{}))
	r := ts.do(t, "POST", "/api/v1/me/chats/bulk-delete", apiKey(carolKey), map[string]any{"ids": []string{spare}})
	expect(t, r, 202, "")
	job := r.data(t)["id"].(string)
	// The job runs in the background; the probes must not see it finish.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r := ts.do(t, "GET", "/api/v1/me/bulk-deletions/"+job, apiKey(carolKey), nil)
		if expect(t, r, 200, ""); r.data(t)["status"] == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bulk job still %v", r.data(t)["status"])
		}
	}

	if err := ts.db.SetPassword(context.Background(), carol.ID, goodPassword); err != nil {
		t.Fatal(err)
	}
	carolSession := ts.signIn(t, carol.Handle, goodPassword)
	session := ts.do(t, "GET", "/api/v1/me/sessions", bearer(carolSession), nil).list(t)[0].(map[string]any)["id"].(string)

	invitation := ts.do(t, "POST", "/api/v1/me/invitations", apiKey(carolKey), map[string]any{"invitation": map[string]any{}}).data(t)["id"].(string)

	ts.oauthSignIn(t, apiKey(carolKey), cAgent.ID)
	grant := ts.do(t, "GET", "/api/v1/me/oauth/grants", apiKey(carolKey), nil).list(t)[0].(map[string]any)["id"].(string)

	w.foreign = map[string]string{
		"chats": w.foreignRoom, "participants": carol.ID, "messages": msg, "tasks": task, "files": file, "memories": memory,
		"agents": cAgent.ID, "requests": request, "delegations": delegation, "bulk-deletions": job,
		"keys": key, "webhooks": hook, "grants": grant, "sessions": session, "invitations": invitation, "people": carol.ID,
		"reactions": "%F0%9F%91%8D", // not an id: the emoji a reaction is taken back by
	}
	w.own = map[string]string{"chats": w.ownRoom, "agents": aAgent.ID}
	return w
}

// key is A's key for the API path belongs to.
func (w *securityWorld) key(path string) string {
	if strings.HasPrefix(path, "/api/v1/agent/") {
		return w.aAgentKey
	}
	return w.aliceKey
}

func (w *securityWorld) cred(path string) cred { return apiKey(w.key(path)) }

// routeBodies has an entry for every route that takes an id: a valid body
// for those that take one (nil for the others), so that what a probe is
// refused for is the id and nothing else.
var routeBodies = map[string]any{
	"DELETE /api/v1/me/oauth/grants/:id":                        nil,
	"PATCH /api/v1/agent/chats/:chat_id":                        map[string]any{"chat": map[string]any{"title": "Mine now"}},
	"PATCH /api/v1/me/chats/:chat_id":                           map[string]any{"chat": map[string]any{"title": "Mine now"}},
	"POST /api/v1/agent/chats/:chat_id/messages":                map[string]any{"message": map[string]any{"content": "hi", "mentions": []any{map[string]any{"handle": "alice"}}}},
	"POST /api/v1/me/chats/:chat_id/messages":                   map[string]any{"message": map[string]any{"content": "hi", "mentions": []any{map[string]any{"handle": "helper"}}}},
	"POST /api/v1/agent/chats/:chat_id/messages/:id/failed":     map[string]any{"error": "no"},
	"POST /api/v1/agent/chats/:chat_id/events":                  map[string]any{"event": map[string]any{"content": "thinking", "message_type": "thought"}},
	"POST /api/v1/agent/chats/:chat_id/activity":                map[string]any{"working": true},
	"PUT /api/v1/agent/chats/:chat_id/board":                    map[string]any{"goal_title": "Take over"},
	"PUT /api/v1/me/chats/:chat_id/board":                       map[string]any{"goal_title": "Take over"},
	"POST /api/v1/agent/chats/:chat_id/tasks":                   map[string]any{"subject": "Sabotage"},
	"POST /api/v1/agent/chats/:chat_id/tasks/:id":               map[string]any{"status": "completed"},
	"PATCH /api/v1/me/chats/:chat_id/participants/:id":          map[string]any{"participant": map[string]any{"status": "blocked"}},
	"POST /api/v1/agent/memories/:id/supersede":                 memoryBody(map[string]any{"scope": "organization"}),
	"POST /api/v1/me/memories/:id/supersede":                    nil,
	"POST /api/v1/me/agents/:id/delegations":                    map[string]any{"delegation": map[string]any{"scopes": []string{"chats:read"}}},
	"POST /api/v1/agent/chats/:chat_id/participants":            map[string]any{"participant": map[string]any{"participant_id": nilID}},
	"POST /api/v1/me/chats/:chat_id/participants":               map[string]any{"participant": map[string]any{"participant_id": nilID}},
	"POST /api/v1/agent/chats/:chat_id/files":                   []byte("mine"),
	"POST /api/v1/me/chats/:chat_id/files":                      []byte("mine"),
	"POST /api/v1/agent/chats/:chat_id/messages/:id/processing": nil,
	"POST /api/v1/agent/chats/:chat_id/messages/:id/processed":  nil,
	"POST /api/v1/me/contacts/requests/:id/approve":             nil,
	"POST /api/v1/me/contacts/requests/:id/reject":              nil,
	"POST /api/v1/agent/memories/:id/archive":                   nil,
	"POST /api/v1/me/memories/:id/archive":                      nil,
	"POST /api/v1/me/memories/:id/restore":                      nil,
	"DELETE /api/v1/me/agents/:id/delegations/:delegation_id":   nil,
	"DELETE /api/v1/agent/chats/:chat_id/participants/:id":      nil,
	"DELETE /api/v1/me/chats/:chat_id/participants/:id":         nil,
	"DELETE /api/v1/me/chats/:chat_id":                          nil,
	"POST /api/v1/me/chats/:chat_id/read":                       nil,
	"PUT /api/v1/me/chats/:chat_id/messages/:id/done":           nil,
	"GET /api/v1/me/chats/:chat_id/done":                        nil,
	"DELETE /api/v1/me/sessions/:id":                            nil,
	"DELETE /api/v1/me/invitations/:id":                         nil,
	"DELETE /api/v1/me/people/:id":                              nil,
	"GET /api/v1/me/chats/:chat_id/presence":                    nil,
	"GET /api/v1/me/chats/:chat_id/tasks":                       nil,
	"DELETE /api/v1/me/chats/:chat_id/messages/:id/done":        nil,
	"DELETE /api/v1/me/agents/:id":                              nil,
	"POST /api/v1/me/agents/:id/rotate-key":                     nil,
	"DELETE /api/v1/me/memories/:id":                            nil,
	"DELETE /api/v1/me/keys/:id":                                nil,
	"POST /api/v1/me/keys":                                      map[string]any{"key": map[string]any{"name": "laptop"}},
	"DELETE /api/v1/me/contacts/requests/:id":                   nil,
	"GET /api/v1/agent/chats/:chat_id/messages/next":            nil,
	"GET /api/v1/agent/chats/:chat_id/tasks/:id/history":        nil,
	"GET /api/v1/me/agents/:id/delegations":                     nil,
	"GET /api/v1/me/bulk-deletions/:id":                         nil,
	"GET /api/v1/me/chats/:chat_id/retention":                   nil,
	"PUT /api/v1/me/chats/:chat_id/retention":                   map[string]any{"retention": map[string]any{"text_days": 1}},
	"GET /api/v1/agent/chats/:chat_id/context":                  nil,
	"GET /api/v1/agent/chats/:chat_id/files/:id":                nil,
	"GET /api/v1/me/chats/:chat_id/files/:id":                   nil,
	"GET /api/v1/agent/chats/:chat_id/tasks/:id":                nil,
	"GET /api/v1/agent/chats/:chat_id/tasks":                    nil,
	"GET /api/v1/agent/memories/:id":                            nil,
	"GET /api/v1/me/memories/:id":                               nil,
	"GET /api/v1/agent/chats/:chat_id":                          nil,
	"GET /api/v1/me/chats/:chat_id":                             nil,
	"GET /api/v1/agent/chats/:chat_id/participants":             nil,
	"GET /api/v1/me/chats/:chat_id/participants":                nil,
	"GET /api/v1/agent/chats/:chat_id/messages":                 nil,
	"GET /api/v1/me/chats/:chat_id/messages":                    nil,
	"GET /api/v1/agent/chats/:chat_id/board":                    nil,
	"GET /api/v1/me/chats/:chat_id/board":                       nil,
	"POST /api/v1/agent/webhooks":                               map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:9/mine"}},
	"GET /api/v1/agent/webhooks/:id":                            nil,
	"DELETE /api/v1/agent/webhooks/:id":                         nil,
	"POST /api/v1/agent/webhooks/:id/resume":                    nil,
	"GET /api/v1/agent/webhooks/:id/deliveries":                 nil,
	"GET /api/v1/me/agents/:id/webhooks":                        nil,
	"POST /api/v1/me/agents/:id/webhooks":                       map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:9/mine"}},
	"GET /api/v1/me/agents/:id/webhooks/:webhook_id":            nil,
	"DELETE /api/v1/me/agents/:id/webhooks/:webhook_id":         nil,
	"POST /api/v1/me/agents/:id/webhooks/:webhook_id/resume":    nil,
	"GET /api/v1/me/agents/:id/webhooks/:webhook_id/deliveries": nil,
}

func init() {
	for _, base := range []string{"/api/v1/agent/chats/:chat_id/messages/:id", "/api/v1/me/chats/:chat_id/messages/:id"} {
		routeBodies["PATCH "+base] = map[string]any{"message": map[string]any{"content": "mine now"}}
		routeBodies["DELETE "+base] = nil
		routeBodies["GET "+base+"/edits"] = nil
		routeBodies["GET "+base+"/replies"] = nil
		routeBodies["POST "+base+"/reactions"] = map[string]any{"emoji": "👍"}
		routeBodies["DELETE "+base+"/reactions/:emoji"] = nil
	}
}

// Object-level authorization: every route that takes an id, probed with
// ids of organization B's objects under organization A's credentials (each
// id foreign in turn, the others A's own where A has one), answers 404
// not_found, as for an id that names nothing, and changes nothing. A new
// route with an id is caught by the walk over the router's routes.
func TestObjectLevelAuthorization(t *testing.T) {
	t.Parallel() // its own server and database
	w := newSecurityWorld(t)
	ts := w.ts
	for _, rt := range registeredRoutes(ts.srv) {
		if rt.aud == public || !strings.Contains(rt.path, "/:") {
			continue
		}
		key := rt.method + " " + rt.path
		body, ok := routeBodies[key]
		if !ok {
			t.Errorf("%s takes an id but has no entry in routeBodies: add one, so that the probe below covers it", key)
			continue
		}
		segs := strings.Split(rt.path, "/")
		var params []int
		for i, s := range segs {
			if strings.HasPrefix(s, ":") {
				params = append(params, i)
			}
		}
		// variants: all foreign, then each param foreign with the others own.
		variants := [][]bool{nil}
		if len(params) > 1 {
			for i := range params {
				v := make([]bool, len(params))
				for j := range v {
					v[j] = j != i
				}
				variants = append(variants, v)
			}
		}
		for _, ownAt := range variants {
			path := append([]string(nil), segs...)
			desc := []string{}
			usable := true
			for j, i := range params {
				kind := segs[i-1]
				if ownAt != nil && ownAt[j] {
					id, has := w.own[kind]
					if !has {
						usable = false
						break
					}
					path[i] = id
					desc = append(desc, kind+"=A")
					continue
				}
				id, has := w.foreign[kind]
				if !has {
					t.Fatalf("%s: no object of organization B for :%s after /%s/", key, segs[i][1:], kind)
				}
				path[i] = id
				desc = append(desc, kind+"=B")
			}
			if !usable {
				continue
			}
			p := strings.Join(path, "/")
			t.Run(key+" "+strings.Join(desc, ","), func(t *testing.T) {
				c := w.cred(p)
				if b, isFile := body.([]byte); isFile {
					c = fileHeaders(w.key(p), "x.txt", hexDigest(b), "text/plain")
				}
				ts.refused(t, rt.method, p, c, body, 404, "not_found", "")
			})
		}
	}
}

// Ids of organization B's objects in a body are refused like ids that name
// nothing (each with the refusal the route gives any id it cannot use), and
// change nothing. A room's task_id is not among them: it is a label stored as
// given (see docs/api/overview.md, Rooms, participants and peers), naming
// no object of chatd's.
func TestForeignIDsInBodies(t *testing.T) {
	w := newSecurityWorld(t)
	ts := w.ts
	ra := "/api/v1/agent/chats/" + w.ownRoom
	refused := func(name, method, path string, body any, status int, code string) scenario {
		return refusalCase(name, w.cred(path), method, path, body, status, code)
	}
	ts.run(t, []scenario{
		refused("invite B's person", "POST", ra+"/participants", map[string]any{"participant": map[string]any{"participant_id": w.foreign["participants"]}}, 404, "not_found"),
		refused("invite B's agent", "POST", "/api/v1/me/chats/"+w.ownRoom+"/participants", map[string]any{"participant": map[string]any{"participant_id": w.foreign["agents"]}}, 404, "not_found"),
		refused("mention B's person", "POST", ra+"/messages", map[string]any{"message": map[string]any{"content": "hi", "mentions": []any{map[string]any{"id": w.foreign["participants"]}}}}, 422, "mentioned_participant_not_in_room"),
		refused("attach B's file", "POST", ra+"/messages", map[string]any{"message": map[string]any{"content": "hi", "mentions": []any{map[string]any{"handle": "alice"}}, "attachment_ids": []string{w.foreign["files"]}}}, 422, ""),
		refused("supersede B's task", "POST", ra+"/tasks", map[string]any{"subject": "mine", "supersedes_id": w.foreign["tasks"]}, 422, "validation_error"),
		refused("mark read up to B's message", "POST", "/api/v1/me/chats/"+w.ownRoom+"/read", map[string]any{"message_id": w.foreign["messages"]}, 404, "not_found"),
	})
}

// forbiddenFields are fields a caller may not set on anything: ids,
// ownership, organization, timestamps, keys, flags chatd decides.
var forbiddenFields = map[string]any{
	"id": nilID, "owner_id": nilID, "organization_id": "globex", "organization": "globex", "inserted_at": "2020-01-01T00:00:00Z",
	"api_key": "band_a_x", "is_external": true, "is_admin": true, "sender_id": nilID, "created_by": nilID,
}

// Mass assignment: every JSON write route refuses a body with a field it
// does not take, at the top level and inside the object it wraps, with 400
// unknown_field, changing nothing: what a caller may set is exactly what a
// route declares. (/mcp takes JSON-RPC messages, not resources: a tool's
// arguments are checked against its input schema, TestMCPRefusals.)
func TestMassAssignment(t *testing.T) {
	t.Parallel() // its own server and database
	w := newSecurityWorld(t)
	ts := w.ts
	for _, rt := range registeredRoutes(ts.srv) {
		if rt.aud == public || (rt.method != "POST" && rt.method != "PUT" && rt.method != "PATCH") ||
			strings.HasSuffix(rt.path, "/files") || rt.path == "/mcp" {
			continue
		}
		path := rt.path
		for kind, id := range w.own {
			path = strings.ReplaceAll(path, "/"+kind+"/:chat_id", "/"+kind+"/"+id)
			path = strings.ReplaceAll(path, "/"+kind+"/:id", "/"+kind+"/"+id)
		}
		path = strings.NewReplacer(":chat_id", nilID, ":delegation_id", nilID, ":webhook_id", nilID, ":id", nilID).Replace(path)
		base, _ := routeBodies[rt.method+" "+rt.path].(map[string]any)
		for field, value := range forbiddenFields {
			for _, inside := range []bool{false, true} {
				body := map[string]any{}
				for k, v := range base {
					body[k] = v
				}
				at := "/" + field
				if inside {
					wrapped := ""
					for k, v := range base {
						if _, isObject := v.(map[string]any); isObject && len(base) == 1 {
							wrapped = k
						}
					}
					if wrapped == "" {
						continue
					}
					inner := map[string]any{field: value}
					for k, v := range base[wrapped].(map[string]any) {
						inner[k] = v
					}
					body[wrapped], at = inner, "/"+wrapped+"/"+field
				} else {
					body[field] = value
				}
				t.Run(rt.method+" "+rt.path+" "+at, func(t *testing.T) {
					ts.refused(t, rt.method, path, w.cred(path), body, 400, "unknown_field", at)
				})
			}
		}
	}
}

// countingReader is an endless request body that counts what the server
// took from it. The count is atomic: the client's transport may still be
// reading the body when the response is back.
type countingReader struct{ n atomic.Int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// A JSON body over the limit is 413 payload_too_large, read no further than
// the limit and what the connection's buffers hold, whether it streams or
// declares its length; a declared length over the limit is refused before a
// byte of the body arrives.
func TestOversizeBodies(t *testing.T) {
	const limit = 64 << 10
	ts := newTestServerWith(t, func(c *Config) { c.MaxBodyBytes = limit })
	u, key := ts.user("alice")
	_, agentKey := ts.agent(u, "Helper")
	room := ts.room(t, agentKey, u.ID)
	path := "/api/v1/me/chats/" + room + "/messages"

	t.Run("streamed", func(t *testing.T) {
		before := ts.snapshot(t)
		body := &countingReader{}
		r := ts.do(t, "POST", path, apiKey(key), io.LimitReader(body, 1<<30))
		expect(t, r, 413, "payload_too_large")
		// The client writes ahead into the sockets' buffers; a server that
		// read on would have taken the whole gigabyte.
		n := body.n.Load()
		t.Logf("the server took %d bytes of the body (limit %d)", n, limit)
		if n > 32<<20 {
			t.Fatalf("the server read %d bytes of a body over a %d-byte limit", n, limit)
		}
		ts.unchanged(t, before)
	})
	t.Run("declared", func(t *testing.T) {
		before := ts.snapshot(t)
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.http.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: chatd\r\nX-API-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, key, 1<<30)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer before the body: %v", err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		r := &response{status: res.StatusCode, header: res.Header, body: b}
		ts.checkResponse(t, "POST", path, r)
		expect(t, r, 413, "payload_too_large")
		ts.unchanged(t, before)
	})
}

// The limit of a body is the server's, whatever the route: every JSON write
// route refuses a body just over it.
func TestEveryJSONRouteHasTheBodyLimit(t *testing.T) {
	const limit = 4 << 10
	ts := newTestServerWith(t, func(c *Config) { c.MaxBodyBytes = limit })
	u, key := ts.user("alice")
	_, agentKey := ts.agent(u, "Helper")
	big := `{"pad":"` + strings.Repeat("x", limit) + `"}`
	for _, rt := range registeredRoutes(ts.srv) {
		if rt.aud == public || (rt.method != "POST" && rt.method != "PUT" && rt.method != "PATCH") || strings.HasSuffix(rt.path, "/files") {
			continue
		}
		path := strings.NewReplacer(":chat_id", nilID, ":delegation_id", nilID, ":webhook_id", nilID, ":id", nilID).Replace(rt.path)
		c := apiKey(key)
		if strings.HasPrefix(path, "/api/v1/agent/") {
			c = apiKey(agentKey)
		}
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			ts.refused(t, rt.method, path, c, io.Reader(strings.NewReader(big)), 413, "payload_too_large", "")
		})
	}
}
