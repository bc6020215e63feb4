package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// profileFlags are the extra server flags a profiled run needs: the
// metrics listener, which also serves /debug/pprof/.
func profileFlags(dir string) []string {
	if dir == "" {
		return nil
	}
	return []string{"--metrics-addr", "127.0.0.1:0"}
}

// startProfile records, while a workload runs for d, the server's CPU
// profile, runtime trace and allocations into dir (cpu.pprof, trace.out,
// allocs.pprof); wait blocks
// until both are written, then saves the server's metrics (metrics.txt). Read them with `go tool pprof cpu.pprof` and
// `go tool trace trace.out` (or `go tool trace -pprof=sync trace.out`).
func startProfile(dir, metricsURL string, d time.Duration) (wait func()) {
	if dir == "" || metricsURL == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return func() {}
	}
	base := strings.TrimSuffix(metricsURL, "/metrics") + "/debug/pprof/"
	secs := max(1, int(d.Seconds()))
	var wg sync.WaitGroup
	for _, p := range []struct{ path, file string }{
		{fmt.Sprintf("profile?seconds=%d", secs), "cpu.pprof"},
		{fmt.Sprintf("trace?seconds=%d", secs), "trace.out"},
		{fmt.Sprintf("allocs?seconds=%d", secs), "allocs.pprof"},
	} {
		wg.Go(func() {
			if err := download(base+p.path, filepath.Join(dir, p.file)); err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", p.file, err)
			}
		})
	}
	return func() {
		wg.Wait()
		if err := download(metricsURL, filepath.Join(dir, "metrics.txt")); err != nil {
			fmt.Fprintf(os.Stderr, "bench: metrics.txt: %v\n", err)
		}
	}
}

func download(url, path string) error {
	res, err := http.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
