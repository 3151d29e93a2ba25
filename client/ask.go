package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// AskFlow is the flow of asks' runs.
const AskFlow = protocol.AskFlow

// AskAnswer is what became of an ask: its answer once it settled, or,
// when the wait ran out first, the interrupt it waits on.
type AskAnswer struct {
	// Answered is set once the ask settled: answered, expired or
	// cancelled.
	Answered *protocol.Answered
	// Pending is the interrupt the ask waits on, while it waits.
	Pending *protocol.Interrupted
}

// Ask puts one interrupt of the caller's design in front of people (see
// [protocol.AskRequest]) and waits up to wait (the client's wait when 0)
// for the answer. When nobody answers in time it returns the pending
// interrupt; ask again with the same AskID later: a repeated ask never
// asks twice, and is answered with the same answer once there is one. An
// ask Interlock refuses (a malformed one, saying what to fix) is a
// *RefusedError.
func (c *Client) Ask(ctx context.Context, req protocol.AskRequest, wait time.Duration) (AskAnswer, error) {
	return c.ask(ctx, req, wait, false)
}

// AskNoWait sends an ask as [Client.Ask] does, but returns as soon as the
// interrupt is announced (or the answer, for an askId that has settled).
func (c *Client) AskNoWait(ctx context.Context, req protocol.AskRequest, wait time.Duration) (AskAnswer, error) {
	return c.ask(ctx, req, wait, true)
}

func (c *Client) ask(ctx context.Context, req protocol.AskRequest, wait time.Duration, untilPending bool) (AskAnswer, error) {
	if req.AskID == "" {
		req.AskID = "ask-" + randomHex(8)
	}
	if err := CheckName("ask id", req.AskID); err != nil {
		return AskAnswer{}, err
	}
	if req.Interrupt.Kind == "" {
		return AskAnswer{}, errors.New("client: an ask needs interrupt.kind: question, choice or approval")
	}
	r, err := c.request(ctx, requestSpec{flow: AskFlow, run: req.AskID, subject: c.names.AskRequest(), typ: protocol.TypeAskRequest,
		data: req, settled: protocol.EventAnswered, what: "ask", hint: "is `interlock serve` running?"}, wait, untilPending)
	if err != nil || r.settled == nil {
		return AskAnswer{Pending: r.pending}, err
	}
	var a protocol.Answered
	if err := json.Unmarshal(r.settled, &a); err != nil {
		return AskAnswer{}, fmt.Errorf("client: decoding the answer to ask %s: %w", req.AskID, err)
	}
	return AskAnswer{Answered: &a}, nil
}

// WaitAsk returns what became of the ask askID, waiting up to wait (the
// client's wait when 0) for it to settle: its answer, or the interrupt
// it still waits on. An askId Interlock does not know is [ErrNotFound].
func (c *Client) WaitAsk(ctx context.Context, askID string, wait time.Duration) (AskAnswer, error) {
	if err := CheckName("ask id", askID); err != nil {
		return AskAnswer{}, err
	}
	if wait <= 0 {
		wait = c.wait
	}
	f, err := c.follow(ctx, c.names.Event(AskFlow, askID, protocol.EventAnswered), nil)
	if err != nil {
		return AskAnswer{}, err
	}
	defer f.stop()
	answered := func() (*protocol.Answered, error) {
		m, ok, err := f.poll(ctx)
		if err != nil || !ok {
			return nil, err
		}
		ev, err := events.Decode(m.header, m.data)
		if err != nil {
			return nil, fmt.Errorf("client: decoding %s: %w", m.subject, err)
		}
		var a protocol.Answered
		if err := json.Unmarshal(ev.Data(), &a); err != nil {
			return nil, fmt.Errorf("client: decoding %s: %w", m.subject, err)
		}
		return &a, nil
	}
	if a, err := answered(); err != nil || a != nil {
		return AskAnswer{Answered: a}, err
	}
	cp, err := c.Checkpoint(ctx, AskFlow, askID)
	if err != nil {
		return AskAnswer{}, err
	}
	if cp.Status.Finished() {
		// The answered event may have outlived its retention: the run
		// keeps it.
		var s struct {
			Answered *protocol.Answered `json:"answered"`
		}
		if json.Unmarshal(cp.State, &s) == nil && s.Answered != nil {
			return AskAnswer{Answered: s.Answered}, nil
		}
		return AskAnswer{}, fmt.Errorf("client: ask %s is %s and holds no answer", askID, cp.Status)
	}
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	again := time.NewTimer(followPoll)
	defer again.Stop()
	for {
		if a, err := answered(); err != nil || a != nil {
			return AskAnswer{Answered: a}, err
		}
		again.Reset(followPoll)
		select {
		case <-f.wake:
		case <-again.C:
		case <-timeout.C:
			in, err := c.LastInterrupt(ctx, AskFlow, askID)
			if err != nil {
				return AskAnswer{}, err
			}
			return AskAnswer{Pending: &in}, nil
		case <-ctx.Done():
			return AskAnswer{}, fmt.Errorf("client: waiting for the answer to ask %s: %w", askID, ctx.Err())
		}
	}
}
