package main

import "time"

// cpuMeter measures this process's CPU time (user and system) over a
// stretch of runs. With the server in a child process that is the
// worker's (Interlock's service or the floor's pool) and the clients' CPU
// alone; with the server in this process it includes the server's.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

// startCPU starts measuring.
func startCPU() cpuMeter {
	c, ok := processCPU()
	return cpuMeter{start: c, ok: ok}
}

// msPerRun returns the CPU time used since startCPU divided by runs, in
// milliseconds, or 0 if it cannot be measured.
func (m cpuMeter) msPerRun(runs int) float64 {
	end, ok := processCPU()
	if !m.ok || !ok || runs <= 0 {
		return 0
	}
	return float64(end-m.start) / float64(time.Millisecond) / float64(runs)
}
