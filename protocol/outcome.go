package protocol

// Outcome says how a finished run ended, in one word people read: what
// was decided, not only that the run completed. A run rejected by its
// approver completes (its flow goes on to say no), and its outcome is
// rejected.
type Outcome string

// Outcomes of finished runs.
const (
	// OutcomeApproved: the run's latest approval was approved.
	OutcomeApproved Outcome = "approved"
	// OutcomeEdited: the run's latest approval was approved with edits.
	OutcomeEdited Outcome = "edited"
	// OutcomeRejected: the run's latest approval was rejected.
	OutcomeRejected Outcome = "rejected"
	// OutcomeAnswered: the run completed after people answered it (its
	// questions, its choices, or an approval answered with respond).
	OutcomeAnswered Outcome = "answered"
	// OutcomeCompleted: the run completed without waiting on anyone.
	OutcomeCompleted Outcome = "completed"
	// OutcomeExpired, OutcomeCancelled and OutcomeFailed: the run's
	// status says it.
	OutcomeExpired   Outcome = "expired"
	OutcomeCancelled Outcome = "cancelled"
	OutcomeFailed    Outcome = "failed"
)

// Bad reports whether the outcome is one a person should look at: a
// rejection, an expiry, a failure.
func (o Outcome) Bad() bool {
	return o == OutcomeRejected || o == OutcomeExpired || o == OutcomeFailed
}

// OutcomeOf is how a run of status ended, with latest its latest approval
// decision (nil for none) and waited whether it ever waited on a person;
// "" while it has not finished.
func OutcomeOf(status Status, latest *FinishedDecision, waited bool) Outcome {
	switch status {
	case StatusExpired:
		return OutcomeExpired
	case StatusCancelled:
		return OutcomeCancelled
	case StatusFailed:
		return OutcomeFailed
	case StatusCompleted:
	default:
		return ""
	}
	if latest != nil {
		switch latest.Verdict {
		case VerdictApprove:
			return OutcomeApproved
		case VerdictEdit:
			return OutcomeEdited
		case VerdictReject:
			return OutcomeRejected
		}
		return OutcomeAnswered
	}
	if waited {
		return OutcomeAnswered
	}
	return OutcomeCompleted
}

// Outcome is how the run ended, "" while it has not.
func (cp Checkpoint) Outcome() Outcome {
	var latest *FinishedDecision
	if n := len(cp.Decisions); n > 0 {
		latest = &FinishedDecision{Verdict: cp.Decisions[n-1].Verdict}
	}
	return OutcomeOf(cp.Status, latest, cp.Waited)
}

// Outcome is how the run ended: the entry's, or for an entry written
// before entries held one, as its status and decision say.
func (f Finished) Outcome() Outcome {
	if f.Result != "" {
		return f.Result
	}
	return OutcomeOf(f.Status, f.Decision, f.Interrupt != nil)
}
