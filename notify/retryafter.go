package notify

import (
	"errors"
	"time"
)

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
