package mcpserver_test

import (
	"cmp"
	"regexp"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/authority/authoritytest"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/mcpserver"
	"github.com/interlockhq/interlock/protocol"
)

// TestTheMCPServerAnswersTheConformanceTable runs the authority's table
// through the MCP server: each case's caller has a server of their own,
// whose approver they are, with their roles from the directory of people
// (as `interlock mcp --approver NAME --role ROLE` serves them), and asks
// through its tools from an MCP client on the SDK's in-memory transport.
func TestTheMCPServerAnswersTheConformanceTable(t *testing.T) {
	t.Parallel()
	authoritytest.Conform(t, authoritytest.SurfaceMCP, mcpDoor{startTrusted(t)})
}

// startTrusted starts a service whose directory of people, gate rules
// and cancel and read roles are the authority's fixture's.
func startTrusted(t *testing.T) *interlock.Service {
	t.Helper()
	return natstest.StartWith(t, natstest.StartServer(t, ""), authoritytest.Deploy(
		interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret}, authoritytest.Directory(nil)))
}

// mcpDoor is the MCP server as the table's door.
type mcpDoor struct{ svc *interlock.Service }

// as is an MCP client of a server whose approver is who, holding their
// roles.
func (d mcpDoor) as(t *testing.T, who string) *model {
	t.Helper()
	p, ok := authoritytest.PersonNamed(who)
	if !ok {
		t.Fatalf("no person %s", who)
	}
	s, err := mcpserver.New(d.svc, mcpserver.Config{Flows: flows, Approver: p.Name, Roles: p.Roles})
	if err != nil {
		t.Fatal(err)
	}
	return session(t, d.svc, s)
}

// Start asks the gate for a tool call through the MCP server of whoever
// starts it (request_tool_approval); an ask, which the MCP server does
// not make, is sent beside it, vouched for its agent.
func (d mcpDoor) Start(t *testing.T, r authoritytest.Run, id string) (flow, run string) {
	ctx := t.Context()
	if req := r.ToolRequest(id); req != nil {
		var dec mcpserver.ToolDecision
		d.as(t, r.StartedBy).call("request_tool_approval", args{"tool": req.Tool, "callId": req.CallID, "args": req.Args}, &dec)
		if dec.Decision != mcpserver.DecisionPending {
			t.Fatalf("starting %s: %+v, want the call pending", r.Key, dec)
		}
		flow, run = protocol.GateFlow, id
	} else {
		flow, run = authoritytest.StartBeside(t, d.svc, r, id)
	}
	if claimant := r.Pending.ClaimedBy; claimant != "" {
		ev, err := authoritytest.Vouched(t, d.svc, claimant).Assign(ctx, flow, run, protocol.Assign{Op: protocol.AssignClaim})
		if err != nil || ev.Kind != protocol.EventAssigned {
			t.Fatalf("%s claiming %s: %v %v", claimant, r.Key, ev.Kind, err)
		}
	}
	return flow, run
}

// Ask calls the tool of the case's action on the caller's own server:
// continue_flow to decide; get_run to read, which get_decision (for a
// tool call) and list_pending must agree with.
func (d mcpDoor) Ask(t *testing.T, c authoritytest.Case, flow, run string) protocol.Code {
	m := d.as(t, c.Who)
	switch c.Action {
	case authority.Decide:
		verdict := cmp.Or(c.Verdict, protocol.VerdictApprove)
		return refusalOf(t, m.callTool("continue_flow", args{"flow": flow, "run": run, "decision": string(verdict)}))
	case authority.Read:
		code := refusalOf(t, m.callTool("get_run", args{"flow": flow, "run": run}))
		if flow == protocol.GateFlow {
			if got := refusalOf(t, m.callTool("get_decision", args{"callId": run})); got != code {
				t.Errorf("get_decision of %s: %q, but get_run: %q", run, got, code)
			}
		}
		if listed := lists(t, m, flow, run); listed != (code == "") {
			t.Errorf("list_pending lists %s: %v, but get_run: %q", run, listed, code)
		}
		return code
	}
	t.Fatalf("the MCP door has no %s", c.Action)
	return ""
}

// refused is how the MCP server words a refusal: refused (<code>): ...
var refused = regexp.MustCompile(`^refused \(([a-z_]+)\): `)

// refusalOf is the code of the refusal a tool result words, "" for a
// result that is no error.
func refusalOf(t *testing.T, res *mcp.CallToolResult) protocol.Code {
	t.Helper()
	if !res.IsError {
		return ""
	}
	m := refused.FindStringSubmatch(text(res))
	if m == nil {
		t.Fatalf("tool error %q is no refusal", text(res))
	}
	return protocol.Code(m[1])
}

// lists reports whether list_pending lists run of flow, on any page.
func lists(t *testing.T, m *model, flow, run string) bool {
	t.Helper()
	cursor := ""
	for {
		var page mcpserver.PendingOutput
		m.call("list_pending", args{"flow": flow, "limit": mcpserver.MaxPageSize, "cursor": cursor}, &page)
		for _, it := range page.Items {
			if it.Run == run {
				return true
			}
		}
		if page.Next == "" {
			return false
		}
		cursor = page.Next
	}
}
