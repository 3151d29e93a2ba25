package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/mcpgateway"
	"github.com/interlockhq/interlock/protocol"
)

// With Config.Gateway (ModeNetwork), one run in sixteen is a tool call an
// agent makes through `interlock mcp gateway`, which runs on the clients'
// host in front of an MCP server there (upstream) whose issue_refund tool
// counts its calls by order. The gateway asks the gate, which holds a
// refund of gateAmount for the supervisor (examples/gate/rules.yaml); the
// agent makes the call again, with the same arguments, while it waits, as
// the gateway tells a model to; the supervisor approves it over NATS; then
// two instances of the agent make the call at once. The refund must reach
// the tool once, never twice: when the answer to the gateway's take of the
// approval is lost, the gateway finishes the call itself, whether or not
// the agent makes it again. Not at all only when the take went unanswered
// for the gateway's whole repeat window (Report.GatewayUnrun, with the
// history of each; the agent is told the call did not run).
func isGateway(cfg Config, i int) bool { return cfg.Gateway && i%16 == 8 }

// The gateway's and its upstream's places on the clients' host, and how
// the gateway is run.
const (
	upstreamPort = "8445"
	gatewayPort  = "8446"
	upstreamName = "payments"
	gatewayAgent = "soak-agent"
	// gatewayWait is the gateway's --wait: how long a call waits for a
	// person before the agent is told it awaits approval.
	gatewayWait = 2 * time.Second
	// gatewayCallWait bounds one call through the gateway.
	gatewayCallWait = 30 * time.Second
	// gatewayReady begins the line the gateway prints once it serves.
	gatewayReady = "MCP gateway (streamable HTTP) on"
	// gatewayInstances is how many instances of the agent make the
	// approved call at once.
	gatewayInstances = 2
)

// gatewayOrder is the order gateway run i refunds.
func gatewayOrder(i int) string { return fmt.Sprintf("m-%06d", i) }

// upstream is the MCP server behind the gateway.
type upstream struct {
	srv  *http.Server
	done chan struct{}

	mu    sync.Mutex
	calls map[string]int // issue_refund's calls, by order
}

// startUpstream serves the upstream on l until close.
func startUpstream(l net.Listener) *upstream {
	u := &upstream{calls: map[string]int{}, done: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: upstreamName, Version: "v0"}, nil)
	type refundArgs struct {
		OrderID string  `json:"orderId"`
		Amount  float64 `json:"amount"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "issue_refund", Description: "Refund an order."}, func(_ context.Context, _ *mcp.CallToolRequest, in refundArgs) (*mcp.CallToolResult, any, error) {
		u.mu.Lock()
		u.calls[in.OrderID]++
		u.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refunded %g on %s", in.Amount, in.OrderID)}}}, nil, nil
	})
	u.srv = &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(u.done)
		_ = u.srv.Serve(l)
	}()
	return u
}

// refunds is how many times the tool refunded order.
func (u *upstream) refunds(order string) int {
	if u == nil {
		return 0
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[order]
}

// total is how many times the tool was called.
func (u *upstream) total() int {
	if u == nil {
		return 0
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, c := range u.calls {
		n += c
	}
	return n
}

func (u *upstream) close() error {
	err := u.srv.Close()
	<-u.done
	return err
}

// startGateway starts the upstream on the clients' host, and `interlock
// mcp gateway` in front of it there, connected to the cluster at url as
// the agent user, with the deployment's CA (a natscli context file). The
// gateway serves streamable HTTP on the clients' host's loopback.
func (nw *network) startGateway(ctx context.Context, cfg Config, dir, url string, d *deployment, env []string, inHost func(*proc, string)) error {
	l, err := nw.net.Listen(clientHost, "tcp", ":"+upstreamPort)
	if err != nil {
		return fmt.Errorf("soak: the gateway's upstream's listener: %w", err)
	}
	nw.upstream = startUpstream(l)
	config := filepath.Join(dir, "gateway.yaml")
	yaml := fmt.Sprintf("upstreams:\n  - name: %s\n    url: http://%s:%s/\n", upstreamName, clientHost, upstreamPort)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	natsContext, err := json.Marshal(map[string]string{"url": url, "user": agentUser, "password": nw.passwords[agentUser],
		"ca": nw.tls.CA, "inbox_prefix": bus.ClientInboxPrefix(agentUser)})
	if err != nil {
		return err
	}
	contextFile := filepath.Join(dir, "gateway-context.json")
	if err := os.WriteFile(contextFile, natsContext, 0o600); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	p := &proc{name: "gateway", bin: cfg.Binary, env: env, log: filepath.Join(dir, "gateway.log"), ready: gatewayReady,
		args: []string{"mcp", "gateway", "--config", config, "--context", contextFile, "--http", "127.0.0.1:" + gatewayPort,
			"--wait", gatewayWait.String(), "--agent", gatewayAgent, "--log-level", "info"}}
	inHost(p, clientHost)
	d.all = append(d.all, p)
	return p.start(ctx)
}

// connectGateway connects the agent's instances to the gateway, from the
// clients' host, as MCP clients.
func (a *agents) connectGateway(ctx context.Context, nw *network) error {
	dialer, err := nw.net.Dialer(clientHost)
	if err != nil {
		return err
	}
	for range gatewayInstances {
		hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
		t := &mcp.StreamableClientTransport{Endpoint: "http://127.0.0.1:" + gatewayPort + "/mcp", HTTPClient: hc}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: gatewayAgent, Version: "v0"}, nil).Connect(ctx, t, nil)
		if err != nil {
			return fmt.Errorf("soak: connecting to the MCP gateway: %w", err)
		}
		a.mcp = append(a.mcp, cs)
	}
	return nil
}

// gatewayRecord is what the agents did and were told of one gateway run.
type gatewayRecord struct {
	mu sync.Mutex
	// callID is the gate run the gateway asked under; ran counts the
	// instances told the call ran; raced is set once both instances had
	// their answer.
	callID string
	ran    int
	raced  bool
}

// gatewayRecord is gateway run i's record.
func (a *agents) gatewayRecord(i int) *gatewayRecord {
	v, _ := a.gateway.LoadOrStore(i, &gatewayRecord{})
	return v.(*gatewayRecord)
}

// runOf is the id of run i's run in Interlock: runID(i), but for a
// gateway run the gate run the gateway asked under, once known.
func (a *agents) runOf(i int) string {
	if a.gateway != nil {
		if v, ok := a.gateway.Load(i); ok {
			r := v.(*gatewayRecord)
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.callID != "" {
				return r.callID
			}
		}
	}
	return runID(i)
}

// What a call through the gateway came to.
type gatewayOutcome string

const (
	// gatewayRetry: no answer that settles it (the gateway could not
	// reach the cluster, say): make the call again.
	gatewayRetry gatewayOutcome = "retry"
	// gatewayPending: it waits for a person.
	gatewayPending gatewayOutcome = "pending"
	// gatewayRan: the tool ran; its result came back.
	gatewayRan gatewayOutcome = "ran"
	// gatewayTaken: its approval was taken already; it did not run.
	gatewayTaken gatewayOutcome = "taken"
	// gatewayNotRun: a decision against it (rejected, expired).
	gatewayNotRun gatewayOutcome = "not run"
)

// callGateway makes run i's call through the gateway as instance n, and
// says what it came to, with what the gateway said of the gate and the
// result's text.
func (a *agents) callGateway(ctx context.Context, n, i int) (mcpgateway.Gate, gatewayOutcome, string) {
	cctx, cancel := context.WithTimeout(ctx, gatewayCallWait)
	defer cancel()
	res, err := a.mcp[n].CallTool(cctx, &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"orderId": gatewayOrder(i), "amount": gateAmount}})
	if err != nil {
		return mcpgateway.Gate{}, gatewayRetry, err.Error()
	}
	var text string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text += t.Text
		}
	}
	var g mcpgateway.Gate
	if b, err := json.Marshal(res.Meta[mcpgateway.MetaKey]); err == nil {
		_ = json.Unmarshal(b, &g)
	}
	switch {
	case g.Decision == mcpgateway.DecisionPending:
		return g, gatewayPending, text
	case !res.IsError && (g.Decision == protocol.DecidedApproved || g.Decision == protocol.DecidedEdited):
		return g, gatewayRan, text
	case res.IsError && strings.Contains(text, "was used already"):
		return g, gatewayTaken, text
	case g.Decision == protocol.DecidedRejected || g.Decision == protocol.DecidedExpired:
		return g, gatewayNotRun, text
	}
	return g, gatewayRetry, text
}

// driveGateway makes gateway run i's call until it waits for a person,
// approves it as the supervisor, then has every instance make it at once
// (raceGateway), until that is done or cfg.Patience passes without it.
// It reports whether it was done.
func (a *agents) driveGateway(ctx context.Context, cfg Config, i int) bool {
	name, rec := runID(i), a.gatewayRecord(i)
	var decision *command
	for began := time.Now(); time.Since(began) < cfg.Patience; {
		rec.mu.Lock()
		callID, raced := rec.callID, rec.raced
		rec.mu.Unlock()
		switch {
		case raced:
			return true
		case callID == "":
			g, out, text := a.callGateway(ctx, 0, i)
			a.log(name, "instance 1 made the call: %s (%+v): %s", out, g, text)
			if g.CallID != "" && (out == gatewayPending || out == gatewayRan) {
				rec.mu.Lock()
				rec.callID = g.CallID
				if out == gatewayRan {
					rec.ran++
				}
				rec.mu.Unlock()
			}
		default:
			cp, err := a.c.Checkpoint(ctx, protocol.GateFlow, callID)
			switch {
			case err == nil && cp.Finished():
				return a.raceGateway(ctx, cfg, i, callID)
			case err == nil && cp.Waiting():
				if decision == nil {
					if decision = a.gateDecision(ctx, callID, cp, protocol.VerdictApprove, ""); decision != nil {
						decision.run = name
					}
				}
				if decision != nil {
					a.send(ctx, decision, cfg.Retry)
				}
			}
		}
		if wait(ctx, maxPoll) != nil {
			return false
		}
	}
	return false
}

// raceGateway has every instance make gateway run i's approved call at
// once, each again until it has an answer that settles it: it ran, its
// approval was taken, or (the approval taken before it asked) it was
// asked anew, under a new call id, which the supervisor then rejects. It
// reports whether every instance had its answer within cfg.Patience.
func (a *agents) raceGateway(ctx context.Context, cfg Config, i int, callID string) bool {
	name, rec := runID(i), a.gatewayRecord(i)
	settled := make([]bool, len(a.mcp))
	anew := make([]string, len(a.mcp))
	var wg sync.WaitGroup
	for n := range a.mcp {
		wg.Go(func() {
			for began := time.Now(); time.Since(began) < cfg.Patience; {
				g, out, text := a.callGateway(ctx, n, i)
				a.log(name, "instance %d made the approved call: %s (%+v): %s", n+1, out, g, text)
				switch {
				case out == gatewayRan:
					rec.mu.Lock()
					rec.ran++
					rec.mu.Unlock()
					settled[n] = true
				case out == gatewayTaken:
					a.gatewayTaken.Add(1)
					settled[n] = true
				case out == gatewayNotRun:
					settled[n] = true
				case out == gatewayPending && g.CallID != callID:
					a.gatewayAnew.Add(1)
					settled[n], anew[n] = true, g.CallID
				}
				if settled[n] || wait(ctx, maxPoll) != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, run := range anew {
		if run != "" {
			a.rejectAnew(ctx, cfg, name, run)
		}
	}
	for _, ok := range settled {
		if !ok {
			return false
		}
	}
	rec.mu.Lock()
	rec.raced = true
	rec.mu.Unlock()
	return true
}

// rejectAnew has the supervisor reject gate run, a call asked anew after
// its approval was taken, until it ends or cfg.Patience passes.
func (a *agents) rejectAnew(ctx context.Context, cfg Config, name, run string) {
	var decision *command
	a.follow(ctx, cfg, protocol.GateFlow, run, nil, func(cp protocol.Checkpoint) {
		if decision == nil {
			if decision = a.gateDecision(ctx, run, cp, protocol.VerdictReject, "soak: asked anew after its approval was taken"); decision == nil {
				return
			}
			decision.run = name
		}
		a.send(ctx, decision, cfg.Retry)
	})
}

// checkGateway checks gateway run i: its gate run approved by the
// supervisor, the approval taken once, and the refund run by the tool
// once, or not at all where the take went unanswered (counted in
// a.unrun). It returns what is wrong, "" if nothing is.
func (a *agents) checkGateway(i int, c protocol.Checkpoint, t tally) (lost, dup string) {
	if a.expiredWhileLeft(i, c, t) {
		if n := a.upstream.refunds(gatewayOrder(i)); n > 0 {
			return "", fmt.Sprintf("gateway: the refund of order %s ran %d times, with no approval", gatewayOrder(i), n)
		}
		return "", ""
	}
	if lost, dup = a.approvedOnce("gateway", c, t); lost != "" || dup != "" {
		return lost, dup
	}
	rec := a.gatewayRecord(i)
	rec.mu.Lock()
	told := rec.ran
	rec.mu.Unlock()
	n := a.upstream.refunds(gatewayOrder(i))
	switch {
	case t.consumed > 1:
		return "", fmt.Sprintf("gateway: the approval was taken %d times", t.consumed)
	case n > 1:
		return "", fmt.Sprintf("gateway: the refund of order %s ran %d times on one approval", gatewayOrder(i), n)
	case told > 1:
		return "", fmt.Sprintf("gateway: %d instances were told the call ran", told)
	case t.consumed == 0:
		return eventsMissingPrefix + ": gateway: the approval was never taken", ""
	case n == 0 && told > 0:
		return fmt.Sprintf("gateway: an instance was told the call ran, yet the tool never refunded order %s", gatewayOrder(i)), ""
	case n == 0:
		a.unrun.Store(i, true)
	}
	return "", ""
}
