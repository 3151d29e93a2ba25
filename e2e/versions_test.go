package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// payoutOf is version v of the payout flow: a question at node, then a
// step that writes which version carried the run on ("by").
func payoutOf(v, node string, m map[string]engine.Migration) *engine.Flow {
	b := engine.NewFlow[map[string]any]("payout").Version(v).
		Node(node, func(ctx context.Context, n *engine.Node[map[string]any]) error {
			if _, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "iban", Question: "IBAN?", Type: "string"}}}); err != nil {
				return err
			}
			return n.Update(engine.Update{"by": v})
		}).Start(node)
	for from, mig := range m {
		b.Migrate(from, mig)
	}
	return b.MustBuild()
}

// startVersion starts a worker process running flows on srv, stopped at
// cleanup (or before, by the test).
func startVersion(t *testing.T, srv *bus.Server, instance string, flows ...*engine.Flow) *interlock.Service {
	t.Helper()
	return natstest.StartWith(t, srv, interlock.Config{Flows: flows, Secret: natstest.Secret, Instance: instance})
}

// held counts the commands held in the inbound stream for version v of
// flow.
func (r *rig) held(flow, v string) uint64 {
	r.t.Helper()
	st, err := r.js.Stream(r.t.Context(), r.names.InStream())
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := st.Info(r.t.Context(), jetstream.WithSubjectFilter(r.names.HeldFilter(flow, v)))
	if err != nil {
		r.t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// by is the version that carried run on, from its final state.
func (r *rig) by(flow, run string) string {
	r.t.Helper()
	cp, _ := r.checkpoint(flow, run)
	var by string
	_ = json.Unmarshal(cp.State["by"], &by)
	return by
}

// TestARunIsCarriedOnByAWorkerOfItsVersionOnly: workers of versions 1
// and 2 of a flow run side by side; an answer to a run that paused on
// version 1 is never run by version 2's code: while no worker of version
// 1 runs, it waits, held (not failed, not dead-lettered), and a worker of
// version 1 that starts again carries the run on. New runs start on the
// newest version, and a process that runs other flows holds the commands
// of payout it takes for payout's workers.
func TestARunIsCarriedOnByAWorkerOfItsVersionOnly(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, t.TempDir())
	v1 := startVersion(t, srv, "v1", payoutOf("1", "ask", nil))
	// A process that runs another flow only takes its share of the
	// commands too: those for payout are held for a worker of payout's.
	startVersion(t, srv, "bookings", booking.Flow())
	_, js := natstest.Connect(t, srv.ClientURL())
	r := &rig{t: t, srv: srv, js: js, names: v1.Names()}
	req := map[string]protocol.Interrupted{}
	for _, run := range []string{"p-1", "p-2"} {
		r.start("payout", run, nil)
		req[run] = r.interrupt("payout", run, 1)
	}
	startVersion(t, srv, "v2", payoutOf("2", "ask", nil))
	// Every worker learns of version 2 from the workers bucket, a moment
	// after it starts.
	probe := 0
	natstest.Eventually(t, "five starts in a row on version 2", func() bool {
		for range 5 {
			probe++
			run := fmt.Sprintf("probe-%d", probe)
			r.start("payout", run, nil)
			r.interrupt("payout", run, 1)
			if cp, _ := r.checkpoint("payout", run); cp.FlowVersion != "2" {
				return false
			}
		}
		return true
	})
	// Side by side: every answer to a run of version 1 is version 1's.
	r.resume("payout", "p-1", map[string]any{"requestId": req["p-1"].RequestID, "resumeToken": req["p-1"].ResumeToken, "answers": map[string]any{"iban": "DE1"}})
	if ref := r.refusalOrNone("payout", "p-1"); ref != "" {
		t.Fatalf("refused: %s", ref)
	}
	r.wait("payout", "p-1", "completed", 1)
	if by := r.by("payout", "p-1"); by != "1" {
		t.Errorf("p-1, paused on version 1, was carried on by version %q", by)
	}
	// A new run starts on the newest version, whichever worker takes its
	// start, and is carried on by it.
	for _, run := range []string{"p-3", "p-4", "p-5", "p-6", "p-7", "p-8"} {
		r.start("payout", run, nil)
		req[run] = r.interrupt("payout", run, 1)
		if cp, _ := r.checkpoint("payout", run); cp.FlowVersion != "2" {
			t.Errorf("%s started on version %s, want the newest, 2", run, cp.FlowVersion)
		}
	}

	// Version 1 stops: its run's answer waits for it.
	if err := v1.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.resume("payout", "p-2", map[string]any{"requestId": req["p-2"].RequestID, "resumeToken": req["p-2"].ResumeToken, "answers": map[string]any{"iban": "DE2"}})
	natstest.Eventually(t, "the answer to p-2 held for version 1", func() bool { return r.held("payout", "1") == 1 })
	if cp, _ := r.checkpoint("payout", "p-2"); cp.Status != engine.Waiting || cp.FlowVersion != "1" {
		t.Fatalf("p-2 while no worker of version 1 runs: %s at version %s, want waiting at 1", cp.Status, cp.FlowVersion)
	}
	if dlq, err := js.Stream(t.Context(), r.names.DeadLetterStream()); err != nil || dlq.CachedInfo().State.Msgs != 0 {
		t.Errorf("dead letters: %v, want none", err)
	}
	// It carries on once a worker of version 1 runs again.
	startVersion(t, srv, "v1-again", payoutOf("1", "ask", nil))
	r.wait("payout", "p-2", "completed", 1)
	if by := r.by("payout", "p-2"); by != "1" {
		t.Errorf("p-2 was carried on by version %q, want 1", by)
	}
	r.resume("payout", "p-3", map[string]any{"requestId": req["p-3"].RequestID, "resumeToken": req["p-3"].ResumeToken, "answers": map[string]any{"iban": "DE3"}})
	r.wait("payout", "p-3", "completed", 1)
	if by := r.by("payout", "p-3"); by != "2" {
		t.Errorf("p-3, started on version 2, was carried on by version %q", by)
	}
	if n := r.held("payout", "1"); n != 0 {
		t.Errorf("%d commands still held for version 1", n)
	}
}

// TestAMigrationCarriesARunOfAnEarlierVersionOn: version 3 renames the
// node runs of version 1 wait at, and declares the move; with no worker
// of version 1, the answer to such a run is taken by version 3, which
// moves the run in one audited transition (its request id kept) and
// carries it on; a worker that renames the node without a migration does
// not start.
func TestAMigrationCarriesARunOfAnEarlierVersionOn(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, t.TempDir())
	v1 := startVersion(t, srv, "v1", payoutOf("1", "ask", nil))
	_, js := natstest.Connect(t, srv.ClientURL())
	r := &rig{t: t, srv: srv, js: js, names: v1.Names()}
	r.start("payout", "p-1", map[string]any{"amount": 10})
	in := r.interrupt("payout", "p-1", 1)
	if err := v1.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	cfg := interlock.Config{Flows: []*engine.Flow{payoutOf("3", "question", nil)}, Secret: natstest.Secret, Instance: "v3-bare"}
	cfg.Conn = srv.WorkerConn()
	cfg.Conn.InProcess = nil
	if s, err := interlock.Start(t.Context(), cfg); err == nil {
		_ = s.Stop(t.Context())
		t.Fatal("a build that renamed node ask without a migration started")
	}

	v3 := startVersion(t, srv, "v3", payoutOf("3", "question", map[string]engine.Migration{"1": {
		Nodes: map[string]string{"ask": "question"},
		State: func(d engine.Doc) (engine.Doc, error) {
			d["amountCents"] = json.RawMessage(`1000`)
			delete(d, "amount")
			return d, nil
		},
	}}))
	r.resume("payout", "p-1", map[string]any{"requestId": in.RequestID, "resumeToken": in.ResumeToken, "answers": map[string]any{"iban": "DE1"}})
	r.wait("payout", "p-1", "completed", 1)
	cp, _ := r.checkpoint("payout", "p-1")
	if by := r.by("payout", "p-1"); by != "3" || cp.FlowVersion != "3" || string(cp.State["amountCents"]) != "1000" || cp.State["amount"] != nil {
		t.Errorf("p-1 after the migration: by %q, version %s, state %s", by, cp.FlowVersion, cp.State)
	}
	recs, err := v3.Client("/test").Audit(t.Context(), "payout", "p-1")
	if err != nil {
		t.Fatal(err)
	}
	var moved *protocol.AuditRecord
	for i := range recs {
		if recs[i].Action == protocol.ActionMigrated {
			moved = &recs[i]
		}
	}
	if moved == nil || moved.Migration == nil || moved.Migration.From != "1" || moved.Migration.To != "3" || moved.Migration.Node != "ask" ||
		moved.Node != "question" || moved.RequestID != in.RequestID {
		t.Fatalf("the migration's audit record: %+v", moved)
	}
	if rep, err := v3.Client("/test").VerifyAudit(t.Context(), "payout", "p-1"); err != nil || !rep.Intact {
		t.Errorf("the audit chain across the migration: %+v (%v)", rep, err)
	}
}

// refusalOrNone waits until run completes or is refused, and returns the
// refusal's event, or "" when it completed.
func (r *rig) refusalOrNone(flow, run string) string {
	r.t.Helper()
	rs := natstest.WaitFor(r.t, r.js, r.names.EventStream(), r.names.Event(flow, run, ">"), func(rs []natstest.Received) bool {
		return natstest.Count(rs, "refused") > 0 || natstest.Count(rs, "completed") > 0
	})
	for _, m := range rs {
		if m.Kind == "refused" {
			return string(m.Data)
		}
	}
	return ""
}

// TestAMigrateCommandMovesAWaitingRunOrSaysWhyNot: a migrate is held for
// a worker of its target version, which moves the run (its request id
// kept) and records who asked; a second one is refused stale_checkpoint;
// a version whose flow has neither a migration nor the run's node is
// refused invalid_payload, naming the node.
func TestAMigrateCommandMovesAWaitingRunOrSaysWhyNot(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, t.TempDir())
	v1 := startVersion(t, srv, "v1", payoutOf("1", "ask", nil))
	c := v1.Client("/ops")
	for _, run := range []string{"p-1", "p-2"} {
		if _, err := c.Start(t.Context(), "payout", run, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	in, err := c.LastInterrupt(t.Context(), "payout", "p-1")
	if err != nil {
		t.Fatal(err)
	}
	startVersion(t, srv, "v2", payoutOf("2", "ask", nil))
	rec, err := c.Migrate(t.Context(), "payout", "p-1", "1", "2", "retiring 1")
	if err != nil || rec.Action != protocol.ActionMigrated || rec.RequestID != in.RequestID || rec.Reason != "retiring 1" || rec.Migration.To != "2" {
		t.Fatalf("migrate p-1: %+v (%v)", rec, err)
	}
	if cp, _ := c.Checkpoint(t.Context(), "payout", "p-1"); cp.FlowVersion != "2" || cp.Interrupt == nil || cp.Interrupt.RequestID != in.RequestID {
		t.Fatalf("p-1 after the migrate: version %s, interrupt %+v", cp.FlowVersion, cp.Interrupt)
	}
	var ref *client.RefusedError
	if _, err := c.Migrate(t.Context(), "payout", "p-1", "1", "2", ""); !errors.As(err, &ref) || ref.Refused.Code != protocol.CodeStaleCheckpoint {
		t.Errorf("a second migrate: %v, want stale_checkpoint", err)
	}
	natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{payoutOf("3", "question", nil)}, Secret: natstest.Secret, Instance: "v3", AllowStrandedRuns: true})
	if _, err := c.Migrate(t.Context(), "payout", "p-2", "1", "3", ""); !errors.As(err, &ref) || ref.Refused.Code != protocol.CodeInvalidPayload ||
		!strings.Contains(ref.Refused.Message, `node "ask" of version 1, which version 3 does not have`) {
		t.Errorf("migrating p-2 to a version without its node: %v", err)
	}
}
