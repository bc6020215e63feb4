package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The ceiling: what the same client gets from a bare net/http handler on
// the same machine in the same run, so that a post's cost reads as a ratio
// that does not depend on how fast or how busy the machine is. The handler
// runs in a process of its own, as chatd does, started from this binary
// with ceilingEnv set; it reads the request's body and answers 201 with a
// body the size of a post's answer, and does nothing else.

const ceilingEnv = "CHATD_BENCH_CEILING"

// ceilingAnswer is about as long as chatd's answer to a post.
var ceilingAnswer = []byte(`{"data":{"id":"` + strings.Repeat("0", 36) + `","content":"` + strings.Repeat("x", 560) + `"}}`)

// serveCeilingIfAsked serves the bare handler forever when this process
// was started as the ceiling, and returns otherwise.
func serveCeilingIfAsked() {
	if os.Getenv(ceilingEnv) == "" {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	fmt.Printf("ceiling listening on http://%s\n", ln.Addr())
	fail(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(ceilingAnswer)
	})))
}

// startCeiling starts the ceiling process and returns its URL.
func startCeiling() (url string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), ceilingEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "ceiling listening on "); ok {
				found <- rest
			}
		}
	}()
	select {
	case url = <-found:
		return url, stop, nil
	case <-time.After(10 * time.Second):
		stop()
		return "", nil, errors.New("the net/http ceiling did not start")
	}
}

// measureCeiling runs the post workload's requests (same path, headers and
// body) against the bare handler from n clients for d.
func measureCeiling(n int, d time.Duration) (result, error) {
	url, stop, err := startCeiling()
	if err != nil {
		return result{}, err
	}
	defer stop()
	f := &fixture{c: newClient(url, n), lanes: make([]lane, n)}
	for i := range f.lanes {
		f.lanes[i] = lane{room: "00000000-0000-4000-8000-000000000000", posterKey: "band_a_ceiling",
			workerID: "00000000-0000-4000-8000-000000000001"}
	}
	return f.c.run(n, d, f.post), nil
}
