package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// Values of the resumes' result label.
const (
	resultAccepted     = "accepted"
	resultDuplicate    = "duplicate"
	resultRefused      = "refused"
	resultDeadLettered = "dead_lettered"
)

// Values of the decisions' by label: who decided.
const (
	byApprover = "approver"
	byTimeout  = "timeout"
	byRule     = "rule"
)

// Values of the votes' quorum label: whether the vote completed its
// approval's quorum.
const (
	quorumMet   = "met"
	quorumShort = "short"
)

// otherLabel stands for a value past a label's bound.
const otherLabel = "other"

// verbs are the verbs of inbound subjects; any other verb is counted as
// otherLabel, since a subject's verb is whatever its sender wrote.
var verbs = map[string]bool{
	protocol.VerbStart: true, protocol.VerbResume: true, protocol.VerbCancel: true, protocol.VerbReannounce: true,
	protocol.VerbExpire: true, protocol.VerbRequest: true, protocol.VerbAssign: true, protocol.VerbRemind: true,
}

// assignOps are the values of the assignments' op label.
var assignOps = map[string]bool{protocol.AssignClaim: true, protocol.AssignRelease: true, protocol.AssignDelegate: true}

// Buckets of the histograms, in seconds.
var (
	transitionBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	decisionBuckets   = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 259200, 604800}
)

// counters are the metrics counted from the workers' observations.
type counters struct {
	now         func() time.Time
	decisions   *prometheus.CounterVec
	waited      *prometheus.HistogramVec
	expiries    *prometheus.CounterVec
	escalations *prometheus.CounterVec
	resumes     *prometheus.CounterVec
	deadLetters *prometheus.CounterVec
	transitions *prometheus.HistogramVec
	interrupts  *prometheus.CounterVec
	votes       *prometheus.CounterVec
	reminders   *prometheus.CounterVec
	assignments *prometheus.CounterVec
	// finished counts the runs that finished, by flow and outcome.
	finished *prometheus.CounterVec

	// pendingAction is the action of the approval a run waits on, from
	// the pending index; "" when it waits on none.
	pendingAction func(flow, run string) string

	// flows are the flows known to run here: only these name a flow in a
	// label, since a refused command's flow is whatever its sender wrote.
	flows *flowSet

	mu sync.Mutex
	// actions are the values of the action label so far, up to maxActions.
	actions map[string]bool
}

// flowSet is the flows the engine has published events of or has runs
// waiting in the pending index.
type flowSet struct {
	mu    sync.Mutex
	names map[string]bool
}

func (f *flowSet) add(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "" && !f.names[name] {
		f.names[name] = true
	}
}

func (f *flowSet) has(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.names[name]
}

func newCounters(now func() time.Time, flows *flowSet, pendingAction func(flow, run string) string) *counters {
	return &counters{
		now: now, pendingAction: pendingAction,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_decisions_total",
			Help: "Approvals and tool calls decided, by flow, action (tool), outcome (approved, edited, rejected, responded, expired, allowed) and who decided (approver, timeout, rule).",
		}, []string{"flow", "action", "outcome", "by"}),
		waited: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "interlock_time_to_decision_seconds",
			Help:    "Time from an interrupt being asked to its answer (verb resume) or its deadline's policy acting (verb expire), by flow, action (tool) and interrupt kind.",
			Buckets: decisionBuckets,
		}, []string{"flow", "action", "kind", "verb"}),
		expiries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_expiries_total",
			Help: "Runs ended expired because an interrupt's deadline passed, by flow.",
		}, []string{"flow"}),
		escalations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_escalations_total",
			Help: "Approvals escalated to another role because their deadline passed, by flow.",
		}, []string{"flow"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_resumes_total",
			Help: "Resume commands handled, by flow, action (tool) of the approval answered, result (accepted, duplicate, refused, dead_lettered) and refusal code.",
		}, []string{"flow", "action", "result", "code"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_dead_letters_total",
			Help: "Inbound messages copied to the dead-letter stream, by reason.",
		}, []string{"reason"}),
		transitions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "interlock_transition_seconds",
			Help:    "Time a worker took to handle an inbound message, by the verb of its subject.",
			Buckets: transitionBuckets,
		}, []string{"verb"}),
		interrupts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_interrupts_total",
			Help: "Interrupts asked by a run that started or took an answer, by flow, action (tool) and interrupt kind; the same interrupt asked again (reannounced, voted on, escalated) is not counted.",
		}, []string{"flow", "action", "kind"}),
		votes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_votes_total",
			Help: "Votes (approve or edit) cast on approvals that take a quorum, by flow, action (tool) and whether the vote completed the quorum (met) or more are needed (short).",
		}, []string{"flow", "action", "quorum"}),
		reminders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_reminders_total",
			Help: "Reminders sent to the people who may answer a pending interrupt, by flow, action (tool) and interrupt kind.",
		}, []string{"flow", "action", "kind"}),
		assignments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_assignments_total",
			Help: "Pending approvals claimed, released or delegated, by flow, action (tool) and op (claim, release, delegate).",
		}, []string{"flow", "action", "op"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_runs_finished_total",
			Help: "Runs that finished, by flow and outcome (approved, edited, rejected, answered, completed, expired, cancelled, failed).",
		}, []string{"flow", "outcome"}),
		flows:   flows,
		actions: map[string]bool{},
	}
}

func (c *counters) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		c.decisions, c.waited, c.expiries, c.escalations, c.resumes, c.deadLetters, c.transitions, c.finished,
		c.interrupts, c.votes, c.reminders, c.assignments,
	}
}

// Describe implements [prometheus.Collector].
func (c *counters) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.collectors() {
		m.Describe(ch)
	}
}

// Collect implements [prometheus.Collector].
func (c *counters) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.collectors() {
		m.Collect(ch)
	}
}

// Observe counts what became of one inbound message. Pass it as the
// workers' observer (interlock.Config.Observe, bus.WorkerConfig.Observe).
// It does not block, but for a resume refused, repeated or dead-lettered
// on a flow known to run here: then it reads the run's pending entry, to
// name the approval the run waits on, within Config.Timeout.
func (s *Service) Observe(o bus.Observation) { s.counts.observe(o) }

func (c *counters) observe(o bus.Observation) {
	out := o.Outcome
	verb := o.Verb
	if !verbs[verb] {
		verb = otherLabel
	}
	c.transitions.WithLabelValues(verb).Observe(o.Took.Seconds())
	if out.DeadLetter != "" {
		c.deadLetters.WithLabelValues(out.DeadLetter).Inc()
	}
	flow := c.flow(out)
	if verb == protocol.VerbResume {
		result, code := resultAccepted, ""
		switch {
		case out.Refused != nil:
			result, code = resultRefused, string(out.Refused.Code)
		case out.DeadLetter != "":
			result = resultDeadLettered
		case out.Duplicate:
			result = resultDuplicate
		}
		c.resumes.WithLabelValues(flow, c.action(c.answered(flow, out)), result, code).Inc()
	}
	if out.Duplicate || out.Refused != nil || out.DeadLetter != "" {
		return
	}
	c.transition(verb, flow, out)
}

// flow is the flow label of an outcome: its flow once known to run here,
// "" otherwise.
func (c *counters) flow(out engine.Outcome) string {
	for _, m := range out.Events {
		c.flows.add(m.Flow)
	}
	if c.flows.has(out.Flow) {
		return out.Flow
	}
	return ""
}

// answered is the action of the approval a resume answered: the
// outcome's; for a vote short of its quorum, the approval asked again's;
// for a resume refused, the one the run waited on then (the outcome's);
// repeated or dead-lettered, the one the run waits on in the pending
// index. flow is the outcome's flow label: a flow not
// known to run here names no action.
func (c *counters) answered(flow string, out engine.Outcome) string {
	if flow == "" {
		return ""
	}
	if !out.AskedAt.IsZero() || out.Refused != nil && out.Action != "" {
		return out.Action
	}
	voted := false
	for _, m := range out.Events {
		switch d := m.Data.(type) {
		case *protocol.Voted:
			voted = true
		case *protocol.Interrupted:
			if voted {
				return d.Action
			}
		}
	}
	if out.Refused == nil && !out.Duplicate && out.DeadLetter == "" {
		return ""
	}
	return c.pendingAction(flow, out.Run)
}

// action bounds the values of the action label.
func (c *counters) action(a string) string {
	if a == "" {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.actions[a] {
		return a
	}
	if len(c.actions) >= maxActions {
		return otherLabel
	}
	c.actions[a] = true
	return a
}

// transition counts the events of an accepted transition: interrupts
// asked, votes, reminders, assignments, decisions, expiries, escalations
// and the time to decision. A command answers at most one interrupt, so an
// outcome holds at most one resumed or expired event of its own. An
// expire command either ends the run (expired), decides an approval as
// its policy says (resumed), or escalates it (interrupted, with neither).
// A vote short of its quorum holds a voted event and the approval asked
// again; the vote that meets it, the resumed event of the decision.
func (c *counters) transition(verb, flow string, out engine.Outcome) {
	if out.Result != "" {
		c.finished.WithLabelValues(flow, string(out.Result)).Inc()
	}
	var resumed *protocol.Resumed
	var expired *protocol.Expired
	var asked []*protocol.Interrupted
	decided, moved, voted := false, false, false
	for _, m := range out.Events {
		switch d := m.Data.(type) {
		case *protocol.Decided:
			decided = true
			c.decided(verb, d)
		case *protocol.Started:
			moved = true
		case *protocol.Resumed:
			resumed, moved = d, true
		case *protocol.Expired:
			expired = d
		case *protocol.Interrupted:
			asked = append(asked, d)
		case *protocol.Voted:
			voted = true
		case *protocol.Reminded:
			c.reminders.WithLabelValues(flow, c.action(out.Action), d.Kind).Inc()
		case *protocol.Assigned:
			op := d.Op
			if !assignOps[op] {
				op = otherLabel
			}
			c.assignments.WithLabelValues(flow, c.action(out.Action), op).Inc()
		}
	}
	// A run that started or took an answer asks anew; an interrupt asked
	// again without either (reannounced, voted on, escalated) is the same.
	if moved {
		for _, in := range asked {
			c.interrupts.WithLabelValues(flow, c.action(in.Action), in.Kind).Inc()
		}
	}
	if voted && len(asked) > 0 {
		c.votes.WithLabelValues(flow, c.action(asked[0].Action), quorumShort).Inc()
	}
	if resumed != nil && out.Quorum && verb == protocol.VerbResume &&
		(engine.Verdict(resumed.Decision) == engine.VerdictApprove || engine.Verdict(resumed.Decision) == engine.VerdictEdit) {
		c.votes.WithLabelValues(flow, c.action(out.Action), quorumMet).Inc()
	}
	kind := ""
	switch {
	case resumed != nil:
		kind = resumed.Kind
		if resumed.Decision != "" && !decided {
			by := byApprover
			if resumed.Approver == engine.TimeoutActor {
				by = byTimeout
			}
			c.decisions.WithLabelValues(flow, c.action(out.Action), verdictOutcome(resumed.Decision), by).Inc()
		}
	case expired != nil:
		kind = expired.Kind
		c.expiries.WithLabelValues(flow).Inc()
		if protocol.RoleRestricted(expired.Kind) && !decided {
			c.decisions.WithLabelValues(flow, c.action(out.Action), engine.ToolExpired, byTimeout).Inc()
		}
	case verb == protocol.VerbExpire && len(asked) > 0:
		kind = asked[0].Kind
		c.escalations.WithLabelValues(flow).Inc()
	}
	if kind != "" && (verb == protocol.VerbResume || verb == protocol.VerbExpire) && !out.AskedAt.IsZero() {
		c.waited.WithLabelValues(flow, c.action(out.Action), kind, verb).Observe(max(c.now().Sub(out.AskedAt), 0).Seconds())
	}
}

// decided counts a tool-call gate's decision. A request answered from a
// decision taken before (a repeat of a call approved, say) counts nothing:
// only "allowed" is decided by a request itself.
func (c *counters) decided(verb string, d *protocol.Decided) {
	if verb == protocol.VerbRequest && d.Decision != engine.ToolAllowed {
		return
	}
	by := byApprover
	switch {
	case d.Decision == engine.ToolAllowed:
		by = byRule
	case d.Decision == engine.ToolExpired || d.Approver == engine.TimeoutActor:
		by = byTimeout
	}
	c.decisions.WithLabelValues(engine.GateFlowName, c.action(d.Tool), d.Decision, by).Inc()
}

// verdictOutcome names a resumed event's decision as the gate's decided
// events do.
func verdictOutcome(decision string) string {
	switch engine.Verdict(decision) {
	case engine.VerdictApprove:
		return engine.ToolApproved
	case engine.VerdictEdit:
		return engine.ToolEdited
	case engine.VerdictReject:
		return engine.ToolRejected
	case engine.VerdictRespond:
		return engine.ToolResponded
	}
	return otherLabel
}
