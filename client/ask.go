package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
