package main

import "time"

// cpuMeter measures CPU time (user and system) over a stretch of runs:
// this process's, the server's child processes' when it runs in them
// (summed over the nodes of a cluster), and the worker processes' when
// the workers run in child processes (summed). With the server in a child
// process this process's CPU is the worker's (Interlock's service or the
// floor's pool) and the clients', the clients' alone with worker
// processes; with the server in this process it includes the server's.
type cpuMeter struct {
	srv                   *natsServer
	workerPIDs            []int
	self, server, workers time.Duration
	selfOK, srvOK, wkrsOK bool
}

// cpuPerRun is CPU time per run, in milliseconds.
type cpuPerRun struct {
	self, server, workers float64
}

// startCPU starts measuring, the worker processes workerPIDs included.
func startCPU(srv *natsServer, workerPIDs []int) cpuMeter {
	m := cpuMeter{srv: srv, workerPIDs: workerPIDs}
	m.self, m.selfOK = processCPU()
	m.server, m.srvOK = srv.cpu()
	m.workers, m.wkrsOK = processesCPU(workerPIDs)
	return m
}

// perRun returns the CPU time this process, the server's child processes
// and the worker processes used since startCPU, each divided by runs, in
// milliseconds; 0 when it cannot be measured (the server's when it runs
// in this process, the workers' when they do).
func (m cpuMeter) perRun(runs int) cpuPerRun {
	var c cpuPerRun
	if runs <= 0 {
		return c
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(runs) }
	if end, ok := processCPU(); ok && m.selfOK {
		c.self = ms(end - m.self)
	}
	if end, ok := m.srv.cpu(); ok && m.srvOK {
		c.server = ms(end - m.server)
	}
	if end, ok := processesCPU(m.workerPIDs); ok && m.wkrsOK {
		c.workers = ms(end - m.workers)
	}
	return c
}

// cpu returns the CPU time the server's child processes have used so far,
// summed over its nodes; ok is false when the server runs in this process
// or it cannot be read.
func (s *natsServer) cpu() (time.Duration, bool) {
	if s == nil {
		return 0, false
	}
	return processesCPU(s.pids)
}

// processesCPU sums the CPU time pids have used so far; ok is false if
// there are none or one cannot be read.
func processesCPU(pids []int) (time.Duration, bool) {
	var sum time.Duration
	for _, pid := range pids {
		d, ok := processCPUOf(pid)
		if !ok {
			return 0, false
		}
		sum += d
	}
	return sum, len(pids) > 0
}
