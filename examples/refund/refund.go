// Package refund is Interlock's approval example: a support agent's refund
// that pauses for a supervisor when it is large. It shows a question with a
// validator, an inline approval with a deadline that escalates, reminders
// before it, a title, a Markdown description and an args schema for the
// people who decide, a second approver from finance for the largest
// refunds, an edit checked by the schema and the action's validator, a
// reject route, and the refund itself as a step that runs once however
// often the node runs.
package refund

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// Name is the flow's name.
const Name = "refund"

// Threshold is the amount above which a refund needs a supervisor.
const Threshold = 500

// SecondApproverThreshold is the amount above which a refund needs a
// second approver, from finance.
const SecondApproverThreshold = 10000

// DefaultRequester is who asked for the refund when the start state does
// not say (requestedBy).
const DefaultRequester = "support-agent"

// DefaultCurrency is the currency of a refund whose state names none.
const DefaultCurrency = "USD"

// FirstReminder and LastReminder are how long before the approval's
// deadline the people who may decide are reminded; a reminder that does
// not fit the deadline is left out.
const (
	FirstReminder = 10 * time.Minute
	LastReminder  = 2 * time.Minute
)

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
	// RequestedBy is who asked for the refund (an agent, a person); with
	// a second approver they may not approve it themselves.
	// DefaultRequester when absent.
	RequestedBy string `json:"requestedBy,omitempty"`
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
	// Approvers are everyone whose vote made a quorum's approval, in
	// the order they voted; ApprovedBy is the last of them.
	Approvers []string `json:"approvers,omitempty"`
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
	schema, err := argsSchema(s)
	if err != nil {
		return err
	}
	a := engine.Approval{
		Action:       "issue_refund",
		Args:         map[string]any{"orderId": s.OrderID, "amount": s.Amount, "currency": s.Currency},
		Reason:       fmt.Sprintf("Refund exceeds $%d threshold. Supervisor review required.", Threshold),
		Title:        title(s),
		Description:  description(s),
		Requester:    cmp.Or(s.RequestedBy, DefaultRequester),
		ArgsSchema:   schema,
		ApproverRole: SupervisorRole,
		// A supervisor who rejects a refund says why, on every surface.
		RejectReasonRequired: true,
		Reminders:            remindersWithin(timeout),
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
	}
	if s.Amount > SecondApproverThreshold {
		// Four eyes from two functions: the support supervisor vouches
		// for the customer's case and a finance lead for the money, as a
		// finance team's payment controls expect for large outflows. Two
		// supervisors would be two people of the team that asks, and
		// would leave finance out of the refunds that matter most. The
		// separation of duties (the default with a quorum) keeps the
		// requester, and a second vote by the same person, out.
		a.Quorum = &protocol.Quorum{Roles: []protocol.RoleCount{
			{Role: SupervisorRole, Count: 1},
			{Role: FinanceLeadRole, Count: 1},
		}}
	}
	_, err = n.Approve(ctx, a)
	return err
}

// title says the refund in one line: "Refund $4,800.00 to Ann on order o-1".
func title(s State) string {
	to := ""
	if s.Customer != "" {
		to = " to " + s.Customer
	}
	return fmt.Sprintf("Refund %s%s on order %s", protocol.FormatMoney(s.Amount, cmp.Or(s.Currency, DefaultCurrency)), to, s.OrderID)
}

// description says, in Markdown, why the refund waits for a person.
func description(s State) string {
	d := fmt.Sprintf("Refunds over **%s** need a supervisor's approval before the money goes back to the customer.",
		protocol.FormatMoney(Threshold, DefaultCurrency))
	if s.Amount > SecondApproverThreshold {
		d += fmt.Sprintf(" Over **%s** a finance lead approves too, and whoever asked for the refund cannot approve it.",
			protocol.FormatMoney(SecondApproverThreshold, DefaultCurrency))
	}
	return d + "\n\nYou may lower the amount, not raise it; reject with a reason to refuse the refund."
}

// argsSchema describes the refund's args: the order and amount are what a
// queue shows; the amount may be lowered, never raised.
func argsSchema(s State) (json.RawMessage, error) {
	amount := map[string]any{"type": "number", "title": "Amount", "exclusiveMinimum": 0, "maximum": s.Amount,
		protocol.KeywordDisplay: protocol.DisplayCurrency, protocol.KeywordKey: true}
	if s.Currency == "" {
		amount[protocol.KeywordCurrency] = DefaultCurrency
	}
	// The properties are written in the order surfaces show them.
	var b bytes.Buffer
	b.WriteString(`{"type":"object","required":["orderId","amount"],"properties":{`)
	for i, p := range []struct {
		name   string
		schema map[string]any
	}{
		{"orderId", map[string]any{"type": "string", "title": "Order", protocol.KeywordKey: true}},
		{"amount", amount},
		{"currency", map[string]any{"type": "string", "title": "Currency"}},
	} {
		raw, err := json.Marshal(p.schema)
		if err != nil {
			return nil, fmt.Errorf("refund: the args schema of order %s: %w", s.OrderID, err)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", p.name, raw)
	}
	b.WriteString("}}")
	return b.Bytes(), nil
}

// remindersWithin returns the reminders that fit an approval of timeout.
func remindersWithin(timeout time.Duration) []time.Duration {
	var out []time.Duration
	for _, d := range []time.Duration{FirstReminder, LastReminder} {
		if d < timeout {
			out = append(out, d)
		}
	}
	return out
}

func issueRefund(ctx context.Context, n *engine.Node[State]) error {
	s := n.State()
	amount, approvedBy := s.Amount, "auto"
	var approvers []string
	if d, ok := n.Decision("issue_refund"); ok && d.Approved() {
		if a, ok := d.Args["amount"].(float64); ok {
			amount = a
		}
		approvedBy = d.Approver
		if len(d.Votes) > 1 {
			for _, v := range d.Votes {
				approvers = append(approvers, v.Approver)
			}
		}
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
		"refund":  Refund{OrderID: s.OrderID, Amount: amount, RefundID: id, ApprovedBy: approvedBy, Approvers: approvers},
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
