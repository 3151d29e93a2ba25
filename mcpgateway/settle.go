package mcpgateway

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// How a settler sends a call's unanswered takes again: at once, then
// after settleFirst, twice as late each time, up to settleMax.
const (
	settleFirst = time.Second
	settleMax   = 15 * time.Second
)

// A settler finishes a call whose take of its approval went unanswered
// (JetStream's acknowledgement or the consumed event lost in a partition,
// or later than the client's wait): the gateway began to take the
// approval, so the rest of the call is its own to finish, whether or not
// its caller comes back. It sends the call's takes again under their ids
// (JetStream drops a duplicate of one it stored, and the first one's
// outcome comes back) until one is answered, and runs the call, once, if
// one of them took the approval. The same call made again waits for it,
// and one caller is given the result.
type settler struct {
	// takes, guarded by Gateway.mu, are the call's takes whose outcome is
	// not known yet, oldest first: each identical call made while the
	// answers were lost adds its own.
	takes []unsettledTake
	// done is closed once the call is settled; res is then its result
	// (the upstream's, or why it did not run), and at when it was
	// settled.
	done chan struct{}
	res  *mcp.CallToolResult
	at   time.Time
}

// unsettledTake is a take whose outcome was not learned: its event id,
// and when it was sent.
type unsettledTake struct {
	id string
	at time.Time
}

// settlerOf is the settler of call id that no caller has been given the
// result of, or nil.
func (g *Gateway) settlerOf(id string) *settler {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.settling[id]
}

// unsettled has the take of event id, of the call d approves, finished
// by the call's settler: it joins the one at work, or starts one. c is
// the caller's client, r the call's route and name the name the gateway
// shows the tool by.
func (g *Gateway) unsettled(c *client.Client, r route, gate Gate, name string, d protocol.Decided, id string) *settler {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := unsettledTake{id: id, at: time.Now()}
	if s := g.settling[d.CallID]; s != nil {
		select {
		case <-s.done:
		default:
			s.takes = append(s.takes, t)
			return s
		}
	}
	for callID, s := range g.settling {
		select {
		case <-s.done:
			if time.Since(s.at) > g.cfg.RepeatWindow {
				delete(g.settling, callID)
			}
		default:
		}
	}
	s := &settler{takes: []unsettledTake{t}, done: make(chan struct{})}
	g.settling[d.CallID] = s
	if g.closed {
		s.res, s.at = failed(gate, "The call of %s did not run: the gateway is shutting down, and Interlock had not answered its take of the approval. Call it again with the same arguments once it is back.", name), time.Now()
		close(s.done)
		return s
	}
	g.calls.Add(1)
	go g.settle(s, c, r, gate, name, d)
	return s
}

// settle finishes s's call, then says so; it ends early when the gateway
// closes.
func (g *Gateway) settle(s *settler, c *client.Client, r route, gate Gate, name string, d protocol.Decided) {
	defer g.calls.Done()
	res := g.settled(s, c, r, gate, name, d)
	g.mu.Lock()
	s.res, s.at = res, time.Now()
	g.mu.Unlock()
	close(s.done)
}

// settled sends s's takes again until one is answered, and returns the
// call's result: the upstream's, when a take of s's took the approval;
// why it did not run, when each was refused, when the gateway closes, or
// when none was answered within the repeat window of the last.
func (g *Gateway) settled(s *settler, c *client.Client, r route, gate Gate, name string, d protocol.Decided) *mcp.CallToolResult {
	ctx := g.done
	next := time.NewTimer(0)
	defer next.Stop()
	backoff := settleFirst
	for {
		select {
		case <-ctx.Done():
			return failed(gate, "The call of %s did not run: the gateway shut down before Interlock answered its take of the approval. Call it again with the same arguments once it is back.", name)
		case <-next.C:
		}
		g.mu.Lock()
		takes := slices.Clone(s.takes)
		g.mu.Unlock()
		refused := map[string]bool{}
		var last error
		for n, t := range takes {
			_, err := c.ConsumeAgain(ctx, d, t.id)
			switch {
			case err == nil:
				g.log.Info().Str("call_id", d.CallID).Int("take", n+1).Int("takes", len(takes)).Msg("mcp gateway: a take of an approval whose outcome was not learned, sent again, took it; the call runs")
				// This take took the approval: the call is the gateway's
				// to run, and no other take did.
				return g.forward(ctx, r, gate, d.Args)
			case definite(err):
				refused[t.id], last = true, err
				g.log.Info().Err(err).Str("call_id", d.CallID).Int("take", n+1).Int("takes", len(takes)).Msg("mcp gateway: a take of an approval sent again did not take it")
			default:
				g.log.Warn().Err(err).Str("call_id", d.CallID).Int("take", n+1).Int("takes", len(takes)).Msg("mcp gateway: a take of an approval sent again is still unanswered; kept")
			}
		}
		g.mu.Lock()
		s.takes = slices.DeleteFunc(s.takes, func(t unsettledTake) bool { return refused[t.id] })
		left := slices.Clone(s.takes)
		g.mu.Unlock()
		switch {
		case len(left) == 0:
			return g.notTaken(gate, name, d, last)
		case time.Since(left[len(left)-1].at) > g.cfg.RepeatWindow:
			g.log.Warn().Str("call_id", d.CallID).Int("takes", len(left)).Dur("repeat_window", g.cfg.RepeatWindow).
				Msg("mcp gateway: takes of an approval whose outcome was never learned are given up after the repeat window; the approval may have been taken, and its call did not run")
			return failed(gate, "The call of %s did not run: Interlock did not answer the gateway's take of its approval within %s, and may have taken it. Tell the user; call it again to ask a person anew, if it must run.", name, g.cfg.RepeatWindow)
		}
		next.Reset(backoff)
		backoff = min(2*backoff, settleMax)
	}
}

// definite reports whether err, a take's, settles that take: it was
// refused (the approval taken by another, or not the caller's to take) or
// its decision's receipt does not hold. Any other error says nothing of
// the take, which may yet apply.
func definite(err error) bool {
	var ref *client.RefusedError
	return errors.Is(err, client.ErrTaken) || errors.Is(err, client.ErrReceipt) || errors.As(err, &ref)
}

// await waits, up to wait (0: for as long as it takes) or until caller
// ends, for s to settle its call, decided decision, and returns the
// call's result to the first caller that gets it; any other is told the
// approval was used. A settler ends by itself (the call settled, or given
// up after the repeat window) or when the gateway closes.
func (g *Gateway) await(caller context.Context, s *settler, gate Gate, name, decision string, wait time.Duration) *mcp.CallToolResult {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-s.done:
	case <-timeout:
	case <-caller.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-s.done:
	default:
		return failed(gate, "The call of %s was %s, but Interlock has not answered the gateway's take of its approval yet, so it has not run yet. The gateway keeps at it and runs the call once if the take took the approval. Call %s again with the same arguments to get the result.", name, decision, name)
	}
	if g.settling[gate.CallID] != s {
		return failed(gate, "The call of %s did not run again: its approval (callId %s) was used already, by this call made before or by an identical one made at the same time; an approval lets a call run once. Call it again to ask a person anew, if it must run again.", name, gate.CallID)
	}
	delete(g.settling, gate.CallID)
	return s.res
}

// notTaken is the result of call d whose approval was not taken, for
// err: the receipt does not hold, the approval was used already, or the
// take failed.
func (g *Gateway) notTaken(gate Gate, name string, d protocol.Decided, err error) *mcp.CallToolResult {
	switch {
	case errors.Is(err, client.ErrReceipt):
		g.log.Error().Err(err).Str("call_id", d.CallID).Msg("mcp gateway: a decision's receipt does not hold; the call did not run")
		return failed(gate, "The call of %s did not run: its approval's signed receipt does not hold (%s). Tell the user.", name, strings.TrimPrefix(err.Error(), "client: "))
	case errors.Is(err, client.ErrTaken):
		return failed(gate, "The call of %s did not run: its approval (callId %s) was used already, by this call made before or by an identical one made at the same time; an approval lets a call run once. Call it again to ask a person anew, if it must run again.", name, d.CallID)
	}
	return failed(gate, "The call of %s was %s, but taking its approval in Interlock failed (%s), so it did not run. Call it again with the same arguments.", name, d.Decision, strings.TrimPrefix(err.Error(), "client: "))
}
