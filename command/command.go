// Package command turns the protocol's inbound commands into engine
// commands: the one table of inbound verbs (start, resume, cancel,
// reannounce, the server's expire, the gate's request), for any transport
// that carries CloudEvents to a [engine.Runner]. The NATS worker (package
// bus) looks each message's verb up here; who sent the command is the
// [engine.Authority] the transport found, which the engine decides on.
package command

import (
	"context"
	"slices"
	"strings"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// Verb is how one inbound verb (<prefix>.in.<flow>.<verb>) is applied:
// the CloudEvent type it takes, where it may come from, and the
// translation of the event into an engine command.
type Verb struct {
	// Name is the verb, the last token of its subject.
	Name string
	// Type is the CloudEvent type the verb takes.
	Type string
	// Due is set for a verb that comes only from the server's schedules
	// (<prefix>.due.<flow>.<verb>), never from a client; every other verb
	// comes only from clients.
	Due bool
	// NeedsRun is set when the event's subject must name the run.
	NeedsRun bool
	// GateOnly is set for the tool gate's verb, taken only on the gate's
	// flow.
	GateOnly bool
	// NotOnGate is set for a verb the built-in gate and ask flows do not
	// take (their runs start by requests).
	NotOnGate bool
	// AskOnly is set for the ask's verb, <prefix>.in.ask.request.
	AskOnly bool
	// Unsupported, when set, says why this worker takes none of the
	// verb's commands (the tool gate without rules): each is refused
	// unsupported with it.
	Unsupported string
	apply       func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound) (engine.Outcome, error)
}

// Apply decodes ev's data and applies it as the verb's command for flow
// with in, which carries who sent it. A data error (*events.Error) is for
// the transport to refuse invalid_payload and dead-letter; any other
// error is for it to deliver the command again.
func (v Verb) Apply(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
	return v.apply(ctx, r, flow, ev, in)
}

// ToolRules decides which gate rule, if any, fires for a tool request: nil
// allows the call. An implementation fails closed: a rule it cannot
// evaluate fires.
type ToolRules interface {
	Rule(ctx context.Context, req protocol.ToolRequest) *engine.GateRule
}

// askKey is the ask's verb's key in a Table: the verb is request, as
// the gate's, on the ask flow.
const askKey = protocol.AskFlow + "." + protocol.VerbRequest

// Table is the inbound verbs, by name.
type Table map[string]Verb

// GateOff is why a worker without gate rules takes no tool request.
const GateOff = "the tool-call gate is off on this deployment: it has no gate rules; start the workers with --gate-rules FILE " +
	"(examples/gate/rules.yaml is a start), or put rules in the config bucket's gate.rules key"

// Verbs returns the table of inbound verbs; rules, if set, serve the
// tool gate, which is otherwise off.
func Verbs(rules ToolRules) Table {
	request := Verb{Name: protocol.VerbRequest, Type: protocol.TypeToolRequest, GateOnly: true, Unsupported: GateOff}
	consume := Verb{Name: protocol.VerbConsume, Type: protocol.TypeToolConsume, GateOnly: true, Unsupported: GateOff}
	if rules != nil {
		request.Unsupported, consume.Unsupported = "", ""
		consume.apply = func(ctx context.Context, r *engine.Runner, _ string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
			d, err := events.ParseConsume(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Consume(ctx, engine.Consume{CallID: d.CallID, ArgsDigest: d.ArgsDigest, Inbound: in})
		}
		request.apply = func(ctx context.Context, r *engine.Runner, _ string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
			d, err := events.ParseToolRequest(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Request(ctx, engine.ToolRequest{
				CallID: d.CallID, Tool: d.Tool, Server: d.Server, Args: d.Args, ConversationID: d.ConversationID, Agent: d.Agent,
				Messages: d.Messages, Context: d.Context, Origin: d.Origin, Rule: rules.Rule(ctx, d), Inbound: in,
			})
		}
	}
	t := Table{request.Name: request, consume.Name: consume}
	t[askKey] = Verb{Name: protocol.VerbRequest, Type: protocol.TypeAskRequest, AskOnly: true,
		apply: func(ctx context.Context, r *engine.Runner, _ string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
			d, err := events.ParseAsk(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Ask(ctx, engine.AskRequest{AskRequest: d, Inbound: in})
		}}
	for _, v := range []Verb{
		{Name: protocol.VerbStart, Type: protocol.TypeStart, NotOnGate: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
			d, err := events.ParseStart(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Start(ctx, engine.Start{Flow: flow, Run: ev.Subject(), State: d.State, Origin: d.Origin, By: d.By, Inbound: in})
		}},
		{Name: protocol.VerbResume, Type: protocol.TypeResume, NeedsRun: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
			d, err := events.ParseResume(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Resume(ctx, engine.Resume{
				Flow: flow, Run: ev.Subject(), Token: d.ResumeToken, RequestID: d.RequestID,
				Answers: d.Answers, Selected: d.Selected, Decision: d.Decision, Edits: d.Edits,
				Update: d.Update, Approver: d.Approver, Reason: d.Reason, Message: d.Message,
				ExpectedCheckpoint: d.ExpectedCheckpoint, IdempotencyKey: d.IdempotencyKey, Inbound: in,
			})
		}},
		{Name: protocol.VerbCancel, Type: protocol.TypeCancel, NeedsRun: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
			d, err := events.ParseCancel(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Cancel(ctx, engine.Cancel{Flow: flow, Run: ev.Subject(), Reason: d.Reason, By: d.By, Inbound: in})
		}},
		{Name: protocol.VerbReannounce, Type: protocol.TypeReannounce, NeedsRun: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
			d, err := events.ParseReannounce(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Reannounce(ctx, engine.Reannounce{Flow: flow, Run: ev.Subject(), RequestID: d.RequestID, Reason: d.Reason, By: d.By, Inbound: in})
		}},
		{Name: protocol.VerbMigrate, Type: protocol.TypeMigrate, NeedsRun: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
			d, err := events.ParseMigrate(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Migrate(ctx, engine.Migrate{Flow: flow, Run: ev.Subject(), From: d.From, To: d.To, Reason: d.Reason, By: d.By, Inbound: in})
		}},
		{Name: protocol.VerbAssign, Type: protocol.TypeAssign, NeedsRun: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
			d, err := events.ParseAssign(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Assign(ctx, engine.Assign{Flow: flow, Run: ev.Subject(), RequestID: d.RequestID, Op: d.Op, To: d.To, By: d.By, Reason: d.Reason, Inbound: in})
		}},
		{Name: protocol.VerbRemind, Type: protocol.TypeRemind, Due: true, NeedsRun: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
			d, err := events.ParseRemind(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Remind(ctx, engine.Remind{Flow: flow, Run: ev.Subject(), RequestID: d.RequestID, Inbound: in})
		}},
		{Name: protocol.VerbExpire, Type: protocol.TypeExpire, Due: true, NeedsRun: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound) (engine.Outcome, error) {
			d, err := events.ParseExpire(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Expire(ctx, engine.Expire{Flow: flow, Run: ev.Subject(), RequestID: d.RequestID, Inbound: in})
		}},
	} {
		t[v.Name] = v
	}
	return t
}

// Lookup returns the verb named name that may come from where a message
// came: the server's schedules (due) or a client, on flow (the gate's
// request only on the gate's flow, a start on any other).
func (t Table) Lookup(name, flow string, due bool) (Verb, bool) {
	key := name
	if flow == engine.AskFlowName && name == protocol.VerbRequest {
		key = askKey
	}
	v, ok := t[key]
	gate := flow == engine.GateFlowName
	builtin := gate || flow == engine.AskFlowName
	if !ok || v.Due != due || v.GateOnly && !gate || v.NotOnGate && builtin {
		return Verb{}, false
	}
	return v, true
}

// ClientVerbs lists the verbs a client sends on a flow's subjects,
// separated by |, for errors.
func (t Table) ClientVerbs() string {
	var names []string
	for name, v := range t {
		if !v.Due && !v.GateOnly && !v.AskOnly {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return strings.Join(names, "|")
}
