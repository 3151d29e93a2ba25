package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// TimeoutAction is what a deadline's [Policy] does when it passes.
type TimeoutAction string

// Timeout actions.
const (
	// OnTimeoutExpire ends the run expired. It is the default.
	OnTimeoutExpire TimeoutAction = "expire"
	// OnTimeoutReject rejects an approval, approver [TimeoutActor].
	OnTimeoutReject TimeoutAction = "reject"
	// OnTimeoutApprove approves an approval as proposed, approver [TimeoutActor].
	OnTimeoutApprove TimeoutAction = "approve"
	// OnTimeoutEscalate issues the same approval again to another approver
	// role, with a new deadline and a fresh token.
	OnTimeoutEscalate TimeoutAction = "escalate"
)

// Policy says what happens when an interrupt's deadline passes. The zero
// Policy expires the run. Questions and choices only expire; approvals may
// also be rejected, approved or escalated.
type Policy struct {
	Action TimeoutAction `json:"action,omitempty"`
	// ApproverRole is the role an escalation goes to.
	ApproverRole string `json:"approverRole,omitempty"`
	// Timeout is an escalation's own deadline, from when it is issued.
	Timeout time.Duration `json:"-"`
	// Then is what happens when the escalation's deadline passes; nil
	// expires the run. Escalations chain.
	Then *Policy `json:"then,omitempty"`
}

// Escalate returns the policy that, when a deadline passes, issues the
// approval again to role with a new deadline of timeout, after which then
// applies.
func Escalate(role string, timeout time.Duration, then Policy) Policy {
	return Policy{Action: OnTimeoutEscalate, ApproverRole: role, Timeout: timeout, Then: &then}
}

type policyJSON struct {
	Action       TimeoutAction `json:"action,omitempty"`
	ApproverRole string        `json:"approverRole,omitempty"`
	Timeout      string        `json:"timeout,omitempty"`
	Then         *Policy       `json:"then,omitempty"`
}

// MarshalJSON writes the timeout as a duration string ("30m0s").
func (p Policy) MarshalJSON() ([]byte, error) {
	j := policyJSON{Action: p.Action, ApproverRole: p.ApproverRole, Then: p.Then}
	if p.Timeout > 0 {
		j.Timeout = p.Timeout.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Policy) UnmarshalJSON(b []byte) error {
	var j policyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Policy{Action: j.Action, ApproverRole: j.ApproverRole, Then: j.Then}
	if j.Timeout != "" {
		d, err := time.ParseDuration(j.Timeout)
		if err != nil {
			return fmt.Errorf("policy timeout: %w", err)
		}
		p.Timeout = d
	}
	return nil
}

// wire returns the policy as the protocol carries it, nil for nil.
func (p *Policy) wire() *protocol.Policy {
	if p == nil {
		return nil
	}
	w := &protocol.Policy{Action: string(p.Action), ApproverRole: p.ApproverRole, Then: p.Then.wire()}
	if p.Timeout > 0 {
		w.Timeout = p.Timeout.String()
	}
	return w
}

func (p Policy) action() TimeoutAction {
	if p.Action == "" {
		return OnTimeoutExpire
	}
	return p.Action
}

// checkTimeout checks an interrupt's deadline and policy.
func checkTimeout(kind string, timeout time.Duration, p Policy) error {
	switch {
	case timeout < 0:
		return fmt.Errorf("timeout %v is negative", timeout)
	case timeout == 0 && p != (Policy{}):
		return errors.New("OnTimeout is set but Timeout is not: give the deadline")
	}
	return checkPolicy(kind, p, 0)
}

func checkPolicy(kind string, p Policy, depth int) error {
	if depth > 16 {
		return errors.New("OnTimeout escalates more than 16 times")
	}
	switch p.action() {
	case OnTimeoutExpire:
		if p.ApproverRole != "" || p.Timeout != 0 || p.Then != nil {
			return errors.New("OnTimeout expire takes no role, timeout or then; use Escalate to escalate")
		}
		return nil
	case OnTimeoutReject, OnTimeoutApprove, OnTimeoutEscalate:
		if kind != KindApproval {
			return fmt.Errorf("OnTimeout %s applies to approvals; a %s can only expire", p.Action, kind)
		}
	default:
		return fmt.Errorf("OnTimeout %q is not one of expire, reject, approve, escalate", p.Action)
	}
	if p.Action != OnTimeoutEscalate {
		if p.ApproverRole != "" || p.Timeout != 0 || p.Then != nil {
			return fmt.Errorf("OnTimeout %s takes no role, timeout or then", p.Action)
		}
		return nil
	}
	if err := CheckName("approver role", p.ApproverRole); err != nil {
		return fmt.Errorf("escalation: %w", err)
	}
	if p.Timeout <= 0 {
		return fmt.Errorf("escalation to %s needs a positive Timeout", p.ApproverRole)
	}
	if p.Then == nil {
		return nil
	}
	return checkPolicy(kind, *p.Then, depth+1)
}

// deadline sets a new interrupt's deadline and policy.
func (x *exec) deadline(in *Interrupt, timeout time.Duration, p Policy) {
	if timeout <= 0 {
		return
	}
	at := expiry(x.now, timeout)
	in.ExpiresAt = &at
	in.OnTimeout = &p
}

// expiry is the deadline timeout after now, rounded up to a whole second
// (the server schedules to the second).
func expiry(now time.Time, timeout time.Duration) time.Time {
	at := now.Add(timeout).UTC()
	if t := at.Truncate(time.Second); !t.Equal(at) {
		at = t.Add(time.Second)
	}
	return at
}

// Expire applies an interrupt's deadline: it is what the server's schedule
// publishes at expiresAt. It names the request it was scheduled for, so
// that a schedule of an interrupt answered (or announced again) meanwhile
// does nothing.
type Expire struct {
	Flow, Run string
	RequestID string
	Inbound
}

// Expire applies an expire command. A command that arrives before the
// deadline (the server's clock ahead of the worker's) is delivered again
// at the deadline; one for an interrupt no longer pending is acknowledged
// and does nothing.
func (r *Runner) Expire(ctx context.Context, cmd Expire) (Outcome, error) {
	return r.transact(ctx, cmd.Flow, cmd.Run, cmd.Inbound, cmd.EventID, "expire", func(t *txn) (Outcome, error) {
		cp := t.cp
		if busy, err := r.busy(ctx, cp); err != nil || busy {
			return t.retry(), err
		}
		in := cp.Interrupt
		if cp.Status != Waiting || in == nil || in.RequestID != cmd.RequestID || in.ExpiresAt == nil {
			return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, Checkpoint: t.rev, Node: cp.Node, Duplicate: true}, nil
		}
		if wait := in.ExpiresAt.Sub(t.now); wait > 0 {
			out := t.retry()
			out.RetryAfter = wait + 10*time.Millisecond
			return out, nil
		}
		p := Policy{}
		if in.OnTimeout != nil {
			p = *in.OnTimeout
		}
		t.asked = in.AskedAt
		switch p.action() {
		case OnTimeoutEscalate:
			return r.escalate(ctx, t, p)
		case OnTimeoutReject, OnTimeoutApprove:
			if in.Kind == KindApproval {
				return r.timeoutDecision(ctx, t, p)
			}
		}
		return r.expireRun(ctx, t)
	})
}

// expireRun ends the run expired.
func (r *Runner) expireRun(ctx context.Context, t *txn) (Outcome, error) {
	cp, in := t.cp, t.cp.Interrupt
	cp.Status, cp.Interrupt = Expired, nil
	cp.Resumes, cp.Steps, cp.Locals = nil, nil, nil
	cp.Expired = &Expiry{RequestID: in.RequestID, Node: in.Node, Kind: in.Kind, ExpiresAt: *in.ExpiresAt, ApproverRole: in.ApproverRole}
	t.begin("", protocol.ActionExpired)
	t.audit(&protocol.AuditRecord{Action: protocol.ActionExpired, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind,
		By: TimeoutActor, EventID: t.in.EventID, ApproverRole: in.ApproverRole,
		Outcome: &protocol.AuditOutcome{Status: Expired, Node: in.Node}})
	t.emit(protocol.EventExpired, &protocol.Expired{Flow: cp.Flow, Run: cp.Run, Node: in.Node, RequestID: in.RequestID,
		Kind: in.Kind, ExpiresAt: *in.ExpiresAt, ApproverRole: in.ApproverRole, Origin: cp.Origin})
	if t.f.expired != nil {
		t.f.expired(t, in)
	}
	return r.commit(ctx, t)
}

// timeoutDecision decides an approval as its policy says, then runs the
// node again to take the decision.
func (r *Runner) timeoutDecision(ctx context.Context, t *txn, p Policy) (Outcome, error) {
	cp, in := t.cp, t.cp.Interrupt
	v := VerdictApprove
	if p.Action == OnTimeoutReject {
		v = VerdictReject
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(in.Args, &args); err != nil {
		return Outcome{}, fmt.Errorf("engine: args of the pending approval of %s.%s: %w", cp.Flow, cp.Run, err)
	}
	final, err := decodeObject(args)
	if err != nil {
		return Outcome{}, fmt.Errorf("engine: args of the pending approval of %s.%s: %w", cp.Flow, cp.Run, err)
	}
	reason := fmt.Sprintf("no decision by %s; the deadline's policy is %s", in.ExpiresAt.Format(time.RFC3339), p.Action)
	in.Decision = &Decision{Verdict: v, Action: in.Action, Args: final, Approver: TimeoutActor, Reason: reason,
		At: t.now, Node: in.Node, RequestID: in.RequestID, Timeout: true}
	cp.Status = Running
	t.begin("", auditVerdict(v))
	t.emit(protocol.EventResumed, &protocol.Resumed{Flow: cp.Flow, Run: cp.Run, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind,
		Decision: string(v), Approver: TimeoutActor, Reason: reason, Origin: cp.Origin,
		Receipt: t.receipt(approvalReceipt(in.Action, "", in.Args, *in.Decision))})
	t.audit(&protocol.AuditRecord{Action: auditVerdict(v), Node: in.Node, RequestID: in.RequestID, Kind: in.Kind,
		By: TimeoutActor, EventID: t.in.EventID, Reason: reason, Timeout: true, ApproverRole: in.ApproverRole,
		Approval: &protocol.AuditApproval{Action: in.Action, Args: in.Args}})
	return r.run(ctx, t)
}

// escalate issues the approval again to the policy's role, with a new
// deadline, a fresh request id and token; the previous token is refused
// expired from now on.
func (r *Runner) escalate(ctx context.Context, t *txn, p Policy) (Outcome, error) {
	in := t.cp.Interrupt
	previous, from, passed := in.RequestID, in.ApproverRole, *in.ExpiresAt
	in.Retired = appendRetired(in.Retired, previous)
	in.RequestID = newRequestID()
	in.ApproverRole = p.ApproverRole
	in.Escalations++
	at := expiry(t.now, p.Timeout)
	in.ExpiresAt = &at
	next := Policy{}
	if p.Then != nil {
		next = *p.Then
	}
	in.OnTimeout = &next
	in.AskedAt = t.now
	t.begin("", protocol.ActionEscalated)
	t.audit(&protocol.AuditRecord{Action: protocol.ActionEscalated, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind,
		By: TimeoutActor, EventID: t.in.EventID, Replaces: previous, ApproverRole: in.ApproverRole, EscalatedFrom: from,
		Reason:  fmt.Sprintf("no decision by %s; escalated from %s to %s", passed.Format(time.RFC3339), from, p.ApproverRole),
		Outcome: &protocol.AuditOutcome{Status: Waiting, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind}})
	t.interrupted(in)
	return r.commit(ctx, t)
}

// maxRetired bounds the request ids an interrupt remembers as expired.
const maxRetired = 16

func appendRetired(ids []string, id string) []string {
	ids = append(ids, id)
	if len(ids) > maxRetired {
		ids = ids[len(ids)-maxRetired:]
	}
	return ids
}

// Expiry records how a run expired.
type Expiry struct {
	RequestID    string    `json:"requestId"`
	Node         string    `json:"node"`
	Kind         string    `json:"kind"`
	ExpiresAt    time.Time `json:"expiresAt"`
	ApproverRole string    `json:"approverRole,omitempty"`
}
