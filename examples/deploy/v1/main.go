// Command v1 is version 1 of the payout service of examples/deploy: a
// payout waits for a finance approval at node review, then for its bank
// reference at node confirm.
//
//	INTERLOCK_WORKERS_PASSWORD=... go run ./examples/deploy/v1
package main

import (
	"context"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/deploy"
)

// Payout is version 1's state: the amount in units.
type Payout struct {
	Amount      float64 `json:"amount"`
	Reference   string  `json:"reference,omitempty"`
	Outcome     string  `json:"outcome,omitempty"`
	ConfirmedBy string  `json:"confirmedBy,omitempty"`
}

// Flow is version 1 of the payout flow.
func Flow() *engine.Flow {
	return engine.NewFlow[Payout]("payout").Version("1").
		Node("review", func(ctx context.Context, n *engine.Node[Payout]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "pay", Args: map[string]any{"amount": n.State().Amount}, ApproverRole: "finance"})
			if err != nil {
				return err
			}
			if !d.Approved() {
				return n.Set("outcome", "rejected")
			}
			return n.Set("outcome", "approved")
		}).
		Node("confirm", func(ctx context.Context, n *engine.Node[Payout]) error {
			if _, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "reference", Question: "Bank reference of the transfer?", Type: "string"}}}); err != nil {
				return err
			}
			return n.Set("confirmedBy", "1")
		}).
		Edge("review", "confirm").
		Start("review").
		MustBuild()
}

func main() { deploy.Main(Flow()) }
