package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type client struct {
	base string
	http *http.Client
}

func newClient(base string, conns int) *client {
	tr := &http.Transport{MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, IdleConnTimeout: time.Minute}
	return &client{base: base, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// call makes one request and decodes a JSON answer into out (when not nil).
// It returns the status; any status other than want is an error.
func (c *client) call(method, path, key string, body, out any, want ...int) (int, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte: // already encoded, as the hot workloads send it
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-API-Key", key)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if out == nil && slices.Contains(want, res.StatusCode) {
		_, err = io.Copy(io.Discard, res.Body)
		return res.StatusCode, err
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, err
	}
	if !slices.Contains(want, res.StatusCode) {
		return res.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if out != nil && len(b) > 0 {
		return res.StatusCode, json.Unmarshal(b, out)
	}
	return res.StatusCode, nil
}

// lane is one client's fixture: a room where a poster agent mentions a
// worker agent, read by the person who owns both.
type lane struct {
	room                 string
	posterKey, workerKey string
	workerID             string
}

type fixture struct {
	c         *client
	personKey string
	lanes     []lane
	posted    atomic.Int64
}

// setup registers 2n agents and n rooms through the API.
func (c *client) setup(personKey string, n int) (*fixture, error) {
	f := &fixture{c: c, personKey: personKey, lanes: make([]lane, n)}
	stamp := time.Now().UnixNano()
	for i := range f.lanes {
		l := &f.lanes[i]
		var err error
		if _, l.posterKey, err = registerAgent(c, personKey, fmt.Sprintf("poster %d %d", stamp, i)); err != nil {
			return nil, err
		}
		if l.workerID, l.workerKey, err = registerAgent(c, personKey, fmt.Sprintf("worker %d %d", stamp, i)); err != nil {
			return nil, err
		}
		var room struct{ Data struct{ ID string } }
		if _, err := c.call("POST", "/api/v1/agent/chats", l.posterKey, map[string]any{}, &room, 201); err != nil {
			return nil, err
		}
		l.room = room.Data.ID
		if _, err := c.call("POST", "/api/v1/agent/chats/"+l.room+"/participants", l.posterKey,
			map[string]any{"participant": map[string]any{"participant_id": l.workerID}}, nil, 201); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// post is one acknowledged text message mentioning the lane's worker.
func (f *fixture) post(i int) error {
	l := f.lanes[i]
	n := f.posted.Add(1)
	_, err := f.c.call("POST", "/api/v1/agent/chats/"+l.room+"/messages", l.posterKey, postBody(n, l.workerID), nil, 201)
	return err
}

// postBody is the post workload's request, encoded by hand: the client's
// own cost per request stays small beside the server's.
func postBody(n int64, mention string) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"message":{"content":"please look at item `...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, ` of the load test","mentions":[{"id":"`...)
	b = append(b, mention...)
	return append(b, `"}]}}`...)
}

// work is one turn of an agent's loop: take the oldest message not
// processed yet, mark it processing, then processed.
func (f *fixture) work(i int) error {
	l := f.lanes[i]
	var next struct{ Data struct{ ID string } }
	status, err := f.c.call("GET", "/api/v1/agent/chats/"+l.room+"/messages/next", l.workerKey, nil, &next, 200, 204)
	if err != nil {
		return err
	}
	if status == 204 {
		return errDrained
	}
	base := "/api/v1/agent/chats/" + l.room + "/messages/" + next.Data.ID
	if _, err := f.c.call("POST", base+"/processing", l.workerKey, nil, nil, 200); err != nil {
		return err
	}
	_, err = f.c.call("POST", base+"/processed", l.workerKey, map[string]any{}, nil, 200)
	return err
}

// history is one page (50 messages) of a room's history, as a person reads it.
func (f *fixture) history(i int) error {
	_, err := f.c.call("GET", "/api/v1/me/chats/"+f.lanes[i].room+"/messages?limit=50", f.personKey, nil, nil, 200)
	return err
}

var errDrained = fmt.Errorf("no message left to process")

type result struct {
	lat      []time.Duration
	elapsed  time.Duration
	errors   int
	drained  int
	firstErr error
}

func (r result) rate() float64 { return float64(len(r.lat)) / r.elapsed.Seconds() }

func (r result) p(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, int(q*float64(len(r.lat))))]
}

// run calls op from n goroutines (goroutine i works on lane i) for d and
// collects the latency of every successful call.
func (c *client) run(n int, d time.Duration, op func(int) error) result {
	return c.runTurns(n, d, nil, op)
}

// runTurns is run where, when turns is not nil, each call first takes a
// turn from it, and its latency counts from the turn's time: a call that
// waited for a free client is as late as it was.
func (c *client) runTurns(n int, d time.Duration, turns <-chan time.Time, op func(int) error) result {
	var mu sync.Mutex
	var res result
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			var lat []time.Duration
			errs, drained := 0, 0
			var first error
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if turns != nil {
					select {
					case t0 = <-turns:
					case <-time.After(100 * time.Millisecond):
						continue
					}
				}
				err := op(i)
				switch {
				case err == errDrained:
					drained++
					time.Sleep(time.Millisecond)
				case err != nil:
					errs++
					if first == nil {
						first = err
					}
				default:
					lat = append(lat, time.Since(t0))
				}
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.errors += errs
			res.drained += drained
			if res.firstErr == nil {
				res.firstErr = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.Sort(res.lat)
	return res
}
