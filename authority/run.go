package authority

import (
	"encoding/json"

	"github.com/interlockhq/interlock/protocol"
)

// RunOf is the authority's view of a checkpoint: an ask's or a tool
// call's is private, readable by whoever asked and whoever may (or
// could) decide it.
func RunOf(cp protocol.Checkpoint) Run {
	r := Run{Flow: cp.Flow, ID: cp.Run, Status: cp.Status, StartedBy: cp.StartedBy, Pending: PendingOf(cp.Interrupt)}
	switch cp.Flow {
	case protocol.AskFlow:
		var s struct {
			Ask protocol.AskRequest `json:"ask"`
		}
		r.Private = true
		if json.Unmarshal(cp.State, &s) == nil {
			in := s.Ask.Interrupt
			r.DeciderRoles, r.DeciderPeople = deciders(in.ApproverRole, in.Quorum, in.Assignees)
		}
	case protocol.GateFlow:
		var s struct {
			Rule struct {
				ApproverRole string           `json:"approverRole"`
				Assignees    []string         `json:"assignees"`
				Quorum       *protocol.Quorum `json:"quorum"`
			} `json:"rule"`
		}
		r.Private = true
		if json.Unmarshal(cp.State, &s) == nil {
			r.DeciderRoles, r.DeciderPeople = deciders(s.Rule.ApproverRole, s.Rule.Quorum, s.Rule.Assignees)
		}
	}
	if p := r.Pending; p != nil {
		roles, people := deciders(p.ApproverRole, p.Quorum, p.Assignees)
		r.DeciderRoles, r.DeciderPeople = union(r.DeciderRoles, roles), union(r.DeciderPeople, people)
	}
	return r
}

// deciders are the roles and people an approval names.
func deciders(role string, q *protocol.Quorum, assignees []string) (roles, people []string) {
	return protocol.DeciderRoles(role, q), append([]string(nil), assignees...)
}

func union(a, b []string) []string {
	for _, s := range b {
		found := false
		for _, t := range a {
			found = found || s == t
		}
		if !found {
			a = append(a, s)
		}
	}
	return a
}

// EntryOf is the authority's view of a run as the pending index holds
// it: enough to decide who may see it in a queue, and who may act on it.
func EntryOf(p protocol.Pending) Run {
	return Run{Flow: p.Flow, ID: p.Run, Status: protocol.StatusWaiting, StartedBy: p.StartedBy,
		Private: p.Flow == protocol.AskFlow || p.Flow == protocol.GateFlow,
		Pending: &Pending{Kind: p.Kind, RequestID: p.RequestID, ApproverRole: p.ApproverRole, Assignees: p.Assignees,
			ClaimedBy: p.ClaimedBy, Requester: p.Requester, Quorum: p.Quorum, Action: p.Action}}
}

// FinishedOf is the authority's view of a run as the finished-runs index
// holds it: an ask's or a tool call's is private, readable by whoever
// asked, whoever held the role it waited on last, and the read roles.
func FinishedOf(f protocol.Finished) Run {
	r := Run{Flow: f.Flow, ID: f.Run, Status: f.Status, StartedBy: f.StartedBy,
		Private: f.Flow == protocol.AskFlow || f.Flow == protocol.GateFlow}
	if in := f.Interrupt; in != nil && in.ApproverRole != "" {
		r.DeciderRoles = []string{in.ApproverRole}
	}
	if d := f.Decision; d != nil && d.Approver != "" {
		r.DeciderPeople = []string{d.Approver}
	}
	return r
}
