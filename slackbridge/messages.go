package slackbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/interlockhq/interlock/protocol"
	"github.com/slack-go/slack"
)

// Action and callback ids of the bridge's buttons and modals.
const (
	actionApprove = "interlock_approve"
	actionReject  = "interlock_reject"
	actionEdit    = "interlock_edit"
	actionAnswer  = "interlock_answer"
	actionChoose  = "interlock_choose"

	viewEdit   = "interlock_edit"
	viewReject = "interlock_reject"
	viewAnswer = "interlock_answer"
	viewChoose = "interlock_choose"

	// Blocks and elements of the modals.
	blockArgs    = "args"
	blockReason  = "reason"
	blockChoice  = "choice"
	questionPfx  = "q:"
	inputElement = "value"
)

// maxSection is Slack's limit of a section's text.
const maxSection = 3000

// ref names the request a button or a modal decides. It travels in the
// button's value and the modal's private metadata, both signed by Slack
// in the interaction; the engine checks the rest.
type ref struct {
	Flow      string `json:"f"`
	Run       string `json:"r"`
	RequestID string `json:"q"`
	Kind      string `json:"k"`
	Role      string `json:"role,omitempty"`
	// Why is set when a reject must say why: Reject opens a modal.
	Why bool `json:"why,omitempty"`
}

func (r ref) encode() string {
	b, _ := json.Marshal(r)
	return string(b)
}

func decodeRef(s string) (ref, error) {
	var r ref
	if err := json.Unmarshal([]byte(s), &r); err != nil || r.Flow == "" || r.Run == "" {
		return ref{}, fmt.Errorf("not a request of the bridge: %q", truncate(s, 80))
	}
	return r, nil
}

// esc escapes text for Slack's mrkdwn.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

var markup = regexp.MustCompile(`<!date\^[0-9]+\^[^|]*\|([^>]*)>|[*_]|:[a-z_]+: `)

// stripMarkup turns an outcome into the plain text of a notification.
func stripMarkup(s string) string { return markup.ReplaceAllString(s, "$1") }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// slackDate shows a time in each reader's own time zone, and as RFC 3339
// where Slack cannot.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} at {time}|%s>", t.Unix(), t.UTC().Format(time.RFC3339))
}

// prettyArgs is an approval's args as indented JSON.
func prettyArgs(args json.RawMessage) string {
	var buf bytes.Buffer
	if len(args) == 0 {
		return "{}"
	}
	if err := json.Indent(&buf, args, "", "  "); err != nil {
		return string(args)
	}
	return buf.String()
}

// bodyText is the message of an interrupt, without its buttons.
func bodyText(in protocol.Interrupted) string {
	var b strings.Builder
	viewOf(in.Kind).body(&b, in, fmt.Sprintf("(%s · %s)", esc(in.Flow), esc(in.Run)))
	if in.ExpiresAt != nil {
		fmt.Fprintf(&b, "\nDecide by %s", slackDate(*in.ExpiresAt))
	}
	return truncate(strings.TrimRight(b.String(), "\n"), maxSection-100)
}

// fallbackText is the notification text of an interrupt.
func fallbackText(in protocol.Interrupted) string { return viewOf(in.Kind).fallback(in) }

func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
}
func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
}

// openBlocks are the blocks of an interrupt waiting for someone.
func openBlocks(in protocol.Interrupted, text string, r ref) []slack.Block {
	return []slack.Block{
		slack.NewSectionBlock(mrkdwn(text), nil, nil),
		slack.NewActionBlock("interlock_actions", viewOf(in.Kind).buttons(in, r.encode())...),
	}
}

// closedBlocks are the blocks of a message whose interrupt is settled.
func closedBlocks(text, outcome string) []slack.Block {
	return []slack.Block{
		slack.NewSectionBlock(mrkdwn(text), nil, nil),
		slack.NewContextBlock("interlock_outcome", mrkdwn(outcome)),
	}
}

// resumedOutcome says who decided or answered, what, and when.
func resumedOutcome(r protocol.Resumed, at time.Time) string {
	by := ""
	if r.Approver != "" {
		by = " by *" + esc(r.Approver) + "*"
	}
	var s string
	switch r.Decision {
	case "approve":
		s = ":white_check_mark: Approved" + by
	case "edit":
		s = ":pencil2: Approved with edits" + by
		if len(r.Edits) > 0 {
			s += ": `" + esc(truncate(string(r.Edits), 500)) + "`"
		}
	case "reject":
		s = ":x: Rejected" + by
	default:
		s = ":white_check_mark: Answered" + by
	}
	if r.Reason != "" {
		s += " (" + esc(truncate(r.Reason, 300)) + ")"
	}
	return s + " · " + slackDate(at)
}

func cancelledOutcome(c protocol.Cancelled, at time.Time) string {
	s := ":no_entry_sign: Run cancelled"
	if c.By != "" {
		s += " by *" + esc(c.By) + "*"
	}
	if c.Reason != "" {
		s += " (" + esc(truncate(c.Reason, 300)) + ")"
	}
	return s + " · " + slackDate(at)
}

// editView is the modal of an Edit button: the args as JSON.
func editView(in ref, args json.RawMessage) slack.ModalViewRequest {
	input := slack.NewPlainTextInputBlockElement(nil, inputElement).WithMultiline(true).WithInitialValue(prettyArgs(args))
	reason := slack.NewPlainTextInputBlockElement(nil, inputElement)
	reasonBlock := slack.NewInputBlock(blockReason, plain("Reason"), nil, reason)
	reasonBlock.Optional = true
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: viewEdit, PrivateMetadata: in.encode(),
		Title: plain("Edit and approve"), Submit: plain("Approve"), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewInputBlock(blockArgs, plain("Arguments (JSON)"), plain("Change the values to run the action with; the flow checks them."), input),
			reasonBlock,
		}},
	}
}

// rejectView is the modal of a Reject button when the approval takes a
// reason: the reason, required.
func rejectView(in ref) slack.ModalViewRequest {
	reason := slack.NewPlainTextInputBlockElement(nil, inputElement)
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: viewReject, PrivateMetadata: in.encode(),
		Title: plain("Reject"), Submit: plain("Reject"), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewInputBlock(blockReason, plain("Reason"), plain("Say why: the reason is recorded and sent back."), reason),
		}},
	}
}

// answerView is the modal of an Answer button: one input per question.
func answerView(in ref, qs []protocol.Question) slack.ModalViewRequest {
	var blocks []slack.Block
	for _, q := range qs {
		el := slack.NewPlainTextInputBlockElement(nil, inputElement)
		var hint *slack.TextBlockObject
		if len(q.Suggestions) > 0 {
			hint = plain("For example: " + truncate(strings.Join(q.Suggestions, ", "), 140))
		}
		blocks = append(blocks, slack.NewInputBlock(questionPfx+q.Field, plain(truncate(q.Question, 1900)), hint, el))
	}
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: viewAnswer, PrivateMetadata: in.encode(),
		Title: plain("Answer"), Submit: plain("Send"), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: blocks},
	}
}

// chooseView is the modal of a Choose button: the options.
func chooseView(in ref, question string, options []protocol.Option, multiple bool) slack.ModalViewRequest {
	var opts []*slack.OptionBlockObject
	for _, o := range options {
		opts = append(opts, slack.NewOptionBlockObject(o.ID, plain(truncate(o.Label, 70)), nil))
	}
	var el slack.BlockElement = slack.NewRadioButtonsBlockElement(inputElement, opts...)
	if multiple {
		el = slack.NewCheckboxGroupsBlockElement(inputElement, opts...)
	}
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: viewChoose, PrivateMetadata: in.encode(),
		Title: plain("Choose"), Submit: plain("Send"), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewInputBlock(blockChoice, plain(truncate(question, 1900)), nil, el)}},
	}
}
