package e2e_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
)

// payoutFlow asks a question at node ask, then ends; renamed, the node is
// called question.
func payoutFlow(ask string) *engine.Flow {
	return engine.NewFlow[map[string]any]("payout").
		Node(ask, func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "iban", Question: "IBAN?", Type: "string"}}})
			return err
		}).Start(ask).MustBuild()
}

// TestADeployThatDropsANodeRunsWaitAtIsRefusedNamingThem: runs wait at a
// node; a new build of the flow that renamed it does not start (an answer
// would fail those runs hours later), naming the runs and the node, and
// the version each checkpoint records is the old build's. The old build
// starts again; --allow-stranded-runs starts the new one anyway.
func TestADeployThatDropsANodeRunsWaitAtIsRefusedNamingThem(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, t.TempDir())
	old := payoutFlow("ask")
	svc := natstest.Start(t, srv, old)
	_, js := natstest.Connect(t, srv.ClientURL())
	r := &rig{t: t, srv: srv, js: js, names: svc.Names()}
	for _, run := range []string{"p-1", "p-2"} {
		r.start("payout", run, nil)
		r.interrupt("payout", run, 1)
	}
	if cp, _ := r.checkpoint("payout", "p-1"); cp.FlowVersion != old.Version() {
		t.Fatalf("the checkpoint records flow version %q, want the build's %q", cp.FlowVersion, old.Version())
	}
	pending, err := svc.Client("/test").ListPending(t.Context(), client.PendingQuery{Flow: "payout"})
	if err != nil || len(pending.Items) != 2 || pending.Items[0].FlowVersion != old.Version() {
		t.Fatalf("pending %+v (%v): want two entries of version %s", pending.Items, err, old.Version())
	}
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	renamed := payoutFlow("question")
	start := func(cfg interlock.Config) (*interlock.Service, error) {
		cfg.Conn = srv.WorkerConn()
		cfg.Conn.InProcess = nil
		cfg.Secret, cfg.Instance = natstest.Secret, "deploy-test"
		s, err := interlock.Start(t.Context(), cfg)
		if err == nil {
			t.Cleanup(func() { _ = s.Stop(context.WithoutCancel(t.Context())) })
		}
		return s, err
	}
	_, err = start(interlock.Config{Flows: []*engine.Flow{renamed}})
	if !errors.Is(err, interlock.ErrStrandedRuns) {
		t.Fatalf("starting the build without node ask: %v, want ErrStrandedRuns", err)
	}
	for _, want := range []string{"flow payout (version " + renamed.Version() + ")", `2 run(s) wait at nodes it no longer has (at node "ask": p-1, p-2)`, "--allow-stranded-runs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
	again, err := start(interlock.Config{Flows: []*engine.Flow{payoutFlow("ask")}})
	if err != nil {
		t.Fatalf("the old build again: %v", err)
	}
	if err := again.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	logs := &natstest.Buffer{}
	logger := zerolog.New(logs)
	if _, err := start(interlock.Config{Flows: []*engine.Flow{renamed}, AllowStrandedRuns: true, Logger: &logger}); err != nil {
		t.Fatalf("with AllowStrandedRuns: %v", err)
	}
	// No running worker has the version the runs paused on: the start
	// says so, naming it and how many wait.
	if want := "2 run(s) of flow payout wait on version " + old.Version() + ", which no running worker has"; !strings.Contains(logs.String(), want) {
		t.Errorf("the start's log does not say %q:\n%s", want, logs.String())
	}
	if cp, _ := r.checkpoint("payout", "p-2"); cp.Status != engine.Waiting {
		t.Errorf("p-2 is %s, want still waiting", cp.Status)
	}
}
