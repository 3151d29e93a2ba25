package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/docs"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/internal/schematest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// contractRig is a rig whose commands are checked against the inbound
// schemas before they are sent, and whose stored documents are checked
// against theirs whenever the test looks at a run.
type contractRig struct {
	*rig
	set *schematest.Set
	// checked counts the documents validated, by schema.
	checked map[string]int
}

func (r *contractRig) send(verb, flow, run string, data map[string]any) {
	r.t.Helper()
	typ, _ := protocol.InboundType(verb)
	if verb == protocol.VerbRequest && flow == protocol.AskFlow {
		typ = protocol.TypeAskRequest
	}
	b, err := json.Marshal(data)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.set.ValidateEvent(typ, b); err != nil {
		r.t.Fatalf("the test's own %s breaks the contract: %v", verb, err)
	}
	subject := r.names.In(flow, verb)
	switch {
	case verb == "request" && flow == protocol.AskFlow:
		subject = r.names.AskRequest()
	case verb == "request":
		subject = r.names.GateRequest()
	}
	natstest.Publish(r.t, r.js, subject, typ, run, data)
}

// documents validates the run's checkpoint document and, while it waits,
// its pending index entry.
func (r *contractRig) documents(flow, run string) {
	r.t.Helper()
	for bucket, schema := range map[string]string{r.names.RunsBucket(): "checkpoint", r.names.PendingBucket(): "pending"} {
		kv, err := r.js.KeyValue(r.t.Context(), bucket)
		if err != nil {
			r.t.Fatal(err)
		}
		e, err := kv.Get(r.t.Context(), flow+"."+run)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			r.t.Fatal(err)
		}
		if err := r.set.Validate(schema, e.Value()); err != nil {
			r.t.Errorf("%s %s.%s: %v\n%s", bucket, flow, run, err, e.Value())
		}
		r.checked[schema]++
	}
}

// auditKeys validates the audit keys the workers published.
func (r *contractRig) auditKeys() {
	r.t.Helper()
	kv, err := r.js.KeyValue(r.t.Context(), r.names.ConfigBucket())
	if err != nil {
		r.t.Fatal(err)
	}
	e, err := kv.Get(r.t.Context(), protocol.AuditKeysKey)
	if err != nil {
		r.t.Fatalf("%s %s: %v", r.names.ConfigBucket(), protocol.AuditKeysKey, err)
	}
	if err := r.set.Validate("audit-keys", e.Value()); err != nil {
		r.t.Errorf("%s %s: %v\n%s", r.names.ConfigBucket(), protocol.AuditKeysKey, err, e.Value())
	}
	r.checked["audit-keys"]++
	for _, flow := range []string{"booking", "refund"} {
		e, err := kv.Get(r.t.Context(), protocol.FlowKey(flow))
		if err != nil {
			r.t.Fatalf("%s %s: %v", r.names.ConfigBucket(), protocol.FlowKey(flow), err)
		}
		if err := r.set.Validate("flow-info", e.Value()); err != nil {
			r.t.Errorf("%s %s: %v\n%s", r.names.ConfigBucket(), protocol.FlowKey(flow), err, e.Value())
		}
		r.checked["flow-info"]++
	}
}

// finished validates every entry of the finished-runs index, and checks
// that each finished status has one.
func (r *contractRig) finished() {
	r.t.Helper()
	for _, status := range wire.FinishedStatuses {
		got := natstest.Read(r.t, r.js, r.names.FinishedStream(status), r.names.Prefix+".finished."+status+".>")
		if len(got) == 0 {
			r.t.Errorf("no run ended %s in the finished-runs index", status)
		}
		for _, m := range got {
			if err := r.set.Validate("finished", m.Data); err != nil {
				r.t.Errorf("%s: %v\n%s", m.Subject, err, m.Data)
			}
			r.checked["finished"]++
		}
	}
}

// notifyFlow publishes an event of its own, then completes, or fails when
// its start state says so.
func notifyFlow() *engine.Flow {
	return engine.NewFlow[map[string]any]("notify").
		Node("draft", func(_ context.Context, n *engine.Node[map[string]any]) error {
			if n.State()["fail"] == true {
				return errors.New("upstream down")
			}
			return n.Emit("draft", map[string]any{"text": "Thanks, Ann: your refund is on its way."})
		}).Start("draft").MustBuild()
}

// approvalsFlow asks for a contract's approval by two people, with a
// reminder a second after it is asked, and lets them respond instead.
func approvalsFlow() *engine.Flow {
	return engine.NewFlow[map[string]any]("contract").
		Node("review", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Approve(ctx, engine.Approval{
				Action: "send_contract", Args: map[string]any{"value": 12000, "customer": "Acme"},
				Title: "Send Acme's contract worth $12,000.00", Description: "Renewal with a **10%** discount.", Requester: "sales-bot",
				ArgsSchema: json.RawMessage(`{"type":"object","properties":{"value":{"type":"number","title":"Value","x-interlock-display":"currency","x-interlock-key":true}}}`),
				Decisions:  []engine.Verdict{engine.VerdictApprove, engine.VerdictEdit, engine.VerdictReject, engine.VerdictRespond},
				Assignees:  []string{"ana", "ben"}, Quorum: &protocol.Quorum{Required: 2},
				Timeout: time.Minute, Reminders: []time.Duration{59 * time.Second},
			})
			return err
		}).Start("review").MustBuild()
}

// TestWhatInterlockPublishesMatchesTheContract runs a booking run, refund
// approvals (an edit, a rejection, an escalation that expires), a cancel,
// a reannounce, refusals, a node event, tool-call gate decisions, and an
// approval by two people (a reminder, a claim, a release, a delegation,
// votes, a respond) over
// the real bus, and validates every event and audit record read back from
// the streams, and the checkpoint documents and pending entries along the
// way, against the JSON Schemas of docs/schema.
func TestWhatInterlockPublishesMatchesTheContract(t *testing.T) {
	t.Parallel()
	rules := exampleRules(t)
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow(), refund.Flow(), notifyFlow(), approvalsFlow()}, GateRules: rules})
	_, js := natstest.Connect(t, srv.ClientURL())
	r := &contractRig{rig: &rig{t: t, srv: srv, js: js, names: svc.Names()}, set: schematest.Load(t), checked: map[string]int{}}
	origin := map[string]any{"slack": map[string]any{"channel": "C1", "threadTs": "171.2"}}
	token := func(in protocol.Interrupted) map[string]any { return map[string]any{"resumeToken": in.ResumeToken} }
	with := func(m map[string]any, kv ...any) map[string]any {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}

	// A booking run: a validator's re-ask, a refused token, a reannounce,
	// partial answers, nested fields and a multiple choice.
	const run = "r-contract"
	r.send("start", "booking", run, map[string]any{"state": map[string]any{"notes": []string{"from chat"}}, "origin": origin})
	in := r.interrupt("booking", run, 1)
	r.documents("booking", run)
	r.send("resume", "booking", run, with(token(in), "answers", map[string]any{"email": "nope"}))
	in = r.interrupt("booking", run, 2)
	r.send("resume", "booking", run, map[string]any{"resumeToken": "forged", "answers": map[string]any{"email": "ann@example.com"}})
	r.refusal("booking", run, 1)
	r.send("reannounce", "booking", run, map[string]any{"requestId": in.RequestID, "reason": "the inbox lost it"})
	in = r.interrupt("booking", run, 3)
	r.send("resume", "booking", run, with(token(in), "answers", map[string]any{"email": "Ann@Example.com"}, "idempotencyKey", "k-1"))
	in = r.interrupt("booking", run, 4)
	r.send("resume", "booking", run, with(token(in), "answers", map[string]any{"name": "Ann"}, "expectedCheckpoint", in.Checkpoint))
	in = r.interrupt("booking", run, 5)
	r.documents("booking", run)
	r.send("resume", "booking", run, with(token(in), "answers", map[string]any{"phone": "1"}, "update", map[string]any{"notes": []string{"called"}}))
	in = r.interrupt("booking", run, 6)
	r.send("resume", "booking", run, with(token(in), "answers", map[string]any{"level": "beginner"}))
	in = r.interrupt("booking", run, 7)
	r.send("resume", "booking", run, with(token(in), "answers", map[string]any{"driver.name": "Bob", "driver.license": "X1"}))
	in = r.interrupt("booking", run, 8)
	r.documents("booking", run)
	r.send("resume", "booking", run, with(token(in), "selected", map[string]any{"choices": []any{map[string]any{"id": "design"}}}))
	r.wait("booking", run, "completed", 1)
	r.documents("booking", run)

	// A cancel, and a resume after it.
	r.send("start", "booking", "r-cancelled", nil)
	in = r.interrupt("booking", "r-cancelled", 1)
	r.send("cancel", "booking", "r-cancelled", map[string]any{"reason": "duplicate", "by": "ann@example.com"})
	r.wait("booking", "r-cancelled", "cancelled", 1)
	r.documents("booking", "r-cancelled")
	r.send("resume", "booking", "r-cancelled", with(token(in), "answers", map[string]any{"email": "ann@example.com"}))
	r.refusal("booking", "r-cancelled", 1)

	// Refunds: an edit the validator refuses, then one it takes; a
	// rejection; an approval nobody decides, escalated and then expired.
	refundRun := func(id string, state map[string]any) protocol.Interrupted {
		t.Helper()
		r.send("start", "refund", id, map[string]any{"state": state, "origin": origin})
		r.send("resume", "refund", id, with(token(r.interrupt("refund", id, 1)), "answers", map[string]any{"last4": "4821"}))
		in := r.interrupt("refund", id, 2)
		r.documents("refund", id)
		return in
	}
	in = refundRun("r-edit", map[string]any{"orderId": "o-1", "amount": 4800, "currency": "USD"})
	r.send("resume", "refund", "r-edit", with(token(in), "decision", "edit", "edits", map[string]any{"amount": 9000}, "approver", "sam"))
	r.refusal("refund", "r-edit", 1)
	r.send("resume", "refund", "r-edit", with(token(in), "decision", "edit", "edits", map[string]any{"amount": 400},
		"approver", "sam@example.com", "reason", "partial refund agreed"))
	r.wait("refund", "r-edit", "completed", 1)
	r.documents("refund", "r-edit")

	in = refundRun("r-reject", map[string]any{"orderId": "o-2", "amount": 4800})
	r.send("resume", "refund", "r-reject", with(token(in), "decision", "reject", "approver", "sam", "reason", "duplicate"))
	r.wait("refund", "r-reject", "completed", 1)
	r.documents("refund", "r-reject")

	refundRun("r-expire", map[string]any{"orderId": "o-3", "amount": 900, "approvalTimeoutSeconds": 1})
	r.interrupt("refund", "r-expire", 3) // escalated to finance_lead
	r.documents("refund", "r-expire")
	r.wait("refund", "r-expire", "expired", 1)
	r.documents("refund", "r-expire")

	// An approval by two people: a reminder, a claim and its release, a
	// delegation to a role, a vote short of the quorum, the vote that
	// meets it; and a respond.
	r.send("start", "contract", "r-quorum", nil)
	in = r.interrupt("contract", "r-quorum", 1)
	r.documents("contract", "r-quorum")
	r.wait("contract", "r-quorum", "reminded", 1)
	assign := func(op, by, to string) {
		t.Helper()
		data := map[string]any{"requestId": in.RequestID, "op": op, "by": by}
		if to != "" {
			data["to"] = to
		}
		r.send("assign", "contract", "r-quorum", data)
	}
	assign("claim", "ana", "")
	r.wait("contract", "r-quorum", "assigned", 1)
	r.documents("contract", "r-quorum")
	assign("release", "ana", "")
	r.wait("contract", "r-quorum", "assigned", 2)
	assign("delegate", "ana", "role:legal")
	r.wait("contract", "r-quorum", "assigned", 3)
	r.send("resume", "contract", "r-quorum", with(token(in), "decision", "approve", "approver", "ana"))
	r.wait("contract", "r-quorum", "voted", 1)
	in = r.interrupt("contract", "r-quorum", 2)
	r.documents("contract", "r-quorum")
	r.send("resume", "contract", "r-quorum", with(token(in), "decision", "approve", "approver", "ben"))
	r.wait("contract", "r-quorum", "completed", 1)
	r.documents("contract", "r-quorum")
	r.send("start", "contract", "r-respond", nil)
	in = r.interrupt("contract", "r-respond", 1)
	r.send("resume", "contract", "r-respond", with(token(in), "decision", "respond", "approver", "ana", "message", "Ask legal about the discount first."))
	r.wait("contract", "r-respond", "completed", 1)

	// A node event, and a run that fails.
	r.send("start", "notify", "r-notify", nil)
	r.wait("notify", "r-notify", "completed", 1)
	r.send("start", "notify", "r-fail", map[string]any{"state": map[string]any{"fail": true}})
	r.wait("notify", "r-fail", "failed", 1)
	r.documents("notify", "r-fail")

	// The tool-call gate: allowed at once, and approved after a person.
	r.send("request", "gate", "", map[string]any{"callId": "call-small", "tool": "issue_refund", "args": map[string]any{"amount": 200}})
	r.wait("gate", "call-small", "decided", 1)
	r.send("request", "gate", "", map[string]any{
		"callId": "call-big", "tool": "issue_refund", "args": map[string]any{"orderId": "o-1", "amount": 4800},
		"conversationId": "conv-1", "agent": "support-bot", "messages": []any{}, "context": map[string]any{}, "origin": origin,
	})
	in = r.interrupt("gate", "call-big", 1)
	r.documents("gate", "call-big")
	r.send("resume", "gate", "call-big", with(token(in), "decision", "approve", "approver", "sam"))
	var d protocol.Decided
	natstest.Last(t, r.wait("gate", "call-big", "decided", 1), "decided").Decode(t, &d)
	// Its approval taken, once, to run it.
	r.send("consume", "gate", "call-big", map[string]any{"callId": "call-big", "argsDigest": d.FinalDigest})
	r.wait("gate", "call-big", "consumed", 1)

	// An ask: an approval of the caller's design, edited by a person.
	r.send("request", "ask", "", map[string]any{"askId": "ask-1", "agent": "support-bot", "conversationId": "conv-2",
		"messages": []any{map[string]any{"role": "user", "content": "refund me"}}, "origin": origin,
		"interrupt": map[string]any{"kind": "approval", "title": "Refund 4800 USD", "action": "issue_refund",
			"args": map[string]any{"amount": 4800}, "argsSchema": map[string]any{"type": "object"}, "timeout": "1h",
			"onTimeout": map[string]any{"policy": "expire"}}})
	in = r.interrupt("ask", "ask-1", 1)
	r.documents("ask", "ask-1")
	r.send("resume", "ask", "ask-1", with(token(in), "decision", "edit", "edits", map[string]any{"amount": 400}, "approver", "sam"))
	r.wait("ask", "ask-1", "answered", 1)
	natstest.WaitDrained(t, js, r.names.InStream())
	r.auditKeys()
	r.finished()

	seen, types := map[string]int{}, map[string]int{} // by schema, by CloudEvent type
	for _, stream := range []struct{ name, filter string }{
		{r.names.EventStream(), r.names.Prefix + ".ev.>"},
		{r.names.AuditStream(), r.names.Prefix + ".audit.>"},
	} {
		for _, m := range natstest.Read(t, js, stream.name, stream.filter) {
			if m.Event.ID() == "" {
				t.Errorf("%s: not a CloudEvent: %s", m.Subject, m.Data)
				continue
			}
			if err := r.set.Validate("cloudevent", m.Data); err != nil {
				t.Errorf("%s: envelope: %v", m.Subject, err)
			}
			name, _ := r.set.NameOf(m.Event.Type())
			seen[name]++
			types[m.Event.Type()]++
			if err := r.set.ValidateEvent(m.Event.Type(), m.Event.Data()); err != nil {
				t.Errorf("%s (%s): %v\n%s", m.Subject, m.Event.Type(), err, m.Event.Data())
			}
		}
	}
	for _, e := range docs.Index() {
		if e.Direction == docs.Outbound && seen[e.Name] == 0 {
			t.Errorf("the runs published no %s; make them, so that its schema is checked against the wire", e.Name)
		}
		if e.Direction == docs.Stored && r.checked[e.Name] == 0 {
			t.Errorf("the test read no %s document", e.Name)
		}
	}
	for _, action := range []string{
		protocol.ActionStarted, protocol.ActionAnswered, protocol.ActionApproved,
		protocol.ActionEdited, protocol.ActionRejected, protocol.ActionExpired, protocol.ActionEscalated, protocol.ActionCancelled,
		protocol.ActionReannounced, protocol.ActionRefused, protocol.ActionReminded, protocol.ActionClaimed, protocol.ActionReleased,
		protocol.ActionDelegated, protocol.ActionVoted, protocol.ActionResponded,
	} {
		if types[protocol.AuditType(action)] == 0 {
			t.Errorf("the runs wrote no %s audit record", action)
		}
	}
	if n := types[protocol.AuditType(protocol.ActionInterrupted)]; n != 0 {
		t.Errorf("the runs wrote %d interrupted audit records; a pause is told in the outcome of the record of the transition that paused the run", n)
	}
	t.Logf("validated %v and documents %v", seen, r.checked)
}
