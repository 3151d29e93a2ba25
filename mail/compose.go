package mail

import (
	"bytes"
	"embed"
	"fmt"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
	"time"
	"unicode"
	"unicode/utf8"

	gomail "github.com/wneessen/go-mail"

	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
)

// Why a mail is sent: the notice's [notify.Why].
const (
	whyAsked     = string(notify.WhyAsked)
	whyVote      = string(notify.WhyVote)
	whyReminder  = string(notify.WhyReminder)
	whyDelegated = string(notify.WhyDelegated)
)

// Bounds of what a mail shows, so that a huge argument or conversation
// keeps the mail readable and small.
const (
	maxSubject     = 160
	maxArg         = 600
	maxDescription = 16 << 10
	maxMessages    = 8
	maxMessage     = 1200
)

//go:embed templates
var templates embed.FS

var (
	htmlTmpl = htmltemplate.Must(htmltemplate.New("mail.html.tmpl").ParseFS(templates, "templates/mail.html.tmpl"))
	textTmpl = texttemplate.Must(texttemplate.New("mail.txt.tmpl").ParseFS(templates, "templates/mail.txt.tmpl"))
)

// conversation is the conversation behind a gate call, its last
// messages.
type conversation struct {
	ID, Agent string
	Earlier   int
	Messages  []protocol.Message
}

func newConversation(c protocol.Conversation) *conversation {
	out := &conversation{ID: oneLine(c.ID, 120), Agent: oneLine(c.Agent, 120), Messages: c.Messages}
	if n := len(c.Messages); n > maxMessages {
		out.Messages, out.Earlier = c.Messages[n-maxMessages:], n-maxMessages
	}
	for i, msg := range out.Messages {
		out.Messages[i] = protocol.Message{Role: oneLine(msg.Role, 40), Text: cut(msg.Text, maxMessage)}
	}
	return out
}

// letter is what a mail shows.
type letter struct {
	Why, Kind string
	// Heading is the interrupt's title (or what it asks); Intro says why
	// the mail came.
	Heading, Intro string
	Description    htmltemplate.HTML
	DescriptionRaw string
	Action, Reason string
	Requester      string
	Error          string
	Args           []protocol.Arg
	Questions      []protocol.Question
	Question       string
	Options        []protocol.Option
	Deadline       string
	Consequence    string
	Votes          []protocol.Vote
	Required       int
	Conversation   *conversation
	Link           string
	Button         string
	// ForRole names the role whose address the mail went to.
	ForRole string
}

// compose builds the mail of in to r, linking to link.
func (m *Mailer) compose(in protocol.Interrupted, why, by string, r recipient, convo *conversation, at time.Time, msgID, inReplyTo, link string) (*gomail.Msg, error) {
	l := letterOf(in, why, by, r)
	l.Link, l.Conversation = link, convo
	if in.Description != "" {
		l.DescriptionRaw = cut(in.Description, maxDescription)
		l.Description = m.md.Render(l.DescriptionRaw)
	}
	var html, text bytes.Buffer
	if err := htmlTmpl.Execute(&html, l); err != nil {
		return nil, fmt.Errorf("mail: composing the HTML of %s %s: %w", in.Flow, in.Run, err)
	}
	if err := textTmpl.Execute(&text, l); err != nil {
		return nil, fmt.Errorf("mail: composing the text of %s %s: %w", in.Flow, in.Run, err)
	}
	msg := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := msg.From(m.cfg.From); err != nil {
		return nil, fmt.Errorf("mail: from %q: %w", m.cfg.From, err)
	}
	if err := msg.To(r.Address); err != nil {
		return nil, fmt.Errorf("mail: to %q: %w", r.Address, err)
	}
	msg.Subject(subject(m.cfg.SubjectPrefix, in, why))
	msg.SetMessageIDWithValue(msgID)
	if inReplyTo != "" {
		msg.SetGenHeader(gomail.HeaderInReplyTo, inReplyTo)
		msg.SetGenHeader(gomail.HeaderReferences, inReplyTo)
	}
	msg.SetDateWithValue(at)
	// RFC 3834: no out-of-office answers to Interlock.
	msg.SetGenHeader("Auto-Submitted", "auto-generated")
	msg.SetGenHeader(gomail.HeaderXAutoResponseSuppress, "All")
	msg.SetBodyString(gomail.TypeTextPlain, text.String())
	msg.AddAlternativeString(gomail.TypeTextHTML, html.String())
	return msg, nil
}

// letterOf is what the mail of in says, but its link and its rendered
// description.
func letterOf(in protocol.Interrupted, why, by string, r recipient) letter {
	l := letter{Why: why, Kind: in.Kind, Heading: oneLine(heading(in), maxSubject), Action: oneLine(in.Action, 200),
		Reason: cut(in.Reason, maxArg), Requester: oneLine(in.Requester, 200), Error: cut(in.Error, maxArg),
		Question: cut(in.Question, maxArg), Options: in.Options, Votes: in.Votes, ForRole: r.Role}
	for _, q := range in.Questions {
		q.Question = cut(q.Question, maxArg)
		l.Questions = append(l.Questions, q)
	}
	view := viewOf(in.Kind)
	if view.args {
		for _, a := range protocol.Args(in.Args, in.ArgsSchema) {
			a.Title, a.Text = oneLine(a.Title, 120), cut(a.Text, maxArg)
			l.Args = append(l.Args, a)
		}
	}
	if in.Quorum != nil {
		l.Required = in.Quorum.Total()
	}
	if in.ExpiresAt != nil {
		l.Deadline = in.ExpiresAt.UTC().Format("Mon 2 Jan 2006 15:04 UTC")
		l.Consequence = in.OnTimeout.Consequence()
		if l.Consequence == "" {
			l.Consequence = "then it expires"
		}
	}
	what := view.noun
	whom := "you"
	if r.Role != "" {
		whom = "the " + r.Role + " role"
	}
	switch why {
	case whyVote:
		l.Intro = fmt.Sprintf("This %s has %d of the %d approvals it needs, and waits on %s.", what, len(in.Votes), l.Required, whom)
	case whyReminder:
		l.Intro = fmt.Sprintf("Reminder: this %s still waits on %s.", what, whom)
	case whyDelegated:
		l.Intro = fmt.Sprintf("%s delegated this %s to %s.", oneLine(orSomeone(by), 200), what, whom)
	default:
		l.Intro = fmt.Sprintf("This %s waits on %s.", what, whom)
	}
	l.Button = view.button
	if r.Person == "" {
		l.Button = "Open it in the inbox"
	}
	return l
}

func orSomeone(s string) string {
	if s == "" {
		return "Someone"
	}
	return s
}

// heading is what the mail is about: the interrupt's title, else its
// action, question or first question.
func heading(in protocol.Interrupted) string {
	if in.Title != "" {
		return in.Title
	}
	if h := viewOf(in.Kind).heading(in); h != "" {
		return h
	}
	return in.Flow + " " + in.Run
}

// subject is the mail's subject: one line, such as "[Interlock] Approve:
// Refund $4,800.00 on order A-1001".
func subject(prefix string, in protocol.Interrupted, why string) string {
	verb := viewOf(in.Kind).verb
	if why == whyVote && in.Quorum != nil {
		verb = fmt.Sprintf("%s (%d of %d approvals)", verb, len(in.Votes), in.Quorum.Total())
	}
	s := verb + ": " + oneLine(heading(in), maxSubject)
	switch why {
	case whyReminder:
		s = "Reminder: " + s
	case whyDelegated:
		s = "Delegated to you: " + s
	}
	if prefix != "" {
		s = prefix + " " + s
	}
	return s
}

// oneLine is s on one line of at most n runes: every control character
// (CR and LF among them) and line or paragraph separator becomes a space.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	return cut(strings.Join(strings.Fields(s), " "), n)
}

// cut is s cut to n runes, with an ellipsis when it was longer.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
