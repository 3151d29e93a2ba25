//go:build !linux

package main

import "time"

// processCPU is not measured outside Linux.
func processCPU() (time.Duration, bool) { return 0, false }

// processCPUOf is not measured outside Linux.
func processCPUOf(int) (time.Duration, bool) { return 0, false }
