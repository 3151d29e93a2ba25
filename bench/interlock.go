package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/wire"
)

// secret is the fixed resume-token secret of the benchmark's services.
var secret = []byte("interlock-bench-secret-32-bytes!")

// clientSource is the CloudEvents source of the benchmark's clients.
const clientSource = "/bench/client"

// stopWait bounds how long a service takes to stop.
const stopWait = 30 * time.Second

// interlockFlow returns the flow of workload w.
func interlockFlow(w workload) (*engine.Flow, error) {
	if w.approval {
		return refundFlow()
	}
	return questionFlow()
}

// questionFlow is one node that asks one question and then completes.
func questionFlow() (*engine.Flow, error) {
	return engine.NewFlow[map[string]any](questionWorkload.flow).
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

// refund is the state of the approval workload's flow.
type refund struct {
	OrderID    string  `json:"orderId"`
	Amount     float64 `json:"amount"`
	Currency   string  `json:"currency"`
	RefundID   string  `json:"refundId,omitempty"`
	ApprovedBy string  `json:"approvedBy,omitempty"`
	Outcome    string  `json:"outcome,omitempty"`
}

// refundFlow is examples/refund's review and issue_refund: an approval of
// the refund with a deadline that escalates, then the refund, issued once
// as a step.
func refundFlow() (*engine.Flow, error) {
	return engine.NewFlow[refund](approvalWorkload.flow).
		Node(reviewNode, func(ctx context.Context, n *engine.Node[refund]) error {
			s := n.State()
			_, err := n.Approve(ctx, engine.Approval{
				Action:       refundAction,
				Args:         map[string]any{"orderId": s.OrderID, "amount": s.Amount, "currency": s.Currency},
				Reason:       refundReason,
				ApproverRole: supervisorRole,
				Timeout:      refundTimeout,
				OnTimeout:    engine.Escalate(financeLeadRole, refundTimeout, engine.Policy{Action: engine.OnTimeoutExpire}),
			})
			return err
		}).
		Node(issueRefundNode, func(ctx context.Context, n *engine.Node[refund]) error {
			d, ok := n.Decision(refundAction)
			if !ok || !d.Approved() {
				return fmt.Errorf("no approved decision on %s", refundAction)
			}
			id, err := engine.Step(ctx, n, refundStep, func(context.Context) (string, error) {
				return refundID(), nil
			})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"refundId": id, "approvedBy": d.Approver, "outcome": "refunded"})
		}).
		Start(reviewNode).
		Edge(reviewNode, issueRefundNode).
		Edge(issueRefundNode, engine.End).
		Build()
}

// startInterlock starts a service named instance running the flow of w on
// the server at url, under prefix, handling workers messages at once, with
// streams and buckets of replicas replicas.
func startInterlock(ctx context.Context, url, prefix, instance string, w workload, workers, replicas int) (*interlock.Service, error) {
	flow, err := interlockFlow(w)
	if err != nil {
		return nil, err
	}
	svc, err := interlock.Start(ctx, interlock.Config{
		Flows:       []*engine.Flow{flow},
		Conn:        connConfig(url, "bench-interlock-"+prefix),
		Prefix:      prefix,
		Secret:      secret,
		Instance:    instance,
		Concurrency: workers,
		Streams:     bus.StreamConfig{Replicas: replicas},
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

// interlockProtocol is the client side of Interlock. Its commands are
// the floor's (see [command]): the protocol's structured CloudEvents, with
// the event id as Nats-Msg-Id.
type interlockProtocol struct{ w workload }

func (p interlockProtocol) start(names wire.Names, run string) (*nats.Msg, error) {
	return floorProtocol(p).start(names, run)
}

func (p interlockProtocol) resume(names wire.Names, run string, interrupted *nats.Msg) (*nats.Msg, error) {
	return resumeCommand(p.w, names, run, interrupted)
}

// checkpointSizes returns the size of every stored revision of the
// checkpoint of run of flow, oldest first.
func checkpointSizes(ctx context.Context, js jetstream.JetStream, names wire.Names, flow, run string) ([]int, error) {
	kv, err := js.KeyValue(ctx, names.RunsBucket())
	if err != nil {
		return nil, fmt.Errorf("binding bucket %s: %w", names.RunsBucket(), err)
	}
	key := flow + "." + run
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
