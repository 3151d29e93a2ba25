package events_test

import (
	"testing"

	"github.com/interlockhq/interlock/events"
)

func TestOutboundType(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind   string
		want   string
		wantOK bool
	}{
		{"started", events.TypeStarted, true},
		{"interrupted", events.TypeInterrupted, true},
		{"resumed", events.TypeResumed, true},
		{"completed", events.TypeCompleted, true},
		{"failed", events.TypeFailed, true},
		{"cancelled", events.TypeCancelled, true},
		{"expired", events.TypeExpired, true},
		{"refused", events.TypeRefused, true},
		{"decided", events.TypeToolDecided, true},
		{"", "", false},
		{"start", "", false}, // an inbound verb
		{"canceled", "", false},
		{"Interrupted", "", false},
	}
	for _, tc := range cases {
		got, ok := events.OutboundType(tc.kind)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("OutboundType(%q) = %q, %v; want %q, %v", tc.kind, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestInboundType(t *testing.T) {
	t.Parallel()
	cases := []struct {
		verb   string
		want   string
		wantOK bool
	}{
		{"start", events.TypeStart, true},
		{"resume", events.TypeResume, true},
		{"cancel", events.TypeCancel, true},
		{"request", events.TypeToolRequest, true},
		{"", "", false},
		{"started", "", false}, // an outbound kind
		{"Start", "", false},
		{"explode", "", false},
	}
	for _, tc := range cases {
		got, ok := events.InboundType(tc.verb)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("InboundType(%q) = %q, %v; want %q, %v", tc.verb, got, ok, tc.want, tc.wantOK)
		}
	}
}

// TestTypesMatchTheProtocol pins the CloudEvent types of PROTOCOL.md
// section 1: they are the wire contract.
func TestTypesMatchTheProtocol(t *testing.T) {
	t.Parallel()
	cases := []struct{ got, want string }{
		{events.TypeStart, "io.interlock.run.start"},
		{events.TypeResume, "io.interlock.run.resume"},
		{events.TypeCancel, "io.interlock.run.cancel"},
		{events.TypeToolRequest, "io.interlock.tool.requested"},
		{events.TypeStarted, "io.interlock.run.started"},
		{events.TypeInterrupted, "io.interlock.run.interrupted"},
		{events.TypeResumed, "io.interlock.run.resumed"},
		{events.TypeCompleted, "io.interlock.run.completed"},
		{events.TypeFailed, "io.interlock.run.failed"},
		{events.TypeCancelled, "io.interlock.run.cancelled"},
		{events.TypeExpired, "io.interlock.run.expired"},
		{events.TypeRefused, "io.interlock.resume.refused"},
		{events.TypeToolDecided, "io.interlock.tool.decided"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("type %q, want %q", tc.got, tc.want)
		}
	}
}
