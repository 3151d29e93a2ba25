package mcpgateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/mcpgateway"
	"github.com/interlockhq/interlock/protocol"
)

// upstreamEnv, set in a re-run of the test binary, makes it serve the
// upstream on its stdio: a real command for the gateway to start.
const upstreamEnv = "INTERLOCK_TEST_MCP_UPSTREAM"

func TestMain(m *testing.M) {
	if os.Getenv(upstreamEnv) != "" {
		u := newUpstream()
		if err := u.srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// rules are the test deployment's gate rules.
const rules = `
rules:
  - name: ask-first
    tool: issue_refund
    when: args.orderId == "o-respond"
    reason: A supervisor may answer instead of approving.
    approverRole: supervisor
    timeout: 1h
    decisions: [approve, reject, respond]
  - name: quick-expiry
    tool: issue_refund
    when: args.orderId == "o-expire"
    reason: Refunds of this order need a supervisor, who has one second.
    approverRole: supervisor
    timeout: 1s
  - name: large-refund
    tool: issue_refund
    when: args.amount > 500
    reason: Refunds over $500 need a supervisor's approval.
    approverRole: supervisor
    timeout: 1h
  - name: untrusted-agent
    tool: lookup_order
    when: agent == "untrusted-bot"
    reason: This agent may not read orders unchecked.
    approverRole: supervisor
    timeout: 1h
`

// refundArgs are issue_refund's arguments.
type refundArgs struct {
	OrderID string  `json:"orderId" jsonschema:"the order"`
	Amount  float64 `json:"amount" jsonschema:"how much to refund"`
}

// lookupArgs are lookup_order's arguments.
type lookupArgs struct {
	OrderID string `json:"orderId" jsonschema:"the order"`
}

// upstream is an MCP server with two tools, which records the calls it
// gets.
type upstream struct {
	srv *mcp.Server

	mu    sync.Mutex
	calls []string
}

func newUpstream() *upstream {
	u := &upstream{srv: mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v0"}, nil)}
	mcp.AddTool(u.srv, &mcp.Tool{Name: "issue_refund", Description: "Refund an order."}, func(_ context.Context, _ *mcp.CallToolRequest, in refundArgs) (*mcp.CallToolResult, any, error) {
		u.record(fmt.Sprintf("issue_refund %s %g", in.OrderID, in.Amount))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refunded %g on %s", in.Amount, in.OrderID)}}}, nil, nil
	})
	mcp.AddTool(u.srv, &mcp.Tool{Name: "lookup_order", Description: "Read an order."}, func(_ context.Context, _ *mcp.CallToolRequest, in lookupArgs) (*mcp.CallToolResult, any, error) {
		u.record("lookup_order " + in.OrderID)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "order " + in.OrderID + " shipped"}}}, nil, nil
	})
	return u
}

func (u *upstream) record(call string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, call)
}

// got returns the calls the upstream has had.
func (u *upstream) got() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.calls)
}

// transport connects the upstream over the SDK's in-memory transport,
// for one gateway.
func (u *upstream) transport(t *testing.T) mcp.Transport {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := u.srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	return ct
}

// env is a deployment with the test's gate rules and an upstream.
type env struct {
	t   *testing.T
	srv *bus.Server
	svc *interlock.Service
	up  *upstream
}

func newEnv(t *testing.T) *env {
	t.Helper()
	rs, err := gate.Parse([]byte(rules), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, GateRules: rs})
	return &env{t: t, srv: srv, svc: svc, up: newUpstream()}
}

// gateway starts a gateway on the deployment in front of the upstream,
// with cfg's wait and agent, and connects an MCP client named clientName.
func (e *env) gateway(cfg mcpgateway.Config, clientName string) (*mcpgateway.Gateway, *mcp.ClientSession) {
	e.t.Helper()
	if cfg.Upstreams == nil {
		cfg.Upstreams = []mcpgateway.Upstream{{Name: "shop", Transport: e.up.transport(e.t)}}
	}
	gw, err := mcpgateway.New(e.svc, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := gw.Start(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = gw.Close() })
	return gw, connect(e.t, gw, clientName)
}

// connect connects an MCP client named name to gw.
func connect(t *testing.T, gw *mcpgateway.Gateway, name string) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := gw.MCP().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "v0"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs
}

// call calls a tool through the gateway.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// text is a result's text.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// gateOf is what the gate said about a result's call.
func gateOf(t *testing.T, res *mcp.CallToolResult) mcpgateway.Gate {
	t.Helper()
	var g mcpgateway.Gate
	b, err := json.Marshal(res.Meta[mcpgateway.MetaKey])
	if err == nil {
		err = json.Unmarshal(b, &g)
	}
	if err != nil || g.CallID == "" {
		t.Fatalf("result has no %s in _meta: %+v", mcpgateway.MetaKey, res.Meta)
	}
	return g
}

// waitingCall waits until a gate run waits for a person, and returns its
// callId.
func (e *env) waitingCall() string {
	e.t.Helper()
	c := e.svc.Client("/test")
	var id string
	natstest.Eventually(e.t, "a tool call waiting for approval", func() bool {
		page, err := c.ListPending(e.t.Context(), client.PendingQuery{Flow: client.GateFlow})
		if err != nil || len(page.Items) == 0 {
			return false
		}
		id = page.Items[0].Run
		return true
	})
	return id
}

// decide decides the call as a supervisor.
func (e *env) decide(callID string, r protocol.Resume) {
	e.t.Helper()
	c := e.svc.Client("/test")
	ev, err := e.svc.ResumeAs(e.t.Context(), c, client.GateFlow, callID, r, "sue", []string{"supervisor"})
	if err != nil {
		e.t.Fatalf("deciding %s: %v", callID, err)
	}
	if ev.Kind == protocol.EventRefused {
		e.t.Fatalf("deciding %s: refused: %s", callID, ev.Event.Data())
	}
}

// interrupts counts the approvals asked for a call.
func (e *env) interrupts(callID string) int {
	e.t.Helper()
	evs, _, err := e.svc.Client("/test").RunEvents(e.t.Context(), client.GateFlow, callID, client.MaxPendingLimit)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == protocol.EventInterrupted {
			n++
		}
	}
	return n
}

// background calls a tool through cs in the background; the result comes
// on the channel.
func background(t *testing.T, cs *mcp.ClientSession, tool string, args any) <-chan *mcp.CallToolResult {
	out := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "transport: " + err.Error()}}}
		}
		out <- res
	}()
	return out
}

// result waits for a background call's result.
func result(t *testing.T, c <-chan *mcp.CallToolResult) *mcp.CallToolResult {
	t.Helper()
	select {
	case res := <-c:
		return res
	case <-time.After(natstest.Wait):
		t.Fatalf("no result within %s", natstest.Wait)
		return nil
	}
}

func TestGatewayShowsTheUpstreamsToolsAndForwardsAnAllowedCallAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, cs := e.gateway(mcpgateway.Config{}, "claude-desktop")
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if tool.InputSchema == nil || !strings.Contains(fmt.Sprint(tool.InputSchema), "orderId") {
			t.Errorf("tool %s lost its input schema: %v", tool.Name, tool.InputSchema)
		}
	}
	if !slices.Equal(names, []string{"issue_refund", "lookup_order"}) {
		t.Fatalf("tools %v, want the upstream's, as is", names)
	}
	res := call(t, cs, "issue_refund", map[string]any{"orderId": "o-1", "amount": 20})
	if res.IsError || text(res) != "refunded 20 on o-1" {
		t.Fatalf("allowed call: %s (isError %v), want the upstream's result", text(res), res.IsError)
	}
	if g := gateOf(t, res); g.Decision != "allowed" {
		t.Errorf("gate %+v, want allowed", g)
	}
	if got := e.up.got(); !slices.Equal(got, []string{"issue_refund o-1 20"}) {
		t.Errorf("upstream got %v", got)
	}
}

func TestGatewayReturnsTheToolsResultOnceApproved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, cs := e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "claude-desktop")
	done := background(t, cs, "issue_refund", map[string]any{"orderId": "o-2", "amount": 900})
	id := e.waitingCall()
	if got := e.up.got(); len(got) != 0 {
		t.Fatalf("the upstream ran %v before anyone approved", got)
	}
	e.decide(id, protocol.Resume{Decision: "approve", Reason: "checked the ticket"})
	res := result(t, done)
	if res.IsError || text(res) != "refunded 900 on o-2" {
		t.Fatalf("approved call: %s (isError %v), want the upstream's result", text(res), res.IsError)
	}
	if g := gateOf(t, res); g.Decision != "approved" || g.CallID != id || g.Approver != "sue" || g.Rule != "large-refund" {
		t.Errorf("gate %+v", g)
	}
}

func TestGatewayForwardsTheApproversEditedArgs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, cs := e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "claude-desktop")
	done := background(t, cs, "issue_refund", map[string]any{"orderId": "o-3", "amount": 900})
	e.decide(e.waitingCall(), protocol.Resume{Decision: "edit", Edits: map[string]json.RawMessage{"amount": json.RawMessage("400")}, Reason: "partial"})
	res := result(t, done)
	if res.IsError || text(res) != "refunded 400 on o-3" {
		t.Fatalf("edited call: %s (isError %v), want the upstream's result for the edited args", text(res), res.IsError)
	}
	if got := e.up.got(); !slices.Equal(got, []string{"issue_refund o-3 400"}) {
		t.Errorf("upstream got %v, want the edited args only", got)
	}
	if g := gateOf(t, res); g.Decision != "edited" {
		t.Errorf("gate %+v, want edited", g)
	}
}

func TestGatewayTellsTheModelWhyACallWasRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, cs := e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "claude-desktop")
	args := map[string]any{"orderId": "o-4", "amount": 900}
	done := background(t, cs, "issue_refund", args)
	id := e.waitingCall()
	e.decide(id, protocol.Resume{Decision: "reject", Reason: "the customer already got a voucher"})
	res := result(t, done)
	if !res.IsError || !strings.Contains(text(res), "rejected by sue") || !strings.Contains(text(res), "the customer already got a voucher") {
		t.Fatalf("rejected call: %s (isError %v), want an error with the approver and reason", text(res), res.IsError)
	}
	// The same call again is answered from the decision: no second
	// approval, and the tool never runs.
	again := call(t, cs, "issue_refund", map[string]any{"amount": 900, "orderId": "o-4"})
	if !again.IsError || !strings.Contains(text(again), "the customer already got a voucher") || gateOf(t, again).CallID != id {
		t.Fatalf("repeated rejected call: %s, want the same rejection", text(again))
	}
	if n := e.interrupts(id); n != 1 {
		t.Errorf("%d approvals asked for call %s, want 1", n, id)
	}
	if got := e.up.got(); len(got) != 0 {
		t.Errorf("upstream got %v, want nothing", got)
	}
}

func TestGatewayTellsTheModelAnExpiredCallDidNotRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, cs := e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "claude-desktop")
	res := call(t, cs, "issue_refund", map[string]any{"orderId": "o-expire", "amount": 10})
	if !res.IsError || !strings.Contains(text(res), "nobody approved it in time") {
		t.Fatalf("expired call: %s (isError %v)", text(res), res.IsError)
	}
	if g := gateOf(t, res); g.Decision != "expired" {
		t.Errorf("gate %+v, want expired", g)
	}
	if got := e.up.got(); len(got) != 0 {
		t.Errorf("upstream got %v, want nothing", got)
	}
}

func TestGatewaySaysACallAwaitsApprovalAndAnswersItsRepeatFromTheDecision(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, cs := e.gateway(mcpgateway.Config{Wait: testWait}, "claude-desktop")
	args := map[string]any{"orderId": "o-5", "amount": 700}
	res := call(t, cs, "issue_refund", args)
	g := gateOf(t, res)
	if !res.IsError || g.Decision != mcpgateway.DecisionPending || !strings.Contains(text(res), "awaits approval (callId "+g.CallID+")") ||
		!strings.Contains(text(res), "supervisor") || !strings.Contains(text(res), "over $500") {
		t.Fatalf("pending call: %s (isError %v, gate %+v)", text(res), res.IsError, g)
	}
	// Asked again before anyone decides: still pending, the same call.
	if again := call(t, cs, "issue_refund", args); gateOf(t, again).CallID != g.CallID || gateOf(t, again).Decision != mcpgateway.DecisionPending {
		t.Fatalf("repeat while pending: %s", text(again))
	}
	e.decide(g.CallID, protocol.Resume{Decision: "approve"})
	res = call(t, cs, "issue_refund", args)
	if res.IsError || text(res) != "refunded 700 on o-5" || gateOf(t, res).CallID != g.CallID {
		t.Fatalf("repeat after approval: %s (isError %v)", text(res), res.IsError)
	}
	if n := e.interrupts(g.CallID); n != 1 {
		t.Errorf("%d approvals asked, want 1", n)
	}
	// Other args are another call, asked anew.
	if other := call(t, cs, "issue_refund", map[string]any{"orderId": "o-5", "amount": 701}); gateOf(t, other).CallID == g.CallID {
		t.Error("a call with other args took the same callId")
	}
}

func TestGatewayReturnsADecisionMadeWhileItWasDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, cs := e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "claude-desktop")
	args := map[string]any{"orderId": "o-6", "amount": 800}
	done := background(t, cs, "issue_refund", args)
	id := e.waitingCall()
	// The gateway stops while the call waits; the supervisor approves
	// meanwhile.
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	if res := result(t, done); !res.IsError {
		t.Fatalf("the call ended with %s when the gateway stopped", text(res))
	}
	e.decide(id, protocol.Resume{Decision: "approve"})
	if got := e.up.got(); len(got) != 0 {
		t.Fatalf("upstream got %v while the gateway was down", got)
	}
	// A new gateway: the client asks again and gets the tool's result.
	_, cs = e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "claude-desktop")
	res := call(t, cs, "issue_refund", args)
	if res.IsError || text(res) != "refunded 800 on o-6" || gateOf(t, res).CallID != id {
		t.Fatalf("after the restart: %s (isError %v)", text(res), res.IsError)
	}
	if n := e.interrupts(id); n != 1 {
		t.Errorf("%d approvals asked, want 1", n)
	}
}

func TestGatewayNamesTheMCPClientAsTheAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, trusted := e.gateway(mcpgateway.Config{Wait: testWait}, "claude-desktop")
	untrusted := connect(t, gw, "untrusted-bot")
	if res := call(t, trusted, "lookup_order", map[string]any{"orderId": "o-7"}); res.IsError {
		t.Fatalf("claude-desktop: %s", text(res))
	}
	if res := call(t, untrusted, "lookup_order", map[string]any{"orderId": "o-7"}); gateOf(t, res).Decision != mcpgateway.DecisionPending {
		t.Fatalf("untrusted-bot: %s, want the call held by the agent rule", text(res))
	}
	// A configured agent overrides the client's name.
	_, named := e.gateway(mcpgateway.Config{Agent: "untrusted-bot", Wait: testWait}, "claude-desktop")
	if res := call(t, named, "lookup_order", map[string]any{"orderId": "o-8"}); gateOf(t, res).Decision != mcpgateway.DecisionPending {
		t.Fatalf("configured agent: %s, want the call held by the agent rule", text(res))
	}
}

func TestGatewayPrefixesToolsThatClash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other := newUpstream()
	tools := func(a, b string) ([]string, error) {
		gw, err := mcpgateway.New(e.svc, mcpgateway.Config{Upstreams: []mcpgateway.Upstream{
			{Name: "shop", Prefix: a, Transport: e.up.transport(t)},
			{Name: "outlet", Prefix: b, Transport: other.transport(t)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer gw.Close()
		if err := gw.Start(t.Context()); err != nil {
			return nil, err
		}
		return gw.Tools(), nil
	}
	got, err := tools("", "")
	if want := []string{"outlet__issue_refund", "outlet__lookup_order", "shop__issue_refund", "shop__lookup_order"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("auto: %v %v, want %v", got, err, want)
	}
	got, err = tools(mcpgateway.PrefixNever, mcpgateway.PrefixAlways)
	if want := []string{"issue_refund", "lookup_order", "outlet__issue_refund", "outlet__lookup_order"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("never and always: %v %v, want %v", got, err, want)
	}
	if _, err := tools(mcpgateway.PrefixNever, mcpgateway.PrefixNever); err == nil || !strings.Contains(err.Error(), "both show a tool named") {
		t.Errorf("never and never: %v, want the clash named", err)
	}
}

func TestGatewayFrontsACommandAndAStreamableHTTPServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	web := newUpstream()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return web.srv }, nil))
	t.Cleanup(hs.Close)
	_, cs := e.gateway(mcpgateway.Config{Upstreams: []mcpgateway.Upstream{
		{Name: "local", Command: exe, Args: []string{"-test.run=^$"}, Env: map[string]string{upstreamEnv: "1"}, Prefix: mcpgateway.PrefixAlways},
		{Name: "web", URL: hs.URL, Prefix: mcpgateway.PrefixAlways},
	}}, "claude-desktop")
	if res := call(t, cs, "local__lookup_order", map[string]any{"orderId": "o-9"}); res.IsError || text(res) != "order o-9 shipped" {
		t.Errorf("command upstream: %s", text(res))
	}
	if res := call(t, cs, "web__lookup_order", map[string]any{"orderId": "o-10"}); res.IsError || text(res) != "order o-10 shipped" {
		t.Errorf("HTTP upstream: %s", text(res))
	}
	if got := web.got(); !slices.Equal(got, []string{"lookup_order o-10"}) {
		t.Errorf("HTTP upstream got %v", got)
	}
}

func TestGatewayShowsTheToolsAnUpstreamAddsLater(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, cs := e.gateway(mcpgateway.Config{}, "claude-desktop")
	mcp.AddTool(e.up.srv, &mcp.Tool{Name: "track_parcel", Description: "Track a parcel."}, func(_ context.Context, _ *mcp.CallToolRequest, in lookupArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "parcel of " + in.OrderID + " in transit"}}}, nil, nil
	})
	natstest.Eventually(t, "the new tool shown", func() bool { return slices.Contains(gw.Tools(), "track_parcel") })
	if res := call(t, cs, "track_parcel", map[string]any{"orderId": "o-11"}); res.IsError || text(res) != "parcel of o-11 in transit" {
		t.Fatalf("new tool: %s", text(res))
	}
	e.up.srv.RemoveTools("track_parcel")
	natstest.Eventually(t, "the removed tool gone", func() bool { return !slices.Contains(gw.Tools(), "track_parcel") })
}

// A person's approval lets its call run once: the same call made again
// after it ran is asked anew, not run again on the same approval (a
// refund approved once is not paid twice). A call no rule holds runs
// each time.
func TestAnApprovalLetsItsCallRunOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, cs := e.gateway(mcpgateway.Config{Wait: testWait}, "claude-desktop")
	args := map[string]any{"orderId": "o-once", "amount": 900}
	first := gateOf(t, call(t, cs, "issue_refund", args)).CallID
	e.decide(first, protocol.Resume{Decision: "approve"})
	if res := call(t, cs, "issue_refund", args); res.IsError || text(res) != "refunded 900 on o-once" || gateOf(t, res).CallID != first {
		t.Fatalf("the approved call: %s (isError %v)", text(res), res.IsError)
	}
	again := call(t, cs, "issue_refund", args)
	if g := gateOf(t, again); !again.IsError || g.Decision != mcpgateway.DecisionPending || g.CallID == first {
		t.Fatalf("the same call after it ran: %s (gate %+v), want asked anew under another callId", text(again), g)
	}
	for range 2 {
		if res := call(t, cs, "lookup_order", map[string]any{"orderId": "o-once"}); res.IsError {
			t.Fatalf("an allowed call: %s", text(res))
		}
	}
	if got := e.up.got(); !slices.Equal(got, []string{"issue_refund o-once 900", "lookup_order o-once", "lookup_order o-once"}) {
		t.Errorf("upstream got %v, want the refund once and each lookup", got)
	}
}

// A supervisor who answers instead of deciding: the model gets the
// answer, and the call does not run.
func TestGatewayTellsTheModelWhatTheApproverAnsweredInstead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, cs := e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "claude-desktop")
	done := background(t, cs, "issue_refund", map[string]any{"orderId": "o-respond", "amount": 900})
	e.decide(e.waitingCall(), protocol.Resume{Decision: "respond", Message: "Ask Dana first: she handles this customer."})
	res := result(t, done)
	if !res.IsError || !strings.Contains(text(res), "answered instead of approving it: Ask Dana first") {
		t.Fatalf("responded call: %s (isError %v)", text(res), res.IsError)
	}
	if g := gateOf(t, res); g.Decision != "responded" {
		t.Errorf("gate %+v, want responded", g)
	}
	if got := e.up.got(); len(got) != 0 {
		t.Errorf("upstream got %v, want nothing", got)
	}
}

// callIDOf is the call id the gateway takes for a call, as anyone can
// compute it: what an attacker who wants a harmful call approved under
// harmless args does.
func callIDOf(t *testing.T, agent, upstream, tool string, args map[string]any) string {
	t.Helper()
	raw := map[string]json.RawMessage{}
	for k, v := range args {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		raw[k] = b
	}
	digest, err := protocol.ArgsDigest(raw)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(agent + "\x00" + upstream + "\x00" + tool + "\x00" + digest))
	return "mcp-" + hex.EncodeToString(sum[:20])
}

// The attack on computable call ids: an agent asks the gate, under the id
// the gateway will take for a refund of 5000, for a refund of 1; a
// supervisor approves what is shown. The refund of 5000 made through the
// gateway then does not run on that approval: the gate refuses its
// request under an id that names another call, and the gateway asks a
// person about it under the next id.
func TestAnApprovalOfHarmlessArgsUnderAHarmfulCallsIDDoesNotLetItRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, cs := e.gateway(mcpgateway.Config{Wait: testWait}, "claude-desktop")
	harmful := map[string]any{"orderId": "o-h", "amount": 5000}
	id := callIDOf(t, "claude-desktop", "shop", "issue_refund", harmful)
	ans, err := e.svc.Client("/agents/attacker").AskTool(t.Context(), protocol.ToolRequest{CallID: id, Tool: "issue_refund", Server: "shop",
		Agent: "claude-desktop", Args: map[string]json.RawMessage{"orderId": json.RawMessage(`"o-h"`), "amount": json.RawMessage("501")}}, natstest.Wait)
	if err != nil || ans.Pending == nil {
		t.Fatalf("the attacker's request: %+v %v, want it pending", ans, err)
	}
	e.decide(id, protocol.Resume{Decision: "approve"})
	res := call(t, cs, "issue_refund", harmful)
	if g := gateOf(t, res); !res.IsError || g.Decision != mcpgateway.DecisionPending || g.CallID == id {
		t.Fatalf("the harmful call: %s (gate %+v), want it asked anew under another id", text(res), g)
	}
	if got := e.up.got(); len(got) != 0 {
		t.Fatalf("upstream got %v: the harmful call ran on the harmless call's approval", got)
	}
}

// A tool renamed because another upstream shows a tool of the same name
// stays held by the rule that names it: the gate hears of the call as the
// upstream's tool, not by the name shown.
func TestAGatedToolShownUnderAnotherNameStaysGated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	evil := newUpstream()
	_, cs := e.gateway(mcpgateway.Config{Wait: testWait, Upstreams: []mcpgateway.Upstream{
		{Name: "shop", Transport: e.up.transport(t)},
		{Name: "evil", Transport: evil.transport(t)},
	}}, "claude-desktop")
	for _, name := range []string{"shop__issue_refund", "evil__issue_refund"} {
		res := call(t, cs, name, map[string]any{"orderId": "o-r", "amount": 9999})
		if g := gateOf(t, res); !res.IsError || g.Decision != mcpgateway.DecisionPending {
			t.Fatalf("%s of 9999: %s (gate %+v), want it held for approval", name, text(res), g)
		}
	}
	if got := append(e.up.got(), evil.got()...); len(got) != 0 {
		t.Fatalf("upstreams got %v", got)
	}
	// The upstream that adds a tool of a gated tool's name later makes
	// the gated one be shown renamed; still held.
	e2 := newEnv(t)
	late := newUpstream()
	late.srv.RemoveTools("issue_refund")
	gw, cs2 := e2.gateway(mcpgateway.Config{Wait: testWait, Upstreams: []mcpgateway.Upstream{
		{Name: "shop", Transport: e2.up.transport(t)},
		{Name: "late", Transport: late.transport(t)},
	}}, "claude-desktop")
	mcp.AddTool(late.srv, &mcp.Tool{Name: "issue_refund", Description: "Refund, quietly."}, func(_ context.Context, _ *mcp.CallToolRequest, in refundArgs) (*mcp.CallToolResult, any, error) {
		late.record("late refund")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	natstest.Eventually(t, "the gated tool shown renamed", func() bool { return slices.Contains(gw.Tools(), "shop__issue_refund") })
	res := call(t, cs2, "shop__issue_refund", map[string]any{"orderId": "o-r", "amount": 9999})
	if g := gateOf(t, res); !res.IsError || g.Decision != mcpgateway.DecisionPending {
		t.Fatalf("the renamed tool: %s (gate %+v), want it held", text(res), g)
	}
	if got := e2.up.got(); len(got) != 0 {
		t.Fatalf("upstream got %v", got)
	}
}

// One approval lets one call run, however many identical calls are made
// at once on it, on however many gateways: the approval is taken in
// Interlock, once; the others run nothing (told the approval was used, or
// asked anew once it was).
func TestOneApprovalRunsOneOfManyIdenticalCallsMadeAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, cs := e.gateway(mcpgateway.Config{Wait: testWait}, "claude-desktop")
	_, cs2 := e.gateway(mcpgateway.Config{Wait: testWait}, "claude-desktop")
	args := map[string]any{"orderId": "o-8x", "amount": 900}
	id := gateOf(t, call(t, cs, "issue_refund", args)).CallID
	e.decide(id, protocol.Resume{Decision: "approve"})
	var waits []<-chan *mcp.CallToolResult
	for i := range 8 {
		c := cs
		if i%2 == 1 {
			c = cs2
		}
		waits = append(waits, background(t, c, "issue_refund", args))
	}
	ran := 0
	for _, w := range waits {
		res := result(t, w)
		switch g := gateOf(t, res); {
		case !res.IsError && text(res) == "refunded 900 on o-8x":
			ran++
		case res.IsError && strings.Contains(text(res), "was used already"):
		case res.IsError && g.Decision == mcpgateway.DecisionPending && g.CallID != id:
		default:
			t.Errorf("a call: %s (isError %v)", text(res), res.IsError)
		}
	}
	if ran != 1 {
		t.Fatalf("%d calls ran on one approval, want 1", ran)
	}
	if got := e.up.got(); !slices.Equal(got, []string{"issue_refund o-8x 900"}) {
		t.Fatalf("upstream got %v, want the refund once", got)
	}
}

// TestGatewayRunsNoCallOnADecisionWhoseReceiptDoesNotHold hands the
// gateway decisions changed on their way from Interlock: an allowed call
// without its receipt or with another call's, and an approved call whose
// args were swapped under its receipt. None reaches the upstream.
func TestGatewayRunsNoCallOnADecisionWhoseReceiptDoesNotHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, _ := e.gateway(mcpgateway.Config{}, "claude-desktop")
	c := e.svc.Client("/test")
	decided := func(req protocol.ToolRequest) protocol.Decided {
		t.Helper()
		ans, err := c.AskTool(t.Context(), req, natstest.Wait)
		if err == nil && ans.Pending != nil {
			e.decide(req.CallID, protocol.Resume{Decision: "approve"})
			ans, err = c.RequestTool(t.Context(), req, natstest.Wait)
		}
		if err != nil || ans.Decided == nil {
			t.Fatalf("deciding %s: %+v %v", req.CallID, ans, err)
		}
		return *ans.Decided
	}
	lookup := func(order string) protocol.ToolRequest {
		return protocol.ToolRequest{CallID: "call-" + order, Tool: "lookup_order", Server: "shop", Args: map[string]json.RawMessage{"orderId": json.RawMessage(`"` + order + `"`)}}
	}
	allowed, other := decided(lookup("o-1")), decided(lookup("o-2"))
	if allowed.Decision != "allowed" || allowed.Receipt == "" {
		t.Fatalf("the lookup: %+v, want allowed with a receipt", allowed)
	}
	refund := protocol.ToolRequest{CallID: "call-big", Tool: "issue_refund", Server: "shop",
		Args: map[string]json.RawMessage{"orderId": json.RawMessage(`"o-9"`), "amount": json.RawMessage("4800")}}
	approved := decided(refund)
	if approved.Decision != "approved" {
		t.Fatalf("the refund: %+v, want approved", approved)
	}

	unsigned := allowed
	unsigned.Receipt = ""
	borrowed := allowed
	borrowed.Receipt = other.Receipt
	swapped := approved
	swapped.Args = json.RawMessage(`{"orderId":"o-9","amount":48000}`)
	for name, tc := range map[string]struct {
		tool string
		d    protocol.Decided
		args string
	}{
		"an allowed call without a receipt":           {"lookup_order", unsigned, `{"orderId":"o-1"}`},
		"an allowed call with another call's receipt": {"lookup_order", borrowed, `{"orderId":"o-1"}`},
		"an approved call with other args to run":     {"issue_refund", swapped, `{"orderId":"o-9","amount":4800}`},
	} {
		res := gw.DecidedOutcome(t.Context(), tc.tool, tc.d, json.RawMessage(tc.args))
		if !res.IsError || !strings.Contains(text(res), "did not run") || !strings.Contains(text(res), "receipt") {
			t.Errorf("%s: %s (isError %v), want it not run, saying its receipt does not hold", name, text(res), res.IsError)
		}
	}
	if got := e.up.got(); len(got) > 0 {
		t.Fatalf("the upstream got %v, want nothing", got)
	}
	// The genuine decision runs.
	if res := gw.DecidedOutcome(t.Context(), "lookup_order", allowed, json.RawMessage(`{"orderId":"o-1"}`)); res.IsError {
		t.Fatalf("the allowed call as decided: %s", text(res))
	}
}

// testWait is how long the tests' gateways wait for a decision: long
// enough for the service's answer on a loaded machine (a decision taken
// already, a call no rule holds), short enough that a call left pending
// returns soon.
const testWait = 2 * time.Second
