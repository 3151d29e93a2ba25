package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/interlockhq/interlock/internal/netaddr"
	"github.com/interlockhq/interlock/protocol"
)

// AskFlowName is the name of the built-in flow that runs asks: one run
// per ask, whose run id is the askId.
const AskFlowName = protocol.AskFlow

// MaxAskCallbackURL bounds an ask's callbackUrl.
const MaxAskCallbackURL = 2048

// askReserved are the state fields an ask run keeps for itself: a
// question may not fill them.
var askReserved = []string{"ask", "answered", "agent", "conversationId", "messages", "context"}

// AskRequest is an ask to apply: the protocol's request, and who sent it.
type AskRequest struct {
	protocol.AskRequest
	Inbound
}

// askState is the state of an ask run. Questions fill fields of their
// own beside these.
type askState struct {
	Ask            protocol.AskRequest `json:"ask"`
	Agent          string              `json:"agent,omitempty"`
	ConversationID string              `json:"conversationId,omitempty"`
	Messages       json.RawMessage     `json:"messages,omitempty"`
	Context        json.RawMessage     `json:"context,omitempty"`
	// Answered is the answered event's data once the ask settles.
	Answered *protocol.Answered `json:"answered,omitempty"`
}

// AskFlow returns the built-in ask flow. A worker that serves asks
// registers it; its runs start only through [Runner.Ask].
func AskFlow() *Flow {
	f := NewFlow[askState](AskFlowName).
		Node("ask", runAsk).
		Start("ask").
		Migrate(AnyVersion, Migration{}).
		MustBuild()
	f.expired = func(t *txn, in *Interrupt) { settleAsk(t, protocol.AskExpired) }
	f.cancelled = func(t *txn) { settleAsk(t, protocol.AskCancelled) }
	return f
}

// settleAsk records and announces an ask that ends without an answer.
func settleAsk(t *txn, status string) {
	var s askState
	if err := json.Unmarshal(mustJSON(t.cp.State), &s); err != nil {
		return
	}
	a := &protocol.Answered{AskID: s.Ask.AskID, Status: status, Kind: s.Ask.Interrupt.Kind, Origin: t.cp.Origin, At: t.now.UTC()}
	rc := protocol.Receipt{Kind: a.Kind, Decision: status, Approver: t.actor, Tool: s.Ask.Interrupt.Action}
	if status == protocol.AskExpired {
		rc.Approver = TimeoutActor
	}
	if a.Kind == KindApproval {
		rc.ArgsDigest, _ = protocol.RawArgsDigest(s.Ask.Interrupt.Args)
	}
	a.Receipt = t.receipt(rc)
	if raw, err := json.Marshal(a); err == nil {
		t.cp.State["answered"] = raw
	}
	t.emit(protocol.EventAnswered, a)
}

// CheckAsk reports what is wrong with an ask, for the caller to fix: an
// unknown kind, a field of another kind, a schema that does not compile,
// a duration that does not parse.
func CheckAsk(a protocol.AskRequest) error {
	if err := CheckName("run", a.AskID); err != nil {
		return fmt.Errorf("askId: %w", err)
	}
	if a.CallbackURL != "" {
		u, err := url.Parse(a.CallbackURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || len(a.CallbackURL) > MaxAskCallbackURL {
			return fmt.Errorf("callbackUrl %q: give an absolute https URL of at most %d bytes, with no user or password", protocol.Truncate(a.CallbackURL, 80), MaxAskCallbackURL)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("callbackUrl %q: give it without a query or fragment: the ask's run, which clients read, keeps it; a receiver checks Interlock's POST by its signature, not by a secret in the URL", protocol.Truncate(a.CallbackURL, 80))
		}
		if u.Scheme == "http" && !netaddr.IsLoopbackHost(u.Hostname()) {
			return fmt.Errorf("callbackUrl %q: use https (plain http only to a loopback address such as 127.0.0.1)", protocol.Truncate(a.CallbackURL, 80))
		}
	}
	in := a.Interrupt
	other := func(field, kinds string) error {
		return fmt.Errorf("interrupt.%s is for %s asks, and this ask's kind is %s; remove it", field, kinds, in.Kind)
	}
	switch in.Kind {
	case KindQuestion:
		qs := make([]Question, len(in.Questions))
		for i, q := range in.Questions {
			qs[i] = Question{Field: q.Field, Question: q.Question, Type: q.Type, Suggestions: q.Suggestions, Context: q.Context, Schema: q.Schema}
			if slices.Contains(askReserved, q.Field) || slices.Contains(askReserved, fieldRoot(q.Field)) {
				return fmt.Errorf("interrupt.questions[%d].field %q is kept by the ask run itself; name the field otherwise (not %v)", i, q.Field, askReserved)
			}
		}
		if err := checkQuestions(Questions{Questions: qs}); err != nil {
			return fmt.Errorf("interrupt: %w", err)
		}
	case KindChoice:
		if err := checkChoice(Choice{Question: in.Question, Options: in.Options, Multiple: in.Multiple}); err != nil {
			return fmt.Errorf("interrupt: %w", err)
		}
	case KindApproval:
		if in.Action == "" {
			return errors.New("interrupt.action is missing: an approval ask names the action it proposes")
		}
		if len(in.ArgsSchema) > 0 {
			if _, err := compileSchema(in.ArgsSchema); err != nil {
				return fmt.Errorf("interrupt.argsSchema: %w", err)
			}
		}
		if len(in.Args) > 0 && protocol.JSONTypeOf(in.Args) != protocol.JSONObject {
			return errors.New("interrupt.args must be a JSON object")
		}
	case "":
		return errors.New("interrupt.kind is missing: use question, choice or approval")
	default:
		return fmt.Errorf("interrupt.kind %q is not one Interlock asks: use question, choice or approval", protocol.Truncate(in.Kind, 40))
	}
	if in.Kind != KindQuestion && (len(in.Questions) > 0 || in.Context != "") {
		return other("questions", "question")
	}
	if in.Kind != KindChoice && (in.Question != "" || len(in.Options) > 0 || in.Multiple) {
		return other("question, options and multiple", "choice")
	}
	if in.Kind != KindApproval {
		switch {
		case in.Action != "" || len(in.Args) > 0 || len(in.ArgsSchema) > 0 || in.Reason != "":
			return other("action, args, argsSchema and reason", "approval")
		case in.ApproverRole != "" || len(in.Assignees) > 0 || in.Quorum != nil || len(in.Decisions) > 0 || in.SeparationOfDuties:
			return other("approverRole, assignees, quorum, decisions and separationOfDuties", "approval")
		case len(in.Reminders) > 0 || in.RemindEvery != "":
			return other("reminders and remindEvery", "approval")
		}
	}
	_, err := askApproval(a, time.Time{})
	return err
}

// fieldRoot is the top-level part of a field path (a of a.b).
func fieldRoot(f string) string {
	for i := 0; i < len(f); i++ {
		if f[i] == '.' {
			return f[:i]
		}
	}
	return f
}

// askTimeout reads an ask's deadline and its policy.
func askTimeout(in protocol.AskInterrupt) (time.Duration, Policy, error) {
	var p Policy
	if in.OnTimeout != nil {
		w := in.OnTimeout.Policy
		if in.OnTimeout.PolicyName != "" {
			if w.Action != "" && w.Action != in.OnTimeout.PolicyName {
				return 0, p, fmt.Errorf("interrupt.onTimeout says action %q and policy %q: give one", w.Action, in.OnTimeout.PolicyName)
			}
			w.Action = in.OnTimeout.PolicyName
		}
		raw, err := json.Marshal(w)
		if err == nil {
			err = json.Unmarshal(raw, &p)
		}
		if err != nil {
			return 0, p, fmt.Errorf("interrupt.onTimeout: %w", err)
		}
	}
	if in.Timeout == "" {
		if in.OnTimeout != nil {
			return 0, p, errors.New("interrupt.onTimeout is set but there is no timeout; add one such as \"timeout\": \"4h\", or remove onTimeout")
		}
		return 0, p, nil
	}
	d, err := time.ParseDuration(in.Timeout)
	if err != nil || d <= 0 {
		return 0, p, fmt.Errorf("interrupt.timeout %q is not a positive Go duration such as \"30m\" or \"4h\"", protocol.Truncate(in.Timeout, 40))
	}
	if err := checkTimeout(in.Kind, d, p); err != nil {
		return 0, p, fmt.Errorf("interrupt: %w", err)
	}
	return d, p, nil
}

// askApproval turns an approval ask into the engine's Approval (checking
// its durations); for other kinds it checks the deadline only.
func askApproval(a protocol.AskRequest, _ time.Time) (Approval, error) {
	in := a.Interrupt
	timeout, p, err := askTimeout(in)
	if err != nil {
		return Approval{}, err
	}
	if in.Kind != KindApproval {
		return Approval{}, nil
	}
	ap := Approval{Action: in.Action, Reason: in.Reason, ApproverRole: in.ApproverRole, Decisions: in.Decisions,
		Assignees: in.Assignees, Requester: a.Agent, Quorum: in.Quorum, Timeout: timeout, OnTimeout: p,
		Title: in.Title, Description: in.Description, ArgsSchema: in.ArgsSchema}
	if in.SeparationOfDuties {
		sod := true
		ap.SeparationOfDuties = &sod
	}
	args := map[string]json.RawMessage{}
	if len(in.Args) > 0 {
		if err := json.Unmarshal(in.Args, &args); err != nil {
			return Approval{}, fmt.Errorf("interrupt.args: %w", err)
		}
	}
	ap.Args = args
	for i, r := range in.Reminders {
		d, err := time.ParseDuration(r)
		if err != nil || d <= 0 {
			return Approval{}, fmt.Errorf("interrupt.reminders[%d] %q is not a positive Go duration such as \"1h\"", i, protocol.Truncate(r, 40))
		}
		ap.Reminders = append(ap.Reminders, d)
	}
	if in.RemindEvery != "" {
		d, err := time.ParseDuration(in.RemindEvery)
		if err != nil || d <= 0 {
			return Approval{}, fmt.Errorf("interrupt.remindEvery %q is not a positive Go duration such as \"1h\"", protocol.Truncate(in.RemindEvery, 40))
		}
		ap.RemindEvery = d
	}
	if _, err := newApproval("ask", ap); err != nil {
		return Approval{}, fmt.Errorf("interrupt: %w", err)
	}
	return ap, nil
}

// runAsk is the ask flow's node: it asks, and announces the answer.
func runAsk(ctx context.Context, n *Node[askState]) error {
	s := n.State()
	in := s.Ask.Interrupt
	timeout, _, err := askTimeout(in)
	if err != nil {
		return err
	}
	a := &protocol.Answered{AskID: s.Ask.AskID, Status: protocol.AskAnswered, Kind: in.Kind, Origin: n.x.cp.Origin}
	switch in.Kind {
	case KindQuestion:
		qs := Questions{Context: in.Context, Timeout: timeout, Title: in.Title}
		for _, q := range in.Questions {
			qs.Questions = append(qs.Questions, Question{Field: q.Field, Question: q.Question, Type: q.Type,
				Suggestions: q.Suggestions, Context: q.Context, Schema: q.Schema})
		}
		answers, err := n.Ask(ctx, qs)
		if err != nil {
			return err
		}
		a.Answers = map[string]json.RawMessage{}
		for f, v := range answers {
			raw, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("engine: the answer of %s: %w", f, err)
			}
			a.Answers[f] = raw
		}
	case KindChoice:
		ids, err := n.Choose(ctx, Choice{Question: in.Question, Options: in.Options, Multiple: in.Multiple, Timeout: timeout, Title: in.Title})
		if err != nil {
			return err
		}
		a.Selected = ids
	case KindApproval:
		ap, err := askApproval(s.Ask, time.Time{})
		if err != nil {
			return err
		}
		// Whoever asked is the requester a quorum keeps from voting: the
		// caller a service vouched for, not the agent the ask names.
		ap.Requester = cmp.Or(n.x.cp.StartedBy, ap.Requester)
		d, err := n.Approve(ctx, ap)
		if err != nil {
			return err
		}
		a.Decision, a.Approver, a.Reason, a.Message, a.Votes = d.Verdict, d.Approver, d.Reason, d.Message, d.Votes
		if d.Verdict == VerdictEdit || d.Verdict == VerdictApprove {
			raw, err := json.Marshal(d.Args)
			if err != nil {
				return fmt.Errorf("engine: the final args of ask %s: %w", s.Ask.AskID, err)
			}
			a.Args = raw
		}
	default:
		return fmt.Errorf("ask %s: kind %q", s.Ask.AskID, in.Kind)
	}
	a.At = n.x.now.UTC()
	a.Receipt = n.x.receipt(askReceipt(s.Ask, a))
	if err := n.Set("answered", a); err != nil {
		return err
	}
	n.x.emit(protocol.EventAnswered, a)
	return nil
}

// Ask applies an ask: it starts a run of the ask flow named after the
// askId, which waits on the interrupt the ask describes and announces
// the answer with an answered event. A malformed ask is refused
// invalid_payload, saying what to fix, and dead-lettered. An ask repeating
// an askId already known starts nothing: it is acknowledged while the ask
// waits, and answered again with the same event once it has settled.
func (r *Runner) Ask(ctx context.Context, req AskRequest) (Outcome, error) {
	if err := CheckName("run", req.AskID); err != nil {
		return Outcome{Flow: AskFlowName, Run: req.AskID, DeadLetter: ReasonInvalidName}, nil
	}
	if _, ok := r.flows[AskFlowName]; !ok {
		return Outcome{}, errors.New("engine: the ask flow is not registered; add engine.AskFlow() to Config.Flows")
	}
	if out, stop, err := r.authenticate(ctx, AskFlowName, req.AskID, &req.Inbound); stop {
		return out, err
	}
	bad := func(msg string) (Outcome, error) {
		return r.refuse(ctx, AskFlowName, req.AskID, "", req.Inbound, CodeInvalidPayload, string(CodeInvalidPayload), msg)
	}
	if err := checkOrigin(req.Origin); err != nil {
		return bad(err.Error())
	}
	cp, rev, err := r.load(ctx, AskFlowName, req.AskID)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return Outcome{}, fmt.Errorf("engine: loading ask %s: %w", req.AskID, err)
	default:
		return r.askAgain(ctx, cp, rev, req)
	}
	if err := CheckAsk(req.AskRequest); err != nil {
		return bad("ask " + req.AskID + ": " + err.Error())
	}
	state := askState{Ask: req.AskRequest, Agent: req.Agent, ConversationID: req.ConversationID, Messages: req.Messages, Context: req.Context}
	state.Ask.Messages, state.Ask.Context, state.Ask.Origin = nil, nil, nil
	raw, err := json.Marshal(state)
	if err != nil {
		return Outcome{}, fmt.Errorf("engine: ask %s: %w", req.AskID, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return Outcome{}, fmt.Errorf("engine: ask %s: %w", req.AskID, err)
	}
	req.FirstDelivery = false
	return r.Start(ctx, Start{Flow: AskFlowName, Run: req.AskID, State: doc, Origin: req.Origin, By: req.Agent, Inbound: req.Inbound,
		exists: func(cp *Checkpoint, rev uint64) (Outcome, error) {
			// Another worker started the ask meanwhile: answer as a repeat.
			return r.askAgain(ctx, cp, rev, req)
		}})
}

// repeatID is the id of an event that answers a repeated command, of its
// own so that the command's redelivery is dropped and a new one answered.
func repeatID(kind, run, source, eventID string) string {
	sum := sha256.Sum256([]byte(run + "\x00" + source + "\x00" + eventID))
	return kind + "-" + hex.EncodeToString(sum[:12])
}

// askAgain answers an ask whose askId the engine already holds.
func (r *Runner) askAgain(ctx context.Context, cp *Checkpoint, rev uint64, req AskRequest) (Outcome, error) {
	if out, done, err := r.repeat(ctx, r.flows[AskFlowName], cp, rev, req.EventID, req.Inbound); done || err != nil {
		out.RunTraceparent = cp.Traceparent
		return out, err
	}
	if !cp.Status.Finished() {
		if busy, err := r.busy(ctx, cp); err != nil || busy {
			return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, RetryAfter: DefaultBusyRetry}, err
		}
		return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, Checkpoint: rev, Node: cp.Node, Duplicate: true}, nil
	}
	var a protocol.Answered
	raw, ok := cp.State["answered"]
	if !ok || json.Unmarshal(raw, &a) != nil {
		// An ask that failed before it settled.
		return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, Checkpoint: rev, Duplicate: true}, nil
	}
	m := Message{Stream: EventStream, Kind: protocol.EventAnswered, ID: repeatID("answered", req.AskID, req.Source, req.EventID),
		Flow: AskFlowName, Run: req.AskID, Time: r.cfg.Now().UTC(), Data: &a, Traceparent: req.Traceparent}
	if err := r.cfg.Publisher.Publish(ctx, []Message{m}, false); err != nil {
		return Outcome{}, fmt.Errorf("engine: answering ask %s again: %w", req.AskID, err)
	}
	return Outcome{Flow: AskFlowName, Run: req.AskID, Status: cp.Status, Events: []Message{m}}, nil
}

// askReceipt is the receipt of an ask answered with a (by the approver of
// an approval; by the transition's caller for a question or a choice).
func askReceipt(ask protocol.AskRequest, a *protocol.Answered) protocol.Receipt {
	in := ask.Interrupt
	if a.Kind == KindApproval {
		d := Decision{Verdict: a.Decision, Approver: a.Approver, Votes: a.Votes}
		if len(a.Args) > 0 {
			_ = json.Unmarshal(a.Args, &d.Args)
		}
		args := in.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		return approvalReceipt(in.Action, "", args, d)
	}
	r := protocol.Receipt{Kind: a.Kind, Decision: protocol.ReceiptAnswered}
	if a.Kind == KindChoice {
		r.AnswerDigest, _ = protocol.AnswerDigest(nil, a.Selected)
	} else {
		r.AnswerDigest, _ = protocol.AnswerDigest(a.Answers, nil)
	}
	return r
}
