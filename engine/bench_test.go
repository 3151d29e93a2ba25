package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/protocol"
)

// tokenPublisher keeps the last resume token it published and drops the
// rest, so that a benchmark's memory does not grow with its runs.
type tokenPublisher struct {
	mu    sync.Mutex
	token map[string]string
}

func (p *tokenPublisher) Publish(_ context.Context, msgs []engine.Message, _ bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		if in, ok := m.Data.(*protocol.Interrupted); ok {
			p.token[m.Run] = in.ResumeToken
		}
	}
	return nil
}

// BenchmarkQuestionRun measures the engine's CPU for one run of a
// one-question flow, start then answer, on the in-memory store (which
// encodes and decodes the checkpoint as JSON, as the KV store does):
// checkpoints, audit chain, outbox. Publishing is not included.
func BenchmarkQuestionRun(b *testing.B) {
	f, err := engine.NewFlow[map[string]any]("bench").
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "answer", Question: "Go ahead?"}}})
			return err
		}).
		Start("ask").Edge("ask", engine.End).Build()
	if err != nil {
		b.Fatal(err)
	}
	pub := &tokenPublisher{token: map[string]string{}}
	r, err := engine.NewRunner(engine.Config{Flows: []*engine.Flow{f}, Store: enginetest.NewStore(), Publisher: pub,
		Secret: []byte("bench-secret-bench-secret-bench-secret")})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	answer := map[string]json.RawMessage{"answer": json.RawMessage(`"ok"`)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		run := fmt.Sprintf("r-%d", i)
		out, err := r.Start(ctx, engine.Start{Flow: "bench", Run: run,
			Inbound: engine.Inbound{EventID: "s-" + run, Source: "/bench", Seq: uint64(2*i + 1), FirstDelivery: true}})
		if err != nil || out.Status != engine.Waiting {
			b.Fatalf("start: %v, %+v", err, out)
		}
		out, err = r.Resume(ctx, engine.Resume{Flow: "bench", Run: run, Token: pub.token[run], Answers: answer,
			Inbound: engine.Inbound{EventID: "r-" + run, Source: "/bench", Seq: uint64(2*i + 2), FirstDelivery: true}})
		if err != nil || out.Status != engine.Completed {
			b.Fatalf("resume: %v, %+v", err, out)
		}
		delete(pub.token, run)
	}
}
