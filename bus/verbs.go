package bus

import (
	"context"
	"slices"
	"strings"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// verb is how the worker applies the messages of one inbound subject verb
// (interlock.in.<flow>.<verb>): the CloudEvent type the subject takes, and
// the translation of the event into an engine command. A data parse error
// (*events.Error) is refused invalid_payload and dead-lettered; any other
// error has the message delivered again.
type verb struct {
	typ string
	// due: the verb comes only from the schedule stream
	// (<prefix>.due.<flow>.<verb>), published by the server from a
	// schedule the workers wrote; every other verb comes only from the
	// inbound stream.
	due bool
	// needsRun: the event's subject must name the run.
	needsRun bool
	// unsupported, when set, dead-letters every message of the verb with
	// this explanation.
	unsupported string
	apply       func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound, c caller) (engine.Outcome, error)
}

// caller is who sent a command, as far as the transport can tell: the
// approver role of a role subject, or the approver and roles an
// authenticated part of the deployment vouched for.
type caller struct {
	role         string
	vouched      bool
	approver     string
	roles        []string
	roleRequired bool
}

// ToolRules decides which gate rule, if any, fires for a tool request: nil
// allows the call. An implementation fails closed: a rule it cannot
// evaluate fires.
type ToolRules interface {
	Rule(ctx context.Context, req protocol.ToolRequest) *engine.GateRule
}

// verbs is the table of inbound verbs; rules, if set, serve the tool gate.
func verbs(rules ToolRules) map[string]verb {
	request := verb{typ: protocol.TypeToolRequest, unsupported: "the tool-call gate is not enabled on this worker (interlock serve --gate-rules FILE)"}
	if rules != nil {
		request = verb{typ: protocol.TypeToolRequest, apply: func(ctx context.Context, r *engine.Runner, _ string, ev events.Event, in engine.Inbound, _ caller) (engine.Outcome, error) {
			d, err := events.ParseToolRequest(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Request(ctx, engine.ToolRequest{
				CallID: d.CallID, Tool: d.Tool, Args: d.Args, ConversationID: d.ConversationID, Agent: d.Agent,
				Messages: d.Messages, Context: d.Context, Origin: d.Origin, Rule: rules.Rule(ctx, d), Inbound: in,
			})
		}}
	}
	return map[string]verb{
		"start": {typ: protocol.TypeStart, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound, _ caller) (engine.Outcome, error) {
			d, err := events.ParseStart(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Start(ctx, engine.Start{Flow: flow, Run: ev.Subject(), State: d.State, Origin: d.Origin, Inbound: in})
		}},
		"resume": {typ: protocol.TypeResume, needsRun: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound, c caller) (engine.Outcome, error) {
			d, err := events.ParseResume(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			cmd := engine.Resume{
				Flow: flow, Run: ev.Subject(), Token: d.ResumeToken, RequestID: d.RequestID,
				Answers: d.Answers, Selected: d.Selected, Decision: d.Decision, Edits: d.Edits,
				Update: d.Update, Approver: d.Approver, Reason: d.Reason,
				ExpectedCheckpoint: d.ExpectedCheckpoint, IdempotencyKey: d.IdempotencyKey, Inbound: in,
				RoleRequired: c.roleRequired,
			}
			switch {
			case c.vouched:
				// The caller was authenticated: no token, and the audit
				// names the caller, never a name typed in the body.
				cmd.Trusted, cmd.Approver, cmd.Roles, cmd.RolesKnown = true, c.approver, c.roles, true
				if c.role != "" {
					cmd.Roles = []string{c.role}
				}
			case c.role != "":
				cmd.Roles, cmd.RolesKnown = []string{c.role}, true
			}
			return r.Resume(ctx, cmd)
		}},
		"cancel": {typ: protocol.TypeCancel, needsRun: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound, _ caller) (engine.Outcome, error) {
			d, err := events.ParseCancel(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Cancel(ctx, engine.Cancel{Flow: flow, Run: ev.Subject(), Reason: d.Reason, By: d.By, Inbound: in})
		}},
		"reannounce": {typ: protocol.TypeReannounce, needsRun: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound, _ caller) (engine.Outcome, error) {
			d, err := events.ParseReannounce(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Reannounce(ctx, engine.Reannounce{Flow: flow, Run: ev.Subject(), RequestID: d.RequestID, Reason: d.Reason, Inbound: in})
		}},
		"expire": {typ: protocol.TypeExpire, due: true, needsRun: true, apply: func(ctx context.Context, r *engine.Runner, flow string, ev events.Event, in engine.Inbound, _ caller) (engine.Outcome, error) {
			d, err := events.ParseExpire(ev.Data())
			if err != nil {
				return engine.Outcome{}, err
			}
			return r.Expire(ctx, engine.Expire{Flow: flow, Run: ev.Subject(), RequestID: d.RequestID, Inbound: in})
		}},
		"request": request,
	}
}

// verbNames lists the flow verbs of a table, for errors.
func verbNames(vs map[string]verb) string {
	var names []string
	for name := range vs {
		if name != "request" && !vs[name].due {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return strings.Join(names, "|")
}
