package protocol

import (
	"encoding/json"
	"time"
)

// AskFlow is the name of the built-in flow that runs asks: one run per
// ask, whose run id is the askId.
const AskFlow = "ask"

// Asks' names on the wire.
const (
	// VerbAsk is an ask's inbound verb: <prefix>.in.ask.request.
	VerbAsk = VerbRequest
	// TypeAskRequest is the CloudEvent type of an ask.
	TypeAskRequest = "io.interlock.ask.requested"
	// EventAnswered is the kind of the event that settles an ask:
	// <prefix>.ev.ask.<askId>.answered.
	EventAnswered = "answered"
	// TypeAnswered is its CloudEvent type.
	TypeAnswered = "io.interlock.ask.answered"
)

// Statuses of an [Answered] ask.
const (
	AskAnswered  = "answered"
	AskExpired   = "expired"
	AskCancelled = "cancelled"
)

// AskRequest is the data of an ask (io.interlock.ask.requested): an agent
// service puts one interrupt of its own design in front of people,
// without a flow of its own.
type AskRequest struct {
	// AskID names the ask; it is the run id of the ask run, and repeating
	// it never starts a second ask.
	AskID string `json:"askId"`
	// Agent is who asks (the approval's requester).
	Agent          string `json:"agent,omitempty"`
	ConversationID string `json:"conversationId,omitempty"`
	// Messages are the conversation so far, shown to the people asked.
	Messages json.RawMessage `json:"messages,omitempty"`
	// Context is any JSON object, kept with the ask.
	Context json.RawMessage `json:"context,omitempty"`
	// Origin is echoed in every event of the ask.
	Origin json.RawMessage `json:"origin,omitempty"`
	// CallbackURL, if set, is POSTed the answered event's data when the
	// ask settles.
	CallbackURL string `json:"callbackUrl,omitempty"`
	// Interrupt is what to ask.
	Interrupt AskInterrupt `json:"interrupt"`
}

// AskInterrupt is the interrupt an ask puts in front of people: the
// fields of one kind of section 3, plus its deadline.
type AskInterrupt struct {
	// Kind is question, choice or approval.
	Kind string `json:"kind"`
	// Title is one line saying what is asked; Description (Markdown)
	// says more.
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`

	// Questions: a question ask, one or more fields to fill, each with
	// an optional JSON Schema its answer must fit.
	Questions []Question `json:"questions,omitempty"`
	// Context is guidance for a model that phrases the questions.
	Context string `json:"context,omitempty"`

	// Question, Options and Multiple: a choice ask.
	Question string   `json:"question,omitempty"`
	Options  []Option `json:"options,omitempty"`
	Multiple bool     `json:"multiple,omitempty"`

	// The fields of an approval ask: what is proposed (Action, Args,
	// ArgsSchema, Reason) and who decides how (ApproverRole, Decisions,
	// Assignees, Quorum, SeparationOfDuties, Reminders, RemindEvery).
	Action             string          `json:"action,omitempty"`
	Args               json.RawMessage `json:"args,omitempty"`
	ArgsSchema         json.RawMessage `json:"argsSchema,omitempty"`
	Reason             string          `json:"reason,omitempty"`
	ApproverRole       string          `json:"approverRole,omitempty"`
	Decisions          []Verdict       `json:"decisions,omitempty"`
	Assignees          []string        `json:"assignees,omitempty"`
	Quorum             *Quorum         `json:"quorum,omitempty"`
	SeparationOfDuties bool            `json:"separationOfDuties,omitempty"`
	// Reminders are Go durations before the deadline ("1h"); RemindEvery
	// one between reminders.
	Reminders   []string `json:"reminders,omitempty"`
	RemindEvery string   `json:"remindEvery,omitempty"`

	// Timeout is how long the ask may wait, a Go duration ("4h"); without
	// it the ask waits until it is answered or cancelled.
	Timeout string `json:"timeout,omitempty"`
	// OnTimeout is what happens then: expire (the default) for every
	// kind; reject, approve or escalate for an approval.
	OnTimeout *AskPolicy `json:"onTimeout,omitempty"`
}

// AskPolicy is an ask's onTimeout: a [Policy], whose action may also be
// written "policy" (as in {"policy": "expire"}).
type AskPolicy struct {
	Policy
	// Alias of Policy.Action.
	PolicyName string `json:"policy,omitempty"`
}

// Answered is the data of the event that settles an ask
// (io.interlock.ask.answered), also POSTed to its callbackUrl.
type Answered struct {
	AskID string `json:"askId"`
	// Status is answered, expired or cancelled.
	Status string `json:"status"`
	Kind   string `json:"kind"`
	// Answers (question), Selected (choice), Decision, Args, Message,
	// Approver, Reason and Votes (approval): the answer.
	Answers  map[string]json.RawMessage `json:"answers,omitempty"`
	Selected []string                   `json:"selected,omitempty"`
	Decision Verdict                    `json:"decision,omitempty"`
	Args     json.RawMessage            `json:"args,omitempty"`
	Message  string                     `json:"message,omitempty"`
	Approver string                     `json:"approver,omitempty"`
	Reason   string                     `json:"reason,omitempty"`
	Votes    []Vote                     `json:"votes,omitempty"`
	// Origin is the ask's origin, echoed.
	Origin json.RawMessage `json:"origin,omitempty"`
	At     time.Time       `json:"at"`
	// Receipt is the settling's receipt ([Receipt]): what a callback's
	// receiver verifies, with the deployment's audit public key.
	Receipt string `json:"receipt,omitempty"`
}
