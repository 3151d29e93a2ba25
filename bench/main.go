// Command bench measures Interlock against the raw JetStream floor: the same
// JetStream work a start->interrupted and resume->completed round needs,
// done by hand with no Interlock code in the loop. The interrupt is a
// question (the default workload) or examples/refund's approval with a
// deadline (--workload approval). It starts an embedded nats-server per
// fsync mode and measurement, drives N runs through each system at a given
// concurrency, and reports runs/s, latency percentiles and memory. The
// server runs in this process or, so that the memory figures are the
// worker's alone, in a child process: the bench binary run again with
// INTERLOCK_BENCH_SERVER set.
//
//	go run ./bench --runs 2000 --concurrency 1
//	go run ./bench --runs 2000 --concurrency 32
//	go run ./bench --workload approval --runs 2000 --concurrency 32
//	go run ./bench --runs 0 --paused 20000 --fsync lazy
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
	defaultServer      = serverAuto
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
	if dir, ok := os.LookupEnv(serverEnv); ok {
		os.Exit(serverMain(dir, os.Getenv(serverFsyncEnv)))
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
	interlockBin string
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

// serverFor is where the server of a measurement runs: serverProcess or
// serverInProcess.
func (o options) serverFor(paused bool) string {
	if o.server != serverAuto {
		return o.server
	}
	if paused {
		return serverProcess
	}
	return serverInProcess
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
	fs.IntVar(&o.runs, "runs", defaultRuns, "full runs (start->interrupted->resume->completed) per system, workload and fsync mode; 0 skips the throughput measurement")
	fs.IntVar(&o.concurrency, "concurrency", defaultConcurrency, "client goroutines with a run in flight at once")
	fs.StringVar(&o.fsync, "fsync", defaultFsync, "fsync mode of the server: always (fsync before ack), lazy, or both")
	fs.StringVar(&o.workload, "workload", defaultWorkload, "what each run does between start and completed: question (one question, answered), approval (examples/refund's approval of issue_refund with a 30-minute deadline, approved, then the refund as a step), or both")
	fs.IntVar(&o.paused, "paused", 0, "if > 0, start this many runs, leave them paused at the interrupt, and report memory before and after")
	fs.IntVar(&o.finished, "finished", 0, "if > 0, run this many runs to completion on a service keeping finished runs for --keep-finished, and report the server's memory and disk with them kept and once they expired")
	fs.DurationVar(&o.keepFinished, "keep-finished", defaultKeepFinished, "how long the --finished measurement keeps finished runs")
	fs.IntVar(&o.warmup, "warmup", -1, "unrecorded runs before each measurement; -1 picks min(max(runs/10, concurrency), 100)")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of this process for the whole invocation to this file (with the server in a child process: the workers and clients only)")
	fs.StringVar(&o.memprofile, "memprofile", "", "write a heap profile to this file at the end of the last measurement: with the paused runs waiting if --paused is set, else after the Interlock runs")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "give up after this long")
	fs.StringVar(&o.server, "server", defaultServer, "where nats-server runs: process (a child process, so memory figures are the worker's alone), inprocess, or auto (process for --paused, inprocess for the throughput measurements)")
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
	switch {
	case fs.NArg() > 0:
		return o, usageError{fmt.Errorf("unexpected argument %q: bench takes only flags", fs.Arg(0))}
	case o.runs < 0:
		return o, usageError{fmt.Errorf("--runs is %d; it must be 0 or more", o.runs)}
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
	case o.runs == 0 && o.paused == 0 && o.finished == 0:
		return o, usageError{errors.New("nothing to do: --runs, --paused and --finished are all 0")}
	case o.timeout <= 0:
		return o, usageError{fmt.Errorf("--timeout is %s; it must be positive", o.timeout)}
	case o.server != serverAuto && o.server != serverProcess && o.server != serverInProcess:
		return o, usageError{fmt.Errorf("--server is %q; use process, inprocess or auto", o.server)}
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
