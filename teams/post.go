package teams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/notify"
)

// Limits of one post.
const (
	// maxAnswer is how much of a receiver's answer is read; errorBytes
	// how much of it an error quotes.
	maxAnswer  = 64 << 10
	errorBytes = 200
)

// channel is a role's Teams channel: its Workflows URL, a credential
// (the query's sig= signs it), and how errors and logs name it.
type channel struct {
	role string
	url  string
}

// String names the channel without its credential: the role and the
// URL's host.
func (c channel) String() string {
	return fmt.Sprintf("the Teams channel of role %s (%s)", c.role, redact(c.url))
}

// redact is a Workflows URL without what makes it a credential: its
// scheme and host only.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "an unreadable URL"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// checkURL refuses a Workflows URL that is not https: the card and the
// URL's signature would cross the network in clear.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil, u.Host == "":
		return errors.New("its Workflows URL does not parse; copy it again from the workflow's trigger")
	case u.Scheme != "https":
		return fmt.Errorf("its Workflows URL is %s://, not https://; copy the https:// URL from the workflow's trigger", u.Scheme)
	case u.User != nil:
		return errors.New("its Workflows URL carries a user name; copy the URL from the workflow's trigger")
	}
	return nil
}

// post sends m to ch. It returns nil once the receiver accepted it (a
// 2xx); an error wrapped by notify.Permanent when another attempt will
// not mend it (a 4xx other than 408 and 429, a redirect, a bad URL, an
// address the outbound policy refuses); an
// error wrapped by notify.RetryAfter when the receiver said when to come
// back; any other error to try again. No error holds the URL.
func (t *Teams) post(ctx context.Context, ch channel, m message) error {
	if err := checkURL(ch.url); err != nil {
		return notify.Permanent(fmt.Errorf("%s: %w", ch, err))
	}
	body, err := json.Marshal(m)
	if err != nil {
		return notify.Permanent(fmt.Errorf("encoding the card for %s: %w", ch, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ch.url, bytes.NewReader(body))
	if err != nil {
		return notify.Permanent(fmt.Errorf("%s: its Workflows URL does not make a request", ch))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := t.http.Do(req)
	if err != nil {
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			return notify.Permanent(fmt.Errorf("posting to %s: %s", ch, scrub(refused.Error(), ch.url)))
		}
		return fmt.Errorf("posting to %s: %s", ch, scrub(transportError(err), ch.url))
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusTooManyRequests, code == http.StatusRequestTimeout, code >= 500:
		err := fmt.Errorf("posting to %s: %s", ch, status(resp, answer, ch.url))
		return notify.RetryAfter(err, notify.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()))
	case code >= 300 && code < 400:
		return notify.Permanent(fmt.Errorf("posting to %s: %s: a Workflows URL answers 202, not a redirect; copy the URL from the workflow's trigger again", ch, status(resp, answer, ch.url)))
	default:
		return notify.Permanent(fmt.Errorf("posting to %s: %s; check that the workflow still exists and is turned on, and that its URL in the directory is whole", ch, status(resp, answer, ch.url)))
	}
}

// status is a receiver's answer for an error: the status and the first
// bytes of the body.
func status(resp *http.Response, answer []byte, rawURL string) string {
	s := resp.Status
	if b := firstBytes(answer, errorBytes); b != "" {
		s += ": " + strconv.Quote(b)
	}
	return scrub(s, rawURL)
}

// transportError is what went wrong with a request, without the URL
// that *url.Error adds.
func transportError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// scrub takes a URL's query, path and whole text out of s, should a
// receiver or a library have quoted them.
func scrub(s, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return strings.ReplaceAll(s, rawURL, "[redacted]")
	}
	for _, secret := range []string{rawURL, u.RawQuery, u.Query().Get("sig"), u.EscapedPath()} {
		if len(secret) > 1 {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}
