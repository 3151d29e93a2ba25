package engine

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/protocol"
)

// Refusal codes of a refused event.
const (
	CodeTokenMismatch   = protocol.CodeTokenMismatch
	CodeStaleCheckpoint = protocol.CodeStaleCheckpoint
	CodeNotWaiting      = protocol.CodeNotWaiting
	CodeUnknownRun      = protocol.CodeUnknownRun
	CodeExpired         = protocol.CodeExpired
	CodeInvalidAnswer   = protocol.CodeInvalidAnswer
	CodeForbidden       = protocol.CodeForbidden
	CodeInvalidPayload  = protocol.CodeInvalidPayload
	CodeUnknownFlow     = protocol.CodeUnknownFlow
	CodeRunExists       = protocol.CodeRunExists
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
	// Secret keys the resume tokens (an HMAC), and the audit signing key
	// is derived from it (see [AuditKeyInfo]). Required, at least 32
	// bytes; every worker of one deployment must share it.
	Secret []byte
	// Source is the CloudEvents source of outbound events and the actor of
	// audit records. Defaults to DefaultSource.
	Source string
	// MaxNodeRuns bounds the nodes one transition may run, to stop a loop
	// in a flow's edges. Defaults to DefaultMaxNodeRuns.
	MaxNodeRuns int
	// Now returns the time. Defaults to time.Now.
	Now func() time.Time
	// Edits checks an approver's edit of a gated tool call against the
	// gate rule that holds it. Without it, edits of gate runs are refused
	// (fail closed): approve or reject them as asked.
	Edits EditChecker
	// Authority decides what callers may do (see package authority).
	// Defaults to one where callers are not identified: a name a command
	// gives is taken at its word, as on a single machine with no
	// directory of people.
	Authority *authority.Authority
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

// Runner runs flows: it applies start, resume, cancel and reannounce
// commands to runs, one compare-and-set transition at a time, and publishes
// what follows. It is safe for concurrent use; two runners sharing a store
// never both advance one run.
type Runner struct {
	cfg   Config
	flows map[string]*Flow
	// docs is the store, when it implements DocLoader.
	docs DocLoader
	// finished is the store, when it implements FinishedIndex.
	finished FinishedIndex
	// signer signs the audit records.
	signer *auditSigner
}

// NewRunner returns a runner for cfg.
func NewRunner(cfg Config) (*Runner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	signer, err := newAuditSigner(cfg.Secret)
	if err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, flows: map[string]*Flow{}, signer: signer}
	r.docs, _ = cfg.Store.(DocLoader)
	r.finished, _ = cfg.Store.(FinishedIndex)
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

// Version is the version of flow this runner runs, and whether it runs
// it.
func (r *Runner) Version(flow string) (string, bool) {
	f, ok := r.flows[flow]
	if !ok {
		return "", false
	}
	return f.version, true
}

// Held are the versions of each flow whose held commands this runner's
// workers take ([wire.Names.Held]): its own, and those it migrates from
// by name ([AnyVersion] takes no queue of its own: a flow that takes every
// version has no command moved away from it).
func (r *Runner) Held() map[string][]string {
	out := map[string][]string{}
	for name, f := range r.flows {
		vs := []string{f.version}
		for _, v := range f.Migrates() {
			if v != AnyVersion {
				vs = append(vs, v)
			}
		}
		out[name] = vs
	}
	return out
}

// startable lists the flows a start command may name: all but the
// built-in gate and ask flows, whose runs start by requests.
func (r *Runner) startable() []string {
	var out []string
	for _, f := range r.Flows() {
		if f != GateFlowName && f != AskFlowName {
			out = append(out, f)
		}
	}
	return out
}

// AuditKey returns the public key the runner signs audit records with,
// derived from Config.Secret: the same on every worker of a deployment.
func (r *Runner) AuditKey() AuditPublicKey { return r.signer.pub }

// Outcome is what became of a command.
type Outcome struct {
	Flow, Run  string
	Status     Status
	Checkpoint uint64
	// Node is the node the run is at (or ended at).
	Node string
	// Events are the run events the command published, in order.
	Events []Message
	// CreatedAt is when the run started.
	CreatedAt time.Time
	// AskedAt is when the interrupt the command answered was asked; zero
	// when it answered none.
	AskedAt time.Time
	// Result is how the run ended, when the command finished it
	// (approved, rejected, expired...; see [protocol.Outcome]).
	Result protocol.Outcome
	// Action is what the approval the command answered proposed (its
	// [Approval].Action), or for a command refused, the approval the run
	// waited on then; empty when it answered no approval.
	Action string
	// Quorum is set when the approval the command answered takes a quorum
	// ([Approval].Quorum): an approve or edit that decided it was the
	// vote that completed the quorum.
	Quorum bool
	// Refused is set when the command was refused; the refused event has
	// been published.
	Refused *Refusal
	// RunTraceparent is the traceparent the run carried when the command
	// came (its checkpoint's as loaded); empty for a new run or a run
	// without one.
	RunTraceparent string
	// DeadLetter, when set, is the reason to copy the inbound message to
	// the dead-letter stream.
	DeadLetter string
	// Duplicate is set when the command repeats one already applied.
	Duplicate bool
	// RetryAfter is set when the run is busy: deliver the command again later.
	RetryAfter time.Duration
	// Elsewhere is set when the command is for a run of a version of its
	// flow this worker does not take ([Flow.Takes]): the version, whose
	// workers the command belongs to. Nothing was written.
	Elsewhere string
}

// Refusal is a refused command.
type Refusal struct {
	Code      protocol.Code `json:"code"`
	Message   string        `json:"message"`
	RequestID string        `json:"requestId,omitempty"`
}

// Inbound says which message a command came from and who sent it.
type Inbound struct {
	// EventID is the CloudEvent id.
	EventID string
	// Source is the CloudEvent source, named as actor in the audit stream.
	Source string
	// Traceparent is the command's W3C traceparent (its CloudEvent's
	// traceparent extension). A start's becomes the run's; a later
	// command's, when it has one, replaces it.
	Traceparent string
	// Span, if set, is the W3C traceparent of the span tracing the
	// command: the events, refusals and deadlines the command causes carry
	// it. Without it they carry the run's traceparent (a refusal, the
	// command's).
	Span string
	// Seq is the inbound message's stream sequence, 0 if none.
	Seq uint64
	// Due is set when the message is a deadline the server published from
	// a schedule (Seq is then its sequence in the schedule stream), not a
	// client's command.
	Due bool
	// FirstDelivery is set when the message has certainly not been handled
	// before (JetStream's first delivery of it). A start then skips reading
	// the checkpoint: creating it fails if the run exists.
	FirstDelivery bool
	// Authority is who the transport says sent the command.
	Authority Authority
	// trusted is set once the command's vouch verified.
	trusted bool
}
