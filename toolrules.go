package interlock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/command"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/protocol"
)

// toolRules answers the worker's question "which rule fires?" from the
// gate's live rule set, failing closed on a rule that cannot be evaluated.
type toolRules struct {
	live *gate.Live
	log  zerolog.Logger
}

var (
	_ command.ToolRules  = (*toolRules)(nil)
	_ engine.EditChecker = (*toolRules)(nil)
)

// gateRequest is req as the gate's rules read it.
func gateRequest(req protocol.ToolRequest) gate.Request {
	var gctx map[string]any
	if len(req.Context) > 0 {
		_ = json.Unmarshal(req.Context, &gctx)
	}
	return gate.Request{CallID: req.CallID, Tool: req.Tool, Server: req.Server, Args: decodeArgs(req.Args),
		ConversationID: req.ConversationID, Agent: req.Agent, Context: gctx}
}

// decodeArgs decodes a call's args for the rules.
func decodeArgs(raw map[string]json.RawMessage) map[string]any {
	args := map[string]any{}
	for k, v := range raw {
		var x any
		if err := json.Unmarshal(v, &x); err == nil {
			args[k] = x
		}
	}
	return args
}

// CheckEdit implements [engine.EditChecker] with the gate's live rules.
func (t *toolRules) CheckEdit(ctx context.Context, rule string, req protocol.ToolRequest, final map[string]json.RawMessage) error {
	return t.live.Current().CheckEdit(ctx, rule, gateRequest(req), decodeArgs(final))
}

// Rule implements [command.ToolRules].
func (t *toolRules) Rule(ctx context.Context, req protocol.ToolRequest) *engine.GateRule {
	greq := gateRequest(req)
	m := t.live.Match(ctx, greq)
	if m.Err != nil {
		t.log.Error().Err(m.Err).Str("call_id", req.CallID).Str("tool", req.Tool).Msg("gate rule failed to evaluate; the call needs approval")
	}
	if m.Rule == nil {
		return nil
	}
	return gateRule(m.Rule, greq)
}

// gateRule is what rule r asks of the call req: the engine's gate rule,
// with the title and description filled with the call's values.
func gateRule(r *gate.Rule, req gate.Request) *engine.GateRule {
	title, description := r.Card(req)
	var q *protocol.Quorum
	if r.Quorum != nil {
		c := *r.Quorum
		c.Roles = slices.Clone(r.Quorum.Roles)
		q = &c
	}
	return &engine.GateRule{Name: r.Name, Reason: r.Reason, ApproverRole: r.ApproverRole, Timeout: r.Timeout,
		OnTimeout: policyOf(r.OnTimeout, r.Escalate), Decisions: slices.Clone(r.Decisions),
		Title: title, Description: description, ArgsSchema: bytes.Clone(r.ArgsSchema),
		Assignees: slices.Clone(r.Assignees), Quorum: q, Reminders: slices.Clone(r.Reminders), RemindEvery: r.RemindEvery}
}

// policyOf turns a rule's timeout action, and its escalations, into the
// engine's policy.
func policyOf(a gate.TimeoutAction, next *gate.Escalation) engine.Policy {
	switch a {
	case gate.Reject:
		return engine.Policy{Action: engine.OnTimeoutReject}
	case gate.Approve:
		return engine.Policy{Action: engine.OnTimeoutApprove}
	case gate.Escalate:
		if next == nil {
			return engine.Policy{}
		}
		return engine.Escalate(next.ApproverRole, next.Timeout, policyOf(next.OnTimeout, next.Escalate))
	}
	return engine.Policy{}
}

// gateService keeps the gate's rules in the config bucket and applies
// changes made there: a [Background] of the service.
type gateService struct {
	live  *gate.Live
	kv    gate.ConfigKV
	rules *gate.RuleSet
	log   zerolog.Logger
}

// Start writes the configured rules to the bucket and watches it. The
// write is retried as provisioning retries its own while a cluster's
// stream has no leader or does not answer (a node restarting into a
// cluster still electing): one attempt would end the service.
func (g *gateService) Start(ctx context.Context) error {
	if err := bus.Ensure(ctx, "the gate's rules", func(ctx context.Context) error {
		_, err := gate.Put(ctx, g.kv, g.rules)
		return err
	}); err != nil {
		return fmt.Errorf("interlock: writing the gate's rules: %w", err)
	}
	return g.live.Watch(ctx, g.kv, g.log)
}

// Stop stops watching.
func (g *gateService) Stop(ctx context.Context) error { return g.live.Stop(ctx) }

// rulesOf is t as the worker's rules: none (the gate off) when t is nil.
func rulesOf(t *toolRules) command.ToolRules {
	if t == nil {
		return nil
	}
	return t
}

// editsOf is t as the engine's edit checker: none when t is nil.
func editsOf(t *toolRules) engine.EditChecker {
	if t == nil {
		return nil
	}
	return t
}
