package engine

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"strings"
)

// token is the resume token of an interrupt: an HMAC of its identity under
// the deployment's secret, so it is never stored. A new request id (a
// re-ask, a reannounce) makes a new token and retires the previous one.
func (r *Runner) token(flow, run, requestID string) string {
	m := hmac.New(sha256.New, r.cfg.Secret)
	m.Write([]byte("interlock/resume/v1\x00" + flow + "\x00" + run + "\x00" + requestID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newRequestID returns a fresh, unguessable request id.
func newRequestID() string { return "rq_" + randomID(16) }

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(b32.EncodeToString(b))
}

// deriveRunID names a run started without one, from its event, so that a
// redelivered start names the same run.
func deriveRunID(source, eventID string) string {
	if eventID == "" {
		return "r-" + randomID(10)
	}
	sum := sha256.Sum256([]byte(source + "\x00" + eventID))
	return "r-" + strings.ToLower(b32.EncodeToString(sum[:10]))
}

func appendApplied(applied []string, key string) []string {
	if key == "" {
		return applied
	}
	applied = append(applied, key)
	if len(applied) > maxApplied {
		applied = applied[len(applied)-maxApplied:]
	}
	return applied
}

func isConflict(err error) bool {
	var c *ConflictError
	return errors.As(err, &c) || errors.Is(err, ErrExists)
}

// inboundSize is the size of what a command's message brings besides its
// data: its event id, source and traceparent, which the checkpoint and the
// audit records of its transition keep.
func inboundSize(in Inbound) int {
	return len(in.EventID) + len(in.Source) + len(in.Traceparent)
}
