package interlock_test

import (
	"errors"
	"testing"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/authority/authoritytest"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// TestTheNATSWorkersAnswerTheConformanceTable runs the authority's table
// through the wire protocol: the people of the directory as a surface
// that authenticated them vouches for them, and a NATS client no one
// vouches for, typing a person's name, as itself.
func TestTheNATSWorkersAnswerTheConformanceTable(t *testing.T) {
	t.Parallel()
	svc := natstest.StartWith(t, natstest.StartServer(t, ""), authoritytest.Deploy(
		interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret}, authoritytest.Directory(nil)))
	authoritytest.Conform(t, authoritytest.SurfaceNATS, natsDoor{svc})
}

// natsDoor is the NATS workers as the table's door.
type natsDoor struct{ svc *interlock.Service }

// Start sends the run's request vouched for its starter.
func (d natsDoor) Start(t *testing.T, r authoritytest.Run, id string) (flow, run string) {
	flow, run = authoritytest.StartBeside(t, d.svc, r, id)
	if claimant := r.Pending.ClaimedBy; claimant != "" {
		if code := outcomeOf(t)(authoritytest.Vouched(t, d.svc, claimant).Assign(t.Context(), flow, run, protocol.Assign{Op: protocol.AssignClaim})); code != "" {
			t.Fatalf("%s claiming %s: refused %s", claimant, r.Key, code)
		}
	}
	return flow, run
}

// Ask sends the case's command: vouched for a person, or as a NATS
// sender with the resume token every subscriber to the interrupts holds.
func (d natsDoor) Ask(t *testing.T, c authoritytest.Case, flow, run string) protocol.Code {
	ctx := t.Context()
	if c.Action == authority.Consume {
		_, err := authoritytest.Vouched(t, d.svc, c.Who).Take(ctx, run, authoritytest.RunNamed(c.Run).FinalDigest(run))
		return outcome(t, client.Event{}, err)
	}
	var cl *client.Client
	var res protocol.Resume
	if c.Who == authoritytest.NATSSender {
		cl = d.svc.Client("/agents/nats-sender").As(c.Named)
		in, err := cl.LastInterrupt(ctx, flow, run)
		if err != nil {
			t.Fatal(err)
		}
		res = protocol.Resume{ResumeToken: in.ResumeToken, Approver: c.Named}
	} else {
		cl = authoritytest.Vouched(t, d.svc, c.Who)
		cp, err := cl.Checkpoint(ctx, flow, run)
		if err != nil || cp.Interrupt == nil {
			t.Fatalf("reading %s: %+v %v", run, cp, err)
		}
		res = protocol.Resume{RequestID: cp.Interrupt.RequestID}
	}
	switch c.Action {
	case authority.Decide:
		res.Decision = string(protocol.VerdictApprove)
		if c.Verdict != "" {
			res.Decision = string(c.Verdict)
		}
		return outcomeOf(t)(cl.Resume(ctx, flow, run, res))
	case authority.Claim:
		return outcomeOf(t)(cl.Assign(ctx, flow, run, protocol.Assign{Op: protocol.AssignClaim}))
	case authority.Delegate:
		return outcomeOf(t)(cl.Assign(ctx, flow, run, protocol.Assign{Op: protocol.AssignDelegate, To: authoritytest.Bob}))
	case authority.Cancel:
		return outcomeOf(t)(cl.Cancel(ctx, flow, run, "conformance"))
	}
	t.Fatalf("the NATS door has no %s", c.Action)
	return ""
}

// outcomeOf returns what tells the code of a command's refusal, "" when
// it applied.
func outcomeOf(t *testing.T) func(client.Event, error) protocol.Code {
	return func(ev client.Event, err error) protocol.Code {
		t.Helper()
		return outcome(t, ev, err)
	}
}

// outcome is the code of a command's refusal, "" when it applied.
func outcome(t *testing.T, ev client.Event, err error) protocol.Code {
	t.Helper()
	var ref *client.RefusedError
	switch {
	case errors.As(err, &ref):
		return ref.Refused.Code
	case err != nil:
		t.Fatalf("sending the command: %v", err)
	case ev.Kind == protocol.EventRefused:
		var r protocol.Refused
		if err := ev.Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r.Code
	}
	return ""
}
