// Command bench measures Interlock against the raw JetStream floor: the same
// JetStream work a start->interrupted and resume->completed round needs,
// done by hand with no Interlock code in the loop. The interrupt is a
// question (the default workload) or examples/refund's approval with a
// deadline (--workload approval). It starts an embedded nats-server (or a
// cluster of them) per fsync mode and measurement, drives N runs through
// each system at a given concurrency, in the order floor, Interlock,
// Interlock, floor, half of the runs each time, and reports runs/s,
// latency percentiles and memory. --systems compares others, among them
// the minimum floor (the fewest writes a durable pause needs), in
// mirrored order: A B C C B A. The server runs in a child process per
// node, as a deployment would (the bench binary run again with
// INTERLOCK_BENCH_SERVER set), or in this process; the workers run in this
// process or in child processes of their own (INTERLOCK_BENCH_WORKER).
//
//	go run ./bench --runs 2000 --concurrency 1
//	go run ./bench --runs 2000 --concurrency 32
//	go run ./bench --systems minimum,raw,go --runs 1000 --concurrency 1
//	go run ./bench --workload approval --runs 2000 --concurrency 32
//	go run ./bench --runs 0 --paused 20000 --fsync lazy
//	go run ./bench --runs 0 --count-writes 1000 --fsync always
//	go run ./bench --worker-procs 1,2,4 --concurrency 64 --fsync lazy
//	go run ./bench --worker-procs 1,2,4 --concurrency 64 --fsync lazy --cluster 3
//	go run ./bench --stored 100000 --concurrency 32 --fsync lazy
//	go run ./bench --stored 100000 --stored-finished --runs 200 --fsync lazy
//
// See bench/README.md for what is measured exactly and for results.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults of the flags.
const (
	defaultRuns        = 2000
	defaultConcurrency = 32
	defaultFsync       = "both"
	defaultWorkload    = "question"
	defaultTimeout     = 10 * time.Minute
	// defaultStoredTimeout is the default timeout with --stored: each of
	// the four legs stores its runs first.
	defaultStoredTimeout = time.Hour
	defaultServer        = serverProcess
	// defaultIdle is how long the paused check leaves the server without
	// traffic before its last reading: nats-server drops a message block's
	// cache 10 s after its last use.
	defaultIdle = 12 * time.Second
	// minWorkers is the least number of messages a worker (Interlock's or
	// the floor's) handles at once, whatever the client concurrency.
	minWorkers = 32
	// eventWait bounds how long a client waits for one event.
	eventWait = 30 * time.Second
	// sampleEvery is how often memory is sampled during a measurement.
	sampleEvery = 10 * time.Millisecond
)

func main() {
	if code, ok := childMain(); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal cancels ctx and the benchmark winds down; stopping
	// the notification lets a second signal end the process at once.
	context.AfterFunc(ctx, stop)
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// usageError is a bad flag value.
type usageError struct{ error }

// options are the parsed flags.
type options struct {
	runs         int
	concurrency  int
	fsync        string
	workload     string
	paused       int
	finished     int
	keepFinished time.Duration
	warmup       int
	json         bool
	cpuprofile   string
	memprofile   string
	timeout      time.Duration
	server       string
	idle         time.Duration
	// workerProcs are the counts of worker processes to measure with
	// (--worker-procs); none: the workers run in this process.
	workerProcs []int
	// cluster is the number of nodes of the server's cluster; 0 for a
	// single server.
	cluster int
	// stored is how many runs each system stores before each leg;
	// storedFinished runs them to completion instead of leaving them
	// waiting.
	stored         int
	storedFinished bool
	interlockBin   string
	// countWrites is how many runs each system runs for the write count;
	// 0 skips it.
	countWrites int
	// client is how Interlock's clients drive runs in the throughput
	// measurement: clientRaw or clientGo.
	client string
	// systems are the systems the throughput measurement compares
	// (--systems), in order; none: see systemList.
	systems []string
}

// workloads are the workloads o asks for, in the order they are measured.
func (o options) workloads() []workload {
	ws, _ := workloadsNamed(o.workload)
	return ws
}

// mode is one fsync mode of the embedded server.
type mode struct {
	name string // "always" or "lazy"
	lazy bool
}

func (o options) modes() []mode {
	always, lazy := mode{name: "always"}, mode{name: "lazy", lazy: true}
	switch o.fsync {
	case "always":
		return []mode{always}
	case "lazy":
		return []mode{lazy}
	}
	return []mode{always, lazy}
}

// replicas is the replica count of every stream and bucket: one on each
// node of a cluster, else 1.
func (o options) replicas() int {
	if o.cluster > 1 {
		return o.cluster
	}
	return 1
}

// procCounts are the counts of worker processes of the throughput
// measurements: 0 stands for the workers in this process.
func (o options) procCounts() []int {
	if len(o.workerProcs) == 0 {
		return []int{0}
	}
	return o.workerProcs
}

// workers is how many messages a worker handles at once.
func (o options) workers() int { return max(o.concurrency, minWorkers) }

// warmupRuns is how many unrecorded runs precede a measurement.
func (o options) warmupRuns() int {
	if o.warmup >= 0 {
		return o.warmup
	}
	return min(max(o.runs/10, o.concurrency), 100)
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.runs, "runs", defaultRuns, "full runs (start->interrupted->resume->completed) per system, workload and fsync mode, half in each of the system's two legs (in mirrored order: floor, interlock, interlock, floor by default); 0 skips the throughput measurement")
	fs.IntVar(&o.concurrency, "concurrency", defaultConcurrency, "client goroutines with a run in flight at once")
	fs.StringVar(&o.fsync, "fsync", defaultFsync, "fsync mode of the server: always (fsync before ack), lazy, or both")
	fs.StringVar(&o.workload, "workload", defaultWorkload, "what each run does between start and completed: question (one question, answered), approval (examples/refund's approval of issue_refund with a 30-minute deadline, approved, then the refund as a step), or both")
	fs.IntVar(&o.paused, "paused", 0, "if > 0, start this many runs, leave them paused at the interrupt, and report memory before and after")
	fs.IntVar(&o.finished, "finished", 0, "if > 0, run this many runs to completion on a service keeping finished runs for --keep-finished, and report the server's memory and disk with them kept and once they expired")
	fs.DurationVar(&o.keepFinished, "keep-finished", defaultKeepFinished, "how long the --finished measurement keeps finished runs")
	fs.IntVar(&o.warmup, "warmup", -1, "unrecorded runs before each leg (and the paused check); -1 picks min(max(runs/10, concurrency), 100)")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of this process for the whole invocation to this file (with the server in a child process: the workers and clients only; with --worker-procs: the clients only)")
	fs.StringVar(&o.memprofile, "memprofile", "", "write a heap profile to this file at the end of the last measurement: with the paused runs waiting if --paused is set, else after Interlock's second leg")
	fs.DurationVar(&o.timeout, "timeout", 0, fmt.Sprintf("give up after this long; 0 picks %s, or %s with --stored", defaultTimeout, defaultStoredTimeout))
	fs.StringVar(&o.server, "server", defaultServer, "where nats-server runs: process (a child process per node, as a deployment would, so memory figures are the worker's alone) or inprocess")
	var procs string
	fs.StringVar(&procs, "worker-procs", "", "if set, counts of worker processes, separated by commas (1,2,4): the throughput measurement runs once per count with the workers (Interlock's service, the floor's pool) in that many child processes consuming one stream; unset, they run in this process")
	fs.IntVar(&o.cluster, "cluster", 0, "if 3, the server is a 3-node cluster of child processes on loopback and every stream and bucket has 3 replicas; 0 is a single server")
	fs.IntVar(&o.stored, "stored", 0, "if > 0, before each leg of the throughput measurement this many runs are started through the system and left waiting at the interrupt, on a server of the leg's own; their cost to the server is reported")
	fs.BoolVar(&o.storedFinished, "stored-finished", false, "with --stored: the stored runs are run to completion (start, answer) and kept as finished runs instead of left waiting, and a page of the list of runs (client.ListRuns) is timed, with the bytes it reads, at 1,000 runs stored and at --stored, against a raw batched direct get of the same page")
	fs.IntVar(&o.countWrites, "count-writes", 0, "if > 0, run this many runs of each system to the interrupt, then resume them all, and count what each phase stores in each stream and bucket (messages, bytes) and, with the server in a child process and strace on PATH, the server's fsyncs")
	fs.StringVar(&o.client, "client", clientRaw, "how the throughput measurement compares: raw (the floor against Interlock driven with raw CloudEvents) or go (Interlock driven with raw CloudEvents, in the floor's place, against Interlock driven through its Go client package: client.Start and client.Resume); go is --systems raw,go")
	var systems string
	fs.StringVar(&systems, "systems", "", "the systems the throughput measurement compares, separated by commas, the ratios taken against the first: minimum (raw JetStream doing the fewest writes a durable pause needs, question workload only), floor (raw JetStream doing Interlock's writes), raw (Interlock driven with raw CloudEvents) and go (Interlock driven through its Go client package); legs in mirrored order (A B C C B A), half of the runs each; unset: floor,raw, or raw,go with --client go")
	fs.DurationVar(&o.idle, "idle", defaultIdle, "how long the paused check waits without traffic before its last reading")
	fs.StringVar(&o.interlockBin, "interlock-bin", "", "`PATH` of the interlock binary whose pending listing the paused check times; \"\" builds ./cmd/interlock with go build, \""+cliNone+"\" skips that timing")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./bench [flags]\n\nMeasures Interlock against the raw JetStream floor on a nats-server of its own.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, usageError{err}
	}
	var err error
	if o.workerProcs, err = parseProcs(procs); err != nil {
		return o, usageError{err}
	}
	if systems != "" {
		if o.client == clientGo {
			return o, usageError{errors.New("--client go is --systems raw,go: give one of --client and --systems")}
		}
		if o.systems, err = parseSystems(systems); err != nil {
			return o, usageError{err}
		}
	}
	minimumWithApproval := slices.Contains(o.systemList(), systemMinimum) && slices.ContainsFunc(o.workloads(), func(w workload) bool { return w.approval })
	if o.timeout == 0 {
		o.timeout = defaultTimeout
		if o.stored > 0 {
			o.timeout = defaultStoredTimeout
		}
	}
	switch {
	case fs.NArg() > 0:
		return o, usageError{fmt.Errorf("unexpected argument %q: bench takes only flags", fs.Arg(0))}
	case o.runs < 0 || o.runs == 1:
		return o, usageError{fmt.Errorf("--runs is %d; it must be 0, or 2 or more: each system runs half of them in each of its two legs", o.runs)}
	case o.concurrency < 1:
		return o, usageError{fmt.Errorf("--concurrency is %d; it must be at least 1", o.concurrency)}
	case o.paused < 0:
		return o, usageError{fmt.Errorf("--paused is %d; it must be 0 or more", o.paused)}
	case o.warmup < -1:
		return o, usageError{fmt.Errorf("--warmup is %d; use -1 for automatic or a count", o.warmup)}
	case o.fsync != "both" && o.fsync != "always" && o.fsync != "lazy":
		return o, usageError{fmt.Errorf("--fsync is %q; use both, always or lazy", o.fsync)}
	case len(o.workloads()) == 0:
		return o, usageError{fmt.Errorf("--workload is %q; use %s", o.workload, workloadsFlag)}
	case o.finished < 0:
		return o, usageError{fmt.Errorf("--finished is %d; it must be 0 or more", o.finished)}
	case o.keepFinished < time.Second:
		return o, usageError{fmt.Errorf("--keep-finished is %s; it must be at least 1s", o.keepFinished)}
	case o.countWrites < 0:
		return o, usageError{fmt.Errorf("--count-writes is %d; it must be 0 or more", o.countWrites)}
	case o.runs == 0 && o.paused == 0 && o.finished == 0 && o.countWrites == 0:
		return o, usageError{errors.New("nothing to do: --runs, --paused, --finished and --count-writes are all 0")}
	case o.timeout < 0:
		return o, usageError{fmt.Errorf("--timeout is %s; it must be positive, or 0 for the default", o.timeout)}
	case o.server != serverProcess && o.server != serverInProcess:
		return o, usageError{fmt.Errorf("--server is %q; use process or inprocess", o.server)}
	case o.cluster != 0 && o.cluster != 3:
		return o, usageError{fmt.Errorf("--cluster is %d; use 3 for a 3-node cluster, or 0 for a single server", o.cluster)}
	case o.stored < 0:
		return o, usageError{fmt.Errorf("--stored is %d; it must be 0 or more", o.stored)}
	case o.storedFinished && o.stored == 0:
		return o, usageError{errors.New("--stored-finished says how --stored runs are stored: give --stored too")}
	case o.stored > 0 && o.runs == 0:
		return o, usageError{errors.New("--stored applies to the throughput measurement, which --runs 0 skips: give --runs too")}
	case len(o.workerProcs) > 0 && o.runs == 0:
		return o, usageError{errors.New("--worker-procs applies to the throughput measurement, which --runs 0 skips: give --runs too")}
	case o.client != clientRaw && o.client != clientGo:
		return o, usageError{fmt.Errorf("--client is %q; use raw or go", o.client)}
	case minimumWithApproval:
		return o, usageError{fmt.Errorf("--systems names minimum and --workload is %q: %w", o.workload, errMinimumApproval)}
	case len(o.systemList()) > 2 && (o.stored > 0 || len(o.workerProcs) > 0):
		return o, usageError{errors.New("--stored and --worker-procs compare two systems: give two to --systems")}
	case o.stored > 0 && slices.Contains(o.systemList(), systemMinimum):
		return o, usageError{errors.New("--stored reads the pending index, which the minimum floor does not keep: leave minimum out of --systems")}
	case o.idle < 0:
		return o, usageError{fmt.Errorf("--idle is %s; it must be 0 or more", o.idle)}
	}
	return o, nil
}

// Run runs the benchmark with the command-line arguments args, printing the
// results to stdout and progress to stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return fmt.Errorf("creating CPU profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return fmt.Errorf("starting CPU profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if cerr := f.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("writing CPU profile %s: %w", o.cpuprofile, cerr)
			}
		}()
	}
	rep := report{
		Machine: machineFacts(), Runs: o.runs, Concurrency: o.concurrency,
		Workers: o.workers(), Warmup: o.warmupRuns(), PausedRuns: o.paused,
		Server: o.server, Replicas: o.replicas(), WorkerProcs: o.workerProcs, StoredRuns: o.stored,
		Client: o.client, Systems: o.systemList(),
	}
	if o.cluster > 1 {
		rep.ClusterNodes = o.cluster
	}
	if o.runs == 0 {
		rep.Warmup = 0
	}
	// The workloads of one fsync mode are measured one after the other, so
	// that they see the disk in the same state.
	for _, m := range o.modes() {
		for _, w := range o.workloads() {
			res, err := runMode(ctx, o, w, m, stderr)
			if err != nil {
				return fmt.Errorf("%s, fsync=%s: %w", w.name, m.name, err)
			}
			rep.Modes = append(rep.Modes, res)
		}
	}
	rep.Notes = serverNotes(o)
	rep.Machine.LoadAvgEnd = loadAvg()
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("writing results: %w", err)
		}
		return nil
	}
	return rep.writeText(stdout)
}

// maxWorkerProcs bounds a count of --worker-procs.
const maxWorkerProcs = 64

// parseProcs parses --worker-procs: counts separated by commas, or "".
func parseProcs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var ns []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxWorkerProcs {
			return nil, fmt.Errorf("--worker-procs is %q; give counts of worker processes from 1 to %d separated by commas, such as 1,2,4", s, maxWorkerProcs)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating heap profile: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing heap profile %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing heap profile %s: %w", path, err)
	}
	return nil
}
