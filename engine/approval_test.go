package engine_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/protocol"
)

func startRefund(t *testing.T, h *enginetest.Harness, amount float64) string {
	t.Helper()
	run := h.Start(map[string]any{"orderId": "o-1", "amount": amount, "currency": "USD", "customer": "Ann"})
	h.Answer(run, map[string]any{"last4": "4821"})
	return run
}

func refundOf(t *testing.T, h *enginetest.Harness, run string) map[string]any {
	t.Helper()
	r, _ := h.State(run)["refund"].(map[string]any)
	return r
}

func TestRefundAtOrBelowThresholdNeedsNoApproval(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := h.Start(map[string]any{"orderId": "o-1", "amount": 500, "currency": "USD", "customer": "Ann"})
	if out := h.Answer(run, map[string]any{"last4": "4821"}); out.Action != "" || out.AskedAt.IsZero() {
		t.Fatalf("answering a question: outcome action %q, asked at %v; want none, and when it was asked", out.Action, out.AskedAt)
	}
	h.WantStatus(run, engine.Completed)
	if r := refundOf(t, h, run); r["amount"] != 500.0 || r["approvedBy"] != "auto" {
		t.Fatalf("refund = %v", r)
	}
}

func TestApprovalInterruptCarriesTheProposal(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := h.Start(map[string]any{"orderId": "o-1", "amount": 4800, "currency": "USD"})
	h.Answer(run, map[string]any{"last4": "12ab"})
	if got := h.Interrupt(run).Questions[0].Context; got != "ERROR: Please give exactly four digits." {
		t.Fatalf("last4 re-ask context = %q", got)
	}
	h.Answer(run, map[string]any{"last4": "4821"})
	in := h.Interrupt(run)
	if in.Kind != protocol.KindApproval || in.Action != "issue_refund" || in.ApproverRole != "supervisor" ||
		in.Reason != "Refund exceeds $500 threshold. Supervisor review required." {
		t.Fatalf("approval interrupt = %+v", in)
	}
	if fmt.Sprint(in.Decisions) != "[approve edit reject]" {
		t.Fatalf("decisions = %v, want all three by default", in.Decisions)
	}
	var args map[string]any
	if err := json.Unmarshal(in.Args, &args); err != nil || args["amount"] != 4800.0 || args["orderId"] != "o-1" || args["currency"] != "USD" {
		t.Fatalf("args = %s (%v)", in.Args, err)
	}
	if in.ExpiresAt == nil || time.Until(*in.ExpiresAt) < 29*time.Minute || time.Until(*in.ExpiresAt) > 31*time.Minute {
		t.Fatalf("expiresAt = %v, want about 30 minutes from now", in.ExpiresAt)
	}
	p := h.Store.Pending()
	if len(p) != 1 || p[0].ApproverRole != "supervisor" || p[0].ExpiresAt == nil || p[0].Action != "issue_refund" {
		t.Fatalf("pending index = %+v", p)
	}
}

func TestApproveRunsTheActionWithTheProposedArgs(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := startRefund(t, h, 4800)
	out := h.Decide(run, "approve", nil, "sam@example.com", "Verified against ticket 4821")
	if out.Refused != nil {
		t.Fatalf("approve refused: %+v", out.Refused)
	}
	if out.Action != "issue_refund" || out.AskedAt.IsZero() {
		t.Fatalf("outcome names action %q, asked at %v; want issue_refund and when it was asked", out.Action, out.AskedAt)
	}
	h.WantStatus(run, engine.Completed)
	r := refundOf(t, h, run)
	if r["amount"] != 4800.0 || r["approvedBy"] != "sam@example.com" || !strings.HasPrefix(r["refundId"].(string), "re_") {
		t.Fatalf("refund = %v", r)
	}
	if h.State(run)["outcome"] != "refunded" {
		t.Fatalf("outcome = %v", h.State(run)["outcome"])
	}
	var actions []string
	for _, rec := range h.Audit(run) {
		actions = append(actions, rec.Action)
	}
	if got := strings.Join(actions, ","); got != "started,answered,approved" {
		t.Fatalf("audit actions = %s", got)
	}
	rec := h.Audit(run)[2]
	if rec.By != "sam@example.com" || rec.Reason != "Verified against ticket 4821" || rec.Approval == nil || rec.Approval.Action != "issue_refund" {
		t.Fatalf("approved record = %+v", rec)
	}
}

// TestAPauseIsOneAuditRecordWhoseOutcomeSaysWhatTheRunWaitsFor checks
// that a transition that pauses the run appends one record, its own, and
// that its outcome carries what the run waits for: the interrupt's node,
// request, kind, role, deadline, and an approval's reason and proposal.
func TestAPauseIsOneAuditRecordWhoseOutcomeSaysWhatTheRunWaitsFor(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := h.Start(map[string]any{"orderId": "o-1", "amount": 4800, "currency": "USD", "customer": "Ann"})
	asked := h.Interrupt(run)
	h.Answer(run, map[string]any{"last4": "4821"})
	in := h.Interrupt(run)
	recs := h.Audit(run)
	if len(recs) != 2 || recs[0].Action != protocol.ActionStarted || recs[1].Action != protocol.ActionAnswered {
		t.Fatalf("records %+v, want started and answered only", recs)
	}
	for i, want := range []enginetest.Interrupt{asked, in} {
		rec := recs[i]
		o := rec.Outcome
		if !rec.Paused() || o == nil || o.Status != engine.Waiting || o.Node != want.Node || o.RequestID != want.RequestID || o.Kind != want.Kind {
			t.Fatalf("%s record's outcome %+v, want a pause on %s %s at %s", rec.Action, o, want.Kind, want.RequestID, want.Node)
		}
	}
	o := recs[1].Outcome
	if in.Kind != engine.KindApproval || in.ApproverRole == "" || in.ExpiresAt == nil || in.Reason == "" {
		t.Fatalf("the refund's approval %+v has no role, deadline or reason to record", in)
	}
	if o.ApproverRole != in.ApproverRole || o.ExpiresAt == nil || !o.ExpiresAt.Equal(*in.ExpiresAt) || o.Reason != in.Reason ||
		o.Approval == nil || o.Approval.Action != in.Action || !bytes.Equal(o.Approval.Args, in.Args) {
		t.Fatalf("answered record's outcome %+v (approval %+v), want the approval %+v", o, o.Approval, in)
	}
	if q := recs[0].Outcome; q.ApproverRole != "" || q.ExpiresAt != nil || q.Reason != "" || q.Approval != nil {
		t.Fatalf("started record's outcome %+v says more than the question it waits on", q)
	}
}

func TestEditRunsTheActionWithTheEditsMergedOverTheArgs(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := startRefund(t, h, 4800)
	if out := h.Decide(run, "edit", map[string]any{"amount": 400}, "sam", "Partial refund agreed"); out.Refused != nil {
		t.Fatalf("edit refused: %+v", out.Refused)
	}
	h.WantStatus(run, engine.Completed)
	if r := refundOf(t, h, run); r["amount"] != 400.0 || r["orderId"] != "o-1" {
		t.Fatalf("refund = %v", r)
	}
	recs := h.Audit(run)
	rec := recs[len(recs)-1]
	if rec.Action != protocol.ActionEdited || rec.Approval == nil {
		t.Fatalf("last record = %+v", rec)
	}
	if !strings.Contains(string(rec.Approval.Args), `"amount":4800`) || !strings.Contains(string(rec.Approval.Final), `"amount":400`) {
		t.Fatalf("edited record args before %s, after %s", rec.Approval.Args, rec.Approval.Final)
	}
}

func TestEditsTheValidatorRefusesLeaveTheApprovalPendingWithItsToken(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := startRefund(t, h, 4800)
	before := h.Interrupt(run)
	rev := h.Checkpoint(run).Seq
	out := h.Decide(run, "edit", map[string]any{"orderId": "o-2"}, "sam", "")
	if out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer || !strings.Contains(out.Refused.Message, "orderId cannot be changed") {
		t.Fatalf("outcome = %+v, want invalid_answer saying the order cannot change", out)
	}
	if h.Checkpoint(run).Seq != rev {
		t.Fatal("a refused edit wrote the checkpoint")
	}
	after := h.Interrupt(run)
	if after.RequestID != before.RequestID || after.ResumeToken != before.ResumeToken {
		t.Fatal("the approval was re-issued; it should stay pending with its token")
	}
	if out := h.Resume(run, engine.Resume{Token: before.ResumeToken, Decision: "edit", Edits: raw(t, map[string]any{"amount": 450}), Approver: "sam"}); out.Refused != nil {
		t.Fatalf("valid edit with the same token refused: %+v", out.Refused)
	}
	if r := refundOf(t, h, run); r["amount"] != 450.0 {
		t.Fatalf("refund = %v", r)
	}
	last := h.Audit(run)
	if rec := last[len(last)-2]; rec.Action != protocol.ActionRefused || !rec.Side || rec.Code != protocol.CodeInvalidAnswer {
		t.Fatalf("refusal record = %+v", rec)
	}
}

func TestApprovalDecisionsAreChecked(t *testing.T) {
	flow := engine.NewFlow[map[string]any]("send").
		Node("send", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Approve(ctx, engine.Approval{Action: "send_email", Args: map[string]any{"to": "a@b.c"},
				ApproverRole: "support", Decisions: []engine.Verdict{engine.VerdictApprove, engine.VerdictReject}})
			return err
		}).Start("send").MustBuild()
	tests := []struct {
		name    string
		r       engine.Resume
		wantMsg string
	}{
		{"verdict not allowed", engine.Resume{Decision: "edit", Edits: map[string]json.RawMessage{"to": []byte(`"x@y.z"`)}}, `decision "edit" is not allowed here; send one of approve, reject`},
		{"unknown verdict", engine.Resume{Decision: "maybe"}, `decision "maybe" is not allowed`},
		{"no verdict", engine.Resume{Approver: "sam"}, "decision is missing"},
		{"edits on approve", engine.Resume{Decision: "approve", Edits: map[string]json.RawMessage{"to": []byte(`"x@y.z"`)}}, "edits are taken only with decision edit"},
		{"edits on reject", engine.Resume{Decision: "reject", Edits: map[string]json.RawMessage{"to": []byte(`"x@y.z"`)}}, "edits are taken only with decision edit"},
		{"answers", engine.Resume{Answers: map[string]json.RawMessage{"to": []byte(`"x"`)}}, "this interrupt is an approval of send_email"},
	}
	h := enginetest.New(t, flow)
	run := h.Start(nil)
	token := h.Interrupt(run).ResumeToken
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := h.Resume(run, tt.r)
			if out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer || !strings.Contains(out.Refused.Message, tt.wantMsg) {
				t.Fatalf("outcome = %+v, want invalid_answer with %q", out.Refused, tt.wantMsg)
			}
			if h.Interrupt(run).ResumeToken != token {
				t.Fatal("a refused decision changed the pending token")
			}
		})
	}
	h2 := enginetest.New(t, refund.Flow())
	run2 := startRefund(t, h2, 4800)
	if out := h2.Decide(run2, "edit", map[string]any{"amout": 400}, "sam", ""); out.Refused == nil || !strings.Contains(out.Refused.Message, `edits name "amout", which is not an arg of issue_refund; edit one of amount, currency, orderId`) {
		t.Fatalf("typo edit = %+v", out.Refused)
	}
	if out := h2.Decide(run2, "edit", nil, "sam", ""); out.Refused == nil || !strings.Contains(out.Refused.Message, "decision edit needs edits") {
		t.Fatalf("empty edit = %+v", out.Refused)
	}
}

func TestRejectTakesTheRejectRouteAndNeverRunsTheAction(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := startRefund(t, h, 4800)
	if out := h.Decide(run, "reject", nil, "sam@example.com", "Duplicate of refund re_77"); out.Refused != nil {
		t.Fatalf("reject refused: %+v", out.Refused)
	}
	h.WantStatus(run, engine.Completed)
	s := h.State(run)
	if s["refund"] != nil || s["outcome"] != "rejected" {
		t.Fatalf("state = %v: the refund ran or the outcome is wrong", s)
	}
	if rj, _ := s["rejection"].(map[string]any); rj["approver"] != "sam@example.com" || rj["reason"] != "Duplicate of refund re_77" {
		t.Fatalf("rejection in state = %v", s["rejection"])
	}
	cp := h.Checkpoint(run)
	if cp.Rejection == nil || cp.Rejection.Approver != "sam@example.com" || cp.Rejection.Reason != "Duplicate of refund re_77" {
		t.Fatalf("checkpoint rejection = %+v", cp.Rejection)
	}
	recs := h.Audit(run)
	if rec := recs[len(recs)-1]; rec.Action != protocol.ActionRejected || rec.By != "sam@example.com" || rec.Reason != "Duplicate of refund re_77" {
		t.Fatalf("rejected record = %+v", rec)
	}
}

func TestUpdateIsMergedThroughReducersBeforeTheNodeRunsAgain(t *testing.T) {
	type S struct {
		Messages []string `json:"messages"`
		OK       bool     `json:"ok,omitempty"`
	}
	var seen int
	flow := engine.NewFlow[S]("chat").
		Node("confirm", func(ctx context.Context, n *engine.Node[S]) error {
			seen = len(n.State().Messages)
			_, err := n.Approve(ctx, engine.Approval{Action: "reply", Args: map[string]any{}})
			return err
		}).Start("confirm").Reducer("messages", engine.Append).MustBuild()
	h := enginetest.New(t, flow)
	msgs := make([]string, 47)
	for i := range msgs {
		msgs[i] = fmt.Sprintf("message %d", i)
	}
	run := h.Start(map[string]any{"messages": msgs})
	out := h.Resume(run, engine.Resume{Decision: "approve", Update: map[string]json.RawMessage{"messages": []byte(`["one more"]`)}})
	if out.Refused != nil {
		t.Fatalf("refused: %+v", out.Refused)
	}
	got, _ := h.State(run)["messages"].([]any)
	if len(got) != 48 || got[0] != "message 0" || got[47] != "one more" {
		t.Fatalf("messages = %d items (last %v), want 48 ending with the update", len(got), got[len(got)-1])
	}
	if seen != 48 {
		t.Fatalf("the node saw %d messages when it ran again, want 48", seen)
	}
}

func TestNodeLocalsSurviveReRunsAndResetWhenTheNodeCompletes(t *testing.T) {
	var announced []string
	flow := engine.NewFlow[map[string]any]("announce").
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			if done, _ := engine.Local[bool](n, "announced"); !done {
				if err := n.Emit("message", map[string]any{"text": "Let me check that with a supervisor."}); err != nil {
					return err
				}
				announced = append(announced, n.Name())
				if err := engine.SetLocal(n, "announced", true); err != nil {
					return err
				}
			}
			if _, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "a", Question: "A?"}, {Field: "b", Question: "B?"}}}); err != nil {
				return err
			}
			_, err := n.Approve(ctx, engine.Approval{Action: "go", Args: map[string]any{}})
			return err
		}).
		Node("again", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			if _, ok := engine.Local[bool](n, "announced"); ok {
				return fmt.Errorf("the previous node's local leaked")
			}
			return nil
		}).
		Start("ask").Edge("ask", "again").MustBuild()
	h := enginetest.New(t, flow)
	run := h.Start(nil)
	h.Answer(run, map[string]any{"a": "1"})
	h.Answer(run, map[string]any{"b": "2"})
	if out := h.Decide(run, "approve", nil, "sam", ""); out.Refused != nil {
		t.Fatal(out.Refused)
	}
	h.WantStatus(run, engine.Completed)
	if len(announced) != 1 {
		t.Fatalf("announced %d times over four runs of the node, want once", len(announced))
	}
	if kinds := strings.Join(h.Kinds(run), ","); !strings.HasPrefix(kinds, "started,message,interrupted") || strings.Count(kinds, "message") != 1 {
		t.Fatalf("events = %s", kinds)
	}
	if h.Checkpoint(run).Locals != nil {
		t.Fatal("locals kept after the run completed")
	}
}

func TestAuditRecordsFormAHashChain(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := startRefund(t, h, 4800)
	h.Decide(run, "edit", map[string]any{"amount": 9000}, "sam", "") // refused: a side record
	h.Decide(run, "approve", nil, "sam", "")
	prev, n := "", uint64(0)
	for _, rec := range h.Audit(run) {
		b, _ := json.Marshal(rec)
		sum, err := protocol.CanonicalHash(b)
		if err != nil || sum != rec.Hash {
			t.Fatalf("record %+v: hash %s, recomputed %s (%v)", rec, rec.Hash, sum, err)
		}
		if rec.Side {
			if rec.Prev != prev {
				t.Fatalf("side record names head %s, want %s", rec.Prev, prev)
			}
			continue
		}
		n++
		if rec.Seq != n || rec.Prev != prev {
			t.Fatalf("record %d (%s): seq %d prev %q, want %d %q", n, rec.Action, rec.Seq, rec.Prev, n, prev)
		}
		prev = rec.Hash
	}
	if head := h.Checkpoint(run).Audit; head == nil || head.Hash != prev || head.Records != n {
		t.Fatalf("checkpoint head = %+v, want %d records ending %s", head, n, prev)
	}
}

// TestEveryAuditRecordIsSignedWithTheDeploymentsKey checks that every
// record of a run, the refusal's side record included, names the runner's
// audit key and carries an Ed25519 signature of its hash that the public
// key verifies, and that the signature is bound to the record: it does
// not verify for another record's hash.
func TestEveryAuditRecordIsSignedWithTheDeploymentsKey(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := startRefund(t, h, 4800)
	h.Decide(run, "edit", map[string]any{"amount": 9000}, "sam", "") // refused: a side record
	h.Decide(run, "approve", nil, "sam", "")
	key := h.Runner.AuditKey()
	if len(key.Key) != ed25519.PublicKeySize || key.ID != protocol.AuditKeyID(key.Key) {
		t.Fatalf("runner's audit key %+v", key)
	}
	recs := h.Audit(run)
	sides := 0
	for i, rec := range recs {
		b, _ := json.Marshal(rec)
		sum, err := protocol.CanonicalHash(b)
		if err != nil || sum != rec.Hash {
			t.Fatalf("record %d: hash %s, recomputed %s (%v)", i, rec.Hash, sum, err)
		}
		digest, _ := hex.DecodeString(rec.Hash)
		sig, err := base64.StdEncoding.DecodeString(rec.Sig)
		if rec.Kid != key.ID || err != nil || !ed25519.Verify(key.Key, digest, sig) {
			t.Fatalf("record %d (%s): kid %q sig %q does not verify with key %s", i, rec.Action, rec.Kid, rec.Sig, key.ID)
		}
		other, _ := hex.DecodeString(recs[(i+1)%len(recs)].Hash)
		if ed25519.Verify(key.Key, other, sig) {
			t.Fatalf("record %d's signature verifies for another record's hash", i)
		}
		if rec.Side {
			sides++
		}
	}
	if sides != 1 || len(recs) < 4 {
		t.Fatalf("%d records, %d side records; want the refusal's", len(recs), sides)
	}
}

func TestARejectWithoutTheReasonTheApprovalRequiresIsRefused(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := startRefund(t, h, 4800)
	if in := h.Interrupt(run); !in.RejectReasonRequired {
		t.Fatal("the refund's approval does not say a reject needs a reason")
	}
	out := h.Decide(run, "reject", nil, "sam@example.com", "  ")
	if out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer || !strings.Contains(out.Refused.Message, "needs a reason") {
		t.Fatalf("reject without a reason: %+v, want refused invalid_answer saying it needs a reason", out.Refused)
	}
	h.WantStatus(run, engine.Waiting)
	if out := h.Decide(run, "approve", nil, "sam@example.com", ""); out.Refused != nil {
		t.Fatalf("approve without a reason: %+v; only a reject needs one", out.Refused)
	}
}

func TestAQuestionCarriesTheTypeOfItsFieldFromTheState(t *testing.T) {
	type driver struct {
		Name string `json:"name"`
		Age  int    `json:"age"`
	}
	type state struct {
		Guests  int     `json:"guests"`
		Budget  float64 `json:"budget"`
		Zip     string  `json:"zip"`
		Driver  driver  `json:"driver"`
		Untyped any     `json:"untyped"`
		Named   string  `json:"named"`
	}
	f := engine.NewFlow[state]("typed").
		Node("ask", func(ctx context.Context, n *engine.Node[state]) error {
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{
				{Field: "guests", Question: "How many?"}, {Field: "budget", Question: "Budget?"},
				{Field: "zip", Question: "Zip?"}, {Field: "driver.age", Question: "Age?"},
				{Field: "untyped", Question: "Anything?"}, {Field: "named", Question: "Count?", Type: protocol.JSONInteger},
			}})
			return err
		}).Start("ask").MustBuild()
	h := enginetest.New(t, f)
	run := h.Start(map[string]any{})
	want := map[string]string{"guests": "integer", "budget": "number", "zip": "string", "driver.age": "integer", "untyped": "", "named": "integer"}
	for _, q := range h.Interrupt(run).Questions {
		if q.Type != want[q.Field] {
			t.Errorf("question %s has type %q, want %q", q.Field, q.Type, want[q.Field])
		}
	}
	info := f.Info()
	for field, typ := range map[string]string{"guests": "integer", "zip": "string", "driver": "object", "driver.name": "string"} {
		if info.State[field] != typ {
			t.Errorf("flow info: %s is %q, want %q", field, info.State[field], typ)
		}
	}
	if _, ok := info.State["untyped"]; ok {
		t.Error("flow info gives a field of type any a type")
	}
}
