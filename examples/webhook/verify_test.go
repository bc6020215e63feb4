package main

import (
	"net/http"
	"testing"
	"time"
)

// The Standard Webhooks specification's published example: a receiver that
// accepts it, and refuses each altered copy, verifies as every other does.
func TestVerify(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"test": 2432232314}`)
	sentAt := time.Unix(1614265330, 0)
	signed := func(sig string) http.Header {
		h := http.Header{}
		h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
		h.Set("webhook-timestamp", "1614265330")
		h.Set("webhook-signature", sig)
		return h
	}
	good := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	for _, c := range []struct {
		name   string
		secret string
		h      http.Header
		body   string
		now    time.Time
		ok     bool
	}{
		{"as sent", secret, signed(good), string(body), sentAt, true},
		{"among other signatures", secret, signed("v1,bm90IGl0 " + good), string(body), sentAt.Add(time.Minute), true},
		{"another body", secret, signed(good), `{"test": 2432232315}`, sentAt, false},
		{"another secret", "whsec_" + "AAAA" + secret[10:], signed(good), string(body), sentAt, false},
		{"a later version's entry only", secret, signed("v2," + good[3:]), string(body), sentAt, false},
		{"no signature", secret, signed(""), string(body), sentAt, false},
		{"replayed an hour later", secret, signed(good), string(body), sentAt.Add(time.Hour), false},
		{"from the future", secret, signed(good), string(body), sentAt.Add(-time.Hour), false},
	} {
		if err := verify(c.secret, c.h, []byte(c.body), c.now); (err == nil) != c.ok {
			t.Errorf("%s: verify = %v, want ok %v", c.name, err, c.ok)
		}
	}
}
