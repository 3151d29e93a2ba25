package engine

import (
	"github.com/interlockhq/interlock/protocol"

	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// emit adds a run event to the transition's outbox.
func (t *txn) emit(kind string, data EventData) {
	t.add(EventStream, kind, data)
}

// audit adds the transition's audit record to its outbox.
func (t *txn) audit(rec *protocol.AuditRecord) {
	rec.Flow, rec.Run, rec.At = t.cp.Flow, t.cp.Run, t.now
	if c := t.caller; c.Name != "" && rec.By == c.Name {
		// How the caller was authenticated, and a name the sender typed
		// that is not its identity.
		rec.Auth = c.Method
		if c.Named != c.Name {
			rec.Named = c.Named
		}
	}
	t.add(AuditStream, rec.Action, rec)
}

// outcome completes the transition's audit record with where the run ended
// up: one record per transition, naming the command and its outcome.
func (t *txn) outcome(o protocol.AuditOutcome) {
	o.Status = t.cp.Status
	for i := len(t.cp.Outbox) - 1; i >= 0; i-- {
		if rec, ok := t.cp.Outbox[i].Data.(*protocol.AuditRecord); ok {
			rec.Outcome = &o
			return
		}
	}
}

func (t *txn) add(stream Stream, kind string, data EventData) {
	t.cp.Seq++
	t.cp.Outbox = append(t.cp.Outbox, Message{
		Stream: stream, Kind: kind, ID: fmt.Sprintf("%s-%d", t.cp.UID, t.cp.Seq),
		Flow: t.cp.Flow, Run: t.cp.Run, Time: t.now, Data: data, Traceparent: t.traceparent(),
	})
}

// finish brings the pending index in line with the checkpoint, writes a
// finished run's entry of the finished-runs index and appends the audit
// records, all before any event of the outbox is published, then
// publishes the events stamped with the checkpoint number and, on an
// interrupted event, the resume token.
func (r *Runner) finish(ctx context.Context, cp *Checkpoint, rev uint64, recheck bool) error {
	var audits, evs []Message
	var done *Message
	for _, m := range cp.Outbox {
		switch m.Stream {
		case AuditStream, ScheduleStream:
			audits = append(audits, m)
			continue
		case FinishedStream:
			m.Data = stamp(m.Data, rev, "")
			done = &m
			continue
		}
		if cp.Cause != nil && len(cp.Cause.ID) <= maxEcho {
			m.Cause = cp.Cause.ID
		}
		token := ""
		if in, ok := m.Data.(*protocol.Interrupted); ok {
			token = r.token(cp.Flow, cp.Run, in.RequestID)
		}
		m.Data = stamp(m.Data, rev, token)
		evs = append(evs, m)
	}
	indexed := make(chan error, 2)
	writes := 1
	go func() { indexed <- r.index(ctx, cp, rev) }()
	if done != nil && r.finished != nil {
		writes++
		go func() { indexed <- r.indexFinished(ctx, done) }()
	}
	var auditErr error
	if len(audits) > 0 {
		auditErr = r.cfg.Publisher.Publish(ctx, audits, recheck)
	}
	var indexErr error
	for range writes {
		if err := <-indexed; err != nil && indexErr == nil {
			indexErr = err
		}
	}
	if indexErr != nil {
		return indexErr
	}
	if auditErr != nil {
		return fmt.Errorf("engine: appending audit records of %s.%s: %w", cp.Flow, cp.Run, auditErr)
	}
	if len(evs) == 0 {
		return nil
	}
	if err := r.cfg.Publisher.Publish(ctx, evs, recheck); err != nil {
		return fmt.Errorf("engine: publishing events of %s.%s: %w", cp.Flow, cp.Run, err)
	}
	return nil
}

// indexFinished writes a finished run's entry of the finished-runs index.
func (r *Runner) indexFinished(ctx context.Context, m *Message) error {
	f, ok := m.Data.(*Finished)
	if !ok {
		return fmt.Errorf("engine: finished-runs index entry %s of %s.%s holds %T", m.ID, m.Flow, m.Run, m.Data)
	}
	if err := r.finished.PutFinished(ctx, m.ID, f); err != nil {
		return fmt.Errorf("engine: indexing finished run %s.%s: %w", m.Flow, m.Run, err)
	}
	return nil
}

// index writes or removes the run's pending index entry.
func (r *Runner) index(ctx context.Context, cp *Checkpoint, rev uint64) error {
	switch {
	case cp.Status == Waiting && cp.Interrupt != nil:
		in := cp.Interrupt
		p := &protocol.Pending{
			Flow: cp.Flow, Run: cp.Run, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind,
			Checkpoint: rev, Fields: in.Fields, Question: in.Question, AskedAt: in.AskedAt, ExpiresAt: in.ExpiresAt,
			ApproverRole: in.ApproverRole, Action: in.Action, Assignees: in.Assignees, ClaimedBy: in.ClaimedBy,
			Title: in.Title, Requester: in.Requester, RemindedAt: in.RemindedAt, StartedBy: cp.StartedBy,
			FlowVersion: cp.FlowVersion,
		}
		if in.Kind == KindApproval {
			p.KeyArgs = protocol.KeyArgs(in.Args, in.ArgsSchema)
			p.Quorum = in.Quorum
			for _, v := range in.Votes {
				if !slices.Contains(p.Voters, v.Approver) {
					p.Voters = append(p.Voters, v.Approver)
				}
			}
		}
		if in.ExpiresAt != nil {
			p.OnTimeout = in.OnTimeout.wire()
		}
		if err := r.cfg.Store.PutPending(ctx, p); err != nil {
			return fmt.Errorf("engine: indexing pending run %s.%s: %w", cp.Flow, cp.Run, err)
		}
	case cp.Waited:
		if err := r.cfg.Store.DeletePending(ctx, cp.Flow, cp.Run, rev); err != nil {
			return fmt.Errorf("engine: removing %s.%s from the pending index: %w", cp.Flow, cp.Run, err)
		}
	}
	return nil
}

// refuse publishes a refused event and returns the outcome; deadLetter, if
// set, asks for the inbound message to be dead-lettered too.
func (r *Runner) refuse(ctx context.Context, flow, run, requestID string, o Inbound, code protocol.Code, deadLetter, msg string) (Outcome, error) {
	return r.refuseWith(ctx, flow, run, requestID, o, code, deadLetter, msg, nil)
}

// refuseWith is refuse with the run's audit record of the refusal, when
// the run exists.
func (r *Runner) refuseWith(ctx context.Context, flow, run, requestID string, o Inbound, code protocol.Code, deadLetter, msg string, rec *protocol.AuditRecord) (Outcome, error) {
	id := "refused-" + randomID(16)
	if o.EventID != "" {
		sum := sha256.Sum256([]byte(flow + "\x00" + run + "\x00" + o.Source + "\x00" + o.EventID))
		id = "refused-" + hex.EncodeToString(sum[:12])
	}
	requestID, msg = truncate(requestID, maxEcho), truncate(msg, maxRefusal)
	ref := &Refusal{Code: code, Message: msg, RequestID: requestID}
	out := Outcome{Flow: flow, Run: run, Refused: ref, DeadLetter: deadLetter}
	now := r.cfg.Now().UTC()
	tp := cmp.Or(o.Span, o.Traceparent)
	if len(tp) > maxEcho {
		tp = "" // not a W3C traceparent (55 bytes)
	}
	msgs := []Message{{Stream: EventStream, Kind: protocol.EventRefused, ID: id, Flow: flow, Run: run, Time: now,
		Data:        &protocol.Refused{Flow: flow, Run: run, RequestID: requestID, Code: code, Message: msg, EventID: truncate(o.EventID, maxEcho)},
		Traceparent: tp}}
	if len(o.EventID) <= maxEcho {
		msgs[0].Cause = o.EventID
	}
	if rec != nil {
		msgs = append(msgs, Message{Stream: AuditStream, Kind: protocol.ActionRefused, ID: id + "-audit", Flow: flow, Run: run, Time: now,
			Data: rec, Traceparent: tp})
	}
	if err := r.cfg.Publisher.Publish(ctx, msgs, false); err != nil {
		return Outcome{}, fmt.Errorf("engine: publishing refusal of %s.%s: %w", flow, run, err)
	}
	return out, nil
}

// A refusal repeats at most maxEcho bytes of each of the command's ids,
// sender and traceparent, and says what was wrong in at most maxRefusal
// bytes, so that its event fits in one message however large the command.
const (
	maxEcho    = 1 << 10
	maxRefusal = 4 << 10
)

// refuseRun refuses a command on an existing run, recording the refusal
// on the run's audit stream as a side record of its chain.
func (r *Runner) refuseRun(ctx context.Context, t *txn, requestID string, code protocol.Code, msg string) (Outcome, error) {
	cp := t.cp
	rec := &protocol.AuditRecord{Flow: cp.Flow, Run: cp.Run, Action: protocol.ActionRefused, At: t.now,
		By: truncate(t.actor, maxEcho), Source: truncate(t.in.Source, maxEcho), EventID: truncate(t.in.EventID, maxEcho),
		RequestID: truncate(requestID, maxEcho), Code: code, Reason: truncate(msg, maxRefusal), Side: true}
	if cp.Audit != nil {
		rec.Prev = cp.Audit.Hash
	}
	if err := r.signer.seal(rec); err != nil {
		return Outcome{}, err
	}
	return r.refuseWith(ctx, cp.Flow, cp.Run, requestID, t.in, code, "", msg, rec)
}

// refuseAnswer refuses a resume whose answer a validator refused when the
// node ran again; nothing of the transition was written, so the interrupt
// stays pending with its token.
func (r *Runner) refuseAnswer(ctx context.Context, t *txn, msg string) (Outcome, error) {
	requestID := ""
	if t.pending != nil {
		requestID = t.pending.RequestID
	}
	t.cp.Audit = t.loadedAudit
	out, err := r.refuseRun(ctx, t, requestID, CodeInvalidAnswer, msg)
	out.Status, out.Checkpoint, out.Node = Waiting, t.rev, t.cp.Node
	return out, err
}

// interrupted adds the interrupted event announcing in to the outbox and,
// when in has a deadline, the schedule that expires it.
func (t *txn) interrupted(in *Interrupt) {
	if in.ExpiresAt != nil {
		t.add(ScheduleStream, "expire", &protocol.Expire{Flow: t.cp.Flow, Run: t.cp.Run, RequestID: in.RequestID, ExpiresAt: *in.ExpiresAt})
	}
	for i, at := range reminderTimes(in, t.now) {
		t.add(ScheduleStream, "remind", &protocol.Remind{Flow: t.cp.Flow, Run: t.cp.Run, RequestID: in.RequestID, At: at, N: i + 1})
	}
	t.emit(protocol.EventInterrupted, interruptedEvent(t.cp, in))
}

// Refuse publishes a refused event for a message that cannot be applied for
// a reason found before the runner saw it (a payload that does not parse).
func (r *Runner) Refuse(ctx context.Context, flow, run string, o Inbound, code protocol.Code, msg string) error {
	_, err := r.refuse(ctx, flow, run, "", o, code, "", msg)
	return err
}
