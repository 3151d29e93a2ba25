package mcpgateway_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/authority/authoritytest"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/mcpgateway"
	"github.com/interlockhq/interlock/protocol"
)

// TestTheMCPGatewayAnswersTheConformanceTable runs the authority's table
// through the MCP gateway: an agent's door, whose clients are MCP
// clients it does not authenticate, each named by the name it gives when
// it connects (a label), and whose sender to Interlock is its own. What
// the gateway offers an agent is its upstreams' tools, each call asked of
// the gate, and the tasks of its own calls (tasks/get, tasks/cancel):
// the table's cancels of a tool call run through it; the rest is skipped.
func TestTheMCPGatewayAnswersTheConformanceTable(t *testing.T) {
	t.Parallel()
	e := newTrustedEnv(t)
	gw, _ := e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "conformance")
	authoritytest.Conform(t, authoritytest.SurfaceGateway, gatewayDoor{e: e, gw: gw})
}

// newTrustedEnv is a deployment whose directory of people, gate rules and
// cancel and read roles are the authority's fixture's, and an upstream.
func newTrustedEnv(t *testing.T) *env {
	t.Helper()
	svc := natstest.StartWith(t, natstest.StartServer(t, ""), authoritytest.Deploy(
		interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret}, authoritytest.Directory(nil)))
	return &env{t: t, svc: svc, up: newUpstream()}
}

// gatewayDoor is the MCP gateway as the table's door.
type gatewayDoor struct {
	e  *env
	gw *mcpgateway.Gateway
}

// Start makes the agent's tool call through the gateway, as an MCP
// client named after the agent that takes tasks, and returns its task's
// call. The call is started by the gateway's sender for that agent, not
// by the agent of the directory.
func (d gatewayDoor) Start(t *testing.T, r authoritytest.Run, id string) (flow, run string) {
	p, _ := authoritytest.PersonNamed(r.StartedBy)
	req := r.ToolRequest(id)
	if !p.Agent || req == nil || r.Pending.ClaimedBy != "" {
		t.Fatalf("the gateway starts an agent's tool calls only, not %s", r.Key)
	}
	// The order makes each case's call its own: the gateway derives the
	// call id from the agent, the tool and the args.
	callArgs := map[string]json.RawMessage{"orderId": json.RawMessage(`"` + id + `"`)}
	for k, v := range req.Args {
		callArgs[k] = v
	}
	return protocol.GateFlow, taskOf(t, call(t, taskClient(t, d.gw, r.StartedBy), req.Tool, callArgs))
}

// Ask sends the case's tasks/cancel from an MCP client named after its
// caller; a cancel acknowledged must have cancelled the call.
func (d gatewayDoor) Ask(t *testing.T, c authoritytest.Case, flow, run string) protocol.Code {
	if c.Action != authority.Cancel {
		t.Fatalf("the gateway door has no %s", c.Action)
	}
	cs := taskClient(t, d.gw, c.Who)
	if _, err := taskCall(t, cs, "tasks/cancel", run); err != nil {
		return refusalOf(t, err)
	}
	cp, err := d.e.svc.Client("/test").Checkpoint(t.Context(), flow, run)
	if err != nil || cp.Status != protocol.StatusCancelled {
		t.Fatalf("tasks/cancel of %s acknowledged, but the call is %s (%v)", run, cp.Status, err)
	}
	return ""
}

// refused is how the gateway words a refusal of a task: refused
// (<code>): ...
var refused = regexp.MustCompile(`refused \(([a-z_]+)\): `)

// refusalOf is the code of the refusal a task method's error words.
func refusalOf(t *testing.T, err error) protocol.Code {
	t.Helper()
	m := refused.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %q is no refusal", err)
	}
	return protocol.Code(m[1])
}

// TestAGatewayCallIsStartedByTheGatewaysSenderNotTheNameItsClientTyped:
// an MCP client that introduces itself as a supervisor of the directory
// is not her. The call it makes is started and requested by the
// gateway's sender, a NATS sender, whatever name the client typed; so the
// supervisor it named may still vote on it, where a requester may not.
func TestAGatewayCallIsStartedByTheGatewaysSenderNotTheNameItsClientTyped(t *testing.T) {
	t.Parallel()
	e := newTrustedEnv(t)
	gw, _ := e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "conformance")
	cs := taskClient(t, gw, authoritytest.Ann)
	id := taskOf(t, call(t, cs, "issue_refund", map[string]any{"orderId": "o-named", "amount": 9000}))
	cp, err := e.svc.Client("/test").Checkpoint(t.Context(), client.GateFlow, id)
	if err != nil || cp.Interrupt == nil {
		t.Fatalf("reading %s: %+v %v", id, cp, err)
	}
	gateways := protocol.SenderPrefix + "/mcp-gateway/"
	if !protocol.IsSender(cp.StartedBy) || !strings.HasPrefix(cp.StartedBy, gateways) || cp.Interrupt.Requester != cp.StartedBy {
		t.Fatalf("call %s started by %q, requested by %q; want the gateway's NATS sender, not %s whose name the client typed",
			id, cp.StartedBy, cp.Interrupt.Requester, authoritytest.Ann)
	}
	ann, err := e.svc.ClientAs("/test", protocol.Caller{Name: authoritytest.Ann, Method: protocol.AuthToken, Roles: []string{authoritytest.Supervisor}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := ann.Resume(t.Context(), client.GateFlow, id, protocol.Resume{RequestID: cp.Interrupt.RequestID, Decision: string(protocol.VerdictApprove)})
	if err != nil || ev.Kind != protocol.EventInterrupted {
		t.Fatalf("ann's vote on the call a client named ann made: %v %v, want it counted and the second vote asked", ev.Kind, err)
	}
}

// TestAGatewayClientNamedAfterAnAgentGetsNoneOfItsCalls: an agent of the
// directory asks the gate itself, under a call id and agent name the
// gateway would take; an MCP client that names itself after the agent
// neither reads the call (tasks/get) nor cancels it (tasks/cancel)
// through the gateway: the authority refuses the gateway's sender what is
// the agent's.
func TestAGatewayClientNamedAfterAnAgentGetsNoneOfItsCalls(t *testing.T) {
	t.Parallel()
	e := newTrustedEnv(t)
	gw, _ := e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "conformance")
	agent, err := e.svc.ClientAs("/test", protocol.Caller{Name: authoritytest.AgentA, Method: protocol.AuthToken})
	if err != nil {
		t.Fatal(err)
	}
	const id = "mcp-agent-a-own"
	ans, err := agent.AskTool(t.Context(), protocol.ToolRequest{CallID: id, Tool: "issue_refund", Server: "shop", Agent: authoritytest.AgentA,
		Args: map[string]json.RawMessage{"orderId": json.RawMessage(`"o-own"`), "amount": json.RawMessage("900")}}, natstest.Wait)
	if err != nil || ans.Pending == nil {
		t.Fatalf("agent-a's own call: %+v %v, want it pending", ans, err)
	}
	cs := taskClient(t, gw, authoritytest.AgentA)
	for _, m := range []string{"tasks/get", "tasks/cancel"} {
		task, err := taskCall(t, cs, m, id)
		if err == nil {
			t.Fatalf("%s of agent-a's own call by a client named agent-a: %+v, want refused", m, task)
		}
		if code := refusalOf(t, err); code != protocol.CodeForbidden {
			t.Errorf("%s: refused %s, want forbidden", m, code)
		}
	}
	cp, err := e.svc.Client("/test").Checkpoint(t.Context(), client.GateFlow, id)
	if err != nil || cp.Status != protocol.StatusWaiting {
		t.Fatalf("agent-a's call is %s (%v), want it still waiting", cp.Status, err)
	}
}

// TestTheGatewayOffersNoToolThatActsOnRuns: the gateway lists its
// upstreams' tools and nothing else, and forwards no call of a tool that
// decides, claims, cancels or reads runs, whatever the agent names: an
// agent behind it can never approve its own call. The call waits for a
// person, undecided, and the upstream ran nothing.
func TestTheGatewayOffersNoToolThatActsOnRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, cs := e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "claude-desktop")
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "v0"}, nil).Connect(t.Context(), e.up.transport(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	names := func(cs *mcp.ClientSession) []string {
		list, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range list.Tools {
			out = append(out, tool.Name)
		}
		slices.Sort(out)
		return out
	}
	if shown, theirs := names(cs), names(direct); !slices.Equal(shown, theirs) {
		t.Fatalf("the gateway shows %v; want its upstream's tools, %v, and nothing else", shown, theirs)
	}

	tc := taskClient(t, gw, "claude-desktop")
	id := taskOf(t, call(t, tc, "issue_refund", map[string]any{"orderId": "o-self", "amount": 900}))
	for _, tool := range []string{"continue_flow", "resume", "approve", "decide", "claim", "assign", "delegate", "cancel", "cancel_run",
		"get_run", "list_pending", "get_decision", "start_flow", "request_tool_approval"} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool,
			Arguments: map[string]any{"flow": client.GateFlow, "run": id, "callId": id, "decision": "approve"}})
		if err == nil && !res.IsError {
			t.Errorf("%s through the gateway: %s, want no such tool", tool, text(res))
		}
	}
	// tasks/update takes input responses, and the gateway's tasks ask for
	// none: it is acknowledged, and answers nothing.
	if _, err := mcp.CallCustomMethod[*mcpgateway.TaskParams, *mcpgateway.Task](t.Context(), tc, "tasks/update",
		&mcpgateway.TaskParams{TaskID: id, InputResponses: json.RawMessage(`{"answer": {"action": "accept", "content": {"decision": "approve"}}}`)}); err != nil {
		t.Errorf("tasks/update: %v, want it acknowledged", err)
	}
	cp, err := e.svc.Client("/test").Checkpoint(t.Context(), client.GateFlow, id)
	if err != nil || cp.Status != protocol.StatusWaiting || cp.Interrupt == nil || len(cp.Interrupt.Votes) != 0 {
		t.Fatalf("the agent's call after its tries: %+v %v, want it waiting for a person, undecided", cp, err)
	}
	if got := e.up.got(); len(got) != 0 {
		t.Fatalf("upstream got %v", got)
	}
}
