package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/wire"
)

// secret is the fixed resume-token secret of the benchmark's services.
var secret = []byte("interlock-bench-secret-32-bytes!")

// clientSource is the CloudEvents source of the benchmark's clients.
const clientSource = "/bench/client"

// stopWait bounds how long a service takes to stop.
const stopWait = 30 * time.Second

// benchFlow is one node that asks one question and then completes.
func benchFlow() (*engine.Flow, error) {
	return engine.NewFlow[map[string]any](flowName).
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{
				{Field: "answer", Question: "Go ahead?"},
			}})
			return err
		}).
		Start("ask").
		Edge("ask", engine.End).
		Build()
}

// startInterlock starts a service running the bench flow on the server at
// url, under prefix, handling workers messages at once.
func startInterlock(ctx context.Context, url, prefix string, workers int) (*interlock.Service, error) {
	flow, err := benchFlow()
	if err != nil {
		return nil, err
	}
	svc, err := interlock.Start(ctx, interlock.Config{
		Flows:       []*engine.Flow{flow},
		Conn:        wire.ConnConfig{URL: url, Name: "bench-interlock-" + prefix},
		Prefix:      prefix,
		Secret:      secret,
		Instance:    "bench",
		Concurrency: workers,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the Interlock service: %w", err)
	}
	return svc, nil
}

func stopInterlock(ctx context.Context, svc *interlock.Service) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWait)
	defer cancel()
	if err := svc.Stop(ctx); err != nil {
		return fmt.Errorf("stopping the Interlock service: %w", err)
	}
	return nil
}

// interlockProtocol speaks the Interlock protocol: structured CloudEvents
// with the event id as Nats-Msg-Id.
type interlockProtocol struct{}

func (interlockProtocol) start(names wire.Names, run string) (*nats.Msg, error) {
	return cloudEvent(names.In(flowName, "start"), events.TypeStart, run, events.Start{})
}

func (interlockProtocol) resume(names wire.Names, run string, interrupted *nats.Msg) (*nats.Msg, error) {
	ev, err := events.Decode(interrupted.Header, interrupted.Data)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", interrupted.Subject, err)
	}
	var in events.Interrupted
	if err := json.Unmarshal(ev.Data(), &in); err != nil {
		return nil, fmt.Errorf("decoding the data of %s: %w", interrupted.Subject, err)
	}
	if in.ResumeToken == "" {
		return nil, fmt.Errorf("%s carries no resumeToken", interrupted.Subject)
	}
	return cloudEvent(names.In(flowName, "resume"), events.TypeResume, run, events.Resume{
		ResumeToken: in.ResumeToken,
		Answers:     map[string]json.RawMessage{"answer": json.RawMessage(`"ok"`)},
	})
}

func cloudEvent(subject, typ, run string, data any) (*nats.Msg, error) {
	id := newID()
	ev, err := events.New(id, clientSource, typ, run, time.Now().UTC(), data)
	if err != nil {
		return nil, err
	}
	body, err := events.Encode(ev)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	msg.Header.Set("Content-Type", events.Structured)
	msg.Header.Set(jetstream.MsgIDHeader, id)
	return msg, nil
}

// checkpointSizes returns the size of every stored revision of run's
// checkpoint, oldest first.
func checkpointSizes(ctx context.Context, js jetstream.JetStream, names wire.Names, run string) ([]int, error) {
	kv, err := js.KeyValue(ctx, names.RunsBucket())
	if err != nil {
		return nil, fmt.Errorf("binding bucket %s: %w", names.RunsBucket(), err)
	}
	key := flowName + "." + run
	hist, err := kv.History(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the history of %s in %s: %w", key, names.RunsBucket(), err)
	}
	sizes := make([]int, 0, len(hist))
	for _, e := range hist {
		sizes = append(sizes, len(e.Value()))
	}
	return sizes, nil
}
