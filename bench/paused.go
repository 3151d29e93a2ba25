package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	ilclient "github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/metrics"
	"github.com/interlockhq/interlock/wire"
)

// Settings of the paused measurement.
const (
	// progressEvery is how often the paused measurement says on stderr how
	// many runs it has started.
	progressEvery = 10 * time.Second
	// listingReadings is how many times each listing is timed; the median
	// is reported.
	listingReadings = 7
	// listingLimit is the page size of the timed listings, the default of
	// `interlock pending` and GET /v1/interrupts.
	listingLimit = 50
	// heapSitesShown is how many allocation sites the heap growth lists.
	heapSitesShown = 8
	// cliNone, given as --interlock-bin, skips timing `interlock pending`.
	cliNone = "none"
	// cliWait bounds one run of `interlock pending` and one HTTP request.
	cliWait = 2 * time.Minute
)

// pausedDetail is what the paused measurement reads besides the memory
// table: how fast the runs started, what the server stores for them, what
// grew in this process's heap, how long listing them takes, and what the
// metrics' count of the pending index costs.
type pausedDetail struct {
	// Quarters are read before any run is paused and after each quarter.
	Quarters []pausedQuarter `json:"quarters"`
	// Streams are the streams and buckets at the idle reading.
	Streams []streamUsage `json:"streams"`
	// DataDirBefore and DataDirIdle are the size of the server's data
	// directory before any run was paused and at the idle reading.
	DataDirBefore int64 `json:"dataDirBefore"`
	DataDirIdle   int64 `json:"dataDirIdle"`
	// DiskBytesPerRun is the data directory's growth per paused run.
	DiskBytesPerRun float64 `json:"diskBytesPerRun"`
	// ServerRSSBytesPerRun is the server child's resident set growth from
	// before any run was paused to the idle reading, per paused run: every
	// cost, the first quarter's included. 0 when the server runs in this
	// process.
	ServerRSSBytesPerRun float64 `json:"serverRSSBytesPerRun,omitempty"`
	// HeapGrowth are the allocation sites of this process whose live heap
	// grew most from the first quarter to the idle reading. With the
	// server in a child process they are the worker's and the clients';
	// in this process, mostly the server's.
	HeapGrowth []heapSite `json:"heapGrowth"`
	// Listings are the timed listings of the pending runs.
	Listings []listingTiming `json:"listings"`
	// Metrics is what the metrics endpoint's count of the pending index
	// costs this process.
	Metrics *metricsMirror `json:"metrics,omitempty"`
	// StreamHeap is, with the server in this process, the live Go heap
	// each stream and bucket held: freed by purging it (see streamHeaps).
	StreamHeap []streamHeap `json:"streamHeap,omitempty"`
}

// pausedQuarter is a reading with Paused runs waiting.
type pausedQuarter struct {
	Paused int `json:"paused"`
	// Seconds is the time the quarter's runs took to start; RunsPerSec
	// their rate.
	Seconds    float64 `json:"seconds"`
	RunsPerSec float64 `json:"runsPerSec"`
	// Goroutines in this process, the idle clients' included.
	Goroutines int `json:"goroutines"`
	// DataDirBytes is the size of the server's data directory.
	DataDirBytes int64 `json:"dataDirBytes"`
}

// streamUsage is what one stream or bucket holds.
type streamUsage struct {
	Name string `json:"name"`
	// Msgs, Bytes and Subjects are the stream's state: messages, their
	// bytes as JetStream counts them, and distinct subjects (each one an
	// entry of the server's per-subject index).
	Msgs     uint64 `json:"msgs"`
	Bytes    uint64 `json:"bytes"`
	Subjects uint64 `json:"subjects"`
	// DiskBytes is the size of the stream's directory.
	DiskBytes int64 `json:"diskBytes"`
}

// heapSite is the live heap of one allocation site.
type heapSite struct {
	// Site is the function that allocated: the first frame outside the
	// Go runtime, with its package's last path element.
	Site string `json:"site"`
	// Bytes is the growth of its live heap, estimated from the sampled
	// heap profile as pprof does; BytesPerRun that per paused run.
	Bytes       int64   `json:"bytes"`
	BytesPerRun float64 `json:"bytesPerRun"`
}

// listingTiming is one listing of the pending runs, timed several times.
type listingTiming struct {
	// Surface is "client" (client.ListPending in this process, on the
	// service's connection), "cli" (the interlock binary, a process of
	// its own, connecting each time) or "http" (GET /v1/interrupts).
	Surface string `json:"surface"`
	// Query is the listing as its surface spells it.
	Query    string  `json:"query"`
	Readings int     `json:"readings"`
	MedianMs float64 `json:"medianMs"`
	MinMs    float64 `json:"minMs"`
	MaxMs    float64 `json:"maxMs"`
	// Items and Total are what the last reading returned: the page's
	// runs and the runs waiting in all.
	Items int    `json:"items"`
	Total uint64 `json:"total"`
}

// metricsMirror is what the metrics endpoint's count of the pending index
// costs: `interlock serve` runs it unless --metrics "".
type metricsMirror struct {
	// LoadSeconds is how long metrics.Service.Start took: it returns once
	// it has counted the whole pending index, as it does again every
	// metrics.Config.PendingEvery.
	LoadSeconds float64 `json:"loadSeconds"`
	// HeapBytesPerRun is this process's Go heap growth with the metrics
	// started, per paused run.
	HeapBytesPerRun float64 `json:"heapBytesPerRun"`
	// RSSBeforeMB and RSSStartedMB are this process's resident set before
	// the metrics started and with them started, each after a collection.
	RSSBeforeMB  float64 `json:"rssBeforeMB"`
	RSSStartedMB float64 `json:"rssStartedMB"`
	// ScrapeMs is one GET /metrics.
	ScrapeMs float64 `json:"scrapeMs"`
}

// streamHeap is the live Go heap one stream or bucket held, in this
// process.
type streamHeap struct {
	Name        string  `json:"name"`
	Bytes       int64   `json:"bytes"`
	BytesPerRun float64 `json:"bytesPerRun"`
}

// measurePaused starts o.paused runs of w's flow on an Interlock service
// under pausedPrefix and leaves them waiting. It reads memory before,
// after each quarter of the runs, and once more after o.idle without
// traffic; then what the server stores, the listings of the pending runs,
// and the metrics' count of the pending index. say reports progress.
func measurePaused(ctx context.Context, o options, w workload, srv *natsServer, say func(format string, args ...any)) (_ *pausedResult, err error) {
	cli, cleanup, err := interlockBinary(ctx, o.interlockBin, say)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	svc, err := startInterlock(ctx, srv.url, pausedPrefix, "bench", w, o.workers(), o.replicas())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stopInterlock(ctx, svc)) }()
	cl, err := newClient(ctx, srv.url, "bench-paused-client", svc.Names(), w.flow, interlockProtocol{w})
	if err != nil {
		return nil, err
	}
	defer cl.close()
	// A few full runs first, so that "before" is a warm service.
	if err := drive(ctx, o.concurrency, o.concurrency, func(ctx context.Context, i int) error {
		_, _, err := cl.full(ctx, fmt.Sprintf("w-%06d", i))
		return err
	}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	d := &pausedDetail{}
	res := &pausedResult{Runs: o.paused, Server: srv.where, Points: []pausedPoint{{Paused: 0, Memory: settledMemory(srv)}}, Detail: d}
	live0 := liveHeap()
	quarter := func(paused int, spent time.Duration, ran int) error {
		q := pausedQuarter{Paused: paused, Seconds: spent.Seconds(), Goroutines: runtime.NumGoroutine()}
		if spent > 0 {
			q.RunsPerSec = float64(ran) / spent.Seconds()
		}
		var err error
		q.DataDirBytes, err = dirSize(srv.dir)
		d.Quarters = append(d.Quarters, q)
		return err
	}
	if err := quarter(0, 0, 0); err != nil {
		return nil, err
	}
	var (
		spent     time.Duration
		started   atomic.Int64
		firstHeap map[string]int64
	)
	prog := startProgress(o.paused, &started, srv, say)
	for q := 1; q <= 4; q++ {
		from, to := o.paused*(q-1)/4, o.paused*q/4
		begin := time.Now()
		if err := drive(ctx, to-from, o.concurrency, func(ctx context.Context, i int) error {
			if err := cl.pause(ctx, runID(from+i)); err != nil {
				return err
			}
			started.Add(1)
			return nil
		}); err != nil {
			prog.stop()
			return nil, err
		}
		took := time.Since(begin)
		spent += took
		res.Points = append(res.Points, pausedPoint{Paused: to, Memory: settledMemory(srv)})
		if q == 1 {
			firstHeap = heapSites()
		}
		if err := quarter(to, took, to-from); err != nil {
			prog.stop()
			return nil, err
		}
	}
	prog.stop()
	res.Seconds = spent.Seconds()
	say("paused: %d runs started in %.1f s (%.0f/s); waiting %s without traffic", o.paused, spent.Seconds(), float64(o.paused)/spent.Seconds(), o.idle)
	idle := time.NewTimer(o.idle)
	defer idle.Stop()
	select {
	case <-idle.C:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the server to go idle: %w", ctx.Err())
	}
	res.IdleSeconds = o.idle.Seconds()
	res.Idle = settledMemory(srv)
	d.HeapGrowth = heapGrowth(firstHeap, heapSites(), o.paused-o.paused/4)
	if o.memprofile != "" {
		if err := writeHeapProfile(o.memprofile); err != nil {
			return nil, err
		}
	}
	// Growth per paused run from the first quarter to the last, so that
	// caches filled by the first runs do not count.
	first, last := res.Points[1], res.Points[4]
	if n := float64(last.Paused - first.Paused); n > 0 {
		res.HeapBytesPerRun = (last.Memory.HeapInuseMB - first.Memory.HeapInuseMB) * mb / n
		res.RSSBytesPerRun = (last.Memory.RSSFreedMB - first.Memory.RSSFreedMB) * mb / n
		res.ServerRSSBytesPerRun = (last.Memory.ServerRSSMB - first.Memory.ServerRSSMB) * mb / n
	}
	if d.Streams, err = streamUsages(ctx, cl.js, svc.Names(), srv.dir); err != nil {
		return nil, err
	}
	d.DataDirBefore = d.Quarters[0].DataDirBytes
	if d.DataDirIdle, err = dirSize(srv.dir); err != nil {
		return nil, err
	}
	if o.paused > 0 {
		n := float64(o.paused)
		d.DiskBytesPerRun = float64(d.DataDirIdle-d.DataDirBefore) / n
		d.ServerRSSBytesPerRun = (res.Idle.ServerRSSMB - res.Points[0].Memory.ServerRSSMB) * mb / n
	}
	say("paused: server data directory %.1f MB (%.0f B per paused run); timing the listings", float64(d.DataDirIdle)/mb, d.DiskBytesPerRun)
	if d.Listings, err = timeListings(ctx, svc, w.flow, o.paused, srv.url, cli); err != nil {
		return nil, err
	}
	res.PendingInKV = int(d.Listings[0].Total)
	if res.PendingInKV != o.paused {
		return nil, fmt.Errorf("the pending index lists %d runs waiting after pausing %d", res.PendingInKV, o.paused)
	}
	say("paused: starting the metrics, which count the pending index")
	if d.Metrics, err = measureMetricsMirror(ctx, svc, srv, o.paused); err != nil {
		return nil, err
	}
	if srv.where == serverInProcess {
		if d.StreamHeap, err = streamHeaps(ctx, cl.js, svc.Names(), o.paused, live0); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// progress says every progressEvery how many runs have started, until
// stopped.
type progress struct {
	quit chan struct{}
	done sync.WaitGroup
}

// startProgress reports started out of total through say, with the rate
// since the last report and the servers' and this process's memory.
func startProgress(total int, started *atomic.Int64, srv *natsServer, say func(format string, args ...any)) *progress {
	p := &progress{quit: make(chan struct{})}
	p.done.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		begin, last, lastAt := time.Now(), int64(0), time.Now()
		for {
			select {
			case <-p.quit:
				return
			case now := <-t.C:
				n := started.Load()
				line := fmt.Sprintf("paused: %d of %d started (%.0f%%), %.0f/s over the last %.0f s, %.0f/s so far",
					n, total, 100*float64(n)/float64(max(total, 1)), float64(n-last)/now.Sub(lastAt).Seconds(), now.Sub(lastAt).Seconds(), float64(n)/now.Sub(begin).Seconds())
				if rss, _, ok := srv.memory(); ok {
					line += fmt.Sprintf("; server RSS %.0f MB", float64(rss)/mb)
				}
				if rss, ok := currentRSS(); ok {
					line += fmt.Sprintf("; this process RSS %.0f MB", float64(rss)/mb)
				}
				say("%s", line)
				last, lastAt = n, now
			}
		}
	})
	return p
}

func (p *progress) stop() {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	p.done.Wait()
}

// streamUsages reads the state and the directory size of every stream
// and bucket of names.
func streamUsages(ctx context.Context, js jetstream.JetStream, n wire.Names, dir string) ([]streamUsage, error) {
	var us []streamUsage
	for _, name := range streamNames(n) {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("binding stream %s: %w", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading stream %s: %w", name, err)
		}
		u := streamUsage{Name: name, Msgs: info.State.Msgs, Bytes: info.State.Bytes, Subjects: info.State.NumSubjects}
		if u.DiskBytes, err = streamDirSize(dir, name); err != nil {
			return nil, err
		}
		us = append(us, u)
	}
	return us, nil
}

// streamHeaps purges the streams and buckets of names one at a time,
// with the server in this process, and returns the Go heap in use each
// purge freed: live objects, not HeapInuse, which counts whole spans, so
// that objects freed among others still live count. A purge empties the
// stream's per-subject index at once (a deleted stream's is held by its
// timers for minutes). The audit stream denies purges: its row is what
// the others left above baseline, the live heap before any run was
// paused. The
// deduplication window should have passed (--idle longer than it): the
// purges do not empty it.
func streamHeaps(ctx context.Context, js jetstream.JetStream, n wire.Names, paused int, baseline int64) ([]streamHeap, error) {
	heap := liveHeap
	var hs []streamHeap
	add := func(name string, bytes int64) {
		h := streamHeap{Name: name, Bytes: bytes}
		if paused > 0 {
			h.BytesPerRun = float64(bytes) / float64(paused)
		}
		hs = append(hs, h)
	}
	before := heap()
	for _, name := range []string{n.EventStream(), "KV_" + n.RunsBucket(), "KV_" + n.PendingBucket(), n.InStream(), n.ScheduleStream(), n.DeadLetterStream(), "KV_" + n.ConfigBucket()} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("binding stream %s: %w", name, err)
		}
		if err := s.Purge(ctx); err != nil {
			return nil, fmt.Errorf("purging stream %s: %w", name, err)
		}
		after := heap()
		add(name, before-after)
		before = after
	}
	add(n.AuditStream()+" (the rest)", before-baseline)
	return hs, nil
}

// liveHeap collects garbage twice (see settledMemory) and returns the
// bytes of the live heap objects.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	s := []rtmetrics.Sample{{Name: metricHeapObjects}}
	rtmetrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// heapSites returns this process's live heap by allocation site, as of the
// last garbage collection, from the sampled heap profile scaled as pprof
// scales it.
func heapSites() map[string]int64 {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, false)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	rate := float64(runtime.MemProfileRate)
	sites := map[string]int64{}
	for _, r := range recs {
		if r.InUseBytes() <= 0 || r.AllocObjects == 0 {
			continue
		}
		scale := 1.0
		if rate > 1 {
			avg := float64(r.AllocBytes) / float64(r.AllocObjects)
			scale = 1 / (1 - math.Exp(-avg/rate))
		}
		sites[allocSite(r.Stack())] += int64(float64(r.InUseBytes()) * scale)
	}
	return sites
}

// allocSite names the first function of stack outside the Go runtime.
func allocSite(stack []uintptr) string {
	frames := runtime.CallersFrames(stack)
	first := ""
	for {
		f, more := frames.Next()
		name := f.Function
		if first == "" {
			first = name
		}
		if !strings.HasPrefix(name, "runtime.") && !strings.HasPrefix(name, "internal/") && name != "" {
			return shortFunc(name)
		}
		if !more {
			return shortFunc(first)
		}
	}
}

// shortFunc drops all but the last element of a function's package path.
func shortFunc(name string) string {
	if i := strings.LastIndexByte(name[:strings.IndexByte(name+"(", '(')], '/'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// heapGrowth returns the heapSitesShown sites whose live heap grew most
// from before to after, with the growth per run.
func heapGrowth(before, after map[string]int64, runs int) []heapSite {
	var sites []heapSite
	for site, b := range after {
		if g := b - before[site]; g > 0 {
			sites = append(sites, heapSite{Site: site, Bytes: g})
		}
	}
	slices.SortFunc(sites, func(a, b heapSite) int { return int(b.Bytes - a.Bytes) })
	sites = sites[:min(len(sites), heapSitesShown)]
	for i := range sites {
		if runs > 0 {
			sites[i].BytesPerRun = float64(sites[i].Bytes) / float64(runs)
		}
	}
	return sites
}

// interlockBinary returns the interlock binary to time: bin, or when bin
// is "" one built from this module into a temporary directory that
// cleanup removes; "" when bin is cliNone.
func interlockBinary(ctx context.Context, bin string, say func(format string, args ...any)) (path string, cleanup func(), err error) {
	switch bin {
	case cliNone:
		return "", func() {}, nil
	case "":
	default:
		if _, err := os.Stat(bin); err != nil {
			return "", nil, fmt.Errorf("--interlock-bin: %w", err)
		}
		return bin, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "interlock-bench-cli-")
	if err != nil {
		return "", nil, fmt.Errorf("creating a directory for the interlock binary: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	path = filepath.Join(dir, "interlock")
	say("paused: building the interlock binary to time `interlock pending` (--interlock-bin PATH skips this)")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/interlockhq/interlock/cmd/interlock")
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("building the interlock binary (run the benchmark from the module, or give --interlock-bin PATH, or --interlock-bin none): %w\n%s", err, truncate(out, 2000))
	}
	return path, cleanup, nil
}

// listingQuery is one listing, as each surface spells it.
type listingQuery struct {
	q    ilclient.PendingQuery
	cli  []string
	http url.Values
}

// timeListings times the listing of the pending runs: the first page, the
// next page with the first page's cursor, the first page of flow, and
// the newest first; through the Go client in this process, the interlock
// binary cli (unless ""), and the HTTP API, started on loopback for it.
// natsURL, with the workers' credentials, is where the binary connects.
func timeListings(ctx context.Context, svc *interlock.Service, flow string, paused int, natsURL, cli string) ([]listingTiming, error) {
	c := svc.Client("/bench/listing")
	limit := listingLimit
	if paused < 4*listingLimit {
		limit = max(1, paused/4) // so that a small measurement has a next page too
	}
	first, err := c.ListPending(ctx, ilclient.PendingQuery{Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("listing the pending runs: %w", err)
	}
	lim := strconv.Itoa(limit)
	queries := []listingQuery{
		{q: ilclient.PendingQuery{Limit: limit}, cli: []string{"--limit", lim}, http: url.Values{"limit": {lim}}},
	}
	if first.Next != "" {
		queries = append(queries, listingQuery{q: ilclient.PendingQuery{Limit: limit, After: first.Next}, cli: []string{"--limit", lim, "--after", first.Next}, http: url.Values{"limit": {lim}, "cursor": {first.Next}}})
	}
	queries = append(queries,
		listingQuery{q: ilclient.PendingQuery{Limit: limit, Flow: flow}, cli: []string{"--limit", lim, "--flow", flow}, http: url.Values{"limit": {lim}, "flow": {flow}}},
		listingQuery{q: ilclient.PendingQuery{Limit: limit, Newest: true}, cli: []string{"--limit", lim, "--newest"}, http: url.Values{"limit": {lim}, "order": {"newest"}}},
	)
	api, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	if err := api.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWait)
		defer cancel()
		err = errors.Join(err, api.Stop(sctx))
	}()
	hc := &http.Client{Timeout: cliWait}
	defer hc.CloseIdleConnections()
	base := "http://" + api.Addr() + "/v1/interrupts?"
	var ts []listingTiming
	for _, lq := range queries {
		t, err := timeListing("client", describeQuery(lq.q), func() (int, uint64, error) {
			p, err := c.ListPending(ctx, lq.q)
			return len(p.Items), p.Total, err
		})
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
		if cli != "" {
			args := append([]string{"pending"}, lq.cli...)
			t, err := timeListing("cli", "interlock "+strings.Join(shortCursor(args), " "), func() (int, uint64, error) {
				return runPending(ctx, cli, natsURL, args)
			})
			if err != nil {
				return nil, err
			}
			ts = append(ts, t)
		}
		t, err = timeListing("http", "GET /v1/interrupts?"+shortCursorQuery(lq.http), func() (int, uint64, error) {
			return getInterrupts(ctx, hc, base+lq.http.Encode())
		})
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// timeListing times list listingReadings times.
func timeListing(surface, query string, list func() (items int, total uint64, err error)) (listingTiming, error) {
	t := listingTiming{Surface: surface, Query: query, Readings: listingReadings}
	ds := make([]time.Duration, 0, listingReadings)
	for range listingReadings {
		begin := time.Now()
		items, total, err := list()
		ds = append(ds, time.Since(begin))
		if err != nil {
			return t, fmt.Errorf("%s: %s: %w", surface, query, err)
		}
		t.Items, t.Total = items, total
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	t.MedianMs, t.MinMs, t.MaxMs = ms(ds[len(ds)/2]), ms(ds[0]), ms(ds[len(ds)-1])
	return t, nil
}

func describeQuery(q ilclient.PendingQuery) string {
	s := fmt.Sprintf("ListPending limit %d", q.Limit)
	if q.After != "" {
		s += ", after the first page's cursor"
	}
	if q.Flow != "" {
		s += ", flow " + q.Flow
	}
	if q.Newest {
		s += ", newest first"
	}
	return s
}

// shortCursor replaces the value of --after with CURSOR, for the report.
func shortCursor(args []string) []string {
	out := slices.Clone(args)
	for i := 1; i < len(out); i++ {
		if out[i-1] == "--after" {
			out[i] = "CURSOR"
		}
	}
	return out
}

func shortCursorQuery(v url.Values) string {
	if v.Get("cursor") == "" {
		return v.Encode()
	}
	c := url.Values{}
	for k, vs := range v {
		c[k] = vs
	}
	c.Set("cursor", "CURSOR")
	return c.Encode()
}

// runPending runs `interlock <args>` (a pending listing) against the
// server at natsURL under the paused measurement's prefix, and reads the
// runs shown and the total from its last lines ("50 shown, 1000 waiting
// in all.").
func runPending(ctx context.Context, bin, natsURL string, args []string) (int, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, cliWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--prefix", pausedPrefix)...)
	// The URL carries the workers' password: the environment keeps it out
	// of the process list. Settings of the caller's own NATS are left out.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "INTERLOCK_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "INTERLOCK_NATS_URL="+natsURL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%w: %s", err, truncate(stderr.Bytes(), 2000))
	}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var (
			items int
			total uint64
		)
		if _, err := fmt.Sscanf(sc.Text(), "%d shown, %d waiting", &items, &total); err == nil {
			return items, total, nil
		}
		if _, err := fmt.Sscanf(sc.Text(), "%d shown, of %d waiting", &items, &total); err == nil {
			return items, total, nil
		}
	}
	return 0, 0, fmt.Errorf("no \"N shown, M waiting\" line in its output:\n%s", truncate(stdout.Bytes(), 2000))
}

// getInterrupts asks for a page of GET /v1/interrupts.
func getInterrupts(ctx context.Context, hc *http.Client, u string) (int, uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var page httpapi.InterruptPage
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return 0, 0, fmt.Errorf("%s: %s", resp.Status, truncate(b.Bytes(), 2000))
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return 0, 0, fmt.Errorf("decoding the page: %w", err)
	}
	var total uint64
	if page.Total != nil {
		total = *page.Total
	}
	return len(page.Items), total, nil
}

// measureMetricsMirror starts a metrics endpoint on loopback for the
// service, as `interlock serve` does unless --metrics "", times its start
// (which counts the whole pending index), reads this process's Go heap
// and resident set with and without it, and times one scrape.
func measureMetricsMirror(ctx context.Context, svc *interlock.Service, srv *natsServer, paused int) (_ *metricsMirror, err error) {
	before := settledMemory(srv)
	m, err := metrics.New(metrics.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	m.UseJetStream(svc.JetStream(), svc.Names())
	begin := time.Now()
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	res := &metricsMirror{LoadSeconds: time.Since(begin).Seconds()}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWait)
		defer cancel()
		err = errors.Join(err, m.Stop(sctx))
	}()
	loaded := settledMemory(srv)
	res.RSSBeforeMB, res.RSSStartedMB = before.RSSMB, loaded.RSSMB
	if paused > 0 {
		res.HeapBytesPerRun = (loaded.HeapInuseMB - before.HeapInuseMB) * mb / float64(paused)
	}
	hc := &http.Client{Timeout: cliWait}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.Addr()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	begin = time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping the metrics: %w", err)
	}
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body)
	res.ScrapeMs = float64(time.Since(begin)) / float64(time.Millisecond)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, errors.Join(fmt.Errorf("scraping the metrics: %s", resp.Status), err)
	}
	if paused > 0 && !bytes.Contains(body.Bytes(), []byte("interlock_pending_interrupts{")) {
		return nil, fmt.Errorf("the metrics have no interlock_pending_interrupts gauge with %d runs waiting", paused)
	}
	return res, nil
}

// writeText writes the detail of a paused measurement of runs as tables
// for a person.
func (d *pausedDetail) writeText(b *bytes.Buffer, runs int, child bool) error {
	if d == nil {
		return nil
	}
	per := func(x float64) string {
		if runs == 0 {
			return ""
		}
		return fmt.Sprintf("%.0f B", x/float64(runs))
	}
	fmt.Fprintln(b, "starting them, and the server's data directory")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "paused runs\tseconds\truns/s\tgoroutines\tdata dir MB\t")
	for _, q := range d.Quarters {
		fmt.Fprintf(tw, "%d\t%.1f\t%.0f\t%d\t%.1f\t\n", q.Paused, q.Seconds, q.RunsPerSec, q.Goroutines, float64(q.DataDirBytes)/mb)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(b, "per paused run: data dir %.0f B", d.DiskBytesPerRun)
	if child {
		fmt.Fprintf(b, ", server RSS %.0f B (from before the first run to the idle reading)", d.ServerRSSBytesPerRun)
	}
	fmt.Fprintln(b)
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stream\tmsgs\tsubjects\tMB\tdir MB\tdir per paused run\t")
	for _, s := range d.Streams {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%s\t\n", s.Name, s.Msgs, s.Subjects, float64(s.Bytes)/mb, float64(s.DiskBytes)/mb, per(float64(s.DiskBytes)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.StreamHeap) > 0 {
		fmt.Fprintln(b, "live Go heap each stream held (freed by purging it; the audit stream, which denies purges, is the rest above the reading before any run was paused)")
		tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "stream\tMB\tper paused run\t")
		for _, s := range d.StreamHeap {
			fmt.Fprintf(tw, "%s\t%.1f\t%.0f B\t\n", s.Name, float64(s.Bytes)/mb, s.BytesPerRun)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	who := "this process (server, worker and clients)"
	if child {
		who = "this process (worker and clients)"
	}
	fmt.Fprintf(b, "live heap growth of %s by allocation site, first quarter to idle\n", who)
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "site\tMB\tper run\t")
	for _, s := range d.HeapGrowth {
		fmt.Fprintf(tw, "%s\t%.2f\t%.1f B\t\n", s.Site, float64(s.Bytes)/mb, s.BytesPerRun)
	}
	if len(d.HeapGrowth) == 0 {
		fmt.Fprintln(tw, "(no site grew)\t\t\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(b, "listing the pending runs (%d readings each; ms)\n", listingReadings)
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "listing\tmedian\tmin\tmax\titems\ttotal\t")
	for _, l := range d.Listings {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%d\t%d\t\n", l.Query, l.MedianMs, l.MinMs, l.MaxMs, l.Items, l.Total)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if m := d.Metrics; m != nil {
		fmt.Fprintf(b, "metrics' count of the pending index: started (counted) in %.2f s, %.0f B of Go heap per paused run, RSS %.1f -> %.1f MB, one scrape %.1f ms\n", m.LoadSeconds, m.HeapBytesPerRun, m.RSSBeforeMB, m.RSSStartedMB, m.ScrapeMs)
	}
	return nil
}
