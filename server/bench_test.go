package server

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

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
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds()), "p99-µs")
}
