package protocol_test

import (
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

func TestARunsOutcomeSaysWhatWasDecidedNotOnlyThatItCompleted(t *testing.T) {
	t.Parallel()
	d := func(v protocol.Verdict) *protocol.FinishedDecision { return &protocol.FinishedDecision{Verdict: v} }
	for _, c := range []struct {
		status protocol.Status
		latest *protocol.FinishedDecision
		waited bool
		want   protocol.Outcome
		bad    bool
	}{
		{protocol.StatusCompleted, d(protocol.VerdictApprove), true, protocol.OutcomeApproved, false},
		{protocol.StatusCompleted, d(protocol.VerdictEdit), true, protocol.OutcomeEdited, false},
		{protocol.StatusCompleted, d(protocol.VerdictReject), true, protocol.OutcomeRejected, true},
		{protocol.StatusCompleted, d(protocol.VerdictRespond), true, protocol.OutcomeAnswered, false},
		{protocol.StatusCompleted, nil, true, protocol.OutcomeAnswered, false},
		{protocol.StatusCompleted, nil, false, protocol.OutcomeCompleted, false},
		{protocol.StatusExpired, d(protocol.VerdictApprove), true, protocol.OutcomeExpired, true},
		{protocol.StatusCancelled, nil, true, protocol.OutcomeCancelled, false},
		{protocol.StatusFailed, nil, false, protocol.OutcomeFailed, true},
		{protocol.StatusWaiting, d(protocol.VerdictApprove), true, "", false},
	} {
		got := protocol.OutcomeOf(c.status, c.latest, c.waited)
		if got != c.want || got.Bad() != c.bad {
			t.Errorf("OutcomeOf(%s, %+v, waited %v) = %q (bad %v), want %q (bad %v)", c.status, c.latest, c.waited, got, got.Bad(), c.want, c.bad)
		}
	}
	// An entry written before outcomes were recorded says it from its
	// status and decision.
	old := protocol.Finished{Status: protocol.StatusCompleted, Decision: d(protocol.VerdictReject)}
	if got := old.Outcome(); got != protocol.OutcomeRejected {
		t.Errorf("an older entry's outcome = %q, want rejected", got)
	}
}
