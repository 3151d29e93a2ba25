package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// VerdictRespond neither approves nor rejects: the action does not run,
// and the node (or the tool gate's decided event) gets the person's
// message. An approval takes it only when its decisions list it.
const VerdictRespond Verdict = "respond"

// AllVerdicts returns every verdict an approval may list.
func AllVerdicts() []Verdict {
	return []Verdict{VerdictApprove, VerdictEdit, VerdictReject, VerdictRespond}
}

// Quorum is how many people must approve an approval before its action
// runs: Required distinct approvers, or for each of Roles, Count approvers
// holding Role. On the wire it is {"required": N} or a list
// [{"role": "legal", "count": 1}, ...].
type Quorum struct {
	Required int
	Roles    []RoleCount
}

// RoleCount is one role's part of a [Quorum].
type RoleCount struct {
	Role  string `json:"role"`
	Count int    `json:"count"`
}

// MarshalJSON writes a quorum as {"required": N}, or as its list of role
// requirements.
func (q Quorum) MarshalJSON() ([]byte, error) {
	if len(q.Roles) > 0 {
		return json.Marshal(q.Roles)
	}
	return json.Marshal(struct {
		Required int `json:"required"`
	}{q.Required})
}

// UnmarshalJSON reads either form.
func (q *Quorum) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var roles []RoleCount
		if err := json.Unmarshal(b, &roles); err != nil {
			return fmt.Errorf("quorum: %w", err)
		}
		*q = Quorum{Roles: roles}
		return nil
	}
	var r struct {
		Required int `json:"required"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("quorum: %w", err)
	}
	*q = Quorum{Required: r.Required}
	return nil
}

// Check reports what is wrong with a quorum's declaration.
func (q Quorum) Check() error {
	switch {
	case q.Required < 0:
		return fmt.Errorf("quorum: required %d is negative", q.Required)
	case q.Required > 0 && len(q.Roles) > 0:
		return errors.New("quorum: give required or roles, not both")
	case q.Required == 0 && len(q.Roles) == 0:
		return errors.New("quorum: give required (how many distinct approvers) or roles (how many of each role)")
	case q.Required > 32:
		return fmt.Errorf("quorum: required %d is more than 32 approvers", q.Required)
	}
	seen := map[string]bool{}
	for _, rc := range q.Roles {
		if err := CheckName("quorum role", rc.Role); err != nil {
			return err
		}
		if seen[rc.Role] {
			return fmt.Errorf("quorum: role %s is listed twice", rc.Role)
		}
		seen[rc.Role] = true
		if rc.Count < 1 || rc.Count > 32 {
			return fmt.Errorf("quorum: role %s needs a count of 1 to 32, not %d", rc.Role, rc.Count)
		}
	}
	return nil
}

// Total is how many votes the quorum takes in all.
func (q Quorum) Total() int {
	if len(q.Roles) == 0 {
		return q.Required
	}
	n := 0
	for _, rc := range q.Roles {
		n += rc.Count
	}
	return n
}

// Vote is one approver's approve or edit of an approval with a quorum. It
// is bound to the digest of the final args it approves: votes for
// different args do not add up.
type Vote struct {
	Approver string  `json:"approver"`
	Verdict  Verdict `json:"verdict"`
	// Role is the role of the quorum the vote counts for, when the quorum
	// counts roles.
	Role string `json:"role,omitempty"`
	// Digest is the canonical hash of the final args the vote approves
	// ([CanonicalHash]).
	Digest string `json:"digest"`
	// Edits are the voter's edits, for an edit.
	Edits  map[string]any `json:"edits,omitempty"`
	Reason string         `json:"reason,omitempty"`
	At     time.Time      `json:"at"`
}

// Met reports whether votes meet the quorum for the args of digest: a
// distinct approver for each vote it takes, each counting for one role of
// the quorum's that they voted as.
func (q Quorum) Met(votes []Vote, digest string) bool {
	by := map[string]bool{}
	per := map[string]int{}
	for _, v := range votes {
		if v.Digest != digest || by[v.Approver] {
			continue
		}
		by[v.Approver] = true
		per[v.Role]++
	}
	if len(q.Roles) == 0 {
		return len(by) >= q.Required
	}
	for _, rc := range q.Roles {
		if per[rc.Role] < rc.Count {
			return false
		}
	}
	return true
}

// Assign is the data of an assign command (io.interlock.run.assign, on
// <prefix>.in.<flow>.assign): a claim, a release or a delegation of a
// pending approval.
type Assign struct {
	// RequestID names the pending request.
	RequestID string `json:"requestId"`
	// Op is claim, release or delegate.
	Op string `json:"op"`
	// To is whom a delegation hands the approval to: a person, or a role
	// written role:<name>.
	To string `json:"to,omitempty"`
	// By names who asks (the caller a service vouched for, over HTTP).
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Assign operations.
const (
	AssignClaim    = "claim"
	AssignRelease  = "release"
	AssignDelegate = "delegate"
)

// RolePrefix marks a role in [Assign.To]: "role:finance_lead".
const RolePrefix = "role:"

// Assigned is the data of an assigned event: who may now decide a pending
// approval, after a claim, a release or a delegation.
type Assigned struct {
	Flow      string `json:"flow"`
	Run       string `json:"run"`
	RequestID string `json:"requestId"`
	// Op is the operation, By who did it and Reason why.
	Op     string `json:"op"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Assignees, ClaimedBy and ApproverRole are the approval's, now.
	Assignees    []string        `json:"assignees,omitempty"`
	ClaimedBy    string          `json:"claimedBy,omitempty"`
	ApproverRole string          `json:"approverRole,omitempty"`
	Checkpoint   uint64          `json:"checkpoint"`
	Origin       json.RawMessage `json:"origin,omitempty"`
}

// Voted is the data of a voted event: a vote that did not complete its
// approval's quorum. An interrupted event with a fresh token follows.
type Voted struct {
	Flow      string `json:"flow"`
	Run       string `json:"run"`
	RequestID string `json:"requestId"`
	// Approver cast the vote; Votes are every vote so far.
	Approver   string          `json:"approver"`
	Votes      []Vote          `json:"votes"`
	Required   int             `json:"required"`
	Checkpoint uint64          `json:"checkpoint"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// Reminded is the data of a reminded event: a pending interrupt's
// reminder fell due, for every channel to remind the people it reaches.
type Reminded struct {
	Flow         string          `json:"flow"`
	Run          string          `json:"run"`
	RequestID    string          `json:"requestId"`
	Kind         string          `json:"kind"`
	ExpiresAt    *time.Time      `json:"expiresAt,omitempty"`
	ApproverRole string          `json:"approverRole,omitempty"`
	Assignees    []string        `json:"assignees,omitempty"`
	ClaimedBy    string          `json:"claimedBy,omitempty"`
	Checkpoint   uint64          `json:"checkpoint"`
	Origin       json.RawMessage `json:"origin,omitempty"`
}

// Remind is the data of a reminder the server publishes from a schedule
// the workers wrote (io.interlock.run.remind, on
// <prefix>.due.<flow>.remind): remind the people who may answer request
// RequestID, if it still waits.
type Remind struct {
	RequestID string    `json:"requestId"`
	At        time.Time `json:"at"`
	// N numbers the request's reminders from 1.
	N    int    `json:"n"`
	Flow string `json:"flow"`
	Run  string `json:"run"`
}

// DeciderRoles are the roles whose holders decide an approval of
// approverRole and quorum q: approverRole, then q's roles, each once.
func DeciderRoles(approverRole string, q *Quorum) []string {
	var roles []string
	if approverRole != "" {
		roles = append(roles, approverRole)
	}
	if q != nil {
		for _, rc := range q.Roles {
			if !slices.Contains(roles, rc.Role) {
				roles = append(roles, rc.Role)
			}
		}
	}
	return roles
}
