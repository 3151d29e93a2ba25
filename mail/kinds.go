package mail

import "github.com/interlockhq/interlock/protocol"

// kindView is how a mail presents one kind of interrupt: the mail's
// template of the kind. Checking an answer is the kind's
// [protocol.Spec]; every kind of [protocol.Kinds] has a view
// (TestEveryInterruptKindHasAView).
type kindView struct {
	// noun names the interrupt in the mail's first line ("This approval
	// waits on you"); verb starts the subject ("Approve: ...").
	noun, verb string
	// button is the words of the link to the decision page.
	button string
	// heading is what the mail is about when the interrupt has no
	// title.
	heading func(in protocol.Interrupted) string
	// args is set when the mail lists the interrupt's args, formatted.
	args bool
}

// kindViews are the views of the kinds.
var kindViews = map[string]kindView{
	protocol.KindQuestion: {noun: "question", verb: "Answer", button: "Review and answer", heading: func(in protocol.Interrupted) string {
		if len(in.Questions) > 0 {
			return in.Questions[0].Question
		}
		return ""
	}},
	protocol.KindChoice:   {noun: "choice", verb: "Choose", button: "Review and answer", heading: func(in protocol.Interrupted) string { return in.Question }},
	protocol.KindApproval: {noun: "approval", verb: "Approve", button: "Review and decide", heading: func(in protocol.Interrupted) string { return in.Action }, args: true},
}

// viewOf returns the view of an interrupt kind, and for a kind this
// version does not know, one that names it a request and sends the
// reader to the inbox.
func viewOf(kind string) kindView {
	if v, ok := kindViews[kind]; ok {
		return v
	}
	return kindView{noun: "request", verb: "Respond", button: "Review and answer", heading: func(protocol.Interrupted) string { return "" }}
}
