package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	ilclient "github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/wire"
)

// storeConcurrency is how many starts of stored runs are published at once.
const storeConcurrency = 64

// listTries is how many times a page of the pending index, or of the list
// of runs, is read.
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
	// client.ListPending, as an inbox or the HTTP API lists it. Not read
	// with --stored-finished, which leaves no run waiting.
	ListPageMs float64 `json:"listPageMs"`
	// Finished is set with --stored-finished: the stored runs ran to
	// completion, and FinishedEntries is how many entries the
	// finished-runs index holds.
	Finished        bool   `json:"finished,omitempty"`
	FinishedEntries uint64 `json:"finishedEntries,omitempty"`
	// Listings are the timings of a page of the list of runs, with
	// --stored-finished: at 1,000 runs stored, and at all of them.
	Listings []runsListing `json:"listings,omitempty"`
}

// runsListing is what a page of the list of runs costs with stored runs
// stored, each page of pageSize runs (fewer when fewer are stored).
type runsListing struct {
	Stored int `json:"stored"`
	// All is client.ListRuns of every status (the pending index and the
	// four finished-runs streams, merged), as GET /v1/runs without a
	// filter; Finished of the finished statuses, as the inbox's done
	// view; Completed of one (one stream, the same JetStream work as the
	// floor's read); Tenth the tenth page of every status, read with the
	// ninth page's cursor.
	All       pageCost `json:"all"`
	Finished  pageCost `json:"finished"`
	Completed pageCost `json:"completed"`
	Tenth     pageCost `json:"tenth"`
	// Floor is the raw JetStream floor of a page: the completed runs'
	// stream's state (one stream info request) and one batched direct
	// get of its newest pageSize+1 entries, decoded as nothing.
	Floor pageCost `json:"floor"`
}

// pageCost is the median, over listTries reads, of one page's time, and
// of the bytes and messages its connection received.
type pageCost struct {
	Ms    float64 `json:"ms"`
	Bytes float64 `json:"bytes"`
	Msgs  float64 `json:"msgs"`
}

// pageSize is the size of the pages of the list of runs timed.
const pageSize = 50

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
	if o.storedFinished {
		return r, storeFinished(ctx, o, cl, srv, ws, r, say)
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

// listingStages are the counts of stored runs at which the list of runs
// is timed: 1,000 and n, or n alone when it is no more than 1,000.
func listingStages(n int) []int {
	if n > 1000 {
		return []int{1000, n}
	}
	return []int{n}
}

// storeFinished runs o.stored runs to completion through cl's system, the
// way the throughput measurement does (start, answer), 64 at a time, and
// times a page of the list of runs at each of listingStages. Each run
// leaves its checkpoint, kept --keep-finished (30 days by default), and its
// entry of the finished-runs index, written before its completed event.
func storeFinished(ctx context.Context, o options, cl *client, srv *natsServer, ws workers, r *storedReading, say func(string, ...any)) error {
	r.Finished = true
	say("storing %d runs run to completion", o.stored)
	begin := time.Now()
	var done atomic.Int64
	stop := make(chan struct{})
	var progress sync.WaitGroup
	progress.Go(func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				say("stored %d of %d runs", done.Load(), o.stored)
			}
		}
	})
	defer func() { close(stop); progress.Wait() }()
	stored := 0
	for _, stage := range listingStages(o.stored) {
		base := stored
		if err := drive(ctx, stage-base, storeConcurrency, func(ctx context.Context, i int) error {
			if _, _, err := cl.full(ctx, storedID(base+i)); err != nil {
				return fmt.Errorf("run %s: %w", storedID(base+i), err)
			}
			done.Add(1)
			return nil
		}); err != nil {
			return errors.Join(fmt.Errorf("storing runs: %w", err), ws.failure(), srv.failure())
		}
		stored = stage
		n, err := finishedEntries(ctx, cl.js, cl.names)
		if err != nil {
			return err
		}
		if n != uint64(stage) {
			return fmt.Errorf("the finished-runs index holds %d entries after %d runs finished", n, stage)
		}
		l, err := timeRunsListings(ctx, srv.url, cl.names, stage)
		if err != nil {
			return err
		}
		r.Listings = append(r.Listings, l)
		say("%d runs finished: a page of every status in %.2f ms (%.0f B), of the finished ones %.2f ms, of the completed ones %.2f ms, the tenth page %.2f ms; floor %.2f ms (%.0f B)",
			stage, l.All.Ms, l.All.Bytes, l.Finished.Ms, l.Completed.Ms, l.Tenth.Ms, l.Floor.Ms, l.Floor.Bytes)
	}
	r.Seconds = time.Since(begin).Seconds()
	r.RunsPerSec = float64(o.stored) / r.Seconds
	var err error
	if r.FinishedEntries, err = finishedEntries(ctx, cl.js, cl.names); err != nil {
		return err
	}
	if r.After, err = readServer(srv); err != nil {
		return err
	}
	r.ServerRSSBytesPerRun = (r.After.ServerRSSMB - r.Before.ServerRSSMB) * mb / float64(o.stored)
	r.DiskBytesPerRun = (r.After.DataDirMB - r.Before.DataDirMB) * mb / float64(o.stored)
	say("stored %d finished runs in %.1f s (%.0f/s); server RSS %.1f -> %.1f MB, data directory %.1f -> %.1f MB",
		o.stored, r.Seconds, r.RunsPerSec, r.Before.ServerRSSMB, r.After.ServerRSSMB, r.Before.DataDirMB, r.After.DataDirMB)
	return nil
}

// finishedEntries counts the entries of the finished-runs index of names.
func finishedEntries(ctx context.Context, js jetstream.JetStream, names wire.Names) (uint64, error) {
	var n uint64
	for _, status := range wire.FinishedStatuses {
		s, err := js.Stream(ctx, names.FinishedStream(status))
		if err != nil {
			return 0, fmt.Errorf("binding stream %s: %w", names.FinishedStream(status), err)
		}
		n += s.CachedInfo().State.Msgs
	}
	return n, nil
}

// timeRunsListings times pages of the list of runs of names, on a connection
// of its own whose statistics count what each page received.
func timeRunsListings(ctx context.Context, url string, names wire.Names, stored int) (runsListing, error) {
	l := runsListing{Stored: stored}
	nc, js, err := wire.Connect(ctx, connConfig(url, "bench-list"))
	if err != nil {
		return l, err
	}
	defer nc.Close()
	c := ilclient.New(nc, js, names, clientSource, 0)
	want := min(stored, pageSize)
	list := func(q ilclient.RunsQuery) func() (int, error) {
		return func() (int, error) {
			q.Limit = pageSize
			page, err := c.ListRuns(ctx, q)
			return len(page.Items), err
		}
	}
	cost := func(what string, read func() (int, error)) (pageCost, error) {
		ms, bytes, msgs := make([]float64, listTries), make([]float64, listTries), make([]float64, listTries)
		for i := range listTries {
			before := nc.Stats()
			begin := time.Now()
			n, err := read()
			ms[i] = float64(time.Since(begin)) / float64(time.Millisecond)
			after := nc.Stats()
			if err != nil {
				return pageCost{}, fmt.Errorf("%s: %w", what, err)
			}
			if n != want {
				return pageCost{}, fmt.Errorf("%s: a page of %d runs, want %d", what, n, want)
			}
			bytes[i], msgs[i] = float64(after.InBytes-before.InBytes), float64(after.InMsgs-before.InMsgs)
		}
		return pageCost{Ms: median(ms), Bytes: median(bytes), Msgs: median(msgs)}, nil
	}
	if l.All, err = cost("a page of every status", list(ilclient.RunsQuery{})); err != nil {
		return l, err
	}
	if l.Finished, err = cost("a page of finished runs", list(ilclient.RunsQuery{Statuses: []string{ilclient.StatusFinished}})); err != nil {
		return l, err
	}
	if l.Completed, err = cost("a page of completed runs", list(ilclient.RunsQuery{Statuses: []string{"completed"}})); err != nil {
		return l, err
	}
	if stored >= 10*pageSize {
		q := ilclient.RunsQuery{Limit: pageSize}
		for range 9 {
			page, err := c.ListRuns(ctx, q)
			if err != nil {
				return l, err
			}
			q.After = page.Next
		}
		if l.Tenth, err = cost("the tenth page of every status", list(q)); err != nil {
			return l, err
		}
	}
	stream := names.FinishedStream("completed")
	l.Floor, err = cost("the floor's read", func() (int, error) { return rawPage(ctx, nc, stream, pageSize) })
	return l, err
}

// rawPage is the JetStream floor of a page of a stream's newest entries:
// the stream's last sequence from a stream info request, then one batched
// direct get of the n+1 entries up to it (one more than a page, as a
// page's reader needs to tell whether another page follows). It returns
// the entries of the page.
func rawPage(ctx context.Context, nc *nats.Conn, stream string, n int) (int, error) {
	m, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.INFO."+stream, nil)
	if err != nil {
		return 0, err
	}
	var info struct {
		State struct {
			FirstSeq uint64 `json:"first_seq"`
			LastSeq  uint64 `json:"last_seq"`
		} `json:"state"`
	}
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return 0, err
	}
	start := max(info.State.FirstSeq, info.State.LastSeq-min(info.State.LastSeq, uint64(n)))
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(map[string]any{"seq": start, "batch": n + 1})
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return 0, err
	}
	got := 0
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return 0, err
		}
		if m.Header.Get("Status") != "" {
			return min(got, n), nil
		}
		got++
	}
}

// median is the median of xs, which it sorts.
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
