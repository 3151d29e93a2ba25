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
	"testing"
	"time"

	"go.uber.org/goleak"

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

// TestRun runs a tiny benchmark end to end so the program cannot rot.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	args := []string{"--runs", "20", "--concurrency", "4", "--fsync", "lazy", "--json"}
	if err := Run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("Run(%v): %v", args, err)
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the JSON report: %v\n%s", err, out.String())
	}
	if len(rep.Modes) != 1 || rep.Modes[0].Fsync != "lazy" {
		t.Fatalf("got modes %+v, want one lazy mode", rep.Modes)
	}
	m := rep.Modes[0]
	for name, s := range map[string]*systemResult{"floor": m.Floor, "interlock": m.Interlock} {
		if s == nil {
			t.Fatalf("%s: no result", name)
		}
		if s.Runs != 20 || s.RunsPerSec <= 0 {
			t.Errorf("%s: %d runs at %v runs/s, want 20 runs at a positive rate", name, s.Runs, s.RunsPerSec)
		}
		if s.StartToInterrupted.P99Ms <= 0 || s.ResumeToCompleted.P99Ms <= 0 {
			t.Errorf("%s: latencies %+v and %+v, want positive", name, s.StartToInterrupted, s.ResumeToCompleted)
		}
	}
	if m.Ratio == nil || m.Ratio.RunsPerSec <= 0 {
		t.Errorf("ratio %+v, want a positive runs/s ratio", m.Ratio)
	}
}

// TestRunServerProcess runs a tiny benchmark with the server in a child
// process, the paused check included, and checks that the child's memory is
// reported and that nothing is left behind.
func TestRunServerProcess(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the server's data directory goes
	var out bytes.Buffer
	args := []string{"--runs", "10", "--concurrency", "2", "--paused", "8", "--idle", "0", "--fsync", "lazy", "--server", "process", "--json"}
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
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in the temporary directory: %s", e.Name())
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
