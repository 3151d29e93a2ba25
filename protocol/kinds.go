package protocol

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Asked is a pending interrupt as far as checking an answer to it needs:
// what a surface knows of it from its interrupted event
// ([Interrupted.Asked]) or its checkpoint ([CheckpointInterrupt.Asked]),
// and what the engine holds.
type Asked struct {
	Kind string
	// Fields are a question's fields, all of them.
	Fields []string
	// Options and Multiple are a choice's.
	Options  []Option
	Multiple bool
	// Action, Decisions and Args are an approval's: the decisions it
	// allows (every verdict when empty) and its proposed args.
	Action    string
	Decisions []Verdict
	Args      json.RawMessage
	// RejectReasonRequired is set when a reject must say why.
	RejectReasonRequired bool
}

// Asked returns what checking an answer to the interrupt needs.
func (in Interrupted) Asked() Asked {
	return Asked{Kind: in.Kind, Fields: in.Fields(), Options: in.Options, Multiple: in.IsMultiple(),
		Action: in.Action, Decisions: in.Decisions, Args: in.Args, RejectReasonRequired: in.RejectReasonRequired}
}

// Asked returns what checking an answer to the interrupt needs.
func (in CheckpointInterrupt) Asked() Asked {
	return Asked{Kind: in.Kind, Fields: in.Fields, Options: in.Options, Multiple: in.Multiple,
		Action: in.Action, Decisions: in.Decisions, Args: in.Args, RejectReasonRequired: in.RejectReasonRequired}
}

// Spec is one interrupt kind as every part of Interlock handles it: the
// engine, which asks it and applies its answer, and each surface (the
// command line, the HTTP API, the inbox, Slack, the MCP server), which
// presents it and sends the answer. A surface asks [SpecOf] rather than
// switching on the kind's name.
type Spec struct {
	// Kind is the kind's name, as interrupts carry it.
	Kind string
	// Noun names an interrupt of the kind in a sentence ("a question").
	Noun string
	// RoleRestricted is set when only someone holding the interrupt's
	// approver role may answer it.
	RoleRestricted bool
	// Answers names the parts of a resume that answer the kind.
	Answers string
	check   func(a Asked, r Answer) error
	asks    func(in Interrupted) string
}

// Asks says in a few words what an interrupt of the kind asks for, as a
// list of runs shows it: "email, name", "a choice: Which topics?",
// "approval of issue_refund by supervisor". in may hold only what a
// pending index entry holds ([Pending.Interrupted]).
func (s Spec) Asks(in Interrupted) string { return s.asks(in) }

// Answer is the part of a resume that answers the interrupt, the part
// each kind checks.
type Answer struct {
	Answers  map[string]json.RawMessage
	Selected []string
	Decision string
	Edits    map[string]json.RawMessage
	// Reason is why, which a reject must say where the approval
	// requires it.
	Reason string
	// Message is a respond's answer.
	Message string
}

// Answer returns the part of the resume that answers the interrupt.
func (r Resume) Answer() Answer {
	return Answer{Answers: r.Answers, Selected: r.Selected, Decision: r.Decision, Edits: r.Edits, Reason: r.Reason, Message: r.Message}
}

// Check reports what is wrong with the shape of r as an answer to a: the
// parts of another kind's answer, or an answer the kind does not take. The
// engine refuses such a resume invalid_answer, with the same words; a
// surface checks before it sends. What the shape cannot tell (whether an
// answer fits the run's state, what a validator says) only the engine
// checks.
func (s Spec) Check(a Asked, r Answer) error { return s.check(a, r) }

// specs are the kinds, in the order of docs/protocol.md §3.
var specs = []Spec{
	{Kind: KindQuestion, Noun: "a question", Answers: "answers", check: checkQuestion, asks: asksQuestion},
	{Kind: KindChoice, Noun: "a choice", Answers: "selected", check: checkChoice, asks: asksChoice},
	{Kind: KindApproval, Noun: "an approval", RoleRestricted: true, Answers: "decision (and edits, reason)", check: checkApproval, asks: asksApproval},
}

// SpecOf returns the spec of an interrupt kind, and false for an unknown
// kind.
func SpecOf(kind string) (Spec, bool) {
	for _, s := range specs {
		if s.Kind == kind {
			return s, true
		}
	}
	return Spec{}, false
}

// Kinds returns the names of every interrupt kind.
func Kinds() []string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Kind
	}
	return names
}

// KindsText lists the kinds in words: "question, choice or approval".
func KindsText() string {
	ks := Kinds()
	if len(ks) == 1 {
		return ks[0]
	}
	return strings.Join(ks[:len(ks)-1], ", ") + " or " + ks[len(ks)-1]
}

// RoleRestricted reports whether only someone holding an interrupt's
// approver role may answer an interrupt of kind.
func RoleRestricted(kind string) bool {
	s, ok := SpecOf(kind)
	return ok && s.RoleRestricted
}

func asksQuestion(in Interrupted) string {
	if len(in.Questions) == 0 {
		return "an answer"
	}
	return strings.Join(in.Fields(), ", ")
}

func asksChoice(in Interrupted) string {
	if in.Question == "" {
		return "a choice"
	}
	return "a choice: " + in.Question
}

func asksApproval(in Interrupted) string {
	s := "approval of " + in.Action
	if in.ApproverRole != "" {
		s += " by " + in.ApproverRole
	}
	return s
}

func checkQuestion(a Asked, r Answer) error {
	fields := strings.Join(a.Fields, ", ")
	if len(r.Selected) > 0 || r.Decision != "" {
		return fmt.Errorf("this interrupt asks questions; send answers for %s", fields)
	}
	if len(r.Answers) == 0 {
		return fmt.Errorf("answers is empty; answer one or more of %s", fields)
	}
	for _, field := range sortedKeys(r.Answers) {
		if !slices.Contains(a.Fields, field) {
			return fmt.Errorf("%q is not asked by this interrupt; it asks for %s", Truncate(field, 64), fields)
		}
		if !json.Valid(r.Answers[field]) {
			return fmt.Errorf("answer for %s is not valid JSON", field)
		}
	}
	return nil
}

func checkChoice(a Asked, r Answer) error {
	if len(r.Answers) > 0 || r.Decision != "" {
		return fmt.Errorf("this interrupt is a choice; send selected with %s", optionList(a))
	}
	ids := r.Selected
	if len(ids) == 0 {
		return fmt.Errorf("nothing selected; choose %s", optionList(a))
	}
	if !a.Multiple && len(ids) > 1 {
		return fmt.Errorf("%d options selected but this choice takes one; choose one of %s", len(ids), optionList(a))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			return fmt.Errorf("option %q selected twice", id)
		}
		seen[id] = true
		if !slices.ContainsFunc(a.Options, func(o Option) bool { return o.ID == id }) {
			return fmt.Errorf("%q is not an option; choose %s", Truncate(id, 64), optionList(a))
		}
	}
	return nil
}

// optionList says which options a choice takes.
func optionList(a Asked) string {
	ids := make([]string, len(a.Options))
	for i, o := range a.Options {
		ids[i] = o.ID
	}
	if a.Multiple {
		return "one or more of " + strings.Join(ids, ", ")
	}
	return "one of " + strings.Join(ids, ", ")
}

func checkApproval(a Asked, r Answer) error {
	allowed := a.Decisions
	if len(allowed) == 0 {
		allowed = Verdicts()
	}
	if len(r.Answers) > 0 || len(r.Selected) > 0 {
		return fmt.Errorf("this interrupt is an approval of %s; send decision (%s)", a.Action, VerdictList(allowed))
	}
	v := Verdict(r.Decision)
	if v == "" {
		return fmt.Errorf("decision is missing; send one of %s", VerdictList(allowed))
	}
	if !slices.Contains(allowed, v) {
		return fmt.Errorf("decision %q is not allowed here; send one of %s", Truncate(string(v), 32), VerdictList(allowed))
	}
	if v != VerdictEdit && len(r.Edits) > 0 {
		return fmt.Errorf("edits are taken only with decision edit; send decision edit, or leave edits out to %s", v)
	}
	if v == VerdictReject && a.RejectReasonRequired && strings.TrimSpace(r.Reason) == "" {
		return fmt.Errorf("a reject of %s needs a reason: send reason, saying why", a.Action)
	}
	if v == VerdictRespond && strings.TrimSpace(r.Message) == "" {
		return fmt.Errorf("decision respond needs a message: send message, the answer for whoever asked for %s", a.Action)
	}
	if v != VerdictRespond && r.Message != "" {
		return fmt.Errorf("message is taken only with decision respond; send decision respond, or leave message out to %s", v)
	}
	if v != VerdictEdit {
		return nil
	}
	var proposed map[string]json.RawMessage
	if err := json.Unmarshal(a.Args, &proposed); err != nil {
		return fmt.Errorf("the approval's args do not decode: %w", err)
	}
	if len(r.Edits) == 0 {
		return fmt.Errorf("decision edit needs edits: an object of the args to change (%s)", strings.Join(sortedKeys(proposed), ", "))
	}
	for _, k := range sortedKeys(r.Edits) {
		if _, ok := proposed[k]; !ok {
			return fmt.Errorf("edits name %q, which is not an arg of %s; edit one of %s", Truncate(k, 64), a.Action, strings.Join(sortedKeys(proposed), ", "))
		}
		if !json.Valid(r.Edits[k]) {
			return fmt.Errorf("edit of %s is not valid JSON", k)
		}
	}
	return nil
}

// VerdictList lists verdicts, comma-separated.
func VerdictList(vs []Verdict) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
