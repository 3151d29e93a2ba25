package authoritytest

import (
	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/protocol"
)

// Surface is a door of Interlock as the table sees it: its name, the
// test that runs the table through it, and what it offers whom.
type Surface struct {
	// Name names the surface in docs/operations.md's table.
	Name string
	// Test is the test that runs the table through the surface, and
	// its package.
	Test, Package string
	// Skip says why the surface has no way for case c's caller to ask
	// for its action ("" when it has one).
	Skip func(c Case) string
}

// The surfaces, by name.
const (
	SurfaceAuthority = "authority"
	SurfaceNATS      = "NATS workers"
	SurfaceHTTP      = "HTTP API"
	SurfaceCallback  = "callback URLs"
	SurfaceInbox     = "inbox"
	SurfaceLink      = "decision links"
	SurfaceSlack     = "Slack"
	SurfaceMCP       = "MCP server"
	SurfaceGateway   = "MCP gateway"
	SurfaceA2A       = "A2A agent"
)

// Surfaces are every door the table runs through. Mail and Teams carry
// decision links and links to the inbox; they decide nothing themselves.
func Surfaces() []Surface {
	return []Surface{
		{Name: SurfaceAuthority, Test: "TestTheAuthorityAnswersTheConformanceTable", Package: "authority", Skip: func(Case) string { return "" }},
		{Name: SurfaceNATS, Test: "TestTheNATSWorkersAnswerTheConformanceTable", Package: "interlock", Skip: func(c Case) string {
			switch c.Action {
			case authority.Read:
				return "a NATS client reads what its NATS permissions let it read; the surfaces scope reads"
			case authority.MintLink:
				return "callback URLs are minted by the HTTP API, not over NATS"
			}
			return ""
		}},
		{Name: SurfaceHTTP, Test: "TestTheHTTPAPIAnswersTheConformanceTable", Package: "httpapi", Skip: func(c Case) string {
			if c.Who == NATSSender {
				return "the HTTP API's callers hold tokens; a NATS sender is the NATS workers' caller"
			}
			return ""
		}},
		{Name: SurfaceCallback, Test: "TestCallbackURLsAnswerTheConformanceTable", Package: "httpapi", Skip: func(c Case) string {
			switch {
			case c.Action != authority.Decide:
				return "a callback URL settles a request; it does nothing else"
			case c.Who == NATSSender:
				return "a callback URL is issued to a person of the directory"
			}
			return ""
		}},
		{Name: SurfaceInbox, Test: "TestTheInboxAnswersTheConformanceTable", Package: "inbox", Skip: func(c Case) string {
			switch {
			case c.Action == authority.Consume:
				return "an approval is taken by the agent that runs the call, over NATS or the HTTP API"
			case c.Who == NATSSender:
				return "the inbox's callers sign in with a token; a NATS sender is the NATS workers' caller"
			case c.Action == authority.Cancel:
				return "the inbox has no way to cancel a run; the HTTP API and the command line have"
			case c.Action == authority.MintLink:
				return "the inbox mints no callback URL; the HTTP API does"
			}
			return ""
		}},
		{Name: SurfaceLink, Test: "TestDecisionLinksAnswerTheConformanceTable", Package: "inbox", Skip: func(c Case) string {
			switch {
			case c.Action == authority.Consume:
				return "an approval is taken by the agent that runs the call, over NATS or the HTTP API"
			case c.Who == NATSSender:
				return "a decision link is issued to a person of the directory"
			case c.Action == authority.Claim || c.Action == authority.Delegate:
				return "a decision link's page decides; claiming and delegating are the inbox's, signed in"
			case c.Action == authority.Cancel || c.Action == authority.MintLink:
				return "a decision link shows its request and decides it; it does nothing else"
			}
			return ""
		}},
		{Name: SurfaceSlack, Test: "TestTheSlackBridgeAnswersTheConformanceTable", Package: "slackbridge", Skip: func(c Case) string {
			switch {
			case c.Action == authority.Consume:
				return "an approval is taken by the agent that runs the call, over NATS or the HTTP API"
			case c.Who == NATSSender:
				return "a NATS sender is the NATS workers' caller; the bridge's callers are Slack users"
			case c.Action == authority.Read:
				return "the bridge posts a run in a channel; who reads it there is the channel's members, not a request the bridge answers"
			case c.Action == authority.Cancel:
				return "the bridge offers no way to cancel a run"
			case c.Action == authority.MintLink:
				return "the bridge mints no callback URL"
			}
			if p, _ := PersonNamed(c.Who); p.Agent {
				return "an agent has no Slack user (TestASlackUserTheDirectoryDoesNotKnowIsRefusedEverywhere clicks as one)"
			}
			return ""
		}},
		{Name: SurfaceMCP, Test: "TestTheMCPServerAnswersTheConformanceTable", Package: "mcpserver", Skip: func(c Case) string {
			switch {
			case c.Action == authority.Consume:
				return "the MCP server tells the model a call's decision; the agent that runs the call takes its approval, over NATS or the HTTP API"
			case c.Who == NATSSender:
				return "the MCP server sends as the person it serves, vouched for; a NATS sender is the NATS workers' caller"
			case c.Action == authority.Claim || c.Action == authority.Delegate:
				return "the MCP server has no tool to claim or delegate: who decides is for people to settle through the HTTP API, the inbox or Slack"
			case c.Action == authority.Cancel:
				return "the MCP server has no tool to cancel a run"
			case c.Action == authority.MintLink:
				return "the MCP server mints no callback URL"
			case c.Action == authority.Decide && RunNamed(c.Run).Flow == protocol.GateFlow:
				return "continue_flow never decides a tool call: the model asking for its own call must not be the one who approves it"
			}
			return ""
		}},
		{Name: SurfaceGateway, Test: "TestTheMCPGatewayAnswersTheConformanceTable", Package: "mcpgateway", Skip: func(c Case) string {
			p, _ := PersonNamed(c.Who)
			switch {
			case c.Action == authority.Consume:
				return "the gateway takes the approval of a call made through it, itself, before it runs it (TestAnApprovalLetsItsCallRunOnce); its clients take none"
			case c.Who == NATSSender:
				return "the gateway's callers are MCP clients and its sender is its own; a NATS sender typing a name is the NATS workers' caller"
			case c.Action == authority.Decide || c.Action == authority.Claim || c.Action == authority.Delegate || c.Action == authority.MintLink:
				return "the gateway shows its upstreams' tools and nothing else: an agent behind it decides, claims, delegates and mints nothing (TestTheGatewayOffersNoToolThatActsOnRuns)"
			case !p.Agent:
				return "the gateway is an agent's door; people read and cancel through the HTTP API, the inbox or Slack"
			case RunNamed(c.Run).Flow != protocol.GateFlow:
				return "the gateway reads and cancels the tool calls made through it, as tasks; an ask is made elsewhere"
			}
			return ""
		}},
		{Name: SurfaceA2A, Test: "TestTheA2AAgentAnswersTheConformanceTable", Package: "a2aserver", Skip: func(c Case) string {
			switch {
			case c.Action == authority.Consume:
				return "an approval is taken by the agent that runs the call, over NATS or the HTTP API"
			case c.Who == NATSSender:
				return "the A2A agent's callers hold tokens; a NATS sender is the NATS workers' caller"
			case c.Action == authority.Decide || c.Action == authority.Claim || c.Action == authority.Delegate || c.Action == authority.MintLink:
				return "the A2A agent asks people and reads its tasks; people decide, claim and delegate through the inbox, the HTTP API or Slack"
			case RunNamed(c.Run).Flow != protocol.AskFlow:
				return "the A2A agent's tasks are asks; a tool call is made through the gate"
			}
			return ""
		}},
	}
}

// SurfaceNamed is the surface named name.
func SurfaceNamed(name string) Surface {
	for _, s := range Surfaces() {
		if s.Name == name {
			return s
		}
	}
	panic("authoritytest: no surface " + name)
}

// RunNamed is the fixture's run of key.
func RunNamed(key string) Run {
	for _, r := range Runs() {
		if r.Key == key {
			return r
		}
	}
	panic("authoritytest: no run " + key)
}
