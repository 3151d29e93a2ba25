package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that serve leaves no goroutine behind once stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
