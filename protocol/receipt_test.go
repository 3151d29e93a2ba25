package protocol_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// receiptKey is the fixed key the receipt tests sign with.
var receiptKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

// signParts signs header and payload, as written, into a compact JWS.
func signParts(header, payload []byte) string {
	h, p := base64.RawURLEncoding.EncodeToString(header), base64.RawURLEncoding.EncodeToString(payload)
	sig := ed25519.Sign(receiptKey, []byte(h+"."+p))
	return h + "." + p + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestAReceiptWithDataAfterItsPayloadDoesNotVerify checks that a
// receipt's parts are one JSON object each, signed or not: a payload
// with a second object after the first is refused, as the clients in
// other languages refuse it.
func TestAReceiptWithDataAfterItsPayloadDoesNotVerify(t *testing.T) {
	t.Parallel()
	keys := map[string]ed25519.PublicKey{"k1": receiptKey.Public().(ed25519.PublicKey)}
	header := []byte(`{"alg":"EdDSA","kid":"k1","typ":"interlock-receipt+jws"}`)
	payload := []byte(`{"v":1,"flow":"gate","run":"call-1","kind":"","decision":"allowed","at":"2026-01-01T00:00:00Z","expires":"2999-01-01T00:00:00Z"}`)
	if _, err := protocol.VerifyReceipt(keys, signParts(header, payload), time.Now()); err != nil {
		t.Fatalf("the plain receipt: %v", err)
	}
	for name, jws := range map[string]string{
		"a second payload": signParts(header, append(append([]byte{}, payload...), `{"v":1}`...)),
		"a second header":  signParts(append(append([]byte{}, header...), `{}`...), payload),
	} {
		if _, err := protocol.VerifyReceipt(keys, jws, time.Now()); !errors.Is(err, protocol.ErrReceiptInvalid) {
			t.Errorf("%s: %v, want ErrReceiptInvalid", name, err)
		}
	}
}

// FuzzVerifyReceipt signs any header and payload with a trusted key and
// verifies them: a receipt's parser never panics, and what it accepts is
// a receipt of version 1, not expired, whose parts are JSON.
func FuzzVerifyReceipt(f *testing.F) {
	f.Add([]byte(`{"alg":"EdDSA","kid":"k1","typ":"interlock-receipt+jws"}`),
		[]byte(`{"v":1,"flow":"gate","run":"call-1","kind":"approval","decision":"approved","finalDigest":"ab","at":"2026-01-01T00:00:00Z","expires":"2999-01-01T00:00:00Z"}`), "")
	f.Add([]byte(`{"alg":"none"}`), []byte(`{}`), "x")
	f.Add([]byte(`{"alg":"EdDSA","kid":"k1","typ":"interlock-receipt+jws"}`), []byte(`{"v":1,"expires":"1999-01-01T00:00:00Z"}`), ".")
	keys := map[string]ed25519.PublicKey{"k1": receiptKey.Public().(ed25519.PublicKey)}
	f.Fuzz(func(t *testing.T, header, payload []byte, suffix string) {
		jws := signParts(header, payload) + suffix
		r, err := protocol.VerifyReceipt(keys, jws, time.Now())
		if err != nil {
			if !errors.Is(err, protocol.ErrReceiptInvalid) && !errors.Is(err, protocol.ErrReceiptExpired) {
				t.Fatalf("an error that is neither invalid nor expired: %v", err)
			}
			return
		}
		if r.V != 1 || !time.Now().Before(r.Expires) || !json.Valid(payload) || !json.Valid(header) || strings.TrimSpace(suffix) != "" {
			t.Fatalf("accepted %q.%q%q as %+v", header, payload, suffix, r)
		}
		_ = r.CheckDecided(protocol.Decided{CallID: r.Run, Decision: r.Decision, Args: json.RawMessage(payload)})
	})
}

// TestEveryRefusalCodeHasAnHTTPStatus checks that every refusal code is
// answered over HTTP with a status of its own kind (4xx, or 501 for what
// the deployment does not serve), the same on every surface.
func TestEveryRefusalCodeHasAnHTTPStatus(t *testing.T) {
	t.Parallel()
	for _, c := range protocol.Codes() {
		if s := c.HTTPStatus(); (s < 400 || s >= 500) && s != 501 {
			t.Errorf("%s is answered %d over HTTP; give it a status of its own in Code.HTTPStatus", c, s)
		}
	}
}
