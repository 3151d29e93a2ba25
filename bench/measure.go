package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/wire"
)

// Prefixes of the measurements: each has its own streams and buckets.
const (
	floorPrefix   = "floor"
	minimumPrefix = "minimum"
	benchPrefix   = "bench"
	pausedPrefix  = "paused"
)

// runMode runs the measurements o asks for with workload w and fsync mode
// m: the throughput measurements (the floor and Interlock, in the order
// floor, Interlock, Interlock, floor, for each count of worker processes)
// on one server, or with stored runs on a server per leg; the paused
// check and the finished runs on servers of their own. Each server is in
// a fresh directory removed at the end, in child processes or in this
// process as o says.
func runMode(ctx context.Context, o options, w workload, m mode, progress io.Writer) (_ modeResult, err error) {
	res := modeResult{Workload: w.name, Fsync: m.name}
	say := func(format string, args ...any) {
		fmt.Fprintf(progress, "bench: %s, fsync=%s: "+format+"\n", append([]any{w.name, m.name}, args...)...)
	}
	if o.runs > 0 {
		measureAll := func(srv *natsServer) error {
			for _, procs := range o.procCounts() {
				c, err := compare(ctx, o, w, m, procs, srv, progress, say)
				if err != nil {
					return err
				}
				say("workers %s: %s", workersWhere(procs), c.summary())
				if procs == 0 {
					res.Floor, res.Interlock, res.Ratio, res.Legs, res.Systems = c.Floor, c.Interlock, c.Ratio, c.Legs, c.Systems
				} else {
					res.WorkerProcs = append(res.WorkerProcs, c)
				}
			}
			return nil
		}
		if o.stored > 0 {
			err = measureAll(nil) // a server per leg
		} else {
			err = withServer(ctx, o, m, progress, measureAll)
		}
		if err != nil {
			return res, err
		}
	}
	if o.paused > 0 {
		err := withServer(ctx, o, m, progress, func(srv *natsServer) error {
			say("paused: starting %d runs and leaving them at the interrupt, server %s", o.paused, srv.describe())
			p, err := measurePaused(ctx, o, w, srv, say)
			if err != nil {
				return fmt.Errorf("paused runs: %w", err)
			}
			res.Paused = p
			before, after := p.Points[0].Memory, p.Idle
			say("paused: this process: Go heap %.1f -> %.1f MB, RSS %.1f -> %.1f MB (after %.0f s idle)", before.HeapInuseMB, after.HeapInuseMB, before.RSSMB, after.RSSMB, p.IdleSeconds)
			if p.Server == serverProcess {
				say("paused: server process: RSS %.1f -> %.1f MB, VmHWM %.1f MB", before.ServerRSSMB, after.ServerRSSMB, after.ServerHWMMB)
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	if o.countWrites > 0 {
		err := withServer(ctx, o, m, progress, func(srv *natsServer) error {
			wr, err := measureWrites(ctx, o, w, srv, say)
			if err != nil {
				return fmt.Errorf("write count: %w", err)
			}
			res.Writes = wr
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	if o.finished > 0 {
		err := withServer(ctx, o, m, progress, func(srv *natsServer) error {
			say("finished: %d runs to completion, kept %s, server %s", o.finished, o.keepFinished, srv.describe())
			f, err := measureFinished(ctx, o, w, srv)
			if err != nil {
				return fmt.Errorf("finished runs: %w", err)
			}
			res.Finished = f
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// withServer starts the server o asks for (where, and how many nodes)
// with fsync mode m, calls do with it, and stops it.
func withServer(ctx context.Context, o options, m mode, stderr io.Writer, do func(*natsServer) error) (err error) {
	srv, err := startNATS(ctx, o.server, m, o.cluster, stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, srv.stop()) }()
	return do(srv)
}

func runID(i int) string { return fmt.Sprintf("r-%06d", i) }

// sizeRun is the run checkpointBytes leaves waiting.
const sizeRun = "size-waiting"

// checkpointBytes returns the size of a waiting checkpoint, that of a run
// started once the measurement is over and left waiting, and of the first
// measured run's completed one. A finished run's write rolls its older
// revisions up, so the completed run has only the one.
func checkpointBytes(ctx context.Context, cl *client, names wire.Names) ([]int, error) {
	if err := cl.pause(ctx, sizeRun); err != nil {
		return nil, fmt.Errorf("starting a run to read its waiting checkpoint: %w", err)
	}
	var sizes []int
	for _, run := range []string{sizeRun, runID(0)} {
		revs, err := checkpointSizes(ctx, cl.js, names, cl.flow, run)
		if err != nil {
			return nil, err
		}
		if len(revs) == 0 {
			return nil, fmt.Errorf("no checkpoint of run %s", run)
		}
		sizes = append(sizes, revs[len(revs)-1])
	}
	return sizes, nil
}

// measure drives the warm-up runs, then runs full runs at o.concurrency,
// recording both latencies of every run and peak memory, the server's
// too when it runs in child processes, and the workers' when they run in
// the child processes workerPIDs.
func measure(ctx context.Context, o options, runs int, cl *client, srv *natsServer, workerPIDs []int) (*systemResult, error) {
	if err := drive(ctx, o.warmupRuns(), o.concurrency, func(ctx context.Context, i int) error {
		_, _, err := cl.full(ctx, fmt.Sprintf("w-%06d", i))
		return err
	}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	toInterrupted := make([]time.Duration, runs)
	toCompleted := make([]time.Duration, runs)
	runtime.GC()
	s := startSampler(sampleEvery, srv, workerPIDs)
	cpu := startCPU(srv, workerPIDs)
	begin := time.Now()
	err := drive(ctx, runs, o.concurrency, func(ctx context.Context, i int) error {
		var err error
		toInterrupted[i], toCompleted[i], err = cl.full(ctx, runID(i))
		return err
	})
	wall := time.Since(begin)
	used := cpu.perRun(runs)
	peak := s.stop()
	if err != nil {
		return nil, err
	}
	return &systemResult{
		Runs: runs, Server: srv.where, Seconds: wall.Seconds(), RunsPerSec: float64(runs) / wall.Seconds(),
		StartToInterrupted: latencies(toInterrupted), ResumeToCompleted: latencies(toCompleted),
		Memory: peak, CPUMsPerRun: used.self, ServerCPUMsPerRun: used.server, WorkersCPUMsPerRun: used.workers,
		startSamples: toInterrupted, resumeSamples: toCompleted,
	}, nil
}

// deleteStreams deletes the streams and buckets of names, once their
// workers have stopped, so that the server's memory for them is released
// before the next measurement.
func deleteStreams(ctx context.Context, js jetstream.JetStream, names wire.Names) error {
	for _, s := range streamNames(names) {
		if err := js.DeleteStream(ctx, s); err != nil {
			return fmt.Errorf("deleting stream %s: %w", s, err)
		}
	}
	return nil
}

// streamNames are the streams of names, the buckets' included.
func streamNames(names wire.Names) []string {
	return []string{
		names.InStream(), names.ScheduleStream(), names.EventStream(), names.AuditStream(), names.DeadLetterStream(),
		"KV_" + names.RunsBucket(), "KV_" + names.PendingBucket(), "KV_" + names.ConfigBucket(),
	}
}

// drive runs do for indexes 0..n-1 on c goroutines, each taking the next
// index from a shared counter. The first error stops the others and is
// returned.
func drive(ctx context.Context, n, c int, do func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range min(c, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}
