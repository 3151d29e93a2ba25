package slackbridge

import (
	"cmp"
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
	// blocks show what the interrupt asks, without its buttons.
	blocks func(in protocol.Interrupted, c card) []slack.Block
	// fallback is the notification text, plain.
	fallback func(in protocol.Interrupted) string
	// buttons are the message's buttons, each with value.
	buttons func(in protocol.Interrupted, value string) []slack.BlockElement
}

// card is what a message shows beside the interrupted event: where the
// run is, and the conversation behind a gate run's call.
type card struct {
	// where names the run: "(flow · run)".
	where string
	// conv is the conversation behind the call, if any.
	conv *talk
	// delegated is the approval's last delegation, if any.
	delegated *delegation
}

// kindViews are the views of the kinds.
var kindViews = map[string]kindView{
	protocol.KindQuestion: {blocks: questionBlocks, fallback: questionFallback, buttons: questionButtons},
	protocol.KindChoice:   {blocks: choiceBlocks, fallback: choiceFallback, buttons: choiceButtons},
	protocol.KindApproval: {blocks: approvalBlocks, fallback: approvalFallback, buttons: approvalButtons},
}

// viewOf returns the view of an interrupt kind, and for a kind this
// version does not know, one that says so and has no buttons.
func viewOf(kind string) kindView {
	if v, ok := kindViews[kind]; ok {
		return v
	}
	return kindView{
		blocks: func(in protocol.Interrupted, c card) []slack.Block {
			return []slack.Block{section(fmt.Sprintf("*Waiting on a %s* %s\nAnswer it through the inbox or the HTTP API.", safe(in.Kind), c.where))}
		},
		fallback: func(in protocol.Interrupted) string { return fmt.Sprintf("Waiting (%s %s)", in.Flow, in.Run) },
		buttons:  func(protocol.Interrupted, string) []slack.BlockElement { return nil },
	}
}

func questionBlocks(in protocol.Interrupted, c card) []slack.Block {
	var b strings.Builder
	fmt.Fprintf(&b, "*%s* %s\n", safe(oneLine(cmp.Or(in.Title, "Question"))), c.where)
	for _, q := range in.Questions {
		fmt.Fprintf(&b, "• %s\n", safe(q.Question))
		if strings.HasPrefix(q.Context, "ERROR:") {
			fmt.Fprintf(&b, "  :warning: %s\n", safe(strings.TrimSpace(strings.TrimPrefix(q.Context, "ERROR:"))))
		}
	}
	b.WriteString(deadline(in))
	return []slack.Block{section(b.String())}
}

func questionFallback(in protocol.Interrupted) string {
	return fmt.Sprintf("Question (%s %s)", in.Flow, in.Run)
}

func questionButtons(_ protocol.Interrupted, value string) []slack.BlockElement {
	return []slack.BlockElement{slack.NewButtonBlockElement(actionAnswer, value, plain("Answer")).WithStyle(slack.StylePrimary)}
}

func choiceBlocks(in protocol.Interrupted, c card) []slack.Block {
	var b strings.Builder
	fmt.Fprintf(&b, "*Choice:* %s %s\n", safe(in.Question), c.where)
	for _, o := range in.Options {
		fmt.Fprintf(&b, "• %s\n", safe(o.Label))
	}
	b.WriteString(deadline(in))
	return []slack.Block{section(b.String())}
}

func choiceFallback(in protocol.Interrupted) string { return "Choice: " + in.Question }

func choiceButtons(_ protocol.Interrupted, value string) []slack.BlockElement {
	return []slack.BlockElement{slack.NewButtonBlockElement(actionChoose, value, plain("Choose")).WithStyle(slack.StylePrimary)}
}

// approvalBlocks show an approval as the inbox's card does: its title
// (else its action), why, the description, each argument by its title
// and formatted value, who asked, who may decide, who delegated it last
// and who claimed it, the votes of a quorum, the deadline and what
// happens then, and for a gate run the last messages of the conversation
// behind the call.
func approvalBlocks(in protocol.Interrupted, c card) []slack.Block {
	var head strings.Builder
	fmt.Fprintf(&head, "*%s* %s", safe(oneLine(in.Heading())), c.where)
	if in.Title != "" && in.Action != "" {
		fmt.Fprintf(&head, "\nAction `%s`", esc(in.Action))
	}
	if in.Reason != "" {
		fmt.Fprintf(&head, "\n%s", safe(in.Reason))
	}
	if in.Error != "" {
		fmt.Fprintf(&head, "\n:warning: %s", safe(in.Error))
	}
	blocks := []slack.Block{section(head.String())}
	if d := strings.TrimSpace(in.Description); d != "" {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(truncate(mrkdwnOf(d), maxSection-100)), nil, nil, slack.SectionBlockOptionBlockID(blockDescription)))
	}
	blocks = append(blocks, argBlocks(in.Args, in.ArgsSchema)...)
	var facts []string
	if in.Requester != "" {
		facts = append(facts, "Requested by *"+safe(in.Requester)+"*")
	}
	if in.ApproverRole != "" {
		facts = append(facts, "Approver role *"+safe(in.ApproverRole)+"*")
	}
	if len(in.Assignees) > 0 {
		facts = append(facts, "Assigned to "+names(in.Assignees))
	}
	if c.delegated != nil {
		facts = append(facts, c.delegated.text())
	}
	if in.ClaimedBy != "" {
		facts = append(facts, ":lock: Claimed by *"+safe(in.ClaimedBy)+"*: only they may decide it until they release it")
	}
	if v := votesText(in.Quorum, in.Votes); v != "" {
		facts = append(facts, v)
	}
	if d := deadline(in); d != "" {
		facts = append(facts, d)
	}
	if len(facts) > 0 {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(truncate(strings.Join(facts, "\n"), maxSection-100)), nil, nil, slack.SectionBlockOptionBlockID(blockFacts)))
	}
	if c.conv != nil {
		if t := conversationText(*c.conv); t != "" {
			blocks = append(blocks, slack.NewContextBlock(blockConversation, mrkdwn(t)))
		}
	}
	return blocks
}

func approvalFallback(in protocol.Interrupted) string {
	return fmt.Sprintf("Approval needed: %s (%s %s)", oneLine(in.Heading()), in.Flow, in.Run)
}

// approvalButtons are Approve, Edit, Reject and Respond as the approval's
// decisions list them, Claim, or Release once it is claimed, and
// Delegate.
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
		case protocol.VerdictRespond:
			buttons = append(buttons, slack.NewButtonBlockElement(actionRespond, value, plain("Respond")))
		}
	}
	if in.ClaimedBy == "" {
		buttons = append(buttons, slack.NewButtonBlockElement(actionClaim, value, plain("Claim")))
	} else {
		buttons = append(buttons, slack.NewButtonBlockElement(actionRelease, value, plain("Release")))
	}
	return append(buttons, slack.NewButtonBlockElement(actionDelegate, value, plain("Delegate…")))
}
