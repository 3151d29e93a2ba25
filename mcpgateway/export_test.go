package mcpgateway

import (
	"context"
	"encoding/json"
	"time"

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
	return g.outcome(ctx, g.port.Client("/mcp-gateway/test"), r, name, d.CallID, d, args, digest)
}

// LeaveUnsettled records takes of callID's approval, of event ids ids, in
// order, as takes whose answers were lost: for a test that makes several
// identical calls leave one each.
func (g *Gateway) LeaveUnsettled(callID string, ids ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		g.unsettled[callID] = append(g.unsettled[callID], unsettledTake{id: id, at: time.Now()})
	}
}
