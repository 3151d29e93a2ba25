// Package refund is Interlock's approval example: a support agent's refund
// that pauses for a supervisor when it is large. It shows a question with a
// validator, an inline approval with a deadline that escalates, an edit
// checked by the action's validator, a reject route, and the refund itself
// as a step that runs once however often the node runs.
package refund

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"time"

	"github.com/interlockhq/interlock/engine"
)

// Name is the flow's name.
const Name = "refund"

// Threshold is the amount above which a refund needs a supervisor.
const Threshold = 500

// DefaultApprovalTimeout is how long each approval waits when the start
// state does not say (approvalTimeoutSeconds).
const DefaultApprovalTimeout = 30 * time.Minute

// Roles that decide refunds: the supervisor first, finance when the
// supervisor's deadline passes.
const (
	SupervisorRole  = "supervisor"
	FinanceLeadRole = "finance_lead"
)

// State is the refund being handled.
type State struct {
	OrderID  string  `json:"orderId"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency,omitempty"`
	Customer string  `json:"customer,omitempty"`
	Last4    string  `json:"last4,omitempty"`
	// Refund is set once the refund is issued.
	Refund *Refund `json:"refund,omitempty"`
	// Outcome is "refunded" or "rejected".
	Outcome string `json:"outcome,omitempty"`
	// Rejection is who rejected the refund, and why.
	Rejection *Rejection `json:"rejection,omitempty"`
	// ApprovalTimeoutSeconds is each approval's deadline; 1800 when absent.
	ApprovalTimeoutSeconds int `json:"approvalTimeoutSeconds,omitempty"`
}

// Refund is an issued refund.
type Refund struct {
	OrderID    string  `json:"orderId"`
	Amount     float64 `json:"amount"`
	RefundID   string  `json:"refundId"`
	ApprovedBy string  `json:"approvedBy"`
}

// Rejection is a rejected refund.
type Rejection struct {
	Approver string `json:"approver"`
	Reason   string `json:"reason,omitempty"`
}

// Flow returns the refund flow.
func Flow() *engine.Flow {
	return engine.NewFlow[State](Name).
		Node("verify_identity", verifyIdentity).
		Node("review", review).
		Node("issue_refund", issueRefund).
		Node("notify_rejected", notifyRejected).
		Start("verify_identity").
		Edge("verify_identity", "review").
		Edge("review", "issue_refund").
		OnReject("review", "notify_rejected").
		MustBuild()
}

var fourDigits = regexp.MustCompile(`^[0-9]{4}$`)

func verifyIdentity(ctx context.Context, n *engine.Node[State]) error {
	_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{
		Field:    "last4",
		Question: "What are the last 4 digits of the card on file?",
		Validate: func(_ context.Context, v any) (engine.Update, error) {
			if s, _ := v.(string); !fourDigits.MatchString(s) {
				return nil, engine.Reject("Please give exactly four digits.")
			}
			return nil, nil
		},
	}}})
	return err
}

func review(ctx context.Context, n *engine.Node[State]) error {
	s := n.State()
	if s.Amount <= Threshold {
		return nil
	}
	timeout := DefaultApprovalTimeout
	if s.ApprovalTimeoutSeconds > 0 {
		timeout = time.Duration(s.ApprovalTimeoutSeconds) * time.Second
	}
	_, err := n.Approve(ctx, engine.Approval{
		Action:       "issue_refund",
		Args:         map[string]any{"orderId": s.OrderID, "amount": s.Amount, "currency": s.Currency},
		Reason:       fmt.Sprintf("Refund exceeds $%d threshold. Supervisor review required.", Threshold),
		ApproverRole: SupervisorRole,
		// A supervisor who rejects a refund says why, on every surface.
		RejectReasonRequired: true,
		Timeout:              timeout,
		OnTimeout:            engine.Escalate(FinanceLeadRole, timeout, engine.Policy{Action: engine.OnTimeoutExpire}),
		Validate: func(_ context.Context, args map[string]any) error {
			amount, ok := args["amount"].(float64)
			if !ok || amount <= 0 {
				return engine.Reject("amount must be a positive number.")
			}
			if amount > s.Amount {
				return engine.Reject(fmt.Sprintf("amount %.2f is more than the %.2f asked for; a refund can only be lowered.", amount, s.Amount))
			}
			if args["orderId"] != s.OrderID {
				return engine.Reject("orderId cannot be changed; reject the refund instead.")
			}
			return nil
		},
	})
	return err
}

func issueRefund(ctx context.Context, n *engine.Node[State]) error {
	s := n.State()
	amount, approvedBy := s.Amount, "auto"
	if d, ok := n.Decision("issue_refund"); ok && d.Approved() {
		if a, ok := d.Args["amount"].(float64); ok {
			amount = a
		}
		approvedBy = d.Approver
	}
	id, err := engine.Step(ctx, n, "refund", func(context.Context) (string, error) {
		// A real flow calls the payment provider here, with the order id
		// as its idempotency key.
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		return "re_" + hex.EncodeToString(b), nil
	})
	if err != nil {
		return err
	}
	return n.Update(engine.Update{
		"refund":  Refund{OrderID: s.OrderID, Amount: amount, RefundID: id, ApprovedBy: approvedBy},
		"outcome": "refunded",
	})
}

func notifyRejected(_ context.Context, n *engine.Node[State]) error {
	r, _ := n.Rejection()
	return n.Update(engine.Update{
		"outcome":   "rejected",
		"rejection": Rejection{Approver: r.Approver, Reason: r.Reason},
	})
}
