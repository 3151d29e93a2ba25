package slackbridge

import (
	"slices"

	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
)

// record is what the bridge keeps of a run's message, under recordKey.
type record struct {
	Flow      string `json:"flow"`
	Run       string `json:"run"`
	RequestID string `json:"requestId"`
	Kind      string `json:"kind"`
	Role      string `json:"role,omitempty"`
	Channel   string `json:"channel"`
	TS        string `json:"ts"`
	Thread    string `json:"thread,omitempty"`
	// In is the interrupt the message shows (without its token), as the
	// assigned and voted events since have changed it; Conv is the
	// conversation it shows, for a gate run. Both show it again when it
	// changes or is closed.
	In   *protocol.Interrupted `json:"in,omitempty"`
	Conv *talk                 `json:"conv,omitempty"`
	// Delegated is the approval's last delegation, which the message
	// shows until it is settled.
	Delegated *delegation `json:"delegated,omitempty"`
	// Copies are the card posted again in the channel of a role the
	// approval was delegated to; each is updated with the message.
	Copies []posted `json:"copies,omitempty"`
	// Body is the message's text of a record kept by an earlier version,
	// without In: it is shown again when the message is closed.
	Body string `json:"body,omitempty"`
	// Reminded is the id of the last reminded event posted in the
	// message's thread, so that one delivered again is not.
	Reminded string `json:"reminded,omitempty"`
	Closed   bool   `json:"closed,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
}

// posted is a message the bridge posted: its channel and ts.
type posted struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// messages are the record's message and its copies.
func (r record) messages() []posted {
	return append([]posted{{Channel: r.Channel, TS: r.TS}}, r.Copies...)
}

// postedIn reports whether the record has a message in channel.
func (r record) postedIn(channel string) bool {
	return slices.ContainsFunc(r.messages(), func(p posted) bool { return p.Channel == channel })
}

// card is what the record's message shows beside its interrupt.
func (r record) card() card { return card{conv: r.Conv, delegated: r.Delegated} }

func recordKey(flow, run string) string { return notify.RecordKey(flow, run) }

// store keeps records in the bridge's bucket, each write a compare-and-set
// on the revision read.
type store = notify.Records[record]
