// Package links makes and checks Interlock's signed links: capability
// URLs that let one person (a decision link in a mail) or one third-party
// system (a callback URL) settle one waiting request, once, until it
// expires. A link holds no resume token: it names the flow, the run, the
// request and who it speaks for, an expiry and a random id, and is signed
// with a key derived from the deployment's secret, so that any worker can
// check it and nobody can forge or alter one.
package links

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kinds of link.
const (
	// KindDecide is a decision link mailed to a person: opening it shows
	// the proposal, and the decision is a POST of the page's form.
	KindDecide = "decide"
	// KindCallback is a callback URL (a waitpoint): one POST of a resume
	// body settles the request.
	KindCallback = "callback"
)

// Errors of [Signer.Check].
var (
	// ErrForged: the link was not made by this deployment, or was
	// altered.
	ErrForged = errors.New("links: the link is not one this deployment signed, or it was altered")
	// ErrExpired: the link's time is over.
	ErrExpired = errors.New("links: the link has expired")
)

// Claims are what a link grants.
type Claims struct {
	// Kind is KindDecide or KindCallback.
	Kind string `json:"k"`
	// ID is the link's own random id: the key of its single use.
	ID string `json:"i"`
	// Flow, Run and RequestID name the waiting request the link settles.
	Flow      string `json:"f"`
	Run       string `json:"r"`
	RequestID string `json:"q"`
	// Person is who the link speaks for: the directory's name of the
	// person a decision link was mailed to, or of the person (or system)
	// a callback URL was issued for. The decision is audited as them,
	// with the roles the directory gives them when it is used.
	Person string `json:"p"`
	// Expires is when the link stops working (Unix seconds).
	Expires int64 `json:"e"`
}

// ExpiresAt is Expires as a time.
func (c Claims) ExpiresAt() time.Time { return time.Unix(c.Expires, 0) }

// Signer signs and checks links with one key.
type Signer struct {
	key []byte
}

// keyInfo separates the links' key from every other key derived from the
// deployment's secret.
const keyInfo = "interlock links v1"

// NewSigner returns a signer keyed from the deployment's secret (at least
// 32 bytes), by HMAC-SHA256 with a label of its own, so that a link's
// signature never serves as a resume token or an audit signature.
func NewSigner(secret []byte) (*Signer, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("links: the secret has %d bytes; it needs at least 32", len(secret))
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(keyInfo))
	return &Signer{key: m.Sum(nil)}, nil
}

// NewID returns a fresh random link id.
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Sign returns the link's opaque text (base64url, no padding, safe in a
// URL path), giving c an ID when it has none.
func (s *Signer) Sign(c Claims) (string, error) {
	if c.Kind != KindDecide && c.Kind != KindCallback {
		return "", fmt.Errorf("links: kind %q: use %q or %q", c.Kind, KindDecide, KindCallback)
	}
	if c.Flow == "" || c.Run == "" || c.RequestID == "" || c.Person == "" || c.Expires == 0 {
		return "", errors.New("links: a link needs a flow, a run, a request id, a person and an expiry")
	}
	if c.ID == "" {
		c.ID = NewID()
	}
	body, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("links: %w", err)
	}
	enc := base64.RawURLEncoding.EncodeToString(body)
	return enc + "." + base64.RawURLEncoding.EncodeToString(s.mac(enc)), nil
}

func (s *Signer) mac(enc string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(enc))
	return m.Sum(nil)
}

// Check returns the claims of the link text, if this signer made it and
// it has not expired at now. A link of another kind than kind is forged
// for this use.
func (s *Signer) Check(text, kind string, now time.Time) (Claims, error) {
	enc, sig, ok := strings.Cut(text, ".")
	if !ok || len(text) > 4096 {
		return Claims{}, ErrForged
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(enc)) {
		return Claims{}, ErrForged
	}
	body, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return Claims{}, ErrForged
	}
	var c Claims
	if err := json.Unmarshal(body, &c); err != nil || c.Kind != kind || c.ID == "" {
		return Claims{}, ErrForged
	}
	if !now.Before(c.ExpiresAt()) {
		return c, ErrExpired
	}
	return c, nil
}

// FormToken returns the token a page's form carries to act on the link
// with id (its CSRF token): an HMAC of the id under the links' key, so
// that every process of the deployment checks it with no state.
func (s *Signer) FormToken(id string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("form\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// CheckFormToken reports whether token is the form token of the link
// with id, in constant time.
func (s *Signer) CheckFormToken(id, token string) bool {
	return hmac.Equal([]byte(token), []byte(s.FormToken(id)))
}
