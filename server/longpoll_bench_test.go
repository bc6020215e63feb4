package server

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// BenchmarkLongPollWake measures how soon a held GET …/messages/next?wait=
// answers once the message that wakes it is posted, from the start of the
// post (the poll's answer usually comes before the poster's own 201): one
// round per op, p50 and p99 reported.
func BenchmarkLongPollWake(b *testing.B) {
	ts := newTestServerWith(b, func(c *Config) { c.DisableRateLimit = true },
		func(o *store.Options) { o.Sync = store.SyncNormal; o.Limits.MessagesPerRoom = 1 << 30 })
	posterKey, workerID, workerKey, roomID := pollRoom(b, ts)
	next := ts.http.URL + agentChatsPath + "/" + roomID + "/messages/next?wait=30"
	body := `{"message":{"content":"wake up","mentions":[{"id":"` + workerID + `"}]}}`
	client := ts.http.Client()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		answered := make(chan time.Time, 1)
		go func() {
			req, _ := http.NewRequest("GET", next, nil)
			req.Header.Set("X-API-Key", workerKey)
			res, err := client.Do(req)
			if err != nil || res.StatusCode != 200 {
				b.Errorf("poll: %v %v", res, err)
			}
			answered <- time.Now()
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}()
		time.Sleep(5 * time.Millisecond) // held before the post
		posted := time.Now()
		r := ts.do(b, "POST", agentChatsPath+"/"+roomID+"/messages", apiKey(posterKey), body)
		lat = append(lat, (<-answered).Sub(posted))
		id := r.data(b)["id"].(string)
		ts.do(b, "POST", agentChatsPath+"/"+roomID+"/messages/"+id+"/processing", apiKey(workerKey), nil)
		ts.do(b, "POST", agentChatsPath+"/"+roomID+"/messages/"+id+"/processed", apiKey(workerKey), nil)
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// pollRoom is a room where a poster agent mentions a worker agent, with
// the worker's key.
func pollRoom(b *testing.B, ts *testServer) (posterKey, workerID, workerKey, roomID string) {
	owner, _ := ts.user("owner")
	_, posterKey = ts.agent(owner, "Poster")
	worker, workerKey := ts.agent(owner, "Worker")
	return posterKey, worker.ID, workerKey, ts.room(b, posterKey, worker.ID)
}

// count is how many requests are waiting.
func (dw *deliveryWaiters) count() int {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	n := 0
	for _, chans := range dw.byAgent {
		n += len(chans)
	}
	return n
}
