package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/wire"
)

// The minimum floor does by hand the fewest JetStream writes a durable
// pause needs, with no Interlock code in the loop (bus and kv are used
// only to name, connect and provision, so the streams and buckets are
// configured as Interlock's):
//
//	start:  consume the start from the work queue; KV Create the checkpoint
//	        (~1 KB of JSON, holding the SHA-256 of the resume token);
//	        publish interrupted with the token and wait for its ack; ack.
//	resume: consume the resume; KV Get the checkpoint; check the token
//	        against its hash; KV Update it completed from the revision
//	        read; publish completed and wait for its ack; ack.
//
// Three messages are stored per phase (the command, the checkpoint, the
// event) and nothing else: no audit record, no pending index, no second
// event, no finished index, no schedule. It runs the question workload
// only: an approval's deadline needs a schedule, a fourth write.
// TestMinimumStoresThreeMessagesPerPhase keeps it so.

// errMinimumApproval is the minimum floor asked to run the approval
// workload.
var errMinimumApproval = errors.New("the minimum floor runs the question workload only: an approval's deadline needs a schedule, a fourth write per pause; use --workload question, or leave minimum out of --systems")

// minimumDoc is the minimum floor's checkpoint document.
type minimumDoc struct {
	Flow      string         `json:"flow"`
	Run       string         `json:"run"`
	Status    string         `json:"status"`
	Node      string         `json:"node"`
	State     map[string]any `json:"state"`
	RequestID string         `json:"requestId,omitempty"`
	// TokenHash is the hex SHA-256 of the resume token: the token itself
	// is only in the interrupted event.
	TokenHash string              `json:"tokenHash,omitempty"`
	Questions []map[string]string `json:"questions,omitempty"`
	CreatedAt time.Time           `json:"createdAt"`
	UpdatedAt time.Time           `json:"updatedAt"`
	Cause     string              `json:"cause"`
	// Notes pads the document to about the floor's size.
	Notes string `json:"notes"`
}

// minimumDocPadding makes a waiting checkpoint of the minimum floor
// about the size of the floor's.
var minimumDocPadding = strings.Repeat("n", 700)

// minimum is the minimum floor's worker: a durable pull consumer on the
// work-queue stream, configured as Interlock's and the floor's, feeding a
// fixed pool of goroutines.
type minimum struct {
	*pool
	runs jetstream.KeyValue
}

// startMinimum provisions the streams and buckets of names on the server
// at url, with replicas replicas, and starts a pool of workers goroutines
// consuming the inbound stream and doing the minimum work of workload w.
func startMinimum(ctx context.Context, url string, names wire.Names, w workload, workers, replicas int) (_ *minimum, err error) {
	p, err := connectPool(ctx, url, "bench-minimum-worker", "minimum floor", names, w, replicas)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = p.stop(ctx)
		}
	}()
	m := &minimum{pool: p}
	p.start, p.resume = m.start, m.resume
	if m.runs, err = p.js.KeyValue(ctx, names.RunsBucket()); err != nil {
		return nil, fmt.Errorf("binding bucket %s: %w", names.RunsBucket(), err)
	}
	if err := p.run(ctx, workers); err != nil {
		return nil, err
	}
	return m, nil
}

// tokenHash is the hex SHA-256 of a resume token.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// start creates the run's checkpoint waiting on its question and
// announces the interrupt.
func (m *minimum) start(ctx context.Context, cmd command) error {
	run, key := cmd.Subject, m.w.flow+"."+cmd.Subject
	now := time.Now().UTC()
	token := newID()
	state := cmd.Data.State
	if state == nil {
		state = map[string]any{}
	}
	questions := []map[string]string{{"field": "answer", "question": "Go ahead?"}}
	doc := minimumDoc{
		Flow: m.w.flow, Run: run, Status: "waiting", Node: "ask", State: state, RequestID: "rq_" + newID(),
		TokenHash: tokenHash(token), Questions: questions, CreatedAt: now, UpdatedAt: now, Cause: cmd.ID, Notes: minimumDocPadding,
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding checkpoint %s: %w", key, err)
	}
	rev, err := m.runs.Create(ctx, key, b)
	if err != nil {
		return fmt.Errorf("creating checkpoint %s: %w", key, err)
	}
	return m.announce(ctx, run, now, "interrupted", map[string]any{
		"flow": m.w.flow, "run": run, "node": doc.Node, "requestId": doc.RequestID,
		"kind": "question", "checkpoint": rev, "resumeToken": token, "questions": questions,
	})
}

// resume checks the resume's token against the checkpoint, writes the
// checkpoint completed from the revision read, and announces it.
func (m *minimum) resume(ctx context.Context, cmd command) error {
	run, key := cmd.Subject, m.w.flow+"."+cmd.Subject
	e, err := m.runs.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("reading checkpoint %s: %w", key, err)
	}
	var doc minimumDoc
	if err := json.Unmarshal(e.Value(), &doc); err != nil {
		return fmt.Errorf("decoding checkpoint %s: %w", key, err)
	}
	got := tokenHash(cmd.Data.ResumeToken)
	if doc.Status != "waiting" || subtle.ConstantTimeCompare([]byte(got), []byte(doc.TokenHash)) != 1 {
		return fmt.Errorf("resume of %s does not match its checkpoint (status %s)", key, doc.Status)
	}
	now := time.Now().UTC()
	doc.State["answer"] = cmd.Data.Answers["answer"]
	doc.Status, doc.Node, doc.TokenHash, doc.Questions = "completed", "", "", nil
	doc.UpdatedAt, doc.Cause = now, cmd.ID
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding checkpoint %s: %w", key, err)
	}
	rev, err := m.runs.Update(ctx, key, b, e.Revision())
	if err != nil {
		return fmt.Errorf("completing checkpoint %s from revision %d: %w", key, e.Revision(), err)
	}
	return m.announce(ctx, run, now, "completed", map[string]any{
		"flow": m.w.flow, "run": run, "state": doc.State, "checkpoint": rev,
	})
}

// announce publishes the run's event of kind with data, a structured
// CloudEvent as the floor's, and waits for its ack.
func (m *minimum) announce(ctx context.Context, run string, now time.Time, kind string, data map[string]any) error {
	subject := m.names.Event(m.w.flow, run, kind)
	ev := floorEvent{
		SpecVersion: "1.0", ID: newID(), Source: "interlock/minimum", Type: "io.interlock.run." + kind, Subject: run,
		Time: now, DataContentType: "application/json", Flow: m.w.flow, Data: data,
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", subject, err)
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	msg.Header.Set("Content-Type", "application/cloudevents+json")
	msg.Header.Set(jetstream.MsgIDHeader, ev.ID)
	if _, err := m.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publishing %s: %w", subject, err)
	}
	return nil
}
