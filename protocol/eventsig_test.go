package protocol_test

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

func TestAnEventSignatureVerifiesOnlyForItsSubjectBodyAndKey(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	otherPub, otherPriv, _ := ed25519.GenerateKey(nil)
	kid, otherKid := protocol.AuditKeyID(pub), protocol.AuditKeyID(otherPub)
	keys := map[string]ed25519.PublicKey{kid: pub}
	subject, body := "interlock.ev.refund.r-1.interrupted", []byte(`{"specversion":"1.0","id":"e1","data":{"args":{"amount":4800}}}`)
	sig := protocol.EventSignature(kid, priv, subject, body)
	if !protocol.VerifyEventSignature(keys, subject, body, sig) {
		t.Fatal("a signature does not verify")
	}
	kidOf, rest, _ := strings.Cut(sig, ":")
	for name, c := range map[string]struct {
		subject string
		body    []byte
		sig     string
	}{
		"another subject":       {"interlock.ev.refund.r-2.interrupted", body, sig},
		"another body":          {subject, []byte(strings.Replace(string(body), "4800", "48", 1)), sig},
		"an unknown key":        {subject, body, protocol.EventSignature(otherKid, otherPriv, subject, body)},
		"a kid it does not own": {subject, body, kid + ":" + strings.SplitN(protocol.EventSignature(otherKid, otherPriv, subject, body), ":", 2)[1]},
		"no kid":                {subject, body, rest},
		"a cut signature":       {subject, body, kidOf + ":" + rest[:len(rest)-4]},
		"not base64":            {subject, body, kidOf + ":" + strings.Repeat("!", len(rest))},
		"empty":                 {subject, body, ""},
	} {
		if protocol.VerifyEventSignature(keys, c.subject, c.body, c.sig) {
			t.Errorf("%s: verified", name)
		}
	}
}
