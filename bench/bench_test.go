package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/wire"
)

// TestMain serves nats-server instead of running the tests when the test
// binary is run again as the server child process, as the bench binary is.
func TestMain(m *testing.M) {
	if dir, ok := os.LookupEnv(serverEnv); ok {
		os.Exit(serverMain(dir, os.Getenv(serverFsyncEnv)))
	}
	goleak.VerifyTestMain(m)
}

// TestRun runs a tiny benchmark of both workloads end to end so the
// program cannot rot.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	args := []string{"--runs", "20", "--concurrency", "4", "--fsync", "lazy", "--workload", "both", "--json"}
	if err := Run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("Run(%v): %v", args, err)
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the JSON report: %v\n%s", err, out.String())
	}
	if len(rep.Modes) != 2 || rep.Modes[0].Workload != "question" || rep.Modes[1].Workload != "approval" {
		t.Fatalf("got modes %+v, want the question workload, then the approval workload", rep.Modes)
	}
	for _, m := range rep.Modes {
		if m.Fsync != "lazy" {
			t.Errorf("%s: fsync %q, want lazy", m.Workload, m.Fsync)
		}
		for name, s := range map[string]*systemResult{"floor": m.Floor, "interlock": m.Interlock} {
			if s == nil {
				t.Fatalf("%s, %s: no result", m.Workload, name)
			}
			if s.Runs != 20 || s.RunsPerSec <= 0 {
				t.Errorf("%s, %s: %d runs at %v runs/s, want 20 runs at a positive rate", m.Workload, name, s.Runs, s.RunsPerSec)
			}
			if s.StartToInterrupted.P99Ms <= 0 || s.ResumeToCompleted.P99Ms <= 0 {
				t.Errorf("%s, %s: latencies %+v and %+v, want positive", m.Workload, name, s.StartToInterrupted, s.ResumeToCompleted)
			}
		}
		if m.Ratio == nil || m.Ratio.RunsPerSec <= 0 {
			t.Errorf("%s: ratio %+v, want a positive runs/s ratio", m.Workload, m.Ratio)
		}
	}
	// A waiting approval carries more than a waiting question.
	for _, s := range []string{"floor", "interlock"} {
		sizes := func(m modeResult) []int {
			if s == "floor" {
				return m.Floor.CheckpointBytes
			}
			return m.Interlock.CheckpointBytes
		}
		q, a := sizes(rep.Modes[0]), sizes(rep.Modes[1])
		if len(q) != 2 || len(a) != 2 || a[0] <= q[0] {
			t.Errorf("%s: checkpoint bytes (waiting, completed) %v for the question, %v for the approval; want two each, the approval's waiting one larger", s, q, a)
		}
	}
	var text bytes.Buffer
	if err := rep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"question workload, lazy fsync", "approval workload, lazy fsync", "interlock/floor"} {
		if !bytes.Contains(text.Bytes(), []byte(want)) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

// writes is what one system wrote for a few runs, once its worker stopped.
type writes struct {
	// inbound is the messages left in the inbound stream: the deadlines'
	// schedules, which no consumer reads.
	inbound uint64
	events  uint64
	audit   uint64
	// runsWrites and pendingWrites are the writes to the buckets (their
	// streams' last sequence), runs and pending what is left in them.
	runsWrites, runs       uint64
	pendingWrites, pending uint64
	// schedule and target are the Nats-Schedule and Nats-Schedule-Target
	// headers of the first schedule, the target without its prefix.
	schedule, target string
}

// TestFloorMirrorsInterlock runs a few runs of each workload through the
// floor and through Interlock and checks that the floor writes what
// Interlock writes: as many messages to each stream and bucket, as many
// left there, and the same deadline.
func TestFloorMirrorsInterlock(t *testing.T) {
	const runs = 3
	for _, w := range []workload{questionWorkload, approvalWorkload} {
		t.Run(w.name, func(t *testing.T) {
			srv, err := startNATS(t.Context(), serverInProcess, mode{name: "lazy", lazy: true}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.stop() })
			names, err := wire.NewNames(floorPrefix)
			if err != nil {
				t.Fatal(err)
			}
			f, err := startFloor(t.Context(), srv.url, names, w, 4)
			if err != nil {
				t.Fatal(err)
			}
			floor := collect(t, srv, w, names, runs, floorProtocol{w}, func() error { return errors.Join(f.stop(t.Context()), f.failure()) })
			svc, err := startInterlock(t.Context(), srv.url, benchPrefix, w, 4)
			if err != nil {
				t.Fatal(err)
			}
			il := collect(t, srv, w, svc.Names(), runs, interlockProtocol{w}, func() error { return stopInterlock(t.Context(), svc) })
			for name, got := range map[string]*writes{"floor": &floor, "interlock": &il} {
				// The deadline is 30 minutes from the start, to the second:
				// check it, then compare the rest.
				if w.approval {
					at, ok := strings.CutPrefix(got.schedule, "@at ")
					deadline, err := time.Parse(time.RFC3339, at)
					if !ok || err != nil || time.Until(deadline) < refundTimeout-time.Minute || time.Until(deadline) > refundTimeout+time.Second {
						t.Errorf("%s: schedule %q, want @at about %s from now", name, got.schedule, refundTimeout)
					}
				}
				got.schedule = ""
			}
			if floor != il {
				t.Errorf("floor wrote %+v, interlock %+v; want the same", floor, il)
			}
			wantInbound, wantWrites := uint64(0), uint64(2*runs)
			if w.approval {
				// The deadlines' schedules; the step's write.
				wantInbound, wantWrites = runs, 3*runs
			}
			if il.inbound != wantInbound || il.events != 4*runs || il.audit != 3*runs || il.runsWrites != wantWrites || il.runs != runs {
				t.Errorf("interlock wrote %+v; want %d inbound messages left, %d events, %d audit records, %d checkpoint writes leaving %d",
					il, wantInbound, 4*runs, 3*runs, wantWrites, runs)
			}
		})
	}
}

// collect drives runs full runs with protocol p, stops the worker with
// stop, and reads what was written under names.
func collect(t *testing.T, srv *natsServer, w workload, names wire.Names, runs int, p protocol, stop func() error) writes {
	t.Helper()
	ctx := t.Context()
	cl, err := newClient(ctx, srv.url, "bench-test-client", names, w.flow, p)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	for i := range runs {
		if _, _, err := cl.full(ctx, runID(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Stopping the worker waits for its last acknowledgements.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The last acknowledgements are sent before the worker stops, but the
	// server removes their commands from the work queue on its own time:
	// wait until no command is left but the deadlines' schedules, which
	// stay until they fire.
	left := uint64(0)
	if w.approval {
		left = uint64(runs)
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		s, err := cl.js.Stream(ctx, names.InStream())
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs <= left || time.Now().After(deadline) {
			break
		}
		<-tick.C
	}
	var got writes
	state := func(stream string) jetstream.StreamState {
		s, err := cl.js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stream == names.InStream() && info.State.Msgs > 0 {
			m, err := s.GetMsg(ctx, info.State.FirstSeq)
			if err != nil {
				t.Fatal(err)
			}
			got.schedule = m.Header.Get(bus.HeaderSchedule)
			got.target = strings.TrimPrefix(m.Header.Get(bus.HeaderScheduleTarget), names.Prefix)
		}
		return info.State
	}
	got.inbound = state(names.InStream()).Msgs
	got.events = state(names.EventStream()).Msgs
	got.audit = state(names.AuditStream()).Msgs
	rs, ps := state("KV_"+names.RunsBucket()), state("KV_"+names.PendingBucket())
	got.runsWrites, got.runs = rs.LastSeq, rs.Msgs
	got.pendingWrites, got.pending = ps.LastSeq, ps.Msgs
	return got
}

// TestRunServerProcess runs a tiny benchmark with the server in a child
// process, the paused check included, and checks that the child's memory is
// reported and that nothing is left behind.
func TestRunServerProcess(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the server's data directory goes
	var out bytes.Buffer
	// The interlock binary is not built here: that alone takes longer
	// than the whole test.
	args := []string{"--runs", "10", "--concurrency", "2", "--paused", "8", "--idle", "0", "--fsync", "lazy", "--server", "process", "--interlock-bin", "none", "--json"}
	if err := Run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("Run(%v): %v", args, err)
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the JSON report: %v\n%s", err, out.String())
	}
	if len(rep.Modes) != 1 {
		t.Fatalf("got %d modes, want 1", len(rep.Modes))
	}
	m := rep.Modes[0]
	if m.Floor == nil || m.Interlock == nil || m.Paused == nil {
		t.Fatalf("got floor %v, interlock %v, paused %v; want all three", m.Floor, m.Interlock, m.Paused)
	}
	for name, s := range map[string]*systemResult{"floor": m.Floor, "interlock": m.Interlock} {
		if s.Server != serverProcess || s.Runs != 10 {
			t.Errorf("%s: server %q, %d runs; want %q, 10", name, s.Server, s.Runs, serverProcess)
		}
		// Not VmHWM >= the sampled peak: Linux updates VmHWM lazily.
		if runtime.GOOS == "linux" && (s.Memory.ServerPeakRSSMB <= 0 || s.Memory.ServerHWMMB <= 0) {
			t.Errorf("%s: server peak RSS %v MB, VmHWM %v MB; want both positive", name, s.Memory.ServerPeakRSSMB, s.Memory.ServerHWMMB)
		}
	}
	p := m.Paused
	if p.Server != serverProcess || p.PendingInKV != 8 || len(p.Points) != 5 {
		t.Errorf("paused: server %q, %d pending, %d points; want %q, 8, 5", p.Server, p.PendingInKV, len(p.Points), serverProcess)
	}
	if runtime.GOOS == "linux" && (p.Idle.ServerRSSMB <= 0 || p.Idle.RSSMB <= 0) {
		t.Errorf("paused: idle reading %+v, want this process's and the server's RSS", p.Idle)
	}
	checkPausedDetail(t, p)
	var text bytes.Buffer
	if err := rep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KV_paused_pending", "GET /v1/interrupts?cursor=CURSOR&limit=2", "metrics' copy of the pending index"} {
		if !bytes.Contains(text.Bytes(), []byte(want)) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in the temporary directory: %s", e.Name())
	}
}

// checkPausedDetail checks the readings of a paused measurement of 8 runs
// beyond memory: the start rate of each quarter, what the streams hold,
// the listings (pages of 2, so that there is a next page) through the Go
// client and the HTTP API, and the metrics' copy of the pending index.
func checkPausedDetail(t *testing.T, p *pausedResult) {
	t.Helper()
	d := p.Detail
	if d == nil {
		t.Fatal("paused: no detail")
	}
	if len(d.Quarters) != 5 {
		t.Fatalf("paused: %d quarter readings, want 5 (before and after each quarter)", len(d.Quarters))
	}
	for _, q := range d.Quarters[1:] {
		if q.RunsPerSec <= 0 || q.Goroutines <= 0 || q.DataDirBytes <= d.Quarters[0].DataDirBytes {
			t.Errorf("paused: quarter reading %+v, want a positive rate and goroutines, and a data dir larger than before (%d B)", q, d.Quarters[0].DataDirBytes)
		}
	}
	streams := map[string]streamUsage{}
	for _, s := range d.Streams {
		streams[s.Name] = s
	}
	// Each paused run has its own subject in the pending bucket and two
	// (started, interrupted) in the events stream.
	if s := streams["KV_paused_pending"]; s.Subjects < 8 || s.DiskBytes <= 0 {
		t.Errorf("paused: pending bucket %+v, want at least 8 subjects on disk", s)
	}
	if s := streams["PAUSED_EVENTS"]; s.Subjects < 16 {
		t.Errorf("paused: events stream %+v, want at least 16 subjects", s)
	}
	if len(d.Streams) != 7 || d.DiskBytesPerRun <= 0 {
		t.Errorf("paused: %d streams, %v B on disk per run; want 7 streams and bytes on disk", len(d.Streams), d.DiskBytesPerRun)
	}
	listings := map[string]int{}
	for _, l := range d.Listings {
		listings[l.Surface]++
		if l.Readings != listingReadings || l.MedianMs <= 0 || l.MinMs > l.MedianMs || l.MedianMs > l.MaxMs {
			t.Errorf("paused: listing %+v, want %d readings, min <= median <= max", l, listingReadings)
		}
		if l.Items != 2 {
			t.Errorf("paused: listing %q returned %d runs, want a page of 2", l.Query, l.Items)
		}
	}
	if listings["client"] != 4 || listings["http"] != 4 || listings["cli"] != 0 {
		t.Errorf("paused: listings by surface %v, want 4 each through the client and the HTTP API, none through the binary", listings)
	}
	if m := d.Metrics; m == nil || m.LoadSeconds <= 0 || m.ScrapeMs <= 0 {
		t.Errorf("paused: metrics' copy %+v, want its load and a scrape timed", m)
	}
}

// TestServerProcess starts the server child, uses it, and checks that
// stopping it reaps the process and removes its data directory.
func TestServerProcess(t *testing.T) {
	srv, err := startNATS(t.Context(), serverProcess, mode{name: "lazy", lazy: true}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.stop() })
	if srv.pid == 0 || srv.pid == os.Getpid() {
		t.Fatalf("server pid %d, want a child's", srv.pid)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	nc, js, err := wire.Connect(ctx, wire.ConnConfig{URL: srv.url, Name: "bench-test"})
	if err != nil {
		t.Fatalf("connecting to %s: %v", srv.url, err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Errorf("JetStream at %s: %v", srv.url, err)
	}
	nc.Close()
	if runtime.GOOS == "linux" {
		if rss, hwm, ok := srv.memory(); !ok || rss == 0 || hwm < rss {
			t.Errorf("server memory: RSS %d, VmHWM %d, ok %v; want positive, VmHWM at least RSS", rss, hwm, ok)
		}
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := srv.stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
	if _, _, ok := srv.memory(); ok {
		t.Errorf("process %d still exists after stop", srv.pid)
	}
	if _, err := os.Stat(srv.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s: %v, want it removed", srv.dir, err)
	}
}

func TestServeRejects(t *testing.T) {
	for _, tt := range []struct{ dir, fsync string }{{"", "lazy"}, {t.TempDir(), "sometimes"}} {
		if err := serve(t.Context(), tt.dir, tt.fsync, bytes.NewReader(nil), io.Discard); err == nil {
			t.Errorf("serve(%q, %q): no error", tt.dir, tt.fsync)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr bool
	}{
		{nil, false},
		{[]string{"--runs", "0", "--paused", "10"}, false},
		{[]string{"--fsync", "always", "--concurrency", "1"}, false},
		{[]string{"--runs", "-1"}, true},
		{[]string{"--concurrency", "0"}, true},
		{[]string{"--fsync", "sometimes"}, true},
		{[]string{"--paused", "-5"}, true},
		{[]string{"--runs", "0"}, true},
		{[]string{"--timeout", "0s"}, true},
		{[]string{"extra"}, true},
		{[]string{"--server", "process"}, false},
		{[]string{"--server", "inprocess", "--paused", "5", "--idle", "0s"}, false},
		{[]string{"--server", "elsewhere"}, true},
		{[]string{"--idle", "-1s"}, true},
		{[]string{"--workload", "approval"}, false},
		{[]string{"--workload", "both", "--concurrency", "1"}, false},
		{[]string{"--workload", "refund"}, true},
		{[]string{"--workload", ""}, true},
	}
	for _, tt := range tests {
		_, err := parse(tt.args, io.Discard)
		if (err != nil) != tt.wantErr {
			t.Errorf("parse(%q): error %v, wantErr %v", tt.args, err, tt.wantErr)
		}
		var u usageError
		if err != nil && !errors.As(err, &u) {
			t.Errorf("parse(%q): %v is not a usage error", tt.args, err)
		}
	}
	if _, err := parse([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parse(-h): %v, want flag.ErrHelp", err)
	}
}
