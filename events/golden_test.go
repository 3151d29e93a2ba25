package events_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenKid and goldenSig stand for an audit record's key id and
// signature: shaped as Interlock writes them (16 hex digits; 64 bytes in
// standard base64).
const (
	goldenKid = "5b0e7c1d9a3f2e48"
	goldenSig = "clpjrTcumzryd6QmYoQn1ct4dbvs5L/5P6zMtaM4qvze+85uW/mtjnFWThsiekFjKiLBKxYVOEA5/DCu8qKenw=="
)

// TestOutboundEventsMatchTheirGoldenFiles pins the JSON of every event and
// audit record Interlock publishes, envelope and data, as the publisher
// builds them from the engine's typed data. A change to the wire shows up
// here; if it is meant, run `go test ./events -run Golden -update` and say
// so in docs/protocol.md.
func TestOutboundEventsMatchTheirGoldenFiles(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	expires := at.Add(30 * time.Minute)
	origin := json.RawMessage(`{"slack":{"channel":"C1","threadTs":"171.2"}}`)
	state := engine.Doc{"email": json.RawMessage(`"ann@example.com"`), "notes": json.RawMessage(`["checked"]`)}
	multiple := true
	cases := []struct {
		name  string
		typ   string
		data  any
		check any // a reader type the data must decode into strictly, if any
	}{
		{"started", events.TypeStarted, &engine.StartedEvent{Flow: "booking", Run: "r-42", Checkpoint: 1, Origin: origin}, &events.Started{}},
		{"interrupted-question", events.TypeInterrupted, &engine.InterruptedEvent{
			Flow: "booking", Run: "r-42", Node: "ask_contact", RequestID: "rq_1", ResumeToken: "TOKEN", Checkpoint: 7, Kind: engine.KindQuestion,
			Questions: []engine.Question{
				{Field: "name", Question: "What's your name?", Suggestions: []string{"Ann"}},
				{Field: "email", Question: "What's your email?", Context: "ERROR: That doesn't look like an email."},
			},
			Context: "Ask both in one natural message.", ExpiresAt: &expires, Origin: origin,
		}, &events.Interrupted{}},
		{"interrupted-choice", events.TypeInterrupted, &engine.InterruptedEvent{
			Flow: "booking", Run: "r-42", Node: "pick_topics", RequestID: "rq_2", ResumeToken: "TOKEN", Checkpoint: 9, Kind: engine.KindChoice,
			Question: "Which topics?", Options: []engine.Option{{ID: "product", Label: "Product"}, {ID: "design", Label: "Design"}}, Multiple: &multiple,
		}, &events.Interrupted{}},
		{"interrupted-approval", events.TypeInterrupted, &engine.InterruptedEvent{
			Flow: "refund", Run: "r-42", Node: "review", RequestID: "rq_7", ResumeToken: "TOKEN", Checkpoint: 4, Kind: engine.KindApproval,
			Action: "issue_refund", Args: json.RawMessage(`{"amount":4800,"currency":"USD","orderId":"o-1"}`),
			Reason: "Refund exceeds $500 threshold. Supervisor review required.", ApproverRole: "supervisor",
			Decisions: []engine.Verdict{engine.VerdictApprove, engine.VerdictEdit, engine.VerdictReject}, ExpiresAt: &expires,
		}, &events.Interrupted{}},
		{"resumed-edit", events.TypeResumed, &engine.ResumedEvent{Flow: "refund", Run: "r-42", Node: "review", RequestID: "rq_7", Kind: engine.KindApproval, Checkpoint: 5,
			Decision: "edit", Approver: "sam@example.com", Reason: "Partial refund agreed", Edits: json.RawMessage(`{"amount":400}`)}, &events.Resumed{}},
		{"expired", events.TypeExpired, &engine.ExpiredEvent{Flow: "refund", Run: "r-42", Checkpoint: 9, Node: "review", RequestID: "rq_8", Kind: engine.KindApproval,
			ExpiresAt: expires, ApproverRole: "finance_lead"}, &events.Expired{}},
		{"decided", events.TypeToolDecided, &engine.DecidedEvent{CallID: "call-1", Decision: "edited", Tool: "issue_refund",
			Args: map[string]any{"amount": 400.0, "orderId": "o-1"}, Approver: "sam@example.com", Rule: "large-refund"}, &events.Decided{}},
		{"audit-edited", events.AuditType(engine.ActionEdited), &engine.AuditRecord{Flow: "refund", Run: "r-42", Action: engine.ActionEdited, At: at, By: "sam@example.com",
			Source: "/slack/approvals", EventID: "ev-7", Node: "review", RequestID: "rq_7", Kind: engine.KindApproval, Reason: "Partial refund agreed", ApproverRole: "supervisor",
			Approval: &engine.AuditApproval{Action: "issue_refund", Args: json.RawMessage(`{"amount":4800,"orderId":"o-1"}`), Edits: json.RawMessage(`{"amount":400}`), Final: json.RawMessage(`{"amount":400,"orderId":"o-1"}`)},
			Outcome:  &engine.AuditOutcome{Status: engine.Completed, Node: "issue_refund"}, Seq: 5, Prev: "4f0c", Hash: "9a1e", Kid: goldenKid, Sig: goldenSig}, &events.AuditRecord{}},
		{"audit-escalated", events.AuditType(engine.ActionEscalated), &engine.AuditRecord{Flow: "refund", Run: "r-42", Action: engine.ActionEscalated, At: at, By: engine.TimeoutActor,
			EventID: "ev-8", Node: "review", RequestID: "rq_8", Kind: engine.KindApproval, Replaces: "rq_7", ApproverRole: "finance_lead", EscalatedFrom: "supervisor",
			Reason: "no decision by 2026-11-21T10:30:00Z; escalated from supervisor to finance_lead", Seq: 5, Prev: "4f0c", Hash: "9a1e",
			Outcome: &engine.AuditOutcome{Status: engine.Waiting, Node: "review", RequestID: "rq_8", Kind: engine.KindApproval}}, &events.AuditRecord{}},
		{"audit-refused", events.AuditType(engine.ActionRefused), &engine.AuditRecord{Flow: "refund", Run: "r-42", Action: engine.ActionRefused, At: at, By: "sam@example.com",
			Source: "/slack/approvals", EventID: "ev-9", RequestID: "rq_7", Code: engine.CodeInvalidAnswer, Reason: "amount 9000.00 is more than the 4800.00 asked for; a refund can only be lowered.",
			Side: true, Prev: "4f0c", Hash: "77b2", Kid: goldenKid, Sig: goldenSig}, &events.AuditRecord{}},
		{"resumed", events.TypeResumed, &engine.ResumedEvent{Flow: "booking", Run: "r-42", Node: "ask_contact", RequestID: "rq_1", Kind: engine.KindQuestion, Checkpoint: 8}, &events.Resumed{}},
		{"completed", events.TypeCompleted, &engine.CompletedEvent{Flow: "booking", Run: "r-42", Checkpoint: 12, State: state, Origin: origin}, &events.Completed{}},
		{"failed", events.TypeFailed, &engine.FailedEvent{Flow: "booking", Run: "r-42", Checkpoint: 5, Node: "charge", Error: "upstream down"}, &events.Failed{}},
		{"cancelled", events.TypeCancelled, &engine.CancelledEvent{Flow: "booking", Run: "r-42", Checkpoint: 6, Node: "ask_email", Reason: "duplicate", By: "/cli"}, &events.Cancelled{}},
		{"node-event", events.TypeNodePrefix + "draft", &engine.NodeEvent{Flow: "booking", Run: "r-42", Node: "pick_topics", Checkpoint: 10,
			Data: json.RawMessage(`{"text":"Thanks, Ann."}`), Origin: origin}, &events.NodeEvent{}},
		{"refused", events.TypeRefused, &engine.RefusedEvent{Flow: "booking", Run: "r-42", RequestID: "rq_1", Code: engine.CodeTokenMismatch, Message: "resumeToken does not match", EventID: "ev-1"}, &events.Refused{}},
		{"audit-started", events.AuditType(engine.ActionStarted), &engine.AuditRecord{Flow: "booking", Run: "r-42", Action: engine.ActionStarted, At: at, By: "/agents/support", EventID: "ev-0",
			Outcome: &engine.AuditOutcome{Status: engine.Waiting, Node: "ask_email", RequestID: "rq_0", Kind: engine.KindQuestion}, Seq: 1, Hash: "1f2e"}, &events.AuditRecord{}},
		{"audit-answered", events.AuditType(engine.ActionAnswered), &engine.AuditRecord{Flow: "booking", Run: "r-42", Action: engine.ActionAnswered, At: at, By: "ann@example.com", Source: "/slack/approvals",
			EventID: "ev-1", Node: "ask_email", RequestID: "rq_0", Kind: engine.KindQuestion, Trusted: true, Outcome: &engine.AuditOutcome{Status: engine.Completed, Node: "pick_topics"}, Seq: 3, Prev: "3d4c", Hash: "5b6a"}, &events.AuditRecord{}},
		{"audit-cancelled", events.AuditType(engine.ActionCancelled), &engine.AuditRecord{Flow: "booking", Run: "r-42", Action: engine.ActionCancelled, At: at, By: "/cli", Source: "/cli",
			EventID: "ev-2", Node: "ask_email", Reason: "duplicate", Outcome: &engine.AuditOutcome{Status: engine.Cancelled}, Seq: 3, Prev: "3d4c", Hash: "7f8e"}, &events.AuditRecord{}},
		{"audit-reannounced", events.AuditType(engine.ActionReannounced), &engine.AuditRecord{Flow: "booking", Run: "r-42", Action: engine.ActionReannounced, At: at, By: "/cli", Source: "/cli",
			EventID: "ev-3", Node: "ask_email", RequestID: "rq_4", Kind: engine.KindQuestion, Replaces: "rq_3", Outcome: &engine.AuditOutcome{Status: engine.Waiting, Node: "ask_email", RequestID: "rq_4", Kind: engine.KindQuestion},
			Seq: 3, Prev: "3d4c", Hash: "9a0b"}, &events.AuditRecord{}},
		{"audit-failed", events.AuditType(engine.ActionAnswered), &engine.AuditRecord{Flow: "booking", Run: "r-42", Action: engine.ActionAnswered, At: at, By: "/cli", Source: "/cli",
			EventID: "ev-5", Node: "charge", RequestID: "rq_5", Kind: engine.KindQuestion, Outcome: &engine.AuditOutcome{Status: engine.Failed, Node: "charge", Error: "upstream down"}, Seq: 7, Prev: "6e5d", Hash: "c1d2"}, &events.AuditRecord{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := events.Outbound("abc-7", "interlock/host-1", tc.typ, "booking", "r-42",
				"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", at, tc.data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := events.Encode(ev)
			if err != nil {
				t.Fatal(err)
			}
			// Encode and AppendOutbound write the bytes sdk-go's
			// marshaller writes.
			sdk, err := events.EncodeSDK(ev)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, sdk) {
				t.Fatalf("Encode wrote\n%s\nsdk-go\n%s", got, sdk)
			}
			direct, err := events.AppendOutbound(nil, "abc-7", "interlock/host-1", tc.typ, "booking", "r-42",
				"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", at, tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(direct, sdk) {
				t.Fatalf("AppendOutbound wrote\n%s\nsdk-go\n%s", direct, sdk)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, got, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			path := filepath.Join("testdata", "golden", tc.name+".json")
			if *update {
				if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Fatalf("%s changed on the wire:\n got %s\nwant %s\n(if meant: go test ./events -run Golden -update, and update docs/protocol.md)", tc.name, pretty.Bytes(), want)
			}
			back, err := events.Decode(nil, got)
			if err != nil {
				t.Fatalf("Interlock's own %s event does not decode: %v", tc.name, err)
			}
			if tc.check != nil {
				dec := json.NewDecoder(bytes.NewReader(back.Data()))
				dec.DisallowUnknownFields()
				if err := dec.Decode(tc.check); err != nil {
					t.Fatalf("the reader type %T misses a field of %s: %v", tc.check, tc.name, err)
				}
			}
		})
	}
}

// TestEngineAndReadersNameEventKindsAlike: the engine's event kinds and
// audit actions are the strings readers match on.
func TestEngineAndReadersNameEventKindsAlike(t *testing.T) {
	pairs := [][2]string{
		{engine.EventStarted, events.KindStarted}, {engine.EventInterrupted, events.KindInterrupted},
		{engine.EventResumed, events.KindResumed}, {engine.EventCompleted, events.KindCompleted},
		{engine.EventFailed, events.KindFailed}, {engine.EventCancelled, events.KindCancelled},
		{engine.EventExpired, events.KindExpired}, {engine.EventRefused, events.KindRefused},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("engine kind %q, readers' kind %q", p[0], p[1])
		}
		if _, ok := events.OutboundType(p[0]); !ok {
			t.Errorf("kind %q has no CloudEvent type", p[0])
		}
	}
	actions := [][2]string{
		{engine.ActionStarted, events.AuditStarted}, {engine.ActionInterrupted, events.AuditInterrupted},
		{engine.ActionAnswered, events.AuditAnswered}, {engine.ActionApproved, events.AuditApproved},
		{engine.ActionEdited, events.AuditEdited}, {engine.ActionRejected, events.AuditRejected},
		{engine.ActionExpired, events.AuditExpired}, {engine.ActionEscalated, events.AuditEscalated},
		{engine.ActionCancelled, events.AuditCancelled}, {engine.ActionReannounced, events.AuditReannounced},
		{engine.ActionRefused, events.AuditRefused},
	}
	for _, p := range actions {
		if p[0] != p[1] {
			t.Errorf("engine audit action %q, readers' action %q", p[0], p[1])
		}
	}
}
