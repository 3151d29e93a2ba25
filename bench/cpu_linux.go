package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on
// every architecture Linux runs Go on.
const userHZ = 100

// processCPU returns the CPU time this process has used so far, user and
// system, from getrusage(2), and false if it cannot be read.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// processCPUOf returns the CPU time process pid has used so far, user and
// system, from the utime and stime fields of /proc/<pid>/stat (in units
// of 10 ms).
func processCPUOf(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after it start with the state, field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseUint(string(f[11]), 10, 64) // field 14
	stime, err2 := strconv.ParseUint(string(f[12]), 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / userHZ, true
}
