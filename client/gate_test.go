package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// approvedCall starts a deployment with the example gate rules, asks the
// gate about a $4,800 refund of order under callID as an agent, approves
// it as a supervisor, and returns the agent's client and the decision.
func approvedCall(t *testing.T, callID, order string) (*client.Client, protocol.Decided) {
	t.Helper()
	rules, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, GateRules: rules})
	nc, js := natstest.Connect(t, srv.ClientURL())
	c := client.New(nc, js, wire.Names{}, "/agents/support", natstest.Wait)
	req := protocol.ToolRequest{CallID: callID, Tool: "issue_refund",
		Args: map[string]json.RawMessage{"orderId": json.RawMessage(`"` + order + `"`), "amount": json.RawMessage("4800")}}
	if ans, err := c.AskTool(t.Context(), req, natstest.Wait); err != nil || ans.Pending == nil {
		t.Fatalf("asking: %+v %v", ans, err)
	}
	if ev, err := svc.ResumeAs(t.Context(), svc.Client("/test"), client.GateFlow, callID, protocol.Resume{Decision: "approve"}, "sam", []string{"supervisor"}); err != nil || ev.Kind == protocol.EventRefused {
		t.Fatalf("approving: %s %v", ev.Kind, err)
	}
	ans, err := c.RequestTool(t.Context(), req, natstest.Wait)
	if err != nil || ans.Decided == nil || ans.Decided.Decision != "approved" {
		t.Fatalf("the decision: %+v %v", ans, err)
	}
	return c, *ans.Decided
}

// TestAnApprovedCallRunsOnlyOnAReceiptThatHoldsAndOnce checks Consume: it
// verifies the decision's receipt with the deployment's audit keys and
// refuses a decision it does not state (other args to run, no receipt),
// takes the approval once, and refuses a second take.
func TestAnApprovedCallRunsOnlyOnAReceiptThatHoldsAndOnce(t *testing.T) {
	t.Parallel()
	c, d := approvedCall(t, "call-r", "o-1")
	r, err := c.VerifyDecided(t.Context(), d)
	if err != nil || r.Approver != "sam" || r.Decision != protocol.ReceiptApproved {
		t.Fatalf("the receipt: %+v %v", r, err)
	}
	tampered := d
	tampered.Args, tampered.FinalDigest = json.RawMessage(`{"orderId":"o-1","amount":9000}`), d.ArgsDigest[:63]+"0"
	if _, err := c.Consume(t.Context(), tampered); !errors.Is(err, client.ErrReceipt) {
		t.Fatalf("taking the approval for other args: %v, want ErrReceipt", err)
	}
	// The receipt and the final digest left as they were, the args
	// changed: the args that would run are not those approved.
	swapped := d
	swapped.Args = json.RawMessage(`{"orderId":"o-1","amount":9000}`)
	if _, err := c.Consume(t.Context(), swapped); !errors.Is(err, client.ErrReceipt) || !strings.Contains(err.Error(), "not those the receipt states") {
		t.Fatalf("taking the approval with other args to run: %v, want ErrReceipt", err)
	}
	argless := d
	argless.Args = nil
	if _, err := c.Consume(t.Context(), argless); !errors.Is(err, client.ErrReceipt) {
		t.Fatalf("taking the approval of a decision without args: %v, want ErrReceipt", err)
	}
	none := d
	none.Receipt = ""
	if _, err := c.Consume(t.Context(), none); !errors.Is(err, client.ErrReceipt) {
		t.Fatalf("taking an approval without a receipt: %v, want ErrReceipt", err)
	}
	if got, err := c.Consume(t.Context(), d); err != nil || got.CallID != "call-r" || got.ArgsDigest != d.FinalDigest {
		t.Fatalf("the first take: %+v %v", got, err)
	}
	if _, err := c.Consume(t.Context(), d); !errors.Is(err, client.ErrTaken) {
		t.Fatalf("a second take: %v, want ErrTaken", err)
	}
}

// TestATakeWhoseAnswerWasLostIsLearnedBySendingItAgain: a take whose
// outcome its caller did not learn (here, a wait too short for any
// answer) is an UnsettledError naming its event id; it took the approval
// (a new take is refused ErrTaken), and sent again under that id it
// answers consumed: the call is still its caller's to run.
func TestATakeWhoseAnswerWasLostIsLearnedBySendingItAgain(t *testing.T) {
	t.Parallel()
	c, d := approvedCall(t, "call-lost", "o-2")
	_, err := c.WithWait(time.Nanosecond).Take(t.Context(), d.CallID, d.FinalDigest)
	var un *client.UnsettledError
	if !errors.As(err, &un) || un.EventID == "" || !errors.Is(err, client.ErrNoAnswer) {
		t.Fatalf("a take answered by nothing in time: %v, want an UnsettledError wrapping ErrNoAnswer", err)
	}
	if _, err := c.Consume(t.Context(), d); !errors.Is(err, client.ErrTaken) {
		t.Fatalf("another take after it: %v, want ErrTaken (the first took the approval)", err)
	}
	if got, err := c.ConsumeAgain(t.Context(), d, un.EventID); err != nil || got.CallID != d.CallID || got.ArgsDigest != d.FinalDigest {
		t.Fatalf("the first take sent again: %+v %v, want it consumed", got, err)
	}
}

// TestAReceiptWhoseKeysCouldNotBeReadIsNotSaidNotToHold: verifying a
// decision's receipt while the deployment's audit keys cannot be read (the
// server out of reach, here a request given no time) is an error that
// says so, not ErrReceipt: the receipt may yet hold, and a caller that
// would run nothing on a receipt that does not hold must not give up on
// the call for a read that failed.
func TestAReceiptWhoseKeysCouldNotBeReadIsNotSaidNotToHold(t *testing.T) {
	t.Parallel()
	c, d := approvedCall(t, "call-k", "o-9")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.VerifyDecided(ctx, d)
	if err == nil || errors.Is(err, client.ErrReceipt) || !strings.Contains(err.Error(), "audit keys") {
		t.Fatalf("verifying with the keys unread: %v, want an error saying the keys were not read, not ErrReceipt", err)
	}
	if _, err := c.VerifyDecided(t.Context(), d); err != nil {
		t.Fatalf("verifying once the keys are read: %v", err)
	}
}
