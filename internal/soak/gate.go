package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/protocol"
)

// With Config.Gates (ModeNetwork), one run in eight is a tool call an
// agent asks the gate about (interlock.in.gate.request): a refund of
// gateAmount, which examples/gate/rules.yaml holds for a supervisor, who
// approves it on the gate's role subject. Then two instances of the agent,
// each about to run the call, take the approval at once
// (interlock.in.gate.consume): exactly one may, so the refund runs once.
func isGate(cfg Config, i int) bool { return cfg.Gates && i%8 == 4 }

// gateAmount is above the example rules' $500.
const gateAmount = 800

// gateTakes is how many of the agent's instances take each approval.
const gateTakes = 2

// gateReminders is how many reminders the gate's rule for refunds sends
// before its timeout (examples/gate/rules.yaml: [10m, 2m]): a gate run
// left waiting that long by a fault gets each.
const gateReminders = 2

// driveGate asks the gate about run i's call, approves it as the
// supervisor, and takes the approval from gateTakes instances, until each
// take is acknowledged or cfg.Patience passes without progress. It
// reports whether all of that was done.
func (a *agents) driveGate(ctx context.Context, cfg Config, i int) bool {
	run := runID(i)
	args := map[string]json.RawMessage{"orderId": json.RawMessage(fmt.Sprintf(`"g-%06d"`, i)), "amount": json.RawMessage(fmt.Sprint(gateAmount))}
	req := protocol.ToolRequest{CallID: run, Tool: "issue_refund", Args: args, Agent: "soak-agent"}
	start, err := a.newCommand(a.names.GateRequest(), protocol.TypeToolRequest, run, run+"-request", req)
	if err != nil {
		return false
	}
	var decision *command
	ended := a.follow(ctx, cfg, protocol.GateFlow, run, start, func(cp protocol.Checkpoint) {
		if decision == nil {
			if decision = a.gateDecision(ctx, run, cp, protocol.VerdictApprove, ""); decision == nil {
				return
			}
		}
		a.send(ctx, decision, cfg.Retry)
	})
	if !ended {
		return false
	}
	// The decision says what to run, and its digest, which the takes name.
	var decided protocol.Decided
	for began := time.Now(); decided.FinalDigest == ""; {
		evs, _, err := a.c.Events(ctx, client.WatchQuery{Flow: protocol.GateFlow, Run: run, Kinds: []string{protocol.EventDecided}}, 1)
		if err == nil && len(evs) == 1 {
			_ = json.Unmarshal(evs[0].Event.Data(), &decided)
			if decided.FinalDigest == "" {
				return true // not approved: nothing to take (the check says whether it should have been)
			}
			break
		}
		if time.Since(began) > cfg.Patience || wait(ctx, maxPoll) != nil {
			return false
		}
	}
	takes := make([]*command, gateTakes)
	for n := range takes {
		c, err := a.newCommand(a.names.GateConsume(), protocol.TypeToolConsume, run, fmt.Sprintf("%s-take-%d", run, n+1),
			protocol.Consume{CallID: run, ArgsDigest: decided.FinalDigest})
		if err != nil {
			return false
		}
		takes[n] = c
	}
	for began := time.Now(); time.Since(began) < cfg.Patience; {
		done := true
		for _, c := range takes {
			a.send(ctx, c, cfg.Retry)
			done = done && !c.sent.IsZero()
		}
		if done {
			return true
		}
		if wait(ctx, maxPoll) != nil {
			return false
		}
	}
	return false
}

// checkGate checks gate run i: approved by the supervisor, its approval
// taken exactly once, the other take refused. It returns what is wrong,
// "" if nothing is.
func (a *agents) checkGate(i int, c protocol.Checkpoint, t tally) (lost, dup string) {
	if a.expiredWhileLeft(i, c, t) {
		return "", ""
	}
	if lost, dup = a.approvedOnce("gate", c, t); lost != "" || dup != "" {
		return lost, dup
	}
	switch refused := 0; {
	case t.consumed > 1:
		return "", fmt.Sprintf("gate: the approval was taken %d times: the call would run %d times", t.consumed, t.consumed)
	case t.consumed == 0:
		return eventsMissingPrefix + ": gate: the approval was never taken", ""
	default:
		for n := range gateTakes {
			if code := t.refused[fmt.Sprintf("%s-take-%d", runID(i), n+1)]; code != "" {
				if code != protocol.CodeNotWaiting {
					return fmt.Sprintf("gate: a second take was refused %s, want not_waiting", code), ""
				}
				refused++
			}
		}
		if refused != gateTakes-1 {
			return fmt.Sprintf("%s: gate: %d of the %d other takes refused", eventsMissingPrefix, refused, gateTakes-1), ""
		}
	}
	return "", ""
}

// expiredWhileLeft reports whether gate run i (c, t) expired undecided,
// with no event twice, no approval sent and none taken, while the agents
// had left it (counted in a.leftExpired): nobody decided in time, and
// that is its right end.
func (a *agents) expiredWhileLeft(i int, c protocol.Checkpoint, t tally) bool {
	if _, left := a.leftRuns.Load(i); !left || c.Status != protocol.StatusExpired || len(c.Decisions) > 0 || t.consumed > 0 || t.duplicates() != "" {
		return false
	}
	if _, sent := a.acked.Load(c.Run + "-decide"); sent {
		return false
	}
	a.leftExpired.Store(i, true)
	return true
}

// approvedOnce checks a gate run's checkpoint c and tally t (what says
// which): one decision, the supervisor's approval, and no event twice.
func (a *agents) approvedOnce(what string, c protocol.Checkpoint, t tally) (lost, dup string) {
	if d := t.duplicates(); d != "" {
		return "", d
	}
	if t.reminded > gateReminders {
		return "", fmt.Sprintf("%d reminded events; the rule has %d reminders", t.reminded, gateReminders)
	}
	sup := a.approvers[refund.SupervisorRole].entitled
	if c.Status != protocol.StatusCompleted || len(c.Decisions) != 1 || c.Decisions[0].Approver != sup || c.Decisions[0].Verdict != protocol.VerdictApprove {
		return fmt.Sprintf("%s: %s at %s with decisions %+v; want completed, approved by %s", what, c.Status, c.Node, c.Decisions, sup), ""
	}
	return "", ""
}

// gateDecision is the supervisor's decision of verdict (with reason) on
// the interrupt gate run waits on at cp, sent on the gate's role subject
// with the event id and idempotency key <run>-decide; nil while the
// interrupt is not announced yet.
func (a *agents) gateDecision(ctx context.Context, run string, cp protocol.Checkpoint, verdict protocol.Verdict, reason string) *command {
	in, err := a.c.LastInterrupt(ctx, protocol.GateFlow, run)
	if err != nil || in.RequestID != cp.Interrupt.RequestID {
		return nil
	}
	sup := a.approvers[refund.SupervisorRole]
	r := protocol.Resume{ResumeToken: in.ResumeToken, RequestID: in.RequestID, IdempotencyKey: run + "-decide",
		Decision: string(verdict), Approver: sup.name, Reason: reason}
	decision, err := a.newCommand(a.names.In(protocol.GateFlow, "resume")+"."+sup.role, protocol.TypeResume, run, run+"-decide", r)
	if err != nil {
		return nil
	}
	decision.js, decision.role = sup.js, sup.role
	return decision
}
