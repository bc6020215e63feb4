package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// Every transfer has a minimum rate: each transferUnit bytes of a request
// body must arrive, and each transferUnit bytes of a response must be taken
// by the client, within the transfer timeout (Config.TransferTimeout). The
// limit is on the rate, not on the whole transfer, so a large file at any
// ordinary speed takes as long as it needs, while a client that trickles a
// byte now and then (each byte would reset an idle deadline) or stops
// reading is cut off and frees what it holds.

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
	// deadline is the read deadline in force, for minRateWriter.
	deadline time.Time
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
	b.deadline = start.Add(b.timeout - b.waited)
	_ = b.rc.SetReadDeadline(b.deadline)
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

// minRateWriter is a response whose client must take each transferUnit bytes
// within the transfer timeout. Each piece written gets a fresh write
// deadline, so the deadline moves forward only as the client takes bytes;
// writing in pieces keeps a large write (a file's chunk) from needing a
// higher rate than a small one. The last deadline also covers what net/http
// still holds in its buffer when the handler returns (handlers write last);
// net/http clears it after each response, and a hijacked connection (the
// WebSocket) starts without one.
type minRateWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	body    *minRateBody // nil for a request without one
}

// extendDeadline gives the client the transfer timeout to take what is
// written next. Before it writes a response, net/http reads what the handler
// left of the request body (up to 256 KiB), for as long as the body's read
// deadline allows: the timeout starts once that is over.
func (w *minRateWriter) extendDeadline() {
	from := time.Now()
	if b := w.body; b != nil && b.err == nil && b.deadline.After(from) {
		from = b.deadline
	}
	_ = w.rc.SetWriteDeadline(from.Add(w.timeout))
}

func (w *minRateWriter) WriteHeader(code int) {
	w.extendDeadline()
	w.ResponseWriter.WriteHeader(code)
}

func (w *minRateWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		piece := p[:min(len(p), transferUnit)]
		w.extendDeadline()
		n, err := w.ResponseWriter.Write(piece)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// Unwrap lets http.ResponseController reach the connection.
func (w *minRateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// limitTransferRates puts r's body and w under the minimum rate. A body
// starts with a deadline, because net/http itself reads up to 256 KiB of a
// body its handler left unread before it answers, and that must not wait
// for a trickle forever either.
func (s *Server) limitTransferRates(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	rc := http.NewResponseController(w)
	mw := &minRateWriter{ResponseWriter: w, rc: rc, timeout: s.transferTimeout}
	if r.Body != nil && r.Body != http.NoBody {
		mw.body = &minRateBody{body: r.Body, rc: rc, timeout: s.transferTimeout, deadline: time.Now().Add(s.transferTimeout)}
		_ = rc.SetReadDeadline(mw.body.deadline)
		r.Body = mw.body
	}
	return mw
}
