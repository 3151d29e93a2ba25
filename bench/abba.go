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

// legsPerComparison is how many legs a comparison of two systems runs.
const legsPerComparison = 4

// Values of --systems: the systems a throughput measurement compares.
const (
	// flagMinimum is the minimum floor (minimum.go).
	flagMinimum = "minimum"
	// flagFloor is the floor that mirrors Interlock's writes (floor.go).
	flagFloor = "floor"
	// flagRaw is Interlock driven with raw CloudEvents; flagInterlock
	// is the same.
	flagRaw       = "raw"
	flagInterlock = "interlock"
	// flagGo is Interlock driven through the Go client package.
	flagGo = "go"
)

// defaultSystems is --systems unset: the floor against Interlock driven
// with raw CloudEvents.
var defaultSystems = []string{systemFloor, systemInterlock}

// parseSystems parses --systems: names of systems separated by commas,
// each once, at least two.
func parseSystems(s string) ([]string, error) {
	var systems []string
	for f := range strings.SplitSeq(s, ",") {
		var system string
		switch strings.TrimSpace(f) {
		case flagMinimum:
			system = systemMinimum
		case flagFloor:
			system = systemFloor
		case flagRaw, flagInterlock:
			system = systemInterlock
		case flagGo:
			system = systemClient
		default:
			return nil, fmt.Errorf("--systems is %q: %q is no system; give two or more of minimum, floor, raw and go, separated by commas, such as minimum,raw,go", s, strings.TrimSpace(f))
		}
		if slices.Contains(systems, system) {
			return nil, fmt.Errorf("--systems is %q: %s is named twice; name each system once", s, strings.TrimSpace(f))
		}
		systems = append(systems, system)
	}
	if len(systems) < 2 {
		return nil, fmt.Errorf("--systems is %q: give two or more systems to compare, separated by commas, such as minimum,raw,go", s)
	}
	return systems, nil
}

// systemList is the systems the throughput measurement compares, in the
// order given: --systems, or with --client go Interlock driven with raw
// CloudEvents and through the Go client package, or the floor and
// Interlock.
func (o options) systemList() []string {
	switch {
	case len(o.systems) > 0:
		return o.systems
	case o.client == clientGo:
		return []string{systemInterlock, systemClient}
	}
	return defaultSystems
}

// legOrder is the order of a comparison's legs: the systems, then the
// systems again in reverse (ABBA for two, ABCCBA for three), so that no
// system always runs first, on a colder or a warmer machine.
func (o options) legOrder() []string {
	systems := o.systemList()
	back := slices.Clone(systems)
	slices.Reverse(back)
	return slices.Concat(systems, back)
}

// systemLabels names systems for people, in their order.
func systemLabels(systems []string) []string {
	labels := make([]string, len(systems))
	for i, s := range systems {
		switch s {
		case systemMinimum:
			labels[i] = "minimum floor"
		case systemInterlock:
			labels[i] = "interlock"
			if slices.Contains(systems, systemClient) {
				labels[i] = "interlock raw"
			}
		case systemClient:
			labels[i] = "interlock go client"
		default:
			labels[i] = s
		}
	}
	return labels
}

// systemFigures is one system's combined figures in a comparison, with
// its ratios to the first system's.
type systemFigures struct {
	// System is minimum, floor, interlock (driven with raw CloudEvents)
	// or client (driven through the Go client package).
	System string `json:"system"`
	// Label names the system for people.
	Label  string        `json:"label"`
	Result *systemResult `json:"result"`
	// Ratio is the system's figures over the first system's; none for
	// the first.
	Ratio *ratio `json:"ratio,omitempty"`
}

// comparison is two or more systems measured on one setup in the order
// of legOrder (floor, Interlock, Interlock, floor by default), each leg
// running half of a system's runs on clean streams.
type comparison struct {
	// WorkerProcs is how many child processes the workers ran in; 0 when
	// they ran in this process.
	WorkerProcs int `json:"workerProcs"`
	// Floor and Interlock combine the two legs of the first and the
	// second system (by default the floor and Interlock): runs and
	// seconds added, latency percentiles over every run of both, memory
	// the higher peak.
	Floor     *systemResult `json:"floor"`
	Interlock *systemResult `json:"interlock"`
	// Ratio is the second system's combined figures over the first's.
	Ratio *ratio `json:"ratio"`
	// Systems are every system's combined figures, in the order of
	// --systems, each with its ratios to the first.
	Systems []systemFigures `json:"systems"`
	// Legs are every leg (two per system), in the order they ran.
	Legs []legResult `json:"legs"`
}

// legResult is one leg of a comparison.
type legResult struct {
	// System is "minimum", "floor", "interlock" or "client" (Interlock
	// driven through the Go client package).
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

// legRuns is how many of runs leg i of a comparison of n systems runs:
// each system's first leg takes the odd one out.
func legRuns(runs, i, n int) int {
	if i < n {
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
	systems := o.systemList()
	for i, system := range legOrder {
		runs := legRuns(o.runs, i, len(systems))
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
				l, err = runLeg(ctx, o, w, srv, system, procs, runs, i == len(systems), progress, say)
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
	labels := systemLabels(systems)
	for k, system := range systems {
		f := systemFigures{System: system, Label: labels[k], Result: combine(&c.Legs[k].systemResult, &c.Legs[len(legOrder)-1-k].systemResult)}
		if k > 0 {
			f.Ratio = ratios(c.Systems[0].Result, f.Result)
		}
		c.Systems = append(c.Systems, f)
	}
	c.Floor, c.Interlock, c.Ratio = c.Systems[0].Result, c.Systems[1].Result, c.Systems[1].Ratio
	return c, nil
}

// runLeg measures one leg: system's workers (in procs child processes,
// or in this process if 0) and the clients drive runs full runs of w on
// srv under the system's prefix, after the stored runs o asks for. last
// says it is the last leg of Interlock, after which a heap profile is
// written if o asks for one.
func runLeg(ctx context.Context, o options, w workload, srv *natsServer, system string, procs, runs int, last bool, progress io.Writer, say func(string, ...any)) (_ legResult, err error) {
	l := legResult{System: system}
	prefix, proto, workerSystem := systemSetup(system, w)
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

// systemSetup returns the prefix of system's streams and buckets, its
// clients' protocol, and the system of its workers: Interlock's for
// Interlock driven either way.
func systemSetup(system string, w workload) (prefix string, proto protocol, workerSystem string) {
	switch system {
	case systemInterlock, systemClient:
		return benchPrefix, interlockProtocol{w}, systemInterlock
	case systemMinimum:
		return minimumPrefix, floorProtocol{w}, systemMinimum
	}
	return floorPrefix, floorProtocol{w}, systemFloor
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

// summary is each system's runs/s and its ratio to the first's, for a
// progress line.
func (c *comparison) summary() string {
	s := make([]string, len(c.Systems))
	for i, f := range c.Systems {
		s[i] = fmt.Sprintf("%s %.0f runs/s", f.Label, f.Result.RunsPerSec)
		if f.Ratio != nil {
			s[i] += fmt.Sprintf(" (%.2fx, p99 start->interrupted %.2fx)", f.Ratio.RunsPerSec, f.Ratio.P99StartToInterrupted)
		}
	}
	return strings.Join(s, ", ")
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
