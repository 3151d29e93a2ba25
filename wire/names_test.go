package wire_test

import (
	"strings"
	"testing"

	"github.com/interlockhq/interlock/wire"
)

func TestNewNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		prefix     string
		want       string
		wantErr    bool
		wantErrHas string // part of the error message, naming what is wrong
	}{
		{prefix: "", want: "interlock"},
		{prefix: "interlock", want: "interlock"},
		{prefix: "acme-prod", want: "acme-prod"},
		{prefix: "a_1", want: "a_1"},
		{prefix: strings.Repeat("x", 32), want: strings.Repeat("x", 32)},

		{prefix: strings.Repeat("x", 33), wantErr: true, wantErrHas: "longer than 32"},
		{prefix: "Acme", wantErr: true, wantErrHas: `'A'`},
		{prefix: "acme.prod", wantErr: true, wantErrHas: `'.'`},
		{prefix: "acme prod", wantErr: true, wantErrHas: `' '`},
		{prefix: "acme*", wantErr: true, wantErrHas: `'*'`},
		{prefix: "acme>", wantErr: true, wantErrHas: `'>'`},
		{prefix: "acme/prod", wantErr: true, wantErrHas: `'/'`},
		{prefix: "äcme", wantErr: true, wantErrHas: "lower case letters"},
	}
	for _, tc := range cases {
		t.Run(tc.prefix, func(t *testing.T) {
			t.Parallel()
			n, err := wire.NewNames(tc.prefix)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("NewNames(%q) accepted it: %+v", tc.prefix, n)
				}
				if !strings.HasPrefix(err.Error(), "wire: ") || !strings.Contains(err.Error(), tc.wantErrHas) {
					t.Errorf("NewNames(%q) error %q does not say %q", tc.prefix, err, tc.wantErrHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewNames(%q): %v", tc.prefix, err)
			}
			if n.Prefix != tc.want {
				t.Errorf("Prefix = %q, want %q", n.Prefix, tc.want)
			}
		})
	}
}

func TestNamesFollowThePrefix(t *testing.T) {
	t.Parallel()
	def, err := wire.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	acme, err := wire.NewNames("acme-prod")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		def, acme  string
		wantDef    string
		wantCustom string
	}{
		{"InStream", def.InStream(), acme.InStream(), "INTERLOCK_IN", "ACME_PROD_IN"},
		{"EventStream", def.EventStream(), acme.EventStream(), "INTERLOCK_EVENTS", "ACME_PROD_EVENTS"},
		{"AuditStream", def.AuditStream(), acme.AuditStream(), "INTERLOCK_AUDIT", "ACME_PROD_AUDIT"},
		{"DeadLetterStream", def.DeadLetterStream(), acme.DeadLetterStream(), "INTERLOCK_DLQ", "ACME_PROD_DLQ"},
		{"RunsBucket", def.RunsBucket(), acme.RunsBucket(), "interlock_runs", "acme-prod_runs"},
		{"PendingBucket", def.PendingBucket(), acme.PendingBucket(), "interlock_pending", "acme-prod_pending"},
		{"KeysBucket", def.KeysBucket(), acme.KeysBucket(), "interlock_keys", "acme-prod_keys"},
		{"Consumer", def.Consumer(), acme.Consumer(), "interlock-workers", "acme-prod-workers"},
		{"In", def.In("booking", "start"), acme.In("booking", "start"), "interlock.in.booking.start", "acme-prod.in.booking.start"},
		{"GateRequest", def.GateRequest(), acme.GateRequest(), "interlock.in.gate.request", "acme-prod.in.gate.request"},
		{"Event", def.Event("refund", "r-42", "interrupted"), acme.Event("refund", "r-42", "interrupted"),
			"interlock.ev.refund.r-42.interrupted", "acme-prod.ev.refund.r-42.interrupted"},
		{"Audit", def.Audit("refund", "r-42"), acme.Audit("refund", "r-42"), "interlock.audit.refund.r-42", "acme-prod.audit.refund.r-42"},
		{"DeadLetter", def.DeadLetter("unparseable"), acme.DeadLetter("unparseable"), "interlock.dlq.unparseable", "acme-prod.dlq.unparseable"},
		{"FinishedStream", def.FinishedStream("cancelled"), acme.FinishedStream("cancelled"), "INTERLOCK_FINISHED_CANCELLED", "ACME_PROD_FINISHED_CANCELLED"},
		{"Finished", def.Finished("failed", "refund"), acme.Finished("failed", "refund"), "interlock.finished.failed.refund", "acme-prod.finished.failed.refund"},
	}
	for _, tc := range cases {
		if tc.def != tc.wantDef {
			t.Errorf("default %s = %q, want %q", tc.name, tc.def, tc.wantDef)
		}
		if tc.acme != tc.wantCustom {
			t.Errorf("acme-prod %s = %q, want %q", tc.name, tc.acme, tc.wantCustom)
		}
	}
}

func TestParseIn(t *testing.T) {
	t.Parallel()
	def, err := wire.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	acme, err := wire.NewNames("acme-prod")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		names             wire.Names
		subject           string
		wantFlow, wantVrb string
		wantOK            bool
	}{
		{def, "interlock.in.booking.start", "booking", "start", true},
		{def, "interlock.in.booking.resume", "booking", "resume", true},
		{def, "interlock.in.gate.request", "gate", "request", true},
		{acme, "acme-prod.in.refund.cancel", "refund", "cancel", true},

		{def, "interlock.in.booking", "", "", false},
		{def, "interlock.in.a.b.c", "", "", false},
		{def, "other.in.a.b", "", "", false},
		{def, "interlock.ev.a.b", "", "", false},
		{def, "interlock.in.", "", "", false},
		{def, "", "", "", false},
		{def, "acme-prod.in.refund.cancel", "", "", false},
		{acme, "interlock.in.booking.start", "", "", false},
	}
	for _, tc := range cases {
		flow, verb, ok := tc.names.ParseIn(tc.subject)
		if flow != tc.wantFlow || verb != tc.wantVrb || ok != tc.wantOK {
			t.Errorf("%s ParseIn(%q) = %q, %q, %v; want %q, %q, %v",
				tc.names.Prefix, tc.subject, flow, verb, ok, tc.wantFlow, tc.wantVrb, tc.wantOK)
		}
	}
}

// TestParseInReadsWhatInWrites checks that ParseIn inverts In.
func TestParseInReadsWhatInWrites(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"interlock", "acme-prod", "x"} {
		n, err := wire.NewNames(prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, verb := range []string{"start", "resume", "cancel"} {
			flow, got, ok := n.ParseIn(n.In("booking_v2", verb))
			if !ok || flow != "booking_v2" || got != verb {
				t.Errorf("%s: ParseIn(In(booking_v2, %s)) = %q, %q, %v", prefix, verb, flow, got, ok)
			}
		}
	}
}
