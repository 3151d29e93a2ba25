package slackbridge

import (
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/interlockhq/interlock/protocol"
)

// kindView is how the bridge posts one kind of interrupt: the bridge's
// template of the kind. Its modals and their reading are in messages.go
// and interact.go, by the buttons it posts. Checking an answer is the
// kind's [protocol.Spec]; every kind of [protocol.Kinds] has a view
// (TestEveryInterruptKindHasAView).
type kindView struct {
	// body writes what the interrupt asks; where names the run.
	body func(b *strings.Builder, in protocol.Interrupted, where string)
	// fallback is the notification text.
	fallback func(in protocol.Interrupted) string
	// buttons are the message's buttons, each with value.
	buttons func(in protocol.Interrupted, value string) []slack.BlockElement
}

// kindViews are the views of the kinds.
var kindViews = map[string]kindView{
	protocol.KindQuestion: {body: questionBody, fallback: questionFallback, buttons: questionButtons},
	protocol.KindChoice:   {body: choiceBody, fallback: choiceFallback, buttons: choiceButtons},
	protocol.KindApproval: {body: approvalBody, fallback: approvalFallback, buttons: approvalButtons},
}

// viewOf returns the view of an interrupt kind, and for a kind this
// version does not know, one that says so and has no buttons.
func viewOf(kind string) kindView {
	if v, ok := kindViews[kind]; ok {
		return v
	}
	return kindView{
		body: func(b *strings.Builder, in protocol.Interrupted, where string) {
			fmt.Fprintf(b, "*Waiting on a %s* %s\nAnswer it through the inbox or the HTTP API.\n", esc(in.Kind), where)
		},
		fallback: func(in protocol.Interrupted) string { return fmt.Sprintf("Waiting (%s %s)", in.Flow, in.Run) },
		buttons:  func(protocol.Interrupted, string) []slack.BlockElement { return nil },
	}
}

func questionBody(b *strings.Builder, in protocol.Interrupted, where string) {
	fmt.Fprintf(b, "*Question* %s\n", where)
	for _, q := range in.Questions {
		fmt.Fprintf(b, "• %s\n", esc(q.Question))
		if strings.HasPrefix(q.Context, "ERROR:") {
			fmt.Fprintf(b, "  :warning: %s\n", esc(strings.TrimSpace(strings.TrimPrefix(q.Context, "ERROR:"))))
		}
	}
}

func questionFallback(in protocol.Interrupted) string {
	return fmt.Sprintf("Question (%s %s)", in.Flow, in.Run)
}

func questionButtons(_ protocol.Interrupted, value string) []slack.BlockElement {
	return []slack.BlockElement{slack.NewButtonBlockElement(actionAnswer, value, plain("Answer")).WithStyle(slack.StylePrimary)}
}

func choiceBody(b *strings.Builder, in protocol.Interrupted, where string) {
	fmt.Fprintf(b, "*Choice:* %s %s\n", esc(in.Question), where)
	for _, o := range in.Options {
		fmt.Fprintf(b, "• %s\n", esc(o.Label))
	}
}

func choiceFallback(in protocol.Interrupted) string { return "Choice: " + in.Question }

func choiceButtons(_ protocol.Interrupted, value string) []slack.BlockElement {
	return []slack.BlockElement{slack.NewButtonBlockElement(actionChoose, value, plain("Choose")).WithStyle(slack.StylePrimary)}
}

func approvalBody(b *strings.Builder, in protocol.Interrupted, where string) {
	fmt.Fprintf(b, "*Approval needed:* `%s` %s\n", esc(in.Action), where)
	if in.Reason != "" {
		fmt.Fprintf(b, "%s\n", esc(in.Reason))
	}
	fmt.Fprintf(b, "```%s```\n", esc(truncate(prettyArgs(in.Args), 2000)))
	if in.ApproverRole != "" {
		fmt.Fprintf(b, "Approver role: *%s*", esc(in.ApproverRole))
	}
	if in.Error != "" {
		fmt.Fprintf(b, "\n:warning: %s", esc(in.Error))
	}
}

func approvalFallback(in protocol.Interrupted) string {
	return fmt.Sprintf("Approval needed: %s (%s %s)", in.Action, in.Flow, in.Run)
}

func approvalButtons(in protocol.Interrupted, value string) []slack.BlockElement {
	decisions := in.Decisions
	if len(decisions) == 0 {
		decisions = protocol.Verdicts()
	}
	var buttons []slack.BlockElement
	for _, d := range decisions {
		switch d {
		case protocol.VerdictApprove:
			buttons = append(buttons, slack.NewButtonBlockElement(actionApprove, value, plain("Approve")).WithStyle(slack.StylePrimary))
		case protocol.VerdictEdit:
			buttons = append(buttons, slack.NewButtonBlockElement(actionEdit, value, plain("Edit")))
		case protocol.VerdictReject:
			buttons = append(buttons, slack.NewButtonBlockElement(actionReject, value, plain("Reject")).WithStyle(slack.StyleDanger))
		}
	}
	return buttons
}
