package main

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"testing"
)

// TestCountWritesCountsEachPhase runs a tiny write count of both systems
// and checks that each phase stores one command in the inbound stream per
// run and a checkpoint per run, and that Interlock stores what the floor
// does stream by stream, in number.
func TestCountWritesCountsEachPhase(t *testing.T) {
	var out bytes.Buffer
	const runs = 4
	args := []string{"--runs", "0", "--count-writes", "4", "--concurrency", "2", "--fsync", "always", "--json"}
	if err := Run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("Run(%v): %v", args, err)
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the JSON report: %v\n%s", err, out.String())
	}
	if len(rep.Modes) != 1 || rep.Modes[0].Writes == nil {
		t.Fatalf("got modes %+v, want one with a write count", rep.Modes)
	}
	wr := rep.Modes[0].Writes
	if wr.Runs != runs || len(wr.Systems) != 2 {
		t.Fatalf("write count of %d runs, %d systems; want %d runs of the floor and interlock", wr.Runs, len(wr.Systems), runs)
	}
	stored := map[string]map[string]uint64{} // phase and stream, minus the prefix, to messages
	for _, s := range wr.Systems {
		if len(s.Phases) != 2 || s.Phases[0].Phase != phasePause || s.Phases[1].Phase != phaseResume {
			t.Fatalf("%s: phases %+v, want %s then %s", s.System, s.Phases, phasePause, phaseResume)
		}
		for _, p := range s.Phases {
			got := map[string]streamWrites{}
			for _, w := range p.Streams {
				got[w.Stream] = w
				if w.Bytes == 0 || w.Published < w.Stored {
					t.Errorf("%s %s %s: %+v, want bytes, and no more stored than published", s.System, p.Phase, w.Stream, w)
				}
			}
			prefix, kvPrefix := "FLOOR_", "KV_floor_"
			if s.System == systemInterlock {
				prefix, kvPrefix = "BENCH_", "KV_bench_"
			}
			if in := got[prefix+"IN"]; in.Stored != runs {
				t.Errorf("%s %s: %d commands stored, want one per run", s.System, p.Phase, in.Stored)
			}
			if cp := got[kvPrefix+"runs"]; cp.Stored != runs {
				t.Errorf("%s %s: %d checkpoints stored, want one per run", s.System, p.Phase, cp.Stored)
			}
			if wr.Fsyncs == fsyncStrace && p.Fsyncs < runs {
				t.Errorf("%s %s: %d fsyncs with fsync before ack, want at least one per run", s.System, p.Phase, p.Fsyncs)
			}
			key := p.Phase
			if stored[key] == nil {
				stored[key] = map[string]uint64{}
			}
			for name, w := range got {
				n := name[len(prefix):]
				if name[:3] == "KV_" {
					n = "KV " + name[len(kvPrefix):]
				}
				if s.System == systemFloor {
					stored[key][n] = w.Stored
				} else if stored[key][n] != w.Stored {
					t.Errorf("%s: interlock stored %d in %s, the floor %d", p.Phase, w.Stored, name, stored[key][n])
				}
			}
		}
	}
}

// TestMinimumStoresThreeMessagesPerPhase counts the minimum floor's
// writes: each phase stores exactly the command, the checkpoint and the
// event per run, in the inbound stream, the runs bucket and the events
// stream, and nothing anywhere else.
func TestMinimumStoresThreeMessagesPerPhase(t *testing.T) {
	var out bytes.Buffer
	const runs = 4
	args := []string{"--runs", "0", "--count-writes", "4", "--concurrency", "2", "--fsync", "always", "--systems", "minimum,floor", "--server", "inprocess", "--json"}
	if err := Run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("Run(%v): %v", args, err)
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the JSON report: %v\n%s", err, out.String())
	}
	wr := rep.Modes[0].Writes
	if wr == nil || len(wr.Systems) != 2 || wr.Systems[0].System != systemMinimum {
		t.Fatalf("write count %+v, want the minimum floor's and the floor's", wr)
	}
	s := wr.Systems[0]
	if len(s.Phases) != 2 {
		t.Fatalf("%d phases, want 2", len(s.Phases))
	}
	want := map[string]uint64{"MINIMUM_IN": runs, "KV_minimum_runs": runs, "MINIMUM_EVENTS": runs}
	for _, p := range s.Phases {
		got := map[string]uint64{}
		for _, w := range p.Streams {
			got[w.Stream] = w.Stored
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: stored %v, want exactly %v", p.Phase, got, want)
		}
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, tc := range []struct {
		filter, subject string
		want            bool
	}{
		{"bench.in.>", "bench.in.q.start", true},
		{"bench.in.>", "bench.in", false},
		{"$KV.bench_runs.>", "$KV.bench_runs.q.r-1", true},
		{"bench.*.q", "bench.ev.q", true},
		{"bench.*.q", "bench.ev.q.x", false},
		{"bench.ev", "bench.ev", true},
		{"bench.ev", "bench.audit", false},
	} {
		if got := subjectMatches(tc.filter, tc.subject); got != tc.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", tc.filter, tc.subject, got, tc.want)
		}
	}
}

func TestParseStraceSummary(t *testing.T) {
	summary := `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 97.50    0.195000         276       706           fsync
  2.50    0.005000          50       100         3 fdatasync
------ ----------- ----------- --------- --------- ----------------
100.00    0.200000         247       806         3 total
`
	if n, err := parseStraceSummary([]byte(summary)); err != nil || n != 806 {
		t.Errorf("parseStraceSummary = %d, %v; want 806", n, err)
	}
	if n, err := parseStraceSummary(nil); err != nil || n != 0 {
		t.Errorf("parseStraceSummary of nothing = %d, %v; want 0", n, err)
	}
}
