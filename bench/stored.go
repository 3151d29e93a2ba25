package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	ilclient "github.com/interlockhq/interlock/client"
)

// storeConcurrency is how many starts of stored runs are published at once.
const storeConcurrency = 64

// listTries is how many times the first page of the pending index is read.
const listTries = 5

// storedReading is what the runs a leg stored before it measured cost the
// server: runs started through the system's own start path and left
// waiting at the interrupt.
type storedReading struct {
	Runs int `json:"runs"`
	// Seconds is how long storing them took: from the first start
	// published until the pending index held every run.
	Seconds    float64 `json:"seconds"`
	RunsPerSec float64 `json:"runsPerSec"`
	// Before is read once the workers consume, before any run is stored;
	// After once every run is stored.
	Before serverReading `json:"before"`
	After  serverReading `json:"after"`
	// ServerRSSBytesPerRun and DiskBytesPerRun are the growth of the
	// server's resident set and data directory per stored run.
	ServerRSSBytesPerRun float64 `json:"serverRSSBytesPerRun"`
	DiskBytesPerRun      float64 `json:"diskBytesPerRun"`
	// PendingEntries is how many entries the pending index holds.
	PendingEntries uint64 `json:"pendingEntries"`
	// ListPageMs is the median time, over listTries reads, of reading the
	// first page of the pending index (50 entries) with
	// client.ListPending, as an inbox or the HTTP API lists it.
	ListPageMs float64 `json:"listPageMs"`
}

// serverReading is the server's memory and disk at one moment.
type serverReading struct {
	// ServerRSSMB and ServerHWMMB are the resident set (VmRSS) and its
	// peak so far (VmHWM) of the server's child processes, summed over
	// its nodes; 0 when it runs in this process.
	ServerRSSMB float64 `json:"serverRSSMB"`
	ServerHWMMB float64 `json:"serverHWMMB"`
	// DataDirMB is the size of its data directory, every node's.
	DataDirMB float64 `json:"dataDirMB"`
}

func readServer(srv *natsServer) (serverReading, error) {
	var r serverReading
	if rss, hwm, ok := srv.memory(); ok {
		r.ServerRSSMB, r.ServerHWMMB = float64(rss)/mb, float64(hwm)/mb
	}
	n, err := dirSize(srv.dir)
	if err != nil {
		return r, fmt.Errorf("reading the size of the data directory %s: %w", srv.dir, err)
	}
	r.DataDirMB = float64(n) / mb
	return r, nil
}

// storedID is the id of stored run i.
func storedID(i int) string { return fmt.Sprintf("s-%06d", i) }

// storeRuns starts o.stored runs through cl's system, publishing their
// starts to the inbound stream, and returns once the pending index holds
// every one: each waits at the interrupt, as runs waiting for people do.
// It reads the server before and after, and times a listing of the
// pending index.
func storeRuns(ctx context.Context, o options, cl *client, srv *natsServer, ws workers, say func(string, ...any)) (*storedReading, error) {
	r := &storedReading{Runs: o.stored}
	var err error
	if r.Before, err = readServer(srv); err != nil {
		return nil, err
	}
	bucket := cl.names.PendingBucket()
	stream, err := cl.js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return nil, fmt.Errorf("binding the stream of bucket %s: %w", bucket, err)
	}
	say("storing %d runs left waiting at the interrupt", o.stored)
	begin := time.Now()
	if err := drive(ctx, o.stored, storeConcurrency, func(ctx context.Context, i int) error {
		run := storedID(i)
		m, err := cl.proto.start(cl.names, run)
		if err != nil {
			return fmt.Errorf("run %s: encoding start: %w", run, err)
		}
		if _, err := cl.js.PublishMsg(ctx, m); err != nil {
			return fmt.Errorf("run %s: publishing start to %s: %w", run, m.Subject, err)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("storing runs: %w", err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastSaid := time.Now()
	for {
		info, err := stream.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the state of bucket %s: %w", bucket, err)
		}
		r.PendingEntries = info.State.Msgs
		if r.PendingEntries >= uint64(o.stored) {
			break
		}
		if err := ws.failure(); err != nil {
			return nil, err
		}
		if err := srv.failure(); err != nil {
			return nil, err
		}
		if time.Since(lastSaid) >= 10*time.Second {
			say("stored %d of %d runs", r.PendingEntries, o.stored)
			lastSaid = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %d stored runs to wait at the interrupt (%d so far): %w", o.stored, r.PendingEntries, ctx.Err())
		case <-tick.C:
		}
	}
	r.Seconds = time.Since(begin).Seconds()
	r.RunsPerSec = float64(o.stored) / r.Seconds
	if r.PendingEntries != uint64(o.stored) {
		return nil, fmt.Errorf("bucket %s holds %d entries after storing %d runs", bucket, r.PendingEntries, o.stored)
	}
	if r.After, err = readServer(srv); err != nil {
		return nil, err
	}
	r.ServerRSSBytesPerRun = (r.After.ServerRSSMB - r.Before.ServerRSSMB) * mb / float64(o.stored)
	r.DiskBytesPerRun = (r.After.DataDirMB - r.Before.DataDirMB) * mb / float64(o.stored)
	if r.ListPageMs, err = listPage(ctx, cl, min(o.stored, ilclient.DefaultPendingLimit)); err != nil {
		return nil, err
	}
	say("stored %d runs in %.1f s (%.0f/s); server RSS %.1f -> %.1f MB, data directory %.1f -> %.1f MB; first page of the pending index in %.2f ms",
		o.stored, r.Seconds, r.RunsPerSec, r.Before.ServerRSSMB, r.After.ServerRSSMB, r.Before.DataDirMB, r.After.DataDirMB, r.ListPageMs)
	return r, nil
}

// listPage reads the first page of cl's pending index listTries times
// with client.ListPending, checks that it holds want entries, and returns
// the median time in ms.
func listPage(ctx context.Context, cl *client, want int) (float64, error) {
	c := ilclient.New(cl.nc, cl.js, cl.names, clientSource, 0)
	took := make([]time.Duration, listTries)
	for i := range took {
		begin := time.Now()
		page, err := c.ListPending(ctx, ilclient.PendingQuery{})
		took[i] = time.Since(begin)
		if err != nil {
			return 0, fmt.Errorf("listing the pending index: %w", err)
		}
		if len(page.Items) != want {
			return 0, fmt.Errorf("the first page of the pending index holds %d entries, want %d", len(page.Items), want)
		}
	}
	slices.Sort(took)
	return float64(took[len(took)/2]) / float64(time.Millisecond), nil
}
