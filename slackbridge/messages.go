package slackbridge

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/interlockhq/interlock/protocol"
	"github.com/slack-go/slack"
)

// Action and callback ids of the bridge's buttons and modals.
const (
	actionApprove  = "interlock_approve"
	actionReject   = "interlock_reject"
	actionEdit     = "interlock_edit"
	actionAnswer   = "interlock_answer"
	actionChoose   = "interlock_choose"
	actionRespond  = "interlock_respond"
	actionClaim    = "interlock_claim"
	actionRelease  = "interlock_release"
	actionDelegate = "interlock_delegate"

	viewEdit     = "interlock_edit"
	viewReject   = "interlock_reject"
	viewAnswer   = "interlock_answer"
	viewChoose   = "interlock_choose"
	viewRespond  = "interlock_respond"
	viewDelegate = "interlock_delegate"

	// Blocks of the messages.
	blockActions      = "interlock_actions"
	blockOutcome      = "interlock_outcome"
	blockDescription  = "interlock_description"
	blockFacts        = "interlock_facts"
	blockConversation = "interlock_conversation"
	blockArgFields    = "interlock_args"

	// Blocks and elements of the modals.
	blockReason  = "reason"
	blockPerson  = "delegate_person"
	blockRole    = "delegate_role"
	blockMessage = "message"
	blockChoice  = "choice"
	questionPfx  = "q:"
	argPfx       = "arg:"
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

// slackDate shows a time in each reader's own time zone, and in UTC
// where Slack cannot.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
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

// where names a run in a message.
func where(flow, run string) string { return fmt.Sprintf("(%s · %s)", esc(flow), esc(run)) }

// bodyBlocks are the blocks of an interrupt, without its buttons; c
// need not name where the run is.
func bodyBlocks(in protocol.Interrupted, c card) []slack.Block {
	c.where = where(in.Flow, in.Run)
	return viewOf(in.Kind).blocks(in, c)
}

// fallbackText is the notification text of an interrupt, plain.
func fallbackText(in protocol.Interrupted) string { return viewOf(in.Kind).fallback(in) }

// mrkdwn is a text object of mrkdwn the bridge wrote: verbatim, so that
// Slack finds no names or links in it but those written as <...>, which
// only the bridge writes (text from outside goes through [safe] or
// [mrkdwnOf]).
func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, true)
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
}

func section(s string) *slack.SectionBlock {
	return slack.NewSectionBlock(mrkdwn(truncate(strings.TrimRight(s, "\n"), maxSection-100)), nil, nil)
}

// oneLine is a title on one line.
func oneLine(s string) string { return truncate(strings.Join(strings.Fields(s), " "), 150) }

// names lists people for a message, bold.
func names(people []string) string {
	out := make([]string, len(people))
	for i, p := range people {
		out[i] = "*" + safe(p) + "*"
	}
	return strings.Join(out, ", ")
}

// deadline says when an interrupt must be answered by, and what happens
// then: "Decide by <date> · then it goes to finance_lead".
func deadline(in protocol.Interrupted) string {
	if in.ExpiresAt == nil {
		return ""
	}
	s := ":hourglass_flowing_sand: Decide by " + slackDate(*in.ExpiresAt)
	if c := in.OnTimeout.Consequence(); c != "" {
		s += " · " + safe(c)
	}
	return s
}

// votesText says how far a quorum is: "Approvals: *1 of 2* (ann)", or for
// a quorum of roles, each role's count.
func votesText(q *protocol.Quorum, votes []protocol.Vote) string {
	if q == nil {
		return ""
	}
	var by []string
	per := map[string]int{}
	for _, v := range votes {
		if !slices.Contains(by, v.Approver) {
			by = append(by, v.Approver)
			per[v.Role]++
		}
	}
	var s string
	if len(q.Roles) == 0 {
		s = fmt.Sprintf(":ballot_box_with_check: Approvals: *%d of %d*", len(by), q.Total())
	} else {
		parts := make([]string, len(q.Roles))
		for i, rc := range q.Roles {
			parts[i] = fmt.Sprintf("%s *%d of %d*", safe(rc.Role), per[rc.Role], rc.Count)
		}
		s = ":ballot_box_with_check: Approvals: " + strings.Join(parts, ", ")
	}
	if len(by) > 0 {
		s += " (" + names(by) + ")"
	}
	return s
}

// maxQuote bounds the message of a respond a settled message quotes.
const maxQuote = 1000

// maxConversation and maxMessage bound the conversation a message shows.
const (
	maxConversation = 4
	maxMessage      = 300
)

// talk is what a message shows of the conversation behind a gate run's
// call: its last messages, and how many came before them.
type talk struct {
	ID       string             `json:"id,omitempty"`
	Agent    string             `json:"agent,omitempty"`
	Messages []protocol.Message `json:"messages,omitempty"`
	Earlier  int                `json:"earlier,omitempty"`
}

// conversationText shows the last messages of the conversation behind a
// call, each cut short.
func conversationText(c talk) string {
	var b strings.Builder
	b.WriteString(":speech_balloon: *Conversation*")
	if c.ID != "" {
		b.WriteString(" " + safe(truncate(c.ID, 80)))
	}
	if c.Agent != "" {
		b.WriteString(" with *" + safe(truncate(c.Agent, 80)) + "*")
	}
	msgs := c.Messages
	if len(msgs) > maxConversation {
		c.Earlier += len(msgs) - maxConversation
		msgs = msgs[len(msgs)-maxConversation:]
	}
	if c.Earlier > 0 {
		fmt.Fprintf(&b, " (the last %d messages; %d before them)", len(msgs), c.Earlier)
	}
	for _, m := range msgs {
		b.WriteString("\n")
		if m.Role != "" {
			b.WriteString("*" + safe(truncate(m.Role, 40)) + ":* ")
		}
		b.WriteString(safe(truncate(oneLine(m.Text), maxMessage)))
	}
	return truncate(b.String(), 1900)
}

// maxFields is how many fields Slack takes in a section.
const maxFields = 10

// argBlocks show an approval's arguments as sections of fields, each by
// its title and formatted value.
func argBlocks(args, schema json.RawMessage) []slack.Block {
	var blocks []slack.Block
	var fields []*slack.TextBlockObject
	flush := func() {
		if len(fields) > 0 {
			id := blockArgFields
			if len(blocks) > 0 {
				id = fmt.Sprintf("%s_%d", blockArgFields, len(blocks))
			}
			blocks = append(blocks, slack.NewSectionBlock(nil, fields, nil, slack.SectionBlockOptionBlockID(id)))
			fields = nil
		}
	}
	for _, a := range protocol.Args(args, schema) {
		fields = append(fields, mrkdwn(truncate("*"+safe(truncate(a.Title, 150))+"*\n"+argValue(a), 1900)))
		if len(fields) == maxFields {
			flush()
		}
	}
	flush()
	return blocks
}

// argValue is an argument's value for a message: the formatted text
// protocol.Args gives, a link for an address, a Slack date for a time,
// Markdown converted, other JSON as code.
func argValue(a protocol.Arg) string {
	switch a.Display {
	case protocol.DisplayURL:
		if u, ok := safeURL(a.Text); ok {
			return "<" + u.String() + "|" + esc(truncate(a.Text, 200)) + ">"
		}
	case protocol.DisplayEmail:
		if u, ok := safeURL("mailto:" + a.Text); ok && a.Scalar() {
			return "<" + u.String() + "|" + safe(a.Text) + ">"
		}
	case protocol.DisplayDateTime:
		if t, err := time.Parse(time.RFC3339, a.Input()); err == nil {
			return slackDate(t)
		}
	case protocol.DisplayMarkdown:
		return truncate(mrkdwnOf(a.Text), 1500)
	}
	switch protocol.JSONTypeOf(a.Value) {
	case protocol.JSONObject, protocol.JSONArray:
		return "`" + esc(truncate(a.Text, 1500)) + "`"
	}
	if a.Text == "" {
		return "_empty_"
	}
	return safe(truncate(a.Text, 1500))
}

// openBlocks are the blocks of an interrupt waiting for someone.
func openBlocks(in protocol.Interrupted, c card, r ref) []slack.Block {
	blocks := bodyBlocks(in, c)
	if buttons := viewOf(in.Kind).buttons(in, r.encode()); len(buttons) > 0 {
		blocks = append(blocks, slack.NewActionBlock(blockActions, buttons...))
	}
	return blocks
}

// closedBlocks are the blocks of a message whose interrupt is settled:
// what it asked, and the outcome, without buttons.
func closedBlocks(rec record, outcome string) []slack.Block {
	var blocks []slack.Block
	if rec.In != nil {
		blocks = bodyBlocks(*rec.In, rec.card())
	} else {
		blocks = []slack.Block{section(rec.Body)}
	}
	return append(blocks, slack.NewContextBlock(blockOutcome, mrkdwn(outcome)))
}

// resumedOutcome says who decided or answered, what, and when; for a
// quorum, who voted with them.
func resumedOutcome(r protocol.Resumed, votes []protocol.Vote, at time.Time) string {
	by := ""
	if r.Approver != "" {
		by = " by *" + safe(r.Approver) + "*"
	}
	var s string
	switch protocol.Verdict(r.Decision) {
	case protocol.VerdictApprove:
		s = ":white_check_mark: Approved" + by
	case protocol.VerdictEdit:
		s = ":pencil2: Approved with edits" + by
		if len(r.Edits) > 0 {
			s += ": `" + esc(truncate(string(r.Edits), 500)) + "`"
		}
	case protocol.VerdictReject:
		s = ":x: Rejected" + by
	case protocol.VerdictRespond:
		s = ":speech_balloon: Responded" + by
		if m := strings.TrimSpace(r.Message); m != "" {
			s += ": “" + safe(truncate(m, maxQuote)) + "”"
		} else {
			s += " instead of deciding"
		}
	default:
		s = ":white_check_mark: Answered" + by
	}
	if r.Decision == string(protocol.VerdictApprove) || r.Decision == string(protocol.VerdictEdit) {
		var with []string
		for _, v := range votes {
			if v.Approver != r.Approver && !slices.Contains(with, v.Approver) {
				with = append(with, v.Approver)
			}
		}
		if len(with) > 0 {
			s += " with " + names(with)
		}
	}
	if r.Reason != "" {
		s += " (" + safe(truncate(r.Reason, 300)) + ")"
	}
	return s + " · " + slackDate(at)
}

func cancelledOutcome(c protocol.Cancelled, at time.Time) string {
	s := ":no_entry_sign: Run cancelled"
	if c.By != "" {
		s += " by *" + safe(c.By) + "*"
	}
	if c.Reason != "" {
		s += " (" + safe(truncate(c.Reason, 300)) + ")"
	}
	return s + " · " + slackDate(at)
}

// editView is the modal of an Edit button: one input per argument, of
// its type and prefilled, and an optional reason.
func editView(in ref, args, schema json.RawMessage) slack.ModalViewRequest {
	var blocks []slack.Block
	for _, a := range protocol.Args(args, schema) {
		blocks = append(blocks, argInput(a))
	}
	reason := slack.NewPlainTextInputBlockElement(nil, inputElement)
	blocks = append(blocks, slack.NewInputBlock(blockReason, plain("Reason"), nil, reason).WithOptional(true))
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: viewEdit, PrivateMetadata: in.encode(),
		Title: plain("Edit and approve"), Submit: plain("Approve"), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: blocks},
	}
}

// argInput is the input of one argument in the edit modal: a select of
// an enum's values, a checkbox of a boolean, a number input within the
// schema's bounds, an e-mail or URL input, a text input, or JSON for an
// object or a list.
func argInput(a protocol.Arg) *slack.InputBlock {
	label := plain(truncate(a.Title, 1900))
	var hint *slack.TextBlockObject
	if a.Description != "" {
		hint = plain(truncate(a.Description, 1900))
	}
	id := argPfx + a.Name
	var el slack.BlockElement
	optional := !a.Required
	switch {
	case len(a.Enum) > 0:
		var opts []*slack.OptionBlockObject
		var initial *slack.OptionBlockObject
		for _, e := range a.Enum {
			o := slack.NewOptionBlockObject(truncate(string(e.Value), 150), plain(truncate(cmp.Or(e.Text, "(empty)"), 75)), nil)
			opts = append(opts, o)
			if e.Selected(a.Value) {
				initial = o
			}
		}
		sel := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, nil, inputElement, opts...)
		if initial != nil {
			sel = sel.WithInitialOption(initial)
		}
		el = sel
	case a.Type == protocol.JSONBoolean:
		yes := slack.NewOptionBlockObject("true", plain("Yes"), nil)
		cb := slack.NewCheckboxGroupsBlockElement(inputElement, yes)
		if protocol.SameJSON(a.Value, json.RawMessage("true")) {
			cb.InitialOptions = []*slack.OptionBlockObject{yes}
		}
		// Unticked is false: a checkbox is never required.
		el, optional = cb, true
	case a.Type == protocol.JSONNumber || a.Type == protocol.JSONInteger:
		n := slack.NewNumberInputBlockElement(nil, inputElement, a.Type == protocol.JSONNumber)
		if protocol.JSONTypeOf(a.Value) == protocol.JSONNumber {
			n = n.WithInitialValue(a.Input())
		}
		if a.Minimum != nil {
			n = n.WithMinValue(strconv.FormatFloat(*a.Minimum, 'f', -1, 64))
		}
		if a.Maximum != nil {
			n = n.WithMaxValue(strconv.FormatFloat(*a.Maximum, 'f', -1, 64))
		}
		el = n
	case a.Type == protocol.JSONString && a.Display == protocol.DisplayEmail:
		e := slack.NewEmailTextInputBlockElement(nil, inputElement)
		e.InitialValue = a.Input()
		el = e
	case a.Type == protocol.JSONString && a.Display == protocol.DisplayURL:
		u := slack.NewURLTextInputBlockElement(nil, inputElement)
		u.InitialValue = a.Input()
		el = u
	case a.Type == protocol.JSONString:
		t := slack.NewPlainTextInputBlockElement(nil, inputElement).WithInitialValue(a.Input()).
			WithMultiline(a.Display == protocol.DisplayMarkdown || strings.Contains(a.Input(), "\n"))
		if a.MinLength != nil {
			t = t.WithMinLength(*a.MinLength)
		}
		if a.MaxLength != nil {
			t = t.WithMaxLength(*a.MaxLength)
		}
		el = t
	default:
		label = plain(truncate(a.Title, 1890) + " (JSON)")
		el = slack.NewPlainTextInputBlockElement(nil, inputElement).WithMultiline(true).WithInitialValue(prettyArgs(a.Value))
	}
	return slack.NewInputBlock(id, label, hint, el).WithOptional(optional)
}

// respondView is the modal of a Respond button: the message that answers
// the agent instead of a decision.
func respondView(in ref) slack.ModalViewRequest {
	msg := slack.NewPlainTextInputBlockElement(nil, inputElement).WithMultiline(true)
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: viewRespond, PrivateMetadata: in.encode(),
		Title: plain("Respond"), Submit: plain("Send"), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewInputBlock(blockMessage, plain("Message"), plain("Neither approve nor reject: the action does not run, and the agent gets your message."), msg),
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

// delegation is the last delegation of an approval, as its message says
// it: to a person or a role (role:<name>), by whom and why.
type delegation struct {
	To     string `json:"to"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// delegationOf is the delegation an assigned event of op delegate made,
// or nil for another op: to the one assignee it left, else to the role.
func delegationOf(a protocol.Assigned) *delegation {
	if a.Op != protocol.AssignDelegate {
		return nil
	}
	to := protocol.RolePrefix + a.ApproverRole
	if len(a.Assignees) > 0 {
		to = strings.Join(a.Assignees, ", ")
	}
	return &delegation{To: to, By: a.By, Reason: a.Reason}
}

// text says the delegation: "Delegated to *ben* by *ana* (reason)".
func (d delegation) text() string {
	s := ":arrow_right: Delegated to "
	if role, ok := strings.CutPrefix(d.To, protocol.RolePrefix); ok {
		s += "the *" + safe(role) + "* role"
	} else {
		s += "*" + safe(d.To) + "*"
	}
	if d.By != "" {
		s += " by *" + safe(d.By) + "*"
	}
	if d.Reason != "" {
		s += " (" + safe(truncate(d.Reason, 300)) + ")"
	}
	return s
}

// maxRoleOptions is how many options Slack takes in a static select.
const maxRoleOptions = 100

// delegateView is the modal of a Delegate button: a person (a Slack
// user, whom the configuration maps to a name) or a role of those the
// configuration knows, and an optional reason.
func delegateView(in ref, roles []string) slack.ModalViewRequest {
	person := slack.NewOptionsSelectBlockElement(slack.OptTypeUser, plain("Pick a person"), inputElement)
	blocks := []slack.Block{
		slack.NewInputBlock(blockPerson, plain("To a person"), plain("They become the approval's only assignee."), person).WithOptional(true),
	}
	if len(roles) > maxRoleOptions {
		roles = roles[:maxRoleOptions]
	}
	if len(roles) > 0 {
		opts := make([]*slack.OptionBlockObject, len(roles))
		for i, r := range roles {
			opts[i] = slack.NewOptionBlockObject(r, plain(truncate(r, 75)), nil)
		}
		role := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, plain("Pick a role"), inputElement, opts...)
		blocks = append(blocks, slack.NewInputBlock(blockRole, plain("Or to a role"),
			plain("Whoever holds the role may decide it; its assignees are cleared."), role).WithOptional(true))
	}
	reason := slack.NewPlainTextInputBlockElement(nil, inputElement)
	blocks = append(blocks, slack.NewInputBlock(blockReason, plain("Reason"), nil, reason).WithOptional(true))
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: viewDelegate, PrivateMetadata: in.encode(),
		Title: plain("Delegate"), Submit: plain("Delegate"), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: blocks},
	}
}
