package notify

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter bounds the wait a receiver may ask for with Retry-After.
const MaxRetryAfter = time.Hour

// retryAfter carries the delay a receiver asked for before the next
// attempt.
type retryAfter struct {
	err   error
	after time.Duration
}

func (r retryAfter) Error() string { return r.err.Error() }
func (r retryAfter) Unwrap() error { return r.err }

// RetryAfter wraps err so that the next attempt waits at least after
// (and at least Config.FirstRetry) instead of the back-off: a receiver
// that answered 429 or 503 with a Retry-After header. The event is still
// dead-lettered when the wait would take it past Config.RetryFor. A
// zero or negative after leaves the back-off as it is.
func RetryAfter(err error, after time.Duration) error {
	if err == nil || after <= 0 {
		return err
	}
	return retryAfter{err: err, after: after}
}

// RetryAfterOf returns the delay err asks for with [RetryAfter], or 0.
func RetryAfterOf(err error) time.Duration {
	var r retryAfter
	if errors.As(err, &r) {
		return r.after
	}
	return 0
}

// ParseRetryAfter reads a Retry-After header (RFC 9110: seconds, or an
// HTTP date) at now: the wait it asks for, at most [MaxRetryAfter]; 0
// when there is none or it does not parse.
func ParseRetryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil {
		return min(time.Duration(max(s, 0))*time.Second, MaxRetryAfter)
	}
	if at, err := http.ParseTime(h); err == nil {
		return min(max(at.Sub(now), 0), MaxRetryAfter)
	}
	return 0
}
