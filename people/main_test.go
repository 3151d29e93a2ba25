package people_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that a stopped watch leaves no goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
