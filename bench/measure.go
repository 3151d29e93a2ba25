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
	floorPrefix  = "floor"
	benchPrefix  = "bench"
	pausedPrefix = "paused"
)

// runMode runs the measurements o asks for with workload w and fsync mode
// m: the throughput measurements (floor, then Interlock) on one server, the
// paused check on another, each server in a fresh directory removed at
// the end, in this process or in a child process as o says.
func runMode(ctx context.Context, o options, w workload, m mode, progress io.Writer) (_ modeResult, err error) {
	res := modeResult{Workload: w.name, Fsync: m.name}
	say := func(format string, args ...any) {
		fmt.Fprintf(progress, "bench: %s, fsync=%s: "+format+"\n", append([]any{w.name, m.name}, args...)...)
	}
	if o.runs > 0 {
		err := withServer(ctx, o.serverFor(false), m, progress, func(srv *natsServer) error {
			say("floor: %d runs at concurrency %d (+%d warm-up), server %s", o.runs, o.concurrency, o.warmupRuns(), srv.describe())
			floor, err := measureFloor(ctx, o, w, srv)
			if err != nil {
				return fmt.Errorf("floor: %w", err)
			}
			res.Floor = floor
			say("floor: %.0f runs/s", floor.RunsPerSec)
			say("interlock: %d runs at concurrency %d (+%d warm-up)", o.runs, o.concurrency, o.warmupRuns())
			il, err := measureInterlock(ctx, o, w, srv)
			if err != nil {
				return fmt.Errorf("interlock: %w", err)
			}
			res.Interlock = il
			say("interlock: %.0f runs/s", il.RunsPerSec)
			res.Ratio = ratios(floor, il)
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	if o.paused > 0 {
		err := withServer(ctx, o.serverFor(true), m, progress, func(srv *natsServer) error {
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
	if o.finished > 0 {
		err := withServer(ctx, o.serverFor(true), m, progress, func(srv *natsServer) error {
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

// withServer starts a server where says, calls do with it, and stops it.
func withServer(ctx context.Context, where string, m mode, stderr io.Writer, do func(*natsServer) error) (err error) {
	srv, err := startNATS(ctx, where, m, stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, srv.stop()) }()
	return do(srv)
}

// measureFloor measures the hand-written JetStream floor doing the work of
// workload w under floorPrefix.
func measureFloor(ctx context.Context, o options, w workload, srv *natsServer) (_ *systemResult, err error) {
	names, err := wire.NewNames(floorPrefix)
	if err != nil {
		return nil, err
	}
	f, err := startFloor(ctx, srv.url, names, w, o.workers())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, f.stop(context.WithoutCancel(ctx))) }()
	cl, err := newClient(ctx, srv.url, "bench-floor-client", names, w.flow, floorProtocol{w})
	if err != nil {
		return nil, err
	}
	defer cl.close()
	res, err := measure(ctx, o, cl, srv)
	if err != nil {
		return nil, errors.Join(err, f.failure())
	}
	if err := f.failure(); err != nil {
		return nil, err
	}
	if res.CheckpointBytes, err = checkpointBytes(ctx, cl, names); err != nil {
		return nil, err
	}
	if err := f.stop(ctx); err != nil {
		return nil, err
	}
	return res, deleteStreams(ctx, cl.js, names)
}

// measureInterlock measures an Interlock service running the flow of w
// under benchPrefix.
func measureInterlock(ctx context.Context, o options, w workload, srv *natsServer) (_ *systemResult, err error) {
	svc, err := startInterlock(ctx, srv.url, benchPrefix, w, o.workers())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stopInterlock(ctx, svc)) }()
	cl, err := newClient(ctx, srv.url, "bench-interlock-client", svc.Names(), w.flow, interlockProtocol{w})
	if err != nil {
		return nil, err
	}
	defer cl.close()
	res, err := measure(ctx, o, cl, srv)
	if err != nil {
		return nil, err
	}
	if res.CheckpointBytes, err = checkpointBytes(ctx, cl, svc.Names()); err != nil {
		return nil, err
	}
	if o.memprofile != "" && o.paused == 0 {
		if err := writeHeapProfile(o.memprofile); err != nil {
			return nil, err
		}
	}
	if err := stopInterlock(ctx, svc); err != nil {
		return nil, err
	}
	return res, deleteStreams(ctx, cl.js, svc.Names())
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

// measure drives the warm-up runs, then o.runs full runs at o.concurrency,
// recording both latencies of every run and peak memory, the server's too
// when it runs in a child process.
func measure(ctx context.Context, o options, cl *client, srv *natsServer) (*systemResult, error) {
	if err := drive(ctx, o.warmupRuns(), o.concurrency, func(ctx context.Context, i int) error {
		_, _, err := cl.full(ctx, fmt.Sprintf("w-%06d", i))
		return err
	}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	toInterrupted := make([]time.Duration, o.runs)
	toCompleted := make([]time.Duration, o.runs)
	runtime.GC()
	s := startSampler(sampleEvery, srv)
	begin := time.Now()
	err := drive(ctx, o.runs, o.concurrency, func(ctx context.Context, i int) error {
		var err error
		toInterrupted[i], toCompleted[i], err = cl.full(ctx, runID(i))
		return err
	})
	wall := time.Since(begin)
	peak := s.stop()
	if err != nil {
		return nil, err
	}
	return &systemResult{
		Runs: o.runs, Server: srv.where, Seconds: wall.Seconds(), RunsPerSec: float64(o.runs) / wall.Seconds(),
		StartToInterrupted: latencies(toInterrupted), ResumeToCompleted: latencies(toCompleted),
		Memory: peak,
	}, nil
}

// deleteStreams deletes the streams and buckets of names, once their
// workers have stopped, so that the server's memory for them is released
// before the next measurement.
func deleteStreams(ctx context.Context, js jetstream.JetStream, names wire.Names) error {
	for _, s := range []string{names.InStream(), names.EventStream(), names.AuditStream(), names.DeadLetterStream()} {
		if err := js.DeleteStream(ctx, s); err != nil {
			return fmt.Errorf("deleting stream %s: %w", s, err)
		}
	}
	for _, b := range []string{names.RunsBucket(), names.PendingBucket(), names.ConfigBucket()} {
		if err := js.DeleteKeyValue(ctx, b); err != nil {
			return fmt.Errorf("deleting bucket %s: %w", b, err)
		}
	}
	return nil
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
