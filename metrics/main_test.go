package metrics_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the endpoint and the pending index's watcher leave
// no goroutine behind once stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
