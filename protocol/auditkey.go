package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	hexenc "encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// AuditKeysKey is the key, in the live-configuration bucket
// (<prefix>_config), of the audit keys the workers publish: a JSON list of
// [AuditKey], oldest first.
const AuditKeysKey = "audit.keys"

// AuditKey is a public key a deployment signs its audit records with, as
// its workers publish it under [AuditKeysKey]. A worker adds its key when
// it starts, if the list lacks it, and never removes one, so that records
// signed before a change of the deployment's secret still verify.
type AuditKey struct {
	// Kid is the key's id, the kid of the records it signs: AuditKeyID
	// of the key.
	Kid string `json:"kid"`
	// PublicKey is the Ed25519 public key, 32 bytes in standard base64.
	PublicKey string `json:"publicKey"`
	// Since is when a worker first published the key.
	Since time.Time `json:"since"`
}

// AuditKeyID returns the id of an audit public key: the first 16 hex
// digits of the SHA-256 of its 32 bytes.
func AuditKeyID(pub []byte) string {
	sum := sha256.Sum256(pub)
	return hexenc.EncodeToString(sum[:8])
}

// ParseAuditKey reads an audit public key given as text: 32 bytes in
// standard base64 (as `interlock audit key` prints it), optionally
// prefixed with its kid and a colon. Since is left zero.
func ParseAuditKey(text string) (AuditKey, error) {
	text = strings.TrimSpace(text)
	kid, b64, named := strings.Cut(text, ":")
	if !named {
		b64 = kid
	}
	pub, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return AuditKey{}, fmt.Errorf("protocol: audit key %q is not an Ed25519 public key: give its 32 bytes in standard base64, as `interlock audit key` prints it", text)
	}
	k := AuditKey{Kid: AuditKeyID(pub), PublicKey: b64}
	if named && kid != k.Kid {
		return AuditKey{}, fmt.Errorf("protocol: audit key %q names kid %s, but the key's id is %s", text, kid, k.Kid)
	}
	return k, nil
}

// Key returns the Ed25519 public key, checking that it is 32 bytes of
// standard base64 and that Kid is its id.
func (k AuditKey) Key() (ed25519.PublicKey, error) {
	pub, err := base64.StdEncoding.DecodeString(k.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("protocol: audit key %s: publicKey %q is not 32 bytes of standard base64", k.Kid, k.PublicKey)
	}
	if id := AuditKeyID(pub); id != k.Kid {
		return nil, fmt.Errorf("protocol: audit key %s: its public key's id is %s", k.Kid, id)
	}
	return pub, nil
}

// DecodeAuditKeys decodes the audit keys the workers publish (the value
// under [AuditKeysKey]), checking that each key is an Ed25519 public key
// and that its kid is its id. Unknown fields are refused.
func DecodeAuditKeys(data []byte) ([]AuditKey, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var keys []AuditKey
	if err := dec.Decode(&keys); err != nil {
		return nil, fmt.Errorf("protocol: audit keys are not a JSON list of {kid, publicKey, since}: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("protocol: audit keys are followed by more JSON")
	}
	if keys == nil {
		return nil, fmt.Errorf("protocol: audit keys are null, not a list")
	}
	for _, k := range keys {
		if _, err := k.Key(); err != nil {
			return nil, err
		}
	}
	return keys, nil
}
