package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/protocol"
)

// MaxOriginSize is the largest origin a start or a tool request may bring,
// in bytes of JSON: the origin is echoed in every event of the run, so it
// must leave room in each for the rest. A larger one is refused
// invalid_payload.
const MaxOriginSize = 64 << 10

// Start starts a run.
type Start struct {
	Flow string
	// Run is the run id; when empty one is derived from the event id.
	Run string
	// State is the initial state; its values fill question fields.
	State map[string]json.RawMessage
	// Origin is any JSON object, echoed in every event of the run.
	Origin json.RawMessage
	// By names who started the run, for the audit record; see [actor].
	By string
	Inbound
	// exists, if set, answers the start when the run exists already
	// (started by another message of the same request, on another
	// worker, since the caller looked), instead of a run_exists refusal:
	// a tool request or an ask answers as a repeat.
	exists func(cp *Checkpoint, rev uint64) (Outcome, error)
}

// Resume answers the pending interrupt of a run.
type Resume struct {
	Flow, Run string
	Token     string
	RequestID string
	Answers   map[string]json.RawMessage
	Selected  []string
	Decision  string
	Edits     map[string]json.RawMessage
	Update    map[string]json.RawMessage
	Approver  string
	Reason    string
	// Message is a respond's answer.
	Message string
	// ExpectedCheckpoint, if set, must equal the run's checkpoint.
	ExpectedCheckpoint *uint64
	IdempotencyKey     string
	// Trusted resumes need no token: the caller was authenticated. A
	// transport says so with a vouch in Inbound.Authority; an in-process
	// caller that authenticated the person may set it.
	Trusted bool
	// Roles are the approver roles the resume was sent with (the role of a
	// role subject, or the roles an authenticated caller holds), when
	// RolesKnown. An approval is decided only by a resume holding its
	// approverRole; without known roles, only where callers are not
	// identified (see [authority.Config]). A transport gives them in
	// Inbound.Authority.
	Roles      []string
	RolesKnown bool
	Inbound
	// caller is who sent the resume, as the engine found them.
	caller authority.Caller
}

// answer returns the part of the resume that answers the interrupt.
func (cmd Resume) answer() protocol.Answer {
	return protocol.Answer{Answers: cmd.Answers, Selected: cmd.Selected, Decision: cmd.Decision, Edits: cmd.Edits, Reason: cmd.Reason, Message: cmd.Message}
}

// Cancel cancels a waiting run.
type Cancel struct {
	Flow, Run string
	Reason    string
	By        string
	Inbound
}

// Reannounce announces a waiting run's pending interrupt again, with a
// fresh request id and resume token; the previous token no longer resumes
// it. A run can so be answered however long it waits, even once the events
// stream no longer holds its interrupted event.
type Reannounce struct {
	Flow, Run string
	// RequestID, if set, must be the pending request's id.
	RequestID string
	Reason    string
	// By names who asked, for the audit record; see [actor].
	By string
	Inbound
}

// Start applies a start command.
func (r *Runner) Start(ctx context.Context, cmd Start) (Outcome, error) {
	if err := CheckName("flow", cmd.Flow); err != nil {
		return Outcome{Flow: cmd.Flow, DeadLetter: ReasonInvalidName}, nil
	}
	if cmd.Run == "" {
		cmd.Run = deriveRunID(cmd.Source, cmd.EventID)
	}
	if err := CheckName("run", cmd.Run); err != nil {
		return Outcome{Flow: cmd.Flow, Run: cmd.Run, DeadLetter: ReasonInvalidName}, nil
	}
	if out, stop, err := r.authenticate(ctx, cmd.Flow, cmd.Run, &cmd.Inbound); stop {
		return out, err
	}
	f, ok := r.flows[cmd.Flow]
	if !ok {
		return r.refuse(ctx, cmd.Flow, cmd.Run, "", cmd.Inbound, CodeUnknownFlow, string(CodeUnknownFlow),
			fmt.Sprintf("flow %q is not registered; known flows: %s", cmd.Flow, strings.Join(r.startable(), ", ")))
	}
	if err := checkOrigin(cmd.Origin); err != nil {
		return r.refuse(ctx, cmd.Flow, cmd.Run, "", cmd.Inbound, CodeInvalidPayload, string(CodeInvalidPayload), err.Error())
	}
	for k := range cmd.State {
		if k == "" || strings.Contains(k, ".") {
			return r.refuse(ctx, cmd.Flow, cmd.Run, "", cmd.Inbound, CodeInvalidPayload, string(CodeInvalidPayload),
				fmt.Sprintf("state field %q: top-level state fields are non-empty names without dots; nest with an object", k))
		}
	}
	key := cmp.Or(cmd.EventID, randomID(16))
	for attempt := range maxConflicts {
		var (
			cp  *Checkpoint
			rev uint64
			err = ErrNotFound
		)
		if attempt > 0 || !cmd.FirstDelivery {
			cp, rev, err = r.load(ctx, cmd.Flow, cmd.Run)
		}
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return Outcome{}, fmt.Errorf("engine: loading %s.%s: %w", cmd.Flow, cmd.Run, err)
		default:
			if out, done, err := r.repeat(ctx, f, cp, rev, key, cmd.Inbound); done || err != nil {
				out.RunTraceparent = cp.Traceparent
				return out, err
			}
			if cmd.exists != nil {
				return cmd.exists(cp, rev)
			}
			return r.refuse(ctx, cmd.Flow, cmd.Run, "", cmd.Inbound, CodeRunExists, string(CodeRunExists),
				fmt.Sprintf("run %s of flow %s already exists (status %s); start with another run id", cmd.Run, cmd.Flow, cp.Status))
		}
		t := r.newTxn(f, nil, 0, false, cmd.Inbound, key)
		t.caller = r.caller(cmd.By, cmd.Inbound)
		t.cp = &Checkpoint{
			Flow: cmd.Flow, Run: cmd.Run, Status: Running, Node: f.start, State: Doc{},
			CreatedAt: t.now, Origin: cmd.Origin, Traceparent: cmd.Traceparent, StartedBy: t.caller.Name, UID: randomID(8),
			Cause: &Cause{ID: cmd.EventID, Key: key, Seq: cmd.Seq}, Applied: []string{key},
		}
		if err := applyDoc(f, t.cp, cmd.State); err != nil {
			return r.refuse(ctx, cmd.Flow, cmd.Run, "", cmd.Inbound, CodeInvalidPayload, string(CodeInvalidPayload), "start state: "+err.Error())
		}
		t.initial = t.cp.State.clone()
		t.input += rawSize(cmd.State) + len(cmd.Origin)
		t.action = protocol.ActionStarted
		t.emit(protocol.EventStarted, &protocol.Started{Flow: cmd.Flow, Run: cmd.Run, Origin: cmd.Origin})
		t.audit(&protocol.AuditRecord{Action: protocol.ActionStarted, By: t.cp.StartedBy, Source: cmd.Source, EventID: cmd.EventID})
		out, err := r.run(ctx, t)
		if isConflict(err) {
			continue
		}
		return out, err
	}
	return Outcome{}, fmt.Errorf("engine: starting %s.%s: too many concurrent writers", cmd.Flow, cmd.Run)
}

// Resume applies a resume command.
func (r *Runner) Resume(ctx context.Context, cmd Resume) (Outcome, error) {
	if out, stop, err := r.authenticate(ctx, cmd.Flow, cmd.Run, &cmd.Inbound); stop {
		return out, err
	}
	cmd.caller = r.resumeCaller(cmd)
	cmd.Trusted = cmd.Trusted || cmd.trusted
	key := cmp.Or(cmd.IdempotencyKey, cmd.EventID)
	return r.transact(ctx, cmd.Flow, cmd.Run, cmd.Inbound, key, "resume", func(t *txn) (Outcome, error) {
		cp := t.cp
		t.actor, t.caller = cmd.approver(), cmd.caller
		if cp.Status == Running {
			return t.retry(), nil
		}
		if cp.Status == Expired {
			return t.refuse(ctx, cmd.RequestID, CodeExpired, "run %s expired; its interrupt can no longer be answered", cmd.Run)
		}
		if cp.Status != Waiting || cp.Interrupt == nil {
			return t.refuse(ctx, cmd.RequestID, CodeNotWaiting, "run %s is %s, not waiting on an interrupt", cmd.Run, cp.Status)
		}
		in := cp.Interrupt
		if in.Quorum != nil {
			// A vote may carry the token of the request the last vote
			// replaced: it waits until that vote's events are out, so that
			// the run's events keep the order of its transitions (voted
			// before completed).
			if busy, err := r.busy(ctx, cp); err != nil || busy {
				return t.retry(), err
			}
		}
		if cmd.ExpectedCheckpoint != nil && *cmd.ExpectedCheckpoint != t.rev {
			return t.refuse(ctx, cmd.RequestID, CodeStaleCheckpoint, "expectedCheckpoint is %d but run %s is at checkpoint %d; answer the latest interrupted event", *cmd.ExpectedCheckpoint, cmd.Run, t.rev)
		}
		if out, stop, err := t.authorize(ctx, cmd, in); stop {
			return out, err
		}
		k, ok := kindOf(in.Kind)
		spec, known := protocol.SpecOf(in.Kind)
		if !ok || !known {
			return t.refuse(ctx, cmd.RequestID, CodeInvalidAnswer, "interrupt kind %q cannot be answered by this worker", in.Kind)
		}
		if err := spec.Check(in.asked(), cmd.answer()); err != nil {
			return t.refuse(ctx, cmd.RequestID, CodeInvalidAnswer, "%v", err)
		}
		if err := k.answer(t, in, cmd); err != nil {
			return t.refuse(ctx, cmd.RequestID, CodeInvalidAnswer, "%v", err)
		}
		if t.voted != nil {
			return r.vote(ctx, t, in, cmd)
		}
		if len(cmd.Update) > 0 {
			if err := applyDoc(t.f, cp, cmd.Update); err != nil {
				return t.refuse(ctx, cmd.RequestID, CodeInvalidAnswer, "update: %v", err)
			}
		}
		t.input += cmd.size()
		t.asked = in.AskedAt
		cp.Status = Running
		action := protocol.ActionAnswered
		ev := &protocol.Resumed{Flow: cp.Flow, Run: cp.Run, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind, Origin: cp.Origin}
		rec := &protocol.AuditRecord{Node: in.Node, RequestID: in.RequestID, Kind: in.Kind,
			By: cmd.approver(), Source: cmd.Source, EventID: cmd.EventID, Trusted: cmd.Trusted}
		if d := in.Decision; d != nil {
			action = auditVerdict(d.Verdict)
			ev.Decision, ev.Approver, ev.Reason, ev.Message = string(d.Verdict), d.Approver, d.Reason, d.Message
			rec.Reason, rec.Message, rec.ApproverRole = d.Reason, d.Message, in.ApproverRole
			rec.Approval = &protocol.AuditApproval{Action: in.Action, Args: in.Args}
			if d.Verdict == VerdictEdit {
				edits, _ := json.Marshal(cmd.Edits)
				final, _ := json.Marshal(d.Args)
				ev.Edits, rec.Approval.Edits, rec.Approval.Final = edits, edits, final
			}
			ev.Receipt = t.receipt(approvalReceipt(in.Action, "", in.Args, *d))
		}
		rec.Action = action
		t.begin(cmd.Traceparent, action)
		t.emit(protocol.EventResumed, ev)
		t.audit(rec)
		return r.run(ctx, t)
	})
}

// Cancel applies a cancel command.
func (r *Runner) Cancel(ctx context.Context, cmd Cancel) (Outcome, error) {
	if out, stop, err := r.authenticate(ctx, cmd.Flow, cmd.Run, &cmd.Inbound); stop {
		return out, err
	}
	return r.transact(ctx, cmd.Flow, cmd.Run, cmd.Inbound, cmd.EventID, "cancel", func(t *txn) (Outcome, error) {
		cp := t.cp
		t.caller = r.caller(cmd.By, cmd.Inbound)
		t.actor = t.caller.Name
		if busy, err := r.busy(ctx, cp); err != nil || busy {
			return t.retry(), err
		}
		if cp.Status != Waiting {
			return t.refuse(ctx, "", CodeNotWaiting, "run %s is %s; only a waiting run can be cancelled", cmd.Run, cp.Status)
		}
		var ref *authority.Refusal
		if err := r.cfg.Authority.MayCancel(t.caller, t.authorityRun()); errors.As(err, &ref) {
			return t.refuse(ctx, "", ref.Code, "%s", ref.Reason)
		}
		node := cp.Node
		if cp.Interrupt != nil {
			t.asked = cp.Interrupt.AskedAt
		}
		cp.Status, cp.Interrupt = Cancelled, nil
		t.input += len(cmd.Reason) + len(cmd.By)
		t.begin(cmd.Traceparent, protocol.ActionCancelled)
		by := r.actor(cmd.By, cmd.Inbound)
		t.audit(&protocol.AuditRecord{Action: protocol.ActionCancelled, Node: node, By: by, Source: cmd.Source, Reason: cmd.Reason, EventID: cmd.EventID,
			Outcome: &protocol.AuditOutcome{Status: Cancelled}})
		t.emit(protocol.EventCancelled, &protocol.Cancelled{Flow: cp.Flow, Run: cp.Run, Node: node, Reason: cmd.Reason, By: by, Origin: cp.Origin})
		if t.f.cancelled != nil {
			t.f.cancelled(t)
		}
		return r.commit(ctx, t)
	})
}

// Reannounce applies a reannounce command.
func (r *Runner) Reannounce(ctx context.Context, cmd Reannounce) (Outcome, error) {
	if out, stop, err := r.authenticate(ctx, cmd.Flow, cmd.Run, &cmd.Inbound); stop {
		return out, err
	}
	return r.transact(ctx, cmd.Flow, cmd.Run, cmd.Inbound, cmd.EventID, "reannounce", func(t *txn) (Outcome, error) {
		cp := t.cp
		t.caller = r.caller(cmd.By, cmd.Inbound)
		t.actor = t.caller.Name
		if busy, err := r.busy(ctx, cp); err != nil || busy {
			return t.retry(), err
		}
		if cp.Status != Waiting || cp.Interrupt == nil {
			return t.refuse(ctx, cmd.RequestID, CodeNotWaiting, "run %s is %s, not waiting on an interrupt; there is nothing to announce", cmd.Run, cp.Status)
		}
		in := cp.Interrupt
		if cmd.RequestID != "" && cmd.RequestID != in.RequestID {
			return t.refuse(ctx, cmd.RequestID, CodeTokenMismatch, "requestId %q is not the pending request %s", truncate(cmd.RequestID, 64), in.RequestID)
		}
		previous := in.RequestID
		in.RequestID = newRequestID()
		t.input += len(cmd.Reason) + len(cmd.RequestID)
		t.begin(cmd.Traceparent, protocol.ActionReannounced)
		t.audit(&protocol.AuditRecord{Action: protocol.ActionReannounced, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind,
			By: r.actor(cmd.By, cmd.Inbound), Source: cmd.Source, Reason: cmd.Reason, EventID: cmd.EventID, Replaces: previous,
			ApproverRole: in.ApproverRole, ExpiresAt: in.ExpiresAt,
			Outcome: &protocol.AuditOutcome{Status: Waiting, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind}})
		t.interrupted(in)
		return r.commit(ctx, t)
	})
}

// checkOrigin refuses an origin larger than MaxOriginSize.
func checkOrigin(origin json.RawMessage) error {
	if len(origin) <= MaxOriginSize {
		return nil
	}
	return fmt.Errorf("origin is %d bytes, more than the %d bytes (64 KiB) allowed: origin is echoed in every event of the run, so keep it to what routes the answers (ids, a channel, a URL) and put larger data in the state", len(origin), MaxOriginSize)
}

// size is the size of what a resume brings.
func (cmd Resume) size() int {
	n := rawSize(cmd.Answers) + rawSize(cmd.Update) + rawSize(cmd.Edits) +
		len(cmd.RequestID) + len(cmd.Decision) + len(cmd.Approver) + len(cmd.Reason) + len(cmd.Message)
	for _, s := range cmd.Selected {
		n += len(s)
	}
	return n
}

func rawSize(m map[string]json.RawMessage) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}

func roleList(roles []string) string {
	if len(roles) == 0 {
		return "no role"
	}
	return "role " + strings.Join(roles, ", ")
}
