package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/store"
)

// TestBigFileMemoryAndThroughput uploads and downloads a 200 MiB file over
// real HTTP and reports the process's peak memory in each phase and the
// download's throughput against reading the same chunks straight from the
// store. It takes a minute and 200 MiB of disk, so it runs only when asked:
//
//	CHATD_BIG_FILE=1 go test ./server -run BigFile -v
//
// CHATD_BIG_FILE_MIB sets another size.
func TestBigFileMemoryAndThroughput(t *testing.T) {
	if os.Getenv("CHATD_BIG_FILE") == "" {
		t.Skip("set CHATD_BIG_FILE=1 to run")
	}
	size := int64(200) << 20
	if v, err := strconv.Atoi(os.Getenv("CHATD_BIG_FILE_MIB")); err == nil && v > 0 {
		size = int64(v) << 20
	}
	k := newFilesWorld(t, func(c *Config) { c.MaxFileBytes = size })
	digest := func() string {
		h := sha256.New()
		if _, err := io.Copy(h, generated(size)); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(h.Sum(nil))
	}()

	phase := func(name string, f func()) {
		runtime.GC()
		before := procStatus("VmRSS:")
		rss := newPeakMeter()
		start := time.Now()
		f()
		elapsed := time.Since(start)
		hwm, heap := rss.stop()
		t.Logf("%-20s %6.2fs %7.1f MiB/s  RSS before %6.1f MiB, peak %6.1f MiB  peak Go heap in use %5.1f MiB",
			name, elapsed.Seconds(), float64(size)/(1<<20)/elapsed.Seconds(), float64(before)/(1<<20), float64(hwm)/(1<<20), float64(heap)/(1<<20))
		if heap > 64<<20 {
			t.Errorf("%s: %d MiB of heap in use at the peak: memory is not bounded by the chunk size", name, heap>>20)
		}
	}

	var id string
	phase("upload over HTTP", func() {
		req, err := http.NewRequest("POST", k.ts.http.URL+k.files(k.helperKey, k.room), struct{ io.Reader }{generated(size)})
		if err != nil {
			t.Fatal(err)
		}
		fileHeaders(k.helperKey, "big.bin", digest, "application/octet-stream")(req.Header)
		res, err := k.ts.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		r := &response{status: res.StatusCode, header: res.Header}
		r.body, _ = io.ReadAll(res.Body)
		expect(t, r, 201, "")
		id = r.data(t)["id"].(string)
	})
	var httpTime, directTime time.Duration
	phase("download over HTTP", func() {
		start := time.Now()
		req, _ := http.NewRequest("GET", k.ts.http.URL+k.files(k.scoutKey, k.room)+"/"+id, nil)
		req.Header.Set("X-API-Key", k.scoutKey)
		res, err := k.ts.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		h := sha256.New()
		n, err := io.Copy(h, res.Body)
		if err != nil || n != size || hex.EncodeToString(h.Sum(nil)) != digest {
			t.Fatalf("downloaded %d bytes (%v), digest match %v", n, err, hex.EncodeToString(h.Sum(nil)) == digest)
		}
		httpTime = time.Since(start)
	})
	phase("read from SQLite", func() {
		start := time.Now()
		f, err := k.ts.db.RoomFile(context.Background(), store.AgentActor(k.scout), k.room, id)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		if err := k.ts.db.CopyFileRange(context.Background(), f, 0, f.Size-1, h); err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(h.Sum(nil)) != digest {
			t.Fatal("the stored chunks do not hash to the file's digest")
		}
		directTime = time.Since(start)
	})
	t.Logf("download over HTTP runs at %.2f× the speed of reading the chunks straight from SQLite (both hashed)",
		directTime.Seconds()/httpTime.Seconds())
}

// generated is a reproducible stream of n pseudo-random bytes, made as it is
// read (the test never holds the file).
func generated(n int64) io.Reader {
	rng := rand.NewChaCha8([32]byte{'c', 'h', 'a', 't', 'd'})
	return io.LimitReader(rng, n)
}

// peakMeter follows the process's peak resident set (VmHWM, reset through
// clear_refs where the kernel allows it) and samples the Go heap in use.
type peakMeter struct {
	done     chan struct{}
	wg       sync.WaitGroup
	peakHeap uint64
}

func newPeakMeter() *peakMeter {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM to the current RSS
	m := &peakMeter{done: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			m.peakHeap = max(m.peakHeap, ms.HeapInuse)
			select {
			case <-m.done:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *peakMeter) stop() (hwm int64, heap uint64) {
	close(m.done)
	m.wg.Wait()
	return procStatus("VmHWM:"), m.peakHeap
}

// procStatus reads a memory figure of /proc/self/status in bytes.
func procStatus(field string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
