package engine

import (
	"strings"
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

// TestAuditKeyIsDerivedFromTheSecret pins the derivation (the key was
// checked against an independent HKDF-SHA256 and Ed25519): a change of it
// would orphan every key the workers published. The same secret gives the
// same key on every worker; another secret, another key.
func TestAuditKeyIsDerivedFromTheSecret(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	k, err := AuditKeyOf(secret)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := k.String(), "+ciERRfmmK/h20+EfwNsSLuRxlpds8KafT9bSZSDeic="; got != want {
		t.Errorf("public key of the fixed secret is %s, want %s", got, want)
	}
	if k.ID != protocol.AuditKeyID(k.Key) || len(k.ID) != 16 {
		t.Errorf("key id %q is not the key's fingerprint %q", k.ID, protocol.AuditKeyID(k.Key))
	}
	again, _ := AuditKeyOf(append([]byte(nil), secret...))
	other, _ := AuditKeyOf([]byte("fedcba9876543210fedcba9876543210"))
	if again.ID != k.ID || other.ID == k.ID {
		t.Errorf("same secret: %s and %s; another secret: %s", k.ID, again.ID, other.ID)
	}
	if _, err := AuditKeyOf(secret[:31]); err == nil || !strings.Contains(err.Error(), "at least 32 random bytes") {
		t.Errorf("a 31-byte secret: %v", err)
	}
}
