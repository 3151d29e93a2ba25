package engine_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
)

// exampleT stands in for a *testing.T in examples.
type exampleT struct{ ctx context.Context }

func (exampleT) Helper()                           {}
func (exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t exampleT) Context() context.Context        { return t.ctx }

// A flow asks a question, validates the answer, and completes.
func Example() {
	type Signup struct {
		Email string `json:"email,omitempty"`
	}
	flow := engine.NewFlow[Signup]("signup").
		Node("ask_email", func(ctx context.Context, n *engine.Node[Signup]) error {
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{
				Field: "email", Question: "What's your email?",
				Validate: func(_ context.Context, v any) (engine.Update, error) {
					s, _ := v.(string)
					if !strings.Contains(s, "@") {
						return nil, engine.Reject("That doesn't look like an email.")
					}
					return engine.Update{"email": strings.ToLower(s)}, nil
				},
			}}})
			return err
		}).
		Start("ask_email").
		MustBuild()

	h := enginetest.New(exampleT{context.Background()}, flow)
	run := h.Start(nil)
	fmt.Println(h.Interrupt(run).Questions[0].Question)

	h.Answer(run, map[string]any{"email": "nope"})
	fmt.Println(h.Interrupt(run).Questions[0].Context)

	h.Answer(run, map[string]any{"email": "Ann@Example.com"})
	fmt.Println(h.Checkpoint(run).Status, h.State(run)["email"])
	// Output:
	// What's your email?
	// ERROR: That doesn't look like an email.
	// completed ann@example.com
}

// A choice interrupt returns the ids of the selected options.
func ExampleNode_Choose() {
	flow := engine.NewFlow[map[string]any]("pick").
		Node("pick", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			ids, err := n.Choose(ctx, engine.Choice{
				Question: "Which topics?",
				Options:  []engine.Option{{ID: "product", Label: "Product"}, {ID: "design", Label: "Design"}},
				Multiple: true,
			})
			if err != nil {
				return err
			}
			return n.Set("topics", ids)
		}).
		Start("pick").
		MustBuild()

	h := enginetest.New(exampleT{context.Background()}, flow)
	run := h.Start(nil)
	h.Choose(run, "design", "product")
	fmt.Println(h.State(run)["topics"])
	// Output: [design product]
}

// A step's result is recorded before the node goes on, and replayed when the
// node runs again after the interrupt: the charge happens once.
func ExampleStep() {
	charges := 0
	flow := engine.NewFlow[map[string]any]("refund").
		Node("refund", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			id, err := engine.Step(ctx, n, "lookup", func(context.Context) (string, error) {
				charges++
				return "ch_123", nil
			})
			if err != nil {
				return err
			}
			if _, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "ok", Question: "Refund " + id + "?"}}}); err != nil {
				return err
			}
			return nil
		}).
		Start("refund").
		MustBuild()

	h := enginetest.New(exampleT{context.Background()}, flow)
	run := h.Start(nil)
	h.Answer(run, map[string]any{"ok": "yes"})
	fmt.Println(h.Checkpoint(run).Status, "after", charges, "lookup")
	// Output: completed after 1 lookup
}

// An approval pauses the run until a person approves, edits or rejects the
// proposed action; an edit's args are merged over the proposal.
func ExampleNode_Approve() {
	flow := engine.NewFlow[map[string]any]("refund").
		Node("review", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			d, err := n.Approve(ctx, engine.Approval{
				Action:       "issue_refund",
				Args:         map[string]any{"orderId": "o-1", "amount": 4800},
				Reason:       "Refund exceeds $500 threshold.",
				ApproverRole: "supervisor",
				Timeout:      30 * time.Minute,
				OnTimeout:    engine.Escalate("finance_lead", 30*time.Minute, engine.Policy{}),
			})
			if err != nil {
				return err
			}
			if !d.Approved() {
				return nil // the reject route takes over; the refund never runs
			}
			return n.Update(engine.Update{"refunded": d.Args["amount"], "approvedBy": d.Approver})
		}).
		Node("notify_rejected", func(_ context.Context, n *engine.Node[map[string]any]) error {
			r, _ := n.Rejection()
			return n.Set("rejectedBy", r.Approver)
		}).
		Start("review").
		OnReject("review", "notify_rejected").
		MustBuild()

	h := enginetest.New(exampleT{context.Background()}, flow)
	run := h.Start(nil)
	in := h.Interrupt(run)
	fmt.Println(in.Kind, in.Action, in.ApproverRole, in.Decisions)
	h.Decide(run, "edit", map[string]any{"amount": 400}, "sam@example.com", "partial refund")
	fmt.Println(h.State(run)["refunded"], h.State(run)["approvedBy"])

	other := h.Start(nil)
	h.Decide(other, "reject", nil, "sam@example.com", "duplicate")
	fmt.Println(h.State(other)["rejectedBy"], h.State(other)["refunded"])
	// Output:
	// approval issue_refund supervisor [approve edit reject]
	// 400 sam@example.com
	// sam@example.com <nil>
}

// Payout is the state of the payout flow of ExampleBuilder_Migrate's
// version 3; version 1 called AmountCents amount.
type Payout struct {
	AmountCents int    `json:"amountCents"`
	IBAN        string `json:"iban,omitempty"`
}

// askIBAN asks for the account a payout goes to.
func askIBAN(ctx context.Context, n *engine.Node[Payout]) error {
	_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "iban", Question: "IBAN?"}}})
	return err
}

// A deploy renames the node runs wait at and a state field: version 3
// declares how runs of version 1 move, and carries them on.
func ExampleBuilder_Migrate() {
	v1 := engine.NewFlow[map[string]any]("payout").Version("1").
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "iban", Question: "IBAN?"}}})
			return err
		}).Start("ask").MustBuild()
	h := enginetest.New(exampleT{context.Background()}, v1)
	run := h.Start(map[string]any{"amount": 480000})

	v3 := engine.NewFlow[Payout]("payout").Version("3").
		Node("question", askIBAN).Start("question").
		Migrate("1", engine.Migration{
			Nodes: map[string]string{"ask": "question"}, // renamed
			State: func(d engine.Doc) (engine.Doc, error) { // a field renamed
				d["amountCents"] = d["amount"]
				delete(d, "amount")
				return d, nil
			},
		}).
		MustBuild()
	h.Deploy(v3)
	h.Answer(run, map[string]any{"iban": "DE02120300000000202051"})
	cp := h.Checkpoint(run)
	fmt.Println(cp.Status, "on version", cp.FlowVersion, "with", string(cp.State["amountCents"]), "cents")
	// Output: completed on version 3 with 480000 cents
}
