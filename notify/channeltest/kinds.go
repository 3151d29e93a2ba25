package channeltest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// refundState is the state of the suite's flow: what its approval asks.
type refundState struct {
	Amount    float64 `json:"amount"`
	Requester string  `json:"requester,omitempty"`
	Quorum    int     `json:"quorum,omitempty"`
	Remind    bool    `json:"remind,omitempty"`
	Verdict   string  `json:"verdict,omitempty"`
	// Role is the approver role, Role when empty.
	Role string `json:"role,omitempty"`
}

// Flow is the suite's flow, "refund": one approval of issue_refund by the
// finance role (or the state's role), with the state's requester, quorum and, when remind is
// set, a reminder a second after it is asked.
func Flow() *engine.Flow {
	return engine.NewFlow[refundState]("refund").
		Node("review", func(ctx context.Context, n *engine.Node[refundState]) error {
			s := n.State()
			a := engine.Approval{
				Action:       "issue_refund",
				Title:        "Refund " + protocol.FormatMoney(s.Amount, "USD"),
				Requester:    s.Requester,
				ApproverRole: cmp.Or(s.Role, Role),
				Args:         map[string]any{"amount": s.Amount, "currency": "USD"},
				Timeout:      time.Hour,
			}
			if s.Quorum > 1 {
				a.Quorum = &protocol.Quorum{Required: s.Quorum}
			}
			if s.Remind {
				a.Reminders = []time.Duration{time.Hour - time.Second}
			}
			d, err := n.Approve(ctx, a)
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict)})
		}).
		Start("review").MustBuild()
}

// askApproval is an ask for the finance role's approval of a refund.
func askApproval(id string) protocol.AskRequest {
	return protocol.AskRequest{AskID: id, Agent: "support-bot",
		Messages: json.RawMessage(`[{"role": "user", "content": "I was charged twice."}]`),
		Interrupt: protocol.AskInterrupt{Kind: protocol.KindApproval, Title: fmt.Sprintf("Refund for %s", id),
			Action: "issue_refund", Args: json.RawMessage(`{"amount": 120}`), ApproverRole: Role, Timeout: "1h"}}
}
