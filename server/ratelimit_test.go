package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is the rate limits' clock in tests: buckets refill only when
// the test says time has passed.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// limitedServer is a test server with tiny limits on a fake clock.
func limitedServer(t *testing.T, configure func(*Config)) (*testServer, *fakeClock) {
	clock := newFakeClock()
	ts := newTestServerWith(t, func(c *Config) {
		c.now = clock.Now
		c.RateLimit, c.RateBurst = 0.5, 3
		c.DisableAuthFailureLimit = false
		c.AuthFailureRate, c.AuthFailureBurst = 1, 2
		if configure != nil {
			configure(c)
		}
	})
	return ts, clock
}

// expectLimitHeaders checks the x-ratelimit-* headers.
func expectLimitHeaders(t *testing.T, r *response, limit, remaining, reset string) {
	t.Helper()
	got := []string{r.header.Get("X-Ratelimit-Limit"), r.header.Get("X-Ratelimit-Remaining"), r.header.Get("X-Ratelimit-Reset")}
	if want := []string{limit, remaining, reset}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("x-ratelimit limit/remaining/reset = %q, want %q", got, want)
	}
}

// expectRetryAfter checks a 429's Retry-After header and its echo in the body.
func expectRetryAfter(t *testing.T, r *response, seconds int) {
	t.Helper()
	if got := r.header.Get("Retry-After"); got != fmt.Sprint(seconds) {
		t.Fatalf("Retry-After = %q, want %d", got, seconds)
	}
	if got := r.json(t)["error"].(map[string]any)["retry_after"]; got != float64(seconds) {
		t.Fatalf("error.retry_after = %v, want %d", got, seconds)
	}
}

func TestRateLimitPerCredential(t *testing.T) {
	ts, clock := limitedServer(t, nil)
	alice, aliceKey := ts.user("alice")
	_, workerKey := ts.agent(alice, "Worker")
	_, helperKey := ts.agent(alice, "Helper")

	// A bucket of 3 refilling one every 2 s: full again 6 s after it was emptied.
	for i, remaining := range []string{"2", "1", "0"} {
		r := ts.do(t, "GET", "/api/v1/agent/me", apiKey(workerKey), nil)
		expect(t, r, 200, "")
		expectLimitHeaders(t, r, "3", remaining, []string{"2", "4", "6"}[i])
	}
	r := ts.refused(t, "POST", "/api/v1/agent/chats", apiKey(workerKey), map[string]any{}, 429, "rate_limited", "")
	expectRetryAfter(t, r, 2)
	expectLimitHeaders(t, r, "3", "0", "6")

	// Another credential of the same person, at the same moment.
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(helperKey), nil), 200, "")
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey(aliceKey), nil), 200, "")

	clock.Advance(time.Second)
	r = ts.do(t, "GET", "/api/v1/agent/me", apiKey(workerKey), nil)
	expect(t, r, 429, "rate_limited")
	expectRetryAfter(t, r, 1)
	clock.Advance(time.Second)
	r = ts.do(t, "POST", "/api/v1/agent/chats", apiKey(workerKey), map[string]any{})
	expect(t, r, 201, "")
	expectLimitHeaders(t, r, "3", "0", "6")
	clock.Advance(time.Minute)
	expectLimitHeaders(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(workerKey), nil), "3", "2", "2")
}

// A valid credential of the wrong kind is refused (403), and each refusal
// takes a token like any request of the credential: its bucket bounds
// them too, and the 403s say what is left.
func TestRateLimitCountsRefusalsOfTheWrongKind(t *testing.T) {
	ts, _ := limitedServer(t, nil)
	alice, _ := ts.user("alice")
	_, workerKey := ts.agent(alice, "Worker")
	for i, remaining := range []string{"2", "1", "0"} {
		r := ts.do(t, "GET", "/api/v1/me", apiKey(workerKey), nil)
		expect(t, r, 403, "forbidden")
		expectLimitHeaders(t, r, "3", remaining, []string{"2", "4", "6"}[i])
	}
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey(workerKey), nil), 429, "rate_limited")
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(workerKey), nil), 429, "rate_limited")
}

func TestRateLimitBearerTokensShareTheirPersonsBucket(t *testing.T) {
	ts, _ := limitedServer(t, nil)
	alice, aliceKey := ts.user("alice")
	first, second := ts.token(alice, time.Hour), ts.token(alice, 2*time.Hour)
	for range 3 {
		expect(t, ts.do(t, "GET", "/api/v1/me", bearer(first), nil), 200, "")
	}
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(second), nil), 429, "rate_limited")
	// The person's API key is a credential of its own.
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey(aliceKey), nil), 200, "")
}

func TestRateLimitFailedAuthenticationPerAddress(t *testing.T) {
	ts, clock := limitedServer(t, func(c *Config) { c.DisableRateLimit = true })
	alice, aliceKey := ts.user("alice")
	unknown := apiKey("band_u_" + strings.Repeat("z", 52))
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey(aliceKey), nil), 200, "")

	// A budget of 2 failures, refilling one a second.
	expect(t, ts.do(t, "GET", "/api/v1/me", unknown, nil), 401, "unauthorized")
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer("not.a.jwt"), nil), 401, "unauthorized")
	r := ts.refused(t, "GET", "/api/v1/me", unknown, nil, 429, "rate_limited", "")
	expectRetryAfter(t, r, 1)
	expect(t, ts.do(t, "POST", "/api/v1/me/chats", noCred, map[string]any{}), 429, "rate_limited")

	// A key in use keeps working from the same address; so does a token.
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey(aliceKey), nil), 200, "")
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(ts.token(alice, time.Hour)), nil), 200, "")
	// A key not used lately is not looked up while the address is over
	// its budget: that lookup is what the budget bounds.
	_, idleKey := ts.agent(alice, "Idle")
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(idleKey), nil), 429, "rate_limited")

	clock.Advance(time.Second)
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(idleKey), nil), 200, "")
	expect(t, ts.do(t, "GET", "/api/v1/me", unknown, nil), 401, "unauthorized")
	expect(t, ts.do(t, "GET", "/api/v1/me", unknown, nil), 429, "rate_limited")
	// Wrong-kind credentials are valid ones: 403, never counted.
	clock.Advance(time.Minute)
	for range 5 {
		expect(t, ts.do(t, "GET", "/api/v1/me", apiKey(idleKey), nil), 403, "forbidden")
	}
	expect(t, ts.do(t, "GET", "/api/v1/me", unknown, nil), 401, "unauthorized")
}

func TestRateLimitsOff(t *testing.T) {
	ts, _ := limitedServer(t, func(c *Config) { c.DisableRateLimit, c.DisableAuthFailureLimit = true, true })
	_, aliceKey := ts.user("alice")
	for range 20 {
		r := ts.do(t, "GET", "/api/v1/me", apiKey(aliceKey), nil)
		expect(t, r, 200, "")
		if h := r.header.Get("X-Ratelimit-Limit"); h != "" {
			t.Fatalf("x-ratelimit-limit %q with the limit off", h)
		}
		expect(t, ts.do(t, "GET", "/api/v1/me", apiKey("band_u_"+strings.Repeat("z", 52)), nil), 401, "unauthorized")
	}
}

func TestRateLimitSocketUpgrade(t *testing.T) {
	ts, clock := limitedServer(t, nil)
	alice, aliceKey := ts.user("alice")
	_, workerKey := ts.agent(alice, "Worker")
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey(aliceKey), nil), 200, "")
	for range 3 {
		expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(workerKey), nil), 200, "")
	}
	params := url.Values{"vsn": {"2.0.0"}, "api_key": {workerKey}}
	// The SDKs expect too_many_requests with a 429 on an upgrade.
	r := ts.upgrade(t, params, nil)
	expect(t, r, 429, "too_many_requests")
	expectRetryAfter(t, r, 2)
	clock.Advance(2 * time.Second)
	if _, err := dialRaw(t, ts.socketURL(params), nil); err != nil {
		t.Fatal(err)
	}
	// An upgrade is a request: it took the token the REST call now lacks.
	expect(t, ts.do(t, "GET", "/api/v1/agent/me", apiKey(workerKey), nil), 429, "rate_limited")

	bad := url.Values{"vsn": {"2.0.0"}, "api_key": {"band_u_" + strings.Repeat("z", 52)}}
	expect(t, ts.upgrade(t, bad, nil), 401, "unauthorized")
	expect(t, ts.upgrade(t, url.Values{"vsn": {"2.0.0"}, "token": {"not.a.jwt"}}, nil), 401, "unauthorized")
	expect(t, ts.upgrade(t, bad, nil), 429, "too_many_requests")
	// The address's failures count on REST as well, and a key in use still connects.
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey("band_u_"+strings.Repeat("z", 52)), nil), 429, "rate_limited")
	if _, err := dialRaw(t, ts.socketURL(url.Values{"vsn": {"2.0.0"}, "api_key": {workerKey}}), nil); err == nil {
		// workerKey's own bucket is empty: refused for that, not the address.
		t.Fatal("upgrade over the credential's limit succeeded")
	}
	expect(t, ts.do(t, "GET", "/api/v1/me", apiKey(aliceKey), nil), 200, "")
	if _, err := dialRaw(t, ts.socketURL(url.Values{"vsn": {"2.0.0"}, "api_key": {aliceKey}}), nil); err != nil {
		t.Fatal(err)
	}
}

func TestRateLimitsSpareProbesAndThePage(t *testing.T) {
	ts, _ := limitedServer(t, nil)
	// Exhaust the address's failure budget first.
	for range 3 {
		ts.do(t, "GET", "/api/v1/me", noCred, nil)
	}
	for range 10 {
		for _, path := range []string{"/healthz", "/readyz", "/"} {
			res, err := ts.http.Client().Get(ts.http.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK || res.Header.Get("X-Ratelimit-Limit") != "" {
				t.Fatalf("GET %s = %d %v", path, res.StatusCode, res.Header)
			}
		}
	}
}

func TestLimiterStaysBounded(t *testing.T) {
	clock := newFakeClock()
	l := newLimiter(10, 5)
	for i := range 1000 {
		if !l.allow(fmt.Sprint("addr-", i), clock.Now()).allowed {
			t.Fatal("a new bucket refused its first request")
		}
	}
	if n := l.len(); n != 1000 {
		t.Fatalf("%d buckets, want 1000", n)
	}
	// Buckets refill in half a second; the next request after a minute
	// sweeps every full one away.
	clock.Advance(sweepEvery)
	l.allow("busy", clock.Now())
	if n := l.len(); n != 1 {
		t.Fatalf("%d buckets after the sweep, want 1", n)
	}
	// A bucket still refilling survives the sweep.
	clock.Advance(sweepEvery - time.Millisecond)
	for range 5 {
		l.allow("busy", clock.Now())
	}
	clock.Advance(time.Millisecond)
	l.allow("other", clock.Now())
	if n := l.len(); n != 2 {
		t.Fatalf("%d buckets, want busy and other", n)
	}

	// Between sweeps, the cap holds however many keys arrive.
	l.max = 100
	for i := range 10_000 {
		l.allow(fmt.Sprint("flood-", i), clock.Now())
	}
	if n := l.len(); n > 100 {
		t.Fatalf("%d buckets, over the cap of 100", n)
	}
}

func TestLimiterOffWhenRateIsZero(t *testing.T) {
	if newLimiter(0, 10) != nil {
		t.Fatal("a zero rate made a limiter")
	}
}

func TestClientAddress(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:4242":                   "192.0.2.7",
		"[::ffff:192.0.2.7]:4242":          "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:4242":      "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:ffff:0:1]:443": "2001:db8:1:2::/64",
	} {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": {"203.0.113.9"}}}
		if got := clientAddress(r); got != want {
			t.Errorf("clientAddress(%s) = %s, want %s", remote, got, want)
		}
	}
}

func TestRateLimitDelegatedTokensCountAgainstTheirDelegation(t *testing.T) {
	ts, _ := limitedServer(t, nil)
	k := &delegationWorld{ts: ts}
	k.alice, k.aliceKey = ts.user("alice")
	k.helper, k.helperKey = ts.agent(k.alice, "Helper")
	_, grant := k.grant(t, "profile:read")
	delegated := k.exchange(t, grant)
	own := ts.token(k.alice, time.Hour)
	for range 3 {
		expect(t, ts.do(t, "GET", "/api/v1/me", bearer(own), nil), 200, "")
	}
	expect(t, ts.do(t, "GET", "/api/v1/me", bearer(own), nil), 429, "rate_limited")
	// The agent acting for alice spends its delegation's bucket, not hers.
	expectLimitHeaders(t, ts.do(t, "GET", "/api/v1/me", bearer(delegated), nil), "3", "2", "2")
}
