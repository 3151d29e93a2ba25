package links

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// DefaultCallbackTTL is how long a callback URL works when its request
// has no deadline.
const DefaultCallbackTTL = 7 * 24 * time.Hour

// CallbackPath is the path of callback URLs, before the link's text.
const CallbackPath = "/v1/callbacks/"

// DecidePath is the path of decision links, before the link's text.
const DecidePath = "/decide/"

// Callback is a minted callback URL.
type Callback struct {
	// URL is the callback URL: base, CallbackPath and the link's text.
	URL string `json:"url"`
	// ExpiresAt is when it stops working.
	ExpiresAt time.Time `json:"expiresAt"`
	// RequestID is the request it settles.
	RequestID string `json:"requestId"`
}

// MintCallback returns a callback URL under base (the deployment's
// public URL, such as https://interlock.example.com) that settles the
// request requestID of flow's run, once, as person. It expires with the
// request at expires, or DefaultCallbackTTL after now when the request
// has no deadline (expires is zero). It holds no resume token.
func (s *Signer) MintCallback(base, flow, run, requestID, person string, expires, now time.Time) (Callback, error) {
	if expires.IsZero() {
		expires = now.Add(DefaultCallbackTTL)
	}
	if !now.Before(expires) {
		return Callback{}, fmt.Errorf("links: the request expired at %s; a callback URL for it would never work", expires.UTC().Format(time.RFC3339))
	}
	text, err := s.Sign(Claims{Kind: KindCallback, Flow: flow, Run: run, RequestID: requestID, Person: person, Expires: ceilUnix(expires)})
	if err != nil {
		return Callback{}, err
	}
	u, err := JoinURL(base, CallbackPath, text)
	if err != nil {
		return Callback{}, err
	}
	return Callback{URL: u, ExpiresAt: time.Unix(ceilUnix(expires), 0).UTC(), RequestID: requestID}, nil
}

// ceilUnix is t in Unix seconds, rounded up: a link never ends before
// its request.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

// JoinURL returns base (an absolute http or https URL with no query)
// followed by path and the link's text.
func JoinURL(base, path, text string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", errors.New("links: the public URL must be an absolute http or https URL, such as https://interlock.example.com")
	}
	return strings.TrimRight(base, "/") + path + text, nil
}
