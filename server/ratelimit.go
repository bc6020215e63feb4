package server

import (
	"errors"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/chatd/chatd/store"
)

// Rate limits are token buckets: one per credential for the requests it
// makes, and one per client address for the authentications that fail
// there. Quotas (403 limit_reached) are a different thing: they bound what
// is stored, not how fast it is asked for.
const (
	// DefaultRateLimit and DefaultRateBurst are per credential. A busy
	// agent on the Band SDKs makes a few requests a second (the socket
	// carries its messages; REST sends replies, events and three status
	// updates per message), and a web page opening, a script paging
	// through every room or an owner reconnecting its agents' sockets
	// makes a run of a hundred or so. Neither comes near 100/s sustained
	// with 400 at once. The writer commits some 2,500 to 3,500 posts a
	// second, so one credential at the limit takes a few percent of it: a
	// client stuck in a loop is slowed long before it starves the others.
	DefaultRateLimit = 100
	DefaultRateBurst = 400
	// DefaultAuthFailureRate and DefaultAuthFailureBurst are per client
	// address. Keys are 256 random bits, so guessing is hopeless anyway;
	// the limit bounds the work and the log lines a guesser costs, while a
	// misconfigured client (a few attempts a second) still sees its 401s.
	DefaultAuthFailureRate  = 10
	DefaultAuthFailureBurst = 50
)

const (
	// sweepEvery is how often a limiter drops the buckets that are full: a
	// full bucket is exactly what a new one would be, so dropping it loses
	// nothing and keeps the map at the keys active in the last seconds.
	sweepEvery = time.Minute
	// maxBuckets bounds a limiter's map between sweeps (about 200 bytes a
	// bucket, so some 20 MB at most). Beyond it an arbitrary bucket is
	// dropped: its owner starts afresh, which is the price of a bound that
	// many addresses (an IPv6 range) cannot push past.
	maxBuckets = 100_000
)

// limiter is a set of token buckets keyed by credential or address. One
// mutex guards the map: a request holds it for a map lookup and a little
// arithmetic, well below what authenticating the request costs.
type limiter struct {
	rate  rate.Limit
	burst int
	max   int

	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	lastSweep time.Time
}

// newLimiter returns a limiter of perSecond tokens a second and burst at
// once, or nil (no limit) when perSecond is not positive.
func newLimiter(perSecond float64, burst int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	if burst < 1 {
		burst = 1
	}
	return &limiter{rate: rate.Limit(perSecond), burst: burst, max: maxBuckets, buckets: map[string]*rate.Limiter{}}
}

// limitState is a bucket as the x-ratelimit-* headers describe it.
type limitState struct {
	allowed    bool
	limit      int           // the bucket's size: requests that may come at once
	remaining  int           // whole requests left now
	reset      time.Duration // until the bucket is full again
	retryAfter time.Duration // until the next request is allowed (when refused)
}

// allow takes one token from key's bucket if it has one.
func (l *limiter) allow(key string, now time.Time) limitState {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(key, now)
	ok := b.AllowN(now, 1)
	return l.state(ok, b.TokensAt(now))
}

// exhausted reports whether key's bucket is empty, taking nothing.
func (l *limiter) exhausted(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	return ok && b.TokensAt(now) < 1
}

// refusal is the state of key's bucket, for a refusal decided by exhausted.
func (l *limiter) refusal(key string, now time.Time) limitState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state(false, l.bucket(key, now).TokensAt(now))
}

func (l *limiter) bucket(key string, now time.Time) *rate.Limiter {
	if now.Sub(l.lastSweep) >= sweepEvery {
		l.sweep(now)
	}
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.max {
			for k := range l.buckets {
				delete(l.buckets, k)
				break
			}
		}
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[key] = b
	}
	return b
}

func (l *limiter) sweep(now time.Time) {
	l.lastSweep = now
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
}

func (l *limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

func (l *limiter) state(allowed bool, tokens float64) limitState {
	perSecond := float64(l.rate)
	st := limitState{allowed: allowed, limit: l.burst, remaining: max(0, int(math.Floor(tokens)))}
	st.reset = time.Duration((float64(l.burst) - tokens) / perSecond * float64(time.Second))
	if !allowed {
		st.retryAfter = time.Duration((1 - tokens) / perSecond * float64(time.Second))
	}
	return st
}

// wholeSeconds rounds d up to whole seconds, at least min.
func wholeSeconds(d time.Duration, min int) int {
	return max(min, int(math.Ceil(d.Seconds())))
}

// setHeaders writes the x-ratelimit-* headers of st.
func (st limitState) setHeaders(h http.Header) {
	h.Set("X-Ratelimit-Limit", strconv.Itoa(st.limit))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(st.remaining))
	h.Set("X-Ratelimit-Reset", strconv.Itoa(wholeSeconds(st.reset, 0)))
}

// retryError is a refusal that tells the client when to come back; the
// error envelope and Retry-After carry its delay.
type retryError struct {
	err    *httpError
	after  int    // whole seconds
	reason string // which limit, as the metrics name it (retryReasons)
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// retryAfterOf is the delay a refusal asks for, in whole seconds.
func retryAfterOf(err error) int {
	var re *retryError
	if errors.As(err, &re) {
		return re.after
	}
	return retryAfterSeconds
}

// retryReasonOf names why err asks the client to retry later, as
// retryReasons list the reasons.
func retryReasonOf(err error) string {
	var re *retryError
	switch {
	case errors.As(err, &re):
		return re.reason
	case errors.Is(err, errTooManySockets):
		return "socket_limit"
	case errors.Is(err, errTooManyPolls):
		return "longpoll_limit"
	case errors.Is(err, store.ErrQueueFull):
		return "write_queue_full"
	case errors.Is(err, store.ErrBulkQueueFull):
		return "bulk_queue_full"
	case errors.Is(err, store.ErrLocked):
		return "database_locked"
	case errors.Is(err, store.ErrClosed):
		return "shutting_down"
	case errors.Is(err, errNotWriting), errors.Is(err, errQueueSaturated):
		return "not_ready"
	}
	return "other"
}

// rateLimited is the refusal of a request over a limit (reason names it,
// as retryReasons do). code is rate_limited on REST; a socket upgrade
// answers too_many_requests, the code the Band SDKs expect with a 429
// there.
func rateLimited(code errorCode, reason, msg string, st limitState) error {
	return &retryError{err: &httpError{Code: code, Message: msg}, after: wholeSeconds(st.retryAfter, 1), reason: reason}
}

// clientAddress is the key of the failed-authentication bucket: the
// connection's address, never a forwarding header (which any client can
// write). An IPv6 address counts by its /64, the block one host usually
// holds, so that one host cannot spread its attempts over addresses.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// credentialKey names the bucket of an authenticated principal: each API
// key has its own, all the bearer tokens of one person share the person's
// (tokens are cheap to mint, so one per token would be no limit), a
// delegated token counts against its delegation, apart from the person's
// own requests, and an OAuth access token against its grant (every token a
// signed-in client refreshes to).
func credentialKey(p *store.Principal) string {
	switch {
	case p.Delegation != nil:
		return "delegation:" + p.Delegation.ID
	case p.KeyID != "":
		return "key:" + p.KeyID
	case p.OAuthGrantID != "":
		return "oauth:" + p.OAuthGrantID
	case p.Agent != nil:
		return "agent:" + p.Agent.ID
	}
	return "user:" + p.User.ID
}

const (
	msgRateLimited = "too many requests with this credential; retry after the delay in Retry-After"
	msgAuthLimited = "too many failed authentications from this address; retry after the delay in Retry-After"
)

// authenticateLimited runs authn under the rate limits, and sets the
// x-ratelimit-* headers of the caller's bucket on the response. An
// address that has spent its failed-authentication budget is checked
// first: authn is then told to verify without the database
// (cachedOnly), and a credential that fails is answered 429, not 401. A
// valid credential is never held up by its address's failures.
func (s *Server) authenticateLimited(w http.ResponseWriter, r *http.Request, tooMany errorCode,
	authn func(cachedOnly bool) (*store.Principal, error)) (*store.Principal, error) {
	now := s.now()
	addr := ""
	blocked := false
	if s.authFailures != nil {
		addr = clientAddress(r)
		blocked = s.authFailures.exhausted(addr, now)
	}
	p, err := authn(blocked)
	if store.ErrorCode(err) == store.CodeUnauthorized {
		s.metrics.authFailed(credentialKind(r))
	}
	if store.ErrorCode(err) == store.CodeUnauthorized && s.authFailures != nil {
		if blocked {
			return nil, rateLimited(tooMany, "auth_failures", msgAuthLimited, s.authFailures.refusal(addr, now))
		}
		if st := s.authFailures.allow(addr, now); !st.allowed {
			return nil, rateLimited(tooMany, "auth_failures", msgAuthLimited, st)
		}
		return nil, err
	}
	if p == nil || s.requests == nil {
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	// Every request of a valid credential takes a token, those refused for
	// the credential's kind (authn's error with its principal) included.
	st := s.requests.allow(credentialKey(p), now)
	st.setHeaders(w.Header())
	if !st.allowed {
		return nil, rateLimited(tooMany, "rate_limit", msgRateLimited, st)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// credentialKind names the kind of credential r presents, as
// authCredentials do: an API key (X-API-Key, or api_key on a socket's
// URL), a bearer token (Authorization, or token on a socket's URL), or
// none.
func credentialKind(r *http.Request) string {
	switch {
	case r.Header.Get("X-Api-Key") != "":
		return "api_key"
	case r.Header.Get("Authorization") != "":
		return "bearer"
	case r.URL.Query().Get("api_key") != "":
		return "api_key"
	case r.URL.Query().Get("token") != "":
		return "bearer"
	}
	return "none"
}

// isAuthFailure reports whether err refuses a secret: a credential, or an
// OAuth code, refresh token or client id.
func isAuthFailure(err error) bool {
	if errors.Is(err, store.ErrWrongPassword) { // a password change's guess
		return true
	}
	switch store.ErrorCode(err) {
	case store.CodeUnauthorized, store.CodeInvalidGrant, store.CodeInvalidClient:
		return true
	}
	return false
}

// underAuthFailureLimit runs attempt, a sign-in or a setup (which take a
// secret in the body, not a credential in the headers: credential
// "sign_in"), or an OAuth token or revocation request (a code or refresh
// token in a form: "oauth"), under the failed-authentication limit of the
// client's address: an address that has spent its budget is refused before
// any password is hashed, and each 401 spends from it.
func (s *Server) underAuthFailureLimit(r *http.Request, credential string, attempt func() error) error {
	now := s.now()
	addr := clientAddress(r)
	if s.authFailures != nil && s.authFailures.exhausted(addr, now) {
		return rateLimited(codeRateLimited, "auth_failures", msgAuthLimited, s.authFailures.refusal(addr, now))
	}
	err := attempt()
	if isAuthFailure(err) {
		s.metrics.authFailed(credential)
		if s.authFailures == nil {
			return err
		}
		if st := s.authFailures.allow(addr, now); !st.allowed {
			return rateLimited(codeRateLimited, "auth_failures", msgAuthLimited, st)
		}
	}
	return err
}
