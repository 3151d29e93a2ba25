package interlock_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/natstest"
)

func TestBadInputIsDeadLetteredAndAnsweredNeverRedelivered(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	structured := nats.Header{"Content-Type": {events.Structured}}
	cases := []struct {
		name, subject string
		body          string
		header        nats.Header
		reason        string
		refusedRun    string // the run answered with refused, if any
		refusedCode   string
	}{
		{"not json on start", "interlock.in.booking.start", "hello", nil, "unparseable", "", ""},
		{"not json on resume", "interlock.in.booking.resume", "\x00\xff", nil, "unparseable", "", ""},
		{"not json on cancel", "interlock.in.booking.cancel", "[1,2", nil, "unparseable", "", ""},
		{"plain json, not a CloudEvent", "interlock.in.booking.resume", `{"resumeToken":"x"}`, nil, "unparseable", "", ""},
		{"not a valid CloudEvent", "interlock.in.booking.start", `{"specversion":"1.0","type":"io.interlock.run.start"}`, structured, "invalid_payload", "", ""},
		{"wrong type for the subject", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b1","source":"/t","type":"io.interlock.run.start","subject":"r-bad1","data":{}}`, structured,
			"invalid_payload", "r-bad1", engine.CodeInvalidPayload},
		{"resume data of the wrong shape", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b2","source":"/t","type":"io.interlock.run.resume","subject":"r-bad2","data":{"answers":5}}`, structured,
			"invalid_payload", "r-bad2", engine.CodeInvalidPayload},
		{"resume with an unknown field", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b3","source":"/t","type":"io.interlock.run.resume","subject":"r-bad3","data":{"anwsers":{}}}`, structured,
			"invalid_payload", "r-bad3", engine.CodeInvalidPayload},
		{"resume without a run", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b4","source":"/t","type":"io.interlock.run.resume","data":{"resumeToken":"x"}}`, structured,
			"invalid_payload", "", ""},
		{"cancel data not an object", "interlock.in.booking.cancel",
			`{"specversion":"1.0","id":"b5","source":"/t","type":"io.interlock.run.cancel","subject":"r-bad5","data":"now"}`, structured,
			"invalid_payload", "r-bad5", engine.CodeInvalidPayload},
		{"start of an unknown flow", "interlock.in.nosuch.start",
			`{"specversion":"1.0","id":"b6","source":"/t","type":"io.interlock.run.start","subject":"r-bad6"}`, structured,
			"unknown_flow", "r-bad6", engine.CodeUnknownFlow},
		{"resume of an unknown flow", "interlock.in.nosuch.resume",
			`{"specversion":"1.0","id":"b7","source":"/t","type":"io.interlock.run.resume","subject":"r-bad7","data":{"resumeToken":"x"}}`, structured,
			"unknown_flow", "r-bad7", engine.CodeUnknownRun},
		{"run id that breaks the name rules", "interlock.in.booking.start",
			`{"specversion":"1.0","id":"b8","source":"/t","type":"io.interlock.run.start","subject":"r 8/x"}`, structured,
			"invalid_name", "", ""},
		{"unknown verb", "interlock.in.booking.explode",
			`{"specversion":"1.0","id":"b9","source":"/t","type":"io.interlock.run.start"}`, structured,
			"unknown_subject", "", ""},
		{"binary mode with a bad time", "interlock.in.booking.resume", `{}`,
			nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"b10"}, "ce-source": {"/t"}, "ce-type": {events.TypeResume}, "ce-subject": {"r-bad10"}, "ce-time": {"yesterday"}},
			"invalid_payload", "r-bad10", engine.CodeInvalidPayload},
		{"binary data that is not JSON", "interlock.in.booking.start", `not json`,
			nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"b11"}, "ce-source": {"/t"}, "ce-type": {events.TypeStart}, "ce-subject": {"r-bad11"}},
			"invalid_payload", "r-bad11", engine.CodeInvalidPayload},
		{"gate request while the gate is off", "interlock.in.gate.request",
			`{"specversion":"1.0","id":"b12","source":"/t","type":"io.interlock.tool.requested","data":{}}`, structured,
			"unsupported", "", ""},
	}
	for _, tc := range cases {
		natstest.PublishRaw(t, r.js, tc.subject, []byte(tc.body), tc.header)
	}
	natstest.WaitDrained(t, r.js, r.names.InStream())

	dead := natstest.Read(t, r.js, r.names.DeadLetterStream(), "interlock.dlq.>")
	if len(dead) != len(cases) {
		t.Fatalf("%d dead letters for %d bad messages", len(dead), len(cases))
	}
	for _, tc := range cases {
		var found *natstest.Received
		for i := range dead {
			if dead[i].Header.Get(bus.HeaderSubject) == tc.subject && string(dead[i].Data) == tc.body {
				found = &dead[i]
				break
			}
		}
		if found == nil {
			t.Errorf("%s: not dead-lettered whole", tc.name)
			continue
		}
		if found.Subject != "interlock.dlq."+tc.reason || found.Header.Get(bus.HeaderReason) != tc.reason {
			t.Errorf("%s: dead letter on %s with reason %q, want %s", tc.name, found.Subject, found.Header.Get(bus.HeaderReason), tc.reason)
		}
		if strings.TrimSpace(found.Header.Get(bus.HeaderError)) == "" {
			t.Errorf("%s: dead letter says nothing of what was wrong", tc.name)
		}
		for k := range tc.header {
			if found.Header.Get(k) != tc.header.Get(k) {
				t.Errorf("%s: header %s not kept", tc.name, k)
			}
		}
		if tc.refusedRun == "" {
			continue
		}
		flow, _, _ := r.names.ParseIn(tc.subject)
		evs := natstest.Read(t, r.js, r.names.EventStream(), r.names.Event(flow, tc.refusedRun, "refused"))
		if len(evs) != 1 {
			t.Errorf("%s: %d refused events for %s", tc.name, len(evs), tc.refusedRun)
			continue
		}
		var ref events.Refused
		evs[0].Decode(t, &ref)
		if ref.Code != tc.refusedCode || ref.Message == "" {
			t.Errorf("%s: refused %+v, want code %s", tc.name, ref, tc.refusedCode)
		}
	}

	cons, err := r.js.Consumer(t.Context(), r.names.InStream(), r.names.Consumer())
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 || info.NumAckPending != 0 {
		t.Fatalf("bad input was redelivered (%d) or left pending (%d)", info.NumRedelivered, info.NumAckPending)
	}
	kv, err := r.js.KeyValue(t.Context(), r.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		t.Errorf("bad input created run %s", k)
	}
}
