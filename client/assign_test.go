package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// contractState is the state of the contract flow of these tests.
type contractState struct {
	Verdict  string `json:"verdict,omitempty"`
	Message  string `json:"message,omitempty"`
	Approver string `json:"approver,omitempty"`
}

// contractFlow asks the legal role, or ana, to approve, reject or respond
// to send_contract, and records the decision.
func contractFlow() *engine.Flow {
	return engine.NewFlow[contractState]("contract").
		Node("review", func(ctx context.Context, n *engine.Node[contractState]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "send_contract", Args: map[string]any{"customer": "Acme"},
				ApproverRole: "legal", Assignees: []string{"ana"},
				Decisions: []engine.Verdict{engine.VerdictApprove, engine.VerdictReject, engine.VerdictRespond}})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict), "message": d.Message, "approver": d.Approver})
		}).
		Start("review").
		MustBuild()
}

// newContractClient starts a server with the contract flow and returns a
// client and the service's secret.
func newContractClient(t *testing.T) *client.Client {
	t.Helper()
	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, contractFlow())
	nc, js := natstest.Connect(t, srv.ClientURL())
	return client.New(nc, js, wire.Names{}, "/test", 0)
}

func startContract(t *testing.T, c *client.Client, run string) protocol.Interrupted {
	t.Helper()
	ev, err := c.Start(t.Context(), "contract", run, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return interrupted(t, ev)
}

// assigned returns a check that an assign was answered assigned, which
// returns its data.
func assigned(t *testing.T) func(client.Event, error) protocol.Assigned {
	return func(ev client.Event, err error) protocol.Assigned {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind != protocol.EventAssigned {
			var ref protocol.Refused
			_ = ev.Decode(&ref)
			t.Fatalf("outcome %q %+v, want assigned", ev.Kind, ref)
		}
		var a protocol.Assigned
		if err := ev.Decode(&a); err != nil {
			t.Fatal(err)
		}
		return a
	}
}

func refused(t *testing.T, ev client.Event, err error, code protocol.Code, says string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var ref protocol.Refused
	if ev.Kind != protocol.EventRefused || ev.Decode(&ref) != nil {
		t.Fatalf("outcome %q, want refused %s", ev.Kind, code)
	}
	if ref.Code != code || !strings.Contains(ref.Message, says) {
		t.Fatalf("refused %s %q, want %s saying %q", ref.Code, ref.Message, code, says)
	}
}

func TestAssignClaimsReleasesAndDelegatesAnApproval(t *testing.T) {
	t.Parallel()
	c := newContractClient(t)
	ctx := t.Context()
	in := startContract(t, c, "r-1")
	ana := c.As("ana")

	// No request id: the pending one is named.
	a := assigned(t)(ana.Assign(ctx, "contract", "r-1", protocol.Assign{Op: protocol.AssignClaim, Reason: "mine"}))
	if a.ClaimedBy != "ana" || a.By != "ana" || a.Op != protocol.AssignClaim || a.RequestID != in.RequestID || a.Reason != "mine" {
		t.Fatalf("claim: %+v", a)
	}
	a = assigned(t)(ana.Assign(ctx, "contract", "r-1", protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignRelease}))
	if a.ClaimedBy != "" || a.Op != protocol.AssignRelease {
		t.Fatalf("release: %+v", a)
	}
	a = assigned(t)(ana.Assign(ctx, "contract", "r-1", protocol.Assign{Op: protocol.AssignDelegate, To: "ben"}))
	if strings.Join(a.Assignees, ",") != "ben" || a.ApproverRole != "legal" || a.ClaimedBy != "" {
		t.Fatalf("delegate to ben: %+v", a)
	}
	a = assigned(t)(c.As("ben").Assign(ctx, "contract", "r-1", protocol.Assign{Op: protocol.AssignDelegate, To: "role:finance_lead"}))
	if len(a.Assignees) != 0 || a.ApproverRole != "finance_lead" || a.By != "ben" {
		t.Fatalf("delegate to role:finance_lead: %+v", a)
	}
	cp, err := c.Checkpoint(ctx, "contract", "r-1")
	if err != nil || cp.Interrupt.ApproverRole != "finance_lead" || len(cp.Interrupt.Assignees) != 0 {
		t.Fatalf("checkpoint after delegating: %+v, %v", cp.Interrupt, err)
	}
}

func TestAClaimedApprovalIsRefusedToAnotherPerson(t *testing.T) {
	t.Parallel()
	c := newContractClient(t)
	ctx := t.Context()
	in := startContract(t, c, "r-2")
	assigned(t)(c.As("ana").Assign(ctx, "contract", "r-2", protocol.Assign{Op: protocol.AssignClaim}))

	ev, err := c.As("ben").Resume(ctx, "contract", "r-2", protocol.Resume{ResumeToken: in.ResumeToken, Decision: "approve"})
	refused(t, ev, err, protocol.CodeForbidden, "claimed by ana")
	ev, err = c.As("ben").Assign(ctx, "contract", "r-2", protocol.Assign{Op: protocol.AssignRelease})
	refused(t, ev, err, protocol.CodeForbidden, "claimed by ana")

	ev, err = c.As("ana").Resume(ctx, "contract", "r-2", protocol.Resume{ResumeToken: in.ResumeToken, Decision: "approve"})
	if err != nil || ev.Kind != protocol.EventCompleted {
		t.Fatalf("the claimant's approve: %q, %v", ev.Kind, err)
	}
}

func TestAssignAsVouchesForTheCallerAndChecksTheirRoles(t *testing.T) {
	t.Parallel()
	c := newContractClient(t)
	ctx := t.Context()
	startContract(t, c, "r-3")

	// A vouched caller without the role, and not an assignee, may not claim.
	ev, err := c.AssignAs(ctx, "contract", "r-3", protocol.Assign{Op: protocol.AssignClaim}, natstest.Secret, "eve", []string{"sales"})
	refused(t, ev, err, protocol.CodeForbidden, "eve")
	// The vouch names the caller; a different by is refused before sending.
	if _, err := c.AssignAs(ctx, "contract", "r-3", protocol.Assign{Op: protocol.AssignClaim, By: "ana"}, natstest.Secret, "eve", []string{"legal"}); err == nil || !strings.Contains(err.Error(), "leave by out") {
		t.Fatalf("AssignAs with another by: %v", err)
	}
	a := assigned(t)(c.AssignAs(ctx, "contract", "r-3", protocol.Assign{Op: protocol.AssignClaim}, natstest.Secret, "lena", []string{"legal"}))
	if a.ClaimedBy != "lena" || a.By != "lena" {
		t.Fatalf("vouched claim: %+v", a)
	}
	// A forged vouch is refused.
	ev, err = c.AssignAs(ctx, "contract", "r-3", protocol.Assign{Op: protocol.AssignRelease}, []byte("not-the-secret-not-the-secret-xx"), "lena", []string{"legal"})
	refused(t, ev, err, protocol.CodeForbidden, "does not verify")
}

func TestAssignOnARunThatIsNotWaitingSaysSo(t *testing.T) {
	t.Parallel()
	c := newContractClient(t)
	ctx := t.Context()
	if _, err := c.Assign(ctx, "contract", "r-none", protocol.Assign{Op: protocol.AssignClaim, By: "ana"}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("assign on a missing run: %v, want ErrNotFound", err)
	}
	in := startContract(t, c, "r-4")
	if ev, err := c.Cancel(ctx, "contract", "r-4", "done"); err != nil || ev.Kind != protocol.EventCancelled {
		t.Fatalf("cancel: %q, %v", ev.Kind, err)
	}
	if _, err := c.Assign(ctx, "contract", "r-4", protocol.Assign{Op: protocol.AssignClaim, By: "ana"}); !errors.Is(err, client.ErrNotWaiting) || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("assign on a cancelled run: %v, want ErrNotWaiting", err)
	}
	ev, err := c.Assign(ctx, "contract", "r-4", protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignClaim, By: "ana"})
	refused(t, ev, err, protocol.CodeNotWaiting, "not waiting")
}

func TestResumeCarriesTheMessageOfARespond(t *testing.T) {
	t.Parallel()
	c := newContractClient(t)
	ctx := t.Context()
	in := startContract(t, c, "r-5")

	ev, err := c.As("ana").Resume(ctx, "contract", "r-5", protocol.Resume{ResumeToken: in.ResumeToken, Decision: "respond"})
	refused(t, ev, err, protocol.CodeInvalidAnswer, "needs a message")
	ev, err = c.As("ana").Resume(ctx, "contract", "r-5", protocol.Resume{ResumeToken: in.ResumeToken, Decision: "respond", Message: "Use the 2026 template."})
	if err != nil || ev.Kind != protocol.EventCompleted {
		t.Fatalf("respond: %q, %v", ev.Kind, err)
	}
	cp, err := c.Checkpoint(ctx, "contract", "r-5")
	if err != nil {
		t.Fatal(err)
	}
	var s contractState
	if err := json.Unmarshal(cp.State, &s); err != nil || s.Verdict != "respond" || s.Message != "Use the 2026 template." || s.Approver != "ana" {
		t.Fatalf("state %s: %v", cp.State, err)
	}
}

// TestTheAuditOfClaimsDelegationsAndARespondVerifies: the verifier
// vouches for every record of the approvals' new actions, and a surface
// reading the vouched history sees them.
func TestTheAuditOfClaimsDelegationsAndARespondVerifies(t *testing.T) {
	t.Parallel()
	c := newContractClient(t)
	ctx := t.Context()
	in := startContract(t, c, "r-6")
	ana := c.As("ana")
	assigned(t)(ana.Assign(ctx, "contract", "r-6", protocol.Assign{Op: protocol.AssignClaim}))
	assigned(t)(ana.Assign(ctx, "contract", "r-6", protocol.Assign{Op: protocol.AssignRelease}))
	assigned(t)(ana.Assign(ctx, "contract", "r-6", protocol.Assign{Op: protocol.AssignDelegate, To: "ben"}))
	ev, err := c.As("ben").Resume(ctx, "contract", "r-6", protocol.Resume{ResumeToken: in.ResumeToken, Decision: "respond", Message: "Use the 2026 template."})
	if err != nil || ev.Kind != protocol.EventCompleted {
		t.Fatalf("respond: %q, %v", ev.Kind, err)
	}
	report, err := c.VerifyAudit(ctx, "contract", "r-6")
	if err != nil || !report.Intact {
		t.Fatalf("audit of r-6: %+v, %v", report, err)
	}
	recs, err := c.VouchedAudit(ctx, "contract", "r-6")
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action+"/"+r.By)
	}
	if got := strings.Join(actions, ","); got != "started//test,claimed/ana,released/ana,delegated/ana,responded/ben" {
		t.Fatalf("vouched history = %s", got)
	}
	if last := recs[len(recs)-1]; last.Message != "Use the 2026 template." {
		t.Fatalf("the responded record's message = %q", last.Message)
	}
	if d := recs[len(recs)-2]; d.To != "ben" {
		t.Fatalf("the delegated record says it went to %q, want ben", d.To)
	}
}
