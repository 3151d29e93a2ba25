package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/protocol"
)

func approvalFlow(p engine.Policy) *engine.Flow {
	return engine.NewFlow[map[string]any]("send").
		Node("send", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "send_email", Args: map[string]any{"to": "a@b.c"},
				ApproverRole: "support", Timeout: time.Minute, OnTimeout: p})
			if err != nil {
				return err
			}
			return n.Set("sent", d.Approved())
		}).Start("send").MustBuild()
}

func TestEscalationChainsThenExpires(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := h.Start(map[string]any{"orderId": "o-1", "amount": 4800, "approvalTimeoutSeconds": 60})
	h.Answer(run, map[string]any{"last4": "4821"})
	first := h.Interrupt(run)

	out := h.Expire(run)
	if out.Refused != nil || out.Status != engine.Waiting {
		t.Fatalf("first deadline: %+v", out)
	}
	second := h.Interrupt(run)
	if second.ApproverRole != refund.FinanceLeadRole || second.RequestID == first.RequestID || second.ResumeToken == first.ResumeToken {
		t.Fatalf("escalated interrupt = %+v", second)
	}
	if !second.ExpiresAt.After(*first.ExpiresAt) {
		t.Fatalf("escalation deadline %s is not after %s", second.ExpiresAt, first.ExpiresAt)
	}
	if p := h.Store.Pending(); len(p) != 1 || p[0].ApproverRole != refund.FinanceLeadRole {
		t.Fatalf("pending index = %+v", p)
	}
	old := h.Resume(run, engine.Resume{Token: first.ResumeToken, Decision: "approve", Approver: "sam"})
	if old.Refused == nil || old.Refused.Code != protocol.CodeExpired || !strings.Contains(old.Refused.Message, "escalated to finance_lead") {
		t.Fatalf("resume with the supervisor's token = %+v, want expired", old.Refused)
	}

	out = h.Expire(run)
	if out.Status != engine.Expired {
		t.Fatalf("second deadline: %+v", out)
	}
	kinds := h.Kinds(run)
	if kinds[len(kinds)-1] != "expired" || strings.Count(strings.Join(kinds, ","), "expired") != 1 {
		t.Fatalf("events = %v", kinds)
	}
	if late := resumeDirect(t, h, "refund", run, second.ResumeToken); late.Refused == nil || late.Refused.Code != protocol.CodeExpired {
		t.Fatalf("resume of the expired run = %+v, want expired", late.Refused)
	}
	cp := h.Checkpoint(run)
	if cp.Expired == nil || cp.Expired.ApproverRole != refund.FinanceLeadRole || len(h.Store.Pending()) != 0 {
		t.Fatalf("expired checkpoint = %+v, pending %v", cp.Expired, h.Store.Pending())
	}
	var actions []string
	for _, rec := range h.Audit(run) {
		if rec.Action == protocol.ActionEscalated || rec.Action == protocol.ActionExpired {
			if rec.By != engine.TimeoutActor {
				t.Fatalf("%s record by %q", rec.Action, rec.By)
			}
			actions = append(actions, rec.Action)
		}
	}
	if strings.Join(actions, ",") != "escalated,expired" {
		t.Fatalf("timeout records = %v", actions)
	}
}

func TestResumeAfterExpiryIsRefusedExpired(t *testing.T) {
	h := enginetest.New(t, approvalFlow(engine.Policy{}))
	run := h.Start(nil)
	in := h.Interrupt(run)
	h.Advance(2 * time.Minute)
	out := h.Resume(run, engine.Resume{Token: in.ResumeToken, Decision: "approve"})
	if out.Refused == nil || out.Refused.Code != protocol.CodeExpired {
		t.Fatalf("resume past the deadline = %+v, want expired", out.Refused)
	}
	h.Expire(run)
	h.WantStatus(run, engine.Expired)
	out = resumeDirect(t, h, "send", run, in.ResumeToken)
	if out.Refused == nil || out.Refused.Code != protocol.CodeExpired {
		t.Fatalf("resume of an expired run = %+v, want expired", out.Refused)
	}
}

func TestTimeoutPoliciesDecideAsTheTimeoutActor(t *testing.T) {
	for _, tt := range []struct {
		policy engine.TimeoutAction
		sent   bool
		action string
	}{
		{engine.OnTimeoutApprove, true, protocol.ActionApproved},
		{engine.OnTimeoutReject, false, protocol.ActionRejected},
	} {
		t.Run(string(tt.policy), func(t *testing.T) {
			h := enginetest.New(t, approvalFlow(engine.Policy{Action: tt.policy}))
			run := h.Start(nil)
			h.Expire(run)
			h.WantStatus(run, engine.Completed)
			if h.State(run)["sent"] != tt.sent {
				t.Fatalf("sent = %v, want %v", h.State(run)["sent"], tt.sent)
			}
			d := h.Checkpoint(run).Decisions
			if len(d) != 1 || d[0].Approver != engine.TimeoutActor || !d[0].Timeout {
				t.Fatalf("decisions = %+v", d)
			}
			found := false
			for _, rec := range h.Audit(run) {
				if rec.Action == tt.action && rec.By == engine.TimeoutActor && rec.Timeout {
					found = true
				}
			}
			if !found {
				t.Fatalf("no %s record by %s", tt.action, engine.TimeoutActor)
			}
		})
	}
}

func TestExpireForAnAnsweredInterruptDoesNothing(t *testing.T) {
	h := enginetest.New(t, approvalFlow(engine.Policy{}))
	run := h.Start(nil)
	requestID := h.Interrupt(run).RequestID
	h.Decide(run, "approve", nil, "sam", "")
	h.WantStatus(run, engine.Completed)
	h.Advance(2 * time.Minute)
	out, err := h.Runner.Expire(t.Context(), engine.Expire{Flow: "send", Run: run, RequestID: requestID, Inbound: engine.Inbound{EventID: "late"}})
	if err != nil || !out.Duplicate || out.Status != engine.Completed {
		t.Fatalf("late expire = %+v, %v", out, err)
	}
	if strings.Contains(strings.Join(h.Kinds(run), ","), "expired") {
		t.Fatal("an answered interrupt expired")
	}
}

func TestEarlyExpireWaitsForTheDeadline(t *testing.T) {
	h := enginetest.New(t, approvalFlow(engine.Policy{}))
	run := h.Start(nil)
	cp := h.Checkpoint(run)
	out, err := h.Runner.Expire(t.Context(), engine.Expire{Flow: "send", Run: run, RequestID: cp.Interrupt.RequestID, Inbound: engine.Inbound{EventID: "early"}})
	if err != nil || out.RetryAfter < 50*time.Second {
		t.Fatalf("early expire = %+v, %v; want a retry at the deadline", out, err)
	}
	h.WantStatus(run, engine.Waiting)
}

func TestQuestionDeadlineSurvivesPartialAnswers(t *testing.T) {
	flow := engine.NewFlow[map[string]any]("ask").
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Ask(ctx, engine.Questions{Timeout: time.Hour, Questions: []engine.Question{{Field: "a", Question: "A?"}, {Field: "b", Question: "B?"}}})
			return err
		}).Start("ask").MustBuild()
	h := enginetest.New(t, flow)
	run := h.Start(nil)
	first := h.Interrupt(run).ExpiresAt
	h.Advance(10 * time.Minute)
	h.Answer(run, map[string]any{"a": "1"})
	if again := h.Interrupt(run).ExpiresAt; again == nil || first == nil || !again.Equal(*first) {
		t.Fatalf("re-ask deadline %v, want the first %v", again, first)
	}
	h.Expire(run)
	h.WantStatus(run, engine.Expired)
}

func TestPoliciesAreCheckedWhenTheNodeAsks(t *testing.T) {
	for _, tt := range []struct {
		name string
		fn   func(ctx context.Context, n *engine.Node[map[string]any]) error
		want string
	}{
		{"question that escalates", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Approve(ctx, engine.Approval{Action: "x", OnTimeout: engine.Policy{Action: engine.OnTimeoutApprove}})
			return err
		}, "OnTimeout is set but Timeout is not"},
		{"escalation without timeout", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Approve(ctx, engine.Approval{Action: "x", Timeout: time.Minute, OnTimeout: engine.Escalate("boss", 0, engine.Policy{})})
			return err
		}, "escalation to boss needs a positive Timeout"},
		{"unknown policy", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Approve(ctx, engine.Approval{Action: "x", Timeout: time.Minute, OnTimeout: engine.Policy{Action: "snooze"}})
			return err
		}, `OnTimeout "snooze" is not one of expire, reject, approve, escalate`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := enginetest.New(t, engine.NewFlow[map[string]any]("p").Node("n", tt.fn).Start("n").MustBuild())
			run := h.Start(nil)
			h.WantStatus(run, engine.Failed)
			if err := h.Checkpoint(run).Error; !strings.Contains(err, tt.want) {
				t.Fatalf("error = %q, want %q", err, tt.want)
			}
		})
	}
}

// resumeDirect approves with token, whatever the run's status.
func resumeDirect(t *testing.T, h *enginetest.Harness, flow, run, token string) engine.Outcome {
	t.Helper()
	out, err := h.Runner.Resume(t.Context(), engine.Resume{Flow: flow, Run: run, Token: token, Decision: "approve",
		Inbound: engine.Inbound{EventID: "direct-" + token[:8]}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEscalationsChainTwoDeep(t *testing.T) {
	h := enginetest.New(t, approvalFlow(engine.Escalate("team_lead", time.Minute,
		engine.Escalate("director", time.Minute, engine.Policy{Action: engine.OnTimeoutReject}))))
	run := h.Start(nil)
	var roles []string
	for range 2 {
		h.Expire(run)
		roles = append(roles, h.Interrupt(run).ApproverRole)
	}
	if strings.Join(roles, ",") != "team_lead,director" {
		t.Fatalf("escalated to %v", roles)
	}
	h.Expire(run)
	h.WantStatus(run, engine.Completed)
	if h.State(run)["sent"] != false {
		t.Fatalf("after the last deadline sent = %v, want a rejection", h.State(run)["sent"])
	}
	n := 0
	for _, rec := range h.Audit(run) {
		if rec.Action == protocol.ActionEscalated {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d escalated records, want 2", n)
	}
}

// The events of a transition a deadline made name the expire command the
// server published from the deadline's schedule as their cause, as a
// client's command's events name it.
func TestADeadlinesEventsNameTheExpireThatCausedThem(t *testing.T) {
	h := enginetest.New(t, approvalFlow(engine.Policy{}))
	run := h.Start(nil)
	cp := h.Checkpoint(run)
	h.Advance(time.Until(*cp.Interrupt.ExpiresAt) + time.Second)
	if _, err := h.Runner.Expire(t.Context(), engine.Expire{Flow: "send", Run: run, RequestID: cp.Interrupt.RequestID,
		Inbound: engine.Inbound{EventID: "expire-1", Source: "interlock/schedule"}}); err != nil {
		t.Fatal(err)
	}
	var expired []string
	for _, m := range h.Publisher.Messages(run) {
		if m.Stream == engine.EventStream && m.Kind == protocol.EventExpired {
			expired = append(expired, m.Cause)
		}
	}
	if len(expired) != 1 || expired[0] != "expire-1" {
		t.Fatalf("the expired events name the causes %q, want the expire command's id, expire-1", expired)
	}
}
