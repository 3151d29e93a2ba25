package events_test

import (
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

func TestOutboundType(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind   string
		want   string
		wantOK bool
	}{
		{"started", protocol.TypeStarted, true},
		{"interrupted", protocol.TypeInterrupted, true},
		{"resumed", protocol.TypeResumed, true},
		{"completed", protocol.TypeCompleted, true},
		{"failed", protocol.TypeFailed, true},
		{"cancelled", protocol.TypeCancelled, true},
		{"expired", protocol.TypeExpired, true},
		{"refused", protocol.TypeRefused, true},
		{"decided", protocol.TypeToolDecided, true},
		{"", "", false},
		{"start", "", false}, // an inbound verb
		{"canceled", "", false},
		{"Interrupted", "", false},
	}
	for _, tc := range cases {
		got, ok := protocol.OutboundType(tc.kind)
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
		{"start", protocol.TypeStart, true},
		{"resume", protocol.TypeResume, true},
		{"cancel", protocol.TypeCancel, true},
		{"request", protocol.TypeToolRequest, true},
		{"", "", false},
		{"started", "", false}, // an outbound kind
		{"Start", "", false},
		{"explode", "", false},
	}
	for _, tc := range cases {
		got, ok := protocol.InboundType(tc.verb)
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
		{protocol.TypeStart, "io.interlock.run.start"},
		{protocol.TypeResume, "io.interlock.run.resume"},
		{protocol.TypeCancel, "io.interlock.run.cancel"},
		{protocol.TypeToolRequest, "io.interlock.tool.requested"},
		{protocol.TypeStarted, "io.interlock.run.started"},
		{protocol.TypeInterrupted, "io.interlock.run.interrupted"},
		{protocol.TypeResumed, "io.interlock.run.resumed"},
		{protocol.TypeCompleted, "io.interlock.run.completed"},
		{protocol.TypeFailed, "io.interlock.run.failed"},
		{protocol.TypeCancelled, "io.interlock.run.cancelled"},
		{protocol.TypeExpired, "io.interlock.run.expired"},
		{protocol.TypeRefused, "io.interlock.resume.refused"},
		{protocol.TypeToolDecided, "io.interlock.tool.decided"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("type %q, want %q", tc.got, tc.want)
		}
	}
}
