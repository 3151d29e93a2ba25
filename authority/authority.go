package authority

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// Action is what a caller asks to do to a run.
type Action string

// Actions the authority decides.
const (
	// Start a run, ask the tool-call gate, or ask people.
	Start Action = "start"
	// Read a run: its checkpoint, its events, its conversation.
	Read Action = "read"
	// Decide the pending interrupt: answer a question or a choice, or
	// approve, edit, reject or respond to an approval. With a quorum, an
	// approve or an edit is a vote.
	Decide Action = "decide"
	// Claim, Release and Delegate a pending approval.
	Claim    Action = "claim"
	Release  Action = "release"
	Delegate Action = "delegate"
	// Cancel a waiting run.
	Cancel Action = "cancel"
	// MintLink makes a callback URL that settles the pending interrupt as
	// the caller.
	MintLink Action = "mint_link"
	// Reannounce the pending interrupt with a fresh token.
	Reannounce Action = "reannounce"
	// Consume takes the approval of an approved tool call, once, to run
	// it.
	Consume Action = "consume"
)

// Actions returns every action, in the order docs list them.
func Actions() []Action {
	return []Action{Start, Read, Decide, Claim, Release, Delegate, Cancel, MintLink, Reannounce, Consume}
}

// Caller is who asks, as the surface that received the request knows
// them.
type Caller struct {
	// Name is the caller's identity: a person or an agent of the
	// directory, the local user, or a NATS sender (protocol.SenderPrefix).
	Name string
	// Method is how the caller was authenticated.
	Method protocol.AuthMethod
	// Roles are the approver roles the caller holds: a person's from the
	// directory, a role subject's role.
	Roles []string
	// AllRoles is set for the local user (no directory is in force), who
	// holds every role.
	AllRoles bool
	// Named is a name the sender typed (a resume's approver, a start's
	// by) where it is not the identity: a label kept for the record.
	Named string
	// For are the people who are away and named the caller their
	// delegate: the caller decides their assignments and claims, and
	// holds the roles they delegated ([Authority.Widen]).
	For []string
}

// Local is the caller of a deployment without a directory of people: the
// local user on loopback, who holds every role.
func Local(name string) Caller {
	return Caller{Name: name, Method: protocol.AuthLocal, AllRoles: true}
}

// Protocol is the caller as the wire carries it: every role, for the
// local user, as protocol.AllRoles.
func (c Caller) Protocol() protocol.Caller {
	if c.AllRoles {
		return protocol.Caller{Name: c.Name, Method: c.Method, Roles: []string{protocol.AllRoles}}
	}
	return protocol.Caller{Name: c.Name, Method: c.Method, Roles: c.Roles}
}

// Vouched is the caller a service of the deployment vouched for, as the
// wire carried it: protocol.AllRoles holds every role only where callers
// are not identified (the local user's), and none elsewhere.
func (a *Authority) Vouched(p protocol.Caller) Caller {
	c := Caller{Name: p.Name, Method: p.Method, Roles: p.Roles}
	if c.Method == "" {
		c.Method = protocol.AuthService
	}
	if slices.Contains(p.Roles, protocol.AllRoles) {
		c.Roles = slices.DeleteFunc(slices.Clone(p.Roles), func(r string) bool { return r == protocol.AllRoles })
		c.AllRoles = !a.Identified()
	}
	return a.Widen(c)
}

// rolesKnown reports whether the caller's roles were authenticated: a
// vouched caller's, or a role subject's.
func (c Caller) rolesKnown() bool {
	return c.AllRoles || c.Method.Vouched() || c.Method == protocol.AuthRoleSubject
}

// holds reports whether the caller holds role.
func (c Caller) holds(role string) bool {
	return role != "" && (c.AllRoles || slices.Contains(c.Roles, role))
}

// RolesFor are the roles the caller acts in on p: the caller's own, or
// for the local user, who holds every role, those p names (its approver
// role and its quorum's roles), so that a vouch names what the decision
// takes.
func (c Caller) RolesFor(p *Pending) []string {
	if !c.AllRoles {
		return c.Roles
	}
	if p == nil {
		return nil
	}
	return protocol.DeciderRoles(p.ApproverRole, p.Quorum)
}

// Pending is what the authority needs of a pending interrupt.
type Pending struct {
	Kind, RequestID    string
	ApproverRole       string
	Assignees          []string
	ClaimedBy          string
	Requester          string
	Quorum             *protocol.Quorum
	SeparationOfDuties bool
	Votes              []protocol.Vote
	// Action names what an approval proposes, for messages.
	Action string
}

// PendingOf is the authority's view of a checkpoint's pending interrupt;
// nil for none.
func PendingOf(in *protocol.CheckpointInterrupt) *Pending {
	if in == nil {
		return nil
	}
	return &Pending{Kind: in.Kind, RequestID: in.RequestID, ApproverRole: in.ApproverRole, Assignees: in.Assignees,
		ClaimedBy: in.ClaimedBy, Requester: in.Requester, Quorum: in.Quorum, SeparationOfDuties: in.SeparationOfDuties,
		Votes: in.Votes, Action: in.Action}
}

// restricted reports whether only some people may decide p.
func (p *Pending) restricted() bool {
	return p != nil && protocol.RoleRestricted(p.Kind)
}

// quorumRoles are the roles of p's quorum.
func (p *Pending) quorumRoles() []string {
	if p.Quorum == nil {
		return nil
	}
	out := make([]string, len(p.Quorum.Roles))
	for i, rc := range p.Quorum.Roles {
		out[i] = rc.Role
	}
	return out
}

// Run is what the authority needs of a run.
type Run struct {
	Flow, ID string
	// Status is the run's status.
	Status protocol.Status
	// StartedBy is who started the run: for the gate and asks, who
	// asked.
	StartedBy string
	// Pending is the interrupt the run waits on, if any.
	Pending *Pending
	// Private is set for a run whose contents are for its starter and the
	// people who may decide it alone (an ask, a tool call): its
	// conversation, context and callback URL.
	Private bool
	// Deciders are the roles and people who may decide the run's
	// approval, kept once it settled (a private run's readers).
	DeciderRoles, DeciderPeople []string
}

// Refusal is why the authority refuses: a code of the protocol and a
// message that says what would be needed.
type Refusal struct {
	Code   protocol.Code
	Action Action
	// Reason says why, for the refused event, the audit and logs.
	Reason string
	// Say says it to the person refused, in the second person, for a
	// surface that shows it to them (Slack, the inbox); Reason when
	// empty.
	Say string
}

func (r *Refusal) Error() string { return r.Reason }

// Tell is what to tell the person refused.
func (r *Refusal) Tell() string {
	if r.Say != "" {
		return r.Say
	}
	return r.Reason
}

func forbidden(a Action, format string, args ...any) *Refusal {
	return &Refusal{Code: protocol.CodeForbidden, Action: a, Reason: fmt.Sprintf(format, args...)}
}

// saying sets what to tell the person refused.
func (r *Refusal) saying(format string, args ...any) *Refusal {
	r.Say = fmt.Sprintf(format, args...)
	return r
}

// Config configures an [Authority].
type Config struct {
	// Identified, if set, reports whether callers are identified: a
	// directory of people is in force. Then a name a NATS sender types is
	// a label, never an identity, and an approval is decided only by a
	// caller a service vouches for or, with RoleSubjects, on a role
	// subject. Defaults to false (everyone is the local user).
	Identified func() bool
	// RoleSubjects is set when the NATS server authenticates its clients
	// and its permissions grant the role subjects: a sender on
	// <prefix>.in.<flow>.resume.<role> holds the role. Callers are then
	// identified, directory or not.
	RoleSubjects bool
	// CancelRoles are roles that may cancel any waiting run, beside its
	// starter and those who may decide it.
	CancelRoles []string
	// ReadRoles are roles that may read any run, a private one included
	// (auditors).
	ReadRoles []string
	// Absences, if set, returns the absences in force: a person away who
	// named a delegate (see [Authority.Widen]).
	Absences func() []Absence
	// RolesOf, if set, returns the roles a person of the directory holds
	// now: a delegate holds only those of the roles delegated that the
	// person still holds.
	RolesOf func(person string) ([]string, bool)
}

// Absence is a person away who named a delegate: from From to To, the
// delegate decides the person's assignments and claims, and holds Roles
// (every role of the person's when none is named), as the person still
// holds them.
type Absence struct {
	Person, Delegate string
	Roles            []string
	From, To         time.Time
}

// Active reports whether the absence is in force at now.
func (ab Absence) Active(now time.Time) bool {
	return !now.Before(ab.From) && now.Before(ab.To)
}

// Widen returns c as the delegate of the people away who named them, in
// force now: holding the roles they delegated (as they still hold them)
// and acting for them on their assignments and claims ([Caller.For]).
// Only a caller the deployment authenticates is widened, where callers
// are identified; the local user holds every role already. Never a
// request to end an absence ([protocol.AbsenceAction]): that stays the
// person's own.
func (a *Authority) Widen(c Caller) Caller {
	if a == nil || a.cfg.Absences == nil || a.cfg.RolesOf == nil || !a.Identified() || c.AllRoles || !c.Method.Vouched() || c.Name == "" {
		return c
	}
	now := time.Now()
	for _, ab := range a.cfg.Absences() {
		if ab.Delegate != c.Name || ab.Person == c.Name || !ab.Active(now) || slices.Contains(c.For, ab.Person) {
			continue
		}
		held, ok := a.cfg.RolesOf(ab.Person)
		if !ok {
			continue
		}
		c.Roles = slices.Clone(c.Roles)
		for _, r := range held {
			if (len(ab.Roles) == 0 || slices.Contains(ab.Roles, r)) && !slices.Contains(c.Roles, r) {
				c.Roles = append(c.Roles, r)
			}
		}
		c.For = append(slices.Clone(c.For), ab.Person)
	}
	return c
}

// actsFor reports whether c decides name's requests: c is name, or name
// is away and named c (p not being the end of an absence).
func (c Caller) actsFor(name string, p *Pending) bool {
	return name != "" && (c.Name == name || p.Action != protocol.AbsenceAction && slices.Contains(c.For, name))
}

// Authority decides what callers may do. It is safe for concurrent use;
// a nil *Authority is one with the zero Config.
type Authority struct {
	cfg Config
}

// New returns an authority with cfg.
func New(cfg Config) *Authority { return &Authority{cfg: cfg} }

// Identified reports whether callers are identified: a directory of
// people is in force, or the NATS server authenticates the role subjects.
func (a *Authority) Identified() bool {
	if a == nil {
		return false
	}
	return a.cfg.RoleSubjects || (a.cfg.Identified != nil && a.cfg.Identified())
}

// RoleSubjects reports whether senders on a role subject hold its role.
func (a *Authority) RoleSubjects() bool { return a != nil && a.cfg.RoleSubjects }

// NATSCaller is the caller of a command NATS carried and no service
// vouched for: the sender on role's subject ("" for a subject that names
// none), which typed named (a resume's approver, a start's by) and source.
// Where callers are identified, the sender is the identity (nats:<role>, or
// nats:<source>) and named a label; elsewhere named (else source) is taken
// at its word, as the local user's. A role subject's role counts only where
// the NATS server authenticates its senders, or nobody is identified.
func (a *Authority) NATSCaller(role, named, source string) Caller {
	if !a.Identified() {
		c := Caller{Name: named, Method: protocol.AuthNATS}
		if c.Name == "" {
			c.Name = source
		}
		if role != "" {
			c.Method, c.Roles = protocol.AuthRoleSubject, []string{role}
		}
		return c
	}
	c := Caller{Name: protocol.SenderPrefix + source, Method: protocol.AuthNATS, Named: named}
	if role != "" && a.RoleSubjects() {
		c.Name, c.Method, c.Roles = protocol.SenderPrefix+role, protocol.AuthRoleSubject, []string{role}
	}
	return c
}

// May decides whether c may do act to r: nil, or a *Refusal that says
// why not. Decide is checked for an approve; use [Authority.MayDecide]
// with the verdict.
func (a *Authority) May(c Caller, act Action, r Run) error {
	switch act {
	case Start:
		return nil
	case Read:
		return a.MayRead(c, r)
	case Decide:
		return a.MayDecide(c, r, protocol.VerdictApprove)
	case Claim, Release, Delegate:
		return a.MayAssign(c, act, r)
	case Cancel:
		return a.MayCancel(c, r)
	case MintLink:
		return a.MayMintLink(c, r)
	case Reannounce:
		return a.mayAct(c, act, r)
	case Consume:
		return a.MayConsume(c, r)
	}
	return &Refusal{Code: protocol.CodeInvalidPayload, Action: act, Reason: fmt.Sprintf("%q is not an action", act)}
}

// MayDecide decides whether c may answer r's pending interrupt with
// verdict (an approval's; "" for a question, a choice, or any decision
// when a surface asks whether to show the forms): anyone may
// answer what no role restricts; an approval only its claimant once
// claimed, else an assignee or a holder of its role or of a role of its
// quorum; where callers are identified, only with authenticated roles. A
// vote (approve or edit under a quorum) is refused to the run's starter
// and requester under separation of duties, and to whoever voted.
func (a *Authority) MayDecide(c Caller, r Run, verdict protocol.Verdict) error {
	p := r.Pending
	if p == nil || !p.restricted() {
		return nil
	}
	if err := a.mayDecide(c, Decide, p); err != nil {
		return err
	}
	if p.Quorum == nil || (verdict != protocol.VerdictApprove && verdict != protocol.VerdictEdit) {
		return nil
	}
	who := c.Name
	if p.SeparationOfDuties && p.Requester != "" && who == p.Requester {
		return forbidden(Decide, "%s asked for %s and may not vote on it: the quorum separates duties", who, p.Action)
	}
	if p.SeparationOfDuties && r.StartedBy != "" && who == r.StartedBy {
		return forbidden(Decide, "%s started run %s and may not vote on its %s: the quorum separates duties", who, r.ID, p.Action)
	}
	// With separation of duties each approver votes once; without, an
	// approver may vote again only for other args (an edit), and counts
	// once for any args.
	for _, v := range p.Votes {
		if v.Approver == who && (p.SeparationOfDuties || verdict == protocol.VerdictApprove) {
			return forbidden(Decide, "%s voted on %s already (%s, at %s); each approver votes once", who, p.Action, v.Verdict, v.At.Format(time.RFC3339))
		}
	}
	return nil
}

// MayAssign decides whether c may claim, release or delegate r's pending
// approval: whoever may decide it, known as a person a service vouches
// for where callers are identified.
func (a *Authority) MayAssign(c Caller, act Action, r Run) error {
	p := r.Pending
	if p == nil {
		return &Refusal{Code: protocol.CodeNotWaiting, Action: act, Reason: fmt.Sprintf("run %s is not waiting on an approval; there is nothing to %s", r.ID, act)}
	}
	if !p.restricted() {
		return &Refusal{Code: protocol.CodeInvalidPayload, Action: act, Reason: fmt.Sprintf("run %s waits on a %s, which anyone may answer; only an approval is claimed, released or delegated", r.ID, p.Kind)}
	}
	if a.Identified() && !c.Method.Vouched() {
		// An assign has no role subject: a name without a vouch is
		// anyone's to type.
		return forbidden(act, "where callers are identified, an approval is claimed, released or delegated only by a person a service of the deployment vouches for: send it through the HTTP API (POST /v1/runs/%s/%s/assign), the inbox or Slack", r.Flow, r.ID)
	}
	return a.mayDecide(c, act, p)
}

// MayCancel decides whether c may cancel r: where callers are
// identified, a run that waits on an approval only some may decide is
// cancelled by its starter, by whoever may decide it, or by a holder of a
// cancel role; any other by anyone who may reach it.
func (a *Authority) MayCancel(c Caller, r Run) error {
	if !a.Identified() || !r.Pending.restricted() || a.mayDecide(c, Cancel, r.Pending) == nil {
		return nil
	}
	if c.AllRoles || (r.StartedBy != "" && c.Name == r.StartedBy) {
		return nil
	}
	for _, role := range a.cancelRoles() {
		if c.holds(role) {
			return nil
		}
	}
	extra := ""
	if roles := a.cancelRoles(); len(roles) > 0 {
		extra = ", or holding role " + strings.Join(roles, " or ")
	}
	return forbidden(Cancel, "run %s waits on %s, which %s may not decide: only whoever started it (%s), whoever may decide it%s may cancel it",
		r.ID, describe(r.Pending), nameOrSender(c.Name), nameOrSender(r.StartedBy), extra)
}

func (a *Authority) cancelRoles() []string {
	if a == nil {
		return nil
	}
	return a.cfg.CancelRoles
}

// MayReadAll decides whether c may read every run, and what the team
// did with them (the inbox's team page): where callers are not
// identified, anyone; else the local user and the holders of a read
// role (auditors, operators).
func (a *Authority) MayReadAll(c Caller) error {
	if !a.Identified() || c.AllRoles {
		return nil
	}
	if a != nil {
		for _, role := range a.cfg.ReadRoles {
			if c.holds(role) {
				return nil
			}
		}
	}
	return &Refusal{Code: protocol.CodeForbidden, Action: Read,
		Reason: "reading every run takes a read role (serve --read-role), which " + c.Name + " does not hold",
		Say:    "Reading every run takes a read role (serve --read-role), which you do not hold."}
}

// MayRead decides whether c may read r: where callers are identified, a
// private run (an ask, a tool call) only by whoever started it, whoever
// may decide it (or could, once settled), and holders of a read role; any
// other by any caller.
func (a *Authority) MayRead(c Caller, r Run) error {
	if !a.Identified() || !r.Private || c.AllRoles || (r.StartedBy != "" && c.Name == r.StartedBy) {
		return nil
	}
	if a != nil {
		for _, role := range a.cfg.ReadRoles {
			if c.holds(role) {
				return nil
			}
		}
	}
	if p := r.Pending; p != nil {
		if p.restricted() && a.mayDecide(c, Read, p) == nil {
			return nil
		}
		if !p.restricted() && len(r.DeciderRoles) == 0 && len(r.DeciderPeople) == 0 {
			return nil
		}
	}
	if slices.Contains(r.DeciderPeople, c.Name) && c.rolesKnown() {
		return nil
	}
	for _, role := range r.DeciderRoles {
		if c.rolesKnown() && c.holds(role) {
			return nil
		}
	}
	return forbidden(Read, "%s of %s is for whoever asked for it and the people who may answer it; %s is neither", r.Flow, r.ID, nameOrSender(c.Name))
}

// MayConsume decides whether c may take the approval of r, an approved
// tool call, to run it: where callers are identified, only whoever
// requested the call (its starter), so that no one else spends the
// approval it waits to run on.
func (a *Authority) MayConsume(c Caller, r Run) error {
	if !a.Identified() || r.StartedBy == "" || c.Name == r.StartedBy {
		return nil
	}
	return forbidden(Consume, "call %s was requested by %s: only its requester takes its approval, not %s", r.ID, r.StartedBy, nameOrSender(c.Name)).
		saying("this call was requested by %s: only they take its approval", r.StartedBy)
}

// MayMintLink decides whether c may make a callback URL that settles r's
// pending interrupt as c: whoever may decide it.
func (a *Authority) MayMintLink(c Caller, r Run) error {
	if r.Pending == nil {
		return &Refusal{Code: protocol.CodeNotWaiting, Action: MintLink, Reason: fmt.Sprintf("run %s is %s, not waiting on an interrupt", r.ID, r.Status)}
	}
	return a.mayAct(c, MintLink, r)
}

// mayAct decides an action open to whoever may decide r's interrupt.
func (a *Authority) mayAct(c Caller, act Action, r Run) error {
	if !r.Pending.restricted() {
		return nil
	}
	return a.mayDecide(c, act, r.Pending)
}

// mayDecide says why c may not decide p (an approval), or nil when they
// may: its claimant alone once it is claimed; otherwise an assignee, or
// someone holding its role or a role of its quorum. Where callers are not
// identified, a name is taken at its word.
func (a *Authority) mayDecide(c Caller, act Action, p *Pending) error {
	known, required := c.rolesKnown(), a.Identified()
	who := c.Name
	if required && !c.Method.Vouched() && c.Method != protocol.AuthRoleSubject {
		return forbidden(act, "%s is decided only by someone the deployment authenticates: through the HTTP API or the inbox with your token, Slack, or a decision link; over NATS only on the subject of its role, %s, where the NATS server authenticates its users",
			describe(p), roleSubject(p))
	}
	if p.ClaimedBy != "" {
		if !c.actsFor(p.ClaimedBy, p) {
			return forbidden(act, "request %s is claimed by %s: only they may decide it, until they release it", p.RequestID, p.ClaimedBy).
				saying("This approval is claimed by %s: only they may decide it, until they release it.", p.ClaimedBy)
		}
		if !known && required {
			return forbidden(act, "request %s is claimed by %s, and where callers are identified a claimant is known only through a service that vouches for them (the HTTP API, the inbox, the Slack bridge)", p.RequestID, p.ClaimedBy)
		}
		return nil
	}
	if c.AllRoles {
		return nil
	}
	if slices.ContainsFunc(p.Assignees, func(name string) bool { return c.actsFor(name, p) }) && (known || !required) {
		return nil
	}
	quorumRoles := p.quorumRoles()
	if p.ApproverRole == "" && len(p.Assignees) == 0 && len(quorumRoles) == 0 {
		return nil
	}
	switch {
	case known && c.holds(p.ApproverRole):
		return nil
	case known && slices.ContainsFunc(quorumRoles, c.holds):
		return nil
	case !known && !required && len(p.Assignees) == 0 && (p.ApproverRole != "" || len(quorumRoles) == 0):
		return nil
	}
	who = nameOrSender(who)
	switch {
	case len(p.Assignees) > 0 && p.ApproverRole != "":
		return forbidden(act, "deciding this approval takes being one of %s or holding approver role %s; %s is neither", strings.Join(p.Assignees, ", "), p.ApproverRole, who).
			saying("Only %s, or someone holding the %s role, may decide this approval.", strings.Join(p.Assignees, ", "), p.ApproverRole)
	case len(p.Assignees) > 0:
		return forbidden(act, "deciding this approval takes being one of %s; %s is not", strings.Join(p.Assignees, ", "), who).
			saying("Only %s may decide this approval.", strings.Join(p.Assignees, ", "))
	case p.ApproverRole == "" && len(quorumRoles) > 0:
		if !known {
			return forbidden(act, "voting on this approval takes one of the roles %s: send it on <prefix>.in.<flow>.resume.<role>, or through the HTTP API", strings.Join(quorumRoles, ", "))
		}
		return forbidden(act, "voting on this approval takes one of the roles %s; %s came with %s", strings.Join(quorumRoles, ", "), who, roleList(c.Roles)).
			saying("Only someone holding one of the roles %s may vote on this approval.", strings.Join(quorumRoles, ", "))
	case !known:
		return forbidden(act, "approval decisions are taken only with an approver role: send it on <prefix>.in.<flow>.resume.%s, or through the HTTP API", p.ApproverRole)
	}
	return forbidden(act, "deciding this approval takes approver role %s; %s came with %s", p.ApproverRole, who, roleList(c.Roles)).
		saying("You are not %s %s: only someone holding the %s role may decide this approval.", article(p.ApproverRole), p.ApproverRole, p.ApproverRole)
}

// article is the indefinite article of a role's name.
func article(role string) string {
	if role != "" && strings.ContainsRune("aeiou", rune(role[0])) {
		return "an"
	}
	return "a"
}

// describe names a pending interrupt in a refusal.
func describe(p *Pending) string {
	if p.Action != "" {
		return "the approval of " + p.Action
	}
	return "this " + p.Kind
}

// roleSubject names the subject a role's sender decides p on.
func roleSubject(p *Pending) string {
	roles := p.quorumRoles()
	if p.ApproverRole != "" {
		roles = append([]string{p.ApproverRole}, roles...)
	}
	if len(roles) == 0 {
		return "<prefix>.in.<flow>.resume.<role>"
	}
	return "<prefix>.in.<flow>.resume." + strings.Join(roles, " or .resume.")
}

// nameOrSender names an empty name.
func nameOrSender(who string) string {
	if who == "" {
		return "the sender"
	}
	return who
}

func roleList(roles []string) string {
	if len(roles) == 0 {
		return "no role"
	}
	return "role " + strings.Join(roles, ", ")
}
