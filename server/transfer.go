package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// Every request body has a minimum rate: each transferUnit bytes must arrive
// within the transfer timeout (Config.TransferTimeout). The limit is on the
// rate, not on the whole transfer, so a large file at any ordinary speed
// takes as long as it needs, while a client that trickles a byte now and
// then (each byte would reset an idle deadline) is cut off and frees what
// it holds.

// transferUnit is the amount that must move within each transfer timeout:
// with the default 15 s, about 1 KiB/s, far below any real link.
const transferUnit = 16 << 10

// DefaultTransferTimeout is the default of Config.TransferTimeout.
const DefaultTransferTimeout = 15 * time.Second

// errBodyTooSlow is what reading a request body returns once the client has
// not sent transferUnit bytes within the transfer timeout.
var errBodyTooSlow = errors.New("the request body arrived too slowly")

// minRateBody is a request body that must deliver transferUnit bytes in each
// transfer timeout. Only the time spent waiting in Read counts, so the
// server's own pauses between reads (an upload writes each chunk to the
// database) are not held against the client. The read deadline makes a
// stalled Read return, rather than the rate being checked after it does.
type minRateBody struct {
	body    io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	waited  time.Duration // waiting in Read since the last unit completed
	got     int           // bytes since the last unit completed
	// err is the first error, io.EOF included. Once the body has ended
	// net/http reads the connection itself (to notice a client going
	// away), and a deadline set then would cancel the request's context.
	err error
}

func (b *minRateBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	start := time.Now()
	_ = b.rc.SetReadDeadline(start.Add(b.timeout - b.waited))
	n, err := b.body.Read(p)
	b.waited += time.Since(start)
	if b.got += n; b.got >= transferUnit {
		b.got, b.waited = 0, 0
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errBodyTooSlow
	}
	b.err = err
	return n, err
}

func (b *minRateBody) Close() error { return b.body.Close() }

// limitTransferRates puts r's body under the minimum rate. A body starts
// with a deadline, because net/http itself reads up to 256 KiB of a body its
// handler left unread before it answers, and that must not wait for a
// trickle forever either.
func (s *Server) limitTransferRates(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	if r.Body != nil && r.Body != http.NoBody {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.transferTimeout))
		r.Body = &minRateBody{body: r.Body, rc: rc, timeout: s.transferTimeout}
	}
	return w
}
