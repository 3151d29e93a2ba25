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
// upstream.
func (g *Gateway) call(ctx context.Context, req *mcp.CallToolRequest, name string, r route) *mcp.CallToolResult {
	args, err := argsOf(req.Params.Arguments)
	if err != nil {
		return failed(Gate{}, "The arguments of %s are not a JSON object (%v): call it again with an object of its arguments.", name, err)
	}
	agent, info := g.agent(req.Session)
	c := g.port.Client("/mcp-gateway/" + url.PathEscape(agent))
	callID, err := g.callID(ctx, c, agent, name, args)
	if err != nil {
		return failed(Gate{}, "The call of %s did not run: reading its earlier decisions from Interlock failed (%v). Tell the user the approval service cannot be reached.", name, err)
	}
	tr := protocol.ToolRequest{CallID: callID, Tool: name, Args: args, Agent: agent}
	tr.Context, err = json.Marshal(map[string]any{"upstream": r.up.cfg.Name, "upstreamTool": r.tool.Name, "client": info})
	if err != nil {
		return failed(Gate{CallID: callID}, "The call of %s did not run: %v.", name, err)
	}
	// A client that takes tasks gets a task handle as soon as the call
	// waits for a person, instead of waiting for the decision.
	slot, tasks := ctx.Value(taskSlotKey{}).(*taskSlot)
	ask := c.RequestTool
	if tasks {
		ask = c.AskTool
	}
	ans, err := ask(ctx, tr, g.cfg.Wait)
	var ref *client.RefusedError
	switch {
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
	return g.outcome(ctx, r, name, callID, *ans.Decided, req.Params.Arguments)
}

// outcome is the result of a decided call: the upstream's result for
// args (or the approver's edited args) when the gate lets it run, else
// why it did not run.
func (g *Gateway) outcome(ctx context.Context, r route, name, callID string, d protocol.Decided, args json.RawMessage) *mcp.CallToolResult {
	gate := Gate{CallID: callID, Decision: d.Decision, Approver: d.Approver, Reason: d.Reason, Rule: d.Rule}
	switch d.Decision {
	case protocol.DecidedAllowed:
		return g.forward(ctx, r, gate, args)
	case protocol.DecidedApproved:
		g.markRan(callID)
		return g.forward(ctx, r, gate, args)
	case protocol.DecidedEdited:
		g.markRan(callID)
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

// callID is the id of a call: derived from the agent, the tool and a
// digest of its args, so that an identical call is the same gate run and
// gets its decision instead of asking again, also after the gateway
// restarts. Once a call's decision is older than the repeat window, or
// an approval let it run through this gateway, the next identical call
// takes the next id of the chain, and asks anew.
func (g *Gateway) callID(ctx context.Context, c *client.Client, agent, tool string, args map[string]json.RawMessage) (string, error) {
	// Decoded and encoded again, the args have their keys sorted at
	// every depth and no spacing: the same args, however written, have
	// the same digest.
	var v any
	raw, err := json.Marshal(args)
	if err == nil {
		err = json.Unmarshal(raw, &v)
	}
	canonical, err2 := json.Marshal(v)
	if err = errors.Join(err, err2); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(agent + "\x00" + tool + "\x00" + string(canonical)))
	for range maxGenerations {
		id := "mcp-" + hex.EncodeToString(sum[:20])
		cp, err := c.Checkpoint(ctx, client.GateFlow, id)
		switch {
		case errors.Is(err, client.ErrNotFound):
			return id, nil
		case err != nil:
			return "", err
		case !cp.Finished() || time.Since(cp.UpdatedAt) < g.cfg.RepeatWindow && !g.hasRun(id):
			return id, nil
		}
		sum = sha256.Sum256([]byte(id))
	}
	return "", fmt.Errorf("call of %s asked %d times", tool, maxGenerations)
}

// markRan records that a person's approval let call id run here: the
// same call made again is asked anew (the next id of its chain), not run
// again on the same approval.
func (g *Gateway) markRan(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for old, at := range g.ran {
		if time.Since(at) > g.cfg.RepeatWindow {
			delete(g.ran, old)
		}
	}
	g.ran[id] = time.Now()
}

// hasRun reports whether call id ran here on a person's approval.
func (g *Gateway) hasRun(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.ran[id]
	return ok
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
