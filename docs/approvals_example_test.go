package docs_test

// The Go code of the approval sections of docs/flows.md (what the
// approver reads, assignees and claims, quorum, reminders, respond),
// compiled and run here.

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/protocol"
)

// Contract is the state of the approval sections' snippets.
type Contract struct {
	Customer string  `json:"customer"`
	Value    float64 `json:"value"`
	Asker    string  `json:"asker,omitempty"`
	Sent     bool    `json:"sent,omitempty"`
	Reply    string  `json:"reply,omitempty"`
}

// contractArgs is the args schema of the contract approval.
const contractArgs = `{
	"type": "object",
	"required": ["customer", "value"],
	"properties": {
		"customer": {"type": "string", "title": "Customer", "x-interlock-key": true},
		"value": {"type": "number", "title": "Value", "minimum": 0,
			"x-interlock-display": "currency", "x-interlock-currency": "USD", "x-interlock-key": true}
	}
}`

func describedApproval(s Contract) engine.Approval {
	return engine.Approval{
		Action:       "send_contract",
		Args:         map[string]any{"customer": s.Customer, "value": s.Value},
		ApproverRole: "legal",
		Title:        fmt.Sprintf("Send a contract worth %s to %s", protocol.FormatMoney(s.Value, "USD"), s.Customer),
		Description:  "Contracts over **$10,000.00** need legal review. Lower the value, or reject with a reason.",
		Requester:    s.Asker,
		ArgsSchema:   json.RawMessage(contractArgs),
	}
}

func assignedApproval(s Contract) engine.Approval {
	a := describedApproval(s)
	a.Assignees = []string{"lee@example.com", "liz@example.com"}
	return a
}

func twoRolesApproval(s Contract) engine.Approval {
	a := describedApproval(s)
	a.Quorum = &protocol.Quorum{Roles: []protocol.RoleCount{
		{Role: "legal", Count: 1},
		{Role: "finance", Count: 1},
	}}
	// SeparationOfDuties defaults to true with a quorum: the requester
	// cannot vote, nor can anyone vote twice.
	return a
}

func remindedApproval(s Contract) engine.Approval {
	a := describedApproval(s)
	a.Timeout = 24 * time.Hour
	a.Reminders = []time.Duration{4 * time.Hour, 30 * time.Minute}
	return a
}

func sendContract(ctx context.Context, n *engine.Node[Contract]) error {
	a := describedApproval(n.State())
	a.Decisions = []engine.Verdict{engine.VerdictApprove, engine.VerdictReject, engine.VerdictRespond}
	d, err := n.Approve(ctx, a)
	if err != nil {
		return err
	}
	switch {
	case d.Verdict == engine.VerdictRespond:
		// The contract is not sent: the agent gets the person's message.
		return n.Set("reply", d.Message)
	case d.Approved():
		return n.Set("sent", true)
	}
	return nil
}

// contractFlow asks ask of the state's contract, and records the outcome.
func contractFlow(ask func(Contract) engine.Approval) *engine.Flow {
	return engine.NewFlow[Contract]("contract").
		Node("review", func(ctx context.Context, n *engine.Node[Contract]) error {
			d, err := n.Approve(ctx, ask(n.State()))
			if err != nil {
				return err
			}
			return n.Set("sent", d.Approved())
		}).
		Start("review").
		MustBuild()
}

// TestTheApprovalsOfTheDocsRun walks each approval of the docs in memory.
func TestTheApprovalsOfTheDocsRun(t *testing.T) {
	t.Parallel()
	start := map[string]any{"customer": "Acme", "value": 25000, "asker": "sales-bot"}
	decide := func(h *enginetest.Harness, run, who, verdict, role string) engine.Outcome {
		return h.Resume(run, engine.Resume{Decision: verdict, Approver: who, Roles: []string{role}, RolesKnown: true})
	}

	h := enginetest.New(t, contractFlow(describedApproval))
	run := h.Start(start)
	in := h.Interrupt(run)
	if in.Title != "Send a contract worth $25,000.00 to Acme" || in.Requester != "sales-bot" {
		t.Fatalf("title %q, requester %q", in.Title, in.Requester)
	}
	if args := protocol.Args(in.Args, in.ArgsSchema); args[1].Text != "$25,000.00" {
		t.Fatalf("value shown as %q", args[1].Text)
	}
	if out := h.Resume(run, engine.Resume{Decision: "edit", Edits: map[string]json.RawMessage{"value": json.RawMessage(`-1`)}, Approver: "lee", Roles: []string{"legal"}, RolesKnown: true}); out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer {
		t.Fatalf("an edit the schema refuses: %+v", out.Refused)
	}

	h = enginetest.New(t, contractFlow(assignedApproval))
	run = h.Start(start)
	in = h.Interrupt(run)
	claim := engine.Assign{Flow: "contract", Run: run, RequestID: in.RequestID, Op: protocol.AssignClaim, By: "liz@example.com",
		Inbound: engine.Inbound{EventID: "ev-claim"}}
	if out, err := h.Runner.Assign(t.Context(), claim); err != nil || out.Refused != nil {
		t.Fatalf("an assignee's claim: %v %+v", err, out.Refused)
	}
	if out := h.Decide(run, "approve", nil, "lee@example.com", ""); out.Refused == nil || out.Refused.Code != protocol.CodeForbidden {
		t.Fatalf("another assignee deciding a claimed approval: %+v, want forbidden", out.Refused)
	}
	if out := h.Decide(run, "approve", nil, "liz@example.com", ""); out.Refused != nil {
		t.Fatalf("the claimant's decision: %+v", out.Refused)
	}
	h.WantStatus(run, engine.Completed)

	h = enginetest.New(t, contractFlow(twoRolesApproval))
	run = h.Start(start)
	if out := decide(h, run, "sales-bot", "approve", "legal"); out.Refused == nil || out.Refused.Code != protocol.CodeForbidden {
		t.Fatalf("the requester's vote: %+v, want forbidden", out.Refused)
	}
	decide(h, run, "lee", "approve", "legal")
	h.WantStatus(run, engine.Waiting)
	decide(h, run, "fin", "approve", "finance")
	h.WantStatus(run, engine.Completed)

	h = enginetest.New(t, contractFlow(remindedApproval))
	run = h.Start(start)
	if r := h.Checkpoint(run).Interrupt.Remind; r == nil || len(r.Before) != 2 {
		t.Fatalf("reminders = %+v", r)
	}

	h = enginetest.New(t, engine.NewFlow[Contract]("contract").Node("review", sendContract).Start("review").MustBuild())
	run = h.Start(start)
	if out := h.Resume(run, engine.Resume{Decision: "respond", Message: "Cap the liability first.", Approver: "lee", Roles: []string{"legal"}, RolesKnown: true}); out.Refused != nil {
		t.Fatalf("respond: %+v", out.Refused)
	}
	if st := h.State(run); st["reply"] != "Cap the liability first." || st["sent"] != nil {
		t.Fatalf("after respond the state is %v, want the reply and nothing sent", st)
	}
}
