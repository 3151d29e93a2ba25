package engine

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Refusal codes of a refused event.
const (
	CodeTokenMismatch   = "token_mismatch"
	CodeStaleCheckpoint = "stale_checkpoint"
	CodeNotWaiting      = "not_waiting"
	CodeUnknownRun      = "unknown_run"
	CodeExpired         = "expired"
	CodeInvalidAnswer   = "invalid_answer"
	CodeForbidden       = "forbidden"
	CodeInvalidPayload  = "invalid_payload"
	// CodeUnknownFlow: the flow is not registered. An extension of the
	// protocol's list, used on start.
	CodeUnknownFlow = "unknown_flow"
	// CodeRunExists: a start names a run that already exists. An extension
	// of the protocol's list.
	CodeRunExists = "run_exists"
)

// Dead-letter reasons the runner decides (the bus adds those of decoding).
const (
	ReasonInvalidName = "invalid_name"
)

// Defaults of [Config].
const (
	DefaultMaxNodeRuns = 1000
	DefaultSource      = "interlock/local"
	// DefaultBusyRetry is how long a message waits when its run is busy.
	DefaultBusyRetry = 500 * time.Millisecond
	maxConflicts     = 16
	maxApplied       = 32
)

// Config configures a [Runner].
type Config struct {
	// Flows are the flows the runner runs.
	Flows []*Flow
	// Store keeps checkpoints. Required.
	Store Store
	// Publisher publishes events and audit records. Required.
	Publisher Publisher
	// Queue, if set, is asked whether the message behind a run's last
	// transition is still unacknowledged. Optional.
	Queue Queue
	// Secret keys the resume tokens (an HMAC). Required, at least 32 bytes;
	// every worker of one deployment must share it.
	Secret []byte
	// Source is the CloudEvents source of outbound events and the actor of
	// audit records. Defaults to DefaultSource.
	Source string
	// MaxNodeRuns bounds the nodes one transition may run, to stop a loop
	// in a flow's edges. Defaults to DefaultMaxNodeRuns.
	MaxNodeRuns int
	// Now returns the time. Defaults to time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	c.Source = cmp.Or(c.Source, DefaultSource)
	c.MaxNodeRuns = cmp.Or(c.MaxNodeRuns, DefaultMaxNodeRuns)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("engine: Config.Store is nil")
	case c.Publisher == nil:
		return errors.New("engine: Config.Publisher is nil")
	case len(c.Secret) < 32:
		return fmt.Errorf("engine: Config.Secret is %d bytes; resume tokens need a secret of at least 32 random bytes", len(c.Secret))
	case c.MaxNodeRuns < 1:
		return fmt.Errorf("engine: Config.MaxNodeRuns is %d; it must be positive", c.MaxNodeRuns)
	}
	return nil
}

// Runner runs flows: it applies start, resume and cancel commands to runs,
// one compare-and-set transition at a time, and publishes what follows.
// It is safe for concurrent use; two runners sharing a store never both
// advance one run.
type Runner struct {
	cfg   Config
	flows map[string]*Flow
}

// NewRunner returns a runner for cfg.
func NewRunner(cfg Config) (*Runner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, flows: map[string]*Flow{}}
	for _, f := range cfg.Flows {
		if f == nil {
			return nil, errors.New("engine: Config.Flows holds a nil flow")
		}
		if _, dup := r.flows[f.name]; dup {
			return nil, fmt.Errorf("engine: flow %q is registered twice", f.name)
		}
		r.flows[f.name] = f
	}
	return r, nil
}

// Flows returns the names of the registered flows, sorted.
func (r *Runner) Flows() []string { return sortedKeys(r.flows) }

// Outcome is what became of a command.
type Outcome struct {
	Flow, Run  string
	Status     Status
	Checkpoint uint64
	// Refused is set when the command was refused; the refused event has
	// been published.
	Refused *Refusal
	// DeadLetter, when set, is the reason to copy the inbound message to
	// the dead-letter stream.
	DeadLetter string
	// Duplicate is set when the command repeats one already applied.
	Duplicate bool
	// RetryAfter is set when the run is busy: deliver the command again later.
	RetryAfter time.Duration
}

// Refusal is a refused command.
type Refusal struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"requestId,omitempty"`
}

// Inbound says which message a command came from and who sent it.
type Inbound struct {
	// EventID is the CloudEvent id.
	EventID string
	// Source is the CloudEvent source, named as actor in the audit stream.
	Source string
	// Traceparent is carried into the events the command causes.
	Traceparent string
	// Seq is the inbound message's stream sequence, 0 if none.
	Seq uint64
	// FirstDelivery is set when the message has certainly not been handled
	// before (JetStream's first delivery of it). A start then skips reading
	// the checkpoint: creating it fails if the run exists.
	FirstDelivery bool
}

// Start starts a run.
type Start struct {
	Flow string
	// Run is the run id; when empty one is derived from the event id.
	Run string
	// State is the initial state; its values fill question fields.
	State map[string]json.RawMessage
	// Origin is any JSON object, echoed in every event of the run.
	Origin json.RawMessage
	Inbound
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
	// ExpectedCheckpoint, if set, must equal the run's checkpoint.
	ExpectedCheckpoint *uint64
	IdempotencyKey     string
	// Trusted resumes need no token: the caller was authenticated.
	Trusted bool
	Inbound
}

// Cancel cancels a waiting run.
type Cancel struct {
	Flow, Run string
	Reason    string
	By        string
	Inbound
}

// txn is one transition of one run.
type txn struct {
	r      *Runner
	f      *Flow
	cp     *Checkpoint
	rev    uint64
	stored bool
	now    time.Time
}

func (t *txn) save(ctx context.Context) error {
	t.cp.UpdatedAt = t.now
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

func (t *txn) emit(kind string, data map[string]any) {
	t.add(EventStream, kind, data)
}

// outcome completes the transition's audit record with where the run ended
// up: one record per transition, naming the command and its outcome.
func (t *txn) outcome(data map[string]any) {
	data["status"] = t.cp.Status
	for i := len(t.cp.Outbox) - 1; i >= 0; i-- {
		if m := &t.cp.Outbox[i]; m.Stream == AuditStream {
			m.Data = addFields(m.Data, map[string]any{"outcome": data})
			return
		}
	}
}

func (t *txn) audit(action string, data map[string]any) {
	data["action"] = action
	data["at"] = t.now
	t.add(AuditStream, action, data)
}

func (t *txn) add(stream Stream, kind string, data map[string]any) {
	data["flow"], data["run"] = t.cp.Flow, t.cp.Run
	if stream == EventStream && len(t.cp.Origin) > 0 {
		data["origin"] = t.cp.Origin
	}
	b, err := json.Marshal(data)
	if err != nil {
		// Every value put in data is already JSON; this cannot happen.
		panic(fmt.Sprintf("engine: encoding %s event: %v", kind, err))
	}
	t.cp.Seq++
	t.cp.Outbox = append(t.cp.Outbox, Message{
		Stream: stream, Kind: kind, ID: fmt.Sprintf("%s-%d", t.cp.UID, t.cp.Seq),
		Flow: t.cp.Flow, Run: t.cp.Run, Time: t.now, Data: b, Traceparent: t.cp.Traceparent,
	})
}

func (r *Runner) newTxn(f *Flow, cp *Checkpoint, rev uint64, stored bool) *txn {
	return &txn{r: r, f: f, cp: cp, rev: rev, stored: stored, now: r.cfg.Now().UTC()}
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
	f, ok := r.flows[cmd.Flow]
	if !ok {
		return r.refuse(ctx, cmd.Flow, cmd.Run, cmd.Inbound, CodeUnknownFlow, CodeUnknownFlow,
			fmt.Sprintf("flow %q is not registered; known flows: %s", cmd.Flow, strings.Join(r.Flows(), ", ")))
	}
	key := cmp.Or(cmd.EventID, randomID(16))
	for attempt := range maxConflicts {
		var (
			cp  *Checkpoint
			rev uint64
			err = ErrNotFound
		)
		if attempt > 0 || !cmd.FirstDelivery {
			cp, rev, err = r.cfg.Store.Load(ctx, cmd.Flow, cmd.Run)
		}
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return Outcome{}, fmt.Errorf("engine: loading %s.%s: %w", cmd.Flow, cmd.Run, err)
		default:
			if out, done, err := r.repeat(ctx, f, cp, rev, key, cmd.Seq); done || err != nil {
				return out, err
			}
			return r.refuse(ctx, cmd.Flow, cmd.Run, cmd.Inbound, CodeRunExists, CodeRunExists,
				fmt.Sprintf("run %s of flow %s already exists (status %s); start with another run id", cmd.Run, cmd.Flow, cp.Status))
		}
		now := r.cfg.Now().UTC()
		cp = &Checkpoint{
			Flow: cmd.Flow, Run: cmd.Run, Status: Running, Node: f.start, State: Doc{},
			CreatedAt: now, Origin: cmd.Origin, Traceparent: cmd.Traceparent, UID: randomID(8),
			Cause: &Cause{ID: cmd.EventID, Key: key, Seq: cmd.Seq}, Applied: []string{key},
		}
		for k := range cmd.State {
			if k == "" || strings.Contains(k, ".") {
				return r.refuse(ctx, cmd.Flow, cmd.Run, cmd.Inbound, CodeInvalidPayload, CodeInvalidPayload,
					fmt.Sprintf("state field %q: top-level state fields are non-empty names without dots; nest with an object", k))
			}
		}
		if err := applyDoc(f, cp, cmd.State); err != nil {
			return r.refuse(ctx, cmd.Flow, cmd.Run, cmd.Inbound, CodeInvalidPayload, CodeInvalidPayload, "start state: "+err.Error())
		}
		t := r.newTxn(f, cp, 0, false)
		t.emit("started", map[string]any{})
		t.audit("started", map[string]any{"by": cmd.Source, "eventId": cmd.EventID})
		out, err := r.run(ctx, t)
		if isConflict(err) {
			continue
		}
		return out, err
	}
	return Outcome{}, fmt.Errorf("engine: starting %s.%s: too many concurrent writers", cmd.Flow, cmd.Run)
}

// repeat handles a command whose key the run has already seen: it finishes
// an interrupted transition of that command, or acknowledges a repeat.
func (r *Runner) repeat(ctx context.Context, f *Flow, cp *Checkpoint, rev uint64, key string, seq uint64) (Outcome, bool, error) {
	if key == "" || !slices.Contains(cp.Applied, key) {
		return Outcome{}, false, nil
	}
	mine := cp.Cause != nil && cp.Cause.Key == key
	switch {
	case mine && cp.Status == Running && seq != cp.Cause.Seq:
		// Another message with the same key while the transition is in
		// flight: let the one in flight finish first.
		return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, RetryAfter: DefaultBusyRetry}, true, nil
	case mine && cp.Status == Running:
		// A step was recorded, then the worker stopped: carry on.
		out, err := r.run(ctx, r.newTxn(f, cp, rev, true))
		return out, true, err
	case mine:
		// Committed; publishing may not have finished.
		if err := r.finish(ctx, cp, rev, true); err != nil {
			return Outcome{}, true, err
		}
	}
	return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, Checkpoint: rev, Duplicate: true}, true, nil
}

// busy reports whether the run must not be advanced now: a transition is in
// flight, or the last one has not finished publishing.
func (r *Runner) busy(ctx context.Context, cp *Checkpoint) (bool, error) {
	if cp.Status == Running {
		return true, nil
	}
	if r.cfg.Queue == nil || cp.Cause == nil || cp.Cause.Seq == 0 {
		return false, nil
	}
	unacked, err := r.cfg.Queue.Unacked(ctx, cp.Cause.Seq)
	if err != nil {
		return false, fmt.Errorf("engine: checking message %d of %s.%s: %w", cp.Cause.Seq, cp.Flow, cp.Run, err)
	}
	return unacked, nil
}

// Resume applies a resume command.
func (r *Runner) Resume(ctx context.Context, cmd Resume) (Outcome, error) {
	f, out, ok := r.lookup(ctx, cmd.Flow, cmd.Run, cmd.Inbound)
	if !ok {
		return out, nil
	}
	key := cmp.Or(cmd.IdempotencyKey, cmd.EventID)
	for range maxConflicts {
		cp, rev, err := r.cfg.Store.Load(ctx, cmd.Flow, cmd.Run)
		if errors.Is(err, ErrNotFound) {
			return r.refuse(ctx, cmd.Flow, cmd.Run, cmd.Inbound, CodeUnknownRun, "",
				fmt.Sprintf("no run %s of flow %s; resume a run from its interrupted event", cmd.Run, cmd.Flow))
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("engine: loading %s.%s: %w", cmd.Flow, cmd.Run, err)
		}
		if out, done, err := r.repeat(ctx, f, cp, rev, key, cmd.Seq); done || err != nil {
			return out, err
		}
		if cp.Status == Running {
			return Outcome{Flow: cmd.Flow, Run: cmd.Run, Status: cp.Status, RetryAfter: DefaultBusyRetry}, nil
		}
		refuse := func(code, format string, args ...any) (Outcome, error) {
			req := cmd.RequestID
			if req == "" && cp.Interrupt != nil {
				req = cp.Interrupt.RequestID
			}
			out, err := r.refuseRequest(ctx, cmd.Flow, cmd.Run, req, cmd.Inbound, code, "", fmt.Sprintf(format, args...))
			out.Status, out.Checkpoint = cp.Status, rev
			return out, err
		}
		if cp.Status == Expired {
			return refuse(CodeExpired, "run %s expired; its interrupt can no longer be answered", cmd.Run)
		}
		if cp.Status != Waiting || cp.Interrupt == nil {
			return refuse(CodeNotWaiting, "run %s is %s, not waiting on an interrupt", cmd.Run, cp.Status)
		}
		in := cp.Interrupt
		if cmd.ExpectedCheckpoint != nil && *cmd.ExpectedCheckpoint != rev {
			return refuse(CodeStaleCheckpoint, "expectedCheckpoint is %d but run %s is at checkpoint %d; answer the latest interrupted event", *cmd.ExpectedCheckpoint, cmd.Run, rev)
		}
		if !cmd.Trusted {
			if cmd.Token == "" {
				return refuse(CodeTokenMismatch, "resumeToken is missing; copy it from the interrupted event")
			}
			if !hmac.Equal([]byte(cmd.Token), []byte(r.token(cp.Flow, cp.Run, in.RequestID))) {
				return refuse(CodeTokenMismatch, "resumeToken does not match the pending interrupt (request %s); it may be from an earlier, used interrupt", in.RequestID)
			}
		}
		if cmd.Trusted {
			// No token proves the caller saw the interrupted event, so make
			// sure the transition that published it has finished.
			if busy, err := r.busy(ctx, cp); err != nil || busy {
				return Outcome{Flow: cmd.Flow, Run: cmd.Run, Status: cp.Status, RetryAfter: DefaultBusyRetry}, err
			}
		}
		if cmd.RequestID != "" && cmd.RequestID != in.RequestID {
			return refuse(CodeTokenMismatch, "requestId %q is not the pending request %s", truncate(cmd.RequestID, 64), in.RequestID)
		}
		if in.ExpiresAt != nil && !r.cfg.Now().Before(*in.ExpiresAt) {
			return refuse(CodeExpired, "the interrupt expired at %s", in.ExpiresAt.Format(time.RFC3339))
		}
		if err := applyAnswer(f, cp, in, cmd); err != nil {
			return refuse(CodeInvalidAnswer, "%v", err)
		}
		if len(cmd.Update) > 0 {
			if err := applyDoc(f, cp, cmd.Update); err != nil {
				return refuse(CodeInvalidAnswer, "update: %v", err)
			}
		}
		if cmd.Traceparent != "" {
			cp.Traceparent = cmd.Traceparent
		}
		cp.Status = Running
		cp.Cause = &Cause{ID: cmd.EventID, Key: key, Seq: cmd.Seq}
		cp.Applied = appendApplied(cp.Applied, key)
		cp.Outbox = nil
		t := r.newTxn(f, cp, rev, true)
		by := cmp.Or(cmd.Approver, cmd.Source)
		t.emit("resumed", map[string]any{"node": in.Node, "requestId": in.RequestID, "kind": in.Kind})
		t.audit("resumed", map[string]any{"node": in.Node, "requestId": in.RequestID, "kind": in.Kind,
			"by": by, "source": cmd.Source, "eventId": cmd.EventID, "trusted": cmd.Trusted})
		out, err := r.run(ctx, t)
		if isConflict(err) {
			continue
		}
		return out, err
	}
	return Outcome{}, fmt.Errorf("engine: resuming %s.%s: too many concurrent writers", cmd.Flow, cmd.Run)
}

// applyAnswer records a resume's answer on the pending interrupt.
func applyAnswer(f *Flow, cp *Checkpoint, in *Interrupt, cmd Resume) error {
	switch in.Kind {
	case KindQuestion:
		if len(cmd.Selected) > 0 || cmd.Decision != "" {
			return fmt.Errorf("this interrupt asks questions; send answers for %s", strings.Join(in.Fields, ", "))
		}
		if len(cmd.Answers) == 0 {
			return fmt.Errorf("answers is empty; answer one or more of %s", strings.Join(in.Fields, ", "))
		}
		trial := cp.State.clone()
		for _, field := range sortedKeys(cmd.Answers) {
			if !slices.Contains(in.Fields, field) {
				return fmt.Errorf("%q is not asked by this interrupt; it asks for %s", truncate(field, 64), strings.Join(in.Fields, ", "))
			}
			v := cmd.Answers[field]
			if !json.Valid(v) {
				return fmt.Errorf("answer for %s is not valid JSON", field)
			}
			if err := trial.set(field, v, Replace); err != nil {
				return fmt.Errorf("answer for %s: %w", field, err)
			}
		}
		if f.fit != nil {
			if err := f.fit(trial); err != nil {
				return fmt.Errorf("answers do not fit the state: %w", err)
			}
		}
		if in.Answers == nil {
			in.Answers = map[string]json.RawMessage{}
		}
		for field, v := range cmd.Answers {
			in.Answers[field] = v
		}
	case KindChoice:
		if len(cmd.Answers) > 0 || cmd.Decision != "" {
			return fmt.Errorf("this interrupt is a choice; send selected with %s", in.optionList())
		}
		if err := in.checkSelection(cmd.Selected); err != nil {
			return err
		}
		in.Selected = cmd.Selected
	default:
		return fmt.Errorf("interrupt kind %q cannot be answered by this worker", in.Kind)
	}
	return nil
}

// Cancel applies a cancel command.
func (r *Runner) Cancel(ctx context.Context, cmd Cancel) (Outcome, error) {
	f, out, ok := r.lookup(ctx, cmd.Flow, cmd.Run, cmd.Inbound)
	if !ok {
		return out, nil
	}
	key := cmd.EventID
	for range maxConflicts {
		cp, rev, err := r.cfg.Store.Load(ctx, cmd.Flow, cmd.Run)
		if errors.Is(err, ErrNotFound) {
			return r.refuse(ctx, cmd.Flow, cmd.Run, cmd.Inbound, CodeUnknownRun, "",
				fmt.Sprintf("no run %s of flow %s to cancel", cmd.Run, cmd.Flow))
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("engine: loading %s.%s: %w", cmd.Flow, cmd.Run, err)
		}
		if out, done, err := r.repeat(ctx, f, cp, rev, key, cmd.Seq); done || err != nil {
			return out, err
		}
		if busy, err := r.busy(ctx, cp); err != nil || busy {
			return Outcome{Flow: cmd.Flow, Run: cmd.Run, Status: cp.Status, RetryAfter: DefaultBusyRetry}, err
		}
		if cp.Status != Waiting {
			out, err := r.refuse(ctx, cmd.Flow, cmd.Run, cmd.Inbound, CodeNotWaiting, "",
				fmt.Sprintf("run %s is %s; only a waiting run can be cancelled", cmd.Run, cp.Status))
			out.Status, out.Checkpoint = cp.Status, rev
			return out, err
		}
		t := r.newTxn(f, cp, rev, true)
		node := cp.Node
		cp.Status, cp.Interrupt = Cancelled, nil
		cp.Cause = &Cause{ID: cmd.EventID, Key: key, Seq: cmd.Seq}
		cp.Applied = appendApplied(cp.Applied, key)
		cp.Outbox = nil
		if cmd.Traceparent != "" {
			cp.Traceparent = cmd.Traceparent
		}
		by := cmp.Or(cmd.By, cmd.Source)
		t.audit("cancelled", map[string]any{"node": node, "by": by, "source": cmd.Source, "reason": cmd.Reason, "eventId": cmd.EventID,
			"outcome": map[string]any{"status": Cancelled}})
		t.emit("cancelled", map[string]any{"node": node, "reason": cmd.Reason, "by": by})
		err = t.save(ctx)
		if isConflict(err) {
			continue
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("engine: cancelling %s.%s: %w", cmd.Flow, cmd.Run, err)
		}
		if err := r.finish(ctx, cp, t.rev, false); err != nil {
			return Outcome{}, err
		}
		return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, Checkpoint: t.rev}, nil
	}
	return Outcome{}, fmt.Errorf("engine: cancelling %s.%s: too many concurrent writers", cmd.Flow, cmd.Run)
}

// lookup checks the names of a resume or cancel and finds the flow.
func (r *Runner) lookup(ctx context.Context, flow, run string, o Inbound) (*Flow, Outcome, bool) {
	if CheckName("flow", flow) != nil || CheckName("run", run) != nil {
		return nil, Outcome{Flow: flow, Run: run, DeadLetter: ReasonInvalidName}, false
	}
	f, ok := r.flows[flow]
	if !ok {
		out, err := r.refuse(ctx, flow, run, o, CodeUnknownRun, CodeUnknownFlow,
			fmt.Sprintf("flow %q is not registered; known flows: %s", flow, strings.Join(r.Flows(), ", ")))
		if err != nil {
			// Publishing failed: have the message delivered again.
			return nil, Outcome{Flow: flow, Run: run, RetryAfter: DefaultBusyRetry}, false
		}
		return nil, out, false
	}
	return f, Outcome{}, true
}

// run advances the transition's run until it waits or finishes, commits the
// checkpoint, and publishes.
func (r *Runner) run(ctx context.Context, t *txn) (Outcome, error) {
	if err := r.advance(ctx, t); err != nil {
		return Outcome{}, err
	}
	if t.cp.Status == Waiting {
		t.cp.Waited = true
	}
	if err := t.save(ctx); err != nil {
		if isConflict(err) {
			return Outcome{}, err
		}
		return Outcome{}, fmt.Errorf("engine: writing checkpoint of %s.%s: %w", t.cp.Flow, t.cp.Run, err)
	}
	if err := r.finish(ctx, t.cp, t.rev, false); err != nil {
		return Outcome{}, err
	}
	return Outcome{Flow: t.cp.Flow, Run: t.cp.Run, Status: t.cp.Status, Checkpoint: t.rev}, nil
}

// advance runs nodes from the checkpoint's current node until the run
// pauses, completes or fails.
func (r *Runner) advance(ctx context.Context, t *txn) error {
	cp := t.cp
	for runs := 0; ; runs++ {
		if runs >= r.cfg.MaxNodeRuns {
			t.failRun(fmt.Errorf("ran %d nodes without pausing or ending; check the flow's edges for a loop", runs))
			return nil
		}
		x := &exec{
			flow: t.f, cp: cp, now: t.now, steps: map[string]bool{},
			requestID: func() string { return "rq_" + randomID(16) },
		}
		x.persist = func(ctx context.Context) error {
			cp.Status = Running
			return t.save(ctx)
		}
		x.ensureStored = func(ctx context.Context) error {
			if t.stored {
				return nil
			}
			return x.persist(ctx)
		}
		nodeErr := r.call(ctx, t.f, x)
		if x.abort != nil {
			return x.abort
		}
		if x.paused != nil && x.err == nil {
			cp.Status, cp.Interrupt = Waiting, x.paused
			t.outcome(map[string]any{"node": cp.Node, "requestId": x.paused.RequestID, "kind": x.paused.Kind})
			t.emit("interrupted", interruptedData(x.paused))
			return nil
		}
		if x.err != nil {
			nodeErr = x.err
		}
		if nodeErr != nil && !errors.Is(nodeErr, ErrInterrupted) {
			t.failRun(nodeErr)
			return nil
		}
		next, err := r.route(t.f, x)
		if err != nil {
			t.failRun(err)
			return nil
		}
		cp.Resumes, cp.Steps, cp.Interrupt = nil, nil, nil
		if next == End {
			cp.Status = Completed
			t.outcome(map[string]any{"node": cp.Node})
			t.emit("completed", map[string]any{"state": cp.State})
			return nil
		}
		cp.Node = next
	}
}

func (t *txn) failRun(err error) {
	t.cp.Status, t.cp.Interrupt, t.cp.Error = Failed, nil, err.Error()
	t.outcome(map[string]any{"node": t.cp.Node, "error": err.Error()})
	t.emit("failed", map[string]any{"node": t.cp.Node, "error": err.Error()})
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
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("router after node %q panicked: %v", x.cp.Node, p)
		}
	}()
	return f.after(x)
}

func interruptedData(in *Interrupt) map[string]any {
	d := map[string]any{"node": in.Node, "requestId": in.RequestID, "kind": in.Kind}
	switch in.Kind {
	case KindQuestion:
		d["questions"] = in.Questions
		if in.Context != "" {
			d["context"] = in.Context
		}
	case KindChoice:
		d["question"], d["options"], d["multiple"] = in.Question, in.Options, in.Multiple
	}
	if in.ExpiresAt != nil {
		d["expiresAt"] = in.ExpiresAt
	}
	return d
}

// finish brings the pending index in line with the checkpoint and appends
// the audit records, both before any event of the outbox is published, then
// publishes the events with the checkpoint number and the resume token.
func (r *Runner) finish(ctx context.Context, cp *Checkpoint, rev uint64, recheck bool) error {
	var audits, evs []Message
	for _, m := range cp.Outbox {
		if m.Stream == AuditStream {
			audits = append(audits, m)
			continue
		}
		extra := map[string]any{"checkpoint": rev}
		if m.Kind == "interrupted" && cp.Interrupt != nil {
			extra["resumeToken"] = r.token(cp.Flow, cp.Run, cp.Interrupt.RequestID)
		}
		m.Data = addFields(m.Data, extra)
		evs = append(evs, m)
	}
	indexed := make(chan error, 1)
	go func() { indexed <- r.index(ctx, cp, rev) }()
	var auditErr error
	if len(audits) > 0 {
		auditErr = r.cfg.Publisher.Publish(ctx, audits, rev, recheck)
	}
	if err := <-indexed; err != nil {
		return err
	}
	if auditErr != nil {
		return fmt.Errorf("engine: appending audit records of %s.%s: %w", cp.Flow, cp.Run, auditErr)
	}
	if len(evs) == 0 {
		return nil
	}
	if err := r.cfg.Publisher.Publish(ctx, evs, rev, recheck); err != nil {
		return fmt.Errorf("engine: publishing events of %s.%s: %w", cp.Flow, cp.Run, err)
	}
	return nil
}

// index writes or removes the run's pending index entry.
func (r *Runner) index(ctx context.Context, cp *Checkpoint, rev uint64) error {
	switch {
	case cp.Status == Waiting && cp.Interrupt != nil:
		in := cp.Interrupt
		p := &Pending{
			Flow: cp.Flow, Run: cp.Run, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind,
			Checkpoint: rev, Fields: in.Fields, Question: in.Question, AskedAt: in.AskedAt, ExpiresAt: in.ExpiresAt,
		}
		if err := r.cfg.Store.PutPending(ctx, p); err != nil {
			return fmt.Errorf("engine: indexing pending run %s.%s: %w", cp.Flow, cp.Run, err)
		}
	case cp.Waited:
		if err := r.cfg.Store.DeletePending(ctx, cp.Flow, cp.Run); err != nil {
			return fmt.Errorf("engine: removing %s.%s from the pending index: %w", cp.Flow, cp.Run, err)
		}
	}
	return nil
}

// refuse publishes a refused event and returns the outcome; deadLetter, if
// set, asks for the inbound message to be dead-lettered too.
func (r *Runner) refuse(ctx context.Context, flow, run string, o Inbound, code, deadLetter, msg string) (Outcome, error) {
	return r.refuseRequest(ctx, flow, run, "", o, code, deadLetter, msg)
}

func (r *Runner) refuseRequest(ctx context.Context, flow, run, requestID string, o Inbound, code, deadLetter, msg string) (Outcome, error) {
	ref := &Refusal{Code: code, Message: msg, RequestID: requestID}
	out := Outcome{Flow: flow, Run: run, Refused: ref, DeadLetter: deadLetter}
	data := map[string]any{"flow": flow, "run": run, "code": code, "message": msg}
	if requestID != "" {
		data["requestId"] = requestID
	}
	if o.EventID != "" {
		data["eventId"] = o.EventID
	}
	b, _ := json.Marshal(data)
	id := "refused-" + randomID(16)
	if o.EventID != "" {
		sum := sha256.Sum256([]byte(flow + "\x00" + run + "\x00" + o.Source + "\x00" + o.EventID))
		id = "refused-" + hex.EncodeToString(sum[:12])
	}
	m := Message{Stream: EventStream, Kind: "refused", ID: id, Flow: flow, Run: run,
		Time: r.cfg.Now().UTC(), Data: b, Traceparent: o.Traceparent}
	if err := r.cfg.Publisher.Publish(ctx, []Message{m}, 0, false); err != nil {
		return Outcome{}, fmt.Errorf("engine: publishing refusal of %s.%s: %w", flow, run, err)
	}
	return out, nil
}

// Refuse publishes a refused event for a message that cannot be applied for
// a reason found before the runner saw it (a payload that does not parse).
func (r *Runner) Refuse(ctx context.Context, flow, run string, o Inbound, code, msg string) error {
	_, err := r.refuse(ctx, flow, run, o, code, "", msg)
	return err
}

// token is the resume token of an interrupt: an HMAC of its identity, so it
// is never stored.
func (r *Runner) token(flow, run, requestID string) string {
	m := hmac.New(sha256.New, r.cfg.Secret)
	m.Write([]byte("interlock/resume/v1\x00" + flow + "\x00" + run + "\x00" + requestID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// addFields adds fields to a JSON object that does not have them, by
// splicing them in before its closing brace.
func addFields(data json.RawMessage, extra map[string]any) json.RawMessage {
	var b []byte
	t := bytes.TrimSpace(data)
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		t = []byte("{}")
	}
	b = append(b, t[:len(t)-1]...)
	first := len(bytes.TrimSpace(t[1:len(t)-1])) == 0
	for _, k := range sortedKeys(extra) {
		if !first {
			b = append(b, ',')
		}
		first = false
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(extra[k])
		b = append(b, kb...)
		b = append(b, ':')
		b = append(b, vb...)
	}
	return append(b, '}')
}

func appendApplied(applied []string, key string) []string {
	if key == "" {
		return applied
	}
	applied = append(applied, key)
	if len(applied) > maxApplied {
		applied = applied[len(applied)-maxApplied:]
	}
	return applied
}

func isConflict(err error) bool {
	var c *ConflictError
	return errors.As(err, &c) || errors.Is(err, ErrExists)
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(b32.EncodeToString(b))
}

// deriveRunID names a run started without one, from its event, so that a
// redelivered start names the same run.
func deriveRunID(source, eventID string) string {
	if eventID == "" {
		return "r-" + randomID(10)
	}
	sum := sha256.Sum256([]byte(source + "\x00" + eventID))
	return "r-" + strings.ToLower(b32.EncodeToString(sum[:10]))
}
