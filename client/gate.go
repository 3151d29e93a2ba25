package client

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// GateFlow is the flow of the tool-call gate's runs.
const GateFlow = "gate"

// ToolAnswer is what the tool-call gate said about a request: its decision,
// or, when the wait ran out before anyone decided, the approval the call
// waits on.
type ToolAnswer struct {
	// Decided is set once the call is decided: allowed, approved, edited,
	// rejected or expired.
	Decided *protocol.Decided
	// Pending is the approval the call waits on, when it is not decided yet.
	Pending *protocol.Interrupted
}

// May reports whether the agent may run the call: allowed, approved or
// edited (then with Decided.Args).
func (a ToolAnswer) May() bool {
	if a.Decided == nil {
		return false
	}
	switch a.Decided.Decision {
	case "allowed", "approved", "edited":
		return true
	}
	return false
}

// RefusedError is a command Interlock refused, when the call returns an
// error rather than the refused event.
type RefusedError struct {
	// Refused is the refused event's data.
	Refused protocol.Refused
	// What names the command ("tool request call-7").
	What string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("client: %s refused (%s): %s", e.What, e.Refused.Code, e.Refused.Message)
}

// RequestTool asks the tool-call gate whether an agent may run a call and
// waits up to wait (the client's wait when 0) for the decision. When a rule
// fires and no one decides in time, it returns the pending approval; ask
// again with the same CallID later: a repeated request never starts a
// second approval, and is answered with the decision once there is one. A
// request Interlock refuses is a *RefusedError.
func (c *Client) RequestTool(ctx context.Context, req protocol.ToolRequest, wait time.Duration) (ToolAnswer, error) {
	return c.requestTool(ctx, req, wait, false)
}

// AskTool asks the tool-call gate as [Client.RequestTool] does, but does
// not wait for a person: it returns the decision when the gate decides at
// once (allowed, or a repeat of a decided call), or the pending approval as
// soon as it is announced. Ask again with the same CallID, or read the
// decided event, for the person's decision.
func (c *Client) AskTool(ctx context.Context, req protocol.ToolRequest, wait time.Duration) (ToolAnswer, error) {
	return c.requestTool(ctx, req, wait, true)
}

func (c *Client) requestTool(ctx context.Context, req protocol.ToolRequest, wait time.Duration, untilPending bool) (ToolAnswer, error) {
	if req.CallID == "" {
		req.CallID = "call-" + randomHex(8)
	}
	if err := CheckName("call id", req.CallID); err != nil {
		return ToolAnswer{}, err
	}
	if req.Tool == "" {
		return ToolAnswer{}, errors.New("client: a tool request needs the tool's name")
	}
	r, err := c.request(ctx, requestSpec{flow: GateFlow, run: req.CallID, subject: c.names.GateRequest(), typ: protocol.TypeToolRequest,
		data: req, settled: protocol.EventDecided, what: "tool request", hint: "is `interlock serve --gate-rules FILE` running?"}, wait, untilPending)
	if err != nil || r.settled == nil {
		return ToolAnswer{Pending: r.pending}, err
	}
	var d protocol.Decided
	if err := json.Unmarshal(r.settled, &d); err != nil {
		return ToolAnswer{}, fmt.Errorf("client: decoding the decision on %s: %w", req.CallID, err)
	}
	return ToolAnswer{Decided: &d}, nil
}

// Errors of [Client.Consume].
var (
	// ErrTaken: the approval was taken already; an approval lets its call
	// run once.
	ErrTaken = errors.New("client: the approval was taken already")
	// ErrReceipt: the decision's receipt is missing, does not verify
	// with the deployment's audit keys, or states another decision.
	ErrReceipt = errors.New("client: the decision's receipt does not hold")
)

// VerifyReceipt verifies a decision's receipt with the audit keys the
// deployment's workers published, and returns what it states. An error
// wraps protocol.ErrReceiptInvalid or protocol.ErrReceiptExpired.
func (c *Client) VerifyReceipt(ctx context.Context, jws string) (protocol.Receipt, error) {
	ks, err := c.AuditKeys(ctx)
	if err != nil {
		return protocol.Receipt{}, err
	}
	keys := make(map[string]ed25519.PublicKey, len(ks))
	for _, k := range ks {
		if pub, err := k.Key(); err == nil {
			keys[k.Kid] = pub
		}
	}
	return protocol.VerifyReceipt(keys, jws, time.Now())
}

// VerifyDecided checks the gate's decision d before its call runs: its
// receipt verifies with the deployment's audit keys and states exactly d
// (the call, its args digest, the decision, the final args' digest). A
// receipt that does not hold is an error wrapping [ErrReceipt]; keys that
// could not be read (the deployment unreachable) are another error, after
// which the receipt may yet hold.
func (c *Client) VerifyDecided(ctx context.Context, d protocol.Decided) (protocol.Receipt, error) {
	if d.Receipt == "" {
		return protocol.Receipt{}, fmt.Errorf("%w: call %s's decision carries none (a worker of an earlier version decided it), so it cannot be verified: do not run it; request the call again with a new callId", ErrReceipt, d.CallID)
	}
	r, err := c.VerifyReceipt(ctx, d.Receipt)
	if err != nil && !errors.Is(err, protocol.ErrReceiptInvalid) && !errors.Is(err, protocol.ErrReceiptExpired) && !errors.Is(err, ErrNoAuditKeys) {
		// The keys were not read (a partition, no stream leader): nothing
		// is known of the receipt yet. Not ErrReceipt, which says it does
		// not hold.
		return r, fmt.Errorf("client: call %s's receipt is not verified yet: reading the deployment's audit keys failed: %w; try again", d.CallID, err)
	}
	if err != nil {
		return r, fmt.Errorf("%w: call %s: %w", ErrReceipt, d.CallID, err)
	}
	if err := r.CheckDecided(d); err != nil {
		return r, fmt.Errorf("%w: call %s: %w", ErrReceipt, d.CallID, err)
	}
	return r, nil
}

// Consume takes the approval of a call the gate approved or edited, just
// before the agent runs it with exactly the decision's args (d.Args, of
// digest d.FinalDigest): it verifies the decision's receipt first
// ([Client.VerifyDecided]), then takes the approval, once, whatever gateway
// or process asks, so that a call runs once per approval. It returns the
// consumed event's data; a receipt that does not hold is an error wrapping
// [ErrReceipt], an approval taken already one wrapping [ErrTaken] (run
// nothing: request the call again, with a new callId, to ask anew); any
// other refusal is a *RefusedError.
func (c *Client) Consume(ctx context.Context, d protocol.Decided) (protocol.Consumed, error) {
	if d.Decision != "approved" && d.Decision != "edited" {
		return protocol.Consumed{}, fmt.Errorf("client: call %s was %s: only an approved or edited call's approval is taken", d.CallID, d.Decision)
	}
	if _, err := c.VerifyDecided(ctx, d); err != nil {
		return protocol.Consumed{}, err
	}
	return c.Take(ctx, d.CallID, d.FinalDigest)
}

// ConsumeAgain sends the take of a [Client.Consume] whose outcome was not
// learned (an [UnsettledError]) again, under the event id the error
// names: JetStream drops it as a duplicate of the first if that one was
// stored, and its outcome, the first's, comes back. Consumed means this
// caller's take, that first one, took the approval, and the call is
// still the caller's to run: no one else was told so. Unlike a new
// Consume, which is refused ErrTaken when the first take landed. eventID
// must be one this caller's take was sent with (UnsettledError.EventID):
// the outcome of any event id is readable (a consumed event's
// causationid), and another's says nothing of this caller's take.
func (c *Client) ConsumeAgain(ctx context.Context, d protocol.Decided, eventID string) (protocol.Consumed, error) {
	if eventID == "" {
		return protocol.Consumed{}, errors.New("client: sending a take again takes the event id of the first (UnsettledError.EventID)")
	}
	if _, err := c.VerifyDecided(ctx, d); err != nil {
		return protocol.Consumed{}, err
	}
	return c.take(ctx, eventID, d.CallID, d.FinalDigest)
}

// An UnsettledError is the error of a take whose outcome the client did
// not learn: JetStream did not acknowledge it, or no event answered it
// within the wait. It may yet take the approval. Send it again with
// [Client.ConsumeAgain] and EventID to learn its outcome; a new
// [Client.Consume] would be refused [ErrTaken] if it did.
type UnsettledError struct {
	// EventID is the take's event id, its Nats-Msg-Id.
	EventID string
	Err     error
}

func (e *UnsettledError) Error() string {
	return fmt.Sprintf("%v (the take, event %s, may yet apply: send it again with that id to learn its outcome)", e.Err, e.EventID)
}

func (e *UnsettledError) Unwrap() error { return e.Err }

// Take takes the approval of call callID for the args of digest, once,
// without checking a receipt: [Client.Consume] checks the decision's
// receipt first, and is what an agent calls; Take is for a surface (the
// HTTP API) whose caller checked it. It returns as Consume does.
func (c *Client) Take(ctx context.Context, callID, digest string) (protocol.Consumed, error) {
	return c.take(ctx, randomHex(16), callID, digest)
}

// take sends the take of event id and returns its outcome; an outcome not
// learned is an [UnsettledError].
func (c *Client) take(ctx context.Context, id, callID, digest string) (protocol.Consumed, error) {
	d := protocol.Decided{CallID: callID}
	ev, err := c.sendID(ctx, id, GateFlow, d.CallID, protocol.VerbConsume, protocol.TypeToolConsume, protocol.Consume{CallID: d.CallID, ArgsDigest: digest}, "", nil)
	if err != nil {
		if unsettled(err) {
			err = &UnsettledError{EventID: id, Err: err}
		}
		return protocol.Consumed{}, err
	}
	switch ev.Kind {
	case protocol.EventConsumed:
		var out protocol.Consumed
		if err := ev.Decode(&out); err != nil {
			return protocol.Consumed{}, fmt.Errorf("client: decoding the consumed event of %s: %w", d.CallID, err)
		}
		return out, nil
	case protocol.EventRefused:
		var ref protocol.Refused
		if err := ev.Decode(&ref); err != nil {
			return protocol.Consumed{}, fmt.Errorf("client: decoding the refusal of %s: %w", d.CallID, err)
		}
		rerr := &RefusedError{Refused: ref, What: "taking the approval of call " + d.CallID}
		if ref.Code == protocol.CodeNotWaiting {
			return protocol.Consumed{}, fmt.Errorf("%w: %w", ErrTaken, rerr)
		}
		return protocol.Consumed{}, rerr
	}
	return protocol.Consumed{}, fmt.Errorf("client: taking the approval of call %s: Interlock answered %s", d.CallID, ev.Kind)
}

// requestSpec is a request that starts a built-in flow's run (a tool
// request, an ask) and is settled by one event kind.
type requestSpec struct {
	flow, run, subject, typ string
	data                    any
	// settled is the kind of the event that settles the run.
	settled string
	// what names the request in errors; hint says what to check when
	// nothing answers.
	what, hint string
}

// requestResult is the settling event's data, or the interrupt the run
// waits on.
type requestResult struct {
	settled json.RawMessage
	pending *protocol.Interrupted
}

// request publishes a request and waits up to wait (the client's wait
// when 0) for the event that settles it; when none comes in time, or at
// once with untilPending, it returns the interrupt the run waits on.
func (c *Client) request(ctx context.Context, r requestSpec, wait time.Duration, untilPending bool) (requestResult, error) {
	if wait <= 0 {
		wait = c.wait
	}
	if untilPending {
		// A repeated request for a run still waiting publishes nothing:
		// read the interrupt it waits on instead of waiting for the time out.
		if cp, err := c.Checkpoint(ctx, r.flow, r.run); err == nil && cp.Waiting() {
			if in, err := c.LastInterrupt(ctx, r.flow, r.run); err == nil {
				return requestResult{pending: &in}, nil
			}
		}
	}
	id := randomHex(16)
	ev, err := events.New(id, c.source, r.typ, r.run, time.Now().UTC(), r.data)
	if err != nil {
		return requestResult{}, err
	}
	body, err := events.Encode(ev)
	if err != nil {
		return requestResult{}, err
	}
	f, err := c.follow(ctx, c.names.Event(r.flow, r.run, ">"), nil)
	if err != nil {
		return requestResult{}, err
	}
	defer f.stop()
	msg := nats.NewMsg(r.subject)
	msg.Data = body
	msg.Header.Set("Content-Type", events.Structured)
	msg.Header.Set(jetstream.MsgIDHeader, id)
	c.vouch.sign(msg, id)
	if err := c.publish(ctx, msg, r.what); err != nil {
		return requestResult{}, err
	}
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	again := time.NewTimer(followPoll)
	defer again.Stop()
	var pending *protocol.Interrupted
	for {
		m, ok, err := f.poll(ctx)
		if err != nil {
			return requestResult{}, fmt.Errorf("client: waiting for the answer to %s %s: %w", r.what, r.run, err)
		}
		if ok {
			kind := m.subject[strings.LastIndex(m.subject, ".")+1:]
			if kind != r.settled && kind != protocol.EventInterrupted && kind != protocol.EventRefused {
				continue
			}
			out, err := events.Decode(m.header, m.data)
			if err != nil {
				return requestResult{}, fmt.Errorf("client: decoding %s: %w", m.subject, err)
			}
			switch kind {
			case r.settled:
				return requestResult{settled: out.Data()}, nil
			case protocol.EventInterrupted:
				var in protocol.Interrupted
				if err := json.Unmarshal(out.Data(), &in); err == nil {
					pending = &in
					if untilPending {
						return requestResult{pending: pending}, nil
					}
				}
			case protocol.EventRefused:
				var rf protocol.Refused
				if json.Unmarshal(out.Data(), &rf) == nil && rf.EventID == id {
					return requestResult{}, &RefusedError{Refused: rf, What: r.what + " " + r.run}
				}
			}
			continue
		}
		again.Reset(followPoll)
		select {
		case <-f.wake:
		case <-again.C:
		case <-timeout.C:
			if pending == nil {
				// A repeated request for a run still waiting publishes
				// nothing: read the interrupt it waits on.
				if in, err := c.LastInterrupt(ctx, r.flow, r.run); err == nil {
					pending = &in
				}
			}
			if pending != nil {
				return requestResult{pending: pending}, nil
			}
			return requestResult{}, fmt.Errorf("%w: %s %s was queued as event %s; %s", ErrNoAnswer, r.what, r.run, id, r.hint)
		case <-ctx.Done():
			return requestResult{}, fmt.Errorf("client: waiting for the answer to %s %s: %w", r.what, r.run, ctx.Err())
		}
	}
}

// unsettled reports whether err, of a command sent, leaves its outcome
// unknown: JetStream did not answer its publish (it may have stored it),
// no event answered it in time, or the wait was given up.
func unsettled(err error) bool {
	for _, e := range []error{ErrNoAnswer, nats.ErrTimeout, context.DeadlineExceeded, context.Canceled, jetstream.ErrNoStreamResponse,
		nats.ErrNoResponders, nats.ErrConnectionClosed, nats.ErrConnectionDraining, nats.ErrDisconnected} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
