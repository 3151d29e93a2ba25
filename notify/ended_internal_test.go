package notify

import (
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

// A run found finished as its notice went out is followed up from its
// checkpoint, and says what the settling event would have said: the
// reason of a rejection, the answer of a respond.
func TestARunFoundFinishedIsFollowedUpWithTheDecisionsReasonOrAnswer(t *testing.T) {
	cases := []struct {
		d          protocol.Decision
		what, want string
	}{
		{protocol.Decision{Verdict: protocol.VerdictReject, Approver: "bob", Reason: "duplicate of 4820"}, "Rejected by bob", "Reason: duplicate of 4820"},
		{protocol.Decision{Verdict: protocol.VerdictRespond, Approver: "ann", Message: "use the gift card"}, "", "Answer: use the gift card"},
		{protocol.Decision{Verdict: protocol.VerdictApprove, Approver: "ann"}, "Approved by ann", ""},
	}
	for _, c := range cases {
		st := endedSettled(protocol.Checkpoint{Flow: "refund", Run: "r-1", Status: protocol.StatusCompleted, Decisions: []protocol.Decision{c.d}})
		if st.Detail != c.want {
			t.Errorf("%s: the follow-up's detail is %q, want %q", c.d.Verdict, st.Detail, c.want)
		}
		if c.what != "" && st.What != c.what {
			t.Errorf("%s: the follow-up says %q, want %q", c.d.Verdict, st.What, c.what)
		}
	}
}
