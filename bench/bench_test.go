package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"testing"
)

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
