package webhook

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The test vector the Standard Webhooks libraries publish: a signature
// that matches it verifies with any of them.
func TestSignMatchesTheStandardWebhooksTestVector(t *testing.T) {
	got, err := Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

func TestKeyRefusesWhatIsNotASecret(t *testing.T) {
	for _, secret := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_c2hvcnQ="} {
		if _, err := Key(secret); err == nil {
			t.Errorf("Key(%q) accepted", secret)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	refused := map[string]string{
		"169.254.169.254":        "a cloud metadata address",
		"::ffff:169.254.169.254": "a cloud metadata address",
		"fd00:ec2::254":          "a cloud metadata address",
		"100.100.100.200":        "a cloud metadata address",
		"169.254.1.1":            "a link-local address",
		"fe80::1":                "a link-local address",
		"fe80::1%eth0":           "a link-local address",
		"64:ff9b::a9fe:a9fe":     "a NAT64 address of 169.254.169.254, a cloud metadata address",
		"0.0.0.0":                "the unspecified address",
		"::":                     "the unspecified address",
		"224.0.0.1":              "a multicast address",
		"ff02::1":                "a multicast address",
		"255.255.255.255":        "the broadcast address",
	}
	for addr, reason := range refused {
		err := (&Guard{}).CheckAddr(netip.MustParseAddr(addr))
		var r *RefusedError
		if !errors.As(err, &r) || r.Reason != reason {
			t.Errorf("%s: %v, want refused as %s", addr, err, reason)
		}
	}
	// Self-hosted receivers live on loopback and private ranges.
	for _, addr := range []string{"127.0.0.1", "::1", "10.0.0.1", "172.16.0.1", "192.168.1.1", "fd00::1", "100.64.0.1", "8.8.8.8",
		"2001:db8::1", "64:ff9b::808:808"} {
		if err := (&Guard{}).CheckAddr(netip.MustParseAddr(addr)); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
}

func TestCheckURL(t *testing.T) {
	g := &Guard{Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "rebound.test":
			return []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("169.254.169.254")}, nil
		case "receiver.test":
			return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
		}
		return nil, errors.New("no such host")
	}}
	for raw, want := range map[string]string{
		"http://metadata.google.internal/computeMetadata/v1/": "metadata.google.internal is the name of a cloud metadata service",
		"http://METADATA.Google.Internal./":                   "metadata.google.internal is the name of a cloud metadata service",
		"http://169.254.169.254/latest/meta-data/":            "169.254.169.254 is a cloud metadata address",
		"http://[fd00:ec2::254]/":                             "fd00:ec2::254 is a cloud metadata address",
		"http://[fe80::1%25eth0]:8080/":                       "fe80::1 is a link-local address",
		"https://rebound.test/":                               "rebound.test is a name for 169.254.169.254, a cloud metadata address",
		"http://receiver.test/":                               "",
		"http://unknown.test/":                                "", // checked when sent
		"http://127.0.0.1:9000/hook":                          "",
		"http://[::1]:9000/hook":                              "",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		err = g.CheckURL(context.Background(), u)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s refused: %v", raw, err)
		case want != "" && (err == nil || err.Error() != want+", which webhooks may not reach"):
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}

// fakeDNS is a resolver that answers every A query with addr and every
// other query with nothing, whatever the name.
func fakeDNS(addr *atomic.Pointer[netip.Addr]) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			for {
				// Over a stream, each DNS message has a 2-byte length in front.
				var n uint16
				if binary.Read(server, binary.BigEndian, &n) != nil {
					return
				}
				q := make([]byte, n)
				if _, err := io.ReadFull(server, q); err != nil {
					return
				}
				question := q[12:]
				end := 0
				for question[end] != 0 {
					end += int(question[end]) + 1
				}
				question = question[:end+5] // the name, its 0, type and class
				isA := binary.BigEndian.Uint16(question[end+1:]) == 1
				resp := append([]byte{q[0], q[1], 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}, question...)
				if isA {
					resp[7] = 1
					ip := addr.Load().As4()
					resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
					resp = append(resp, ip[:]...)
				}
				binary.Write(server, binary.BigEndian, uint16(len(resp)))
				server.Write(resp)
			}
		}()
		return client, nil
	}}
}

// A name that resolved somewhere harmless when its webhook was registered
// and resolves to a metadata address when it is sent is refused at the
// connection, before anything is sent.
func TestSendRefusesARefusedAddressAfterResolution(t *testing.T) {
	var received atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { received.Add(1) }))
	defer receiver.Close()
	port := receiver.Listener.Addr().(*net.TCPAddr).Port
	var resolvesTo atomic.Pointer[netip.Addr]
	loopback, metadata := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")
	s := newSender(&Guard{}, 2*time.Second, fakeDNS(&resolvesTo))
	req := Request{URL: "http://receiver.rebind.test:" + itoa(port) + "/hook", ID: "msg_1",
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Body: []byte(`{}`), At: time.Now()}

	resolvesTo.Store(&loopback)
	if res := s.Send(context.Background(), req); res.Err != nil || res.StatusCode != 200 || received.Load() != 1 {
		t.Fatalf("to loopback: %+v, %d received", res, received.Load())
	}
	s.Close() // the next request dials again

	resolvesTo.Store(&metadata)
	res := s.Send(context.Background(), req)
	var refused *RefusedError
	if !errors.As(res.Err, &refused) || refused.Target != "169.254.169.254" || res.StatusCode != 0 {
		t.Fatalf("to the metadata address: %+v", res)
	}
	if received.Load() != 1 {
		t.Fatal("the refused request arrived somewhere")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestSendSignsAndReportsTheAnswer(t *testing.T) {
	var mu sync.Mutex
	var got http.Header
	var body []byte
	status := atomic.Int32{}
	status.Store(200)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got, body = r.Header.Clone(), must(io.ReadAll(r.Body))
		mu.Unlock()
		switch status.Load() {
		case 302:
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case 503:
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(503)
		default:
			w.WriteHeader(int(status.Load()))
		}
	}))
	defer receiver.Close()
	s := NewSender(&Guard{}, 2*time.Second)
	at := time.Unix(1614265330, 0)
	req := Request{URL: receiver.URL + "/hook", ID: "msg_p5jXN8AQM9LWM0D4loKWxJek", Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		Body: []byte(`{"test": 2432232314}`), At: at}

	res := s.Send(context.Background(), req)
	if res.Err != nil || res.StatusCode != 200 || res.Latency <= 0 {
		t.Fatalf("%+v", res)
	}
	mu.Lock()
	if got.Get("webhook-id") != req.ID || got.Get("webhook-timestamp") != "1614265330" ||
		got.Get("webhook-signature") != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" ||
		got.Get("Content-Type") != "application/json" || string(body) != string(req.Body) {
		t.Fatalf("headers %v, body %s", got, body)
	}
	mu.Unlock()

	for code, want := range map[int32]string{
		302: "the receiver answered 302 Found; redirects are not followed (register the URL it redirects to)",
		404: "the receiver answered 404 Not Found",
		503: "the receiver answered 503 Service Unavailable",
	} {
		status.Store(code)
		res := s.Send(context.Background(), req)
		if res.Err == nil || res.Err.Error() != want || res.StatusCode != int(code) {
			t.Errorf("%d: %+v, want %q", code, res, want)
		}
		if code == 503 && res.RetryAfter != 2*time.Minute {
			t.Errorf("503 with Retry-After: 120: wait %v", res.RetryAfter)
		}
	}
}

func TestSendGivesUpOnASlowReceiver(t *testing.T) {
	release := make(chan struct{})
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer receiver.Close()
	defer close(release)
	s := NewSender(&Guard{}, 200*time.Millisecond)
	start := time.Now()
	res := s.Send(context.Background(), Request{URL: receiver.URL, ID: "a", Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", At: time.Now()})
	if res.Err == nil || res.Err.Error() != "no answer within 200ms" || time.Since(start) > 5*time.Second {
		t.Fatalf("%+v after %v", res, time.Since(start))
	}

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		res := NewSender(&Guard{}, 5*time.Second).Send(ctx, Request{URL: receiver.URL, ID: "a", Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", At: time.Now()})
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("%+v", res)
		}
	})
}

func TestSendReportsARefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	res := NewSender(&Guard{}, time.Second).Send(context.Background(), Request{URL: "http://" + addr + "/", ID: "a",
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", At: time.Now()})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "connection refused") || strings.Contains(res.Err.Error(), "Post ") {
		t.Fatalf("%+v", res)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"30":                            30 * time.Second,
		"-1":                            0,
		"999999999":                     24 * time.Hour,
		"Thu, 01 Jan 2026 00:05:00 GMT": 5 * time.Minute,
		"Wed, 31 Dec 2025 00:00:00 GMT": 0,
		"soon":                          0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	base, max := 5*time.Second, 2*time.Hour
	for n, want := range map[int]time.Duration{1: 5 * time.Second, 2: 20 * time.Second, 3: 80 * time.Second, 6: 5120 * time.Second, 7: max, 40: max} {
		if got := Backoff(n, base, max, 0.5); got != want {
			t.Errorf("retry %d: %v, want %v", n, got, want)
		}
	}
	if lo, hi := Backoff(1, base, max, 0), Backoff(1, base, max, 0.999999); lo != 4*time.Second || hi < 5900*time.Millisecond || hi > 6*time.Second {
		t.Errorf("the first retry spreads over %v..%v, want 4s..6s", lo, hi)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// An operator's lists: Deny refuses more ranges, Allow opens ranges even
// where a refusal would apply; a metadata service's name stays refused.
func TestGuardLists(t *testing.T) {
	allow, err := ParsePrefixes([]string{"169.254.7.0/24", " 10.9.9.9 "})
	if err != nil {
		t.Fatal(err)
	}
	deny, err := ParsePrefixes([]string{"10.0.0.0/8", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	g := &Guard{Allow: allow, Deny: deny}
	for addr, want := range map[string]string{
		"10.1.2.3":        "10.1.2.3 is in a range this server denies webhooks, which webhooks may not reach",
		"fd12::1":         "fd12::1 is in a range this server denies webhooks, which webhooks may not reach",
		"10.9.9.9":        "",
		"169.254.7.7":     "",
		"169.254.169.254": "169.254.169.254 is a cloud metadata address, which webhooks may not reach",
		"192.168.1.1":     "",
		"127.0.0.1":       "",
	} {
		err := g.CheckAddr(netip.MustParseAddr(addr))
		if (want == "" && err != nil) || (want != "" && (err == nil || err.Error() != want)) {
			t.Errorf("%s: %v, want %q", addr, err, want)
		}
	}
	u, _ := url.Parse("http://metadata.google.internal/")
	if err := (&Guard{Allow: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}}).CheckURL(context.Background(), u); err == nil {
		t.Error("a metadata service's name passed an allow list")
	}
	for _, bad := range []string{"10.0.0.0/33", "ten", "fe80::1%eth0", "10.0.0.0/8/8"} {
		if _, err := ParsePrefixes([]string{bad}); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
