package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/wire"
)

// The floor does by hand the JetStream work the protocol needs for one run,
// with no Interlock code in the loop (bus is used only to name, connect and
// provision, so the streams and buckets are configured as Interlock's):
//
//	start:  consume the start from the work queue; KV Create the checkpoint
//	        (~1 KB of JSON); KV Put the pending entry while storing the
//	        transition's audit record (its outcome the pause, hash-chained,
//	        the checkpoint keeping the chain's head) and, for an approval,
//	        the deadline's message schedule; publish started and
//	        interrupted; ack.
//	resume: consume the resume; KV Get the checkpoint; for an approval, KV
//	        Update it with the refund recorded as a step (the write
//	        Interlock makes mid-node, before the step's result is used);
//	        write it completed from the revision read or written, with a
//	        TTL and a roll-up of the key's older revisions; KV Purge the
//	        pending entry (with a marker TTL) while storing one audit
//	        record; publish resumed and completed; ack.
//
// Every publish carries a Nats-Msg-Id. The pending entry is written while
// the audit records are stored, as Interlock does, and all are
// acknowledged before the two events are published asynchronously and
// awaited together. TestFloorMirrorsInterlock checks that the floor stores
// as many messages in every stream and bucket as Interlock does.

// floorHandlerTimeout bounds the handling of one message.
const floorHandlerTimeout = 25 * time.Second

// command is an inbound command as the clients of both systems write it:
// a structured CloudEvent encoded with encoding/json, as an agent service
// in any language would, so that the clients cost both systems the same.
type command struct {
	SpecVersion string    `json:"specversion"`
	ID          string    `json:"id"`
	Source      string    `json:"source"`
	Type        string    `json:"type"`
	Subject     string    `json:"subject"`
	Time        time.Time `json:"time"`
	Data        struct {
		State       map[string]any    `json:"state,omitempty"`
		ResumeToken string            `json:"resumeToken,omitempty"`
		Answers     map[string]string `json:"answers,omitempty"`
		Decision    string            `json:"decision,omitempty"`
		Approver    string            `json:"approver,omitempty"`
	} `json:"data"`
}

// floorEvent is an outbound event or audit record of the floor.
type floorEvent struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Flow            string    `json:"flow"`
	Data            any       `json:"data"`
}

// floorDoc is the floor's checkpoint document.
type floorDoc struct {
	Flow      string            `json:"flow"`
	Run       string            `json:"run"`
	Status    string            `json:"status"`
	Node      string            `json:"node"`
	State     map[string]any    `json:"state"`
	Interrupt *floorInterrupt   `json:"interrupt,omitempty"`
	Token     string            `json:"token,omitempty"`
	Decisions []floorDecision   `json:"decisions,omitempty"`
	Steps     map[string]string `json:"steps,omitempty"`
	Audit     *floorAuditHead   `json:"audit,omitempty"`
	CreatedAt time.Time         `json:"createdAt"`
	UpdatedAt time.Time         `json:"updatedAt"`
	Cause     string            `json:"cause"`
	// Notes pads the document to about a kilobyte, the size of a realistic
	// checkpoint.
	Notes string `json:"notes"`
}

// floorInterrupt is the pending interrupt of a floor checkpoint: a question
// or an approval.
type floorInterrupt struct {
	RequestID string              `json:"requestId"`
	Kind      string              `json:"kind"`
	Node      string              `json:"node"`
	Questions []map[string]string `json:"questions,omitempty"`
	// Action, Args, Reason, ApproverRole, Decisions, ExpiresAt and
	// OnTimeout: an approval.
	Action       string         `json:"action,omitempty"`
	Args         map[string]any `json:"args,omitempty"`
	Reason       string         `json:"reason,omitempty"`
	ApproverRole string         `json:"approverRole,omitempty"`
	Decisions    []string       `json:"decisions,omitempty"`
	ExpiresAt    *time.Time     `json:"expiresAt,omitempty"`
	OnTimeout    map[string]any `json:"onTimeout,omitempty"`
	AskedAt      time.Time      `json:"askedAt"`
}

// floorDecision is a decision taken on an approval.
type floorDecision struct {
	Verdict   string         `json:"verdict"`
	Action    string         `json:"action"`
	Args      map[string]any `json:"args"`
	Approver  string         `json:"approver"`
	At        time.Time      `json:"at"`
	Node      string         `json:"node"`
	RequestID string         `json:"requestId"`
}

// floorDocPadding makes a waiting floor checkpoint of the question
// workload about 1 KB.
var floorDocPadding = strings.Repeat("n", 560)

// floorProtocol is the client side of the floor.
type floorProtocol struct{ w workload }

func (p floorProtocol) start(names wire.Names, run string) (*nats.Msg, error) {
	c := newCommand("start", run)
	if p.w.approval {
		c.Data.State = refundState(run)
	}
	return c.msg(names.In(p.w.flow, "start"))
}

func (p floorProtocol) resume(names wire.Names, run string, interrupted *nats.Msg) (*nats.Msg, error) {
	return resumeCommand(p.w, names, run, interrupted)
}

// resumeCommand is the resume of both systems' clients: the interrupted
// event's resume token read with encoding/json, and an approval or an
// answer.
func resumeCommand(w workload, names wire.Names, run string, interrupted *nats.Msg) (*nats.Msg, error) {
	var ev struct {
		Data struct {
			ResumeToken string `json:"resumeToken"`
		} `json:"data"`
	}
	if err := json.Unmarshal(interrupted.Data, &ev); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", interrupted.Subject, err)
	}
	if ev.Data.ResumeToken == "" {
		return nil, fmt.Errorf("%s carries no resumeToken", interrupted.Subject)
	}
	c := newCommand("resume", run)
	c.Data.ResumeToken = ev.Data.ResumeToken
	if w.approval {
		c.Data.Decision, c.Data.Approver = "approve", approverName
	} else {
		c.Data.Answers = map[string]string{"answer": "ok"}
	}
	return c.msg(names.In(w.flow, "resume"))
}

func newCommand(verb, run string) command {
	return command{SpecVersion: "1.0", ID: newID(), Source: clientSource, Type: "io.interlock.run." + verb, Subject: run, Time: time.Now().UTC()}
}

func (c command) msg(subject string) (*nats.Msg, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	msg.Header.Set("Content-Type", "application/cloudevents+json")
	msg.Header.Set(jetstream.MsgIDHeader, c.ID)
	return msg, nil
}

// floor is the floor's worker: a durable pull consumer on the work-queue
// stream, configured as Interlock's, feeding a fixed pool of goroutines.
type floor struct {
	*pool
	runs, pending jetstream.KeyValue
	// markerTTL is how long the marker of a removed pending entry stays:
	// the pending bucket's LimitMarkerTTL.
	markerTTL time.Duration
}

// startFloor provisions the streams and buckets of names on the server at
// url, with replicas replicas, and starts a pool of workers goroutines
// consuming the inbound stream and doing the work of workload w.
func startFloor(ctx context.Context, url string, names wire.Names, w workload, workers, replicas int) (_ *floor, err error) {
	p, err := connectPool(ctx, url, "bench-floor-worker", "floor", names, w, replicas)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = p.stop(ctx)
		}
	}()
	f := &floor{pool: p}
	p.start, p.resume = f.start, f.resume
	if f.runs, err = p.js.KeyValue(ctx, names.RunsBucket()); err != nil {
		return nil, fmt.Errorf("binding bucket %s: %w", names.RunsBucket(), err)
	}
	if f.pending, err = p.js.KeyValue(ctx, names.PendingBucket()); err != nil {
		return nil, fmt.Errorf("binding bucket %s: %w", names.PendingBucket(), err)
	}
	st, err := f.pending.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration of bucket %s: %w", names.PendingBucket(), err)
	}
	f.markerTTL = st.LimitMarkerTTL()
	if err := p.run(ctx, workers); err != nil {
		return nil, err
	}
	return f, nil
}

// start starts a run and leaves it waiting on the workload's interrupt.
func (f *floor) start(ctx context.Context, cmd command) error {
	run, key := cmd.Subject, f.w.flow+"."+cmd.Subject
	now := time.Now().UTC()
	token := newID()
	in := f.interrupt(cmd.Data.State, "rq_"+newID(), now)
	state := cmd.Data.State
	if state == nil {
		state = map[string]any{}
	}
	doc := floorDoc{
		Flow: f.w.flow, Run: run, Status: "waiting", Node: in.Node, State: state, Interrupt: in,
		Token: token, CreatedAt: now, UpdatedAt: now, Cause: cmd.ID, Notes: floorDocPadding,
	}
	// The transition's record, its outcome the pause, chained; the
	// checkpoint keeps the chain's head.
	records, head, err := f.chain(run, now, nil,
		map[string]any{"action": "started", "by": cmd.Source, "eventId": cmd.ID, "outcome": f.paused(in)})
	if err != nil {
		return err
	}
	doc.Audit = head
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding checkpoint %s: %w", key, err)
	}
	rev, err := f.runs.Create(ctx, key, b)
	if err != nil {
		return fmt.Errorf("creating checkpoint %s: %w", key, err)
	}
	pending := map[string]any{
		"flow": f.w.flow, "run": run, "node": in.Node, "requestId": in.RequestID,
		"kind": in.Kind, "checkpoint": rev, "askedAt": now,
	}
	if in.Kind == "approval" {
		pending["action"], pending["approverRole"], pending["expiresAt"] = in.Action, in.ApproverRole, in.ExpiresAt
	} else {
		pending["fields"] = []string{"answer"}
	}
	p, err := json.Marshal(pending)
	if err != nil {
		return fmt.Errorf("encoding pending entry %s: %w", key, err)
	}
	index := func(ctx context.Context) error {
		if _, err := f.pending.Put(ctx, key, p); err != nil {
			return fmt.Errorf("writing pending entry %s: %w", key, err)
		}
		return nil
	}
	if in.ExpiresAt != nil {
		sm, err := f.schedule(run, in)
		if err != nil {
			return err
		}
		records = append(records, sm)
	}
	interrupted := map[string]any{
		"flow": f.w.flow, "run": run, "node": in.Node, "requestId": in.RequestID,
		"kind": in.Kind, "checkpoint": rev, "resumeToken": token,
	}
	if in.Kind == "approval" {
		interrupted["action"], interrupted["args"], interrupted["reason"] = in.Action, in.Args, in.Reason
		interrupted["approverRole"], interrupted["decisions"], interrupted["expiresAt"] = in.ApproverRole, in.Decisions, in.ExpiresAt
	} else {
		interrupted["questions"] = in.Questions
	}
	return f.publish(ctx, run, now, index, records,
		"started", map[string]any{"flow": f.w.flow, "run": run, "checkpoint": rev},
		"interrupted", interrupted)
}

// interrupt returns the interrupt that a run of the floor's workload,
// started with state, waits on from now.
func (f *floor) interrupt(state map[string]any, requestID string, now time.Time) *floorInterrupt {
	if !f.w.approval {
		return &floorInterrupt{
			RequestID: requestID, Kind: "question", Node: "ask", AskedAt: now,
			Questions: []map[string]string{{"field": "answer", "question": "Go ahead?"}},
		}
	}
	at := expiry(now, refundTimeout)
	return &floorInterrupt{
		RequestID: requestID, Kind: "approval", Node: reviewNode, AskedAt: now,
		Action:       refundAction,
		Args:         map[string]any{"orderId": state["orderId"], "amount": state["amount"], "currency": state["currency"]},
		Reason:       refundReason,
		ApproverRole: supervisorRole,
		Decisions:    []string{"approve", "edit", "reject"},
		ExpiresAt:    &at,
		OnTimeout: map[string]any{
			"action": "escalate", "approverRole": financeLeadRole,
			"timeout": refundTimeout.String(), "then": map[string]any{"action": "expire"},
		},
	}
}

// paused is the outcome of the audit record of a transition that paused
// a run on in.
func (f *floor) paused(in *floorInterrupt) map[string]any {
	o := map[string]any{"status": "waiting", "node": in.Node, "requestId": in.RequestID, "kind": in.Kind}
	if in.Kind == "approval" {
		o["approverRole"], o["expiresAt"], o["reason"] = in.ApproverRole, in.ExpiresAt, in.Reason
		o["approval"] = map[string]any{"action": in.Action, "args": in.Args}
	}
	return o
}

// schedule returns the message schedule of in's deadline: the server
// publishes its body to <prefix>.in.<flow>.expire at that time.
func (f *floor) schedule(run string, in *floorInterrupt) (*nats.Msg, error) {
	at := in.ExpiresAt.UTC().Format(time.RFC3339)
	m, err := f.event(f.names.Schedule(f.w.flow, run, in.RequestID), "io.interlock.run.expire", run, time.Now().UTC(),
		map[string]any{"requestId": in.RequestID, "expiresAt": at, "flow": f.w.flow, "run": run})
	if err != nil {
		return nil, err
	}
	m.Header.Set(bus.HeaderSchedule, "@at "+at)
	m.Header.Set(bus.HeaderScheduleTarget, f.names.Due(f.w.flow, "expire"))
	return m, nil
}

// resume answers a run's interrupt and completes the run.
func (f *floor) resume(ctx context.Context, cmd command) error {
	run, key := cmd.Subject, f.w.flow+"."+cmd.Subject
	e, err := f.runs.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("reading checkpoint %s: %w", key, err)
	}
	var doc floorDoc
	if err := json.Unmarshal(e.Value(), &doc); err != nil {
		return fmt.Errorf("decoding checkpoint %s: %w", key, err)
	}
	if doc.Status != "waiting" || doc.Interrupt == nil || doc.Token != cmd.Data.ResumeToken {
		return fmt.Errorf("resume of %s does not match its checkpoint (status %s)", key, doc.Status)
	}
	now := time.Now().UTC()
	in, rev := doc.Interrupt, e.Revision()
	record := map[string]any{
		"action": "answered", "by": cmd.Source, "source": cmd.Source, "eventId": cmd.ID,
		"node": in.Node, "requestId": in.RequestID, "kind": in.Kind,
	}
	resumed := map[string]any{"flow": f.w.flow, "run": run, "node": in.Node, "requestId": in.RequestID, "kind": in.Kind}
	doc.Interrupt, doc.Token, doc.UpdatedAt, doc.Cause = nil, "", now, cmd.ID
	if in.Kind == "approval" {
		if in.ExpiresAt != nil && !now.Before(*in.ExpiresAt) {
			return fmt.Errorf("resume of %s after its deadline %s", key, in.ExpiresAt)
		}
		if !slices.Contains(in.Decisions, cmd.Data.Decision) || cmd.Data.Decision != "approve" {
			return fmt.Errorf("resume of %s with decision %q, want approve", key, cmd.Data.Decision)
		}
		d := floorDecision{
			Verdict: cmd.Data.Decision, Action: in.Action, Args: in.Args, Approver: cmp.Or(cmd.Data.Approver, cmd.Source),
			At: now, Node: in.Node, RequestID: in.RequestID,
		}
		doc.Decisions = append(doc.Decisions, d)
		record["action"], record["by"], record["approverRole"] = "approved", d.Approver, in.ApproverRole
		record["approval"] = map[string]any{"action": in.Action, "args": in.Args}
		resumed["decision"], resumed["approver"] = d.Verdict, d.Approver
		// The refund, recorded before it is used, as a step is.
		doc.Status, doc.Node, doc.Steps = "running", issueRefundNode, map[string]string{refundStep: refundID()}
		b, err := json.Marshal(doc)
		if err != nil {
			return fmt.Errorf("encoding checkpoint %s: %w", key, err)
		}
		if rev, err = f.runs.Update(ctx, key, b, rev); err != nil {
			return fmt.Errorf("recording the refund of %s at revision %d: %w", key, e.Revision(), err)
		}
		doc.State["refundId"], doc.State["approvedBy"], doc.State["outcome"] = doc.Steps[refundStep], d.Approver, "refunded"
		doc.Steps = nil
	} else {
		doc.State["answer"] = cmd.Data.Answers["answer"]
	}
	doc.Status, doc.Node = "completed", ""
	record["outcome"] = map[string]any{"status": "completed", "node": in.Node}
	// The run's entry of the finished-runs index, as the engine writes it.
	finished := map[string]any{
		"flow": f.w.flow, "run": run, "status": "completed", "node": in.Node, "createdAt": doc.CreatedAt, "finishedAt": now,
		"interrupt": map[string]any{"requestId": in.RequestID, "node": in.Node, "kind": in.Kind, "approverRole": in.ApproverRole, "action": in.Action},
	}
	if n := len(doc.Decisions); n > 0 {
		d := doc.Decisions[n-1]
		finished["decision"] = map[string]any{"verdict": d.Verdict, "approver": d.Approver, "at": d.At}
	}
	records, head, err := f.chain(run, now, doc.Audit, record)
	if err != nil {
		return err
	}
	doc.Audit = head
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding checkpoint %s: %w", key, err)
	}
	if rev, err = f.finish(ctx, key, b, rev); err != nil {
		return err
	}
	finished["checkpoint"] = rev
	entry, err := json.Marshal(finished)
	if err != nil {
		return fmt.Errorf("encoding the finished entry of %s: %w", key, err)
	}
	index := func(ctx context.Context) error {
		// The finished entry, with the checkpoint's retention, while the
		// pending entry is purged, as Interlock's store writes both.
		m := nats.NewMsg(f.names.Finished("completed", f.w.flow))
		m.Data = entry
		m.Header.Set("Content-Type", "application/json")
		m.Header.Set(jetstream.MsgIDHeader, newID())
		fut, err := f.js.PublishMsgAsync(m, jetstream.WithMsgTTL(kv.DefaultKeepFinished))
		if err != nil {
			return fmt.Errorf("writing the finished entry of %s: %w", key, err)
		}
		if err := f.pending.Purge(ctx, key, jetstream.PurgeTTL(f.markerTTL)); err != nil {
			return fmt.Errorf("removing pending entry %s: %w", key, err)
		}
		select {
		case <-fut.Ok():
		case err := <-fut.Err():
			return fmt.Errorf("writing the finished entry of %s: %w", key, err)
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	resumed["checkpoint"] = rev
	return f.publish(ctx, run, now, index, records,
		"resumed", resumed,
		"completed", map[string]any{"flow": f.w.flow, "run": run, "state": doc.State, "checkpoint": rev})
}

// finish writes the checkpoint of a run that finished as Interlock's store
// does: a KV update from rev that also carries the finished-run retention
// as a per-message TTL and rolls the key's older revisions up.
func (f *floor) finish(ctx context.Context, key string, b []byte, rev uint64) (uint64, error) {
	m := nats.NewMsg("$KV." + f.names.RunsBucket() + "." + key)
	m.Data = b
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	ack, err := f.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(kv.DefaultKeepFinished))
	if err != nil {
		return 0, fmt.Errorf("updating checkpoint %s from revision %d: %w", key, rev, err)
	}
	return ack.Sequence, nil
}

// floorAuditHead is the head of a run's audit chain, kept in the
// checkpoint.
type floorAuditHead struct {
	Records uint64 `json:"records"`
	Hash    string `json:"hash"`
}

// chain appends records to the audit chain whose head is head: each gets
// the run, the time, its position, the previous record's hash and its own
// (the SHA-256 of its JSON without the hash, keys sorted as encoding/json
// sorts a map's). It returns the records as messages and the new head.
func (f *floor) chain(run string, now time.Time, head *floorAuditHead, records ...map[string]any) ([]*nats.Msg, *floorAuditHead, error) {
	h := floorAuditHead{}
	if head != nil {
		h = *head
	}
	msgs := make([]*nats.Msg, 0, len(records))
	for _, rec := range records {
		rec["flow"], rec["run"], rec["at"] = f.w.flow, run, now
		rec["seq"], rec["prev"] = h.Records+1, h.Hash
		b, err := json.Marshal(rec)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding an audit record of %s: %w", run, err)
		}
		sum := sha256.Sum256(b)
		rec["hash"] = hex.EncodeToString(sum[:])
		h = floorAuditHead{Records: h.Records + 1, Hash: rec["hash"].(string)}
		m, err := f.event(f.names.Audit(f.w.flow, run), "io.interlock.audit."+rec["action"].(string), run, now, rec)
		if err != nil {
			return nil, nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, &h, nil
}

// publish stores the transition's audit records (and deadline) while index
// updates the pending index, all asynchronously and awaited together, then
// publishes the events first and second asynchronously and waits for both.
func (f *floor) publish(ctx context.Context, run string, now time.Time, index func(context.Context) error, stored []*nats.Msg, first string, firstData map[string]any, second string, secondData map[string]any) error {
	indexed := make(chan error, 1)
	go func() { indexed <- index(ctx) }()
	storedErr := f.publishAll(ctx, stored)
	if err := <-indexed; err != nil {
		return err
	}
	if storedErr != nil {
		return storedErr
	}
	evs := make([]*nats.Msg, 0, 2)
	for _, e := range []struct {
		kind string
		data map[string]any
	}{{first, firstData}, {second, secondData}} {
		m, err := f.event(f.names.Event(f.w.flow, run, e.kind), "io.interlock.run."+e.kind, run, now, e.data)
		if err != nil {
			return err
		}
		evs = append(evs, m)
	}
	return f.publishAll(ctx, evs)
}

// publishAll publishes msgs and waits for every ack. Messages bound for a
// stream that gets several go one at a time, each acknowledged before the
// next, as Interlock's publisher sends a transition's audit records and
// its events (so that they are stored in order whatever fails); a
// stream's only message goes asynchronously, awaited with the rest.
func (f *floor) publishAll(ctx context.Context, msgs []*nats.Msg) error {
	count := map[string]int{}
	for _, m := range msgs {
		count[floorStream(m.Subject)]++
	}
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	var inOrder []*nats.Msg
	for _, m := range msgs {
		if count[floorStream(m.Subject)] > 1 {
			inOrder = append(inOrder, m)
			continue
		}
		fut, err := f.js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("publishing %s: %w", m.Subject, err)
		}
		futures = append(futures, fut)
	}
	var first error
	for _, m := range inOrder {
		if _, err := f.js.PublishMsg(ctx, m); err != nil {
			first = fmt.Errorf("publishing %s: %w", m.Subject, err)
			break
		}
	}
	for _, fut := range futures {
		select {
		case <-fut.Ok():
		case err := <-fut.Err():
			if first == nil {
				first = fmt.Errorf("publishing %s: %w", fut.Msg().Subject, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("publishing %s: %w", fut.Msg().Subject, ctx.Err())
		}
	}
	return first
}

// floorStream names the stream of a subject by its second token: in,
// schedule (the schedule stream), ev or audit.
func floorStream(subject string) string {
	return strings.SplitN(subject, ".", 3)[1]
}

func (f *floor) event(subject, typ, run string, now time.Time, data map[string]any) (*nats.Msg, error) {
	ev := floorEvent{
		SpecVersion: "1.0", ID: newID(), Source: "interlock/floor", Type: typ, Subject: run,
		Time: now, DataContentType: "application/json", Flow: f.w.flow, Data: data,
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", subject, err)
	}
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set("Content-Type", "application/cloudevents+json")
	m.Header.Set(jetstream.MsgIDHeader, ev.ID)
	return m, nil
}
