package engine

import (
	"encoding/json"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// receipt signs r, the receipt of the transition's decision, with the
// deployment's audit key, filling what every receipt states: the flow and
// run, the request (the one the transition settled, unless r names it),
// how the approver was authenticated, when, and until when.
func (t *txn) receipt(r protocol.Receipt) string {
	r.Flow, r.Run = t.cp.Flow, t.cp.Run
	if r.RequestID == "" && t.pending != nil {
		r.RequestID = t.pending.RequestID
	}
	if r.Approver == "" {
		r.Approver = t.caller.Name
	}
	switch {
	case r.Approver == TimeoutActor:
		r.Auth = protocol.AuthServer
	case r.Approver != "" && r.Approver == t.caller.Name:
		r.Auth = t.caller.Method
	}
	return t.r.signReceipt(r, t.now)
}

// signReceipt signs r, decided at now, with the audit key.
func (r *Runner) signReceipt(rec protocol.Receipt, now time.Time) string {
	rec.At = now
	rec.Expires = now.Add(protocol.ReceiptTTL)
	s, err := protocol.SignReceipt(r.signer.pub.ID, r.signer.priv, rec)
	if err != nil {
		// A receipt is strings and times: it always encodes.
		return ""
	}
	return s
}

// approvalReceipt is the receipt of decision d on an approval of tool
// (on server, if any) proposed with args: the digests of the args asked
// about and, approved or edited, of the final args; who decided; the
// voters of a quorum.
func approvalReceipt(tool, server string, args json.RawMessage, d Decision) protocol.Receipt {
	r := protocol.Receipt{Kind: protocol.KindApproval, Tool: tool, Server: server, Decision: protocol.DecidedOutcome(d.Verdict),
		Approver: d.Approver, RequestID: d.RequestID}
	r.ArgsDigest, _ = protocol.RawArgsDigest(args)
	if d.Approved() {
		final, err := json.Marshal(d.Args)
		if err == nil {
			r.FinalDigest, _ = protocol.RawArgsDigest(final)
		}
	}
	seen := map[string]bool{}
	for _, v := range d.Votes {
		if !seen[v.Approver] {
			seen[v.Approver] = true
			r.Voters = append(r.Voters, v.Approver)
		}
	}
	return r
}
