package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/wire"
)

// TestMain serves nats-server instead of running the tests when the test
// binary is run again as the server child process, as the bench binary is.
func TestMain(m *testing.M) {
	if code, ok := childMain(); ok {
		os.Exit(code)
	}
	// The race detector sleeps a second before a process exits, which
	// every server and worker process of a test would wait for in turn:
	// the children inherit this.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		if err := os.Setenv("GORACE", "atexit_sleep_ms=0"); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}

// TestRun runs a tiny benchmark of both workloads end to end so the
// program cannot rot: the server in a child process, each system in two
// legs, in the order floor, interlock, interlock, floor.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	args := []string{"--runs", "21", "--concurrency", "4", "--fsync", "lazy", "--workload", "both", "--json"}
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
			if s.Runs != 21 || s.RunsPerSec <= 0 || s.Server != serverProcess {
				t.Errorf("%s, %s: %d runs at %v runs/s, server %q; want 21 runs at a positive rate, server %q", m.Workload, name, s.Runs, s.RunsPerSec, s.Server, serverProcess)
			}
			if s.StartToInterrupted.P99Ms <= 0 || s.ResumeToCompleted.P99Ms <= 0 {
				t.Errorf("%s, %s: latencies %+v and %+v, want positive", m.Workload, name, s.StartToInterrupted, s.ResumeToCompleted)
			}
		}
		if m.Ratio == nil || m.Ratio.RunsPerSec <= 0 || runtime.GOOS == "linux" && m.Ratio.CPUPerRun <= 0 {
			t.Errorf("%s: ratio %+v, want positive runs/s and CPU per run ratios", m.Workload, m.Ratio)
		}
		checkLegs(t, m.Workload, &comparison{Floor: m.Floor, Interlock: m.Interlock, Ratio: m.Ratio, Legs: m.Legs}, 21, 1)
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

// checkLegs checks that c ran the floor, interlock, interlock and floor
// legs, runs in all per system, the first leg of each taking the odd run,
// on streams of the given replicas, and that the combined figures are
// the legs'.
func checkLegs(t *testing.T, what string, c *comparison, runs, replicas int) {
	t.Helper()
	if len(c.Legs) != 4 {
		t.Fatalf("%s: %d legs, want 4", what, len(c.Legs))
	}
	for i, l := range c.Legs {
		want := options{}.legOrder()[i]
		wantRuns := runs / 2
		if i < 2 {
			wantRuns = (runs + 1) / 2
		}
		if l.System != want || l.Runs != wantRuns || l.RunsPerSec <= 0 || l.Replicas != replicas {
			t.Errorf("%s: leg %d is %s with %d runs at %v runs/s, replicas %d; want %s with %d runs at a positive rate, replicas %d", what, i+1, l.System, l.Runs, l.RunsPerSec, l.Replicas, want, wantRuns, replicas)
		}
	}
	for name, x := range map[string]struct {
		got  *systemResult
		legs [2]legResult
	}{"floor": {c.Floor, [2]legResult{c.Legs[0], c.Legs[3]}}, "interlock": {c.Interlock, [2]legResult{c.Legs[1], c.Legs[2]}}} {
		a, b := x.legs[0], x.legs[1]
		wantRate := float64(a.Runs+b.Runs) / (a.Seconds + b.Seconds)
		if x.got.Runs != runs || x.got.RunsPerSec != wantRate {
			t.Errorf("%s: combined %d runs at %v runs/s; want %d at %v, the legs' runs over their seconds", what+", "+name, x.got.Runs, x.got.RunsPerSec, runs, wantRate)
		}
	}
	if want := c.Interlock.RunsPerSec / c.Floor.RunsPerSec; c.Ratio.RunsPerSec != want {
		t.Errorf("%s: runs/s ratio %v, want the combined figures' %v", what, c.Ratio.RunsPerSec, want)
	}
}

// TestRunGoClient runs both workloads with Interlock driven through the Go
// client package against Interlock driven with raw CloudEvents (--client
// go): the legs are Interlock's, the raw client's in the floor's place.
func TestRunGoClient(t *testing.T) {
	var out bytes.Buffer
	args := []string{"--runs", "6", "--concurrency", "3", "--fsync", "lazy", "--workload", "both", "--client", "go", "--server", "inprocess", "--json"}
	if err := Run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("Run(%v): %v", args, err)
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the JSON report: %v\n%s", err, out.String())
	}
	if rep.Client != clientGo || len(rep.Modes) != 2 {
		t.Fatalf("client %q, %d modes; want go, 2", rep.Client, len(rep.Modes))
	}
	want := []string{systemInterlock, systemClient, systemClient, systemInterlock}
	for _, m := range rep.Modes {
		if len(m.Legs) != len(want) {
			t.Fatalf("%s: %d legs, want %d", m.Workload, len(m.Legs), len(want))
		}
		for i, l := range m.Legs {
			if l.System != want[i] || l.RunsPerSec <= 0 {
				t.Errorf("%s: leg %d is %s at %v runs/s; want %s at a positive rate", m.Workload, i+1, l.System, l.RunsPerSec, want[i])
			}
		}
		if m.Interlock == nil || m.Interlock.Runs != 6 {
			t.Errorf("%s: the Go client's result is %+v, want 6 runs", m.Workload, m.Interlock)
		}
	}
}

// TestRunThreeSystems compares the minimum floor, Interlock driven with
// raw CloudEvents and Interlock driven through the Go client package in
// one invocation: the legs run in the order A B C C B A, each system's
// runs split over its two legs, and every ratio is against the first
// system, p99 start->interrupted included.
func TestRunThreeSystems(t *testing.T) {
	var out bytes.Buffer
	const runs = 7
	args := []string{"--runs", strconv.Itoa(runs), "--concurrency", "3", "--fsync", "lazy", "--systems", "minimum,raw,go", "--server", "inprocess", "--json"}
	if err := Run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("Run(%v): %v", args, err)
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the JSON report: %v\n%s", err, out.String())
	}
	if len(rep.Modes) != 1 {
		t.Fatalf("%d modes, want 1", len(rep.Modes))
	}
	m := rep.Modes[0]
	order := []string{systemMinimum, systemInterlock, systemClient, systemClient, systemInterlock, systemMinimum}
	if len(m.Legs) != len(order) {
		t.Fatalf("%d legs, want %d", len(m.Legs), len(order))
	}
	for i, l := range m.Legs {
		wantRuns := runs / 2
		if i < 3 {
			wantRuns = (runs + 1) / 2
		}
		if l.System != order[i] || l.Runs != wantRuns || l.RunsPerSec <= 0 {
			t.Errorf("leg %d is %s with %d runs at %v runs/s; want %s with %d runs at a positive rate", i+1, l.System, l.Runs, l.RunsPerSec, order[i], wantRuns)
		}
	}
	if len(m.Systems) != 3 {
		t.Fatalf("%d systems' figures, want 3", len(m.Systems))
	}
	first := m.Systems[0].Result
	for k, f := range m.Systems {
		if f.System != order[k] || f.Result == nil || f.Result.Runs != runs || f.Result.StartToInterrupted.P99Ms <= 0 {
			t.Fatalf("system %d: %+v, want %s with %d runs and a positive p99", k+1, f, order[k], runs)
		}
		a, b := m.Legs[k], m.Legs[len(order)-1-k]
		if want := float64(a.Runs+b.Runs) / (a.Seconds + b.Seconds); f.Result.RunsPerSec != want {
			t.Errorf("%s: %v runs/s, want %v, its legs' runs over their seconds", f.System, f.Result.RunsPerSec, want)
		}
		if k == 0 {
			if f.Ratio != nil {
				t.Errorf("%s, the first system, has ratio %+v; want none", f.System, f.Ratio)
			}
			continue
		}
		if f.Ratio == nil || f.Ratio.RunsPerSec != f.Result.RunsPerSec/first.RunsPerSec ||
			f.Ratio.P99StartToInterrupted != f.Result.StartToInterrupted.P99Ms/first.StartToInterrupted.P99Ms {
			t.Errorf("%s: ratio %+v; want its runs/s and p99 start->interrupted over the minimum floor's", f.System, f.Ratio)
		}
	}
	if m.Floor == nil || m.Interlock == nil || m.Floor.RunsPerSec != first.RunsPerSec || m.Interlock.RunsPerSec != m.Systems[1].Result.RunsPerSec {
		t.Errorf("floor and interlock fields are %+v and %+v; want the first and the second system's", m.Floor, m.Interlock)
	}
	var text bytes.Buffer
	if err := rep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"interlock raw/minimum floor", "interlock go client/minimum floor", "in the order minimum floor, interlock raw, interlock go client, interlock go client"} {
		if !bytes.Contains(text.Bytes(), []byte(want)) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

// TestMinimumRefusesAnotherToken resumes a run of the minimum floor with
// a token other than the one its interrupted event carried: the
// checkpoint's hash refuses it and the client hears failed.
func TestMinimumRefusesAnotherToken(t *testing.T) {
	srv, err := startNATS(t.Context(), serverInProcess, mode{name: "lazy", lazy: true}, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.stop() })
	names, err := wire.NewNames(minimumPrefix)
	if err != nil {
		t.Fatal(err)
	}
	m, err := startMinimum(t.Context(), srv.url, names, questionWorkload, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.stop(context.WithoutCancel(t.Context())) })
	proto := floorProtocol{questionWorkload}
	cl, err := newClient(t.Context(), srv.url, "minimum-test", names, questionWorkload.flow, proto)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	for _, run := range []string{"right", "wrong"} {
		sub, err := cl.subscribe(run)
		if err != nil {
			t.Fatal(err)
		}
		in, err := cl.send(t.Context(), sub, run, "start", func() (*nats.Msg, error) { return proto.start(names, run) }, "interrupted")
		if err != nil {
			t.Fatal(err)
		}
		if run == "wrong" {
			in.Data = bytes.Replace(in.Data, []byte(`"resumeToken":"`), []byte(`"resumeToken":"x`), 1)
		}
		_, err = cl.send(t.Context(), sub, run, "resume", func() (*nats.Msg, error) { return proto.resume(names, run, in) }, "completed")
		sub.close()
		if run == "right" && err != nil {
			t.Errorf("resume with the interrupted event's token: %v", err)
		}
		if run == "wrong" && (err == nil || !strings.Contains(err.Error(), "does not match its checkpoint")) {
			t.Errorf("resume with another token: %v, want a failed event saying it does not match the checkpoint", err)
		}
	}
	if err := m.stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.failure(); err == nil {
		t.Error("the minimum floor reports no failure after refusing a resume")
	}
}

// TestRunWorkerProcsOnCluster runs a tiny benchmark with the workers in
// two child processes on a 3-node cluster: every stream and bucket has 3
// replicas, and the two worker processes connect to different nodes.
func TestRunWorkerProcsOnCluster(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out bytes.Buffer
	args := []string{"--runs", "4", "--concurrency", "2", "--warmup", "0", "--fsync", "lazy", "--worker-procs", "2", "--cluster", "3", "--json"}
	if err := Run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("Run(%v): %v", args, err)
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the JSON report: %v\n%s", err, out.String())
	}
	if rep.ClusterNodes != 3 || rep.Replicas != 3 || len(rep.WorkerProcs) != 1 {
		t.Errorf("report of %d nodes, %d replicas, worker processes %v; want 3, 3, [2]", rep.ClusterNodes, rep.Replicas, rep.WorkerProcs)
	}
	m := rep.Modes[0]
	if m.Floor != nil || len(m.WorkerProcs) != 1 {
		t.Fatalf("got in-process result %v and %d worker-process results; want none and 1", m.Floor, len(m.WorkerProcs))
	}
	for _, c := range m.WorkerProcs {
		const procs = 2
		if c.WorkerProcs != procs {
			t.Errorf("result of %d worker processes, want %d", c.WorkerProcs, procs)
		}
		what := fmt.Sprintf("%d worker processes", procs)
		checkLegs(t, what, c, 4, 3)
		for _, l := range c.Legs {
			if len(l.WorkerServers) != procs || l.WorkerServers[0] == l.WorkerServers[1] {
				t.Errorf("%s, %s leg: workers connected to %v; want %d different nodes", what, l.System, l.WorkerServers, procs)
			}
			if runtime.GOOS == "linux" && (l.Memory.WorkersPeakRSSMB <= 0 || l.Memory.ServerPeakRSSMB <= 0) {
				t.Errorf("%s, %s leg: workers' peak RSS %v MB, server's %v MB; want both positive", what, l.System, l.Memory.WorkersPeakRSSMB, l.Memory.ServerPeakRSSMB)
			}
		}
	}
	checkNothingLeft(t, tmp)
}

// TestRunStored runs a tiny benchmark with runs stored before each leg,
// each leg on a server of its own, and checks what the stored runs cost
// the server is read.
func TestRunStored(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out bytes.Buffer
	const stored = 20
	args := []string{"--runs", "2", "--concurrency", "2", "--warmup", "0", "--fsync", "lazy", "--workload", "approval", "--stored", strconv.Itoa(stored), "--json"}
	if err := Run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("Run(%v): %v", args, err)
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the JSON report: %v\n%s", err, out.String())
	}
	m := rep.Modes[0]
	if rep.StoredRuns != stored || m.Floor == nil {
		t.Fatalf("report of %d stored runs, floor %v; want %d and a result", rep.StoredRuns, m.Floor, stored)
	}
	checkLegs(t, "stored", &comparison{Floor: m.Floor, Interlock: m.Interlock, Ratio: m.Ratio, Legs: m.Legs}, 2, 1)
	for i, l := range m.Legs {
		s := l.Stored
		if s == nil {
			t.Fatalf("leg %d (%s): no reading of the stored runs", i+1, l.System)
		}
		if s.Runs != stored || s.PendingEntries != stored || s.RunsPerSec <= 0 || s.ListPageMs <= 0 || s.After.DataDirMB <= s.Before.DataDirMB {
			t.Errorf("leg %d (%s): stored %+v; want %d runs, as many pending entries, positive rates and a data directory that grew", i+1, l.System, s, stored)
		}
		if runtime.GOOS == "linux" && (s.Before.ServerRSSMB <= 0 || s.After.ServerRSSMB <= 0) {
			t.Errorf("leg %d (%s): server RSS %v MB before, %v MB after; want both read", i+1, l.System, s.Before.ServerRSSMB, s.After.ServerRSSMB)
		}
	}
	var text bytes.Buffer
	if err := rep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(text.Bytes(), []byte("stored runs, each leg on a server of its own")) {
		t.Errorf("text report lacks the stored runs:\n%s", text.String())
	}
	checkNothingLeft(t, tmp)
}

// TestRunStoredFinished runs a tiny benchmark with finished runs stored
// before each leg, and checks that a page of the list of runs is timed
// against the floor's read.
func TestRunStoredFinished(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out bytes.Buffer
	const stored = 60
	args := []string{"--runs", "2", "--concurrency", "2", "--warmup", "0", "--fsync", "lazy", "--stored", strconv.Itoa(stored), "--stored-finished", "--json"}
	if err := Run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("Run(%v): %v", args, err)
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the JSON report: %v\n%s", err, out.String())
	}
	for i, l := range rep.Modes[0].Legs {
		s := l.Stored
		if s == nil || !s.Finished || s.FinishedEntries != stored || len(s.Listings) != 1 {
			t.Fatalf("leg %d (%s): stored %+v; want %d finished runs and one listing", i+1, l.System, s, stored)
		}
		r := s.Listings[0]
		for name, c := range map[string]pageCost{"every status": r.All, "finished": r.Finished, "completed": r.Completed, "floor": r.Floor} {
			if c.Ms <= 0 || c.Bytes <= 0 || c.Msgs <= 0 {
				t.Errorf("leg %d (%s): %s page %+v; want a time, bytes and messages", i+1, l.System, name, c)
			}
		}
		// The floor reads one stream once; a page of every status reads
		// five, each a page.
		if r.Floor.Bytes >= r.All.Bytes {
			t.Errorf("leg %d (%s): the floor read %.0f B, every status %.0f B", i+1, l.System, r.Floor.Bytes, r.All.Bytes)
		}
	}
	var text bytes.Buffer
	if err := rep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(text.Bytes(), []byte("against the floor's raw read of a page")) {
		t.Errorf("text report lacks the listing of runs:\n%s", text.String())
	}
	checkNothingLeft(t, tmp)
}

// checkNothingLeft fails if dir holds anything.
func checkNothingLeft(t *testing.T, dir string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in the temporary directory: %s", e.Name())
	}
}

// TestWorkerStopsWhenStdinCloses runs a worker child's whole life in this
// process: it says it is ready, with its server's name, and stops cleanly
// once its standard input closes.
func TestWorkerStopsWhenStdinCloses(t *testing.T) {
	srv, err := startNATS(t.Context(), serverInProcess, mode{name: "lazy", lazy: true}, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.stop() })
	for _, system := range []string{systemFloor, systemInterlock} {
		spec, err := json.Marshal(workerSpec{System: system, URL: srv.url, Prefix: system, Workload: "question", Workers: 2, Replicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		stdin, closeStdin := io.Pipe()
		stdout := &natstest.Buffer{}
		done := make(chan error, 1)
		go func() { done <- work(t.Context(), string(spec), stdin, stdout) }()
		natstest.Eventually(t, system+" worker ready", func() bool { return strings.Contains(stdout.String(), "\n") })
		if got := strings.TrimSpace(stdout.String()); got != workerReady+" bench" {
			t.Errorf("%s worker printed %q, want %q", system, got, workerReady+" bench")
		}
		if err := closeStdin.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s worker: %v", system, err)
			}
		case <-time.After(natstest.Wait):
			t.Fatalf("%s worker still runs %s after its stdin closed", system, natstest.Wait)
		}
	}
}

// TestWorkerProcessThatFailsIsReported starts a worker process that
// cannot run its worker and checks the error says why, in the child's own
// words, and that nothing is left running.
func TestWorkerProcessThatFailsIsReported(t *testing.T) {
	srv, err := startNATS(t.Context(), serverInProcess, mode{name: "lazy", lazy: true}, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.stop() })
	ws, err := startWorkers(t.Context(), workerSpec{System: systemFloor, Prefix: "floor", Workload: "both", Workers: 2, Replicas: 1}, srv, 1, io.Discard)
	if err == nil {
		_ = ws.stop(t.Context())
		t.Fatal("a worker process for two workloads at once started")
	}
	if !strings.Contains(err.Error(), `workload "both" is not one workload`) {
		t.Errorf("error %q does not carry what the worker process said", err)
	}
}

func TestWorkRejects(t *testing.T) {
	for _, spec := range []string{"not json", `{"system":"other","workload":"question"}`, `{"system":"floor","workload":"both"}`} {
		if err := work(t.Context(), spec, bytes.NewReader(nil), io.Discard); err == nil {
			t.Errorf("work(%s): no error", spec)
		}
	}
}

// writes is what one system wrote for a few runs, once its worker stopped.
type writes struct {
	// inbound is the messages left in the inbound stream; schedules those
	// left in the schedule stream: the deadlines, which no consumer reads.
	inbound, schedules uint64
	events             uint64
	audit              uint64
	// runsWrites and pendingWrites are the writes to the buckets (their
	// streams' last sequence), runs and pending what is left in them.
	runsWrites, runs       uint64
	pendingWrites, pending uint64
	// finished is the entries of the finished-runs index.
	finished uint64
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
			srv, err := startNATS(t.Context(), serverInProcess, mode{name: "lazy", lazy: true}, 1, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.stop() })
			names, err := wire.NewNames(floorPrefix)
			if err != nil {
				t.Fatal(err)
			}
			f, err := startFloor(t.Context(), srv.url, names, w, 4, 1)
			if err != nil {
				t.Fatal(err)
			}
			floor := collect(t, srv, w, names, runs, floorProtocol{w}, func() error { return errors.Join(f.stop(t.Context()), f.failure()) })
			svc, err := startInterlock(t.Context(), srv.url, benchPrefix, "bench", w, 4, 1)
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
			wantSchedules, wantWrites := uint64(0), uint64(2*runs)
			if w.approval {
				// The deadlines' schedules; the step's write.
				wantSchedules, wantWrites = runs, 3*runs
			}
			if il.inbound != 0 || il.schedules != wantSchedules || il.events != 4*runs || il.audit != 2*runs || il.runsWrites != wantWrites || il.runs != runs || il.finished != runs {
				t.Errorf("interlock wrote %+v; want no inbound message left, %d deadlines, %d events, %d audit records, %d checkpoint writes leaving %d, %d finished entries",
					il, wantSchedules, 4*runs, 2*runs, wantWrites, runs, runs)
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
	// wait until no command is left.
	left := uint64(0)
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
		if stream == names.ScheduleStream() && info.State.Msgs > 0 {
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
	got.schedules = state(names.ScheduleStream()).Msgs
	got.events = state(names.EventStream()).Msgs
	got.audit = state(names.AuditStream()).Msgs
	rs, ps := state("KV_"+names.RunsBucket()), state("KV_"+names.PendingBucket())
	got.runsWrites, got.runs = rs.LastSeq, rs.Msgs
	got.pendingWrites, got.pending = ps.LastSeq, ps.Msgs
	for _, status := range wire.FinishedStatuses {
		got.finished += state(names.FinishedStream(status)).Msgs
	}
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
		if runtime.GOOS == "linux" && s.CPUMsPerRun <= 0 {
			t.Errorf("%s: CPU per run %v ms, want positive", name, s.CPUMsPerRun)
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
	for _, want := range []string{"KV_paused_pending", "GET /v1/interrupts?cursor=CURSOR&limit=2", "metrics' count of the pending index"} {
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
// client and the HTTP API, and the metrics' count of the pending index.
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
	if len(d.Streams) != 8 || d.DiskBytesPerRun <= 0 {
		t.Errorf("paused: %d streams, %v B on disk per run; want 8 streams and bytes on disk", len(d.Streams), d.DiskBytesPerRun)
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
	srv, err := startNATS(t.Context(), serverProcess, mode{name: "lazy", lazy: true}, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.stop() })
	if len(srv.pids) != 1 || srv.pids[0] == os.Getpid() {
		t.Fatalf("server pids %v, want one child's", srv.pids)
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
		t.Errorf("process %v still exists after stop", srv.pids)
	}
	if _, err := os.Stat(srv.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s: %v, want it removed", srv.dir, err)
	}
}

func TestServeRejects(t *testing.T) {
	for _, sp := range []serverSpec{{dir: "", fsync: "lazy"}, {dir: t.TempDir(), fsync: "sometimes"}} {
		if err := serve(t.Context(), sp, bytes.NewReader(nil), io.Discard); err == nil {
			t.Errorf("serve(%+v): no error", sp)
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
		{[]string{"--timeout", "-1s"}, true},
		{[]string{"extra"}, true},
		{[]string{"--server", "process"}, false},
		{[]string{"--server", "inprocess", "--paused", "5", "--idle", "0s"}, false},
		{[]string{"--server", "elsewhere"}, true},
		{[]string{"--server", "auto"}, true},
		{[]string{"--runs", "1"}, true},
		{[]string{"--worker-procs", "1,2,4", "--concurrency", "64"}, false},
		{[]string{"--worker-procs", "3"}, false},
		{[]string{"--worker-procs", "0"}, true},
		{[]string{"--worker-procs", "1,,2"}, true},
		{[]string{"--worker-procs", "two"}, true},
		{[]string{"--worker-procs", "2", "--runs", "0", "--paused", "5"}, true},
		{[]string{"--cluster", "3"}, false},
		{[]string{"--cluster", "2"}, true},
		{[]string{"--stored", "100000", "--fsync", "lazy"}, false},
		{[]string{"--stored", "-1"}, true},
		{[]string{"--stored", "10", "--runs", "0", "--paused", "5"}, true},
		{[]string{"--idle", "-1s"}, true},
		{[]string{"--workload", "approval"}, false},
		{[]string{"--workload", "both", "--concurrency", "1"}, false},
		{[]string{"--workload", "refund"}, true},
		{[]string{"--workload", ""}, true},
		{[]string{"--systems", "minimum,raw,go"}, false},
		{[]string{"--systems", "minimum,floor,interlock,go", "--concurrency", "1"}, false},
		{[]string{"--systems", "raw,go", "--client", "go"}, true},
		{[]string{"--systems", "raw"}, true},
		{[]string{"--systems", "raw,raw"}, true},
		{[]string{"--systems", "raw,interlock"}, true},
		{[]string{"--systems", "minimum,temporal"}, true},
		{[]string{"--systems", "minimum,raw", "--workload", "approval"}, true},
		{[]string{"--systems", "minimum,raw", "--stored", "10"}, true},
		{[]string{"--systems", "floor,raw,go", "--worker-procs", "2"}, true},
		{[]string{"--client", "go", "--worker-procs", "2"}, false},
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
