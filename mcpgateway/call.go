package mcpgateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// MetaKey is the key, in a tool result's _meta, of what the gate said
// about the call: {callId, decision, approver?, reason?, rule?}. Clients
// may read it; the model reads the result's text.
const MetaKey = "io.interlock/gate"

// Decisions in a result's MetaKey, beside the gate's own (allowed,
// approved, edited, rejected, responded, expired).
const (
	// DecisionPending: the call waits for a person; it has not run.
	DecisionPending = "pending"
)

// maxGenerations bounds the chain of call ids one call may take (a new
// one each time its decision has outlived the repeat window).
const maxGenerations = 1000

// Gate is what the gate said about a call, as a result's MetaKey holds
// it.
type Gate struct {
	CallID   string `json:"callId"`
	Decision string `json:"decision"`
	Approver string `json:"approver,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Rule     string `json:"rule,omitempty"`
}

// handler gates and forwards the calls of the tool shown as name.
func (g *Gateway) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		g.mu.Lock()
		r, ok := g.routes[name]
		if g.closed {
			g.mu.Unlock()
			return failed(Gate{}, "The call of %s did not run: the gateway is shutting down. Call it again once it is back.", name), nil
		}
		g.calls.Add(1)
		g.mu.Unlock()
		defer g.calls.Done()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(g.done, cancel)()
		if !ok {
			return failed(Gate{}, "Tool %s is no longer offered by its server: list the tools again.", name), nil
		}
		return g.call(ctx, req, name, r), nil
	}
}

// call puts one call through the gate and, when the gate lets it, to the
// upstream. The gate is asked about the tool as its upstream names it and
// offers it (server and tool), never about the name the gateway shows, so
// that a tool renamed or shadowed by another upstream's stays held by the
// rules that name it.
func (g *Gateway) call(ctx context.Context, req *mcp.CallToolRequest, name string, r route) *mcp.CallToolResult {
	args, err := argsOf(req.Params.Arguments)
	if err != nil {
		return failed(Gate{}, "The arguments of %s are not a JSON object (%v): call it again with an object of its arguments.", name, err)
	}
	digest, err := protocol.ArgsDigest(args)
	if err != nil {
		return failed(Gate{}, "The arguments of %s do not encode (%v): call it again with an object of its arguments.", name, err)
	}
	agent, info := g.agent(req.Session)
	c := g.client(agent)
	ctxv, err := json.Marshal(map[string]any{"upstream": r.up.cfg.Name, "upstreamTool": r.tool.Name, "shownAs": name, "client": info})
	if err != nil {
		return failed(Gate{}, "The call of %s did not run: %v.", name, err)
	}
	// A client that takes tasks gets a task handle as soon as the call
	// waits for a person, instead of waiting for the decision.
	slot, tasks := ctx.Value(taskSlotKey{}).(*taskSlot)
	ask := c.RequestTool
	if tasks {
		ask = c.AskTool
	}
	var skip string
	for range maxConflicts {
		callID, err := g.callID(ctx, c, agent, r, digest, skip)
		if err != nil {
			return failed(Gate{}, "The call of %s did not run: reading its earlier decisions from Interlock failed (%v). Tell the user the approval service cannot be reached.", name, err)
		}
		tr := protocol.ToolRequest{CallID: callID, Tool: r.tool.Name, Server: r.up.cfg.Name, Args: args, Agent: agent, Context: ctxv}
		ans, err := ask(ctx, tr, g.cfg.Wait)
		var ref *client.RefusedError
		switch {
		case errors.As(err, &ref) && ref.Refused.Code == protocol.CodeRunExists:
			// The id names another call (someone requested it with other
			// args, or as someone else): not this call's to answer. Take
			// the next id of the chain.
			g.log.Warn().Str("call_id", callID).Str("tool", r.tool.Name).Str("upstream", r.up.cfg.Name).Str("reason", ref.Refused.Message).
				Msg("mcp gateway: a call id of this call names another call; asking under the next one")
			skip = callID
			continue
		case errors.As(err, &ref) && ref.Refused.Code == protocol.CodeUnsupported:
			return failed(Gate{CallID: callID}, "The call of %s did not run: the approval gate is off in this deployment (%s). Tell the user its operator must turn it on (interlock serve --gate-rules FILE); do not retry.", name, ref.Refused.Message)
		case errors.As(err, &ref):
			return failed(Gate{CallID: callID}, "The call of %s did not run: Interlock refused it (%s): %s", name, ref.Refused.Code, ref.Refused.Message)
		case errors.Is(err, client.ErrNoAnswer):
			return failed(Gate{CallID: callID}, "The call of %s did not run: the approval service did not answer within %s. Tell the user; call it again later with the same arguments (callId %s).", name, g.cfg.Wait, callID)
		case err != nil:
			return failed(Gate{CallID: callID}, "The call of %s did not run: asking the approval gate failed (%s).", name, strings.TrimPrefix(err.Error(), "client: "))
		case ans.Pending != nil && tasks:
			task, err := g.newTask(ctx, c, agent, callID)
			if err != nil {
				return failed(Gate{CallID: callID}, "The call of %s waits for a person's approval (callId %s), but reading its task back from Interlock failed (%v). Call it again later with the same arguments.", name, callID, err)
			}
			slot.task = task
			return pending(name, callID, *ans.Pending)
		case ans.Pending != nil:
			return pending(name, callID, *ans.Pending)
		case ans.Decided == nil:
			return failed(Gate{CallID: callID}, "The call of %s did not run: the approval gate gave no answer; call it again later with the same arguments.", name)
		}
		return g.outcome(ctx, c, r, name, callID, *ans.Decided, req.Params.Arguments, digest, g.cfg.Wait)
	}
	return failed(Gate{}, "The call of %s did not run: %d of its call ids name other calls. Tell the user the approval service is being interfered with.", name, maxConflicts)
}

// maxConflicts bounds the call ids one call tries when the ids it takes
// name other calls.
const maxConflicts = 8

// outcome is the result of a decided call: the upstream's result when
// the gate lets it run, else why it did not run. The decision must be
// about this call (its tool, upstream and args, of digest); an approval
// is taken in Interlock, once, before its approved args (never the call's
// own) are forwarded. A take whose outcome was not learned is finished by
// a settler, waited for up to wait (0: until it is settled, for a task,
// whose result is polled for).
func (g *Gateway) outcome(ctx context.Context, c *client.Client, r route, name, callID string, d protocol.Decided, args json.RawMessage, digest string, wait time.Duration) *mcp.CallToolResult {
	gate := Gate{CallID: callID, Decision: d.Decision, Approver: d.Approver, Reason: d.Reason, Rule: d.Rule}
	if d.Tool != r.tool.Name || d.Server != r.up.cfg.Name || d.ArgsDigest != digest {
		g.log.Error().Str("call_id", callID).Str("tool", r.tool.Name).Str("upstream", r.up.cfg.Name).Str("decided_tool", d.Tool).Str("decided_server", d.Server).
			Msg("mcp gateway: a decision is about another call than the one made; it did not run")
		return failed(gate, "The call of %s did not run: the decision Interlock gave under callId %s is about another call. Tell the user the approval service is being interfered with.", name, callID)
	}
	switch d.Decision {
	case protocol.DecidedAllowed:
		// No one was asked; the gate's receipt says it allowed this call.
		if _, err := c.VerifyDecided(ctx, d); err != nil && !errors.Is(err, client.ErrReceipt) {
			return failed(gate, "The call of %s did not run: its receipt could not be verified now (%s). Call it again with the same arguments.", name, strings.TrimPrefix(err.Error(), "client: "))
		} else if err != nil {
			g.log.Error().Err(err).Str("call_id", callID).Msg("mcp gateway: an allowed call's receipt does not hold; the call did not run")
			return failed(gate, "The call of %s did not run: the gate's signed receipt for it does not hold (%s). Tell the user.", name, strings.TrimPrefix(err.Error(), "client: "))
		}
		return g.forward(ctx, r, gate, args)
	case protocol.DecidedApproved, protocol.DecidedEdited:
		// From the take on, the call is the gateway's to finish: a
		// caller that stops waiting (its request cancelled, its client
		// gone) must leave neither the take's outcome unlearned nor an
		// approval taken and its call unrun. Only the gateway's closing
		// ends it.
		caller := ctx
		ctx, stop := g.detach(ctx)
		defer stop()
		if s := g.settlerOf(callID); s != nil {
			// This call, made before, left takes unanswered: the
			// gateway is finishing it.
			return g.await(caller, s, gate, name, d.Decision, wait)
		}
		// Consume checks that d.Args are the args the receipt states.
		_, err := c.Consume(ctx, d)
		var un *client.UnsettledError
		if errors.As(err, &un) {
			g.log.Warn().Err(err).Str("call_id", callID).Msg("mcp gateway: the outcome of a take of an approval was not learned; the gateway sends it again until it is, and runs the call if it took the approval")
			return g.await(caller, g.unsettled(c, r, gate, name, d, un.EventID), gate, name, d.Decision, wait)
		}
		if err != nil {
			return g.notTaken(gate, name, d, err)
		}
		if g.taken != nil {
			g.taken(caller)
		}
		return g.forward(ctx, r, gate, d.Args)
	case protocol.DecidedRejected:
		return failed(gate, "The call of %s was rejected by %s and did not run. Their reason: %s. Tell the user, and do not retry it unchanged.", name, or(d.Approver, "the approver"), or(d.Reason, "none given"))
	case protocol.DecidedExpired:
		return failed(gate, "The call of %s did not run: nobody approved it in time. Tell the user.", name)
	case "responded":
		return failed(gate, "The call of %s did not run: %s answered instead of approving it: %s. Tell the user, or act on the answer.", name, or(d.Approver, "the approver"), d.Message)
	}
	return failed(gate, "The call of %s did not run: the approval gate decided %q, which this gateway does not know.", name, d.Decision)
}

// detach is ctx without its caller's cancellation, ended only when the
// gateway closes (or stop is called): for the part of a call that must
// finish once begun.
func (g *Gateway) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unhook := context.AfterFunc(g.done, cancel)
	return ctx, func() { unhook(); cancel() }
}

// forward sends an allowed call to its upstream, with args, and returns
// the upstream's result with the gate's word in _meta.
func (g *Gateway) forward(ctx context.Context, r route, gate Gate, args json.RawMessage) *mcp.CallToolResult {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res, err := r.up.cs.CallTool(ctx, &mcp.CallToolParams{Name: r.tool.Name, Arguments: args})
	if err != nil {
		return failed(gate, "The call was %s, but its server (%s) failed: %v.", gate.Decision, r.up.cfg.Name, err)
	}
	withGate(res, gate)
	return res
}

// pending is the result of a call still waiting for a person.
func pending(name, callID string, in protocol.Interrupted) *mcp.CallToolResult {
	msg := fmt.Sprintf("The call of %s needs a person's approval and has not run yet%s", name, waitsFor(in))
	msg += fmt.Sprintf(" Tell the user it awaits approval (callId %s). Call %s again with the same arguments later to get the outcome: it will not ask twice.", callID, name)
	return failed(Gate{CallID: callID, Decision: DecisionPending, Reason: in.Reason}, "%s", msg)
}

// waitsFor says who a waiting call waits for, until when, and why: " (it
// waits for the supervisor role until T). Why: ...", a sentence's end.
func waitsFor(in protocol.Interrupted) string {
	var b strings.Builder
	if in.ApproverRole != "" {
		fmt.Fprintf(&b, " (it waits for the %s role", in.ApproverRole)
		if in.ExpiresAt != nil {
			fmt.Fprintf(&b, " until %s", in.ExpiresAt.UTC().Format(time.RFC3339))
		}
		b.WriteString(")")
	}
	b.WriteString(".")
	if r := strings.TrimSpace(in.Reason); r != "" {
		fmt.Fprintf(&b, " Why: %s", r)
		if !strings.HasSuffix(r, ".") {
			b.WriteString(".")
		}
	}
	return b.String()
}

// failed is a tool error result the model reads: the call did not run.
func failed(gate Gate, format string, args ...any) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
	if gate.CallID != "" {
		withGate(res, gate)
	}
	return res
}

// withGate records what the gate said in res's _meta.
func withGate(res *mcp.CallToolResult, gate Gate) {
	m := map[string]any{}
	for k, v := range res.Meta {
		m[k] = v
	}
	m[MetaKey] = gate
	res.Meta = m
}

// agent names the caller in gate requests: the configured agent, or the
// name the MCP client gave when it connected. info is the client's
// introduction, for the rules' context.
func (g *Gateway) agent(ss *mcp.ServerSession) (agent string, info map[string]string) {
	info = map[string]string{}
	if ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
			info["name"], info["version"] = p.ClientInfo.Name, p.ClientInfo.Version
		}
	}
	return or(g.cfg.Agent, info["name"], DefaultAgent), info
}

// source is the source of the gateway's events for agent's calls: the
// sender Interlock knows them by ("nats:" and the source, where callers
// are identified). The agent is a label the gateway's client typed or its
// configuration gives; the sender is never the agent itself, nor any
// person or agent of the deployment's directory.
func source(agent string) string { return "/mcp-gateway/" + url.PathEscape(agent) }

// client is a client of the wire protocol that sends agent's calls.
func (g *Gateway) client(agent string) *client.Client { return g.port.Client(source(agent)) }

// caller is the sender of agent's calls, as the deployment's authority
// knows it.
func (g *Gateway) caller(agent string) authority.Caller {
	return g.port.Authority().NATSCaller("", agent, source(agent))
}

// callID is the id of a call: derived from the agent, the upstream, the
// tool and the digest of its args, so that an identical call is the same
// gate run and gets its decision instead of asking again, also after the
// gateway restarts and on another gateway. Once a call's decision is older
// than the repeat window, or its approval was taken (it ran), the next
// identical call takes the next id of the chain, and asks anew; so does
// one whose id is skip (taken by another call).
func (g *Gateway) callID(ctx context.Context, c *client.Client, agent string, r route, digest, skip string) (string, error) {
	sum := sha256.Sum256([]byte(agent + "\x00" + r.up.cfg.Name + "\x00" + r.tool.Name + "\x00" + digest))
	passed := skip == ""
	for range maxGenerations {
		id := "mcp-" + hex.EncodeToString(sum[:20])
		sum = sha256.Sum256([]byte(id))
		if !passed {
			passed = id == skip
			continue
		}
		cp, err := c.Checkpoint(ctx, client.GateFlow, id)
		switch {
		case errors.Is(err, client.ErrNotFound):
			return id, nil
		case err != nil:
			return "", err
		case !cp.Finished():
			return id, nil
		case time.Since(cp.UpdatedAt) < g.cfg.RepeatWindow && (!taken(cp) || g.settlerOf(id) != nil):
			// Decided, and not taken; or taken maybe by a take of this
			// gateway's whose outcome it did not learn, which it is
			// finishing: it asks again.
			return id, nil
		case time.Since(cp.UpdatedAt) < g.cfg.RepeatWindow:
			g.log.Info().Str("call_id", id).Str("tool", r.tool.Name).Str("upstream", r.up.cfg.Name).
				Msg("mcp gateway: an identical call's approval was taken already; this call asks anew under the next call id")
		}
	}
	return "", fmt.Errorf("call of %s asked %d times", r.tool.Name, maxGenerations)
}

// taken reports whether a gate run's approval was taken: its call ran.
func taken(cp protocol.Checkpoint) bool {
	var s struct {
		Consumed *protocol.Consumed `json:"consumed"`
	}
	return json.Unmarshal(cp.State, &s) == nil && s.Consumed != nil
}

// argsOf decodes a call's arguments, a JSON object (or nothing).
func argsOf(raw json.RawMessage) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(raw) == 0 || string(raw) == "null" {
		return m, nil
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// or is the first of ss that is not empty.
func or(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
