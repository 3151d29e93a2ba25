package mcpgateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/mcpgateway"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// stallProxy forwards TCP connections to a NATS server and, once armed,
// stalls every one of them (nothing forwarded either way, nothing lost)
// from the moment a client sends bytes holding trigger, those bytes
// forwarded first, until resume: a partition that falls just after a
// command reached the server, so that its sender learns nothing of it.
type stallProxy struct {
	t       *testing.T
	l       net.Listener
	to      string
	trigger []byte

	mu      sync.Mutex
	cond    *sync.Cond
	armed   bool
	stalled bool
	closed  bool
	hit     chan struct{}
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newStallProxy(t *testing.T, to, trigger string) *stallProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{t: t, l: l, to: strings.TrimPrefix(to, "nats://"), trigger: []byte(trigger), hit: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) url() string { return "nats://" + p.l.Addr().String() }

func (p *stallProxy) accept() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.to)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(in, out, true) })
		p.wg.Go(func() { p.pipe(out, in, false) })
	}
}

// pipe copies from src to dst, holding each chunk while the proxy is
// stalled; fromClient chunks may set the stall off.
func (p *stallProxy) pipe(src, dst net.Conn, fromClient bool) {
	defer func() { _ = dst.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.stalled && !p.closed {
				p.cond.Wait()
			}
			trip := fromClient && p.armed && bytes.Contains(buf[:n], p.trigger)
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if trip {
				p.mu.Lock()
				p.armed, p.stalled = false, true
				close(p.hit)
				p.mu.Unlock()
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				p.t.Logf("proxy: %v", err)
			}
			return
		}
	}
}

// arm stalls the proxy at the next client bytes holding its trigger.
func (p *stallProxy) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

// resume ends the stall: what was held flows on.
func (p *stallProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = false
	p.cond.Broadcast()
}

func (p *stallProxy) close() {
	_ = p.l.Close()
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// proxiedPort is a deployment as a gateway process reaches it: clients on
// a connection of its own (through the proxy), with a short wait.
type proxiedPort struct {
	c    *client.Client
	auth *authority.Authority
}

func (p proxiedPort) Client(source string) *client.Client { return p.c.WithSource(source) }
func (p proxiedPort) Authority() *authority.Authority     { return p.auth }

// TestACallWhoseTakeWasAnsweredByNothingRunsOnceWhenMadeAgain: the
// gateway's take of an approval reaches JetStream, and then the network
// between the gateway and the server stalls, so that neither the
// acknowledgement nor the consumed event comes back in time. The gateway
// runs nothing yet and says so. Made again once the network is back, the
// call gets the result of its run, once, on the approval that take took:
// not asked anew.
func TestACallWhoseTakeWasAnsweredByNothingRunsOnceWhenMadeAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p, cs := e.stalledGateway()
	args := map[string]any{"orderId": "o-lost", "amount": 900}

	callID, res := e.takeIntoStall(p, cs, args)
	if !res.IsError || !strings.Contains(text(res), "has not run yet") || len(e.up.got()) != 0 {
		t.Fatalf("the call whose take went unanswered: %s (upstream got %v), want it not run yet", text(res), e.up.got())
	}
	p.resume()

	res = callUntilSettled(t, cs, "issue_refund", args)
	if res.IsError || text(res) != "refunded 900 on o-lost" {
		t.Fatalf("the call made again: %s, want the refund", text(res))
	}
	if got := e.up.got(); len(got) != 1 {
		t.Fatalf("upstream calls %v, want the refund once", got)
	}
	if n := e.interrupts(callID); n != 1 {
		t.Fatalf("%d approvals asked for the call, want 1: made again, it was not asked anew", n)
	}
	if g := gateOf(t, res); g.CallID != callID {
		t.Fatalf("the call ran under %s, want the approved %s", g.CallID, callID)
	}
}

// TestAnyOfTheLostTakesOfIdenticalCallsRunsTheCall: two identical calls
// made at once each sent a take and learned nothing of it; the first
// took the approval, the second (sent later, or never stored) did not.
// The call made again sends each again and runs on the one that took it,
// once; the other's refusal is not taken for "used already".
func TestAnyOfTheLostTakesOfIdenticalCallsRunsTheCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, cs := e.gateway(mcpgateway.Config{Wait: 2 * time.Second}, "support-bot")
	args := map[string]any{"orderId": "o-twice", "amount": 900}
	res := call(t, cs, "issue_refund", args)
	callID := gateOf(t, res).CallID
	e.decide(callID, protocol.Resume{Decision: "approve"})
	ans, err := e.svc.Client("/mcp-gateway/support-bot").RequestTool(t.Context(), protocol.ToolRequest{CallID: callID, Tool: "issue_refund", Server: "shop",
		Args: map[string]json.RawMessage{"orderId": json.RawMessage(`"o-twice"`), "amount": json.RawMessage("900")}, Agent: "support-bot"}, natstest.Wait)
	if err != nil || ans.Decided == nil {
		t.Fatalf("the decision: %+v %v", ans, err)
	}
	// The first call's take landed, its answer lost; the second's id was
	// never stored.
	c := e.svc.Client("/mcp-gateway/support-bot")
	_, err = c.WithWait(time.Nanosecond).Take(t.Context(), callID, ans.Decided.FinalDigest)
	var first *client.UnsettledError
	if !errors.As(err, &first) {
		t.Fatalf("the first take: %v, want its answer lost", err)
	}
	natstest.Eventually(t, "the first take applied", func() bool {
		cp, err := c.Checkpoint(t.Context(), client.GateFlow, callID)
		return err == nil && strings.Contains(string(cp.State), `"consumed"`)
	})
	gw.LeaveUnsettled("issue_refund", "support-bot", *ans.Decided, first.EventID, "never-stored-take")

	res = call(t, cs, "issue_refund", args)
	if res.IsError || text(res) != "refunded 900 on o-twice" {
		t.Fatalf("the call made again: %s, want the refund", text(res))
	}
	if got := e.up.got(); len(got) != 1 {
		t.Fatalf("upstream calls %v, want the refund once", got)
	}
}

// TestACallWhoseCallerStopsWaitingOnceItsApprovalIsTakenStillRuns: the
// agent's request is cancelled just as the gateway has taken the call's
// approval (the agent gave up waiting, its client went away). The
// approval was taken for this call: the call runs, once, though no one
// waits for its result; it is not left taken and unrun.
func TestACallWhoseCallerStopsWaitingOnceItsApprovalIsTakenStillRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, cs := e.gateway(mcpgateway.Config{Wait: 2 * time.Second}, "support-bot")
	args := map[string]any{"orderId": "o-gone", "amount": 900}
	res := call(t, cs, "issue_refund", args)
	callID := gateOf(t, res).CallID
	e.decide(callID, protocol.Resume{Decision: "approve"})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reached := make(chan bool, 1)
	gw.OnTaken(func(caller context.Context) {
		cancel()
		select {
		case <-caller.Done():
			reached <- true
		case <-time.After(natstest.Wait):
			reached <- false
		}
	})
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "issue_refund", Arguments: args}); err == nil {
		t.Fatalf("the call its caller cancelled returned %s, want the caller's cancellation", text(res))
	}
	if !<-reached {
		t.Fatal("the caller's cancellation never reached the gateway's call")
	}
	natstest.Eventually(t, "the approved refund made", func() bool { return len(e.up.got()) == 1 })
	if n := e.interrupts(callID); n != 1 {
		t.Fatalf("%d approvals asked for the call, want 1", n)
	}
}

// callUntilSettled makes a call until its answer is not that the
// gateway's take of its approval, or the call's request, is still
// unanswered.
func callUntilSettled(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	return callUntil(t, cs, tool, args, "has not answered the gateway's take", noAnswer)
}

// noAnswer is what the gateway says of a request that Interlock did not
// answer in its wait. The stalled gateway waits half a second, which a
// loaded machine may well exceed: such a call is made again, as the
// gateway tells an agent to.
const noAnswer = "the approval service did not answer within"

// callUntil makes a call until its answer says none of again.
func callUntil(t *testing.T, cs *mcp.ClientSession, tool string, args any, again ...string) *mcp.CallToolResult {
	t.Helper()
	for range 60 {
		res := call(t, cs, tool, args)
		if !slices.ContainsFunc(again, func(s string) bool { return strings.Contains(text(res), s) }) {
			return res
		}
	}
	t.Fatalf("%s: still answered %q after 60 calls", tool, again)
	return nil
}

// TestAnApprovalTakenAfterItsCallerGaveUpRunsItsCallOnce: the gateway's
// take of an approval goes unanswered, and the agent never makes the call
// again (it gave up, its model moved on). The gateway began to take the
// approval, so it finishes the call itself: once the network is back, it
// learns that its take took the approval and runs the call, once. The
// call made again later gets that run's result; made once more, it is a
// new call, asked anew, and the tool is not called again.
func TestAnApprovalTakenAfterItsCallerGaveUpRunsItsCallOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p, cs := e.stalledGateway()
	args := map[string]any{"orderId": "o-left", "amount": 900}

	callID, res := e.takeIntoStall(p, cs, args)
	if !strings.Contains(text(res), "has not run yet") || len(e.up.got()) != 0 {
		t.Fatalf("the call whose take went unanswered: %s (upstream got %v), want it not run yet", text(res), e.up.got())
	}
	p.resume()

	natstest.Eventually(t, "the approved refund made without the call made again", func() bool { return len(e.up.got()) == 1 })
	res = callUntilSettled(t, cs, "issue_refund", args)
	if res.IsError || text(res) != "refunded 900 on o-left" {
		t.Fatalf("the call made again: %s, want its run's result", text(res))
	}
	res = callUntil(t, cs, "issue_refund", args, noAnswer)
	if g := gateOf(t, res); g.Decision != mcpgateway.DecisionPending || g.CallID == callID {
		t.Fatalf("the call made once more: %+v %s, want it asked anew", g, text(res))
	}
	if got := e.up.got(); len(got) != 1 {
		t.Fatalf("upstream calls %v, want the refund once", got)
	}
}

// stalledGateway starts a gateway on the deployment whose connection to
// it goes through a proxy that stalls once armed, at the first take of
// an approval, with a client wait of 2 s and a half-second wait for
// decisions, and connects an MCP client named support-bot.
func (e *env) stalledGateway() (*stallProxy, *mcp.ClientSession) {
	p, cs, _ := e.stalledGatewayOf()
	return p, cs
}

// stalledGatewayOf is stalledGateway, and the gateway, its
// configuration changed by tune.
func (e *env) stalledGatewayOf(tune ...func(*mcpgateway.Config)) (*stallProxy, *mcp.ClientSession, *mcpgateway.Gateway) {
	t := e.t
	t.Helper()
	names, _ := wire.NewNames("")
	p := newStallProxy(t, e.srv.ClientURL(), names.GateConsume())
	nc, js := natstest.Connect(t, p.url())
	port := proxiedPort{c: client.New(nc, js, names, "", 2*time.Second), auth: e.svc.Authority()}
	cfg := mcpgateway.Config{Upstreams: []mcpgateway.Upstream{{Name: "shop", Transport: e.up.transport(t)}}, Wait: 500 * time.Millisecond}
	for _, f := range tune {
		f(&cfg)
	}
	gw, err := mcpgateway.New(port, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	return p, connect(t, gw, "support-bot"), gw
}

// takeIntoStall makes a refund call with args, approves it, arms p and
// makes the call again until the gateway's take of the approval set the
// stall off. It returns the call's id and the last call's result.
func (e *env) takeIntoStall(p *stallProxy, cs *mcp.ClientSession, args map[string]any) (string, *mcp.CallToolResult) {
	t := e.t
	t.Helper()
	res := call(t, cs, "issue_refund", args)
	if g := gateOf(t, res); g.Decision != mcpgateway.DecisionPending {
		t.Fatalf("first call: %+v %s, want it pending", g, text(res))
	}
	callID := gateOf(t, res).CallID
	e.decide(callID, protocol.Resume{Decision: "approve"})
	p.arm()
	for tries := 0; ; tries++ {
		if tries == 20 {
			t.Fatalf("no take sent in %d calls: %s", tries, text(res))
		}
		// A loaded machine may answer the repeated request later than
		// the gateway's half second: then nothing was taken; again.
		res = call(t, cs, "issue_refund", args)
		select {
		case <-p.hit:
			return callID, res
		default:
			if !strings.Contains(text(res), "did not answer") {
				t.Fatalf("the call made again after its approval: %s, want its take sent", text(res))
			}
		}
	}
}

// TestAGatewayClosedWhileItsTakeIsUnansweredStopsAndRunsNothing: the
// gateway's take of an approval goes unanswered, and the gateway is
// closed while its settler still sends it again: Close returns, without
// waiting for the network to come back, and the call does not run.
func TestAGatewayClosedWhileItsTakeIsUnansweredStopsAndRunsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p, cs, gw := e.stalledGatewayOf()
	args := map[string]any{"orderId": "o-closed", "amount": 900}
	_, res := e.takeIntoStall(p, cs, args)
	if !strings.Contains(text(res), "has not run yet") {
		t.Fatalf("the call whose take went unanswered: %s, want it not run yet", text(res))
	}
	closed := make(chan error, 1)
	go func() { closed <- gw.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(natstest.Wait):
		// Let the take through, so that the close can end.
		p.resume()
		t.Fatalf("Close has not returned in %s while the gateway's take was unanswered", natstest.Wait)
	}
	p.resume()
	if got := e.up.got(); len(got) != 0 {
		t.Fatalf("upstream calls %v after the gateway closed, want none", got)
	}
}
