package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/internal/jsonw"
	"github.com/interlockhq/interlock/protocol"
)

// Status is where a run stands.
type Status = protocol.Status

// Run statuses.
const (
	// Running: a transition is in flight (a step's result was recorded
	// mid-node). At rest a run is waiting or finished.
	Running   = protocol.StatusRunning
	Waiting   = protocol.StatusWaiting
	Completed = protocol.StatusCompleted
	Failed    = protocol.StatusFailed
	Cancelled = protocol.StatusCancelled
	Expired   = protocol.StatusExpired
)

// Checkpoint is the durable document of one run: everything a resume needs.
// A restarted process rebuilds the rest (validators, handlers) by running
// the flow's nodes again.
type Checkpoint struct {
	Flow      string     `json:"flow"`
	Run       string     `json:"run"`
	Status    Status     `json:"status"`
	Node      string     `json:"node,omitempty"`
	State     Doc        `json:"state"`
	Interrupt *Interrupt `json:"interrupt,omitempty"`
	Error     string     `json:"error,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`

	// Origin is echoed in every event of the run.
	Origin json.RawMessage `json:"origin,omitempty"`
	// Traceparent is carried into every event the run publishes.
	Traceparent string `json:"traceparent,omitempty"`
	// StartedBy names who started the run: the caller a service of the
	// deployment vouched for, else the start's by, else its source. With
	// a quorum's separation of duties, they may not vote on its approvals.
	StartedBy string `json:"startedBy,omitempty"`
	// FlowVersion is the version of the flow ([Flow.Version]) of the
	// worker that wrote the checkpoint.
	FlowVersion string `json:"flowVersion,omitempty"`

	// Resumes are the resolved interrupts of the current node, by index,
	// returned again when the node re-runs.
	Resumes []json.RawMessage `json:"resumes,omitempty"`
	// Steps are the recorded results of the current node's steps.
	Steps map[string]json.RawMessage `json:"steps,omitempty"`
	// Locals are the current node's local values ([SetLocal]): they
	// survive the node's re-runs and are dropped when it completes.
	Locals map[string]json.RawMessage `json:"locals,omitempty"`
	// GatePassed names the current node when its before-gate was
	// approved in this visit.
	GatePassed string `json:"gatePassed,omitempty"`

	// Decisions are the run's latest approval decisions, oldest first.
	Decisions []Decision `json:"decisions,omitempty"`
	// Rejection is the run's latest rejected approval.
	Rejection *Decision `json:"rejection,omitempty"`
	// Expired says which interrupt's deadline ended the run.
	Expired *Expiry `json:"expired,omitempty"`
	// Audit is the head of the run's audit chain.
	Audit *protocol.AuditHead `json:"audit,omitempty"`

	// Cause is the inbound message this checkpoint's transition came from.
	Cause *Cause `json:"cause,omitempty"`
	// Applied are the idempotency keys of recent inbound messages.
	Applied []string `json:"applied,omitempty"`
	// UID makes event ids unique across runs that reuse a run id.
	UID string `json:"uid"`
	// Seq numbers the run's events.
	Seq uint64 `json:"seq"`
	// Outbox holds what the transition publishes, so that a redelivered
	// message publishes it again, with the same ids, instead of redoing work.
	Outbox []Message `json:"outbox,omitempty"`
	// Waited records that the run has been in the pending index.
	Waited bool `json:"waited,omitempty"`

	// outboxDoc is the outbox as stored, when the checkpoint was decoded
	// from a document with its outbox left to be decoded when needed
	// ([Checkpoint.loadOutbox]); Outbox is then nil.
	outboxDoc json.RawMessage
}

// decodeCheckpoint decodes a checkpoint document, all but its outbox: a
// command on a run needs the outbox of the last transition only when it
// is that transition's message delivered again. The outbox, most of the
// document, is cut out before the rest is decoded, so that it is not
// read at all; it is checked when it is decoded.
func decodeCheckpoint(doc []byte) (*Checkpoint, error) {
	cp := &Checkpoint{}
	lazy := struct {
		*Checkpoint
		Outbox json.RawMessage `json:"outbox,omitempty"`
	}{Checkpoint: cp}
	rest, outbox := cutOutbox(doc)
	if err := json.Unmarshal(rest, &lazy); err != nil {
		return nil, err
	}
	if outbox == nil {
		outbox = lazy.Outbox
	}
	if len(outbox) > 0 && string(outbox) != "null" {
		cp.outboxDoc = outbox
	}
	return cp, nil
}

// cutOutbox returns doc with the value of its top-level "outbox" member
// replaced by null, and that value. When doc does not have exactly one
// member so spelled and no other that encoding/json would take for it
// (its names match without regard to case), or is not an object that can
// be walked, it returns doc as it is and nil.
func cutOutbox(doc []byte) (rest, outbox []byte) {
	var start, end int
	found := 0
	i := jsonw.SkipSpace(doc, 0)
	if i == len(doc) || doc[i] != '{' {
		return doc, nil
	}
	i = jsonw.SkipSpace(doc, i+1)
	for i < len(doc) && doc[i] != '}' {
		ks := i
		ke, ok := skipLenient(doc, i)
		if !ok || doc[ks] != '"' {
			return doc, nil
		}
		key := doc[ks+1 : ke-1]
		i = jsonw.SkipSpace(doc, ke)
		if i == len(doc) || doc[i] != ':' {
			return doc, nil
		}
		vs := jsonw.SkipSpace(doc, i+1)
		ve, ok := skipLenient(doc, vs)
		if !ok || ve == vs {
			return doc, nil
		}
		switch {
		case string(key) == "outbox":
			start, end = vs, ve
			found++
		case bytes.EqualFold(key, []byte("outbox")) || bytes.IndexByte(key, '\\') >= 0:
			return doc, nil
		}
		i = jsonw.SkipSpace(doc, ve)
		if i < len(doc) && doc[i] == ',' {
			i = jsonw.SkipSpace(doc, i+1)
		} else if i == len(doc) || doc[i] != '}' {
			return doc, nil
		}
	}
	if found != 1 {
		return doc, nil
	}
	rest = make([]byte, 0, len(doc)-(end-start)+len("null"))
	rest = append(append(append(rest, doc[:start]...), "null"...), doc[end:]...)
	return rest, bytes.Clone(doc[start:end])
}

// skipLenient returns the index just past the JSON value at i, reading
// only as much as it takes to find its end (strings and nesting), and
// false if doc ends first.
func skipLenient(doc []byte, i int) (int, bool) {
	if i >= len(doc) {
		return i, false
	}
	depth := 0
	for ; i < len(doc); i++ {
		switch doc[i] {
		case '"':
			for i++; i < len(doc) && doc[i] != '"'; i++ {
				if doc[i] == '\\' {
					i++
				}
			}
			if i >= len(doc) {
				return i, false
			}
		case '{', '[':
			depth++
			continue
		case '}', ']':
			depth--
		default:
			if depth > 0 {
				continue
			}
			// A number or a literal: up to what ends it.
			for i < len(doc) && !bytes.ContainsRune([]byte(",}] \t\n\r"), rune(doc[i])) {
				i++
			}
			return i, true
		}
		if depth <= 0 {
			return i + 1, depth == 0
		}
	}
	return i, false
}

// loadOutbox decodes the outbox decodeCheckpoint left encoded, if any.
func (cp *Checkpoint) loadOutbox() error {
	if cp.outboxDoc == nil {
		return nil
	}
	var out []Message
	if err := json.Unmarshal(cp.outboxDoc, &out); err != nil {
		return fmt.Errorf("engine: outbox of %s.%s: %w", cp.Flow, cp.Run, err)
	}
	cp.Outbox, cp.outboxDoc = out, nil
	return nil
}

// Cause identifies an inbound message.
type Cause struct {
	// ID is the CloudEvent id.
	ID string `json:"id"`
	// Key is the idempotency key (the event id when none was given).
	Key string `json:"key"`
	// Seq is the message's stream sequence, 0 when not from a stream.
	Seq uint64 `json:"seq,omitempty"`
	// Due is set when the message came from the schedule stream (a
	// deadline), not the inbound stream.
	Due bool `json:"due,omitempty"`
}

// Stream names where a [Message] is published.
type Stream string

// Streams a message goes to.
const (
	EventStream Stream = "events"
	AuditStream Stream = "audit"
	// ScheduleStream messages are deadlines: the server publishes each as
	// an expire command at its time.
	ScheduleStream Stream = "schedule"
	// FinishedStream messages are entries of the finished-runs index: a
	// [FinishedIndex] store writes them, with the pending index.
	FinishedStream Stream = "finished"
)

// Message is an outbound event or audit record.
type Message struct {
	Stream Stream `json:"stream"`
	// Kind is the event kind, the last token of its subject ("interrupted").
	// For audit records it is the action.
	Kind string    `json:"kind"`
	ID   string    `json:"id"`
	Flow string    `json:"flow"`
	Run  string    `json:"run"`
	Time time.Time `json:"time"`
	// Data is the event's typed data. The checkpoint number (and, on an
	// interrupted event, the resume token) is stamped on it when it is
	// published, after the checkpoint is written.
	Data        EventData `json:"data"`
	Traceparent string    `json:"traceparent,omitempty"`
	// Cause is the id of the CloudEvent whose transition made the event
	// (the checkpoint's [Cause] ID), or of the command a refusal refuses:
	// the causation extension of what is published. It is not stored in
	// the outbox: the checkpoint names its cause, so a redelivered
	// transition republishes the same.
	Cause string `json:"-"`
}

// Store keeps checkpoints and the pending index. Every write is a
// compare-and-set: Create fails with [ErrExists] if the run exists, Update
// with a [*ConflictError] if the run moved past rev.
type Store interface {
	Load(ctx context.Context, flow, run string) (*Checkpoint, uint64, error)
	Create(ctx context.Context, cp *Checkpoint) (uint64, error)
	Update(ctx context.Context, cp *Checkpoint, rev uint64) (uint64, error)
	// PutPending writes the run's pending index entry for checkpoint
	// p.Checkpoint, and DeletePending removes it at checkpoint rev. A
	// transition's index write is repeated until it succeeds, and a
	// write sent once may still be in flight (held up by a partition)
	// when its repeat lands: a store must take the two as one, so that
	// the late copy does not undo the run's later writes (kv.Store
	// deduplicates them by run and checkpoint).
	PutPending(ctx context.Context, p *protocol.Pending) error
	DeletePending(ctx context.Context, flow, run string, rev uint64) error
}

// DocLoader is implemented by a [Store] that can return a checkpoint as
// the JSON document it keeps (json.Marshal of the [Checkpoint]), and
// [ErrNotFound] as Load does. The runner then decodes the document itself,
// and the checkpoint's outbox only when a command needs it, which saves
// most of the decoding: a command on a run rarely does (only the message
// of the run's last transition, delivered again).
type DocLoader interface {
	LoadDoc(ctx context.Context, flow, run string) (doc []byte, rev uint64, err error)
}

// Publisher publishes the outbound messages of a transition (events, audit
// records, deadlines). The engine relies on these promises, which the
// conformance suite engine/publishertest checks:
//
//   - Publish returns nil only once every message of msgs is stored.
//   - The messages bound for one stream are stored in the order of msgs,
//     each only after those before it, whatever fails meanwhile.
//   - Audit records and deadlines ([AuditStream], [ScheduleStream]) are
//     stored before any event ([EventStream]) of the same call.
//   - A message's ID is its deduplication id: a message whose ID is
//     already stored is dropped (within the deduplication window, on
//     JetStream its streams' duplicate window), and messages with
//     different IDs are each stored, whatever they hold (a deadline
//     replaces an earlier one of the same request).
//   - With recheck (a redelivered transition whose first publish may have
//     gone through), a message already stored is not stored again, even
//     past the deduplication window, and every other one is published.
//   - Once ctx is done, Publish returns promptly: with an error, unless
//     it stored every message.
//   - Publish may be called from several goroutines at once.
type Publisher interface {
	Publish(ctx context.Context, msgs []Message, recheck bool) error
}

// Queue tells whether the message that caused a transition (its Seq, in
// the inbound stream, or in the schedule stream when Due) is still
// unacknowledged, so that a run is not advanced past a transition whose
// publishing has not finished.
type Queue interface {
	Unacked(ctx context.Context, c Cause) (bool, error)
}

// Errors of a [Store].
var (
	// ErrNotFound: no checkpoint for that run.
	ErrNotFound = errors.New("engine: run not found")
	// ErrExists: a checkpoint for that run already exists.
	ErrExists = errors.New("engine: run already exists")
)

// TooLargeError is a checkpoint the store cannot hold: its document is
// larger than one message may be (the NATS server's max_payload).
type TooLargeError struct {
	Flow, Run   string
	Size, Limit int
}

// Error implements error.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("engine: checkpoint of %s.%s is %d bytes, more than the %d bytes the store takes in one write (the NATS server's max_payload)", e.Flow, e.Run, e.Size, e.Limit)
}

// ConflictError is a compare-and-set that lost: the run moved on.
type ConflictError struct {
	Flow, Run string
	Expected  uint64
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("engine: run %s.%s moved past checkpoint %d", e.Flow, e.Run, e.Expected)
}
