package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/protocol"
)

// versioned is a three-node flow; change changes one part of its
// structure, or nothing.
type versionState struct {
	Amount float64 `json:"amount"`
	Note   string  `json:"note,omitempty"`
}

type versionRenamed struct {
	Amount float64 `json:"amount"`
	Memo   string  `json:"memo,omitempty"`
}

func noop[S any](context.Context, *engine.Node[S]) error { return nil }

func versioned(review string, edge bool) *engine.Flow {
	b := engine.NewFlow[versionState]("v").Node("intake", noop[versionState]).Node(review, noop[versionState]).Node("pay", noop[versionState]).
		Edge("intake", review).Start("intake")
	if edge {
		b.Edge(review, "pay")
	} else {
		b.Branch(review, func(versionState) string { return "pay" }, "pay", engine.End)
	}
	return b.MustBuild()
}

func TestAFlowsVersionIsDerivedFromItsStructureUnlessDeclared(t *testing.T) {
	base := versioned("review", true).Version()
	if !strings.HasPrefix(base, "s-") || len(base) != 14 {
		t.Fatalf("derived version %q, want s- and 12 hex digits", base)
	}
	if again := versioned("review", true).Version(); again != base {
		t.Errorf("the same structure built twice: %s and %s", base, again)
	}
	if v := versioned("approve", true).Version(); v == base {
		t.Errorf("a node renamed keeps version %s", v)
	}
	if v := versioned("review", false).Version(); v == base {
		t.Errorf("an edge made a branch keeps version %s", v)
	}
	renamed := engine.NewFlow[versionRenamed]("v").Node("intake", noop[versionRenamed]).Node("review", noop[versionRenamed]).Node("pay", noop[versionRenamed]).
		Edge("intake", "review").Edge("review", "pay").Start("intake").MustBuild()
	if v := renamed.Version(); v == base {
		t.Errorf("a state field renamed keeps version %s", v)
	}
	other := engine.NewFlow[versionState]("v").Node("intake", func(context.Context, *engine.Node[versionState]) error { return nil }).
		Node("review", noop[versionState]).Node("pay", noop[versionState]).Edge("intake", "review").Edge("review", "pay").Start("intake").MustBuild()
	if v := other.Version(); v != base {
		t.Errorf("a change inside a node's code alone made version %s of %s", v, base)
	}
	declared := engine.NewFlow[versionState]("v").Version("2026-11-29").Node("intake", noop[versionState]).Start("intake").MustBuild()
	if declared.Version() != "2026-11-29" || declared.Info().Version != "2026-11-29" {
		t.Errorf("declared version %q, info %q", declared.Version(), declared.Info().Version)
	}
	if _, err := engine.NewFlow[versionState]("v").Version("two words").Node("intake", noop[versionState]).Start("intake").Build(); err == nil ||
		!strings.Contains(err.Error(), `flow version "two words" has ' ' at byte 3`) {
		t.Errorf("a version with a space: %v", err)
	}
}

func TestEveryCheckpointAndPendingEntryRecordsTheFlowsVersion(t *testing.T) {
	f := engine.NewFlow[refundLike]("refund").Version("7").
		Node("review", func(ctx context.Context, n *engine.Node[refundLike]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "refund", ApproverRole: "finance"})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict)})
		}).Start("review").MustBuild()
	h := enginetest.New(t, f)
	run := h.Start(map[string]any{"amount": 10})
	if got := h.Checkpoint(run).FlowVersion; got != "7" {
		t.Errorf("the waiting run's checkpoint records version %q, want 7", got)
	}
	pending := h.Store.Pending()
	if len(pending) != 1 || pending[0].FlowVersion != "7" {
		t.Errorf("pending entries %+v, want one of version 7", pending)
	}
	h.Decide(run, "approve", nil, "ann", "")
	if cp := h.Checkpoint(run); cp.Status != engine.Completed || cp.FlowVersion != "7" {
		t.Errorf("the completed run's checkpoint: %s, version %q", cp.Status, cp.FlowVersion)
	}
}

type refundLike struct {
	Amount  float64 `json:"amount"`
	Verdict string  `json:"verdict,omitempty"`
}

// askingFlow is version v of flow "q": a question at node, then the
// version written to the state.
func askingFlow(v, node string, m *engine.Migration) *engine.Flow {
	b := engine.NewFlow[map[string]any]("q").Version(v).
		Node(node, func(ctx context.Context, n *engine.Node[map[string]any]) error {
			if _, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "x", Question: "x?"}}}); err != nil {
				return err
			}
			return n.Update(engine.Update{"by": v})
		}).Start(node)
	if m != nil {
		b.Migrate("1", *m)
	}
	return b.MustBuild()
}

// TestACommandForARunOfAnotherVersionIsLeftToItsWorkers: a runner of
// version 2 writes nothing for a run of version 1 and says whose it is;
// with a migration from version 1 it moves the run, keeping its request,
// and carries it on.
func TestACommandForARunOfAnotherVersionIsLeftToItsWorkers(t *testing.T) {
	h := enginetest.New(t, askingFlow("1", "ask", nil))
	run := h.Start(nil)
	before := h.Checkpoint(run)
	h.Deploy(askingFlow("2", "ask", nil))
	out := h.Answer(run, map[string]any{"x": "y"})
	if out.Elsewhere != "1" || len(out.Events) != 0 || out.Refused != nil {
		t.Fatalf("version 2 answering a run of version 1: %+v, want it left to version 1", out)
	}
	if cp := h.Checkpoint(run); cp.Status != engine.Waiting || cp.FlowVersion != "1" || cp.Audit.Records != before.Audit.Records {
		t.Fatalf("the run after: %s at %s, %d audit records (before %d)", cp.Status, cp.FlowVersion, cp.Audit.Records, before.Audit.Records)
	}
	h.Deploy(askingFlow("2", "asked", &engine.Migration{Nodes: map[string]string{"ask": "asked"}}))
	if out := h.Answer(run, map[string]any{"x": "y"}); out.Status != engine.Completed {
		t.Fatalf("with a migration: %+v", out)
	}
	recs := h.Audit(run)
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action)
	}
	if got := strings.Join(actions, " "); got != "started migrated answered" {
		t.Errorf("audit actions %q, want started migrated answered", got)
	}
	if m := recs[1]; m.RequestID != before.Interrupt.RequestID || m.Node != "asked" || m.Migration.Node != "ask" {
		t.Errorf("the migrated record: %+v %+v", m, m.Migration)
	}
	if by := h.State(run)["by"]; by != "2" {
		t.Errorf("carried on by %v, want 2", by)
	}
}

// TestAMigrationMustLeadToANodeAndNotFromItsOwnVersion: a migration to
// a node the flow lacks, or from the flow's own version, does not build.
func TestAMigrationMustLeadToANodeAndNotFromItsOwnVersion(t *testing.T) {
	for _, c := range []struct {
		from, to, want string
	}{
		{"1", "nowhere", `moves node "ask" to "nowhere", which the flow does not have`},
		{"2", "asked", `a migration from version "2", which is the flow's own`},
		{"1 2", "asked", `flow version "1 2" has ' '`},
	} {
		_, err := engine.NewFlow[map[string]any]("q").Version("2").Node("asked", noop[map[string]any]).Start("asked").
			Migrate(c.from, engine.Migration{Nodes: map[string]string{"ask": c.to}}).Build()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("migration from %q to %q: %v, want %q", c.from, c.to, err, c.want)
		}
	}
}

// failingOnce fails the first publish of an audit record of one action,
// as a worker that stops between committing a transition and publishing
// it would.
type failingOnce struct {
	*enginetest.Publisher
	mu     sync.Mutex
	action string
}

func (p *failingOnce) Publish(ctx context.Context, msgs []engine.Message, recheck bool) error {
	p.mu.Lock()
	for _, m := range msgs {
		if m.Stream == engine.AuditStream && m.Kind == p.action {
			p.action = ""
			p.mu.Unlock()
			return errors.New("worker stopped before publishing")
		}
	}
	p.mu.Unlock()
	return p.Publisher.Publish(ctx, msgs, recheck)
}

// votingFlow is a flow of version v waiting on a vote of two, moved from
// version 1 by m.
func votingFlow(v string, m *engine.Migration) *engine.Flow {
	b := engine.NewFlow[map[string]any]("vote").Version(v).
		Node("review", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "send", ApproverRole: "legal", Quorum: &protocol.Quorum{Required: 2}})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict), "by": v})
		}).Start("review")
	if m != nil {
		b.Migrate("1", *m)
	}
	return b.MustBuild()
}

// TestAMigrationIsPublishedBeforeTheVoteThatBroughtIt: a vote for a run
// of version 1 reaches a worker of version 2, which migrates the run and
// stops before the migration is published. Delivered again (the same
// message, still unacknowledged), the vote publishes the migration first,
// then counts, instead of dropping the migration's audit record or
// waiting for itself for ever; the run's audit chain has no gap.
func TestAMigrationIsPublishedBeforeTheVoteThatBroughtIt(t *testing.T) {
	ctx := t.Context()
	store, pub := enginetest.NewStore(), &failingOnce{Publisher: enginetest.NewPublisher(), action: protocol.ActionMigrated}
	queue := &unackedQueue{set: map[uint64]bool{}}
	secret := []byte("version-test-secret-version-test-secret-01")
	runner := func(f *engine.Flow) *engine.Runner {
		r, err := engine.NewRunner(engine.Config{Flows: []*engine.Flow{f}, Store: store, Publisher: pub, Queue: queue, Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	v1 := runner(votingFlow("1", nil))
	if _, err := v1.Start(ctx, engine.Start{Flow: "vote", Run: "r-1", Inbound: engine.Inbound{EventID: "s", Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	var in *protocol.Interrupted
	for _, m := range pub.Messages("r-1") {
		if i, ok := m.Data.(*protocol.Interrupted); ok {
			in = i
		}
	}
	v2 := runner(votingFlow("2", &engine.Migration{}))
	vote := func(who string, seq uint64) (engine.Outcome, error) {
		queue.mu.Lock()
		queue.set[seq] = true // the message is in flight until acknowledged
		queue.mu.Unlock()
		return v2.Resume(ctx, engine.Resume{Flow: "vote", Run: "r-1", Token: in.ResumeToken, RequestID: in.RequestID,
			Decision: "approve", Approver: who, Roles: []string{"legal"}, RolesKnown: true,
			Inbound: engine.Inbound{EventID: "vote-" + who, Seq: seq}})
	}
	if _, err := vote("ana", 2); err == nil {
		t.Fatal("the migration's publishing failed, yet the vote reported success")
	}
	out, err := vote("ana", 2)
	if err != nil {
		t.Fatal(err)
	}
	if out.RetryAfter != 0 || out.Refused != nil {
		t.Fatalf("the vote delivered again: %+v; want it counted", out)
	}
	var actions []string
	var seqs []uint64
	for _, m := range pub.Messages("r-1") {
		if rec, ok := m.Data.(*protocol.AuditRecord); ok && m.Stream == engine.AuditStream {
			actions, seqs = append(actions, rec.Action), append(seqs, rec.Seq)
		}
	}
	if got := strings.Join(actions, " "); got != "started migrated voted" {
		t.Fatalf("audit actions %q, want started migrated voted", got)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("audit record seqs %v: a gap", seqs)
		}
	}
}
