package engine

import (
	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/protocol"

	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// txn is one transition of one run: the checkpoint as loaded and changed,
// the command it applies, and the outbox it fills.
type txn struct {
	r      *Runner
	f      *Flow
	cp     *Checkpoint
	rev    uint64
	stored bool
	now    time.Time
	// in and key are the command's message and idempotency key.
	in  Inbound
	key string
	// action is the command's audit action.
	action string
	// initial is a start's initial state, from which a run that grew too
	// large is failed.
	initial Doc
	// input is the size of everything the command brought (its ids and
	// source, a start's state and origin, a resume's answers, updates and
	// edits, a reason): what decides, when the checkpoint grows too large,
	// whether to refuse the command or fail the run.
	input int
	// failing is set once the transition fails a run whose checkpoint grew
	// too large: if that write is too large as well, the command is refused.
	failing bool
	// asked is when the answered interrupt was asked.
	asked time.Time
	// after is set for a transition on a run that had finished already
	// (an approval taken): it does not finish the run again.
	after bool
	// actor names who sent the command, for refusals' audit records;
	// caller is who it is (see [Runner.caller]).
	actor  string
	caller authority.Caller
	// voted is set when a resume cast a vote that did not yet complete
	// its approval's quorum: the approval is asked again, and the run
	// does not move on.
	voted *protocol.Vote
	// savedMid is set once the transition wrote the checkpoint mid-node.
	savedMid bool
	// pending is the interrupt the run waited on when it was loaded, and
	// loadedAudit the head of its audit chain then.
	pending     *Interrupt
	loadedAudit *protocol.AuditHead
}

// traceparent is what the transition's outbound messages carry: the
// command's span, else the run's traceparent.
func (t *txn) traceparent() string {
	if t.in.Span != "" {
		return t.in.Span
	}
	return t.cp.Traceparent
}

func (r *Runner) newTxn(f *Flow, cp *Checkpoint, rev uint64, stored bool, in Inbound, key string) *txn {
	t := &txn{r: r, f: f, cp: cp, rev: rev, stored: stored, now: r.cfg.Now().UTC(), in: in, key: key, actor: in.Source,
		input: inboundSize(in) + len(key)}
	if cp != nil {
		if cp.Interrupt != nil {
			p := *cp.Interrupt
			t.pending = &p
		}
		if cp.Audit != nil {
			a := *cp.Audit
			t.loadedAudit = &a
		}
	}
	return t
}

// begin marks the run as changed by the transition's command.
func (t *txn) begin(traceparent, action string) {
	cp := t.cp
	if traceparent != "" {
		cp.Traceparent = traceparent
	}
	cp.Cause = &Cause{ID: t.in.EventID, Key: t.key, Seq: t.in.Seq, Due: t.in.Due}
	cp.Applied = appendApplied(cp.Applied, t.key)
	cp.Outbox, cp.outboxDoc = nil, nil
	t.action = action
}

// retry is the outcome of a command that must wait for the run.
func (t *txn) retry() Outcome {
	return Outcome{Flow: t.cp.Flow, Run: t.cp.Run, Status: t.cp.Status, RetryAfter: DefaultBusyRetry}
}

// refuse refuses the command for a reason the run's state gives. The
// refusal is published only once the transition that left that state has
// published its own events, so that a client never sees a refusal before
// the event that explains it (a resume refused not_waiting before the
// cancelled event of the cancel that won).
func (t *txn) refuse(ctx context.Context, requestID string, code protocol.Code, format string, args ...any) (Outcome, error) {
	if busy, err := t.r.busy(ctx, t.cp); err != nil || busy {
		return t.retry(), err
	}
	if requestID == "" && t.cp.Interrupt != nil {
		requestID = t.cp.Interrupt.RequestID
	}
	out, err := t.r.refuseRun(ctx, t, requestID, code, fmt.Sprintf(format, args...))
	out.Status, out.Checkpoint, out.Node = t.cp.Status, t.rev, t.cp.Node
	if in := t.cp.Interrupt; in != nil && in.Kind == KindApproval {
		// The approval the refused command meant to answer.
		out.Action = in.Action
	}
	return out, err
}

// save writes the checkpoint with a compare-and-set.
func (t *txn) save(ctx context.Context) error {
	// A checkpoint is never written without the outbox it was loaded with.
	if err := t.cp.loadOutbox(); err != nil {
		return err
	}
	t.cp.UpdatedAt = t.now
	t.cp.FlowVersion = t.f.version
	var (
		rev uint64
		err error
	)
	if t.stored {
		rev, err = t.r.cfg.Store.Update(ctx, t.cp, t.rev)
	} else {
		rev, err = t.r.cfg.Store.Create(ctx, t.cp)
	}
	if err != nil {
		return err
	}
	t.rev, t.stored = rev, true
	return nil
}

// transact applies a command to an existing run: load the checkpoint,
// acknowledge a repeat, let step check and change it, and start again from
// the load when another worker's compare-and-set won.
func (r *Runner) transact(ctx context.Context, flow, run string, in Inbound, key, verb string, step func(*txn) (Outcome, error)) (Outcome, error) {
	f, out, ok := r.lookup(ctx, flow, run, in)
	if !ok {
		return out, nil
	}
	for range maxConflicts {
		cp, rev, err := r.load(ctx, flow, run)
		if errors.Is(err, ErrNotFound) {
			return r.refuse(ctx, flow, run, "", in, CodeUnknownRun, "",
				fmt.Sprintf("no run %s of flow %s to %s; check the run id with `interlock pending` or `interlock show %s <run>`", run, flow, verb, flow))
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("engine: loading %s.%s: %w", flow, run, err)
		}
		carried := cp.Traceparent
		if out, done, err := r.repeat(ctx, f, cp, rev, key, in); done || err != nil {
			out.RunTraceparent = carried
			return out, err
		}
		if c := cp.Cause; c != nil && in.Seq != 0 && c.Seq == in.Seq && c.Due == in.Due && c.Key != key {
			// This very message moved the run on its way (a migration),
			// and may have stopped before that transition was published,
			// on this delivery or an earlier one: publish it first, so
			// that the command's transition neither drops its outbox nor
			// waits on the message it is itself.
			if err := cp.loadOutbox(); err != nil {
				return Outcome{}, err
			}
			if err := r.finish(ctx, cp, rev, true); err != nil {
				return Outcome{}, err
			}
			cp.Cause = nil
		}
		if v := cp.FlowVersion; v != "" && v != f.version && !cp.Status.Finished() {
			// A run of another version: its commands are for workers of
			// that version, unless this flow migrates it.
			if !f.Takes(v) {
				return Outcome{Flow: flow, Run: run, Status: cp.Status, Checkpoint: rev, Node: cp.Node, RunTraceparent: carried, Elsewhere: v}, nil
			}
			if _, declared := f.migrations[v]; declared || f.migrations[AnyVersion].Nodes != nil || f.migrations[AnyVersion].State != nil {
				if busy, err := r.busy(ctx, cp); err != nil || busy {
					return Outcome{Flow: flow, Run: run, Status: cp.Status, RetryAfter: DefaultBusyRetry}, err
				}
				err := r.migrate(ctx, r.newTxn(f, cp, rev, true, in, ""))
				if isConflict(err) {
					continue
				}
				if err != nil {
					// A migration that fails fails on every delivery: the
					// message is retried, then dead-lettered, never lost.
					return Outcome{}, fmt.Errorf("engine: migrating %s.%s: %w", flow, run, err)
				}
				continue
			}
		}
		out, err := step(r.newTxn(f, cp, rev, true, in, key))
		if isConflict(err) {
			continue
		}
		out.RunTraceparent = carried
		return out, err
	}
	return Outcome{}, fmt.Errorf("engine: %s %s.%s: too many concurrent writers", verb, flow, run)
}

// load loads a run's checkpoint, its outbox left encoded when the store
// gives the document (see [DocLoader]).
func (r *Runner) load(ctx context.Context, flow, run string) (*Checkpoint, uint64, error) {
	if r.docs == nil {
		return r.cfg.Store.Load(ctx, flow, run)
	}
	doc, rev, err := r.docs.LoadDoc(ctx, flow, run)
	if err != nil {
		return nil, 0, err
	}
	cp, err := decodeCheckpoint(doc)
	if err != nil {
		return nil, 0, fmt.Errorf("engine: checkpoint %s.%s at revision %d is not a checkpoint document: %w", flow, run, rev, err)
	}
	return cp, rev, nil
}

// repeat handles a command whose key the run has already seen: it finishes
// an interrupted transition of that command, or acknowledges a repeat.
func (r *Runner) repeat(ctx context.Context, f *Flow, cp *Checkpoint, rev uint64, key string, in Inbound) (Outcome, bool, error) {
	seq := in.Seq
	if key == "" || !slices.Contains(cp.Applied, key) {
		return Outcome{}, false, nil
	}
	if err := cp.loadOutbox(); err != nil {
		return Outcome{}, true, err
	}
	mine := cp.Cause != nil && cp.Cause.Key == key
	switch {
	case mine && cp.Status == Running && (seq != cp.Cause.Seq || in.Due != cp.Cause.Due):
		// Another message with the same key while the transition is in
		// flight: let the one in flight finish first.
		return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, RetryAfter: DefaultBusyRetry}, true, nil
	case mine && cp.Status == Running:
		// A step was recorded, then the worker stopped: carry on.
		out, err := r.run(ctx, r.newTxn(f, cp, rev, true, Inbound{Seq: seq, Due: in.Due, Span: in.Span}, key))
		return out, true, err
	case mine:
		// Committed; publishing may not have finished.
		if err := r.finish(ctx, cp, rev, true); err != nil {
			return Outcome{}, true, err
		}
	}
	return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, Checkpoint: rev, Node: cp.Node, Duplicate: true}, true, nil
}

// busy reports whether the run must not be advanced or refused now: a
// transition is in flight, or the last one has not finished publishing.
func (r *Runner) busy(ctx context.Context, cp *Checkpoint) (bool, error) {
	if cp.Status == Running {
		return true, nil
	}
	if r.cfg.Queue == nil || cp.Cause == nil || cp.Cause.Seq == 0 {
		return false, nil
	}
	unacked, err := r.cfg.Queue.Unacked(ctx, *cp.Cause)
	if err != nil {
		return false, fmt.Errorf("engine: checking message %d of %s.%s: %w", cp.Cause.Seq, cp.Flow, cp.Run, err)
	}
	return unacked, nil
}

// lookup checks the names of a command on an existing run and finds the flow.
func (r *Runner) lookup(ctx context.Context, flow, run string, o Inbound) (*Flow, Outcome, bool) {
	if CheckName("flow", flow) != nil || CheckName("run", run) != nil {
		return nil, Outcome{Flow: flow, Run: run, DeadLetter: ReasonInvalidName}, false
	}
	f, ok := r.flows[flow]
	if !ok {
		// A run of a flow this worker does not run, which another
		// worker's version does: the command is for that version's.
		if cp, _, err := r.load(ctx, flow, run); err == nil && cp.FlowVersion != "" && !cp.Status.Finished() {
			return nil, Outcome{Flow: flow, Run: run, Status: cp.Status, Elsewhere: cp.FlowVersion}, false
		}
		out, err := r.refuse(ctx, flow, run, "", o, CodeUnknownRun, string(CodeUnknownFlow),
			fmt.Sprintf("flow %q is not registered; known flows: %s", flow, strings.Join(r.Flows(), ", ")))
		if err != nil {
			// Publishing failed: have the message delivered again.
			return nil, Outcome{Flow: flow, Run: run, RetryAfter: DefaultBusyRetry}, false
		}
		return nil, out, false
	}
	return f, Outcome{}, true
}

// run advances the transition's run until it waits or finishes, then commits.
func (r *Runner) run(ctx context.Context, t *txn) (Outcome, error) {
	if err := r.advance(ctx, t); err != nil {
		var inv *invalidAnswerError
		if errors.As(err, &inv) {
			// Nothing was written: the interrupt stays pending, with its token.
			return r.refuseAnswer(ctx, t, inv.msg)
		}
		return r.failedWrite(ctx, t, err)
	}
	return r.commit(ctx, t)
}

// commit writes the checkpoint with its outbox, then publishes.
func (r *Runner) commit(ctx context.Context, t *txn) (Outcome, error) {
	if t.cp.Status == Waiting {
		t.cp.Waited = true
	}
	var result protocol.Outcome
	if t.cp.Status.Finished() && !t.after {
		f := t.finished()
		result = f.Result
		t.add(FinishedStream, string(t.cp.Status), f)
	}
	if err := t.seal(); err != nil {
		return Outcome{}, err
	}
	if err := t.save(ctx); err != nil {
		return r.failedWrite(ctx, t, err)
	}
	if err := r.finish(ctx, t.cp, t.rev, false); err != nil {
		return Outcome{}, err
	}
	out := Outcome{
		Flow: t.cp.Flow, Run: t.cp.Run, Status: t.cp.Status, Checkpoint: t.rev, Node: t.cp.Node,
		CreatedAt: t.cp.CreatedAt, AskedAt: t.asked, Result: result,
	}
	if !t.asked.IsZero() && t.pending != nil {
		out.Action, out.Quorum = t.pending.Action, t.pending.Quorum != nil
	}
	for _, m := range t.cp.Outbox {
		if m.Stream == EventStream {
			out.Events = append(out.Events, m)
		}
	}
	return out, nil
}

// failedWrite handles a checkpoint write that failed. A conflict is
// returned as is (the command starts again from the load); a checkpoint
// too large for the store refuses the command or fails the run; anything
// else is returned for the message to be delivered again.
func (r *Runner) failedWrite(ctx context.Context, t *txn, err error) (Outcome, error) {
	var big *TooLargeError
	switch {
	case isConflict(err):
		return Outcome{}, err
	case errors.As(err, &big):
		return r.tooLarge(ctx, t, big)
	}
	return Outcome{}, fmt.Errorf("engine: writing checkpoint of %s.%s: %w", t.cp.Flow, t.cp.Run, err)
}

// tooLarge answers a transition whose checkpoint grew past what the store
// takes. A command that brought most of the limit itself is refused
// invalid_payload (the run, if any, stays as it was); otherwise a node grew
// the state, and the run fails with an error saying so, from the state it
// had before the transition. When even the failed run's checkpoint is too
// large, the command is refused: a transition writes a too large
// checkpoint at most twice.
func (r *Runner) tooLarge(ctx context.Context, t *txn, big *TooLargeError) (Outcome, error) {
	flow, run := t.cp.Flow, t.cp.Run
	if t.failing {
		return r.refuse(ctx, flow, run, "", t.in, CodeInvalidPayload, "",
			fmt.Sprintf("the command makes run %s's checkpoint larger than the %d bytes the NATS server takes in one message (max_payload), and so would failing the run (%d bytes); the run stays as it was: send less data (state, origin, answers), or raise max_payload", run, big.Limit, big.Size))
	}
	if t.input > big.Limit/2 {
		return r.refuse(ctx, flow, run, "", t.in, CodeInvalidPayload, "",
			fmt.Sprintf("the command makes run %s's checkpoint %d bytes, more than the %d bytes the NATS server takes in one message (max_payload); it brought %d bytes (state, origin, answers, ids): send less data, or raise max_payload", run, big.Size, big.Limit, t.input))
	}
	t.failing = true
	node := t.cp.Node
	var cp *Checkpoint
	if t.stored {
		loaded, rev, err := r.cfg.Store.Load(ctx, flow, run)
		if err != nil {
			return Outcome{}, fmt.Errorf("engine: reloading %s.%s after an oversized write: %w", flow, run, err)
		}
		cp, t.rev = loaded, rev
	} else {
		cp = &Checkpoint{Flow: flow, Run: run, Node: t.f.start, State: t.initial, CreatedAt: t.cp.CreatedAt,
			Origin: t.cp.Origin, Traceparent: t.cp.Traceparent, StartedBy: t.cp.StartedBy, UID: t.cp.UID}
	}
	if cp.Status.Finished() {
		return Outcome{Flow: flow, Run: run, Status: cp.Status, Checkpoint: t.rev, Duplicate: true}, nil
	}
	t.cp = cp
	cp.Node = node
	t.begin(t.in.Traceparent, t.action)
	t.audit(&protocol.AuditRecord{Action: t.action, By: t.in.Source, Source: t.in.Source, EventID: t.in.EventID})
	t.failRun(fmt.Errorf("node %q grew the run's checkpoint to %d bytes, more than the %d bytes the NATS server takes in one message (max_payload); keep large data out of the state (store it elsewhere and keep a reference)", node, big.Size, big.Limit))
	return r.commit(ctx, t)
}

// advance runs nodes from the checkpoint's current node until the run
// pauses, completes or fails. A static gate's decision is taken first; a
// gate before a node pauses the run before the node runs, a gate after it
// once it ran.
func (r *Runner) advance(ctx context.Context, t *txn) error {
	cp := t.cp
	for runs := 0; ; runs++ {
		if runs >= r.cfg.MaxNodeRuns {
			t.failRun(fmt.Errorf("ran %d nodes without pausing or ending; check the flow's edges for a loop", runs))
			return nil
		}
		x := t.exec()
		runNode := true
		if in := cp.Interrupt; in != nil && in.Gate != "" && in.Decision != nil {
			var err error
			if runNode, err = r.gateDecided(ctx, t, x, in); err != nil {
				var inv *invalidAnswerError
				if errors.As(err, &inv) {
					return err
				}
				t.failRun(err)
				return nil
			}
			if x.rejected && t.f.rejects[cp.Node] == "" {
				t.rejectedRun()
				return nil
			}
		}
		if runNode {
			if g := t.f.gateOf(cp.Node, GateBefore); g != nil && cp.GatePassed != cp.Node {
				in, err := t.gateInterrupt(g, GateBefore)
				if err != nil {
					t.failRun(err)
					return nil
				}
				t.wait(in)
				return nil
			}
			nodeErr := r.call(ctx, t.f, x)
			if x.abort != nil {
				return x.abort
			}
			if x.invalid != "" && x.err == nil {
				return &invalidAnswerError{msg: x.invalid}
			}
			if x.paused != nil && x.err == nil {
				t.wait(x.paused)
				return nil
			}
			if x.err != nil {
				nodeErr = x.err
			}
			if nodeErr != nil && !errors.Is(nodeErr, ErrInterrupted) {
				t.failRun(nodeErr)
				return nil
			}
			if g := t.f.gateOf(cp.Node, GateAfter); g != nil && !x.rejected {
				cp.Resumes, cp.Steps, cp.Locals, cp.GatePassed = nil, nil, nil, ""
				in, err := t.gateInterrupt(g, GateAfter)
				if err != nil {
					t.failRun(err)
					return nil
				}
				t.wait(in)
				return nil
			}
		}
		next, err := r.route(t.f, x)
		if err != nil {
			t.failRun(err)
			return nil
		}
		cp.Resumes, cp.Steps, cp.Interrupt, cp.Locals, cp.GatePassed = nil, nil, nil, nil, ""
		if next == End {
			cp.Status = Completed
			t.outcome(protocol.AuditOutcome{Node: cp.Node})
			t.emit(protocol.EventCompleted, &protocol.Completed{Flow: cp.Flow, Run: cp.Run, State: cp.State.raw(), Origin: cp.Origin})
			return nil
		}
		cp.Node = next
	}
}

// exec returns a new execution of the current node.
func (t *txn) exec() *exec {
	cp := t.cp
	x := &exec{flow: t.f, cp: cp, now: t.now, steps: map[string]bool{}, requestID: newRequestID, persisted: t.savedMid}
	x.persist = func(ctx context.Context) error {
		cp.Status = Running
		if err := t.save(ctx); err != nil {
			return err
		}
		t.savedMid, x.persisted = true, true
		return nil
	}
	x.ensureStored = func(ctx context.Context) error {
		if t.stored {
			return nil
		}
		return x.persist(ctx)
	}
	x.emit = t.emit
	x.receipt = t.receipt
	return x
}

// wait pauses the run on in: the transition's record gets the outcome,
// which says what the run now waits for (the interrupt's role, deadline,
// and an approval's reason and proposal), and the interrupted event (with
// the deadline's schedule) goes out. A pause is one audit record.
func (t *txn) wait(in *Interrupt) {
	cp := t.cp
	cp.Status, cp.Interrupt = Waiting, in
	o := protocol.AuditOutcome{Node: in.Node, RequestID: in.RequestID, Kind: in.Kind,
		ApproverRole: in.ApproverRole, ExpiresAt: in.ExpiresAt, Reason: in.Reason}
	if in.Kind == KindApproval {
		o.Approval = &protocol.AuditApproval{Action: in.Action, Args: in.Args}
	}
	t.outcome(o)
	t.interrupted(in)
}

// rejectedRun completes a run whose gate was rejected and which declares
// no reject route.
func (t *txn) rejectedRun() {
	cp := t.cp
	cp.Resumes, cp.Steps, cp.Interrupt, cp.Locals, cp.GatePassed = nil, nil, nil, nil, ""
	cp.Status = Completed
	t.outcome(protocol.AuditOutcome{Node: cp.Node})
	t.emit(protocol.EventCompleted, &protocol.Completed{Flow: cp.Flow, Run: cp.Run, State: cp.State.raw(), Rejection: cp.Rejection, Origin: cp.Origin})
}

func (t *txn) failRun(err error) {
	cp := t.cp
	cp.Status, cp.Interrupt, cp.Error = Failed, nil, err.Error()
	t.outcome(protocol.AuditOutcome{Node: cp.Node, Error: err.Error()})
	t.emit(protocol.EventFailed, &protocol.Failed{Flow: cp.Flow, Run: cp.Run, Node: cp.Node, Error: err.Error(), Origin: cp.Origin})
}

// call runs the current node, turning a panic into an error.
func (r *Runner) call(ctx context.Context, f *Flow, x *exec) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("node %q panicked: %v", x.cp.Node, p)
		}
	}()
	fn, ok := f.nodes[x.cp.Node]
	if !ok {
		return fmt.Errorf("node %q is not in flow %q (was the flow changed while runs were waiting?)", x.cp.Node, f.name)
	}
	return fn(ctx, x)
}

func (r *Runner) route(f *Flow, x *exec) (next string, err error) {
	if to, ok := f.rejects[x.cp.Node]; ok && x.rejected {
		return to, nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("router after node %q panicked: %v", x.cp.Node, p)
		}
	}()
	return f.after(x)
}
