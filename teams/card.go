package teams

import (
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// What a Workflows webhook ("Post to a channel when a webhook request is
// received") takes: a message with one attachment, an Adaptive Card.
const (
	messageType       = "message"
	adaptiveCardType  = "application/vnd.microsoft.card.adaptive"
	adaptiveCardURL   = "http://adaptivecards.io/schemas/adaptive-card.json"
	adaptiveCardVer   = "1.5"
	maxMentions       = 20
	deadlineLayout    = "Mon 2 Jan 2006 15:04 MST"
	fallbackHeading   = "A request waits for a decision"
	openButtonTitle   = "Review and decide"
	settledButtonText = "Open in Interlock"
)

// message is the body posted to a Workflows URL.
type message struct {
	Type        string       `json:"type"`
	Attachments []attachment `json:"attachments"`
}

// attachment is the message's card; ContentURL is always null.
type attachment struct {
	ContentType string  `json:"contentType"`
	ContentURL  *string `json:"contentUrl"`
	Content     card    `json:"content"`
}

// card is an Adaptive Card 1.5, with Teams' msteams extension for
// mentions and the card's width.
type card struct {
	Schema  string    `json:"$schema"`
	Type    string    `json:"type"`
	Version string    `json:"version"`
	Body    []element `json:"body"`
	Actions []action  `json:"actions,omitempty"`
	MSTeams *msteams  `json:"msteams,omitempty"`
}

// element is a TextBlock or a FactSet.
type element struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Size      string `json:"size,omitempty"`
	Weight    string `json:"weight,omitempty"`
	Color     string `json:"color,omitempty"`
	IsSubtle  bool   `json:"isSubtle,omitempty"`
	Wrap      bool   `json:"wrap,omitempty"`
	Separator bool   `json:"separator,omitempty"`
	Spacing   string `json:"spacing,omitempty"`
	Facts     []fact `json:"facts,omitempty"`
}

// fact is one title and value of a FactSet.
type fact struct {
	Title string `json:"title"`
	Value string `json:"value"`
}

// action is an Action.OpenUrl: the card's one button.
type action struct {
	Type  string `json:"type"`
	Title string `json:"title"`
	URL   string `json:"url"`
	Style string `json:"style,omitempty"`
}

// msteams is Teams' extension of a card.
type msteams struct {
	Width    string    `json:"width,omitempty"`
	Entities []mention `json:"entities,omitempty"`
}

// mention is an <at>…</at> in the card's text, resolved to a Teams user
// by their user principal name.
type mention struct {
	Type      string    `json:"type"`
	Text      string    `json:"text"`
	Mentioned mentioned `json:"mentioned"`
}

type mentioned struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// wrapCard makes the message posted for c.
func wrapCard(c card) message {
	return message{Type: messageType, Attachments: []attachment{{ContentType: adaptiveCardType, Content: c}}}
}

func newCard(body []element, link, button string, mentions []mention) card {
	c := card{Schema: adaptiveCardURL, Type: "AdaptiveCard", Version: adaptiveCardVer, Body: body,
		MSTeams: &msteams{Width: "Full", Entities: mentions}}
	if link != "" {
		c.Actions = []action{{Type: "Action.OpenUrl", Title: button, URL: link, Style: "positive"}}
	}
	return c
}

func textBlock(text string) element {
	return element{Type: "TextBlock", Text: text, Wrap: true}
}

func subtle(text string) element {
	return element{Type: "TextBlock", Text: text, Wrap: true, IsSubtle: true, Size: "Small", Spacing: "None"}
}

func factSet(facts []fact) element {
	return element{Type: "FactSet", Facts: facts}
}

// heading is what a card calls an interrupt: its title, "Approve
// <action>?", or its question.
func heading(in protocol.Interrupted) string {
	h := in.Heading()
	if h == "" {
		switch {
		case in.Question != "":
			h = in.Question
		case len(in.Questions) == 1:
			h = in.Questions[0].Question
		default:
			h = fallbackHeading
		}
	}
	return plain(h, maxLine)
}

// where names an interrupt for the card's small print: flow · run · for
// role.
func where(flow, run string, roles []string) string {
	s := plain(flow, 64) + " · " + plain(run, 64)
	if len(roles) > 0 {
		s += " · for " + plain(strings.Join(roles, ", "), maxLine)
	}
	return s
}

// deadline says when an interrupt is due and what happens then.
func deadline(at *time.Time, consequence string) string {
	if at == nil {
		return ""
	}
	s := at.UTC().Format(deadlineLayout)
	if consequence != "" {
		s += ", " + consequence
	}
	return s
}

// openCard is the card of a pending interrupt: what is asked, the facts
// an approver needs, and a button to its page.
func openCard(in protocol.Interrupted, roles []string, link string, dir *people.Directory) card {
	body := []element{
		{Type: "TextBlock", Text: heading(in), Size: "Large", Weight: "Bolder", Wrap: true},
		subtle(where(in.Flow, in.Run, roles)),
	}
	if in.Error != "" {
		body = append(body, element{Type: "TextBlock", Text: "Asked again: " + plain(in.Error, maxLine), Color: "Attention", Wrap: true})
	}
	if d := markdown(in.Description, maxDescription); d != "" {
		body = append(body, textBlock(d))
	}
	view, known := kindViews[in.Kind]
	if known {
		body = append(body, view.body(in)...)
	}
	var args []fact
	if view.action && in.Title != "" && in.Action != "" {
		args = append(args, fact{"Action", plain(in.Action, maxLine)})
	}
	for _, a := range protocol.Args(in.Args, in.ArgsSchema) {
		if len(args) == maxFacts {
			args = append(args, fact{"…", "more on the request's page"})
			break
		}
		args = append(args, fact{plain(a.Title, 80), plain(a.Text, maxLine)})
	}
	if len(args) > 0 {
		body = append(body, factSet(args))
	}
	var meta []fact
	if in.Reason != "" {
		meta = append(meta, fact{"Reason", plain(in.Reason, maxLine)})
	}
	if in.Requester != "" {
		meta = append(meta, fact{"Requested by", plain(in.Requester, maxLine)})
	}
	if d := deadline(in.ExpiresAt, in.OnTimeout.Consequence()); d != "" {
		meta = append(meta, fact{"Decide by", d})
	}
	if in.Quorum != nil {
		meta = append(meta, fact{"Votes", votes(in.Votes, in.Quorum.Total())})
	}
	if in.ClaimedBy != "" {
		meta = append(meta, fact{"Claimed by", plain(in.ClaimedBy, maxLine)})
	}
	if len(meta) > 0 {
		body = append(body, element{Type: "FactSet", Facts: meta, Separator: true})
	}
	var ms []mention
	if len(in.Assignees) > 0 {
		var text string
		text, ms = mentions(dir, in.Assignees)
		body = append(body, textBlock("Assigned to "+text))
	}
	return newCard(body, link, openButtonTitle, ms)
}

// votes says how far a quorum is: "1 of 2: ann@example.com (approve)".
func votes(vs []protocol.Vote, total int) string {
	seen := map[string]bool{}
	var who []string
	for _, v := range vs {
		if !seen[v.Approver] {
			seen[v.Approver] = true
			who = append(who, fmt.Sprintf("%s (%s)", plain(v.Approver, 80), v.Verdict))
		}
	}
	s := fmt.Sprintf("%d of %d", len(who), total)
	if len(who) > 0 {
		s += ": " + strings.Join(who, ", ")
	}
	return s
}

// noteCard is a short follow-up in a channel the interrupt was posted in:
// a reminder, a vote, a delegation, or how it was settled.
func noteCard(line, color, about, detail, link, button string, mentionText string, ms []mention) card {
	body := []element{{Type: "TextBlock", Text: line, Size: "Medium", Weight: "Bolder", Color: color, Wrap: true}}
	if about != "" {
		body = append(body, subtle(about))
	}
	if detail != "" {
		body = append(body, textBlock(detail))
	}
	if mentionText != "" {
		body = append(body, textBlock(mentionText))
	}
	return newCard(body, link, button, ms)
}

// mentions names people in a card: an <at> mention of each one the
// directory gives a Teams account (a user principal name), their name
// otherwise.
func mentions(dir *people.Directory, names []string) (string, []mention) {
	var parts []string
	var ms []mention
	for _, n := range names {
		p, ok := dir.Person(n)
		if ok && len(ms) < maxMentions && validUPN(p.Teams) && people.CheckName(n) == nil {
			tag := "<at>" + n + "</at>"
			parts = append(parts, tag)
			ms = append(ms, mention{Type: "mention", Text: tag, Mentioned: mentioned{ID: p.Teams, Name: n}})
			continue
		}
		parts = append(parts, plain(n, 80))
	}
	return strings.Join(parts, ", "), ms
}

// validUPN reports whether s looks like a user principal name
// (ann@contoso.com).
func validUPN(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == s
}
