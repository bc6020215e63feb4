package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// maxResponseBytes bounds what is read of a receiver's answer: nothing of it
// is kept, but reading a small one lets the connection be used again.
const maxResponseBytes = 64 << 10

// maxRetryAfter bounds the wait a receiver's Retry-After may ask for.
const maxRetryAfter = 24 * time.Hour

// Sender sends signed webhook requests through a client that follows no
// redirects, uses no proxy (a proxy would reach what the guard refuses),
// checks every address it connects to with its Guard, and gives each
// request a bounded time, connection to last byte read.
type Sender struct {
	client  *http.Client
	timeout time.Duration
}

// NewSender returns a Sender that connects where guard allows, and whose
// requests each take at most timeout.
func NewSender(guard *Guard, timeout time.Duration) *Sender { return newSender(guard, timeout, nil) }

// newSender is NewSender resolving names with resolver (nil: the system's),
// for tests whose names resolve where they say.
func newSender(guard *Guard, timeout time.Duration, resolver *net.Resolver) *Sender {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: guard.DialControl, Resolver: resolver}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		// Several endpoints often share a host (one receiver serving
		// several agents): each worker keeps its connection.
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &Sender{timeout: timeout, client: &http.Client{
		Transport: transport,
		// A redirect is answered as the failure it is: the receiver's URL
		// moved, and the webhook should be registered at the new one.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Close closes the idle connections.
func (s *Sender) Close() { s.client.CloseIdleConnections() }

// Request is one attempt at a delivery.
type Request struct {
	URL    string
	ID     string // webhook-id: the same on every attempt at one delivery
	Secret string // whsec_…
	Body   []byte // JSON
	At     time.Time
}

// Result is how an attempt went.
type Result struct {
	StatusCode int           // the receiver's status; 0 when it gave none
	Latency    time.Duration // from the request's start to the end of the answer
	// Err is nil when the receiver answered 2xx; otherwise it says what
	// went wrong, in words fit for the delivery log.
	Err error
	// RetryAfter is the wait a 429 or 503 answer asked for (0: none).
	RetryAfter time.Duration
}

// Send makes one attempt: it signs the body for the attempt's time and
// POSTs it. Cancelling ctx cuts the attempt short.
func (s *Sender) Send(ctx context.Context, r Request) Result {
	timestamp := r.At.Unix()
	signature, err := Sign(r.Secret, r.ID, timestamp, r.Body)
	if err != nil {
		return Result{Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return Result{Err: fmt.Errorf("the URL cannot be requested: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "chatd-webhooks")
	req.Header.Set(HeaderID, r.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(timestamp, 10))
	req.Header.Set(HeaderSignature, signature)
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return Result{Latency: time.Since(start), Err: s.describe(ctx, err)}
	}
	// Whether the rest of the answer arrives in time does not matter: the
	// status is the receiver's verdict.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
	resp.Body.Close()
	res := Result{StatusCode: resp.StatusCode, Latency: time.Since(start)}
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return res
	case code >= 300 && code < 400:
		res.Err = fmt.Errorf("the receiver answered %s; redirects are not followed (register the URL it redirects to)", resp.Status)
	default:
		res.Err = fmt.Errorf("the receiver answered %s", resp.Status)
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			res.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
	}
	return res
}

// describe words a failed request for the delivery log.
func (s *Sender) describe(ctx context.Context, err error) error {
	var refused *RefusedError
	if errors.As(err, &refused) {
		return refused
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return context.Canceled
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return fmt.Errorf("no answer within %s", s.timeout)
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 {
			return 0
		}
		return min(time.Duration(n)*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// Backoff is the wait before retry n (1 for the first): base×4^(n−1),
// capped at max, then spread by ±20% with jitter (in [0, 1)), so that
// deliveries that failed together do not all come back at once.
func Backoff(n int, base, max time.Duration, jitter float64) time.Duration {
	wait := base
	for i := 1; i < n && wait < max; i++ {
		wait *= 4
	}
	wait = min(wait, max)
	return time.Duration(float64(wait) * (0.8 + 0.4*jitter))
}
