package e2e_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
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
		refusedCode   protocol.Code
	}{
		{"not json on start", "interlock.in.booking.start", "hello", nil, "unparseable", "", ""},
		{"not json on resume", "interlock.in.booking.resume", "\x00\xff", nil, "unparseable", "", ""},
		{"not json on cancel", "interlock.in.booking.cancel", "[1,2", nil, "unparseable", "", ""},
		{"plain json, not a CloudEvent", "interlock.in.booking.resume", `{"resumeToken":"x"}`, nil, "unparseable", "", ""},
		{"not a valid CloudEvent", "interlock.in.booking.start", `{"specversion":"1.0","type":"io.interlock.run.start"}`, structured, "invalid_payload", "", ""},
		{"wrong type for the subject", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b1","source":"/t","type":"io.interlock.run.start","subject":"r-bad1","data":{}}`, structured,
			"invalid_payload", "r-bad1", protocol.CodeInvalidPayload},
		{"resume data of the wrong shape", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b2","source":"/t","type":"io.interlock.run.resume","subject":"r-bad2","data":{"answers":5}}`, structured,
			"invalid_payload", "r-bad2", protocol.CodeInvalidPayload},
		{"resume with an unknown field", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b3","source":"/t","type":"io.interlock.run.resume","subject":"r-bad3","data":{"anwsers":{}}}`, structured,
			"invalid_payload", "r-bad3", protocol.CodeInvalidPayload},
		{"resume without a run", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b4","source":"/t","type":"io.interlock.run.resume","data":{"resumeToken":"x"}}`, structured,
			"invalid_payload", "", ""},
		{"cancel data not an object", "interlock.in.booking.cancel",
			`{"specversion":"1.0","id":"b5","source":"/t","type":"io.interlock.run.cancel","subject":"r-bad5","data":"now"}`, structured,
			"invalid_payload", "r-bad5", protocol.CodeInvalidPayload},
		{"start of an unknown flow", "interlock.in.nosuch.start",
			`{"specversion":"1.0","id":"b6","source":"/t","type":"io.interlock.run.start","subject":"r-bad6"}`, structured,
			"unknown_flow", "r-bad6", protocol.CodeUnknownFlow},
		{"resume of an unknown flow", "interlock.in.nosuch.resume",
			`{"specversion":"1.0","id":"b7","source":"/t","type":"io.interlock.run.resume","subject":"r-bad7","data":{"resumeToken":"x"}}`, structured,
			"unknown_flow", "r-bad7", protocol.CodeUnknownRun},
		{"run id that breaks the name rules", "interlock.in.booking.start",
			`{"specversion":"1.0","id":"b8","source":"/t","type":"io.interlock.run.start","subject":"r 8/x"}`, structured,
			"invalid_name", "", ""},
		{"unknown verb", "interlock.in.booking.explode",
			`{"specversion":"1.0","id":"b9","source":"/t","type":"io.interlock.run.start"}`, structured,
			"unknown_subject", "", ""},
		{"binary mode with a bad time", "interlock.in.booking.resume", `{}`,
			nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"b10"}, "ce-source": {"/t"}, "ce-type": {protocol.TypeResume}, "ce-subject": {"r-bad10"}, "ce-time": {"yesterday"}},
			"invalid_payload", "r-bad10", protocol.CodeInvalidPayload},
		{"binary data that is not JSON", "interlock.in.booking.start", `not json`,
			nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"b11"}, "ce-source": {"/t"}, "ce-type": {protocol.TypeStart}, "ce-subject": {"r-bad11"}},
			"invalid_payload", "r-bad11", protocol.CodeInvalidPayload},
		{"unsupported specversion, structured", "interlock.in.booking.resume",
			`{"specversion":"0.3","id":"b13","source":"/t","type":"io.interlock.run.resume","subject":"r-bad13","data":{}}`, structured,
			"invalid_payload", "r-bad13", protocol.CodeInvalidPayload},
		{"unsupported specversion, binary", "interlock.in.booking.cancel", `{"reason":"b14"}`,
			nats.Header{"ce-specversion": {"0.3"}, "ce-id": {"b14"}, "ce-source": {"/t"}, "ce-type": {protocol.TypeCancel}, "ce-subject": {"r-bad14"}},
			"invalid_payload", "r-bad14", protocol.CodeInvalidPayload},
		{"binary without ce-type", "interlock.in.booking.cancel", `{"reason":"b15"}`,
			nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"b15"}, "ce-source": {"/t"}, "ce-subject": {"r-bad15"}},
			"invalid_payload", "r-bad15", protocol.CodeInvalidPayload},
		{"structured with a bad time", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b16","source":"/t","type":"io.interlock.run.resume","subject":"r-bad16","time":"yesterday","data":{}}`, structured,
			"invalid_payload", "r-bad16", protocol.CodeInvalidPayload},
		{"binary text/plain data", "interlock.in.booking.resume", `hello`,
			nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"b17"}, "ce-source": {"/t"}, "ce-type": {protocol.TypeResume}, "ce-subject": {"r-bad17"}, "Content-Type": {"text/plain"}},
			"invalid_payload", "r-bad17", protocol.CodeInvalidPayload},
		{"structured event sent as text/plain", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b18","source":"/t","type":"io.interlock.run.resume","subject":"r-bad18","data":{}}`, nats.Header{"Content-Type": {"text/plain"}},
			"unparseable", "r-bad18", protocol.CodeInvalidPayload},
		{"structured with data_base64", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b19","source":"/t","type":"io.interlock.run.resume","subject":"r-bad19","data_base64":"e30="}`, structured,
			"invalid_payload", "r-bad19", protocol.CodeInvalidPayload},
		{"duplicate keys in data", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b20","source":"/t","type":"io.interlock.run.resume","subject":"r-bad20","data":{"resumeToken":"x","answers":{"email":"a@example.com","email":"b@example.com"}}}`, structured,
			"invalid_payload", "r-bad20", protocol.CodeInvalidPayload},
		{"duplicate keys in the envelope", "interlock.in.booking.resume",
			`{"specversion":"1.0","id":"b21","source":"/t","type":"io.interlock.run.resume","subject":"r-bad21","subject":"r-other","data":{}}`, structured,
			"invalid_payload", "", ""},
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
			// Whole, but for the resume token.
			want := strings.ReplaceAll(tc.body, `"resumeToken":"x"`, `"resumeToken":"[redacted]"`)
			if dead[i].Header.Get(bus.HeaderSubject) == tc.subject && string(dead[i].Data) == want {
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
			if found.Header.Get(bus.HeaderOriginal+k) != tc.header.Get(k) {
				t.Errorf("%s: header %s not kept as %s", tc.name, k, bus.HeaderOriginal+k)
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
		var ref protocol.Refused
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
