package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/wire"
)

// The floor does by hand the JetStream work the protocol needs for one run,
// with no Interlock code in the loop (bus is used only to name, connect and
// provision, so the streams and buckets are configured as Interlock's):
//
//	start:  consume the start from the work queue; KV Create the checkpoint
//	        (~1 KB of JSON); KV Put the pending entry while publishing one
//	        audit record; publish started and interrupted; ack.
//	resume: consume the resume; KV Get the checkpoint; KV Update it with
//	        the revision read; KV Delete the pending entry while publishing
//	        one audit record; publish resumed and completed; ack.
//
// Every publish carries a Nats-Msg-Id. The pending entry is written while
// the audit record is stored, as Interlock does, and both are acknowledged
// before the two events are published asynchronously and awaited together.

// floorHandlerTimeout bounds the handling of one message.
const floorHandlerTimeout = 25 * time.Second

// floorCommand is an inbound command of the floor: a CloudEvents-shaped
// envelope encoded with encoding/json.
type floorCommand struct {
	SpecVersion string    `json:"specversion"`
	ID          string    `json:"id"`
	Source      string    `json:"source"`
	Type        string    `json:"type"`
	Subject     string    `json:"subject"`
	Time        time.Time `json:"time"`
	Data        struct {
		ResumeToken string            `json:"resumeToken,omitempty"`
		Answers     map[string]string `json:"answers,omitempty"`
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
	State     map[string]string `json:"state"`
	Interrupt *floorInterrupt   `json:"interrupt,omitempty"`
	Token     string            `json:"token,omitempty"`
	CreatedAt time.Time         `json:"createdAt"`
	UpdatedAt time.Time         `json:"updatedAt"`
	Cause     string            `json:"cause"`
	// Notes pads the document to about a kilobyte, the size of a realistic
	// checkpoint.
	Notes string `json:"notes"`
}

type floorInterrupt struct {
	RequestID string              `json:"requestId"`
	Kind      string              `json:"kind"`
	Questions []map[string]string `json:"questions"`
	AskedAt   time.Time           `json:"askedAt"`
}

// floorDocPadding makes a waiting floor checkpoint about 1 KB.
var floorDocPadding = strings.Repeat("n", 560)

// floorProtocol is the client side of the floor.
type floorProtocol struct{}

func (floorProtocol) start(names wire.Names, run string) (*nats.Msg, error) {
	return floorMsg(names.In(flowName, "start"), "start", run, "", nil)
}

func (floorProtocol) resume(names wire.Names, run string, interrupted *nats.Msg) (*nats.Msg, error) {
	var ev struct {
		Data struct {
			ResumeToken string `json:"resumeToken"`
		} `json:"data"`
	}
	if err := json.Unmarshal(interrupted.Data, &ev); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", interrupted.Subject, err)
	}
	return floorMsg(names.In(flowName, "resume"), "resume", run, ev.Data.ResumeToken, map[string]string{"answer": "ok"})
}

func floorMsg(subject, verb, run, token string, answers map[string]string) (*nats.Msg, error) {
	c := floorCommand{SpecVersion: "1.0", ID: newID(), Source: clientSource, Type: "io.interlock.run." + verb, Subject: run, Time: time.Now().UTC()}
	c.Data.ResumeToken, c.Data.Answers = token, answers
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
	nc            *nats.Conn
	js            jetstream.JetStream
	names         wire.Names
	runs, pending jetstream.KeyValue
	iter          jetstream.MessagesContext
	msgs          chan jetstream.Msg
	wg            sync.WaitGroup
	abort         context.CancelFunc
	stopOnce      sync.Once
	stopErr       error

	mu  sync.Mutex
	err error
}

// startFloor provisions the streams and buckets of names on the server at
// url and starts a pool of workers goroutines consuming the inbound stream.
func startFloor(ctx context.Context, url string, names wire.Names, workers int) (_ *floor, err error) {
	nc, js, err := wire.Connect(ctx, wire.ConnConfig{URL: url, Name: "bench-floor-worker"})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			nc.Close()
		}
	}()
	if err := bus.Provision(ctx, js, names, bus.StreamConfig{}); err != nil {
		return nil, err
	}
	f := &floor{nc: nc, js: js, names: names, msgs: make(chan jetstream.Msg)}
	if f.runs, err = js.KeyValue(ctx, names.RunsBucket()); err != nil {
		return nil, fmt.Errorf("binding bucket %s: %w", names.RunsBucket(), err)
	}
	if f.pending, err = js.KeyValue(ctx, names.PendingBucket()); err != nil {
		return nil, fmt.Errorf("binding bucket %s: %w", names.PendingBucket(), err)
	}
	stream, err := js.Stream(ctx, names.InStream())
	if err != nil {
		return nil, fmt.Errorf("binding stream %s: %w", names.InStream(), err)
	}
	// The same consumer configuration as bus.Worker's.
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       names.Consumer(),
		FilterSubject: names.Prefix + ".in.>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       bus.DefaultAckWait,
		MaxDeliver:    -1,
		MaxAckPending: 4 * workers,
	})
	if err != nil {
		return nil, fmt.Errorf("creating consumer %s: %w", names.Consumer(), err)
	}
	if f.iter, err = cons.Messages(jetstream.PullMaxMessages(workers)); err != nil {
		return nil, fmt.Errorf("consuming %s: %w", names.Consumer(), err)
	}
	base, abort := context.WithCancel(context.WithoutCancel(ctx))
	f.abort = abort
	f.wg.Go(f.dispatch)
	for range workers {
		f.wg.Go(func() {
			for msg := range f.msgs {
				f.handle(base, msg)
			}
		})
	}
	return f, nil
}

// dispatch hands messages to the pool until the iterator is closed.
func (f *floor) dispatch() {
	defer close(f.msgs)
	for {
		msg, err := f.iter.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		if err != nil {
			continue // a missed heartbeat or the like; the iterator carries on
		}
		f.msgs <- msg
	}
}

// stop stops consuming, waits for the pool, and closes the connection.
// Stopping twice is safe.
func (f *floor) stop(ctx context.Context) error {
	f.stopOnce.Do(func() { f.stopErr = f.shutdown(ctx) })
	return f.stopErr
}

func (f *floor) shutdown(ctx context.Context) error {
	f.iter.Drain()
	done := make(chan struct{})
	go func() {
		f.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-time.After(stopWait):
		err = fmt.Errorf("floor workers did not stop within %s", stopWait)
		f.abort()
		f.iter.Stop()
		<-done
	case <-ctx.Done():
		err = fmt.Errorf("stopping floor workers: %w", ctx.Err())
		f.abort()
		f.iter.Stop()
		<-done
	}
	f.abort()
	f.nc.Close()
	return err
}

// failure is the first error a worker met, if any.
func (f *floor) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *floor) handle(base context.Context, msg jetstream.Msg) {
	ctx, cancel := context.WithTimeout(base, floorHandlerTimeout)
	defer cancel()
	var cmd floorCommand
	err := json.Unmarshal(msg.Data(), &cmd)
	switch {
	case err != nil:
		err = fmt.Errorf("decoding %s: %w", msg.Subject(), err)
	case strings.HasSuffix(msg.Subject(), ".start"):
		err = f.start(ctx, cmd)
	case strings.HasSuffix(msg.Subject(), ".resume"):
		err = f.resume(ctx, cmd)
	default:
		err = fmt.Errorf("unexpected subject %s", msg.Subject())
	}
	if err != nil {
		f.mu.Lock()
		if f.err == nil {
			f.err = fmt.Errorf("floor worker: %w", err)
		}
		f.mu.Unlock()
		// Tell the waiting client at once rather than let it time out.
		if cmd.Subject != "" {
			_ = f.nc.Publish(f.names.Event(flowName, cmd.Subject, "failed"), []byte(err.Error()))
		}
		_ = msg.Term()
		return
	}
	_ = msg.Ack()
}

func (f *floor) start(ctx context.Context, cmd floorCommand) error {
	run, key := cmd.Subject, flowName+"."+cmd.Subject
	now := time.Now().UTC()
	requestID, token := "rq_"+newID(), newID()
	doc := floorDoc{
		Flow: flowName, Run: run, Status: "waiting", Node: "ask", State: map[string]string{},
		Interrupt: &floorInterrupt{RequestID: requestID, Kind: "question", AskedAt: now,
			Questions: []map[string]string{{"field": "answer", "question": "Go ahead?"}}},
		Token: token, CreatedAt: now, UpdatedAt: now, Cause: cmd.ID, Notes: floorDocPadding,
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding checkpoint %s: %w", key, err)
	}
	rev, err := f.runs.Create(ctx, key, b)
	if err != nil {
		return fmt.Errorf("creating checkpoint %s: %w", key, err)
	}
	p, err := json.Marshal(map[string]any{"flow": flowName, "run": run, "node": "ask", "requestId": requestID,
		"kind": "question", "checkpoint": rev, "fields": []string{"answer"}, "askedAt": now})
	if err != nil {
		return fmt.Errorf("encoding pending entry %s: %w", key, err)
	}
	index := func(ctx context.Context) error {
		if _, err := f.pending.Put(ctx, key, p); err != nil {
			return fmt.Errorf("writing pending entry %s: %w", key, err)
		}
		return nil
	}
	return f.publish(ctx, run, now, index, "started",
		map[string]any{"by": cmd.Source, "eventId": cmd.ID, "action": "started"},
		map[string]any{"flow": flowName, "run": run, "checkpoint": rev},
		"interrupted",
		map[string]any{"flow": flowName, "run": run, "node": "ask", "requestId": requestID, "kind": "question",
			"questions": doc.Interrupt.Questions, "checkpoint": rev, "resumeToken": token})
}

func (f *floor) resume(ctx context.Context, cmd floorCommand) error {
	run, key := cmd.Subject, flowName+"."+cmd.Subject
	e, err := f.runs.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("reading checkpoint %s: %w", key, err)
	}
	var doc floorDoc
	if err := json.Unmarshal(e.Value(), &doc); err != nil {
		return fmt.Errorf("decoding checkpoint %s: %w", key, err)
	}
	if doc.Status != "waiting" || doc.Token != cmd.Data.ResumeToken {
		return fmt.Errorf("resume of %s does not match its checkpoint (status %s)", key, doc.Status)
	}
	now := time.Now().UTC()
	requestID := doc.Interrupt.RequestID
	doc.Status, doc.Node, doc.Interrupt, doc.Token, doc.UpdatedAt, doc.Cause = "completed", "", nil, "", now, cmd.ID
	doc.State["answer"] = cmd.Data.Answers["answer"]
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding checkpoint %s: %w", key, err)
	}
	rev, err := f.runs.Update(ctx, key, b, e.Revision())
	if err != nil {
		return fmt.Errorf("updating checkpoint %s from revision %d: %w", key, e.Revision(), err)
	}
	index := func(ctx context.Context) error {
		if err := f.pending.Delete(ctx, key); err != nil {
			return fmt.Errorf("deleting pending entry %s: %w", key, err)
		}
		return nil
	}
	return f.publish(ctx, run, now, index, "resumed",
		map[string]any{"by": cmd.Source, "eventId": cmd.ID, "requestId": requestID, "action": "resumed"},
		map[string]any{"flow": flowName, "run": run, "node": "ask", "requestId": requestID, "kind": "question", "checkpoint": rev},
		"completed",
		map[string]any{"flow": flowName, "run": run, "state": doc.State, "checkpoint": rev})
}

// publish stores one audit record while index updates the pending index,
// then publishes the events first and second asynchronously and waits for
// both.
func (f *floor) publish(ctx context.Context, run string, now time.Time, index func(context.Context) error, first string, audit, firstData map[string]any, second string, secondData map[string]any) error {
	am, err := f.event(f.names.Audit(flowName, run), "io.interlock.audit."+first, run, now, audit)
	if err != nil {
		return err
	}
	indexed := make(chan error, 1)
	go func() { indexed <- index(ctx) }()
	_, auditErr := f.js.PublishMsg(ctx, am)
	if err := <-indexed; err != nil {
		return err
	}
	if auditErr != nil {
		return fmt.Errorf("publishing %s: %w", am.Subject, auditErr)
	}
	futures := make([]jetstream.PubAckFuture, 0, 2)
	for _, e := range []struct {
		kind string
		data map[string]any
	}{{first, firstData}, {second, secondData}} {
		m, err := f.event(f.names.Event(flowName, run, e.kind), "io.interlock.run."+e.kind, run, now, e.data)
		if err != nil {
			return err
		}
		fut, err := f.js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("publishing %s: %w", m.Subject, err)
		}
		futures = append(futures, fut)
	}
	for _, fut := range futures {
		select {
		case <-fut.Ok():
		case err := <-fut.Err():
			return fmt.Errorf("publishing %s: %w", fut.Msg().Subject, err)
		case <-ctx.Done():
			return fmt.Errorf("publishing %s: %w", fut.Msg().Subject, ctx.Err())
		}
	}
	return nil
}

func (f *floor) event(subject, typ, run string, now time.Time, data map[string]any) (*nats.Msg, error) {
	ev := floorEvent{SpecVersion: "1.0", ID: newID(), Source: "interlock/floor", Type: typ, Subject: run,
		Time: now, DataContentType: "application/json", Flow: flowName, Data: data}
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
