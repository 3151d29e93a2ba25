package bus_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/protocol"
)

func TestLogOutcomeSaysWhatAnOperatorNeeds(t *testing.T) {
	t.Parallel()
	started := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	asked := started.Add(time.Minute)
	now := started.Add(time.Hour)
	base := bus.RunLog{Flow: "booking", Run: "r-42", Node: "ask_email", Checkpoint: 7, RequestID: "rq_1", Started: started}
	with := func(kind string, f func(*bus.RunLog)) bus.RunLog {
		r := base
		r.Kind = kind
		if f != nil {
			f(&r)
		}
		return r
	}
	cases := []struct {
		log       bus.RunLog
		wantLevel string
		want      map[string]any // every field but level, time and message
	}{
		{with(protocol.EventStarted, func(r *bus.RunLog) { r.RequestID = "" }), "info",
			map[string]any{"flow": "booking", "run": "r-42", "node": "ask_email", "checkpoint": 7.0}},
		{with(protocol.EventInterrupted, func(r *bus.RunLog) { r.Asked = now }), "info",
			map[string]any{"flow": "booking", "run": "r-42", "node": "ask_email", "checkpoint": 7.0, "request_id": "rq_1", "since_start": 3600000.0}},
		{with(protocol.EventResumed, func(r *bus.RunLog) { r.Asked = asked }), "info",
			map[string]any{"flow": "booking", "run": "r-42", "node": "ask_email", "checkpoint": 7.0, "request_id": "rq_1", "since_start": 3600000.0, "waited": 3540000.0}},
		{with(protocol.EventCompleted, func(r *bus.RunLog) { r.RequestID, r.Node = "", "" }), "info",
			map[string]any{"flow": "booking", "run": "r-42", "checkpoint": 7.0, "since_start": 3600000.0}},
		{with(protocol.EventFailed, func(r *bus.RunLog) { r.Error = "charge: card declined"; r.RequestID = "" }), "warn",
			map[string]any{"flow": "booking", "run": "r-42", "node": "ask_email", "checkpoint": 7.0, "since_start": 3600000.0, "error": "charge: card declined"}},
		{with(protocol.EventCancelled, func(r *bus.RunLog) { r.Asked = asked }), "info",
			map[string]any{"flow": "booking", "run": "r-42", "node": "ask_email", "checkpoint": 7.0, "request_id": "rq_1", "since_start": 3600000.0, "waited": 3540000.0}},
		{with(protocol.EventExpired, func(r *bus.RunLog) { r.Asked = asked }), "info",
			map[string]any{"flow": "booking", "run": "r-42", "node": "ask_email", "checkpoint": 7.0, "request_id": "rq_1", "since_start": 3600000.0, "waited": 3540000.0}},
	}
	for _, tc := range cases {
		t.Run(tc.log.Kind, func(t *testing.T) {
			var buf bytes.Buffer
			bus.LogOutcome(zerolog.New(&buf).Level(zerolog.InfoLevel), now, tc.log)
			var got map[string]any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("%v: %q", err, buf.String())
			}
			if got["level"] != tc.wantLevel || got["message"] != "run "+tc.log.Kind {
				t.Errorf("level %v message %v, want %s and %q", got["level"], got["message"], tc.wantLevel, "run "+tc.log.Kind)
			}
			delete(got, "level")
			delete(got, "message")
			if !maps.Equal(got, tc.want) {
				t.Errorf("fields\n got %v\nwant %v", got, tc.want)
			}
			if strings.Count(buf.String(), "\n") != 1 {
				t.Errorf("want one line, got %q", buf.String())
			}
		})
	}
}

func TestLogOutcomeLeavesOtherKindsAlone(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	for _, kind := range []string{protocol.EventRefused, protocol.EventDecided, ""} {
		bus.LogOutcome(zerolog.New(&buf), time.Now(), bus.RunLog{Kind: kind, Flow: "f", Run: "r"})
	}
	if buf.Len() != 0 {
		t.Fatalf("logged %q", buf.String())
	}
}

// TestRunLogHoldsNoPersonalData guards the shape of RunLog: a field added
// to it must be one that can be logged in clear.
func TestRunLogHoldsNoPersonalData(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	bus.LogOutcome(zerolog.New(&buf), time.Now(), bus.RunLog{Kind: protocol.EventResumed, Flow: "f", Run: "r", Node: "n",
		RequestID: "rq", Checkpoint: 1, Started: time.Now(), Asked: time.Now(), Error: "e"})
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(got))
	want := []string{"checkpoint", "flow", "level", "message", "node", "request_id", "run", "since_start", "waited"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	for _, banned := range []string{"token", "answer", "args", "state"} {
		if strings.Contains(strings.ToLower(buf.String()), banned) {
			t.Errorf("the line mentions %s: %s", banned, buf.String())
		}
	}
}
