package mcpgateway

import (
	"context"
	"encoding/json"

	"github.com/interlockhq/interlock/protocol"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DecidedOutcome is what the gateway makes of decision d about a call of
// the tool it shows as name with args, as if Interlock had answered the
// call with d: for a test that hands it a decision changed on its way.
func (g *Gateway) DecidedOutcome(ctx context.Context, name string, d protocol.Decided, args json.RawMessage) *mcp.CallToolResult {
	g.mu.Lock()
	r := g.routes[name]
	g.mu.Unlock()
	var m map[string]json.RawMessage
	_ = json.Unmarshal(args, &m)
	digest, _ := protocol.ArgsDigest(m)
	return g.outcome(ctx, g.port.Client("/mcp-gateway/test"), r, name, d.CallID, d, args, digest, g.cfg.Wait)
}

// LeaveUnsettled has the gateway settle takes of the approval of the
// call shown as name, made by agent and decided d, of event ids ids, in
// order, as takes whose answers were lost: for a test that makes several
// identical calls leave one each.
func (g *Gateway) LeaveUnsettled(name, agent string, d protocol.Decided, ids ...string) {
	g.mu.Lock()
	r := g.routes[name]
	g.mu.Unlock()
	c := g.client(agent)
	gate := Gate{CallID: d.CallID, Decision: d.Decision, Approver: d.Approver, Reason: d.Reason, Rule: d.Rule}
	for _, id := range ids {
		g.unsettled(c, r, gate, name, d, id)
	}
}

// OnTaken has f called once a call's approval is taken, before the call
// runs, with the context of its caller's request.
func (g *Gateway) OnTaken(f func(caller context.Context)) { g.taken = f }
