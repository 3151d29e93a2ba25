package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/wire"
)

// Values of --client.
const (
	clientRaw = "raw"
	clientGo  = "go"
)

// legsPerComparison is how many legs a comparison runs.
const legsPerComparison = 4

// legOrder is the order of a comparison's legs: ABBA, so that neither
// system always runs first, on a colder or a warmer machine. With
// --client go, Interlock driven with raw CloudEvents takes the floor's
// place and Interlock driven through the Go client package Interlock's.
func (o options) legOrder() []string {
	if o.client == clientGo {
		return []string{systemInterlock, systemClient, systemClient, systemInterlock}
	}
	return []string{systemFloor, systemInterlock, systemInterlock, systemFloor}
}

// systemLabels names the two systems of a comparison for people: the
// baseline (in the floor's place) and the system measured against it.
func systemLabels(client string) (base, measured string) {
	if client == clientGo {
		return "interlock raw", "interlock go client"
	}
	return systemFloor, systemInterlock
}

// comparison is the floor and Interlock measured on one setup in the
// order floor, Interlock, Interlock, floor, each leg running half of the
// runs on clean streams.
type comparison struct {
	// WorkerProcs is how many child processes the workers ran in; 0 when
	// they ran in this process.
	WorkerProcs int `json:"workerProcs"`
	// Floor and Interlock combine each system's two legs: runs and
	// seconds added, latency percentiles over every run of both, memory
	// the higher peak.
	Floor     *systemResult `json:"floor"`
	Interlock *systemResult `json:"interlock"`
	// Ratio is Interlock's combined figures over the floor's.
	Ratio *ratio `json:"ratio"`
	// Legs are the four legs, in the order they ran.
	Legs []legResult `json:"legs"`
}

// legResult is one leg of a comparison.
type legResult struct {
	// System is "floor" or "interlock".
	System string `json:"system"`
	systemResult
	// Replicas is the fewest replicas the server reported for the leg's
	// streams and buckets.
	Replicas int `json:"replicas"`
	// WorkerServers are the names of the server nodes the workers were
	// connected to, one per worker.
	WorkerServers []string `json:"workerServers"`
	// Stored is what the leg's stored runs cost the server, with --stored.
	Stored *storedReading `json:"stored,omitempty"`
}

// workersWhere says where the workers run, for progress lines.
func workersWhere(procs int) string {
	if procs == 0 {
		return "in this process"
	}
	return fmt.Sprintf("in %d child processes", procs)
}

// legRuns is how many of runs leg i runs: each system's first leg takes
// the odd one out.
func legRuns(runs, i int) int {
	if i < 2 {
		return (runs + 1) / 2
	}
	return runs / 2
}

// compare measures the floor and Interlock with workload w in fsync mode
// m, the workers in procs child processes (0: in this process), in the
// order of legOrder. Without stored runs every leg runs on srv, on
// streams of its own that it deletes when it is done; with them (o.stored
// > 0) every leg has a server of its own, so that the server's memory and
// disk with one system's stored runs can be read.
func compare(ctx context.Context, o options, w workload, m mode, procs int, srv *natsServer, progress io.Writer, say func(string, ...any)) (*comparison, error) {
	c := &comparison{WorkerProcs: procs}
	legOrder := o.legOrder()
	for i, system := range legOrder {
		runs := legRuns(o.runs, i)
		var (
			l   legResult
			err error
		)
		leg := func(srv *natsServer) error {
			say("%s, leg %d of %d: %d runs at concurrency %d (+%d warm-up), workers %s, server %s",
				system, i+1, len(legOrder), runs, o.concurrency, o.warmupRuns(), workersWhere(procs), srv.describe())
			// Goroutines the leg starts (its connections' readers and
			// flushers among them) carry the label, so that a CPU profile
			// splits by system: go tool pprof -tagfocus system=interlock.
			pprof.Do(ctx, pprof.Labels("system", system), func(ctx context.Context) {
				l, err = runLeg(ctx, o, w, srv, system, procs, runs, i == 2, progress, say)
			})
			return err
		}
		if o.stored > 0 {
			err = withServer(ctx, o, m, progress, leg)
		} else {
			err = leg(srv)
		}
		if err != nil {
			return nil, fmt.Errorf("%s, leg %d: %w", system, i+1, err)
		}
		say("%s, leg %d: %.0f runs/s", system, i+1, l.RunsPerSec)
		c.Legs = append(c.Legs, l)
	}
	c.Floor = combine(&c.Legs[0].systemResult, &c.Legs[3].systemResult)
	c.Interlock = combine(&c.Legs[1].systemResult, &c.Legs[2].systemResult)
	c.Ratio = ratios(c.Floor, c.Interlock)
	return c, nil
}

// runLeg measures one leg: system's workers (in procs child processes,
// or in this process if 0) and the clients drive runs full runs of w on
// srv under the system's prefix, after the stored runs o asks for. last
// says it is the last leg of Interlock, after which a heap profile is
// written if o asks for one.
func runLeg(ctx context.Context, o options, w workload, srv *natsServer, system string, procs, runs int, last bool, progress io.Writer, say func(string, ...any)) (_ legResult, err error) {
	l := legResult{System: system}
	prefix, proto := floorPrefix, protocol(floorProtocol{w})
	workerSystem := system
	if system == systemInterlock || system == systemClient {
		prefix, proto, workerSystem = benchPrefix, interlockProtocol{w}, systemInterlock
	}
	names, err := wire.NewNames(prefix)
	if err != nil {
		return l, err
	}
	cl, err := newClient(ctx, srv.url, "bench-"+system+"-client", names, w.flow, proto)
	if err != nil {
		return l, err
	}
	defer cl.close()
	if system == systemClient {
		cl.useGoClient(w)
	}
	// Provisioned here, so that worker processes starting together find
	// the streams there; each worker provisions again at start, as every
	// Interlock worker does, which changes nothing.
	if err := bus.Provision(ctx, cl.js, names, bus.StreamConfig{Replicas: o.replicas()}); err != nil {
		return l, err
	}
	if err := kv.Provision(ctx, cl.js, names, kv.BucketConfig{Replicas: o.replicas()}); err != nil {
		return l, err
	}
	ws, err := startWorkers(ctx, workerSpec{
		System: workerSystem, Prefix: prefix, Workload: w.name, Workers: o.workers(), Replicas: o.replicas(), Instance: "bench",
	}, srv, procs, progress)
	if err != nil {
		return l, err
	}
	defer func() { err = errors.Join(err, ws.stop(context.WithoutCancel(ctx))) }()
	l.WorkerServers = ws.servers()
	if o.stored > 0 {
		if l.Stored, err = storeRuns(ctx, o, cl, srv, ws, say); err != nil {
			return l, err
		}
	}
	res, err := measure(ctx, o, runs, cl, srv, ws.pids())
	if err != nil {
		return l, errors.Join(err, ws.failure(), srv.failure())
	}
	l.systemResult = *res
	if err := ws.failure(); err != nil {
		return l, err
	}
	if l.CheckpointBytes, err = checkpointBytes(ctx, cl, names); err != nil {
		return l, err
	}
	if l.Replicas, err = replicas(ctx, cl.js, names); err != nil {
		return l, err
	}
	if last && o.memprofile != "" && o.paused == 0 {
		if err := writeHeapProfile(o.memprofile); err != nil {
			return l, err
		}
	}
	if err := ws.stop(ctx); err != nil {
		return l, err
	}
	if o.stored > 0 {
		return l, nil // the leg's server goes with its streams
	}
	return l, deleteStreams(ctx, cl.js, names)
}

// replicas is the fewest replicas of the streams and buckets of names.
func replicas(ctx context.Context, js jetstream.JetStream, names wire.Names) (int, error) {
	n := 0
	for _, name := range streamNames(names) {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("reading the configuration of stream %s: %w", name, err)
		}
		if r := s.CachedInfo().Config.Replicas; n == 0 || r < n {
			n = r
		}
	}
	return n, nil
}

// combine combines two legs of one system: runs and seconds added,
// latency percentiles over the runs of both, CPU per run over the runs of
// both, memory the higher peak.
func combine(a, b *systemResult) *systemResult {
	c := *a
	c.Runs = a.Runs + b.Runs
	c.Seconds = a.Seconds + b.Seconds
	c.RunsPerSec = 0
	if c.Seconds > 0 {
		c.RunsPerSec = float64(c.Runs) / c.Seconds
	}
	c.startSamples = slices.Concat(a.startSamples, b.startSamples)
	c.resumeSamples = slices.Concat(a.resumeSamples, b.resumeSamples)
	perRun := func(x, y float64) float64 {
		if c.Runs == 0 {
			return 0
		}
		return (x*float64(a.Runs) + y*float64(b.Runs)) / float64(c.Runs)
	}
	c.CPUMsPerRun = perRun(a.CPUMsPerRun, b.CPUMsPerRun)
	c.ServerCPUMsPerRun = perRun(a.ServerCPUMsPerRun, b.ServerCPUMsPerRun)
	c.WorkersCPUMsPerRun = perRun(a.WorkersCPUMsPerRun, b.WorkersCPUMsPerRun)
	c.StartToInterrupted = latencies(c.startSamples)
	c.ResumeToCompleted = latencies(c.resumeSamples)
	m, n := a.Memory, b.Memory
	c.Memory = memPeak{
		PeakHeapInuseMB: max(m.PeakHeapInuseMB, n.PeakHeapInuseMB), PeakSysMB: max(m.PeakSysMB, n.PeakSysMB),
		PeakRSSMB: max(m.PeakRSSMB, n.PeakRSSMB), MaxRSSMB: max(m.MaxRSSMB, n.MaxRSSMB),
		ServerPeakRSSMB: max(m.ServerPeakRSSMB, n.ServerPeakRSSMB), ServerHWMMB: max(m.ServerHWMMB, n.ServerHWMMB),
		WorkersPeakRSSMB: max(m.WorkersPeakRSSMB, n.WorkersPeakRSSMB),
	}
	return &c
}

// legsRunsPerSec lists the runs/s of each leg, for a text report.
func legsRunsPerSec(legs []legResult) string {
	s := make([]string, len(legs))
	for i, l := range legs {
		s[i] = fmt.Sprintf("%s %.0f", l.System, l.RunsPerSec)
	}
	return strings.Join(s, ", ")
}

// writeComparisons writes what writeText's table of mr leaves out: the
// legs, the measurements with the workers in child processes, and the
// stored runs.
func writeComparisons(b *bytes.Buffer, mr modeResult) error {
	if len(mr.Legs) > 0 {
		fmt.Fprintf(b, "legs, in order (runs/s): %s\n", legsRunsPerSec(mr.Legs))
	}
	if len(mr.WorkerProcs) > 0 {
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		_, _ = fmt.Fprintln(tw, "worker processes\tfloor runs/s\tinterlock runs/s\tinterlock/floor\tfloor p99 start->interrupted\tinterlock p99\tfloor p99 resume->completed\tinterlock p99\tworkers CPU ms/run floor / interlock\tserver CPU ms/run floor / interlock\tworkers peak RSS MB floor / interlock\tserver peak RSS MB\tlegs, in order (runs/s)\t")
		for _, c := range mr.WorkerProcs {
			_, _ = fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.2fx\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f ms\t%.3f / %.3f\t%.3f / %.3f\t%.1f / %.1f\t%.1f\t%s\t\n",
				c.WorkerProcs, c.Floor.RunsPerSec, c.Interlock.RunsPerSec, c.Ratio.RunsPerSec,
				c.Floor.StartToInterrupted.P99Ms, c.Interlock.StartToInterrupted.P99Ms,
				c.Floor.ResumeToCompleted.P99Ms, c.Interlock.ResumeToCompleted.P99Ms,
				c.Floor.WorkersCPUMsPerRun, c.Interlock.WorkersCPUMsPerRun,
				c.Floor.ServerCPUMsPerRun, c.Interlock.ServerCPUMsPerRun,
				c.Floor.Memory.WorkersPeakRSSMB, c.Interlock.Memory.WorkersPeakRSSMB,
				max(c.Floor.Memory.ServerPeakRSSMB, c.Interlock.Memory.ServerPeakRSSMB), legsRunsPerSec(c.Legs))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	legs := slices.Clone(mr.Legs)
	for _, c := range mr.WorkerProcs {
		legs = append(legs, c.Legs...)
	}
	if !slices.ContainsFunc(legs, func(l legResult) bool { return l.Stored != nil }) {
		return nil
	}
	fmt.Fprintln(b, "stored runs, each leg on a server of its own (server RSS and data directory summed over its nodes):")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "leg\tstored\tstoring s\tstored/s\tserver RSS MB before\tafter\tper run\tdata dir MB before\tafter\tper run\tpending entries\tlist first page ms\truns/s with them\t")
	for i, l := range legs {
		s := l.Stored
		if s == nil {
			continue
		}
		_, _ = fmt.Fprintf(tw, "%d %s\t%d\t%.1f\t%.0f\t%.1f\t%.1f\t%.0f B\t%.1f\t%.1f\t%.0f B\t%d\t%.2f\t%.0f\t\n",
			i%legsPerComparison+1, l.System, s.Runs, s.Seconds, s.RunsPerSec,
			s.Before.ServerRSSMB, s.After.ServerRSSMB, s.ServerRSSBytesPerRun,
			s.Before.DataDirMB, s.After.DataDirMB, s.DiskBytesPerRun,
			s.PendingEntries, s.ListPageMs, l.RunsPerSec)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !slices.ContainsFunc(legs, func(l legResult) bool { return l.Stored != nil && len(l.Stored.Listings) > 0 }) {
		return nil
	}
	fmt.Fprintf(b, "a page of %d runs with runs finished (client.ListRuns; median of %d; ms, and KB received), against the floor's raw read of a page:\n", pageSize, listTries)
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "leg\tstored\tevery status ms\tKB\tfinished ms\tKB\tcompleted ms\tKB\ttenth page ms\tKB\tfloor ms\tKB\tcompleted/floor\tevery status/floor\t")
	for i, l := range legs {
		if l.Stored == nil {
			continue
		}
		for _, r := range l.Stored.Listings {
			_, _ = fmt.Fprintf(tw, "%d %s\t%d\t%.2f\t%.1f\t%.2f\t%.1f\t%.2f\t%.1f\t%.2f\t%.1f\t%.2f\t%.1f\t%.2fx\t%.2fx\t\n",
				i%legsPerComparison+1, l.System, r.Stored, r.All.Ms, r.All.Bytes/1024, r.Finished.Ms, r.Finished.Bytes/1024,
				r.Completed.Ms, r.Completed.Bytes/1024, r.Tenth.Ms, r.Tenth.Bytes/1024, r.Floor.Ms, r.Floor.Bytes/1024,
				r.Completed.Ms/r.Floor.Ms, r.All.Ms/r.Floor.Ms)
		}
	}
	return tw.Flush()
}

// procsList is --worker-procs as given: counts separated by commas.
func procsList(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
