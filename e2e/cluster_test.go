package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// publishRetrying publishes a command with event id id, retrying (the
// stream dedupes by id) while the cluster elects a new leader.
func publishRetrying(t *testing.T, js jetstream.JetStream, subject, typ, run, id string, data any) {
	t.Helper()
	ev, err := events.New(id, "/natstest", typ, run, time.Now().UTC(), data)
	if err != nil {
		t.Fatal(err)
	}
	body, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), natstest.Wait)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		msg := nats.NewMsg(subject)
		msg.Data = body
		msg.Header.Set("Content-Type", events.Structured)
		msg.Header.Set(jetstream.MsgIDHeader, id)
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.PublishMsg(pctx, msg)
		pcancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("publishing %s %s: %v", subject, id, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// streamLeader is the name of the node that leads stream.
func streamLeader(t *testing.T, js jetstream.JetStream, stream string) string {
	t.Helper()
	var leader string
	natstest.Eventually(t, "a leader of "+stream, func() bool {
		s, err := js.Stream(t.Context(), stream)
		if err != nil {
			return false
		}
		info, err := s.Info(t.Context())
		if err != nil || info.Cluster == nil {
			return false
		}
		leader = info.Cluster.Leader
		return leader != ""
	})
	return leader
}

// TestClusterLosesTheLeaderOfTheRunsMidLoadAndLosesNothing runs the example
// flows on a 3-node cluster with a worker on each node, shuts down the node
// that leads the checkpoints while resumes are in flight, and checks that
// every run completes once, every resume is applied once, approval
// deadlines still fire (escalating, then expiring), and the node catches
// up when it comes back.
func TestClusterLosesTheLeaderOfTheRunsMidLoadAndLosesNothing(t *testing.T) {
	clusterLosesANode(t, func(c *natstest.Cluster, js jetstream.JetStream, names wire.Names) (int, func() bool) {
		runsStream := "KV_" + names.RunsBucket()
		leader := streamLeader(t, js, runsStream)
		down := c.Node(leader)
		if down < 0 {
			t.Fatalf("leader %q of %s is none of the nodes", leader, runsStream)
		}
		return down, func() bool { return streamLeader(t, js, runsStream) != leader }
	})
}

// TestClusterLosesTheJetStreamMetaLeaderMidLoadAndLosesNothing is the same
// with the node that leads the JetStream meta group (which assigns streams
// and consumers) shut down, after the runs' checkpoints were led elsewhere:
// the workers' consumers and the deadlines' schedules go on through the
// meta group's election.
func TestClusterLosesTheJetStreamMetaLeaderMidLoadAndLosesNothing(t *testing.T) {
	clusterLosesANode(t, func(c *natstest.Cluster, js jetstream.JetStream, names wire.Names) (int, func() bool) {
		down := -1
		natstest.Eventually(t, "a JetStream meta leader", func() bool {
			for i, s := range c.Nodes {
				if s != nil && s.NATS().JetStreamIsLeader() {
					down = i
					return true
				}
			}
			return false
		})
		meta := c.Nodes[down]
		runsStream := "KV_" + names.RunsBucket()
		if streamLeader(t, js, runsStream) == meta.Name() {
			t.Logf("the meta leader %s also leads %s: moving that off it", meta.Name(), runsStream)
			if err := meta.NATS().JetStreamStepdownStream(bus.InterlockAccount, runsStream); err != nil {
				t.Fatalf("moving the leadership of %s off the meta leader: %v", runsStream, err)
			}
			natstest.Eventually(t, runsStream+" led by another node than the meta leader", func() bool {
				return streamLeader(t, js, runsStream) != meta.Name()
			})
		}
		name := meta.Name()
		return down, func() bool {
			for _, s := range c.Nodes {
				if s == nil {
					continue
				}
				info, err := s.NATS().Jsz(nil)
				if err != nil || info.Meta == nil || info.Meta.Leader == "" || info.Meta.Leader == name {
					return false
				}
			}
			return true
		}
	})
}

// clusterLosesANode drives runs of the example flows on a 3-node cluster
// through a node loss: pick names the node to shut down once every run
// waits at its first interrupt, and what tells that the cluster has moved
// on from it.
func clusterLosesANode(t *testing.T, pick func(c *natstest.Cluster, js jetstream.JetStream, names wire.Names) (down int, movedOn func() bool)) {
	began := time.Now()
	c := natstest.StartCluster(t, 3)
	for i := range c.Nodes {
		natstest.StartWith(t, c.Nodes[i], interlock.Config{
			Flows: examples.Flows(), Secret: natstest.Secret, Instance: fmt.Sprintf("node-%d", i),
			AckWait: testAckWait, // replicas picked for the cluster
		})
	}
	_, js := natstest.ConnectWith(t, wire.ConnConfig{URL: c.URLs(), User: bus.DefaultWorkersUser, Password: natstest.WorkersPassword})
	names := mustNames(t)
	for _, name := range []string{names.InStream(), "KV_" + names.RunsBucket(), "KV_" + names.PendingBucket()} {
		s, err := js.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Replicas; got != 3 {
			t.Fatalf("%s has %d replicas on a 3-node cluster, want 3", name, got)
		}
	}

	// Refunds of the last kind are never decided: their approval's deadline
	// fires after the node loss, escalates, and fires again to expire them.
	const bookings, refunds, expiring = 12, 6, 3
	type run struct {
		flow, id string
		expires  bool
	}
	var runs []run
	for i := range bookings {
		r := run{"booking", fmt.Sprintf("r-cluster-b%d", i), false}
		runs = append(runs, r)
		publishRetrying(t, js, names.In(r.flow, "start"), protocol.TypeStart, r.id, r.id+"-start", map[string]any{"state": readyForTopics()})
	}
	for i := range refunds + expiring {
		r := run{"refund", fmt.Sprintf("r-cluster-f%d", i), i >= refunds}
		timeout := 600
		if r.expires {
			r.id = fmt.Sprintf("r-cluster-x%d", i)
			timeout = 3
		}
		runs = append(runs, r)
		publishRetrying(t, js, names.In(r.flow, "start"), protocol.TypeStart, r.id, r.id+"-start",
			map[string]any{"state": map[string]any{"orderId": "o-" + r.id, "amount": 4800, "currency": "USD", "approvalTimeoutSeconds": timeout}})
	}
	first := map[string]protocol.Interrupted{}
	for _, r := range runs {
		var in protocol.Interrupted
		natstest.Last(t, natstest.WaitFor(t, js, names.EventStream(), names.Event(r.flow, r.id, ">"), natstest.Nth("interrupted", 1)), "interrupted").Decode(t, &in)
		first[r.id] = in
	}

	runsStream := "KV_" + names.RunsBucket()
	down, movedOn := pick(c, js, names)
	leader := c.Nodes[down].Name()
	// Resume every run, and take the node down while the workers apply
	// the resumes (the expiring runs' approvals, and so their deadlines,
	// come after).
	for i, r := range runs {
		in := first[r.id]
		data := map[string]any{"resumeToken": in.ResumeToken, "selected": "product"}
		if r.flow == "refund" {
			data = answer(in, map[string]any{"last4": "4821"})
		}
		publishRetrying(t, js, names.In(r.flow, "resume"), protocol.TypeResume, r.id, r.id+"-resume-1", data)
		if i == len(runs)/2 {
			c.Stop(down)
		}
	}
	natstest.Eventually(t, "the cluster led without "+leader, movedOn)
	for _, r := range runs {
		if r.flow != "refund" || r.expires {
			continue
		}
		var in protocol.Interrupted
		natstest.Last(t, natstest.WaitFor(t, js, names.EventStream(), names.Event(r.flow, r.id, ">"), natstest.Nth("interrupted", 2)), "interrupted").Decode(t, &in)
		if in.Kind != "approval" || in.ExpiresAt == nil {
			t.Fatalf("%s: second interrupt %+v, want an approval with a deadline", r.id, in)
		}
		publishRetrying(t, js, names.In(r.flow, "resume"), protocol.TypeResume, r.id, r.id+"-resume-2",
			map[string]any{"resumeToken": in.ResumeToken, "decision": "approve"})
	}
	for _, r := range runs {
		end := "completed"
		if r.expires {
			end = "expired"
		}
		natstest.WaitFor(t, js, names.EventStream(), names.Event(r.flow, r.id, ">"), natstest.Nth(end, 1))
	}
	for _, r := range runs {
		evs := natstest.Read(t, js, names.EventStream(), names.Event(r.flow, r.id, ">"))
		if r.expires {
			// Asked who they are, answered; the approval, escalated to
			// finance_lead at its deadline, expired at the next.
			if n := natstest.Count(evs, "interrupted"); n != 3 {
				t.Errorf("%s: %d interrupted events, want 3 (question, approval, escalation)", r.id, n)
			}
			if n, m, k := natstest.Count(evs, "expired"), natstest.Count(evs, "completed"), natstest.Count(evs, "resumed"); n != 1 || m != 0 || k != 1 {
				t.Errorf("%s: %d expired, %d completed, %d resumed events, want 1, 0, 1", r.id, n, m, k)
			}
			continue
		}
		resumes := 1
		if r.flow == "refund" {
			resumes = 2
		}
		if n := natstest.Count(evs, "completed"); n != 1 {
			t.Errorf("%s: %d completed events, want 1", r.id, n)
		}
		if n := natstest.Count(evs, "resumed"); n != resumes {
			t.Errorf("%s: %d resumed events, want %d", r.id, n, resumes)
		}
		if n := natstest.Count(evs, "interrupted"); n != resumes {
			t.Errorf("%s: %d interrupted events, want %d", r.id, n, resumes)
		}
		if n := natstest.Count(evs, "refused"); n != 0 {
			t.Errorf("%s: %d refused events", r.id, n)
		}
	}
	natstest.WaitDrained(t, js, names.InStream())
	loaded := time.Since(began)

	// The node comes back on its data dir and catches up with every stream.
	c.Start(down)
	c.WaitReady()
	streams := []string{names.InStream(), names.EventStream(), names.AuditStream(), names.DeadLetterStream(),
		runsStream, "KV_" + names.PendingBucket(), "KV_" + names.ConfigBucket()}
	for _, name := range streams {
		natstest.Eventually(t, leader+" current on "+name, func() bool {
			s, err := js.Stream(t.Context(), name)
			if err != nil {
				return false
			}
			info, err := s.Info(t.Context())
			if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
				return false
			}
			if info.Cluster.Leader == leader {
				return true
			}
			for _, p := range info.Cluster.Replicas {
				if p.Name == leader {
					return p.Current && p.Lag == 0
				}
			}
			return false
		})
	}
	t.Logf("runs completed through the node loss in %s; the node caught up %s later", loaded.Round(time.Millisecond), (time.Since(began) - loaded).Round(time.Millisecond))
}
