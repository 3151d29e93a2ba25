package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// deadlineFlow asks one question that expires after two seconds.
func deadlineFlow() *engine.Flow {
	return engine.NewFlow[map[string]any]("deadline").
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Ask(ctx, engine.Questions{Timeout: 2 * time.Second, Questions: []engine.Question{{Field: "a", Question: "A?"}}})
			return err
		}).Start("ask").MustBuild()
}

func TestDeadlineFiresWhileNoWorkerRunsAndExpiresOnce(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, t.TempDir())
	svc := natstest.Start(t, srv, deadlineFlow())
	_, js := natstest.Connect(t, srv.ClientURL())
	r := &rig{t: t, srv: srv, js: js, names: svc.Names()}
	const run = "r-deadline"
	r.start("deadline", run, nil)
	in := r.interrupt("deadline", run, 1)
	at, err := expiresAt(in)
	if err != nil {
		t.Fatalf("expiresAt %q: %v", in.ExpiresAt, err)
	}
	cp, _ := r.checkpoint("deadline", run)
	if cp.Interrupt.ExpiresAt == nil || !cp.Interrupt.ExpiresAt.Equal(at) {
		t.Fatalf("checkpoint deadline %v, event %v", cp.Interrupt.ExpiresAt, at)
	}
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The server fires the schedule with no worker running: the expire
	// command waits in the schedule stream.
	natstest.Eventually(t, "the deadline's expire command in the schedule stream", func() bool {
		s, err := js.Stream(t.Context(), r.names.ScheduleStream())
		if err != nil {
			return false
		}
		_, err = s.GetLastMsgForSubject(t.Context(), r.names.Due("deadline", "expire"))
		return err == nil
	})
	if time.Now().Before(at) {
		t.Fatalf("the schedule fired before its time %v", at)
	}
	natstest.Start(t, srv, deadlineFlow())
	evs := r.wait("deadline", run, "expired", 1)
	var ex protocol.Expired
	natstest.Last(t, evs, "expired").Decode(t, &ex)
	if ex.RequestID != in.RequestID || ex.Node != "ask" || ex.Kind != "question" {
		t.Fatalf("expired = %+v", ex)
	}
	r.resume("deadline", run, answer(in, map[string]any{"a": "late"}))
	if ref := r.refusal("deadline", run, 1); ref.Code != protocol.CodeExpired {
		t.Fatalf("late answer refused %+v, want expired", ref)
	}
	if n := natstest.Count(r.wait("deadline", run, "refused", 1), "expired"); n != 1 {
		t.Fatalf("%d expired events, want exactly one", n)
	}
	if r.pending("deadline", run) {
		t.Fatal("expired run still in the pending index")
	}
}

func TestApprovalDeadlineSurvivesAServerRestartAndEscalationsChain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := natstest.StartServer(t, dir)
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{refund.Flow()}})
	nc, js := natstest.Connect(t, srv.ClientURL())
	names := svc.Names()
	r := &rig{t: t, srv: srv, js: js, names: names}
	const run = "r-escalate"
	r.start("refund", run, map[string]any{"orderId": "o-1", "amount": 4800, "currency": "USD", "approvalTimeoutSeconds": 2})
	r.resume("refund", run, answer(r.interrupt("refund", run, 1), map[string]any{"last4": "4821"}))
	first := r.interrupt("refund", run, 2)
	if first.Kind != "approval" || first.ApproverRole != "supervisor" || first.ExpiresAt == nil {
		t.Fatalf("approval = %+v", first)
	}

	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	srv.Shutdown()
	srv = natstest.StartServer(t, dir)
	natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{refund.Flow()}})
	_, js = natstest.Connect(t, srv.ClientURL())
	r = &rig{t: t, srv: srv, js: js, names: names}

	second := r.interrupt("refund", run, 3)
	if second.ApproverRole != refund.FinanceLeadRole || second.ResumeToken == first.ResumeToken {
		t.Fatalf("escalated approval = %+v", second)
	}
	evs := r.wait("refund", run, "expired", 1)
	if n := natstest.Count(evs, "expired"); n != 1 {
		t.Fatalf("%d expired events", n)
	}
	r.resume("refund", run, map[string]any{"resumeToken": first.ResumeToken, "decision": "approve"})
	if ref := r.refusal("refund", run, 1); ref.Code != protocol.CodeExpired {
		t.Fatalf("the supervisor's late approval was refused %+v, want expired", ref)
	}
	var actions []string
	for _, a := range natstest.Read(t, js, names.AuditStream(), names.Audit("refund", run)) {
		var rec protocol.AuditRecord
		a.Decode(t, &rec)
		if rec.By == engine.TimeoutActor {
			actions = append(actions, rec.Action)
		}
	}
	if strings.Join(actions, ",") != "escalated,expired" {
		t.Fatalf("deadline records = %v", actions)
	}
}

func TestAResumeRacingTheDeadlineExactlyOneWins(t *testing.T) {
	t.Parallel()
	flow := engine.NewFlow[map[string]any]("race").
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Approve(ctx, engine.Approval{Action: "go", Args: map[string]any{}, Timeout: time.Second})
			return err
		}).Start("ask").MustBuild()
	r := newRig(t, flow)
	// The workers' account sees the schedule stream: the resume is sent
	// the moment the server stores the expire command it fires at the
	// deadline, so that the two race to the run.
	_, workers := natstest.Connect(t, natstest.WorkersURL(r.srv))
	schedules, err := workers.Stream(t.Context(), r.names.ScheduleStream())
	if err != nil {
		t.Fatal(err)
	}
	lastSeq := func() uint64 {
		info, err := schedules.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	for i := range 3 {
		run := "r-race-" + string(rune('a'+i))
		r.start("race", run, nil)
		in := r.interrupt("race", run, 1)
		stored := lastSeq() // the deadline's schedule, stored before the event
		natstest.Eventually(t, "the deadline's expire command fired", func() bool { return lastSeq() > stored })
		r.resume("race", run, map[string]any{"resumeToken": in.ResumeToken, "decision": "approve"})
		evs := natstest.WaitFor(t, r.js, r.names.EventStream(), r.names.Event("race", run, ">"), func(rs []natstest.Received) bool {
			return natstest.Count(rs, "completed")+natstest.Count(rs, "expired") > 0 &&
				(natstest.Count(rs, "completed") == 1 || natstest.Count(rs, "refused") == 1)
		})
		completed, expired, refused := natstest.Count(evs, "completed"), natstest.Count(evs, "expired"), natstest.Count(evs, "refused")
		if completed+expired != 1 || expired != refused {
			t.Fatalf("run %s: completed %d, expired %d, refused %d: exactly one of the resume and the deadline must win", run, completed, expired, refused)
		}
	}
}
