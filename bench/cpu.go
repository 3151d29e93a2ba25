package main

import "time"

// cpuMeter measures CPU time (user and system) over a stretch of runs:
// this process's and, when the server runs in a child process, the
// child's. With the server in a child process this process's CPU is the
// worker's (Interlock's service or the floor's pool) and the clients';
// with the server in this process it includes the server's.
type cpuMeter struct {
	srv           *natsServer
	self, server  time.Duration
	selfOK, srvOK bool
}

// startCPU starts measuring.
func startCPU(srv *natsServer) cpuMeter {
	m := cpuMeter{srv: srv}
	m.self, m.selfOK = processCPU()
	m.server, m.srvOK = srv.cpu()
	return m
}

// perRun returns the CPU time this process and the server's child process
// used since startCPU, each divided by runs, in milliseconds; 0 when it
// cannot be measured (the child's when the server runs in this process).
func (m cpuMeter) perRun(runs int) (self, server float64) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(runs) }
	if runs <= 0 {
		return 0, 0
	}
	if end, ok := processCPU(); ok && m.selfOK {
		self = ms(end - m.self)
	}
	if end, ok := m.srv.cpu(); ok && m.srvOK {
		server = ms(end - m.server)
	}
	return self, server
}

// cpu returns the CPU time the server's child process has used so far;
// ok is false when the server runs in this process or it cannot be read.
func (s *natsServer) cpu() (time.Duration, bool) {
	if s == nil || s.pid == 0 {
		return 0, false
	}
	return processCPUOf(s.pid)
}
