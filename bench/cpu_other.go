//go:build !unix

package main

import "time"

// processCPU is not measured outside Unix.
func processCPU() (time.Duration, bool) { return 0, false }
