//go:build !linux

package main

// currentRSS is not measured outside Linux.
func currentRSS() (uint64, bool) { return 0, false }

// maxRSS is not measured outside Linux, where ru_maxrss has other units.
func maxRSS() (uint64, bool) { return 0, false }

// processRSS is not measured outside Linux.
func processRSS(int) (rss, hwm uint64, ok bool) { return 0, 0, false }
