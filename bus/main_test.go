package bus_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that workers, publishers and servers leave no goroutine
// behind once stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
