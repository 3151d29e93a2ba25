package engine

import (
	"encoding/json"
	"fmt"

	"github.com/interlockhq/interlock/protocol"
)

// The data of the events and audit records the engine writes are the
// protocol's types ([protocol.Interrupted], [protocol.AuditRecord], ...):
// the engine builds them, and readers decode them, from one definition.

// EventData is the typed data of an outbound event, audit record or
// deadline: a pointer to one of the protocol's event types, a
// [*protocol.AuditRecord], a [*protocol.Expire] or a [*protocol.Finished].
type EventData = any

// auditVerdict is the audit action of a verdict.
func auditVerdict(v Verdict) string {
	switch v {
	case VerdictEdit:
		return protocol.ActionEdited
	case VerdictReject:
		return protocol.ActionRejected
	case VerdictRespond:
		return protocol.ActionResponded
	}
	return protocol.ActionApproved
}

// stamp returns a copy of d carrying the checkpoint number the event comes
// from and, on an interrupted event, the resume token.
func stamp(d EventData, rev uint64, token string) EventData {
	switch e := d.(type) {
	case *protocol.Started:
		c := *e
		c.Checkpoint = rev
		return &c
	case *protocol.Interrupted:
		c := *e
		c.Checkpoint, c.ResumeToken = rev, token
		return &c
	case *protocol.Resumed:
		c := *e
		c.Checkpoint = rev
		return &c
	case *protocol.Completed:
		c := *e
		c.Checkpoint = rev
		return &c
	case *protocol.Failed:
		c := *e
		c.Checkpoint = rev
		return &c
	case *protocol.Cancelled:
		c := *e
		c.Checkpoint = rev
		return &c
	case *protocol.Expired:
		c := *e
		c.Checkpoint = rev
		return &c
	case *protocol.NodeEvent:
		c := *e
		c.Checkpoint = rev
		return &c
	case *protocol.Finished:
		c := *e
		c.Checkpoint = rev
		return &c
	case *protocol.Assigned:
		c := *e
		c.Checkpoint = rev
		return &c
	case *protocol.Voted:
		c := *e
		c.Checkpoint = rev
		return &c
	case *protocol.Reminded:
		c := *e
		c.Checkpoint = rev
		return &c
	}
	return d
}

// newEventData returns an empty value of the data type of an event kind
// (or, on the audit stream, of an audit record).
func newEventData(stream Stream, kind string) (EventData, error) {
	switch stream {
	case AuditStream:
		return &protocol.AuditRecord{}, nil
	case ScheduleStream:
		if kind == protocol.VerbRemind {
			return &protocol.Remind{}, nil
		}
		return &protocol.Expire{}, nil
	case FinishedStream:
		return &protocol.Finished{}, nil
	}
	switch kind {
	case protocol.EventStarted:
		return &protocol.Started{}, nil
	case protocol.EventInterrupted:
		return &protocol.Interrupted{}, nil
	case protocol.EventResumed:
		return &protocol.Resumed{}, nil
	case protocol.EventCompleted:
		return &protocol.Completed{}, nil
	case protocol.EventFailed:
		return &protocol.Failed{}, nil
	case protocol.EventCancelled:
		return &protocol.Cancelled{}, nil
	case protocol.EventRefused:
		return &protocol.Refused{}, nil
	case protocol.EventExpired:
		return &protocol.Expired{}, nil
	case protocol.EventDecided:
		return &protocol.Decided{}, nil
	case protocol.EventAssigned:
		return &protocol.Assigned{}, nil
	case protocol.EventVoted:
		return &protocol.Voted{}, nil
	case protocol.EventReminded:
		return &protocol.Reminded{}, nil
	case protocol.EventAnswered:
		return &protocol.Answered{}, nil
	case protocol.EventConsumed:
		return &protocol.Consumed{}, nil
	}
	if checkNodeKind(kind) == nil {
		return &protocol.NodeEvent{}, nil
	}
	return nil, fmt.Errorf("engine: no data type for %s event %q", stream, kind)
}

// UnmarshalJSON reads a message of a checkpoint's outbox, decoding its data
// into the type of its kind.
func (m *Message) UnmarshalJSON(b []byte) error {
	type plain Message
	var raw struct {
		plain
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Message(raw.plain)
	d, err := newEventData(m.Stream, m.Kind)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw.Data, d); err != nil {
		return fmt.Errorf("engine: data of %s message %s: %w", m.Kind, m.ID, err)
	}
	m.Data = d
	return nil
}
