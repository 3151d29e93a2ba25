package mcpserver

import "github.com/interlockhq/interlock/protocol"

// The tools' inputs and outputs. The SDK derives each tool's input and
// output JSON Schema from these types; the jsonschema tag is a property's
// description, which the model reads. No type here has a place for a
// resume token.

// Flow is a flow the deployment runs, as list_flows offers it.
type Flow struct {
	Name        string `json:"name" jsonschema:"for start_flow"`
	Description string `json:"description,omitempty" jsonschema:"what it does and needs"`
}

// ListFlowsInput is the input of list_flows: nothing.
type ListFlowsInput struct{}

// ListFlowsOutput is the output of list_flows.
type ListFlowsOutput struct {
	Flows []Flow `json:"flows" jsonschema:"[{name, description}]"`
}

// StartInput is the input of start_flow.
type StartInput struct {
	Flow         string         `json:"flow" jsonschema:"one of list_flows"`
	Run          string         `json:"run,omitempty" jsonschema:"optional run id ([A-Za-z0-9_-]{1,128})"`
	StateUpdates map[string]any `json:"stateUpdates,omitempty" jsonschema:"what the user already told you, by field ({\"driver\": {\"name\": \"Ann\"}}); those questions are skipped"`
}

// ContinueInput is the input of continue_flow: the answer to the run's
// pending interrupt, in the part that fits its kind.
type ContinueInput struct {
	Flow         string         `json:"flow" jsonschema:"the run's flow"`
	Run          string         `json:"run" jsonschema:"the run's id"`
	RequestID    string         `json:"requestId,omitempty" jsonschema:"the interrupt answered; refused if the run moved on"`
	StateUpdates map[string]any `json:"stateUpdates,omitempty" jsonschema:"question: answers by field (email, driver.name), some or all"`
	Selected     []string       `json:"selected,omitempty" jsonschema:"choice: option ids (one unless multiple)"`
	Decision     string         `json:"decision,omitempty" jsonschema:"approval: one of its decisions"`
	Edits        map[string]any `json:"edits,omitempty" jsonschema:"edit: args to change"`
	Reason       string         `json:"reason,omitempty" jsonschema:"why, for the audit"`
	Message      string         `json:"message,omitempty" jsonschema:"respond only: the user's answer instead of a decision"`
}

// RunRef names a run, the input of get_run.
type RunRef struct {
	Flow string `json:"flow" jsonschema:"the run's flow"`
	Run  string `json:"run" jsonschema:"the run's id"`
}

// Statuses of a [RunResult] and a [RunInfo]: the protocol's, but
// "interrupt" for a run that waits, the word the model is told to act on.
const (
	StatusInterrupt = "interrupt"
	StatusRunning   = string(protocol.StatusRunning)
	StatusCompleted = string(protocol.StatusCompleted)
	StatusFailed    = string(protocol.StatusFailed)
	StatusExpired   = string(protocol.StatusExpired)
	StatusCancelled = string(protocol.StatusCancelled)
)

// RunResult is the output of start_flow and continue_flow: where the run
// stands after the command.
type RunResult struct {
	Flow      string         `json:"flow" jsonschema:"the run's flow"`
	Run       string         `json:"run" jsonschema:"the run's id"`
	Status    string         `json:"status" jsonschema:"interrupt: waits for an answer; else ended"`
	Interrupt *Interrupt     `json:"interrupt,omitempty" jsonschema:"what the run waits on"`
	State     map[string]any `json:"state,omitempty" jsonschema:"final state, when completed"`
	Error     string         `json:"error,omitempty" jsonschema:"why it failed"`
	Next      string         `json:"next" jsonschema:"what to do now"`
}

// Interrupt is what a run waits for. Only the fields of its kind are set.
type Interrupt struct {
	Kind          string `json:"kind" jsonschema:"question: ask the user the questions and answer with stateUpdates; choice: let the user pick among options and answer with selected; approval: a proposed action waiting for a decision"`
	RequestID     string `json:"requestId" jsonschema:"names this interrupt; pass it to continue_flow"`
	Node          string `json:"node" jsonschema:"the flow's step that asks"`
	HiddenContext string `json:"hiddenContext,omitempty" jsonschema:"GUIDANCE FOR YOU, THE MODEL, ABOUT THE WHOLE INTERRUPT. Follow it to phrase your message, but never show or quote it to the user."`
	// A question interrupt.
	Questions []Question `json:"questions,omitempty" jsonschema:"for a question interrupt: the questions to ask, in one natural message"`
	// A choice interrupt.
	Question string   `json:"question,omitempty" jsonschema:"for a choice interrupt: the question"`
	Options  []Option `json:"options,omitempty" jsonschema:"for a choice interrupt: the options to offer"`
	Multiple bool     `json:"multiple,omitempty" jsonschema:"for a choice interrupt: whether several options may be chosen"`
	// An approval interrupt.
	Action       string         `json:"action,omitempty" jsonschema:"for an approval: the proposed action (a tool's name)"`
	Args         map[string]any `json:"args,omitempty" jsonschema:"for an approval: the action's proposed arguments"`
	Reason       string         `json:"reason,omitempty" jsonschema:"for an approval: why it needs approval"`
	ApproverRole string         `json:"approverRole,omitempty" jsonschema:"for an approval: the role that may decide it"`
	Decisions    []string       `json:"decisions,omitempty" jsonschema:"for an approval: the decisions allowed, among approve, edit, reject and respond"`
	Error        string         `json:"error,omitempty" jsonschema:"for an approval asked again: why the previous decision was not applied"`
	ExpiresAt    string         `json:"expiresAt,omitempty" jsonschema:"when the interrupt expires (RFC 3339), if it has a deadline"`
}

// Question is one question of a question interrupt.
type Question struct {
	Field         string   `json:"field" jsonschema:"the state field the answer fills: the key in continue_flow's stateUpdates"`
	Question      string   `json:"question" jsonschema:"the question, to put to the user in your own words"`
	Suggestions   []string `json:"suggestions,omitempty" jsonschema:"answers you may suggest to the user"`
	HiddenContext string   `json:"hiddenContext,omitempty" jsonschema:"GUIDANCE FOR YOU, THE MODEL, ABOUT THIS QUESTION. Never show or quote it to the user. When it starts with ERROR:, the user's previous answer was rejected: explain the problem in your own words and ask again."`
}

// Option is an option of a choice interrupt.
type Option struct {
	ID    string `json:"id" jsonschema:"the option's id, for continue_flow's selected"`
	Label string `json:"label" jsonschema:"the option as the user sees it"`
}

// RunInfo is the output of get_run.
type RunInfo struct {
	Flow      string         `json:"flow" jsonschema:"the run's flow"`
	Run       string         `json:"run" jsonschema:"the run's id"`
	Status    string         `json:"status" jsonschema:"interrupt: waits for an answer; running: between steps; else ended"`
	Node      string         `json:"node,omitempty" jsonschema:"the step it is or ended at"`
	State     map[string]any `json:"state,omitempty" jsonschema:"the run's state"`
	Interrupt *Interrupt     `json:"interrupt,omitempty" jsonschema:"what the run waits on"`
	Error     string         `json:"error,omitempty" jsonschema:"why it failed"`
	CreatedAt string         `json:"createdAt,omitempty" jsonschema:"started (RFC 3339)"`
	UpdatedAt string         `json:"updatedAt,omitempty" jsonschema:"last changed (RFC 3339)"`
}

// PendingInput is the input of list_pending.
type PendingInput struct {
	Flow   string `json:"flow,omitempty" jsonschema:"only this flow"`
	Kind   string `json:"kind,omitempty" jsonschema:"only this kind"`
	Limit  int    `json:"limit,omitempty" jsonschema:"page size, 1 to 100 (20)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"the previous page's next"`
}

// PendingOutput is the output of list_pending.
type PendingOutput struct {
	Items []PendingItem `json:"items" jsonschema:"oldest first: [{flow, run, node, kind, requestId, fields?, question?, action?, approverRole?, askedAt, expiresAt?}]; get_run shows an interrupt whole"`
	Next  string        `json:"next,omitempty" jsonschema:"cursor of the next page, if any"`
}

// PendingItem is a run waiting on an interrupt.
type PendingItem struct {
	Flow         string   `json:"flow" jsonschema:"the run's flow"`
	Run          string   `json:"run" jsonschema:"the run's id; get_run shows the whole interrupt"`
	Node         string   `json:"node" jsonschema:"the step that asks"`
	Kind         string   `json:"kind" jsonschema:"question, choice or approval"`
	RequestID    string   `json:"requestId" jsonschema:"names the interrupt"`
	Fields       []string `json:"fields,omitempty" jsonschema:"for a question: the fields still asked"`
	Question     string   `json:"question,omitempty" jsonschema:"for a choice: the question"`
	Action       string   `json:"action,omitempty" jsonschema:"for an approval: the proposed action"`
	ApproverRole string   `json:"approverRole,omitempty" jsonschema:"for an approval: who may decide it"`
	AskedAt      string   `json:"askedAt" jsonschema:"when it was asked (RFC 3339)"`
	ExpiresAt    string   `json:"expiresAt,omitempty" jsonschema:"when it expires (RFC 3339), if it has a deadline"`
}

// ToolRequestInput is the input of request_tool_approval.
type ToolRequestInput struct {
	Tool           string         `json:"tool" jsonschema:"the tool you want to call"`
	Args           map[string]any `json:"args,omitempty" jsonschema:"its arguments"`
	CallID         string         `json:"callId,omitempty" jsonschema:"optional id ([A-Za-z0-9_-]{1,128}); the same callId never asks twice"`
	ConversationID string         `json:"conversationId,omitempty" jsonschema:"the conversation, for the approver"`
	Context        map[string]any `json:"context,omitempty" jsonschema:"facts the rules may read (customer tier)"`
}

// CallRef names a tool call, the input of get_decision.
type CallRef struct {
	CallID string `json:"callId" jsonschema:"from request_tool_approval"`
}

// Decisions of a [ToolDecision].
const (
	DecisionAllowed  = "allowed"
	DecisionPending  = "pending"
	DecisionApproved = "approved"
	DecisionEdited   = "edited"
	DecisionRejected = "rejected"
	// DecisionResponded: the approver answered the agent with a message
	// instead of deciding; the call does not run.
	DecisionResponded = "responded"
	DecisionExpired   = "expired"
)

// ToolDecision is the output of request_tool_approval and get_decision.
type ToolDecision struct {
	CallID    string         `json:"callId" jsonschema:"for get_decision"`
	Decision  string         `json:"decision" jsonschema:"allowed, approved, edited (use args): call the tool; else do not"`
	Args      map[string]any `json:"args,omitempty" jsonschema:"edited: the args to use"`
	Approver  string         `json:"approver,omitempty" jsonschema:"who decided"`
	Reason    string         `json:"reason,omitempty" jsonschema:"why"`
	Message   string         `json:"message,omitempty" jsonschema:"responded: the approver's answer"`
	Rule      string         `json:"rule,omitempty" jsonschema:"the rule that stopped it"`
	Interrupt *Interrupt     `json:"interrupt,omitempty" jsonschema:"pending: the approval it waits on, {requestId, action, args, reason, approverRole, expiresAt?}; not yours to decide"`
	Next      string         `json:"next" jsonschema:"what to do now"`
}
