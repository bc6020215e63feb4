package server

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/chatd/chatd/store"
)

// BenchmarkHTTP503WhenQueueFull measures a write refused at saturation over
// loopback HTTP: the whole round trip of a 503 (client included).
func BenchmarkHTTP503WhenQueueFull(b *testing.B) {
	ts := newTestServer(b, func(o *store.Options) { o.QueueSize = 8 })
	_, key := ts.user("alice")
	release := ts.fillWriteQueue(b)
	defer release()
	body := []byte(`{"user":{"first_name":"Al"}}`)
	client := ts.http.Client()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest("PUT", ts.http.URL+"/api/v1/me/profile", bytes.NewReader(body))
		req.Header.Set("X-API-Key", key)
		t0 := time.Now()
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		lat = append(lat, time.Since(t0))
		if res.StatusCode != 503 {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// reportLatencies reports the p50 and p99 of lat.
func reportLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds()), "p99-µs")
}

// benchRoom sets up a room where a poster agent mentions a worker agent.
func benchRoom(b *testing.B, ts *testServer) (ownerKey, posterKey, workerID, roomID string) {
	owner, ownerKey := ts.user("owner")
	_, posterKey = ts.agent(owner, "Poster")
	worker, _ := ts.agent(owner, "Worker")
	r := ts.do(b, "POST", "/api/v1/agent/chats", apiKey(posterKey), map[string]any{})
	roomID = r.data(b)["id"].(string)
	ts.do(b, "POST", "/api/v1/agent/chats/"+roomID+"/participants", apiKey(posterKey),
		map[string]any{"participant": map[string]any{"participant_id": worker.ID}})
	return ownerKey, posterKey, worker.ID, roomID
}

// BenchmarkPostMessage measures posting a mention message over HTTP with
// parallel clients (ns/op is the inverse of the throughput).
func BenchmarkPostMessage(b *testing.B) {
	ts := newTestServer(b, func(o *store.Options) { o.Sync = store.SyncNormal; o.Limits.MessagesPerRoom = 1 << 30 })
	_, posterKey, workerID, roomID := benchRoom(b, ts)
	body := []byte(`{"message":{"content":"please look at this","mentions":[{"id":"` + workerID + `"}]}}`)
	b.SetParallelism(8)
	before := ts.db.WriterStats()
	defer func() {
		after := ts.db.WriterStats()
		b.ReportMetric(float64(after.Jobs-before.Jobs)/float64(max(1, after.Commits-before.Commits)), "jobs/commit")
	}()
	benchRequests(b, ts, "POST", "/api/v1/agent/chats/"+roomID+"/messages", posterKey, body, 201)
}

// BenchmarkHistoryRead measures a person reading a page of 50 messages.
func BenchmarkHistoryRead(b *testing.B) {
	ts := newTestServer(b, func(o *store.Options) { o.Sync = store.SyncNormal })
	ownerKey, posterKey, workerID, roomID := benchRoom(b, ts)
	for i := 0; i < 200; i++ {
		ts.do(b, "POST", "/api/v1/agent/chats/"+roomID+"/messages", apiKey(posterKey),
			map[string]any{"message": map[string]any{"content": "message body of a typical length, say a sentence or two", "mentions": []map[string]string{{"id": workerID}}}})
	}
	b.SetParallelism(4)
	benchRequests(b, ts, "GET", "/api/v1/me/chats/"+roomID+"/messages?limit=50", ownerKey, nil, 200)
}

// benchRequests times b.N requests of method and path with key (and body,
// when not nil), sent by b's parallel goroutines, each answered status.
func benchRequests(b *testing.B, ts *testServer, method, path, key string, body []byte, status int) {
	client := ts.http.Client()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			var content io.Reader
			if body != nil {
				content = bytes.NewReader(body)
			}
			req, _ := http.NewRequest(method, ts.http.URL+path, content)
			req.Header.Set("X-API-Key", key)
			res, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != status {
				b.Fatalf("status %d", res.StatusCode)
			}
		}
	})
}

// BenchmarkFanOut measures pushing each posted message to 1000 subscribers
// of one room (each op is one message, so frames = ops × 1000).
func BenchmarkFanOut(b *testing.B) {
	ts := newTestServer(b, func(o *store.Options) { o.Sync = store.SyncNormal; o.Limits.MessagesPerRoom = 1 << 30 })
	ownerKey, posterKey, workerID, roomID := benchRoom(b, ts)
	_ = workerID
	owner, err := ts.db.Authenticate(b.Context(), ownerKey)
	if err != nil {
		b.Fatal(err)
	}
	ts.do(b, "POST", "/api/v1/agent/chats/"+roomID+"/participants", apiKey(posterKey),
		map[string]any{"participant": map[string]any{"participant_id": owner.User.ID}})
	const subscribers = 1000
	ts.srv.maxSocketsPerKey = subscribers
	var received atomic.Int64
	u := ts.socketURL(url.Values{"vsn": {"2.0.0"}, "api_key": {ownerKey}})
	for i := 0; i < subscribers; i++ {
		conn, br, _, err := ws.Dial(b.Context(), u)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		var rd io.Reader = conn
		if br != nil {
			rd = io.MultiReader(br, conn)
		}
		if err := wsutil.WriteClientText(conn, []byte(`["1","1","chat_room:`+roomID+`","phx_join",{}]`)); err != nil {
			b.Fatal(err)
		}
		go func() {
			for {
				hdr, err := ws.ReadHeader(rd)
				if err != nil {
					return
				}
				if _, err := io.CopyN(io.Discard, rd, hdr.Length); err != nil {
					return
				}
				received.Add(1)
			}
		}()
	}
	for received.Load() < subscribers { // the join replies
		time.Sleep(time.Millisecond)
	}
	poster, _ := ts.db.Authenticate(b.Context(), posterKey)
	id := owner.User.ID
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ts.db.SendText(b.Context(), poster.Actor(), roomID, store.TextInput{Content: "hello", Mentions: []store.MentionInput{{ID: &id}}}); err != nil {
			b.Fatal(err)
		}
	}
	want := int64(subscribers) * int64(b.N+1)
	for received.Load() < want {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
}
