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
	"github.com/interlockhq/interlock/protocol"
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
		{"started", protocol.TypeStarted, &protocol.Started{Flow: "booking", Run: "r-42", Checkpoint: 1, Origin: origin}, &protocol.Started{}},
		{"interrupted-question", protocol.TypeInterrupted, &protocol.Interrupted{
			Flow: "booking", Run: "r-42", Node: "ask_contact", RequestID: "rq_1", ResumeToken: "TOKEN", Checkpoint: 7, Kind: protocol.KindQuestion,
			Questions: []protocol.Question{
				{Field: "name", Question: "What's your name?", Suggestions: []string{"Ann"}},
				{Field: "email", Question: "What's your email?", Context: "ERROR: That doesn't look like an email."},
			},
			Context: "Ask both in one natural message.", ExpiresAt: &expires, Origin: origin,
		}, &protocol.Interrupted{}},
		{"interrupted-choice", protocol.TypeInterrupted, &protocol.Interrupted{
			Flow: "booking", Run: "r-42", Node: "pick_topics", RequestID: "rq_2", ResumeToken: "TOKEN", Checkpoint: 9, Kind: protocol.KindChoice,
			Question: "Which topics?", Options: []engine.Option{{ID: "product", Label: "Product"}, {ID: "design", Label: "Design"}}, Multiple: &multiple,
		}, &protocol.Interrupted{}},
		{"interrupted-approval", protocol.TypeInterrupted, &protocol.Interrupted{
			Flow: "refund", Run: "r-42", Node: "review", RequestID: "rq_7", ResumeToken: "TOKEN", Checkpoint: 4, Kind: protocol.KindApproval,
			Action: "issue_refund", Args: json.RawMessage(`{"amount":4800,"currency":"USD","orderId":"o-1"}`),
			Reason: "Refund exceeds $500 threshold. Supervisor review required.", ApproverRole: "supervisor",
			Decisions: []engine.Verdict{engine.VerdictApprove, engine.VerdictEdit, engine.VerdictReject}, ExpiresAt: &expires,
		}, &protocol.Interrupted{}},
		{"interrupted-quorum", protocol.TypeInterrupted, &protocol.Interrupted{
			Flow: "refund", Run: "r-43", Node: "review", RequestID: "rq_9", ResumeToken: "TOKEN", Checkpoint: 6, Kind: protocol.KindApproval,
			Action: "issue_refund", Args: json.RawMessage(`{"amount":12500,"currency":"USD","orderId":"o-2"}`),
			Reason: "Refunds over 10,000 take two supervisors.", ApproverRole: "supervisor",
			Decisions: []engine.Verdict{engine.VerdictApprove, engine.VerdictEdit, engine.VerdictReject, engine.VerdictRespond},
			Title:     "Refund $12,500.00 to Ann on order o-2", Description: "Ann's order **o-2** arrived damaged.", Requester: "support-agent",
			ArgsSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","title":"Amount","x-interlock-display":"currency"}}}`),
			Assignees:  []string{"ana", "ben"}, ClaimedBy: "ana", Quorum: &protocol.Quorum{Required: 2}, SeparationOfDuties: true,
			Votes:     []protocol.Vote{{Approver: "cem", Verdict: engine.VerdictApprove, Digest: "9f2c", At: at}},
			ExpiresAt: &expires, OnTimeout: &protocol.Policy{Action: "escalate", ApproverRole: "finance_lead", Timeout: "30m0s"},
		}, &protocol.Interrupted{}},
		{"assigned", protocol.TypeAssigned, &protocol.Assigned{Flow: "refund", Run: "r-43", RequestID: "rq_9", Op: protocol.AssignDelegate, By: "ana",
			Reason: "over my limit", ApproverRole: "finance_lead", Checkpoint: 7, Origin: origin}, &protocol.Assigned{}},
		{"voted", protocol.TypeVoted, &protocol.Voted{Flow: "refund", Run: "r-43", RequestID: "rq_9", Approver: "cem",
			Votes: []protocol.Vote{{Approver: "cem", Verdict: engine.VerdictApprove, Digest: "9f2c", At: at}}, Required: 2, Checkpoint: 6}, &protocol.Voted{}},
		{"reminded", protocol.TypeReminded, &protocol.Reminded{Flow: "refund", Run: "r-43", RequestID: "rq_9", Kind: protocol.KindApproval, ExpiresAt: &expires,
			ApproverRole: "supervisor", Assignees: []string{"ana", "ben"}, ClaimedBy: "ana", Checkpoint: 8}, &protocol.Reminded{}},
		{"decided-responded", protocol.TypeToolDecided, &protocol.Decided{CallID: "call-2", Decision: "responded", Tool: "issue_refund",
			Approver: "sam@example.com", Rule: "large-refund", Message: "Ask the customer for the order number first."}, &protocol.Decided{}},
		{"answered", protocol.TypeAnswered, &protocol.Answered{AskID: "ask-7f3", Status: protocol.AskAnswered, Kind: protocol.KindApproval,
			Decision: engine.VerdictEdit, Args: json.RawMessage(`{"amount":400,"orderId":"o-1"}`), Approver: "sam@example.com", Reason: "partial refund",
			Origin: origin, At: at}, &protocol.Answered{}},
		{"resumed-edit", protocol.TypeResumed, &protocol.Resumed{Flow: "refund", Run: "r-42", Node: "review", RequestID: "rq_7", Kind: protocol.KindApproval, Checkpoint: 5,
			Decision: "edit", Approver: "sam@example.com", Reason: "Partial refund agreed", Edits: json.RawMessage(`{"amount":400}`)}, &protocol.Resumed{}},
		{"expired", protocol.TypeExpired, &protocol.Expired{Flow: "refund", Run: "r-42", Checkpoint: 9, Node: "review", RequestID: "rq_8", Kind: protocol.KindApproval,
			ExpiresAt: expires, ApproverRole: "finance_lead"}, &protocol.Expired{}},
		{"decided", protocol.TypeToolDecided, &protocol.Decided{CallID: "call-1", Decision: "edited", Tool: "issue_refund",
			ArgsDigest: "46ef5b9a0f1bde6c64a8f16d0f9b1fa3b0b4b1a3c58cde37cf6b2b3b5a8e3d11",
			Args:       json.RawMessage(`{"amount":400,"orderId":"o-1"}`), FinalDigest: "0b1a2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9",
			Approver: "sam@example.com", Rule: "large-refund"}, &protocol.Decided{}},
		{"consumed", protocol.TypeToolConsumed, &protocol.Consumed{CallID: "call-1", ArgsDigest: "0b1a2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9",
			By: "support-bot", At: at}, &protocol.Consumed{}},
		{"audit-edited", protocol.AuditType(protocol.ActionEdited), &protocol.AuditRecord{Flow: "refund", Run: "r-42", Action: protocol.ActionEdited, At: at, By: "sam@example.com",
			Source: "/slack/approvals", EventID: "ev-7", Node: "review", RequestID: "rq_7", Kind: protocol.KindApproval, Reason: "Partial refund agreed", ApproverRole: "supervisor",
			Approval: &protocol.AuditApproval{Action: "issue_refund", Args: json.RawMessage(`{"amount":4800,"orderId":"o-1"}`), Edits: json.RawMessage(`{"amount":400}`), Final: json.RawMessage(`{"amount":400,"orderId":"o-1"}`)},
			Outcome:  &protocol.AuditOutcome{Status: engine.Completed, Node: "issue_refund"}, Seq: 5, Prev: "4f0c", Hash: "9a1e", Kid: goldenKid, Sig: goldenSig}, &protocol.AuditRecord{}},
		{"audit-escalated", protocol.AuditType(protocol.ActionEscalated), &protocol.AuditRecord{Flow: "refund", Run: "r-42", Action: protocol.ActionEscalated, At: at, By: engine.TimeoutActor,
			EventID: "ev-8", Node: "review", RequestID: "rq_8", Kind: protocol.KindApproval, Replaces: "rq_7", ApproverRole: "finance_lead", EscalatedFrom: "supervisor",
			Reason: "no decision by 2026-11-21T10:30:00Z; escalated from supervisor to finance_lead", Seq: 5, Prev: "4f0c", Hash: "9a1e",
			Outcome: &protocol.AuditOutcome{Status: engine.Waiting, Node: "review", RequestID: "rq_8", Kind: protocol.KindApproval}}, &protocol.AuditRecord{}},
		{"audit-refused", protocol.AuditType(protocol.ActionRefused), &protocol.AuditRecord{Flow: "refund", Run: "r-42", Action: protocol.ActionRefused, At: at, By: "sam@example.com",
			Source: "/slack/approvals", EventID: "ev-9", RequestID: "rq_7", Code: protocol.CodeInvalidAnswer, Reason: "amount 9000.00 is more than the 4800.00 asked for; a refund can only be lowered.",
			Side: true, Prev: "4f0c", Hash: "77b2", Kid: goldenKid, Sig: goldenSig}, &protocol.AuditRecord{}},
		{"resumed", protocol.TypeResumed, &protocol.Resumed{Flow: "booking", Run: "r-42", Node: "ask_contact", RequestID: "rq_1", Kind: protocol.KindQuestion, Checkpoint: 8}, &protocol.Resumed{}},
		{"completed", protocol.TypeCompleted, &protocol.Completed{Flow: "booking", Run: "r-42", Checkpoint: 12, State: stateJSON(state), Origin: origin}, &protocol.Completed{}},
		{"failed", protocol.TypeFailed, &protocol.Failed{Flow: "booking", Run: "r-42", Checkpoint: 5, Node: "charge", Error: "upstream down"}, &protocol.Failed{}},
		{"cancelled", protocol.TypeCancelled, &protocol.Cancelled{Flow: "booking", Run: "r-42", Checkpoint: 6, Node: "ask_email", Reason: "duplicate", By: "/cli"}, &protocol.Cancelled{}},
		{"node-event", protocol.TypeNodePrefix + "draft", &protocol.NodeEvent{Flow: "booking", Run: "r-42", Node: "pick_topics", Checkpoint: 10,
			Data: json.RawMessage(`{"text":"Thanks, Ann."}`), Origin: origin}, &protocol.NodeEvent{}},
		{"refused", protocol.TypeRefused, &protocol.Refused{Flow: "booking", Run: "r-42", RequestID: "rq_1", Code: protocol.CodeTokenMismatch, Message: "resumeToken does not match", EventID: "ev-1"}, &protocol.Refused{}},
		{"audit-started", protocol.AuditType(protocol.ActionStarted), &protocol.AuditRecord{Flow: "booking", Run: "r-42", Action: protocol.ActionStarted, At: at, By: "/agents/support", EventID: "ev-0",
			Outcome: &protocol.AuditOutcome{Status: engine.Waiting, Node: "ask_email", RequestID: "rq_0", Kind: protocol.KindQuestion}, Seq: 1, Hash: "1f2e"}, &protocol.AuditRecord{}},
		{"audit-answered", protocol.AuditType(protocol.ActionAnswered), &protocol.AuditRecord{Flow: "booking", Run: "r-42", Action: protocol.ActionAnswered, At: at, By: "ann@example.com", Source: "/slack/approvals",
			EventID: "ev-1", Node: "ask_email", RequestID: "rq_0", Kind: protocol.KindQuestion, Trusted: true, Outcome: &protocol.AuditOutcome{Status: engine.Completed, Node: "pick_topics"}, Seq: 3, Prev: "3d4c", Hash: "5b6a"}, &protocol.AuditRecord{}},
		{"audit-paused", protocol.AuditType(protocol.ActionAnswered), &protocol.AuditRecord{Flow: "refund", Run: "r-42", Action: protocol.ActionAnswered, At: at, By: "ann@example.com", Source: "/slack/approvals",
			EventID: "ev-1", Node: "verify_identity", RequestID: "rq_0", Kind: protocol.KindQuestion, Outcome: &protocol.AuditOutcome{Status: engine.Waiting, Node: "review",
				RequestID: "rq_1", Kind: protocol.KindApproval, ApproverRole: "supervisor", ExpiresAt: &expires, Reason: "Refund exceeds $500",
				Approval: &protocol.AuditApproval{Action: "issue_refund", Args: json.RawMessage(`{"orderId":"o-1","amount":4800}`)}}, Seq: 2, Prev: "3d4c", Hash: "5b6a"}, &protocol.AuditRecord{}},
		{"audit-cancelled", protocol.AuditType(protocol.ActionCancelled), &protocol.AuditRecord{Flow: "booking", Run: "r-42", Action: protocol.ActionCancelled, At: at, By: "/cli", Source: "/cli",
			EventID: "ev-2", Node: "ask_email", Reason: "duplicate", Outcome: &protocol.AuditOutcome{Status: engine.Cancelled}, Seq: 3, Prev: "3d4c", Hash: "7f8e"}, &protocol.AuditRecord{}},
		{"audit-reannounced", protocol.AuditType(protocol.ActionReannounced), &protocol.AuditRecord{Flow: "booking", Run: "r-42", Action: protocol.ActionReannounced, At: at, By: "/cli", Source: "/cli",
			EventID: "ev-3", Node: "ask_email", RequestID: "rq_4", Kind: protocol.KindQuestion, Replaces: "rq_3", Outcome: &protocol.AuditOutcome{Status: engine.Waiting, Node: "ask_email", RequestID: "rq_4", Kind: protocol.KindQuestion},
			Seq: 3, Prev: "3d4c", Hash: "9a0b"}, &protocol.AuditRecord{}},
		{"audit-failed", protocol.AuditType(protocol.ActionAnswered), &protocol.AuditRecord{Flow: "booking", Run: "r-42", Action: protocol.ActionAnswered, At: at, By: "/cli", Source: "/cli",
			EventID: "ev-5", Node: "charge", RequestID: "rq_5", Kind: protocol.KindQuestion, Outcome: &protocol.AuditOutcome{Status: engine.Failed, Node: "charge", Error: "upstream down"}, Seq: 7, Prev: "6e5d", Hash: "c1d2"}, &protocol.AuditRecord{}},
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
				"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", at, tc.data)
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
		{protocol.EventStarted, protocol.EventStarted}, {protocol.EventInterrupted, protocol.EventInterrupted},
		{protocol.EventResumed, protocol.EventResumed}, {protocol.EventCompleted, protocol.EventCompleted},
		{protocol.EventFailed, protocol.EventFailed}, {protocol.EventCancelled, protocol.EventCancelled},
		{protocol.EventExpired, protocol.EventExpired}, {protocol.EventRefused, protocol.EventRefused},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("engine kind %q, readers' kind %q", p[0], p[1])
		}
		if _, ok := protocol.OutboundType(p[0]); !ok {
			t.Errorf("kind %q has no CloudEvent type", p[0])
		}
	}
	actions := [][2]string{
		{protocol.ActionStarted, protocol.ActionStarted}, {protocol.ActionInterrupted, protocol.ActionInterrupted},
		{protocol.ActionAnswered, protocol.ActionAnswered}, {protocol.ActionApproved, protocol.ActionApproved},
		{protocol.ActionEdited, protocol.ActionEdited}, {protocol.ActionRejected, protocol.ActionRejected},
		{protocol.ActionExpired, protocol.ActionExpired}, {protocol.ActionEscalated, protocol.ActionEscalated},
		{protocol.ActionCancelled, protocol.ActionCancelled}, {protocol.ActionReannounced, protocol.ActionReannounced},
		{protocol.ActionRefused, protocol.ActionRefused},
	}
	for _, p := range actions {
		if p[0] != p[1] {
			t.Errorf("engine audit action %q, readers' action %q", p[0], p[1])
		}
	}
}

// stateJSON is a state as json.Marshal writes it.
func stateJSON(d engine.Doc) json.RawMessage {
	b, _ := json.Marshal(d)
	return b
}
