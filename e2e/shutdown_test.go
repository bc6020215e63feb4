package e2e

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// A server stopped while its metrics are scraped stops them before its
// database closes: no scrape meets the closed database (one that did
// logged "metrics: reading the delivery backlog ... sql: database is
// closed"), and the server still exits 0.
func TestShutdownWhileMetricsAreScraped(t *testing.T) {
	db, _ := newDatabaseWithAlice(t)
	srv := startServer(t, db, "--metrics-addr", "127.0.0.1:0")
	metricsURL := srv.awaitMetrics(t)

	var scrapers sync.WaitGroup
	scraped := make(chan struct{})
	var once sync.Once
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for range 16 {
		scrapers.Add(1)
		go func() {
			defer scrapers.Done()
			for {
				select {
				case <-srv.done:
					return
				default:
				}
				resp, err := client.Get(metricsURL)
				if err != nil {
					continue // refused once the metrics stopped; the loop ends with the process
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				once.Do(func() { close(scraped) })
			}
		}()
	}
	<-scraped
	srv.stop(t)
	scrapers.Wait()
	for _, line := range strings.Split(srv.stderr.String(), "\n") {
		if strings.Contains(line, "metrics:") || strings.Contains(line, "database is closed") {
			t.Errorf("logged while stopping: %s", line)
		}
	}
}
