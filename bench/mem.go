package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

const mb = 1 << 20

// Go memory metrics: heap objects plus heap unused is MemStats.HeapInuse;
// total is MemStats.Sys. runtime/metrics reads them without stopping the
// world, unlike runtime.ReadMemStats.
const (
	metricHeapObjects = "/memory/classes/heap/objects:bytes"
	metricHeapUnused  = "/memory/classes/heap/unused:bytes"
	metricTotal       = "/memory/classes/total:bytes"
)

// goMemory returns the Go heap in use and the memory the runtime got from
// the OS, in bytes.
func goMemory(s []metrics.Sample) (heapInuse, sys uint64) {
	s[0].Name, s[1].Name, s[2].Name = metricHeapObjects, metricHeapUnused, metricTotal
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64(), s[2].Value.Uint64()
}

// sampler records peak memory until stopped.
type sampler struct {
	srv     *natsServer
	workers []int
	quit    chan struct{}
	done    chan memPeak
}

// startSampler samples the Go heap in use, Go sys memory and the process's
// resident set every interval until stop, the resident set of srv's
// child processes if it has them, and that of the worker processes
// workers, summed.
func startSampler(every time.Duration, srv *natsServer, workers []int) *sampler {
	s := &sampler{srv: srv, workers: workers, quit: make(chan struct{}), done: make(chan memPeak, 1)}
	go s.loop(every)
	return s
}

func (s *sampler) loop(every time.Duration) {
	var (
		peak                                           memPeak
		heapMax, sysMax, rssMax, serverMax, workersMax uint64
		buf                                            = make([]metrics.Sample, 3)
	)
	sample := func() {
		h, sys := goMemory(buf)
		heapMax, sysMax = max(heapMax, h), max(sysMax, sys)
		if rss, ok := currentRSS(); ok {
			rssMax = max(rssMax, rss)
		}
		if rss, _, ok := s.srv.memory(); ok {
			serverMax = max(serverMax, rss)
		}
		if rss, _, ok := processesRSS(s.workers); ok {
			workersMax = max(workersMax, rss)
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	sample()
	for {
		select {
		case <-t.C:
			sample()
		case <-s.quit:
			sample()
			peak.PeakHeapInuseMB = float64(heapMax) / mb
			peak.PeakSysMB = float64(sysMax) / mb
			peak.PeakRSSMB = float64(rssMax) / mb
			if m, ok := maxRSS(); ok {
				peak.MaxRSSMB = float64(m) / mb
			}
			peak.ServerPeakRSSMB = float64(serverMax) / mb
			peak.WorkersPeakRSSMB = float64(workersMax) / mb
			if _, hwm, ok := s.srv.memory(); ok {
				peak.ServerHWMMB = float64(hwm) / mb
			}
			s.done <- peak
			return
		}
	}
}

// stop stops sampling and returns the peaks.
func (s *sampler) stop() memPeak {
	close(s.quit)
	return <-s.done
}

// settledMemory collects garbage and reads the Go heap in use, the
// resident set as it is, and the resident set once freed memory has been
// returned to the OS. It collects twice: objects parked in a sync.Pool
// (nats-server keeps 4 and 8 MB block buffers there when it runs in this
// process) survive one collection and are freed by the second. When srv
// runs in a child process it also reads the child's resident set and
// peak, as they are: the child's garbage is not collected first.
func settledMemory(srv *natsServer) memPoint {
	runtime.GC()
	runtime.GC()
	h, _ := goMemory(make([]metrics.Sample, 3))
	p := memPoint{HeapInuseMB: float64(h) / mb}
	if rss, ok := currentRSS(); ok {
		p.RSSMB = float64(rss) / mb
	}
	debug.FreeOSMemory()
	if rss, ok := currentRSS(); ok {
		p.RSSFreedMB = float64(rss) / mb
	}
	if m, ok := maxRSS(); ok {
		p.MaxRSSMB = float64(m) / mb
	}
	if rss, hwm, ok := srv.memory(); ok {
		p.ServerRSSMB, p.ServerHWMMB = float64(rss)/mb, float64(hwm)/mb
	}
	return p
}
