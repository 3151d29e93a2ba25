package wire

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/interlockhq/interlock/protocol"
)

// DefaultPrefix is the prefix of every stream, subject and bucket name.
const DefaultPrefix = "interlock"

// Names are the streams, subjects and buckets of one deployment. One prefix
// changes them all, so two deployments can share a NATS account.
type Names struct {
	// Prefix is lower case letters, digits, '_' and '-'. Defaults to DefaultPrefix.
	Prefix string
}

// NewNames returns the names for prefix ("" for DefaultPrefix), or an error
// saying why the prefix cannot name streams and subjects.
func NewNames(prefix string) (Names, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if len(prefix) > 32 {
		return Names{}, fmt.Errorf("wire: prefix %q is longer than 32 characters", prefix)
	}
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return Names{}, fmt.Errorf("wire: prefix %q has %q: use lower case letters, digits, _ and -", prefix, c)
		}
	}
	return Names{Prefix: prefix}, nil
}

func (n Names) upper() string { return strings.ToUpper(strings.ReplaceAll(n.Prefix, "-", "_")) }

// InStream is the inbound work-queue stream (INTERLOCK_IN).
func (n Names) InStream() string { return n.upper() + "_IN" }

// EventStream is the outbound events stream (INTERLOCK_EVENTS).
func (n Names) EventStream() string { return n.upper() + "_EVENTS" }

// AuditStream is the append-only audit stream (INTERLOCK_AUDIT).
func (n Names) AuditStream() string { return n.upper() + "_AUDIT" }

// DeadLetterStream keeps inbound messages that could not be accepted (INTERLOCK_DLQ).
func (n Names) DeadLetterStream() string { return n.upper() + "_DLQ" }

// RunsBucket holds checkpoints (interlock_runs).
func (n Names) RunsBucket() string { return n.Prefix + "_runs" }

// PendingBucket is the pending index (interlock_pending).
func (n Names) PendingBucket() string { return n.Prefix + "_pending" }

// FinishedStatuses are the statuses of a finished run
// ([protocol.FinishedStatuses]), each with a stream of its own in the
// finished-runs index: completed, failed, cancelled and expired.
var FinishedStatuses = finishedStatuses()

func finishedStatuses() []string {
	var out []string
	for _, s := range protocol.FinishedStatuses() {
		out = append(out, string(s))
	}
	return out
}

// FinishedStream is the stream of the finished-runs index that holds the
// runs that finished with status (INTERLOCK_FINISHED_COMPLETED for
// "completed"): one entry per run, appended when it finished and removed
// with its checkpoint. One stream per status, so that listing the runs of
// one status never steps over runs of another.
func (n Names) FinishedStream(status string) string {
	return n.upper() + "_FINISHED_" + strings.ToUpper(status)
}

// Finished is the subject of the finished-runs index entries of a flow's
// runs that finished with status: <prefix>.finished.<status>.<flow>, in
// [Names.FinishedStream](status).
func (n Names) Finished(status, flow string) string {
	return n.Prefix + ".finished." + status + "." + flow
}

// ConfigBucket holds live configuration, such as the gate's rules.
func (n Names) ConfigBucket() string { return n.Prefix + "_config" }

// WorkersBucket holds an entry for each running worker process (its
// flows and their versions), written again every few seconds and gone a
// little after the process stops.
func (n Names) WorkersBucket() string { return n.Prefix + "_workers" }

// ScheduleStream holds the deadlines of interrupts (INTERLOCK_SCHEDULES):
// JetStream message schedules, and the commands the server publishes from
// them when they are due. Only Interlock's workers publish to it.
func (n Names) ScheduleStream() string { return n.upper() + "_SCHEDULES" }

// Schedule is the subject of the deadline of one request of one run: a
// JetStream message schedule in the schedule stream, published by the
// server at its time to [Names.Due](flow, "expire").
func (n Names) Schedule(flow, run, requestID string) string {
	return n.Prefix + ".schedule." + flow + "." + run + "." + requestID
}

// Reminder is the subject of reminder n of one request of one run: a
// JetStream message schedule the server publishes at its time to
// [Names.Due](flow, "remind").
func (n Names) Reminder(flow, run, requestID string, nth int) string {
	return n.Schedule(flow, run, requestID) + ".r" + strconv.Itoa(nth)
}

// Due is the subject the server publishes a due schedule to:
// <prefix>.due.<flow>.<verb>, in the schedule stream, which only the
// server's schedules reach.
func (n Names) Due(flow, verb string) string { return n.Prefix + ".due." + flow + "." + verb }

// ParseDue splits a due subject into flow and verb; ok is false when the
// subject is not <prefix>.due.<flow>.<verb>.
func (n Names) ParseDue(subject string) (flow, verb string, ok bool) {
	rest, found := strings.CutPrefix(subject, n.Prefix+".due.")
	if !found {
		return "", "", false
	}
	flow, verb, found = strings.Cut(rest, ".")
	if !found || flow == "" || verb == "" || strings.Contains(verb, ".") {
		return "", "", false
	}
	return flow, verb, true
}

// KeysBucket holds the generated resume-token secret when none is configured.
func (n Names) KeysBucket() string { return n.Prefix + "_keys" }

// LinksBucket records the signed links (decision links, callback URLs)
// used: one key per link id, kept until the link expires, so that each
// link settles its request once.
func (n Names) LinksBucket() string { return n.Prefix + "_links" }

// SentBucket records the deliveries the channels (e-mail, webhooks,
// Teams) made, so that none is made twice.
func (n Names) SentBucket() string { return n.Prefix + "_sent" }

// A2APushBucket holds the push-notification configurations A2A clients
// set on their tasks (the URL Interlock POSTs the task to once it
// settles, and the client's token for it): the workers' only, never a
// client's to read.
func (n Names) A2APushBucket() string { return n.Prefix + "_a2a_push" }

// A2AFollowBucket holds the tasks of remote A2A agents Interlock
// follows, to ask people the agents' questions.
func (n Names) A2AFollowBucket() string { return n.Prefix + "_a2a_follow" }

// WebhookDeliveriesBucket records each outbound webhook delivery: its
// status, attempts and last error.
func (n Names) WebhookDeliveriesBucket() string { return n.Prefix + "_webhook_deliveries" }

// RetryStream holds the channels' deliveries that wait for another
// attempt (INTERLOCK_RETRIES): one JetStream message schedule per event
// and channel, on [Names.RetryWait], which the server publishes when it
// is due to [Names.RetryDue], where the channel reads it again. Only
// Interlock's workers publish to it.
func (n Names) RetryStream() string { return n.upper() + "_RETRIES" }

// Retries are the subjects of the retry stream: <prefix>.retry.>.
func (n Names) Retries() string { return n.Prefix + ".retry.>" }

// RetriesOf are the subjects of one channel's attempts in the retry
// stream, waiting and due: <prefix>.retry.<consumer>.>.
func (n Names) RetriesOf(consumer string) string { return n.Prefix + ".retry." + consumer + ".>" }

// RetryWait is the subject of the schedule of the next attempt of one
// event (key, a token of the event's id) on the channel whose durable
// consumer is consumer: <prefix>.retry.<consumer>.wait.<key>.
func (n Names) RetryWait(consumer, key string) string {
	return n.Prefix + ".retry." + consumer + ".wait." + key
}

// RetryDue is where the server publishes a channel's attempts when they
// are due: <prefix>.retry.<consumer>.due.
func (n Names) RetryDue(consumer string) string { return n.Prefix + ".retry." + consumer + ".due" }

// Consumer is the durable consumer of the inbound stream the workers share.
func (n Names) Consumer() string { return n.Prefix + "-workers" }

// DueConsumer is the durable consumer of the schedule stream's due
// commands the workers share.
func (n Names) DueConsumer() string { return n.Prefix + "-due" }

// In is the inbound subject for a flow and verb: interlock.in.<flow>.<verb>.
func (n Names) In(flow, verb string) string { return n.Prefix + ".in." + flow + "." + verb }

// GateRequest is the subject of tool-call requests: interlock.in.gate.request.
func (n Names) GateRequest() string { return n.Prefix + ".in.gate.request" }

// GateConsume is the subject on which an agent takes an approved call's
// approval: interlock.in.gate.consume.
func (n Names) GateConsume() string { return n.Prefix + ".in.gate.consume" }

// AskRequest is the subject of asks: <prefix>.in.ask.request.
func (n Names) AskRequest() string { return n.Prefix + ".in.ask.request" }

// Event is the subject of a run's event: interlock.ev.<flow>.<run>.<kind>.
func (n Names) Event(flow, run, kind string) string {
	return n.Prefix + ".ev." + flow + "." + run + "." + kind
}

// StoredEvents is the subject filter on which the events stream
// republishes each event once it has stored it (interlock.stored.ev.>):
// the event's own subject after "<prefix>.stored.", with the stream's
// Nats-Stream, Nats-Subject and Nats-Sequence headers. Clients subscribe
// to it; none may publish to it.
func (n Names) StoredEvents() string { return n.Prefix + ".stored.ev.>" }

// Audit is the subject of a run's audit records: interlock.audit.<flow>.<run>.
func (n Names) Audit(flow, run string) string { return n.Prefix + ".audit." + flow + "." + run }

// DeadLetter is the subject of a dead letter: interlock.dlq.<reason>.
func (n Names) DeadLetter(reason string) string { return n.Prefix + ".dlq." + reason }

// ParseIn splits an inbound subject into flow and verb; ok is false when the
// subject is not interlock.in.<flow>.<verb>.
func (n Names) ParseIn(subject string) (flow, verb string, ok bool) {
	flow, verb, role, ok := n.ParseCommand(subject)
	if role != "" {
		return "", "", false
	}
	return flow, verb, ok
}

// ResumeAs is the subject of an approval decision taken with an approver
// role: <prefix>.in.<flow>.resume.<role>. NATS permissions on these
// subjects decide who may approve what.
func (n Names) ResumeAs(flow, role string) string { return n.In(flow, "resume") + "." + role }

// ParseCommand splits an inbound subject into its flow, verb and, for a
// resume sent with an approver role (<prefix>.in.<flow>.resume.<role>),
// the role.
func (n Names) ParseCommand(subject string) (flow, verb, role string, ok bool) {
	rest, found := strings.CutPrefix(subject, n.Prefix+".in.")
	if !found {
		return "", "", "", false
	}
	parts := strings.Split(rest, ".")
	switch {
	case len(parts) == 2:
		return parts[0], parts[1], "", true
	case len(parts) == 3 && parts[1] == "resume" && parts[2] != "":
		return parts[0], parts[1], parts[2], true
	}
	return "", "", "", false
}

// Held is the subject a worker moves a command to when it is for a run
// of a version of its flow the worker does not take:
// <prefix>.at.<flow>.<version>.<subject>, subject being the command's
// own less the prefix (in.<flow>.<verb>[.<role>], due.<flow>.<verb>). A
// dot of a version is written ~ there (a version never holds ~). The
// workers of that version take it from there ([Names.HeldFilter]); until
// one runs, it waits in the inbound stream.
func (n Names) Held(flow, version, subject string) string {
	return n.Prefix + ".at." + flow + "." + versionToken(version) + "." + strings.TrimPrefix(subject, n.Prefix+".")
}

// HeldFilter is the filter of the commands held for the workers of
// version of flow.
func (n Names) HeldFilter(flow, version string) string {
	return n.Prefix + ".at." + flow + "." + versionToken(version) + ".>"
}

// HeldConsumer is the durable consumer the workers of version of flow
// share, of the commands held for them.
func (n Names) HeldConsumer(flow, version string) string {
	return n.Prefix + "-at-" + flow + "-" + versionToken(version)
}

// ParseHeld is the subject a held command was first sent to, and the
// version it is held for; ok is false for a subject that is not one.
func (n Names) ParseHeld(subject string) (original, flow, version string, ok bool) {
	rest, found := strings.CutPrefix(subject, n.Prefix+".at.")
	if !found {
		return "", "", "", false
	}
	parts := strings.SplitN(rest, ".", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return n.Prefix + "." + parts[2], parts[0], strings.ReplaceAll(parts[1], "~", "."), true
}

// versionToken is a flow version as one subject token.
func versionToken(v string) string { return strings.ReplaceAll(v, ".", "~") }
