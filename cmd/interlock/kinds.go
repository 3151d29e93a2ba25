package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// kindView is how the command line shows one kind of interrupt and says
// how to answer it: the command line's template of the kind. Checking an
// answer is the kind's [protocol.Spec]; every kind of [protocol.Kinds]
// has a view (TestEveryInterruptKindHasAView).
type kindView struct {
	// what says in a few words what the run waits on ("an approval of
	// issue_refund for role supervisor").
	what func(in protocol.Interrupted) string
	// show prints what the interrupt asks, each line indented.
	show func(w io.Writer, in protocol.Interrupted)
	// answers returns the arguments of interlock answer that answer the
	// interrupt, one way to answer each.
	answers func(in protocol.Interrupted) []string
	// reasked reports whether next asks again what prev asked.
	reasked func(prev, next protocol.Interrupted) bool
	// ask fills an ask of the kind from the arguments of interlock ask
	// after the kind (at least one) and its flags.
	ask func(in *protocol.AskInterrupt, args []string, f askFlags) error
}

// kindViews are the views of the kinds.
var kindViews = map[string]kindView{
	protocol.KindQuestion: {what: questionWhat, show: questionShow, answers: questionAnswers, reasked: questionReasked, ask: questionAsk},
	protocol.KindChoice:   {what: choiceWhat, show: choiceShow, answers: choiceAnswers, reasked: choiceReasked, ask: choiceAsk},
	protocol.KindApproval: {what: approvalWhat, show: approvalShow, answers: approvalAnswers, reasked: approvalReasked, ask: approvalAsk},
}

// viewOf returns the view of an interrupt kind, and for a kind this
// version does not know, a view that shows its name.
func viewOf(kind string) kindView {
	if v, ok := kindViews[kind]; ok {
		return v
	}
	return kindView{
		what: func(in protocol.Interrupted) string {
			return fmt.Sprintf("a %q interrupt, which this version of interlock does not know", in.Kind)
		},
		show:    func(io.Writer, protocol.Interrupted) {},
		answers: func(protocol.Interrupted) []string { return []string{"--answers JSON"} },
		reasked: func(prev, next protocol.Interrupted) bool { return false },
	}
}

// printInterrupt shows an interrupted event: where the run waits, what it
// asks, by when, and the commands that answer it.
func printInterrupt(w io.Writer, flow string, in protocol.Interrupted) {
	fmt.Fprintf(w, "run %s of %s is waiting at %s (checkpoint %d)\n", in.Run, flow, in.Node, in.Checkpoint)
	if in.Context != "" {
		fmt.Fprintf(w, "  context: %s\n", in.Context)
	}
	v := viewOf(in.Kind)
	v.show(w, in)
	if in.ExpiresAt != nil {
		fmt.Fprintf(w, "  deadline: %s\n", deadline(*in.ExpiresAt, time.Now()))
	}
	fmt.Fprintf(w, "%s with:\n", verbOf(in.Kind))
	for _, a := range v.answers(in) {
		fmt.Fprintf(w, "  interlock answer %s %s %s\n", flow, in.Run, a)
	}
}

func questionWhat(in protocol.Interrupted) string {
	return "a question for " + strings.Join(in.Fields(), ", ")
}

func questionShow(w io.Writer, in protocol.Interrupted) {
	for _, q := range in.Questions {
		fmt.Fprintf(w, "  ? %s  (%s)\n", q.Question, q.Field)
		if len(q.Suggestions) > 0 {
			fmt.Fprintf(w, "      suggestions: %s\n", strings.Join(q.Suggestions, ", "))
		}
		if q.Context != "" {
			fmt.Fprintf(w, "      context: %s\n", q.Context)
		}
	}
}

func questionAnswers(in protocol.Interrupted) []string {
	var args []string
	for _, q := range in.Questions {
		args = append(args, q.Field+"=...")
	}
	return []string{strings.Join(args, " ")}
}

// questionReasked: a question is asked again at the same node for fields
// prev asked (a validator rejected an answer, or some are missing).
func questionReasked(prev, next protocol.Interrupted) bool {
	asked := map[string]bool{}
	for _, f := range prev.Fields() {
		asked[f] = true
	}
	for _, q := range next.Questions {
		if !asked[q.Field] {
			return false
		}
	}
	return len(next.Questions) > 0
}

func choiceWhat(in protocol.Interrupted) string {
	return fmt.Sprintf("a choice: %s", in.Question)
}

func choiceShow(w io.Writer, in protocol.Interrupted) {
	how := "choose one"
	if in.IsMultiple() {
		how = "choose one or more"
	}
	fmt.Fprintf(w, "  ? %s  (%s)\n", in.Question, how)
	for _, o := range in.Options {
		fmt.Fprintf(w, "      %-14s %s\n", o.ID, o.Label)
	}
}

func choiceAnswers(in protocol.Interrupted) []string {
	if len(in.Options) == 0 {
		return []string{"--select ID"}
	}
	return []string{"--select " + in.Options[0].ID}
}

func choiceReasked(prev, next protocol.Interrupted) bool { return next.Question == prev.Question }

func approvalWhat(in protocol.Interrupted) string {
	s := "an approval of " + in.Action
	if in.ApproverRole != "" {
		s += " for role " + in.ApproverRole
	}
	return s
}

// approvalShow shows an approval: the proposed action and its args, why,
// who decides, what may be decided, and why it is asked again.
func approvalShow(w io.Writer, in protocol.Interrupted) {
	fmt.Fprintf(w, "  approval of %s", in.Action)
	if in.ApproverRole != "" {
		fmt.Fprintf(w, ", for role %s", in.ApproverRole)
	}
	if in.Gate != "" {
		fmt.Fprintf(w, " (gate %s the node)", in.Gate)
	}
	fmt.Fprintln(w)
	if in.Reason != "" {
		fmt.Fprintf(w, "  reason: %s\n", in.Reason)
	}
	fmt.Fprintf(w, "  args: %s\n", indentJSON(in.Args, "  "))
	if len(in.Decisions) > 0 {
		fmt.Fprintf(w, "  decisions: %s\n", protocol.VerdictList(in.Decisions))
	}
	if len(in.Assignees) > 0 {
		fmt.Fprintf(w, "  assignees: %s\n", strings.Join(in.Assignees, ", "))
	}
	if in.ClaimedBy != "" {
		fmt.Fprintf(w, "  claimed by %s: only they may decide it until they release it\n", in.ClaimedBy)
	}
	if in.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", in.Error)
	}
}

func approvalAnswers(in protocol.Interrupted) []string {
	decide := map[protocol.Verdict]string{
		protocol.VerdictApprove: "--approve",
		protocol.VerdictReject:  "--reject --reason TEXT",
		protocol.VerdictEdit:    "--edit FIELD=VALUE",
		protocol.VerdictRespond: "--respond --message TEXT",
	}
	if keys := argNames(in.Args); len(keys) > 0 {
		decide[protocol.VerdictEdit] = "--edit " + keys[0] + "=..."
	}
	allowed := in.Decisions
	if len(allowed) == 0 {
		allowed = protocol.Verdicts()
	}
	var out []string
	for _, d := range allowed {
		if how, ok := decide[d]; ok {
			out = append(out, how)
		}
	}
	return out
}

// approvalReasked: an approval is asked again only when its edit was
// refused.
func approvalReasked(prev, next protocol.Interrupted) bool {
	return next.Action == prev.Action && next.Error != ""
}

// verbOf says what a person does to an interrupt of kind: decides one only
// its approver role may answer, answers any other.
func verbOf(kind string) string {
	if protocol.RoleRestricted(kind) {
		return "decide"
	}
	return "answer"
}
