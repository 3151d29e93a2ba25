package protocol

// Timeout actions of a [Policy].
const (
	// TimeoutExpire ends the run expired; an empty action means it too.
	TimeoutExpire = "expire"
	// TimeoutReject rejects an approval.
	TimeoutReject = "reject"
	// TimeoutApprove approves an approval as proposed.
	TimeoutApprove = "approve"
	// TimeoutEscalate issues the approval again to another approver role.
	TimeoutEscalate = "escalate"
)

// Policy is what happens when an interrupt's deadline passes, as the
// checkpoint, the interrupted event and the pending index entry carry it
// (`onTimeout`).
type Policy struct {
	// Action is expire (also when empty), reject, approve or escalate.
	Action string `json:"action,omitempty"`
	// ApproverRole is the role an escalation goes to.
	ApproverRole string `json:"approverRole,omitempty"`
	// Timeout is an escalation's own deadline, a Go duration ("30m0s").
	Timeout string `json:"timeout,omitempty"`
	// Then is what happens when the escalation's deadline passes.
	Then *Policy `json:"then,omitempty"`
}

// Consequence says for a person what happens at the deadline: "then it
// goes to finance_lead", "then it expires". It is "" for a nil policy.
func (p *Policy) Consequence() string {
	if p == nil {
		return ""
	}
	switch p.Action {
	case TimeoutReject:
		return "then it is rejected"
	case TimeoutApprove:
		return "then it is approved as proposed"
	case TimeoutEscalate:
		if p.ApproverRole != "" {
			return "then it goes to " + p.ApproverRole
		}
	}
	return "then it expires"
}
