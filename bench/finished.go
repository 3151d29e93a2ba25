package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/kv"
)

// finishedPrefix is the prefix of the finished-runs measurement.
const finishedPrefix = "finished"

// defaultKeepFinished is the retention of finished runs in the
// finished-runs measurement: short, so that the measurement sees them go.
const defaultKeepFinished = 10 * time.Second

// finishedMarkerTTL is the marker TTL of the finished-runs measurement, so
// that the expiry markers go soon after the runs.
const finishedMarkerTTL = time.Second

// finishedResult is what keeping finished runs costs the server, with
// every run still kept and once the retention removed them.
type finishedResult struct {
	Runs int `json:"runs"`
	// Server is where the server ran: "process" or "inprocess".
	Server string `json:"server"`
	// KeepFinishedSeconds is the retention the service ran with.
	KeepFinishedSeconds float64 `json:"keepFinishedSeconds"`
	// Before is read before the runs, Kept once every run finished (as
	// every run is kept without a retention), Expired once the retention
	// removed them and the server stayed idle for IdleSeconds.
	Before, Kept, Expired finishedPoint   `json:"-"`
	Points                []finishedPoint `json:"points"`
	IdleSeconds           float64         `json:"idleSeconds"`
}

// finishedPoint is one reading of the finished-runs measurement.
type finishedPoint struct {
	Label string `json:"label"`
	// RunsMsgs and RunsBytes are the runs bucket's stream state.
	RunsMsgs  uint64 `json:"runsMsgs"`
	RunsBytes uint64 `json:"runsBytes"`
	// DiskBytes is the size of the server's data directory, events and
	// audit records included; RunsDiskBytes that of the runs bucket's.
	DiskBytes     int64    `json:"diskBytes"`
	RunsDiskBytes int64    `json:"runsDiskBytes"`
	Memory        memPoint `json:"memory"`
}

// measureFinished runs o.finished runs of w's flow to completion on a
// service that keeps finished runs for o.keepFinished, and reads the
// server's memory, the runs bucket and the data directory: before, with
// every run kept, and after the retention removed them.
func measureFinished(ctx context.Context, o options, w workload, srv *natsServer) (_ *finishedResult, err error) {
	flow, err := interlockFlow(w)
	if err != nil {
		return nil, err
	}
	svc, err := interlock.Start(ctx, interlock.Config{
		Flows:        []*engine.Flow{flow},
		Conn:         connConfig(srv.url, "bench-interlock-"+finishedPrefix),
		Prefix:       finishedPrefix,
		Secret:       secret,
		Instance:     "bench",
		Concurrency:  o.workers(),
		Streams:      bus.StreamConfig{Replicas: o.replicas()},
		Buckets:      kv.BucketConfig{MarkerTTL: finishedMarkerTTL},
		KeepFinished: o.keepFinished,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the Interlock service: %w", err)
	}
	defer func() { err = errors.Join(err, stopInterlock(ctx, svc)) }()
	cl, err := newClient(ctx, srv.url, "bench-finished-client", svc.Names(), w.flow, interlockProtocol{w})
	if err != nil {
		return nil, err
	}
	defer cl.close()
	stream, err := cl.js.Stream(ctx, "KV_"+svc.Names().RunsBucket())
	if err != nil {
		return nil, err
	}
	read := func(label string) (finishedPoint, error) {
		p := finishedPoint{Label: label, Memory: settledMemory(srv)}
		info, err := stream.Info(ctx)
		if err != nil {
			return p, err
		}
		p.RunsMsgs, p.RunsBytes = info.State.Msgs, info.State.Bytes
		if p.DiskBytes, err = dirSize(srv.dir); err != nil {
			return p, err
		}
		p.RunsDiskBytes, err = streamDirSize(srv.dir, "KV_"+svc.Names().RunsBucket())
		return p, err
	}
	res := &finishedResult{Runs: o.finished, Server: srv.where, KeepFinishedSeconds: o.keepFinished.Seconds()}
	if res.Before, err = read("before"); err != nil {
		return nil, err
	}
	if err := drive(ctx, o.finished, o.concurrency, func(ctx context.Context, i int) error {
		_, _, err := cl.full(ctx, runID(i))
		return err
	}); err != nil {
		return nil, err
	}
	if res.Kept, err = read(fmt.Sprintf("%d finished, all kept", o.finished)); err != nil {
		return nil, err
	}
	// Wait for the retention to remove every run and its marker.
	for {
		info, err := stream.Info(ctx)
		if err != nil {
			return nil, err
		}
		if info.State.Msgs == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for finished runs to expire (%d messages left): %w", info.State.Msgs, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	select {
	case <-time.After(o.idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res.IdleSeconds = o.idle.Seconds()
	if res.Expired, err = read(fmt.Sprintf("expired, %.0f s idle", o.idle.Seconds())); err != nil {
		return nil, err
	}
	res.Points = []finishedPoint{res.Before, res.Kept, res.Expired}
	return res, nil
}

// dirSize is the total size of the files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// streamDirSize is the size of the directory of stream name under dir.
func streamDirSize(dir, name string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == name {
			size, err := dirSize(path)
			n += size
			if err != nil {
				return err
			}
			return filepath.SkipDir
		}
		return nil
	})
	return n, err
}
