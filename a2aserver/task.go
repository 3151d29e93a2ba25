package a2aserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// taskPrefix begins the id of every task, and of its ask.
const taskPrefix = "a2a-"

// ArtifactID names the artifact that holds a task's answer.
const ArtifactID a2a.ArtifactID = "answer"

// taskID is the task, and ask, id of message messageID of caller: the
// same message sent again is the same task, and no caller can name
// another's.
func taskID(caller, messageID string) string {
	h := sha256.Sum256([]byte(caller + "\x00" + messageID))
	return taskPrefix + hex.EncodeToString(h[:16])
}

// origin is what an ask made of a message keeps of it, echoed in every
// event of the ask.
type origin struct {
	A2A struct {
		ContextID string `json:"contextId"`
		MessageID string `json:"messageId"`
	} `json:"a2a"`
}

// contextOf is the A2A context id an ask's origin keeps, else id.
func contextOf(raw json.RawMessage, id string) string {
	var o origin
	if json.Unmarshal(raw, &o) == nil && o.A2A.ContextID != "" {
		return o.A2A.ContextID
	}
	return id
}

// askOf makes the ask of a message of caller: its text is a question
// answered in the field "answer", unless a data part holds the ask's
// interrupt (a question, a choice, an approval), the text then its
// description. An error says what is wrong with the message and how to
// send it.
func askOf(caller authority.Caller, m *a2a.Message) (protocol.AskRequest, error) {
	if m == nil {
		return protocol.AskRequest{}, fmt.Errorf(`%w: params.message is missing: send {"message":{"role":"user","messageId":"<a UUID>","parts":[{"kind":"text","text":"<the question>"}]}}`, a2a.ErrInvalidParams)
	}
	if strings.TrimSpace(m.ID) == "" {
		return protocol.AskRequest{}, fmt.Errorf("%w: message.messageId is empty: give each message an id of its own (a UUID); the same message sent again is then the same task", a2a.ErrInvalidParams)
	}
	if m.TaskID != "" {
		return protocol.AskRequest{}, fmt.Errorf("%w: message.taskId is %q, but Interlock's tasks take one message each (a person answers it, not a further message): send a new message, without taskId, for a new ask", a2a.ErrUnsupportedOperation, m.TaskID)
	}
	var texts []string
	var data map[string]any
	for i, p := range m.Parts {
		switch p := p.(type) {
		case a2a.TextPart:
			texts = append(texts, p.Text)
		case a2a.DataPart:
			if data != nil {
				return protocol.AskRequest{}, fmt.Errorf("%w: part %d is a second data part; a message holds one ask's interrupt: send the other as a message of its own", a2a.ErrInvalidParams, i)
			}
			data = p.Data
		default:
			return protocol.AskRequest{}, fmt.Errorf("%w: part %d is a %T; Interlock takes text and data parts: put what people need to see in the text, or in the interrupt's description", a2a.ErrUnsupportedContentType, i, p)
		}
	}
	text := strings.TrimSpace(strings.Join(texts, "\n\n"))
	id := taskID(caller.Name, m.ID)
	var interrupt map[string]any
	switch {
	case data != nil:
		interrupt = make(map[string]any, len(data)+1)
		for k, v := range data {
			interrupt[k] = v
		}
		if _, ok := interrupt["description"]; !ok && text != "" {
			interrupt["description"] = text
		}
	case text == "":
		return protocol.AskRequest{}, fmt.Errorf(`%w: the message has no text and no data part: send the question as text, or a data part holding an ask's interrupt, such as {"kind":"approval","action":"issue_refund","args":{"amount":4800},"approverRole":"support"}`, a2a.ErrInvalidParams)
	default:
		title, _, _ := strings.Cut(text, "\n")
		if r := []rune(title); len(r) > 120 {
			title = string(r[:119]) + "…"
		}
		interrupt = textQuestion(title, text)
	}
	contextID := m.ContextID
	if contextID == "" {
		contextID = id
	}
	var o origin
	o.A2A.ContextID, o.A2A.MessageID = contextID, m.ID
	body, err := json.Marshal(map[string]any{"askId": id, "agent": caller.Name, "conversationId": contextID, "origin": o, "interrupt": interrupt})
	if err != nil {
		return protocol.AskRequest{}, fmt.Errorf("%w: the message's data part is not JSON: %v", a2a.ErrInvalidParams, err)
	}
	req, err := events.ParseAsk(body)
	if err != nil {
		return protocol.AskRequest{}, fmt.Errorf("%w: the ask made of the message: %s", a2a.ErrInvalidParams, strings.TrimPrefix(err.Error(), "events: "))
	}
	return req, nil
}

// taskOf is the A2A task of ask id as it stands.
func taskOf(id string, ans client.AskAnswer) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(id), ContextID: id, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	switch {
	case ans.Answered != nil:
		a := ans.Answered
		t.ContextID = contextOf(a.Origin, id)
		at := a.At
		summary := summaryOf(a)
		t.Status = a2a.TaskStatus{State: stateOf(a), Timestamp: &at, Message: agentMessage(t, summary)}
		data := map[string]any{}
		if b, err := json.Marshal(a); err == nil {
			_ = json.Unmarshal(b, &data)
		}
		delete(data, "origin")
		t.Artifacts = []*a2a.Artifact{{ID: ArtifactID, Name: "answer", Description: "The people's answer, as Interlock's answered event gives it, with the signed receipt of the decision.",
			Parts: a2a.ContentParts{a2a.DataPart{Data: data}, a2a.TextPart{Text: summary}}}}
	case ans.Pending != nil:
		in := ans.Pending
		t.ContextID = contextOf(in.Origin, id)
		what := in.Title
		if what == "" {
			what = in.Kind
		}
		t.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Message: agentMessage(t, "Waiting for a person to answer: "+what)}
		t.Metadata = map[string]any{"interlock": map[string]any{"flow": protocol.AskFlow, "run": id, "requestId": in.RequestID, "kind": in.Kind}}
	}
	return t
}

// stateOf maps how an ask settled to the task's state.
func stateOf(a *protocol.Answered) a2a.TaskState {
	switch {
	case a.Status == protocol.AskCancelled:
		return a2a.TaskStateCanceled
	case a.Status == protocol.AskExpired:
		return a2a.TaskStateFailed
	case a.Decision == protocol.VerdictReject:
		return a2a.TaskStateRejected
	}
	return a2a.TaskStateCompleted
}

// summaryOf says in a line how an ask settled.
func summaryOf(a *protocol.Answered) string {
	switch {
	case a.Status == protocol.AskCancelled:
		return "Cancelled" + because(a.Reason)
	case a.Status == protocol.AskExpired:
		return "Nobody answered in time"
	case a.Decision != "":
		s := fmt.Sprintf("%s by %s", verdictWord(a.Decision), a.Approver)
		return s + because(a.Reason)
	case len(a.Selected) > 0:
		return "Chose " + strings.Join(a.Selected, ", ")
	}
	if v, ok := a.Answers["answer"]; ok && len(a.Answers) == 1 {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	b, _ := json.Marshal(a.Answers)
	return "Answered " + string(b)
}

func because(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

func verdictWord(v protocol.Verdict) string {
	switch v {
	case protocol.VerdictApprove:
		return "Approved"
	case protocol.VerdictEdit:
		return "Approved with edits"
	case protocol.VerdictReject:
		return "Rejected"
	}
	return string(v)
}

// agentMessage is a status message of the task, from the agent.
func agentMessage(t *a2a.Task, text string) *a2a.Message {
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, t, a2a.TextPart{Text: text})
	// A status message's id is the task's and its state's, the same on
	// every read.
	h := sha256.Sum256([]byte(text))
	m.ID = string(t.ID) + "-" + hex.EncodeToString(h[:6])
	return m
}
