package engine

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/interlockhq/interlock/protocol"
)

// AuditKeyInfo is the HKDF info string the audit signing key is derived
// with: the key's seed is HKDF-SHA256 of the deployment's resume-token
// secret, with no salt and this info, 32 bytes long. Every worker of a
// deployment shares the secret, so every one signs with the same key, and
// no other secret is stored.
const AuditKeyInfo = "interlock/audit-signing-key/v1"

// AuditPublicKey is the public half of a deployment's audit signing key:
// what a verifier needs to check the records' signatures.
type AuditPublicKey struct {
	// ID is the key's id, the "kid" of the records it signs: see
	// [protocol.AuditKeyID].
	ID string
	// Key is the Ed25519 public key.
	Key ed25519.PublicKey
}

// String returns the public key in standard base64, as the workers
// publish it and as `interlock audit verify --key` takes it.
func (k AuditPublicKey) String() string { return base64.StdEncoding.EncodeToString(k.Key) }

// auditSigner signs audit records with a deployment's key.
type auditSigner struct {
	priv ed25519.PrivateKey
	pub  AuditPublicKey
}

// newAuditSigner derives the audit signing key from the resume-token
// secret (see [AuditKeyInfo]).
func newAuditSigner(secret []byte) (*auditSigner, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("engine: the secret is %d bytes; the audit signing key needs a secret of at least 32 random bytes", len(secret))
	}
	seed, err := hkdf.Key(sha256.New, secret, nil, AuditKeyInfo, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("engine: deriving the audit signing key: %w", err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	return &auditSigner{priv: priv, pub: AuditPublicKey{ID: protocol.AuditKeyID(pub), Key: pub}}, nil
}

// AuditKeyOf returns the public audit key of a deployment whose
// resume-token secret is secret: the key its workers sign audit records
// with. The secret must be at least 32 bytes.
func AuditKeyOf(secret []byte) (AuditPublicKey, error) {
	s, err := newAuditSigner(secret)
	if err != nil {
		return AuditPublicKey{}, err
	}
	return s.pub, nil
}

// seal completes an audit record: it names the key (Kid), computes the
// record's hash, which covers Kid, and signs the hash. The signature
// (Sig) is Ed25519 over the 32 bytes of the SHA-256 digest whose hex is
// Hash, in standard base64; it is not part of the hash.
func (s *auditSigner) seal(rec *protocol.AuditRecord) error {
	rec.Kid, rec.Sig = s.pub.ID, ""
	h, err := protocol.AuditHash(rec)
	if err != nil {
		return err
	}
	digest, err := hex.DecodeString(h)
	if err != nil {
		return fmt.Errorf("engine: audit hash %q is not hex: %w", h, err)
	}
	rec.Hash = h
	rec.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, digest))
	return nil
}

// EventSigner signs the events that settle a command (see
// [protocol.SignedKind] and [protocol.HeaderEventSignature]) with the
// deployment's audit key, so that a client believes them before the
// events stream has stored them.
type EventSigner struct {
	s *auditSigner
}

// NewEventSigner returns the event signer of a deployment whose
// resume-token secret is secret (at least 32 bytes): it signs with the
// key [AuditKeyOf] returns.
func NewEventSigner(secret []byte) (*EventSigner, error) {
	s, err := newAuditSigner(secret)
	if err != nil {
		return nil, err
	}
	return &EventSigner{s: s}, nil
}

// Sign returns the value of [protocol.HeaderEventSignature] for an event
// published on subject with body.
func (e *EventSigner) Sign(subject string, body []byte) string {
	return protocol.EventSignature(e.s.pub.ID, e.s.priv, subject, body)
}
