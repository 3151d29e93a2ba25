package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// currentRSS returns the process's resident set now, in bytes, from
// /proc/self/statm.
func currentRSS() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * uint64(os.Getpagesize()), true
}

// maxRSS returns the process's peak resident set so far, in bytes, from
// getrusage(2): ru_maxrss is in kilobytes on Linux.
func maxRSS() (uint64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return uint64(ru.Maxrss) * 1024, true
}

// processRSS returns the resident set of process pid now and its peak so
// far, in bytes, from the VmRSS and VmHWM lines of /proc/<pid>/status.
func processRSS(pid int) (rss, hwm uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, false
	}
	var seen int
	for line := range bytes.Lines(b) {
		k, v, found := bytes.Cut(line, []byte(":"))
		if !found {
			continue
		}
		var dst *uint64
		switch string(k) {
		case "VmRSS":
			dst = &rss
		case "VmHWM":
			dst = &hwm
		default:
			continue
		}
		f := bytes.Fields(v) // "12345 kB"
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, 0, false
		}
		kb, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		*dst = kb * 1024
		seen++
	}
	return rss, hwm, seen == 2
}
