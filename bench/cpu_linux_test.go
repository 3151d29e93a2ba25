package main

import (
	"crypto/sha256"
	"os"
	"testing"
	"time"
)

// TestProcessCPUOfReadsWhatGetrusageReads reads this process's CPU time
// from /proc/<pid>/stat, as the server child's is read, once it has used
// some, and checks it against getrusage's.
func TestProcessCPUOfReadsWhatGetrusageReads(t *testing.T) {
	sum := sha256.Sum256(nil)
	deadline := time.Now().Add(30 * time.Second)
	var fromStat time.Duration
	for fromStat < 50*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("/proc/self/stat still says %v of CPU after 30 s of hashing", fromStat)
		}
		for range 10000 {
			sum = sha256.Sum256(sum[:])
		}
		var ok bool
		if fromStat, ok = processCPUOf(os.Getpid()); !ok {
			t.Fatal("cannot read /proc/<pid>/stat")
		}
	}
	fromRusage, ok := processCPU()
	if !ok {
		t.Fatal("cannot read getrusage")
	}
	// /proc counts in 10 ms ticks, and rounds down.
	if fromStat > fromRusage+10*time.Millisecond || fromStat < fromRusage/2 {
		t.Errorf("/proc/<pid>/stat says %v of CPU, getrusage %v", fromStat, fromRusage)
	}
	if _, ok := processCPUOf(-1); ok {
		t.Error("processCPUOf(-1) read something")
	}
}
