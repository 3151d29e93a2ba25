package a2aserver

import (
	"github.com/a2aproject/a2a-go/a2a"

	"github.com/interlockhq/interlock/protocol"
)

// skills are the Agent Card's skills: one per kind an ask puts to people.
func skills(modes []string) []a2a.AgentSkill {
	return []a2a.AgentSkill{
		{ID: protocol.KindQuestion, Name: "Ask a person", Tags: []string{"human-in-the-loop", "question"}, InputModes: modes,
			Description: `Asks people a question and answers with what they wrote. Send the question as text (answered in the field "answer"), or a data part holding an ask's interrupt: {"kind":"question","questions":[{"field":"address","question":"Where should we ship it?"}]}.`,
			Examples:    []string{"Which warehouse should ship order 7?"}},
		{ID: protocol.KindChoice, Name: "Ask a person to choose", Tags: []string{"human-in-the-loop", "choice"}, InputModes: []string{"application/json"},
			Description: `Asks people to pick among options. Send a data part: {"kind":"choice","question":"Which plan?","options":[{"id":"a","label":"Plan A"},{"id":"b","label":"Plan B"}]}.`},
		{ID: protocol.KindApproval, Name: "Ask for an approval", Tags: []string{"human-in-the-loop", "approval", "tool-call"}, InputModes: []string{"application/json"},
			Description: `Asks the people of a role to approve, edit or reject a tool call, with a quorum, assignees and a deadline if given; the answer carries the decision, the arguments approved, and its signed receipt. Send a data part: {"kind":"approval","action":"issue_refund","args":{"amount":4800},"approverRole":"support","timeout":"4h"}.`},
	}
}

// textQuestion is the interrupt of a message of text only: a question
// answered in the field "answer".
func textQuestion(title, text string) map[string]any {
	return map[string]any{"kind": protocol.KindQuestion, "title": title,
		"questions": []map[string]any{{"field": "answer", "question": text}}}
}
