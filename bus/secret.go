package bus

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/interlockhq/interlock/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// secretKey is the key of the generated secret in the keys bucket.
const secretKey = "resume-token-secret"

// SecretSize is the size of a generated resume-token secret.
const SecretSize = 32

// StoredSecret returns the resume-token secret kept in the keys bucket,
// generating it on first use, so that every worker of a deployment shares
// it without configuration. Anyone who can read that bucket can mint resume
// tokens: production deployments should configure a secret instead.
func StoredSecret(ctx context.Context, js jetstream.JetStream, n wire.Names, replicas int) ([]byte, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: n.KeysBucket(), Description: "Interlock generated secrets", History: 1,
		Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("bus: creating bucket %s: %w", n.KeysBucket(), err)
	}
	secret := make([]byte, SecretSize)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("bus: generating secret: %w", err)
	}
	if _, err := kv.Create(ctx, secretKey, secret); err == nil {
		return secret, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("bus: storing secret in %s: %w", n.KeysBucket(), err)
	}
	e, err := kv.Get(ctx, secretKey)
	if err != nil {
		return nil, fmt.Errorf("bus: reading secret from %s: %w", n.KeysBucket(), err)
	}
	if len(e.Value()) < SecretSize {
		return nil, fmt.Errorf("bus: secret in %s is %d bytes, want %d", n.KeysBucket(), len(e.Value()), SecretSize)
	}
	return e.Value(), nil
}

// minSecretDistinct is the fewest distinct bytes a parsed secret of 32
// bytes may have: 32 random bytes have about 30 (fewer than 16 happens
// with a probability far below 1e-20).
const minSecretDistinct = 16

// errSecretHowTo ends every error of ParseSecret.
const errSecretHowTo = "use 32 or more random bytes written in hex or base64, made for example with: openssl rand -hex 32"

// ParseSecret checks a configured resume-token secret (the text of
// --secret-file or INTERLOCK_SECRET, surrounding white space ignored) and
// returns the key: the text as written, so that tokens made under a
// secret configured before this check stay valid.
//
// The text must be hex or base64 (standard or URL alphabet, with or
// without padding) of at least SecretSize bytes, and look random: the
// placeholder of deploy/k8s/interlock.yaml, repeated characters, a short
// repeated pattern or a counting sequence are refused with an error that
// says how to make a good one.
func ParseSecret(text string) ([]byte, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, fmt.Errorf("bus: the resume-token secret is empty; %s", errSecretHowTo)
	}
	if strings.Contains(strings.ToLower(text), "replace") {
		return nil, fmt.Errorf("bus: the resume-token secret is still the placeholder; %s", errSecretHowTo)
	}
	raw, ok := decodeSecret(text)
	if !ok {
		return nil, fmt.Errorf("bus: the resume-token secret is neither hex nor base64; %s", errSecretHowTo)
	}
	if len(raw) < SecretSize {
		return nil, fmt.Errorf("bus: the resume-token secret holds %d bytes, fewer than %d; %s", len(raw), SecretSize, errSecretHowTo)
	}
	if p := period(raw); p <= len(raw)/2 {
		return nil, fmt.Errorf("bus: the resume-token secret repeats a pattern of %d bytes, so it is not random; %s", p, errSecretHowTo)
	}
	deltas := make([]byte, len(raw)-1)
	for i := range deltas {
		deltas[i] = raw[i+1] - raw[i]
	}
	if p := period(deltas); p <= 4 {
		return nil, fmt.Errorf("bus: the resume-token secret is a counting sequence, so it is not random; %s", errSecretHowTo)
	}
	if d := distinct(raw); d < minSecretDistinct {
		return nil, fmt.Errorf("bus: the resume-token secret has only %d distinct byte values, so it is not random; %s", d, errSecretHowTo)
	}
	return []byte(text), nil
}

// decodeSecret decodes text as hex, else as base64 in any of its forms.
func decodeSecret(text string) ([]byte, bool) {
	if b, err := hex.DecodeString(text); err == nil {
		return b, true
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(text); err == nil {
			return b, true
		}
	}
	return nil, false
}

// period is the length of the shortest pattern b repeats (len(b) if none).
func period(b []byte) int {
	for p := 1; p < len(b); p++ {
		if bytes.Equal(b[p:], b[:len(b)-p]) {
			return p
		}
	}
	return len(b)
}

// distinct counts the distinct byte values of b.
func distinct(b []byte) int {
	var seen [256]bool
	n := 0
	for _, c := range b {
		if !seen[c] {
			seen[c] = true
			n++
		}
	}
	return n
}
