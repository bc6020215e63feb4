package store

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Passwords are hashed with argon2id at the OWASP minimum (19 MiB, two
// passes, one lane): about 35 ms on one core. The parameters are stored in
// each hash (PHC form), so raising them later leaves old hashes verifiable.
// Hashing is deliberately slow, so it never runs inside a write
// transaction: the writer would stall every other write behind it.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16

	// MinPasswordLen and MaxPasswordLen bound a password, in characters.
	// Length is the only rule (no required classes of character): a long
	// passphrase beats a short mix, and the upper bound only keeps a
	// request from buying a long hash.
	MinPasswordLen = 12
	MaxPasswordLen = 256
)

// hashSlots bounds the hashes computed at once: each holds 19 MiB while it
// runs, so a burst of sign-ins costs bounded memory and waits its turn.
var hashSlots = make(chan struct{}, 4)

// checkPassword returns why a password is not acceptable, or "".
// CheckPassword refuses a password SetPassword would refuse, without
// hashing it, so that a command can check it before anything else.
func CheckPassword(pw string) error {
	if msg := checkPassword(pw); msg != "" {
		return Problems{"/password": {msg}}.Err(CodeValidation)
	}
	return nil
}

func checkPassword(pw string) string {
	if !utf8.ValidString(pw) {
		return "must be valid UTF-8"
	}
	if n := utf8.RuneCountInString(pw); n < MinPasswordLen || n > MaxPasswordLen {
		return fmt.Sprintf("must be %d to %d characters long", MinPasswordLen, MaxPasswordLen)
	}
	return ""
}

var b64 = base64.RawStdEncoding

// hashPassword returns the PHC-encoded argon2id hash of pw with a fresh
// salt.
func hashPassword(ctx context.Context, pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key, err := argonKey(ctx, pw, salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

func argonKey(ctx context.Context, pw string, salt []byte, t, m uint32, p uint8, n uint32) ([]byte, error) {
	select {
	case hashSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-hashSlots }()
	return argon2.IDKey([]byte(pw), salt, t, m, p, n), nil
}

// verifyPassword reports whether pw matches encoded, comparing in constant
// time. A hash it cannot read matches nothing.
func verifyPassword(ctx context.Context, encoded, pw string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return false, nil
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false, nil
	}
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	// Bounds keep a damaged row from costing gigabytes or minutes.
	if err1 != nil || err2 != nil || len(want) < 16 || len(want) > 64 || m < 8 || m > 1<<20 || t < 1 || t > 16 || p < 1 {
		return false, nil
	}
	got, err := argonKey(ctx, pw, salt, t, m, p, uint32(len(want)))
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// decoyHash is verified when a sign-in names no person with a password, so
// that such a sign-in takes as long as a wrong password and its timing
// tells nothing about which handles exist.
var decoyHash = sync.OnceValue(func() string {
	h, err := hashPassword(context.Background(), "decoy password, never accepted")
	if err != nil {
		panic("hash decoy password: " + err.Error())
	}
	return h
})
