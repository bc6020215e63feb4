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
	b := newBigFile(t)
	var id string
	b.phase("upload over HTTP", func() { id = b.upload() })
	httpTime := b.phase("download over HTTP", func() { b.downloadOverHTTP(id) })
	directTime := b.phase("read from SQLite", func() { b.readFromStore(id) })
	t.Logf("download over HTTP runs at %.2f× the speed of reading the chunks straight from SQLite (both hashed)",
		directTime.Seconds()/httpTime.Seconds())
}

// bigFile is the file TestBigFileMemoryAndThroughput moves through a files
// world whose size limit lets it in. Its digest is known before it is sent,
// since the test never holds the file to hash it afterwards.
type bigFile struct {
	t      *testing.T
	k      *filesWorld
	size   int64
	digest string
}

func newBigFile(t *testing.T) *bigFile {
	size := int64(200) << 20
	if v, err := strconv.Atoi(os.Getenv("CHATD_BIG_FILE_MIB")); err == nil && v > 0 {
		size = int64(v) << 20
	}
	b := &bigFile{t: t, k: newFilesWorld(t, func(c *Config) { c.MaxFileBytes = size }), size: size}
	h := sha256.New()
	if _, err := io.Copy(h, generated(size)); err != nil {
		t.Fatal(err)
	}
	b.digest = hex.EncodeToString(h.Sum(nil))
	return b
}

// phase runs f, logs its time, throughput and peak memory, and returns its
// time. A heap that grows with the file fails it: the server must stream
// chunk by chunk.
func (b *bigFile) phase(name string, f func()) time.Duration {
	runtime.GC()
	before := procStatus("VmRSS:")
	rss := newPeakMeter()
	start := time.Now()
	f()
	elapsed := time.Since(start)
	hwm, heap := rss.stop()
	b.t.Logf("%-20s %6.2fs %7.1f MiB/s  RSS before %6.1f MiB, peak %6.1f MiB  peak Go heap in use %5.1f MiB",
		name, elapsed.Seconds(), float64(b.size)/(1<<20)/elapsed.Seconds(), float64(before)/(1<<20), float64(hwm)/(1<<20), float64(heap)/(1<<20))
	if heap > 64<<20 {
		b.t.Errorf("%s: %d MiB of heap in use at the peak: memory is not bounded by the chunk size", name, heap>>20)
	}
	return elapsed
}

// upload streams the file into the room as helper and returns its id.
func (b *bigFile) upload() string {
	t, k := b.t, b.k
	r, _ := k.ts.send(t, "POST", k.files(k.helperKey, k.room),
		fileHeaders(k.helperKey, "big.bin", b.digest, "application/octet-stream"), generated(b.size))
	expect(t, r, 201, "")
	return r.data(t)["id"].(string)
}

// downloadOverHTTP hashes the download as it arrives, as scout: reading it
// whole, as ts.do does, would put the file in the heap being measured.
func (b *bigFile) downloadOverHTTP(id string) {
	t, k := b.t, b.k
	req, _ := http.NewRequest("GET", k.ts.http.URL+k.files(k.scoutKey, k.room)+"/"+id, nil)
	req.Header.Set("X-API-Key", k.scoutKey)
	res, err := k.ts.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, res.Body)
	if err != nil || n != b.size || hex.EncodeToString(h.Sum(nil)) != b.digest {
		t.Fatalf("downloaded %d bytes (%v), digest match %v", n, err, hex.EncodeToString(h.Sum(nil)) == b.digest)
	}
}

// readFromStore hashes the stored chunks straight from the store, the
// baseline the download over HTTP is measured against.
func (b *bigFile) readFromStore(id string) {
	t, k := b.t, b.k
	f, err := k.ts.db.RoomFile(context.Background(), store.AgentActor(k.scout), k.room, id)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if err := k.ts.db.CopyFileRange(context.Background(), f, 0, f.Size-1, h); err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(h.Sum(nil)) != b.digest {
		t.Fatal("the stored chunks do not hash to the file's digest")
	}
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
