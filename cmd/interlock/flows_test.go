package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
)

// payout is a flow of one question, at version v.
func payout(v string) *engine.Flow {
	return engine.NewFlow[map[string]any]("payout").Version(v).
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "iban", Question: "IBAN?", Type: "string"}}})
			return err
		}).Start("ask").MustBuild()
}

// TestFlowsListsEachVersionItsWorkersAndTheRunsWaitingOnIt: two worker
// processes run versions 1 and 2 of a flow side by side; interlock flows
// says which runs which and how many runs wait under each, and once the
// worker of version 1 stops, that its runs wait on a version no running
// worker has.
func TestFlowsListsEachVersionItsWorkersAndTheRunsWaitingOnIt(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	one := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{payout("1")}, Secret: natstest.Secret, Instance: "worker-one"})
	if _, err := one.Client("/test").Start(t.Context(), "payout", "p-1", nil, nil); err != nil {
		t.Fatal(err)
	}
	natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{payout("2")}, Secret: natstest.Secret, Instance: "worker-two"})
	url := srv.ClientURL()

	versions := func() map[string]flowVersion {
		t.Helper()
		out, errOut, err := run(t, url, "flows", "--json")
		if err != nil {
			t.Fatalf("flows: %v\n%s", err, errOut)
		}
		var got struct{ Versions []flowVersion }
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("flows --json: %v\n%s", err, out)
		}
		m := map[string]flowVersion{}
		for _, r := range got.Versions {
			m[r.Flow+"@"+r.Version] = r
		}
		return m
	}
	got := versions()
	if r := got["payout@1"]; strings.Join(r.Workers, ",") != "worker-one" || r.Waiting != 1 {
		t.Errorf("payout@1 = %+v, want worker-one and one run waiting", r)
	}
	if r := got["payout@2"]; strings.Join(r.Workers, ",") != "worker-two" || r.Waiting != 0 {
		t.Errorf("payout@2 = %+v, want worker-two and none waiting", r)
	}
	if r := got["ask@"+engine.AskFlow().Version()]; strings.Join(r.Workers, ",") != "worker-one,worker-two" {
		t.Errorf("the asks' flow = %+v, want both workers", r)
	}

	if err := one.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := versions()["payout@1"]; len(r.Workers) != 0 || r.Waiting != 1 {
		t.Errorf("after worker-one stopped, payout@1 = %+v, want no worker and one run waiting", r)
	}
	out, _, err := run(t, url, "flows")
	if err != nil || !strings.Contains(out, "1 run(s) of payout wait under version 1, which no running worker has") {
		t.Errorf("flows does not say what waits with no worker:\n%s (%v)", out, err)
	}
}

// TestRunsMigrateMovesTheRunsOfAVersionNoWorkerHas: with only a worker of
// version 2, the run of version 1 waits; --dry-run names it and moves
// nothing; runs migrate moves it, one audited transition by a worker of
// version 2, after which its answer completes it; nothing is left to move.
func TestRunsMigrateMovesTheRunsOfAVersionNoWorkerHas(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	one := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{payout("1")}, Secret: natstest.Secret, Instance: "worker-one"})
	c := one.Client("/test")
	if _, err := c.Start(t.Context(), "payout", "p-1", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := one.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	two := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{payout("2")}, Secret: natstest.Secret, Instance: "worker-two"})
	url := srv.ClientURL()
	if out, _, err := run(t, url, "show", "payout", "p-1"); err != nil || !strings.Contains(out, "no running worker runs or migrates from version 1 of flow payout") {
		t.Errorf("show does not say no worker carries p-1 on: %v\n%s", err, out)
	}
	if out, errOut, err := run(t, url, "runs", "migrate", "payout", "--from", "1", "--to", "2", "--dry-run"); err != nil || !strings.Contains(out, "would move p-1 (at node ask)") {
		t.Fatalf("--dry-run: %v\n%s%s", err, out, errOut)
	}
	c = two.Client("/test")
	if cp, err := c.Checkpoint(t.Context(), "payout", "p-1"); err != nil || cp.FlowVersion != "1" {
		t.Fatalf("after --dry-run p-1 is at version %s (%v), want 1", cp.FlowVersion, err)
	}
	if out, errOut, err := run(t, url, "runs", "migrate", "payout", "--from", "1", "--to", "2", "--reason", "retiring 1"); err != nil ||
		!strings.Contains(out, "moved p-1 (at node ask)") || !strings.Contains(out, "1 run(s) of flow payout moved from version 1 to 2") {
		t.Fatalf("runs migrate: %v\n%s%s", err, out, errOut)
	}
	if cp, err := c.Checkpoint(t.Context(), "payout", "p-1"); err != nil || cp.FlowVersion != "2" {
		t.Fatalf("after runs migrate p-1 is at version %s (%v), want 2", cp.FlowVersion, err)
	}
	if out, _, err := run(t, url, "show", "payout", "p-1"); err != nil || strings.Contains(out, "no running worker") {
		t.Errorf("show after the move: %v\n%s", err, out)
	}
	if out, _, err := run(t, url, "audit", "payout", "p-1"); err != nil || !strings.Contains(out, "version 1 → 2") {
		t.Errorf("the audit does not say the run moved: %v\n%s", err, out)
	}
	if out, errOut, err := run(t, url, "answer", "payout", "p-1", "iban=DE1"); err != nil || !strings.Contains(out, "completed") {
		t.Errorf("answering p-1 on version 2: %v\n%s%s", err, out, errOut)
	}
	if out, _, err := run(t, url, "runs", "migrate", "payout", "--from", "1", "--to", "2"); err != nil || !strings.Contains(out, "0 run(s) of flow payout moved") {
		t.Errorf("nothing left to move: %v\n%s", err, out)
	}
	for _, bad := range [][]string{{"runs", "migrate", "payout", "--from", "1"}, {"runs", "migrate", "payout", "--from", "1", "--to", "1"}, {"runs", "migrate", "--from", "1", "--to", "2"}, {"runs", "migrate", "payout", "--from", "1 1", "--to", "2"}} {
		if _, _, err := run(t, url, bad...); codeOf(err) != exitUsage {
			t.Errorf("%v: exit %d, want %d", bad, codeOf(err), exitUsage)
		}
	}
}

// TestFlowsListsAWorkerThatMigratesFromAVersionUnderIt: a worker of
// version 2 that migrates from version 1 is listed under version 1,
// marked so, and the runs of version 1 are not said to wait with no
// worker.
func TestFlowsListsAWorkerThatMigratesFromAVersionUnderIt(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	one := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{payout("1")}, Secret: natstest.Secret, Instance: "worker-one"})
	if _, err := one.Client("/test").Start(t.Context(), "payout", "p-1", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := one.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	two := engine.NewFlow[map[string]any]("payout").Version("2").
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error { return nil }).Start("ask").
		Migrate("1", engine.Migration{}).MustBuild()
	natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{two}, Secret: natstest.Secret, Instance: "worker-two"})
	out, _, err := run(t, srv.ClientURL(), "flows")
	if err != nil || !strings.Contains(out, "worker-two (migrates)") || strings.Contains(out, "which no running worker has") {
		t.Errorf("flows with a worker that migrates from version 1: %v\n%s", err, out)
	}
	if out, _, err := run(t, srv.ClientURL(), "show", "payout", "p-1"); err != nil || strings.Contains(out, "no running worker") {
		t.Errorf("show of a run a worker migrates: %v\n%s", err, out)
	}
}
