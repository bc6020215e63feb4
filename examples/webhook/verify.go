package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// tolerance is how far a request's webhook-timestamp may be from now: a
// request captured and replayed later is refused.
const tolerance = 5 * time.Minute

var errUnsigned = errors.New("no valid webhook signature")

// verify checks that a request is chatd's, the Standard Webhooks way: the
// base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>", keyed by
// the secret after "whsec_" base64-decoded, is one of the "v1,<signature>"
// entries of webhook-signature. It reads the body exactly as it arrived,
// before anything parses it.
func verify(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return errors.New("the secret is not whsec_ followed by base64")
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sent, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil {
		return errUnsigned
	}
	if d := now.Sub(time.Unix(sent, 0)); d > tolerance || d < -tolerance {
		return errors.New("webhook-timestamp is too far from now")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := []byte(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	for _, entry := range strings.Fields(h.Get("webhook-signature")) {
		version, sig, _ := strings.Cut(entry, ",")
		if version == "v1" && hmac.Equal([]byte(sig), want) {
			return nil
		}
	}
	return errUnsigned
}
