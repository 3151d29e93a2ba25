package engine

import (
	"context"
	"slices"

	"github.com/interlockhq/interlock/protocol"
)

// vote records a vote that did not yet complete its approval's quorum:
// the voted event, the audit record, and the approval asked again with a
// fresh request id and token, the request voted on kept as superseded so
// that a vote racing this one still counts. A claimant's vote releases
// the claim, so that the others the quorum takes may vote.
func (r *Runner) vote(ctx context.Context, t *txn, in *Interrupt, cmd Resume) (Outcome, error) {
	cp, v := t.cp, *t.voted
	previous := in.RequestID
	in.Superseded = append(in.Superseded, previous)
	if n := len(in.Superseded); n > maxSuperseded {
		in.Superseded = slices.Clone(in.Superseded[n-maxSuperseded:])
	}
	in.RequestID = newRequestID()
	if in.ClaimedBy == v.Approver {
		// The claimant has voted: the others the quorum takes may now.
		in.ClaimedBy = ""
	}
	t.input += cmd.size()
	t.begin(cmd.Traceparent, protocol.ActionVoted)
	t.emit(protocol.EventVoted, &protocol.Voted{Flow: cp.Flow, Run: cp.Run, RequestID: previous, Approver: v.Approver,
		Votes: slices.Clone(in.Votes), Required: in.Quorum.Total(), Origin: cp.Origin})
	t.audit(&protocol.AuditRecord{Action: protocol.ActionVoted, Node: in.Node, RequestID: previous, Kind: in.Kind,
		By: v.Approver, Source: cmd.Source, EventID: cmd.EventID, Trusted: cmd.Trusted, Reason: v.Reason,
		ApproverRole: in.ApproverRole, Replaces: "",
		Approval: &protocol.AuditApproval{Action: in.Action, Args: in.Args},
		Outcome:  &protocol.AuditOutcome{Status: Waiting, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind}})
	t.interrupted(in)
	return r.commit(ctx, t)
}

// maxSuperseded bounds the request ids of votes an approval keeps.
const maxSuperseded = 32
