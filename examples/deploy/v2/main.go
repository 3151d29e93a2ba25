// Command v2 is version 2 of the payout service of examples/deploy. Since
// version 1: node review is renamed approve, a node record is added after
// confirm, and the amount is kept in cents (amountCents). Runs of version
// 1 move to it by the migration it declares, when a worker of version 2
// takes their next command.
//
//	INTERLOCK_WORKERS_PASSWORD=... go run ./examples/deploy/v2
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/deploy"
)

// Payout is version 2's state: the amount in cents.
type Payout struct {
	AmountCents int64  `json:"amountCents"`
	Reference   string `json:"reference,omitempty"`
	Outcome     string `json:"outcome,omitempty"`
	ConfirmedBy string `json:"confirmedBy,omitempty"`
	Recorded    bool   `json:"recorded,omitempty"`
}

// Flow is version 2 of the payout flow.
func Flow() *engine.Flow {
	return engine.NewFlow[Payout]("payout").Version("2").
		Node("approve", func(ctx context.Context, n *engine.Node[Payout]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "pay", Args: map[string]any{"amountCents": n.State().AmountCents}, ApproverRole: "finance"})
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
			return n.Set("confirmedBy", "2")
		}).
		Node("record", func(ctx context.Context, n *engine.Node[Payout]) error {
			return n.Set("recorded", true)
		}).
		Edge("approve", "confirm").
		Edge("confirm", "record").
		Start("approve").
		Migrate("1", engine.Migration{
			Nodes: map[string]string{"review": "approve"},
			State: amountToCents,
		}).
		MustBuild()
}

// amountToCents moves version 1's amount (units) to amountCents.
func amountToCents(d engine.Doc) (engine.Doc, error) {
	var amount float64
	if raw, ok := d["amount"]; ok {
		if err := json.Unmarshal(raw, &amount); err != nil {
			return nil, fmt.Errorf("amount %s is not a number: %w", raw, err)
		}
	}
	cents, err := json.Marshal(int64(math.Round(amount * 100)))
	if err != nil {
		return nil, err
	}
	d["amountCents"] = cents
	delete(d, "amount")
	return d, nil
}

func main() { deploy.Main(Flow()) }
