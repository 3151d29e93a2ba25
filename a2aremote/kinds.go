package a2aremote

import (
	"encoding/json"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/interlockhq/interlock/protocol"
)

// interruptOf is the ask of a remote agent's question: for the people
// the agent names, an approval they answer by responding (its message
// goes to the agent) or reject (the task is cancelled); for anyone, a
// question answered in the field "answer".
func interruptOf(agent Agent, f followed, text string, state a2a.TaskState) protocol.AskInterrupt {
	title := fmt.Sprintf("%s asks", agent.Name)
	if state == a2a.TaskStateAuthRequired {
		title = fmt.Sprintf("%s needs an authorization", agent.Name)
	}
	if agent.ApproverRole == "" && len(agent.Assignees) == 0 {
		return protocol.AskInterrupt{Kind: protocol.KindQuestion, Title: title,
			Questions: []protocol.Question{{Field: "answer", Question: text}}}
	}
	args, _ := json.Marshal(map[string]string{"agent": agent.Name, "taskId": f.TaskID})
	return protocol.AskInterrupt{Kind: protocol.KindApproval, Title: title, Description: text,
		Action: "answer_agent", Args: args, ApproverRole: agent.ApproverRole, Assignees: agent.Assignees,
		Decisions: []protocol.Verdict{protocol.VerdictRespond, protocol.VerdictReject}}
}
