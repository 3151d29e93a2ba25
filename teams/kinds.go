package teams

import "github.com/interlockhq/interlock/protocol"

// kindView is how a Teams card presents one kind of interrupt: the
// card's template of the kind. Checking an answer is the kind's
// [protocol.Spec]; every kind of [protocol.Kinds] has a view
// (TestEveryInterruptKindHasAView). A kind this version does not know
// gets a card with its heading, and its page in the inbox.
type kindView struct {
	// body is what the card lists of what the interrupt asks, below its
	// description.
	body func(in protocol.Interrupted) []element
	// action is set when the card names the interrupt's action among
	// its facts (an approval with a title of its own).
	action bool
}

// kindViews are the views of the kinds.
var kindViews = map[string]kindView{
	protocol.KindQuestion: {body: func(in protocol.Interrupted) []element {
		var out []element
		for _, q := range in.Questions {
			out = append(out, textBlock("- "+plain(q.Question, maxLine)))
		}
		return out
	}},
	protocol.KindChoice: {body: func(in protocol.Interrupted) []element {
		var out []element
		if in.Title != "" && in.Question != "" {
			out = append(out, textBlock(plain(in.Question, maxLine)))
		}
		for _, o := range in.Options {
			out = append(out, textBlock("- "+plain(o.Label, maxLine)))
		}
		return out
	}},
	protocol.KindApproval: {body: func(protocol.Interrupted) []element { return nil }, action: true},
}
