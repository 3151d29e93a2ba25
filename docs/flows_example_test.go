package docs_test

// The Go code docs/flows.md quotes, compiled and run here: a test keeps
// every Go snippet of the docs a quotation of compiled code
// (TestEveryGoSnippetOfTheDocsIsQuotedFromCompiledCode).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/wire"
)

type Booking struct {
	Email  string   `json:"email,omitempty"`
	Name   string   `json:"name,omitempty"`
	Phone  string   `json:"phone,omitempty"`
	Driver Driver   `json:"driver,omitzero"`
	Topics []string `json:"topics,omitempty"`
	Notes  []string `json:"notes,omitempty"`
}

type Driver struct {
	Name    string `json:"name,omitempty"`
	License string `json:"license,omitempty"`
}

func bookingFlow() (*engine.Flow, error) {
	flow, err := engine.NewFlow[Booking]("booking").
		Node("ask_email", askEmail).
		Node("review", review).
		Node("big", big).
		Node("small", small).
		Start("ask_email").
		Edge("ask_email", "review").
		Branch("review", func(b Booking) string {
			if len(b.Topics) > 2 {
				return "big"
			}
			return "small"
		}, "big", "small").
		Edge("big", engine.End).
		Reducer("notes", engine.Append).
		Build()
	return flow, err
}

func review(ctx context.Context, n *engine.Node[Booking]) error {
	b := n.State()
	return n.Set("notes", "reviewed "+b.Email)
}

func big(ctx context.Context, n *engine.Node[Booking]) error {
	return n.Set("notes", "a big booking")
}

func small(ctx context.Context, n *engine.Node[Booking]) error { return nil }

func askContact(ctx context.Context, n *engine.Node[Booking]) error {
	answers, err := n.Ask(ctx, engine.Questions{
		Context: "Ask both in one natural message.",
		Questions: []engine.Question{
			{Field: "name", Question: "What's your name?"},
			{Field: "phone", Question: "What's your phone number?",
				Suggestions: []string{"+44 ...", "+1 ..."},
				Context:     "Accept any format."},
		},
	})
	if err != nil {
		return err // engine.ErrInterrupted while the run waits
	}
	return n.Set("notes", "contact: "+answers.String("name"))
}

func askEmail(ctx context.Context, n *engine.Node[Booking]) error {
	_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{
		Field:    "email",
		Question: "What's your email?",
		Validate: func(ctx context.Context, v any) (engine.Update, error) {
			email := strings.ToLower(strings.TrimSpace(fmt.Sprint(v)))
			if !strings.Contains(email, "@") {
				return nil, engine.Reject("That doesn't look like an email.")
			}
			return engine.Update{"email": email}, nil // store it normalised
		},
	}}})
	return err
}

func pickTopics(ctx context.Context, n *engine.Node[Booking]) error {
	ids, err := n.Choose(ctx, engine.Choice{
		Question: "Which topics interest you?",
		Options:  []engine.Option{{ID: "product", Label: "Product"}, {ID: "design", Label: "Design"}},
		Multiple: true,
	})
	if err != nil {
		return err
	}
	return n.Set("topics", ids)
}

// Order, Receipt and payments stand for a payment provider's.
type Order struct {
	OrderID string  `json:"orderId"`
	Amount  float64 `json:"amount"`
}

type Receipt struct {
	ID string `json:"id"`
}

type paymentProvider struct{}

func (paymentProvider) Charge(ctx context.Context, idempotencyKey string, amount float64) (Receipt, error) {
	return Receipt{ID: "ch_" + idempotencyKey}, nil
}

var payments paymentProvider

func charge(ctx context.Context, n *engine.Node[Order]) error {
	o := n.State()
	receipt, err := engine.Step(ctx, n, "charge", func(ctx context.Context) (Receipt, error) {
		return payments.Charge(ctx, o.OrderID, o.Amount) // the order id as idempotency key
	})
	if err != nil {
		return err
	}
	return n.Set("receipt", receipt)
}

// Refund is the state of the approval snippets.
type Refund struct {
	OrderID string  `json:"orderId"`
	Amount  float64 `json:"amount"`
}

func checkWithSupervisor(ctx context.Context, n *engine.Node[Refund]) error {
	s := n.State()
	if told, _ := engine.Local[bool](n, "told"); !told {
		if err := n.Emit("message", map[string]any{"text": "Let me check that with a supervisor."}); err != nil {
			return err
		}
		if err := engine.SetLocal(n, "told", true); err != nil {
			return err
		}
	}
	_, err := n.Approve(ctx, engine.Approval{Action: "issue_refund", Args: s, ApproverRole: "supervisor"})
	return err
}

func approveRefund(ctx context.Context, n *engine.Node[Refund]) error {
	s := n.State()
	d, err := n.Approve(ctx, engine.Approval{
		Action:       "issue_refund",
		Args:         map[string]any{"orderId": s.OrderID, "amount": s.Amount},
		Reason:       "Refund exceeds $500 threshold. Supervisor review required.",
		ApproverRole: "supervisor",
		Timeout:      30 * time.Minute,
		OnTimeout:    engine.Escalate("finance_lead", 30*time.Minute, engine.Policy{}),
		Validate: func(_ context.Context, args map[string]any) error {
			if amount, _ := args["amount"].(float64); amount > s.Amount {
				return engine.Reject("a refund can only be lowered")
			}
			return nil
		},
	})
	if err != nil {
		return err // engine.ErrInterrupted while it waits
	}
	if !d.Approved() {
		return nil // rejected: the flow's reject route takes over
	}
	// d.Args are the final args: the proposal with the approver's edits merged in.
	return n.Set("amount", d.Args["amount"])
}

// Mail is the state of the gates' snippet.
type Mail struct {
	Draft string `json:"draft,omitempty"`
}

func writeDraft(ctx context.Context, n *engine.Node[Mail]) error {
	return n.Set("draft", "Dear customer, ...")
}

func send(ctx context.Context, n *engine.Node[Mail]) error { return nil }

func discard(ctx context.Context, n *engine.Node[Mail]) error { return n.Set("draft", "") }

func mailFlow() (*engine.Flow, error) {
	return engine.NewFlow[Mail]("mail").
		Node("write", writeDraft).
		Node("send", send).
		Node("discard", discard).
		Start("write").
		Edge("write", "send").
		GateAfter("write", engine.Gate{ApproverRole: "editor", Reason: "Review the draft", Fields: []string{"draft"}}).
		GateBefore("send", engine.Gate{ApproverRole: "support", Reason: "About to email the customer"}).
		OnReject("send", "discard").
		Build()
}

func TestBooking(t *testing.T) {
	h := enginetest.New(t, booking.Flow())
	run := h.Start(map[string]any{"name": "Ann", "phone": "555-0100", "level": "advanced",
		"driver": map[string]any{"name": "Bob", "license": "D-123"}})

	in := h.Interrupt(run) // the interrupted event, as published
	if in.Node != "ask_email" {
		t.Fatalf("waiting at %s, want ask_email", in.Node)
	}

	h.Answer(run, map[string]any{"email": "ann@example.com"})
	h.Choose(run, "product")
	h.WantStatus(run, engine.Completed)
}

// startOnExternalNATS is the service on a NATS server of one's own.
func startOnExternalNATS(ctx context.Context, flow *engine.Flow, secret []byte) (*interlock.Service, error) {
	svc, err := interlock.Start(ctx, interlock.Config{
		Flows:  []*engine.Flow{flow},
		Conn:   wire.ConnConfig{URL: "nats://nats-1:4222,nats://nats-2:4222", CredsFile: "/etc/interlock/worker.creds"},
		Secret: secret, // 32+ random bytes, the same on every worker
	})
	return svc, err
}

// TestTheFlowsOfTheDocsRun builds the flows docs/flows.md declares and
// walks their nodes in memory, so that what the page shows works as well
// as it compiles.
func TestTheFlowsOfTheDocsRun(t *testing.T) {
	t.Parallel()
	flow, err := bookingFlow()
	if err != nil {
		t.Fatal(err)
	}
	h := enginetest.New(t, flow)
	run := h.Start(nil)
	h.Answer(run, map[string]any{"email": "no"})
	if in := h.Interrupt(run); in.Node != "ask_email" || !strings.HasPrefix(in.Questions[0].Context, "ERROR: That doesn't look like an email.") {
		t.Fatalf("a bad email is asked again with the validator's message: %+v", in)
	}
	h.Answer(run, map[string]any{"email": " Ann@Example.com "})
	h.WantStatus(run, engine.Completed)
	if st := h.State(run); st["email"] != "ann@example.com" || fmt.Sprint(st["notes"]) != "[reviewed ann@example.com]" {
		t.Errorf("state = %v, want the normalised email, reviewed", st)
	}

	mail, err := mailFlow()
	if err != nil {
		t.Fatal(err)
	}
	h = enginetest.New(t, mail)
	run = h.Start(nil)
	h.Decide(run, "approve", nil, "eve", "") // after write
	h.Decide(run, "reject", nil, "sam", "")  // before send: discard instead
	h.WantStatus(run, engine.Completed)
	if st := h.State(run); st["draft"] != nil && st["draft"] != "" {
		t.Errorf("a rejected send discards the draft: %v", st)
	}

	contact := engine.NewFlow[Booking]("contact").Node("ask_contact", askContact).Node("pick_topics", pickTopics).
		Start("ask_contact").Edge("ask_contact", "pick_topics").Reducer("notes", engine.Append).MustBuild()
	h = enginetest.New(t, contact)
	run = h.Start(nil)
	h.Answer(run, map[string]any{"name": "Ann", "phone": "+44 20 7946 0000"})
	h.Choose(run, "product", "design")
	h.WantStatus(run, engine.Completed)
	if st := h.State(run); fmt.Sprint(st["topics"]) != "[product design]" || fmt.Sprint(st["notes"]) != "[contact: Ann]" {
		t.Errorf("state = %v", st)
	}

	orders := engine.NewFlow[Order]("order").Node("charge", charge).Start("charge").MustBuild()
	h = enginetest.New(t, orders)
	run = h.Start(map[string]any{"orderId": "o-1", "amount": 12.5})
	if st := h.State(run); fmt.Sprint(st["receipt"]) != "map[id:ch_o-1]" {
		t.Errorf("charge: state = %v", st)
	}

	refunds := engine.NewFlow[Refund]("refund").Node("check", checkWithSupervisor).Node("approve", approveRefund).
		Start("check").Edge("check", "approve").MustBuild()
	h = enginetest.New(t, refunds)
	run = h.Start(map[string]any{"orderId": "o-1", "amount": 900})
	if kinds := fmt.Sprint(h.Kinds(run)); !strings.Contains(kinds, "message") {
		t.Errorf("no message before the approval: %s", kinds)
	}
	h.Decide(run, "approve", nil, "sam", "")
	if out := h.Decide(run, "edit", map[string]any{"amount": 1000}, "sam", ""); out.Refused == nil || out.Refused.Code != engine.CodeInvalidAnswer {
		t.Fatalf("an edit raising the refund: %+v, want it refused", out)
	}
	h.Decide(run, "edit", map[string]any{"amount": 400}, "sam", "partial")
	h.WantStatus(run, engine.Completed)
	if st := h.State(run); st["amount"] != float64(400) {
		t.Errorf("refund: state = %v, want the edited amount", st)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := startOnExternalNATS(ctx, refunds, nil); err == nil {
		t.Error("started on nats-1:4222, which this test does not run")
	}
}
