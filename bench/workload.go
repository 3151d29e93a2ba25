package main

import "time"

// workload is what every run of a measurement does between its start and
// its end: one interrupt, then one resume that completes the run.
type workload struct {
	// name is the --workload value.
	name string
	// flow is the flow's name, in every subject and key of a run.
	flow string
	// approval is set for the refund approval, unset for the question.
	approval bool
}

// The workloads.
var (
	// questionWorkload asks one question (field answer) and completes once
	// it is answered.
	questionWorkload = workload{name: "question", flow: "bench"}
	// approvalWorkload is examples/refund's review and issue_refund: an
	// approval of issue_refund with a 30-minute deadline (so a message
	// schedule is stored), approved, then the refund recorded as a step.
	approvalWorkload = workload{name: "approval", flow: "refund", approval: true}
)

// workloadsFlag lists the --workload values.
const workloadsFlag = "question, approval or both"

// workloadsNamed returns the workloads a --workload value names, and false
// for an unknown value.
func workloadsNamed(s string) ([]workload, bool) {
	switch s {
	case questionWorkload.name:
		return []workload{questionWorkload}, true
	case approvalWorkload.name:
		return []workload{approvalWorkload}, true
	case "both":
		return []workload{questionWorkload, approvalWorkload}, true
	}
	return nil, false
}

// The approval workload's refund, as examples/refund's review asks for it.
const (
	reviewNode      = "review"
	issueRefundNode = "issue_refund"
	refundAction    = "issue_refund"
	refundStep      = "refund"
	refundReason    = "Refund exceeds $500 threshold. Supervisor review required."
	supervisorRole  = "supervisor"
	financeLeadRole = "finance_lead"
	// refundTimeout is the approval's deadline, and the escalation's.
	refundTimeout = 30 * time.Minute
	// refundAmount and refundCurrency are every run's refund.
	refundAmount   = 742.5
	refundCurrency = "EUR"
	// approverName is who approves every refund.
	approverName = "supervisor-ana"
)

// refundOrder is the order id of run's refund.
func refundOrder(run string) string { return "ord-" + run }

// refundState is the start state of run's refund, field by field as JSON.
func refundState(run string) map[string]any {
	return map[string]any{"orderId": refundOrder(run), "amount": refundAmount, "currency": refundCurrency}
}

// refundID is the id a payment provider would give a refund.
func refundID() string { return "re_" + newID()[:16] }

// expiry is the deadline timeout after now, rounded up to a whole second
// as Interlock rounds it (the server schedules to the second).
func expiry(now time.Time, timeout time.Duration) time.Time {
	at := now.Add(timeout).UTC()
	if t := at.Truncate(time.Second); !t.Equal(at) {
		at = t.Add(time.Second)
	}
	return at
}
