package mcpserver

// The tools' inputs and outputs. The SDK derives each tool's input and
// output JSON Schema from these types; the jsonschema tag is a property's
// description, which the model reads. No type here has a place for a
// resume token.

// Flow is a flow the deployment runs, as list_flows offers it.
type Flow struct {
	Name        string `json:"name" jsonschema:"the flow's name, for start_flow"`
	Description string `json:"description,omitempty" jsonschema:"what the flow does and what the user must give"`
}

// ListFlowsInput is the input of list_flows: nothing.
type ListFlowsInput struct{}

// ListFlowsOutput is the output of list_flows.
type ListFlowsOutput struct {
	Flows []Flow `json:"flows" jsonschema:"the flows this server offers"`
}

// StartInput is the input of start_flow.
type StartInput struct {
	Flow         string         `json:"flow" jsonschema:"the flow to start, one of list_flows"`
	Run          string         `json:"run,omitempty" jsonschema:"optional id for the new run (1 to 128 of A-Z a-z 0-9 _ -); a fresh one when absent"`
	StateUpdates map[string]any `json:"stateUpdates,omitempty" jsonschema:"initial state: what the user has already told you, by field name, nesting objects for nested fields ({\"driver\": {\"name\": \"Ann\"}}); questions whose fields are given here are not asked"`
}

// ContinueInput is the input of continue_flow: the answer to the run's
// pending interrupt, in the part that fits its kind.
type ContinueInput struct {
	Flow         string         `json:"flow" jsonschema:"the run's flow"`
	Run          string         `json:"run" jsonschema:"the run's id, as start_flow or list_pending gave it"`
	RequestID    string         `json:"requestId,omitempty" jsonschema:"the requestId of the interrupt you are answering; when given, an answer that arrives after the run has moved on is refused instead of answering the next interrupt"`
	StateUpdates map[string]any `json:"stateUpdates,omitempty" jsonschema:"for a question interrupt: the answers, keyed by the questions' field names (such as email or driver.name); answer some or all of the fields asked"`
	Selected     []string       `json:"selected,omitempty" jsonschema:"for a choice interrupt: the ids of the options chosen (exactly one unless the choice is multiple)"`
	Decision     string         `json:"decision,omitempty" jsonschema:"for an approval interrupt: approve, edit, reject or respond (one of the interrupt's decisions)"`
	Edits        map[string]any `json:"edits,omitempty" jsonschema:"with decision edit: the args to change, merged over the proposed args key by key"`
	Reason       string         `json:"reason,omitempty" jsonschema:"with a decision: why, for the audit record"`
	Message      string         `json:"message,omitempty" jsonschema:"with decision respond, and only then: the user's answer to whoever proposed the action, in place of a decision (the action does not run)"`
}

// RunRef names a run, the input of get_run.
type RunRef struct {
	Flow string `json:"flow" jsonschema:"the run's flow"`
	Run  string `json:"run" jsonschema:"the run's id"`
}

// Statuses of a [RunResult] and a [RunInfo].
const (
	StatusInterrupt = "interrupt"
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusExpired   = "expired"
	StatusCancelled = "cancelled"
)

// RunResult is the output of start_flow and continue_flow: where the run
// stands after the command.
type RunResult struct {
	Flow      string         `json:"flow" jsonschema:"the run's flow"`
	Run       string         `json:"run" jsonschema:"the run's id, for continue_flow and get_run"`
	Status    string         `json:"status" jsonschema:"interrupt: the run waits for the answer the interrupt describes; completed, failed, expired or cancelled: the run has ended"`
	Interrupt *Interrupt     `json:"interrupt,omitempty" jsonschema:"what the run waits for, when status is interrupt"`
	State     map[string]any `json:"state,omitempty" jsonschema:"the run's final state, when status is completed"`
	Error     string         `json:"error,omitempty" jsonschema:"why the run failed, when status is failed"`
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
	Status    string         `json:"status" jsonschema:"interrupt: waiting for the answer the interrupt describes; running: between two steps; completed, failed, expired or cancelled: ended"`
	Node      string         `json:"node,omitempty" jsonschema:"the step the run is at, or ended at"`
	State     map[string]any `json:"state,omitempty" jsonschema:"the run's state"`
	Interrupt *Interrupt     `json:"interrupt,omitempty" jsonschema:"what the run waits for, when status is interrupt"`
	Error     string         `json:"error,omitempty" jsonschema:"why the run failed"`
	CreatedAt string         `json:"createdAt,omitempty" jsonschema:"when the run started (RFC 3339)"`
	UpdatedAt string         `json:"updatedAt,omitempty" jsonschema:"when the run last changed (RFC 3339)"`
}

// PendingInput is the input of list_pending.
type PendingInput struct {
	Flow   string `json:"flow,omitempty" jsonschema:"only this flow's runs"`
	Kind   string `json:"kind,omitempty" jsonschema:"only interrupts of this kind: question, choice or approval"`
	Limit  int    `json:"limit,omitempty" jsonschema:"the most runs a page holds, 1 to 100; 20 when absent"`
	Cursor string `json:"cursor,omitempty" jsonschema:"the next of the previous page, to read the following one"`
}

// PendingOutput is the output of list_pending.
type PendingOutput struct {
	Items []PendingItem `json:"items" jsonschema:"runs waiting on an interrupt, oldest asked first"`
	Next  string        `json:"next,omitempty" jsonschema:"pass as cursor to read the next page; absent on the last page"`
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
	Tool           string         `json:"tool" jsonschema:"the name of the tool you want to call"`
	Args           map[string]any `json:"args,omitempty" jsonschema:"the arguments you want to call it with"`
	CallID         string         `json:"callId,omitempty" jsonschema:"optional id of this call (1 to 128 of A-Z a-z 0-9 _ -); a fresh one when absent. Asking again with the same callId never asks twice"`
	ConversationID string         `json:"conversationId,omitempty" jsonschema:"the conversation the call belongs to, for the approver and the rules"`
	Context        map[string]any `json:"context,omitempty" jsonschema:"anything the gate's rules may read, such as the customer's tier"`
}

// CallRef names a tool call, the input of get_decision.
type CallRef struct {
	CallID string `json:"callId" jsonschema:"the callId request_tool_approval returned"`
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
	CallID    string         `json:"callId" jsonschema:"the call's id, for get_decision"`
	Decision  string         `json:"decision" jsonschema:"allowed, approved or edited: call the tool (with args when edited); rejected or expired: do not call it; responded: do not call it, and read message, the approver's answer to you; pending: a person must decide first, ask again later with get_decision"`
	Args      map[string]any `json:"args,omitempty" jsonschema:"when edited: the arguments to call the tool with, instead of yours"`
	Approver  string         `json:"approver,omitempty" jsonschema:"who decided"`
	Reason    string         `json:"reason,omitempty" jsonschema:"why they decided so"`
	Message   string         `json:"message,omitempty" jsonschema:"when responded: the approver's answer to you, in place of a decision"`
	Rule      string         `json:"rule,omitempty" jsonschema:"the gate rule that stopped the call"`
	Interrupt *Interrupt     `json:"interrupt,omitempty" jsonschema:"when pending: the approval the call waits on (for you to tell the user; you cannot decide it)"`
	Next      string         `json:"next" jsonschema:"what to do now"`
}
