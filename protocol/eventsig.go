package protocol

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// HeaderEventSignature is the header in which a worker signs an event
// that settles a command (see [SignedKind]) with the deployment's audit
// key: "<kid>:<signature>", the signature being Ed25519 over
// [EventSignatureDigest] of the subject the event is published on and its
// body, in standard base64. A client that trusts the deployment's audit
// keys believes a live event so signed at once, before the events stream
// has stored it: nobody without the key can make one, nor move one to
// another subject.
const HeaderEventSignature = "Interlock-Signature"

// eventSignatureDomain keeps an event's signature from being taken for
// any other the key makes (an audit record's signs a bare SHA-256).
const eventSignatureDomain = "interlock-event/v1\x00"

// SignedKind reports whether events of kind are signed: those that settle
// a command, the outcomes a client waits for.
func SignedKind(kind string) bool {
	switch kind {
	case EventInterrupted, EventCompleted, EventFailed, EventCancelled, EventExpired, EventRefused, EventAssigned, EventConsumed:
		return true
	}
	return false
}

// EventSignatureDigest is what an event's signature covers: the SHA-256
// of a domain string, the subject and the body (a structured CloudEvent:
// its attributes and data), each ended by a zero byte.
func EventSignatureDigest(subject string, body []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(eventSignatureDomain))
	h.Write([]byte(subject))
	h.Write([]byte{0})
	h.Write(body)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// EventSignature is the value of [HeaderEventSignature] for an event
// published on subject with body, signed with priv, whose public key has
// id kid.
func EventSignature(kid string, priv ed25519.PrivateKey, subject string, body []byte) string {
	d := EventSignatureDigest(subject, body)
	return kid + ":" + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, d[:]))
}

// VerifyEventSignature reports whether sig, a value of
// [HeaderEventSignature], signs the event published on subject with body
// by one of keys (by kid).
func VerifyEventSignature(keys map[string]ed25519.PublicKey, subject string, body []byte, sig string) bool {
	kid, b64, ok := strings.Cut(sig, ":")
	pub := keys[kid]
	if !ok || len(pub) != ed25519.PublicKeySize || len(b64) != base64.StdEncoding.EncodedLen(ed25519.SignatureSize) {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != ed25519.SignatureSize {
		return false
	}
	d := EventSignatureDigest(subject, body)
	return ed25519.Verify(pub, d[:], raw)
}
