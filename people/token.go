package people

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// HashToken returns the hex SHA-256 of a bearer token, as a directory
// holds it (tokenSha256).
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// NewToken returns a fresh bearer token: 32 random bytes, base64url
// without padding.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails: crypto/rand panics rather than return an error
	return base64.RawURLEncoding.EncodeToString(b)
}
