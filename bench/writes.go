package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/wire"
)

// Phases of the write count.
const (
	phasePause  = "start->paused"
	phaseResume = "resume->done"
)

// writesResult is the write count of both systems (--count-writes): what
// each phase of a run stores, stream by stream.
type writesResult struct {
	// Runs is how many runs each system ran through each phase.
	Runs int `json:"runs"`
	// Fsyncs says how the server's syncs were counted: "strace" (fsync,
	// fdatasync and sync_file_range calls of the server's processes), or
	// why they were not.
	Fsyncs  string          `json:"fsyncs"`
	Systems []systemsWrites `json:"systems"`
}

// systemsWrites is one system's write count.
type systemsWrites struct {
	System string        `json:"system"`
	Phases []phaseWrites `json:"phases"`
}

// phaseWrites is what one phase of every run stored.
type phaseWrites struct {
	Phase   string         `json:"phase"`
	Streams []streamWrites `json:"streams"`
	// Fsyncs counts the server's sync calls over the phase; -1 when not
	// counted.
	Fsyncs int `json:"fsyncs"`
}

// streamWrites is what one phase stored in one stream or bucket.
type streamWrites struct {
	Stream string `json:"stream"`
	// Stored is how far the stream's last sequence advanced: the messages
	// stored, whether or not they are still there (a work queue removes
	// a command once acked, a bucket of one revision its older value).
	Stored uint64 `json:"stored"`
	// Published and Bytes are the messages published to the stream's
	// subjects, as seen by a core NATS subscription, and their subjects,
	// headers and payloads in bytes. Published exceeds Stored when the
	// server refused some (a duplicate Nats-Msg-Id, a failed
	// compare-and-set).
	Published uint64 `json:"published"`
	Bytes     uint64 `json:"bytes"`
}

// measureWrites runs o.countWrites runs of w through each system of
// --systems in turn (by default the floor, then Interlock), each on streams of its own on srv: all started and left
// paused, then all resumed to completion, and counts what each phase
// stored.
func measureWrites(ctx context.Context, o options, w workload, srv *natsServer, say func(string, ...any)) (*writesResult, error) {
	res := &writesResult{Runs: o.countWrites, Fsyncs: fsyncCounting(srv)}
	for _, system := range writeSystems(o.systemList()) {
		say("writes: %s: %d runs to paused, then resumed to done", system, o.countWrites)
		sw, err := countSystemWrites(ctx, o, w, srv, system, res.Fsyncs == fsyncStrace)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", system, err)
		}
		res.Systems = append(res.Systems, sw)
	}
	return res, nil
}

// writeSystems are the systems whose writes are counted for a
// comparison of systems: Interlock's once, whichever way it is driven,
// since its clients do not change what it stores.
func writeSystems(systems []string) []string {
	var out []string
	for _, s := range systems {
		_, _, worker := systemSetup(s, workload{})
		if !slices.Contains(out, worker) {
			out = append(out, worker)
		}
	}
	return out
}

// fsyncStrace is writesResult.Fsyncs when the syncs are counted.
const fsyncStrace = "strace"

// fsyncCounting says whether the server's syncs can be counted, and if
// not, why.
func fsyncCounting(srv *natsServer) string {
	if len(srv.pids) == 0 {
		return "not counted: the server runs in this process (use --server process)"
	}
	if _, err := exec.LookPath("strace"); err != nil {
		return "not counted: strace is not on PATH (apt-get install strace)"
	}
	return fsyncStrace
}

func countSystemWrites(ctx context.Context, o options, w workload, srv *natsServer, system string, trace bool) (_ systemsWrites, err error) {
	sw := systemsWrites{System: system}
	prefix, proto, _ := systemSetup(system, w)
	names, err := wire.NewNames(prefix)
	if err != nil {
		return sw, err
	}
	cl, err := newClient(ctx, srv.url, "bench-writes-"+system, names, w.flow, proto)
	if err != nil {
		return sw, err
	}
	defer cl.close()
	if err := bus.Provision(ctx, cl.js, names, bus.StreamConfig{Replicas: o.replicas()}); err != nil {
		return sw, err
	}
	if err := kv.Provision(ctx, cl.js, names, kv.BucketConfig{Replicas: o.replicas()}); err != nil {
		return sw, err
	}
	ws, err := startWorkers(ctx, workerSpec{
		System: system, Prefix: prefix, Workload: w.name, Workers: o.workers(), Replicas: o.replicas(), Instance: "bench",
	}, srv, 0, os.Stderr)
	if err != nil {
		return sw, err
	}
	defer func() { err = errors.Join(err, ws.stop(context.WithoutCancel(ctx))) }()
	streams, err := writeStreams(ctx, cl.js, names)
	if err != nil {
		return sw, err
	}
	interrupted := make([]*nats.Msg, o.countWrites)
	phases := []struct {
		name string
		do   func(ctx context.Context, i int) error
	}{
		{phasePause, func(ctx context.Context, i int) error {
			sub, err := cl.subscribe(runID(i))
			if err != nil {
				return err
			}
			defer sub.close()
			interrupted[i], err = cl.send(ctx, sub, runID(i), "start", func() (*nats.Msg, error) { return proto.start(names, runID(i)) }, "interrupted")
			return err
		}},
		{phaseResume, func(ctx context.Context, i int) error {
			sub, err := cl.subscribe(runID(i))
			if err != nil {
				return err
			}
			defer sub.close()
			_, err = cl.send(ctx, sub, runID(i), "resume", func() (*nats.Msg, error) { return proto.resume(names, runID(i), interrupted[i]) }, "completed")
			return err
		}},
	}
	for _, ph := range phases {
		pw, err := countPhase(ctx, cl, streams, srv, trace, func(ctx context.Context) error {
			return drive(ctx, o.countWrites, o.concurrency, ph.do)
		})
		if err != nil {
			return sw, fmt.Errorf("%s: %w", ph.name, err)
		}
		pw.Phase = ph.name
		sw.Phases = append(sw.Phases, pw)
	}
	if err := ws.stop(ctx); err != nil {
		return sw, err
	}
	return sw, deleteStreams(ctx, cl.js, names)
}

// writeStream is a stream whose writes are counted, with its subjects.
type writeStream struct {
	name     string
	subjects []string
}

// writeStreams are the streams and buckets of names, the finished-runs
// index's included.
func writeStreams(ctx context.Context, js jetstream.JetStream, names wire.Names) ([]writeStream, error) {
	all := streamNames(names)
	for _, status := range wire.FinishedStatuses {
		all = append(all, names.FinishedStream(status))
	}
	var out []writeStream
	for _, name := range all {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading stream %s: %w", name, err)
		}
		out = append(out, writeStream{name: name, subjects: s.CachedInfo().Config.Subjects})
	}
	return out, nil
}

// countPhase runs do and returns what it stored in streams: each
// stream's last sequence before and after, the messages published to
// its subjects meanwhile, and, if trace, the server's sync calls.
func countPhase(ctx context.Context, cl *client, streams []writeStream, srv *natsServer, trace bool, do func(context.Context) error) (phaseWrites, error) {
	pw := phaseWrites{Fsyncs: -1}
	t := &tap{streams: streams, count: map[string]*streamWrites{}}
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	for _, s := range streams {
		for _, subj := range s.subjects {
			sub, err := cl.nc.Subscribe(subj, t.saw)
			if err != nil {
				return pw, fmt.Errorf("subscribing to %s: %w", subj, err)
			}
			subs = append(subs, sub)
		}
	}
	if err := cl.nc.Flush(); err != nil {
		return pw, err
	}
	before, err := lastSeqs(ctx, cl.js, streams)
	if err != nil {
		return pw, err
	}
	var st *syncTrace
	if trace {
		if st, err = startSyncTrace(ctx, srv.pids); err != nil {
			return pw, err
		}
	}
	err = do(ctx)
	if st != nil {
		n, serr := st.stop()
		err = errors.Join(err, serr)
		pw.Fsyncs = n
	}
	if err != nil {
		return pw, err
	}
	after, err := settledSeqs(ctx, cl, streams, before, t)
	if err != nil {
		return pw, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range streams {
		c := t.count[s.name]
		if c == nil {
			c = &streamWrites{}
		}
		c.Stream, c.Stored = s.name, after[s.name]-before[s.name]
		if c.Stored > 0 || c.Published > 0 {
			pw.Streams = append(pw.Streams, *c)
		}
	}
	return pw, nil
}

// settleWait bounds how long settledSeqs waits for the streams to store
// what was published to them.
const settleWait = 5 * time.Second

// settledSeqs reads the last sequences once the streams have stored what
// the tap saw published: a client hears an event when the server routes
// it, which may be before its stream has stored it. It stops waiting when
// every stream has stored at least as many as were published since
// before, or when the sequences stop moving for 100 ms (a duplicate or a
// refused compare-and-set is published but never stored), or after
// settleWait.
func settledSeqs(ctx context.Context, cl *client, streams []writeStream, before map[string]uint64, t *tap) (map[string]uint64, error) {
	if err := cl.nc.Flush(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(settleWait)
	var last map[string]uint64
	still := time.Now()
	for {
		seqs, err := lastSeqs(ctx, cl.js, streams)
		if err != nil {
			return nil, err
		}
		caught := true
		t.mu.Lock()
		for name, c := range t.count {
			if seqs[name]-before[name] < c.Published {
				caught = false
			}
		}
		t.mu.Unlock()
		if !maps.Equal(seqs, last) {
			last, still = seqs, time.Now()
		}
		if caught || time.Since(still) >= 100*time.Millisecond || time.Now().After(deadline) {
			return seqs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// lastSeqs reads the last sequence of each stream.
func lastSeqs(ctx context.Context, js jetstream.JetStream, streams []writeStream) (map[string]uint64, error) {
	seqs := map[string]uint64{}
	for _, s := range streams {
		st, err := js.Stream(ctx, s.name)
		if err != nil {
			return nil, fmt.Errorf("reading the state of stream %s: %w", s.name, err)
		}
		seqs[s.name] = st.CachedInfo().State.LastSeq
	}
	return seqs, nil
}

// tap counts the messages published to the streams' subjects.
type tap struct {
	streams []writeStream
	mu      sync.Mutex
	count   map[string]*streamWrites
}

func (t *tap) saw(m *nats.Msg) {
	size := uint64(len(m.Subject) + len(m.Data))
	if len(m.Header) > 0 {
		var b bytes.Buffer
		_ = http.Header(m.Header).Write(&b)
		size += uint64(len("NATS/1.0\r\n") + b.Len() + len("\r\n"))
	}
	for _, s := range t.streams {
		if !slices.ContainsFunc(s.subjects, func(f string) bool { return subjectMatches(f, m.Subject) }) {
			continue
		}
		t.mu.Lock()
		c := t.count[s.name]
		if c == nil {
			c = &streamWrites{}
			t.count[s.name] = c
		}
		c.Published++
		c.Bytes += size
		t.mu.Unlock()
		return
	}
}

// subjectMatches reports whether subject matches filter, with NATS
// wildcards (* one token, > the rest).
func subjectMatches(filter, subject string) bool {
	ft, st := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, f := range ft {
		switch {
		case f == ">":
			return len(st) > i
		case i >= len(st):
			return false
		case f != "*" && f != st[i]:
			return false
		}
	}
	return len(ft) == len(st)
}

// syncCalls are the system calls counted as syncs.
var syncCalls = []string{"fsync", "fdatasync", "sync_file_range", "msync"}

// syncTrace is strace counting the sync calls of the server's processes.
type syncTrace struct {
	cmd *exec.Cmd
	out string
	dir string
}

// startSyncTrace attaches strace to pids, and returns once every thread
// they had is traced.
func startSyncTrace(ctx context.Context, pids []int) (*syncTrace, error) {
	dir, err := os.MkdirTemp("", "bench-strace-")
	if err != nil {
		return nil, err
	}
	st := &syncTrace{dir: dir, out: filepath.Join(dir, "summary")}
	threads := 0
	args := []string{"-f", "-c", "-e", "trace=" + strings.Join(syncCalls, ","), "-o", st.out}
	for _, pid := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return nil, fmt.Errorf("listing the threads of server process %d: %w", pid, err)
		}
		threads += len(tasks)
		args = append(args, "-p", strconv.Itoa(pid))
	}
	st.cmd = exec.CommandContext(ctx, "strace", args...)
	stderr, err := st.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := st.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting strace: %w", err)
	}
	attached := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		n := 0
		var lines []string
		for sc.Scan() {
			if strings.Contains(sc.Text(), "attached") {
				// "Process 12 attached", or "Process 12 attached with 9
				// threads" for every thread of a process at once.
				k := 1
				if _, rest, ok := strings.Cut(sc.Text(), "attached with "); ok {
					if m, err := strconv.Atoi(strings.Fields(rest)[0]); err == nil {
						k = m
					}
				}
				before := n
				if n += k; before < threads && n >= threads {
					attached <- nil
				}
			} else if len(lines) < 20 {
				lines = append(lines, sc.Text())
			}
		}
		if n < threads {
			attached <- fmt.Errorf("strace attached %d of %d threads of the server: %s", n, threads, strings.Join(lines, "; "))
		}
	}()
	select {
	case err := <-attached:
		if err != nil {
			_ = st.cmd.Wait()
			return nil, err
		}
	case <-time.After(30 * time.Second):
		_, _ = st.stop()
		return nil, errors.New("strace did not attach to the server's threads within 30 s")
	}
	return st, nil
}

// stop detaches strace and returns the sync calls it counted.
func (st *syncTrace) stop() (int, error) {
	defer func() { _ = os.RemoveAll(st.dir) }()
	_ = st.cmd.Process.Signal(syscall.SIGINT)
	if err := st.cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return -1, fmt.Errorf("stopping strace: %w", err)
		}
	}
	b, err := os.ReadFile(st.out)
	if err != nil {
		return -1, fmt.Errorf("reading strace's summary: %w", err)
	}
	return parseStraceSummary(b)
}

// parseStraceSummary sums the calls of the sync calls in a summary of
// strace -c.
func parseStraceSummary(b []byte) (int, error) {
	n := 0
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 5 || !slices.Contains(syncCalls, f[len(f)-1]) {
			continue
		}
		calls, err := strconv.Atoi(f[3])
		if err != nil {
			return -1, fmt.Errorf("strace's summary line %q: %w", strings.TrimSpace(line), err)
		}
		n += calls
	}
	return n, nil
}

// writeText writes the write count as a table per system.
func (r *writesResult) writeText(b *bytes.Buffer) error {
	if r == nil {
		return nil
	}
	fmt.Fprintf(b, "\nwrites per run, %d runs per phase (fsyncs: %s)\n", r.Runs, r.Fsyncs)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tphase\tstream\tstored/run\tpublished/run\tbytes/run\t")
	per := func(n uint64) float64 { return float64(n) / float64(r.Runs) }
	for _, s := range r.Systems {
		for _, p := range s.Phases {
			var stored, published, bytes uint64
			for _, w := range p.Streams {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%.0f\t\n", s.System, p.Phase, w.Stream, per(w.Stored), per(w.Published), per(w.Bytes))
				stored, published, bytes = stored+w.Stored, published+w.Published, bytes+w.Bytes
			}
			fmt.Fprintf(tw, "%s\t%s\tall\t%.2f\t%.2f\t%.0f\t\n", s.System, p.Phase, per(stored), per(published), per(bytes))
			if p.Fsyncs >= 0 {
				fmt.Fprintf(tw, "%s\t%s\tfsyncs\t%.2f\t\t\t\n", s.System, p.Phase, per(uint64(p.Fsyncs)))
			}
		}
	}
	return tw.Flush()
}
