package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/wire"
)

// The systems measured.
const (
	systemFloor = "floor"
	// systemMinimum is the minimum floor: the fewest writes a durable
	// pause needs.
	systemMinimum   = "minimum"
	systemInterlock = "interlock"
	// systemClient is Interlock's workers with clients that drive runs
	// through the Go client package (--client go).
	systemClient = "client"
)

// workerEnv is the environment variable that makes the bench binary a
// worker child process: its value is the workerSpec, in JSON.
const workerEnv = "INTERLOCK_BENCH_WORKER"

// workerReady starts the line a worker child prints once it consumes,
// followed by the name of the server node it is connected to.
const workerReady = "ready"

// workerReadyWait bounds how long a worker child takes to start
// consuming: as long as bus.Provision waits for a forming cluster.
const workerReadyWait = bus.DefaultClusterWait

// workerSpec says what a worker runs: one system's worker (the floor's
// pool or an Interlock service) for one workload, on one server.
type workerSpec struct {
	// System is systemFloor, systemMinimum or systemInterlock.
	System string `json:"system"`
	// URL is the server's, with the workers' credentials.
	URL string `json:"url"`
	// Prefix names the system's streams and buckets.
	Prefix string `json:"prefix"`
	// Workload is the workload's name (--workload).
	Workload string `json:"workload"`
	// Workers is how many messages the worker handles at once.
	Workers int `json:"workers"`
	// Replicas of the streams and buckets it provisions.
	Replicas int `json:"replicas"`
	// Instance names an Interlock service in its events' source.
	Instance string `json:"instance"`
}

// workers are the workers of one leg of a measurement, in this process or
// in child processes.
type workers interface {
	// failure is the first error a worker met, if one is known yet.
	failure() error
	// stop stops the workers, each once it has acknowledged what it
	// handles. Stopping twice is safe.
	stop(ctx context.Context) error
	// pids are the ids of the workers' child processes; none when they
	// run in this process.
	pids() []int
	// servers are the names of the server nodes the workers are
	// connected to, one per worker.
	servers() []string
}

// runWorker starts the worker spec says, in this process.
func runWorker(ctx context.Context, spec workerSpec) (workers, error) {
	ws, ok := workloadsNamed(spec.Workload)
	if !ok || len(ws) != 1 {
		return nil, fmt.Errorf("workload %q is not one workload; use question or approval", spec.Workload)
	}
	w := ws[0]
	switch spec.System {
	case systemFloor:
		names, err := wire.NewNames(spec.Prefix)
		if err != nil {
			return nil, err
		}
		f, err := startFloor(ctx, spec.URL, names, w, spec.Workers, spec.Replicas)
		if err != nil {
			return nil, err
		}
		return floorWorkers{f}, nil
	case systemMinimum:
		names, err := wire.NewNames(spec.Prefix)
		if err != nil {
			return nil, err
		}
		m, err := startMinimum(ctx, spec.URL, names, w, spec.Workers, spec.Replicas)
		if err != nil {
			return nil, err
		}
		return minimumWorkers{m}, nil
	case systemInterlock:
		svc, err := startInterlock(ctx, spec.URL, spec.Prefix, spec.Instance, w, spec.Workers, spec.Replicas)
		if err != nil {
			return nil, err
		}
		return &serviceWorkers{svc: svc}, nil
	}
	return nil, fmt.Errorf("system %q is none of %s, %s and %s", spec.System, systemFloor, systemMinimum, systemInterlock)
}

// floorWorkers is the floor's pool in this process.
type floorWorkers struct{ f *floor }

func (w floorWorkers) failure() error    { return w.f.failure() }
func (w floorWorkers) pids() []int       { return nil }
func (w floorWorkers) servers() []string { return []string{w.f.nc.ConnectedServerName()} }
func (w floorWorkers) stop(ctx context.Context) error {
	return errors.Join(w.f.stop(ctx), w.f.failure())
}

// minimumWorkers is the minimum floor's pool in this process.
type minimumWorkers struct{ m *minimum }

func (w minimumWorkers) failure() error    { return w.m.failure() }
func (w minimumWorkers) pids() []int       { return nil }
func (w minimumWorkers) servers() []string { return []string{w.m.nc.ConnectedServerName()} }
func (w minimumWorkers) stop(ctx context.Context) error {
	return errors.Join(w.m.stop(ctx), w.m.failure())
}

// serviceWorkers is an Interlock service in this process.
type serviceWorkers struct {
	svc  *interlock.Service
	once sync.Once
	err  error
}

func (w *serviceWorkers) failure() error { return nil }
func (w *serviceWorkers) pids() []int    { return nil }
func (w *serviceWorkers) servers() []string {
	return []string{w.svc.JetStream().Conn().ConnectedServerName()}
}

func (w *serviceWorkers) stop(ctx context.Context) error {
	w.once.Do(func() { w.err = stopInterlock(ctx, w.svc) })
	return w.err
}

// startWorkers starts the workers of spec: in this process if procs is
// 0, else in procs child processes, which all consume the one stream,
// worker process i connecting to node i of srv (modulo its nodes). Their
// standard error goes to stderr.
func startWorkers(ctx context.Context, spec workerSpec, srv *natsServer, procs int, stderr io.Writer) (workers, error) {
	if procs == 0 {
		spec.URL = srv.nodeURL(0)
		return runWorker(ctx, spec)
	}
	ps := &workerProcs{procs: make([]*childProc, procs), names: make([]string, procs)}
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i := range procs {
		s := spec
		s.URL = srv.nodeURL(i)
		s.Instance = fmt.Sprintf("bench-%d", i)
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			p, lines, err := startChild(ctx, spec.System+" worker process", []string{workerEnv + "=" + string(b)}, 1, workerReadyWait, stderr)
			if err != nil {
				errs[i] = err
				return
			}
			ps.procs[i] = p
			name, ok := strings.CutPrefix(lines[0], workerReady+" ")
			if !ok {
				errs[i] = fmt.Errorf("%s worker process %d: first line %q, want %q and the server's name", spec.System, p.pid(), truncate([]byte(lines[0]), 200), workerReady)
			}
			ps.names[i] = name
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, ps.stop(ctx))
	}
	return ps, nil
}

// workerProcs are workers in child processes.
type workerProcs struct {
	procs []*childProc
	// names are the names of the server nodes they are connected to.
	names []string
}

func (w *workerProcs) servers() []string { return w.names }

func (w *workerProcs) failure() error {
	for _, p := range w.procs {
		if p != nil {
			if err := p.failure(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *workerProcs) pids() []int {
	var pids []int
	for _, p := range w.procs {
		if p != nil {
			pids = append(pids, p.pid())
		}
	}
	return pids
}

// stop stops every worker process at once: each drains, reports a
// failure of its worker by its exit code, and exits.
func (w *workerProcs) stop(context.Context) error {
	errs := make([]error, len(w.procs))
	var wg sync.WaitGroup
	for i, p := range w.procs {
		if p != nil {
			wg.Go(func() { errs[i] = p.stop() })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// workerMain is the whole of a worker child process: it runs the worker
// that spec (a workerSpec in JSON) describes, prints workerReady and the
// name of the server node it is connected to once it consumes, and, once stdin closes or the process is signalled, stops it
// and returns the process's exit code: 1 if the worker failed.
func workerMain(spec string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := work(ctx, spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench: worker process %d: %v\n", os.Getpid(), err)
		return 1
	}
	return 0
}

// work runs the worker of spec until stdin closes or ctx is done.
func work(ctx context.Context, spec string, stdin io.Reader, stdout io.Writer) (err error) {
	var s workerSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return fmt.Errorf("%s is not a worker's description in JSON: %w", workerEnv, err)
	}
	w, err := runWorker(ctx, s)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWait)
		defer cancel()
		err = errors.Join(err, w.stop(ctx))
	}()
	if _, err := fmt.Fprintln(stdout, workerReady, w.servers()[0]); err != nil {
		return fmt.Errorf("writing that it is ready: %w", err)
	}
	untilClosed(ctx, stdin)
	return nil
}

// childMain runs this process as a child of the benchmark when its
// environment says so: a server node or a worker. ok is false for the
// benchmark itself.
func childMain() (code int, ok bool) {
	if _, ok := os.LookupEnv(serverEnv); ok {
		return serverMain(), true
	}
	if spec, ok := os.LookupEnv(workerEnv); ok {
		return workerMain(spec), true
	}
	return 0, false
}
