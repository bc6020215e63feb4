// Package webhook sends one webhook request the way Standard Webhooks
// (github.com/standard-webhooks/standard-webhooks) describes: a JSON POST
// signed with HMAC-SHA256 over "id.timestamp.body", the signature and its
// inputs in the webhook-id, webhook-timestamp and webhook-signature headers.
// It also decides where a webhook may lead (Guard) and how long to wait
// before trying again (Backoff). What to send and when is the server's
// (server/webhooks.go); this package knows nothing of chatd's data.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// SecretPrefix starts a Standard Webhooks symmetric secret; the rest is the
// HMAC key, base64-encoded.
const SecretPrefix = "whsec_"

// The headers of a signed request.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Key returns the HMAC key a secret holds: its base64 part, decoded.
func Key(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, errors.New("a webhook secret starts with " + SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, errors.New("a webhook secret is base64 after " + SecretPrefix)
	}
	if len(key) < 24 {
		return nil, errors.New("a webhook secret holds at least 24 bytes")
	}
	return key, nil
}

// Sign returns the webhook-signature header of a request: "v1," and the
// base64 HMAC-SHA256, keyed by the secret's key, of the id, the timestamp
// (Unix seconds) and the body joined by full stops.
func Sign(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := Key(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}
