package mcpserver

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/interlockhq/interlock/protocol"
)

// kindView is how the MCP server puts one kind of interrupt to the model:
// the server's template of the kind. Checking an answer is the kind's
// [protocol.Spec]; every kind of [protocol.Kinds] has a view
// (TestEveryInterruptKindHasAView).
type kindView struct {
	// next tells the model what to do about the interrupt.
	next string
	// answer tells the model what continue_flow takes for it.
	answer string
	// form is the form that asks the interrupt of the user by MCP
	// elicitation, or nil when a form cannot ask it (then the model asks
	// in conversation); fromForm puts what the user gave in the form
	// into the answer. A kind has both or neither.
	form     func(in protocol.Interrupted) *mcp.ElicitParams
	fromForm func(content map[string]any, in *ContinueInput)
}

// kindViews are the views of the kinds.
var kindViews = map[string]kindView{
	protocol.KindQuestion: {
		next:   "Ask the user the questions in one natural message, following hiddenContext without showing it, then call continue_flow with stateUpdates keyed by field.",
		answer: "answer with stateUpdates, keyed by the questions' fields, and nothing else",
		form:   func(in protocol.Interrupted) *mcp.ElicitParams { return questionForm(in.Questions) },
		fromForm: func(content map[string]any, in *ContinueInput) {
			in.StateUpdates = content
		},
	},
	protocol.KindChoice: {
		next:   "Offer the user the options, then call continue_flow with selected, the ids chosen.",
		answer: "answer with selected, the ids of the options chosen, and nothing else",
		form:   choiceForm,
		fromForm: func(content map[string]any, in *ContinueInput) {
			switch v := content["selected"].(type) {
			case string:
				in.Selected = []string{v}
			case []any:
				for _, id := range v {
					if s, ok := id.(string); ok {
						in.Selected = append(in.Selected, s)
					}
				}
			}
		},
	},
	protocol.KindApproval: {
		next:   "Show the user the proposed action and its args, and ask for a decision; then call continue_flow with decision approve, edit (with edits) or reject (with a reason), or, where decisions list it, respond (with message, the user's answer in place of a decision).",
		answer: "send decision approve, edit (with edits, the args to change), reject (with a reason) or, where the approval lists it, respond (with message), not stateUpdates or selected",
	},
}

// viewOf returns the view of an interrupt kind, and for a kind this
// version does not know, one that sends the model to get_run.
func viewOf(kind string) kindView {
	if v, ok := kindViews[kind]; ok {
		return v
	}
	return kindView{next: "Call get_run to see what the run waits on.", answer: "get_run shows what it asks"}
}
