package refund_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/protocol"
)

// review starts a refund of amount with extra state and answers the
// identity question, so that the run waits on the review.
func review(t *testing.T, h *enginetest.Harness, amount float64, extra map[string]any) (string, protocol.Interrupted) {
	t.Helper()
	state := map[string]any{"orderId": "o-1", "amount": amount, "currency": "USD", "customer": "Ann"}
	for k, v := range extra {
		state[k] = v
	}
	run := h.Start(state)
	h.Answer(run, map[string]any{"last4": "4821"})
	return run, h.Interrupt(run)
}

// decide decides the run's approval as who, holding role (over the role
// subject of a deployment).
func decide(h *enginetest.Harness, run, who, verdict, role string) engine.Outcome {
	reason := ""
	if verdict == "reject" {
		reason = "duplicate of r-9"
	}
	return h.Resume(run, engine.Resume{Decision: verdict, Approver: who, Reason: reason, Roles: []string{role}, RolesKnown: true})
}

func TestTheReviewSaysWhatIsProposedAndWhoAskedForIt(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	_, in := review(t, h, 4800, nil)
	if in.Title != "Refund $4,800.00 to Ann on order o-1" {
		t.Errorf("title = %q", in.Title)
	}
	if !strings.Contains(in.Description, "**$500.00**") || strings.Contains(in.Description, "finance lead") {
		t.Errorf("description = %q, want the $500.00 threshold and no second approver", in.Description)
	}
	if in.Requester != refund.DefaultRequester {
		t.Errorf("requester = %q, want %q", in.Requester, refund.DefaultRequester)
	}
	args := protocol.Args(in.Args, in.ArgsSchema)
	if len(args) != 3 || args[0].Title != "Order" || args[1].Title != "Amount" || args[1].Text != "$4,800.00" {
		t.Fatalf("args as shown = %+v, want Order, Amount $4,800.00, Currency", args)
	}
	if args[1].Maximum == nil || *args[1].Maximum != 4800 {
		t.Errorf("amount's maximum = %v, want the 4800 asked for", args[1].Maximum)
	}
	var keys []string
	for _, k := range protocol.KeyArgs(in.Args, in.ArgsSchema) {
		keys = append(keys, k.Text)
	}
	if !slices.Equal(keys, []string{"o-1", "$4,800.00"}) {
		t.Errorf("key args = %q, want the order and the amount", keys)
	}
}

func TestTheRequesterIsWhoTheStateSaysAskedForTheRefund(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	_, in := review(t, h, 4800, map[string]any{"requestedBy": "ann.agent"})
	if in.Requester != "ann.agent" {
		t.Fatalf("requester = %q, want ann.agent", in.Requester)
	}
}

func TestAnAmountWithoutACurrencyIsShownInDollars(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := h.Start(map[string]any{"orderId": "o-1", "amount": 4800})
	h.Answer(run, map[string]any{"last4": "4821"})
	in := h.Interrupt(run)
	if in.Title != "Refund $4,800.00 on order o-1" {
		t.Errorf("title = %q", in.Title)
	}
	if args := protocol.Args(in.Args, in.ArgsSchema); args[1].Text != "$4,800.00" {
		t.Errorf("amount shown as %q, want $4,800.00", args[1].Text)
	}
}

func TestAnEditAboveTheAmountAskedForIsRefusedByTheSchema(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run, _ := review(t, h, 4800, nil)
	out := h.Decide(run, "edit", map[string]any{"amount": 9000}, "sam", "")
	if out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer || !strings.Contains(out.Refused.Message, "/amount") {
		t.Fatalf("outcome = %+v, want invalid_answer naming /amount", out)
	}
}

func TestRemindersAreThoseThatFitTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout int
		want    []time.Duration
	}{
		{"the default half hour", 0, []time.Duration{refund.FirstReminder, refund.LastReminder}},
		{"five minutes", 300, []time.Duration{refund.LastReminder}},
		{"a minute", 60, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := enginetest.New(t, refund.Flow())
			run, _ := review(t, h, 4800, map[string]any{"approvalTimeoutSeconds": tc.timeout})
			in := h.Checkpoint(run).Interrupt
			var got []time.Duration
			if in.Remind != nil {
				got = in.Remind.Before
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("reminders = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestARefundOverTenThousandTakesASupervisorAndAFinanceLead(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run, in := review(t, h, 12000, nil)
	if in.Quorum == nil || in.Quorum.Total() != 2 || !strings.Contains(in.Description, "finance lead") {
		t.Fatalf("quorum = %+v, description = %q; want a supervisor and a finance lead", in.Quorum, in.Description)
	}
	if out := decide(h, run, "sam", "approve", refund.SupervisorRole); out.Refused != nil {
		t.Fatalf("the supervisor's vote was refused: %+v", out.Refused)
	}
	h.WantStatus(run, engine.Waiting)
	if out := decide(h, run, "sue", "approve", refund.SupervisorRole); out.Refused == nil {
		t.Fatal("a second supervisor's vote was accepted; the quorum wants a finance lead")
	}
	if out := decide(h, run, "sam", "approve", refund.FinanceLeadRole); out.Refused == nil || out.Refused.Code != protocol.CodeForbidden {
		t.Fatalf("the same person voting again = %+v, want forbidden", out.Refused)
	}
	if out := decide(h, run, "fay", "approve", refund.FinanceLeadRole); out.Refused != nil {
		t.Fatalf("the finance lead's vote was refused: %+v", out.Refused)
	}
	h.WantStatus(run, engine.Completed)
	var r refund.Refund
	raw, _ := json.Marshal(h.State(run)["refund"])
	if err := json.Unmarshal(raw, &r); err != nil || r.Amount != 12000 {
		t.Fatalf("refund = %s, want 12000 issued", raw)
	}
}

func TestTheRequesterOfALargeRefundCannotApproveIt(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run, _ := review(t, h, 12000, map[string]any{"requestedBy": "sam"})
	out := decide(h, run, "sam", "approve", refund.SupervisorRole)
	if out.Refused == nil || out.Refused.Code != protocol.CodeForbidden {
		t.Fatalf("the requester's vote = %+v, want forbidden", out.Refused)
	}
}

func TestARefundOfTenThousandOrLessTakesOneSupervisor(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run, in := review(t, h, 10000, nil)
	if in.Quorum != nil {
		t.Fatalf("quorum = %+v, want none at the threshold", in.Quorum)
	}
	if out := decide(h, run, "sam", "approve", refund.SupervisorRole); out.Refused != nil {
		t.Fatalf("refused: %+v", out.Refused)
	}
	h.WantStatus(run, engine.Completed)
}
