package bus_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// The doors of this file are the ways a client with no more than the
// rights of the deploy configuration's agent or bot user, or of the
// anonymous user of a default install, could act on Interlock through
// JetStream features rather than through its protocol: message schedules,
// roll-ups and the other headers a stream acts on, replies aimed at
// another subject, consumers delivering to another subject, and reply
// inboxes shared by every client.

// doorsFlow asks a supervisor to approve a refund, with a deadline after
// which the run expires.
func doorsFlow(timeout time.Duration) *engine.Flow {
	return engine.NewFlow[map[string]any]("refund").
		Node("review", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "issue_refund", Args: map[string]any{"amount": 4800},
				ApproverRole: "supervisor", Timeout: timeout})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"decision": string(d.Verdict)})
		}).Start("review").MustBuild()
}

// deployment is an Interlock service and its server, as some clients see
// it.
type deployment struct {
	svc   *interlock.Service
	names wire.Names
	url   string
	// as connects a client user (deploy configuration) or the anonymous
	// user (default install).
	as func(user string) (*user, *client.Client)
	// admin is a connection with every right, to look.
	admin jetstream.JetStream
}

// deployConfigDeployment runs a service on the embedded server with
// deploy/nats-server.conf: authorization, approvals on role subjects only.
func deployConfigDeployment(t *testing.T, flow *engine.Flow) *deployment {
	t.Helper()
	tlsFiles, pw := deployEnv(t)
	n, _ := wire.NewNames("")
	svc, err := interlock.Start(t.Context(), interlock.Config{
		Flows: []*engine.Flow{flow}, Instance: "test", Concurrency: 4, RequireRoles: true, Secret: natstest.Secret,
		Embedded: &bus.ServerConfig{
			ConfigFile: "../deploy/nats-server.conf", DataDir: t.TempDir(), Host: "127.0.0.1", Port: -1, LazyFsync: true,
			WorkersPassword: os.Getenv("INTERLOCK_WORKERS_PASSWORD"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.WithoutCancel(t.Context())) })
	d := &deployment{svc: svc, names: n, url: svc.URL()}
	d.as = func(name string) (*user, *client.Client) {
		u := connectUser(t, name, d.url, nats.UserInfo(name, pw[name]), nats.RootCAs(tlsFiles.CA))
		return u, client.New(u.nc, u.js, n, "/test/"+name, natstest.Wait)
	}
	admin, _ := d.as("admin")
	d.admin = admin.js
	return d
}

// defaultDeployment runs a service on the embedded server of a default
// install: no configuration, clients anonymous.
func defaultDeployment(t *testing.T, flow *engine.Flow) *deployment {
	t.Helper()
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, flow)
	d := &deployment{svc: svc, names: svc.Names(), url: srv.ClientURL()}
	d.as = func(name string) (*user, *client.Client) {
		u := connectUser(t, name, d.url)
		return u, client.New(u.nc, u.js, d.names, "/test/"+name, natstest.Wait)
	}
	_, d.admin = natstest.Connect(t, srv.ClientURL())
	return d
}

// waitingRefund starts a refund as c and returns its pending approval.
func waitingRefund(t *testing.T, c *client.Client, run string) protocol.Interrupted {
	t.Helper()
	ev, err := c.Start(t.Context(), "refund", run, nil, nil)
	if err != nil || ev.Kind != protocol.EventInterrupted {
		t.Fatalf("start %s: %s %v", run, ev.Kind, err)
	}
	return lastInterruptOf(t, c, "refund", run)
}

// resumeBody is a structured resume approving in, as an attacker who read
// its interrupted event would write it.
func resumeBody(t *testing.T, id string, in protocol.Interrupted) []byte {
	t.Helper()
	ev, err := events.New(id, "/attacker", protocol.TypeResume, in.Run, time.Now().UTC(),
		protocol.Resume{ResumeToken: in.ResumeToken, RequestID: in.RequestID, Decision: "approve", Approver: "attacker"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stillWaits fails the test unless run is still waiting on request rq.
func (d *deployment) stillWaits(t *testing.T, run, rq string) {
	t.Helper()
	kv, err := d.admin.KeyValue(t.Context(), d.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), "refund."+run)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := protocol.DecodeCheckpoint(e.Value(), e.Revision())
	if err != nil {
		t.Fatal(err)
	}
	if !cp.Waiting() || cp.Interrupt.RequestID != rq {
		t.Fatalf("run %s is %s (request %v), want still waiting on %s", run, cp.Status, cp.Interrupt, rq)
	}
}

// apiCode returns the JetStream error code of err, 0 if none.
func apiCode(err error) jetstream.ErrorCode {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode
	}
	return 0
}

// JetStream error codes the inbound stream answers with.
const (
	errSchedulesDisabled   jetstream.ErrorCode = 10188
	errTTLDisabled         jetstream.ErrorCode = 10166
	errCountersDisabled    jetstream.ErrorCode = 10168
	errAtomicDisabled      jetstream.ErrorCode = 10174
	errSourceHdrNotAllowed jetstream.ErrorCode = 10227
	errRollupFailed        jetstream.ErrorCode = 10111
	errStreamNotMatch      jetstream.ErrorCode = 10060
	errWrongLastSequence   jetstream.ErrorCode = 10071
	errWrongLastMsgID      jetstream.ErrorCode = 10070
)

// TestAScheduledMessageCannotApproveForARoleTheSenderDoesNotHold is the
// first finding: a user who may publish only some inbound subjects
// published a message schedule there whose target was a supervisor's
// role subject, and the server delivered the approval. The inbound stream
// now allows no message schedule, and the deadlines' stream takes nothing
// from a client.
func TestAScheduledMessageCannotApproveForARoleTheSenderDoesNotHold(t *testing.T) {
	for _, tc := range []struct {
		name string
		dep  func(*testing.T, *engine.Flow) *deployment
		// users and the inbound subject each may publish to
		users map[string]string
	}{
		{"deploy config", deployConfigDeployment, map[string]string{"agent": "interlock.in.zzq.start", "bot": "interlock.in.refund.resume"}},
		{"default install", defaultDeployment, map[string]string{"anonymous": "interlock.in.zzq.start"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.dep(t, doorsFlow(0))
			for name, subject := range tc.users {
				u, c := d.as(name)
				if name == "bot" {
					_, c = d.as("agent")
				}
				run := "r-sched-" + name
				in := waitingRefund(t, c, run)
				target := d.names.ResumeAs("refund", "supervisor")
				m := nats.NewMsg(subject)
				m.Data = resumeBody(t, "sched-"+name, in)
				m.Header.Set("Nats-Schedule", "@at "+time.Now().Add(time.Second).UTC().Format(time.RFC3339))
				m.Header.Set("Nats-Schedule-Target", target)
				if _, err := u.js.PublishMsg(t.Context(), m); apiCode(err) != errSchedulesDisabled {
					t.Errorf("%s: a message schedule to %s was answered %v, want refused: message schedules disabled", name, target, err)
				}
				// Nor into the deadlines' stream, which takes no client's
				// message at all.
				sched := nats.NewMsg(d.names.Schedule("refund", run, "rq_forged"))
				sched.Data = m.Data
				sched.Header.Set("Nats-Schedule", "@at "+time.Now().Add(time.Second).UTC().Format(time.RFC3339))
				sched.Header.Set("Nats-Schedule-Target", d.names.Due("refund", "expire"))
				u.denied(t, "publish a deadline", sched.Subject, func(ctx context.Context) error {
					_, err := u.js.PublishMsg(ctx, sched)
					return err
				})
				d.stillWaits(t, run, in.RequestID)
			}
			st, err := d.admin.Stream(t.Context(), d.names.InStream())
			if err != nil {
				t.Fatal(err)
			}
			if info, err := st.Info(t.Context()); err != nil || info.Config.AllowMsgSchedules || info.Config.AllowRollup || info.Config.AllowMsgTTL {
				t.Fatalf("%s allows schedules %v, roll-ups %v, TTLs %v: %v", d.names.InStream(), info.Config.AllowMsgSchedules, info.Config.AllowRollup, info.Config.AllowMsgTTL, err)
			}
		})
	}
}

// TestNoClientCanPurgeQueuedCommandsOrDeleteADeadline is the second
// finding: a roll-up purged the inbound stream, with the commands already
// acknowledged to their senders and every deadline's schedule; a schedule
// purge deleted one run's deadline. Neither is possible now: commands
// queued while no worker runs are all applied, and the deadline fires.
func TestNoClientCanPurgeQueuedCommandsOrDeleteADeadline(t *testing.T) {
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, doorsFlow(2*time.Second))
	n := svc.Names()
	anon := connectUser(t, "anonymous", srv.ClientURL())
	c := client.New(anon.nc, anon.js, n, "/test", natstest.Wait)
	in := waitingRefund(t, c, "r-deadline")
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Queued, acknowledged, and no worker to take them.
	const queued = 20
	for i := range queued {
		natstest.Publish(t, anon.js, n.In("refund", "start"), protocol.TypeStart, fmt.Sprintf("r-queued-%02d", i), protocol.Start{})
	}
	for _, h := range []nats.Header{
		{"Nats-Rollup": {"all"}},
		{"Nats-Rollup": {"sub"}},
		{"Nats-Schedule-Next": {"purge"}, "Nats-Scheduler": {n.Schedule("refund", "r-deadline", in.RequestID)}},
		{"Nats-Scheduler": {n.Schedule("refund", "r-deadline", in.RequestID)}},
	} {
		m := nats.NewMsg(n.In("refund", "start"))
		m.Data = []byte(`{}`)
		m.Header = h
		if _, err := anon.js.PublishMsg(t.Context(), m); err == nil {
			t.Errorf("a command with %v was stored", h)
		}
	}
	natstest.Start(t, srv, doorsFlow(2*time.Second))
	_, admin := natstest.Connect(t, srv.ClientURL())
	natstest.WaitFor(t, admin, n.EventStream(), n.Event("refund", "r-deadline", "expired"), natstest.Nth("expired", 1))
	for i := range queued {
		run := fmt.Sprintf("r-queued-%02d", i)
		natstest.WaitFor(t, admin, n.EventStream(), n.Event("refund", run, "interrupted"), natstest.Nth("interrupted", 1))
	}
}

// TestTheDeployUsersCannotPurgeOrExpireCommands sends, as the deploy
// config's agent and bot, each command they may send with each header
// that would purge the inbound stream, delete a deadline or expire a
// command: the stream refuses them all, and the run still waits.
func TestTheDeployUsersCannotPurgeOrExpireCommands(t *testing.T) {
	d := deployConfigDeployment(t, doorsFlow(0))
	n := d.names
	_, agent := d.as("agent")
	in := waitingRefund(t, agent, "r-rollup")
	for _, tc := range []struct{ user, subject string }{
		{"agent", n.In("refund", "start")},
		{"agent", n.In("refund", "cancel")},
		{"bot", n.In("refund", "resume")},
		{"bot", n.ResumeAs("refund", "supervisor")},
	} {
		u, _ := d.as(tc.user)
		for _, h := range []struct {
			h    nats.Header
			code jetstream.ErrorCode
		}{
			{nats.Header{"Nats-Rollup": {"all"}}, errRollupFailed},
			{nats.Header{"Nats-Rollup": {"sub"}}, errRollupFailed},
			{nats.Header{"Nats-Schedule-Next": {"purge"}, "Nats-Scheduler": {n.Schedule("refund", "r-rollup", in.RequestID)}}, errSchedulesDisabled},
			{nats.Header{"Nats-TTL": {"1s"}}, errTTLDisabled},
		} {
			m := nats.NewMsg(tc.subject)
			m.Data = []byte(`{}`)
			m.Header = h.h
			if _, err := u.js.PublishMsg(t.Context(), m); apiCode(err) != h.code {
				t.Errorf("%s on %s with %v: %v, want refused with code %d", tc.user, tc.subject, h.h, err, h.code)
			}
		}
	}
	d.stillWaits(t, "r-rollup", in.RequestID)
}

// TestTheInboundStreamRefusesOrNeutralisesEveryHeaderThatActs tries, as
// the anonymous user, each header of a published message that the NATS
// server acts on: the inbound stream refuses those that would act on it,
// the worker refuses a command that bears one the server sets on what it
// copies out of a stream, and takes those a client may send.
func TestTheInboundStreamRefusesOrNeutralisesEveryHeaderThatActs(t *testing.T) {
	d := defaultDeployment(t, doorsFlow(0))
	n := d.names
	u, _ := d.as("anonymous")
	const (
		refused = iota // the server refuses to store the command
		rejected
		applied
	)
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for i, tc := range []struct {
		h    nats.Header
		want int
		code jetstream.ErrorCode
	}{
		{nats.Header{"Nats-Rollup": {"all"}}, refused, errRollupFailed},
		{nats.Header{"Nats-Rollup": {"sub"}}, refused, errRollupFailed},
		{nats.Header{"Nats-TTL": {"1s"}}, refused, errTTLDisabled},
		{nats.Header{"Nats-Schedule": {"@at " + at}, "Nats-Schedule-Target": {n.In("refund", "cancel")}}, refused, errSchedulesDisabled},
		{nats.Header{"Nats-Schedule": {"@every 1s"}, "Nats-Schedule-Target": {n.In("refund", "cancel")}}, refused, errSchedulesDisabled},
		{nats.Header{"Nats-Schedule": {"@at " + at}, "Nats-Schedule-Target": {n.In("refund", "cancel")}, "Nats-Schedule-Source": {n.In("refund", "resume")}}, refused, errSchedulesDisabled},
		{nats.Header{"Nats-Schedule-Next": {"purge"}, "Nats-Scheduler": {n.In("refund", "resume")}}, refused, 0},
		{nats.Header{"Nats-Incr": {"1"}}, refused, errCountersDisabled},
		{nats.Header{"Nats-Batch-Id": {"b1"}, "Nats-Batch-Sequence": {"1"}, "Nats-Batch-Commit": {"1"}}, refused, 0},
		{nats.Header{"Nats-Stream-Source": {"OTHER 1 x > >"}}, refused, errSourceHdrNotAllowed},
		{nats.Header{"Nats-Expected-Stream": {"OTHER"}}, refused, errStreamNotMatch},
		{nats.Header{"Nats-Expected-Last-Sequence": {"999999"}}, refused, errWrongLastSequence},
		{nats.Header{"Nats-Expected-Last-Subject-Sequence": {"999999"}}, refused, errWrongLastSequence},
		{nats.Header{"Nats-Expected-Last-Msg-Id": {"nope"}}, refused, errWrongLastMsgID},
		// What a direct get adds to a message it copies out of a stream.
		{nats.Header{"Nats-Stream": {n.EventStream()}, "Nats-Subject": {"x"}, "Nats-Sequence": {"1"}, "Nats-Time-Stamp": {at}}, rejected, 0},
		{nats.Header{"Nats-Num-Pending": {"0"}, "Nats-Last-Sequence": {"0"}}, rejected, 0},
		{nats.Header{"Nats-Marker-Reason": {"MaxAge"}}, rejected, 0},
		// What a client may send.
		{nats.Header{"Nats-Expected-Stream": {n.InStream()}}, applied, 0},
		// A trace to a subject the sender may not publish to: the server
		// drops the message (and tells the sender).
		{nats.Header{"Nats-Trace-Dest": {n.Event("refund", "x", "completed")}}, refused, 0},
		// A trace to one it may: the command is applied, and the trace
		// report (JSON, no command) is dead-lettered.
		{nats.Header{"Nats-Trace-Dest": {n.In("zzq", "trace")}}, applied, 0},
	} {
		run := fmt.Sprintf("r-header-%02d", i)
		ev, err := events.New("ev-"+run, "/test", protocol.TypeStart, run, time.Now().UTC(), protocol.Start{})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := events.Encode(ev)
		m := nats.NewMsg(n.In("refund", "start"))
		m.Data = body
		m.Header = tc.h
		m.Header.Set("Content-Type", events.Structured)
		m.Header.Set(jetstream.MsgIDHeader, "ev-"+run)
		_, err = u.js.PublishMsg(t.Context(), m)
		switch tc.want {
		case refused:
			if err == nil || tc.code != 0 && apiCode(err) != tc.code {
				t.Errorf("%v: stored (%v), want refused with error %d", tc.h, err, tc.code)
			}
		case rejected:
			if err != nil {
				t.Fatalf("%v: %v", tc.h, err)
			}
			got := natstest.WaitFor(t, d.admin, n.EventStream(), n.Event("refund", run, ">"), func(rs []natstest.Received) bool { return len(rs) > 0 })
			var ref protocol.Refused
			natstest.Last(t, got, protocol.EventRefused).Decode(t, &ref)
			if ref.Code != protocol.CodeInvalidPayload || !strings.Contains(ref.Message, "Nats-") {
				t.Errorf("%v: refused %+v, want invalid_payload naming the header", tc.h, ref)
			}
			dl := natstest.WaitFor(t, d.admin, n.DeadLetterStream(), n.DeadLetter(bus.ReasonInvalidHeaders), func(rs []natstest.Received) bool {
				for _, r := range rs {
					if strings.Contains(string(r.Data), run) {
						return true
					}
				}
				return false
			})
			if len(dl) == 0 {
				t.Errorf("%v: not dead-lettered", tc.h)
			}
		case applied:
			if err != nil {
				t.Fatalf("%v: %v", tc.h, err)
			}
			natstest.WaitFor(t, d.admin, n.EventStream(), n.Event("refund", run, "interrupted"), natstest.Nth("interrupted", 1))
		}
	}
}

// TestARepliesAimedAtInterlocksSubjectsWriteNothing: within one account
// any request's reply may be aimed at any subject, and the server stores
// it where a stream listens: a checkpoint's key, an audit subject, an
// event subject. Clients live in an account of their own, so a reply goes
// back there, and writes nothing of Interlock's. A reply aimed at an
// inbound subject does reach the inbound stream (clients publish commands
// there); what the server copies out of a stream is refused there, and so
// is a reply that is no command.
func TestARepliesAimedAtInterlocksSubjectsWriteNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dep   func(*testing.T, *engine.Flow) *deployment
		user  string
		start string // an inbound subject the user may publish a command to
	}{
		{"deploy config agent", deployConfigDeployment, "agent", "interlock.in.refund.start"},
		{"default install", defaultDeployment, "anonymous", "interlock.in.refund.start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.dep(t, doorsFlow(0))
			n := d.names
			u, c := d.as(tc.user)
			in := waitingRefund(t, c, "r-reply")
			kv, err := d.admin.KeyValue(t.Context(), n.RunsBucket())
			if err != nil {
				t.Fatal(err)
			}
			before, err := kv.Get(t.Context(), "refund.r-reply")
			if err != nil {
				t.Fatal(err)
			}
			state := func(stream string) jetstream.StreamState {
				st, err := d.admin.Stream(t.Context(), stream)
				if err != nil {
					t.Fatal(err)
				}
				info, err := st.Info(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return info.State
			}
			sched := state(n.ScheduleStream())
			targets := []string{
				"$KV." + n.RunsBucket() + ".refund.r-reply",
				"$KV." + n.PendingBucket() + ".refund.r-forged",
				"$KV." + n.ConfigBucket() + ".gate.rules",
				n.Audit("refund", "r-reply"),
				n.Event("refund", "r-reply", "completed"),
				n.Due("refund", "expire"),
				n.Schedule("refund", "r-reply", "rq_forged"),
			}
			for i, target := range targets {
				// An acknowledged command, and a JetStream API request.
				run := fmt.Sprintf("r-reply-%d", i)
				ev, err := events.New("ev-"+run, "/test", protocol.TypeStart, run, time.Now().UTC(), protocol.Start{})
				if err != nil {
					t.Fatal(err)
				}
				body, _ := events.Encode(ev)
				m := nats.NewMsg(tc.start)
				m.Reply, m.Data = target, body
				m.Header.Set(jetstream.MsgIDHeader, "ev-"+run)
				if err := u.nc.PublishMsg(m); err != nil {
					t.Fatal(err)
				}
				if err := u.nc.PublishRequest("$JS.API.INFO", target, nil); err != nil {
					t.Fatal(err)
				}
			}
			// A copy of a stored event, with and without its headers, aimed
			// at the supervisor's role subject (the inbound stream listens
			// there).
			role := n.ResumeAs("refund", "supervisor")
			for _, req := range []string{`{"seq":1,"no_hdr":true}`, `{"seq":1}`} {
				if err := u.nc.PublishRequest("$JS.API.DIRECT.GET."+n.EventStream(), role, []byte(req)); err != nil {
					t.Fatal(err)
				}
			}
			// Whatever reached the inbound stream of all that is handled
			// once the stream has drained (a copy aimed at an inbound
			// subject would be refused there: a direct get's copy bears
			// Nats-Stream, or is no resume).
			for i := range targets {
				run := fmt.Sprintf("r-reply-%d", i)
				natstest.WaitFor(t, d.admin, n.EventStream(), n.Event("refund", run, "interrupted"), natstest.Nth("interrupted", 1))
			}
			natstest.WaitDrained(t, d.admin, n.InStream())
			if cur, err := kv.Get(t.Context(), "refund.r-reply"); err != nil || cur.Revision() != before.Revision() {
				t.Errorf("the checkpoint moved from revision %d: %v %v", before.Revision(), cur, err)
			}
			if got := natstest.Read(t, d.admin, n.AuditStream(), n.Audit("refund", "r-reply")); len(got) != 1 {
				t.Errorf("the run has %d audit records, want its 1 (started, its outcome the pause)", len(got))
			}
			if got := natstest.Read(t, d.admin, n.EventStream(), n.Event("refund", "r-reply", "completed")); len(got) != 0 {
				t.Errorf("%d completed events stored for the run", len(got))
			}
			if got := state(n.ScheduleStream()); got.LastSeq != sched.LastSeq {
				t.Errorf("the schedule stream grew from %d to %d", sched.LastSeq, got.LastSeq)
			}
			for bucket, key := range map[string]string{n.PendingBucket(): "refund.r-forged", n.ConfigBucket(): "gate.rules"} {
				b, err := d.admin.KeyValue(t.Context(), bucket)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := b.Get(t.Context(), key); !errors.Is(err, jetstream.ErrKeyNotFound) {
					t.Errorf("%s has %s: %v", bucket, key, err)
				}
			}
			d.stillWaits(t, "r-reply", in.RequestID)
			// Nor may the dead letters be copied out whole: they hold
			// clients' commands.
			if tc.user == "anonymous" {
				u.denied(t, "direct-get a dead letter", "$JS.API.DIRECT.GET."+n.DeadLetterStream(),
					request(u.nc, "$JS.API.DIRECT.GET."+n.DeadLetterStream(), `{"seq":1,"no_hdr":true}`))
			}
		})
	}
}

// TestNoClientMayCreateAConsumer is the fifth finding: a push consumer
// delivers to any subject of its stream's account, and one delivered
// interrupted events into the audit stream. No client user may create a
// consumer of any kind; they read streams by message.
func TestNoClientMayCreateAConsumer(t *testing.T) {
	d := deployConfigDeployment(t, doorsFlow(0))
	n := d.names
	users := []string{"agent", "bot", "operator"}
	dd := defaultDeployment(t, doorsFlow(0))
	if got := natstest.Read(t, d.admin, n.AuditStream(), n.Audit("refund", "r-forged")); len(got) != 0 {
		t.Fatalf("audit records before: %d", len(got))
	}
	defer func() {
		for _, dep := range []*deployment{d, dd} {
			if got := natstest.Read(t, dep.admin, n.AuditStream(), n.Audit("refund", "r-forged")); len(got) != 0 {
				t.Errorf("a consumer delivered %d messages into the audit stream", len(got))
			}
		}
	}()
	check := func(d *deployment, name string) {
		u, _ := d.as(name)
		for _, stream := range []string{n.EventStream(), n.AuditStream(), n.DeadLetterStream(), "KV_" + n.RunsBucket()} {
			push := `{"stream_name":"` + stream + `","config":{"deliver_subject":"` + n.Audit("refund", "r-forged") + `","ack_policy":"none"}}`
			u.denied(t, "create a push consumer of "+stream, "$JS.API.CONSUMER.CREATE."+stream,
				request(u.nc, "$JS.API.CONSUMER.CREATE."+stream, push))
			u.denied(t, "create a named push consumer of "+stream, "$JS.API.CONSUMER.CREATE."+stream,
				request(u.nc, "$JS.API.CONSUMER.CREATE."+stream+".forged", push))
			u.denied(t, "create a durable push consumer of "+stream, "$JS.API.CONSUMER.DURABLE.CREATE."+stream,
				request(u.nc, "$JS.API.CONSUMER.DURABLE.CREATE."+stream+".forged",
					`{"stream_name":"`+stream+`","config":{"durable_name":"forged","deliver_subject":"`+n.Audit("refund", "r-forged")+`","ack_policy":"none"}}`))
			u.denied(t, "create an ordered consumer of "+stream, "$JS.API.CONSUMER.CREATE."+stream, func(ctx context.Context) error {
				_, err := u.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
				return err
			})
		}
	}
	for _, name := range users {
		check(d, name)
	}
	check(dd, "anonymous")
}

// TestTheClientBelievesOnlyWhatTheEventsStreamHolds is the fifth
// finding's other half: a forged event on a run's subject made a resume
// over HTTP answer 500 while the approval was applied. The client reads
// every event it acts on back from the events stream, on the run's
// subject: a live message there is only a hint.
func TestTheClientBelievesOnlyWhatTheEventsStreamHolds(t *testing.T) {
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, doorsFlow(0))
	n := svc.Names()
	anon := connectUser(t, "anonymous", srv.ClientURL())
	c := client.New(anon.nc, anon.js, n, "/test", natstest.Wait)
	first := waitingRefund(t, c, "r-other")
	if _, err := c.Resume(t.Context(), "refund", "r-other", protocol.Resume{ResumeToken: first.ResumeToken, Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	in := waitingRefund(t, c, "r-trust")
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var (
		ev  client.Event
		err error
	)
	go func() {
		defer close(done)
		ev, err = c.Resume(t.Context(), "refund", "r-trust", protocol.Resume{ResumeToken: in.ResumeToken, Decision: "approve"})
	}()
	// While it waits, forge its outcome: a reply that is no event, and
	// another run's completed event copied out of the stream, with and
	// without its headers, aimed at this run's subjects.
	forger := connectUser(t, "anonymous", srv.ClientURL())
	other, err := forger.js.Stream(t.Context(), n.EventStream())
	if err != nil {
		t.Fatal(err)
	}
	last, err := other.GetLastMsgForSubject(t.Context(), n.Event("refund", "r-other", "completed"))
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	for i := 0; i < 25; i++ {
		for _, kind := range []string{"completed", "failed", "refused", "interrupted"} {
			subject := n.Event("refund", "r-trust", kind)
			_ = forger.nc.PublishRequest("$JS.API.INFO", subject, nil)
			_ = forger.nc.PublishRequest("$JS.API.DIRECT.GET."+n.EventStream(), subject, fmt.Appendf(nil, `{"seq":%d,"no_hdr":true}`, last.Sequence))
			_ = forger.nc.PublishRequest("$JS.API.DIRECT.GET."+n.EventStream(), subject, fmt.Appendf(nil, `{"seq":%d}`, last.Sequence))
		}
		<-tick.C
	}
	tick.Stop()
	select {
	case <-done:
		t.Fatalf("the resume settled before any worker ran: %s %v", ev.Kind, err)
	default:
	}
	natstest.Start(t, srv, doorsFlow(0))
	<-done
	if err != nil || ev.Kind != protocol.EventCompleted || ev.Event.Subject() != "r-trust" {
		t.Fatalf("resume settled with %s of %q: %v; want its own completed event", ev.Kind, ev.Event.Subject(), err)
	}
	var done2 protocol.Completed
	if err := ev.Decode(&done2); err != nil || !strings.Contains(string(done2.State), `"decision":"approve"`) {
		t.Fatalf("completed %s: %v", done2.State, err)
	}
}

// TestEachClientReadsOnlyItsOwnReplies is the seventh finding's: any user
// subscribed to _INBOX.> read other users' pending-index replies. Each
// client user of the deploy configuration has its own reply prefix.
func TestEachClientReadsOnlyItsOwnReplies(t *testing.T) {
	d := deployConfigDeployment(t, doorsFlow(0))
	agent, ac := d.as("agent")
	waitingRefund(t, ac, "r-inbox")
	for _, subject := range []string{"_INBOX.>", bus.ClientInboxPrefix("bot") + ".>", bus.ClientInboxPrefix("operator") + ".>", bus.WorkerInboxPrefix(d.names) + ".>"} {
		agent.denied(t, "read the replies on "+subject, subject, func(ctx context.Context) error {
			sub, err := agent.nc.SubscribeSync(subject)
			if err != nil {
				return err
			}
			return waitSub(ctx, sub)
		})
	}
	_, bc := d.as("bot")
	if p, err := bc.ListPending(t.Context(), client.PendingQuery{}); err != nil || len(p.Items) != 1 {
		t.Fatalf("bot: pending %v %v", p, err)
	}
}

// TestDeadlinesAreTheServersToFire: no client may publish a deadline, a
// reminder or their due commands (nor hold one for a flow's version), and an expire or remind command sent to
// the inbound stream is no command at all.
func TestDeadlinesAreTheServersToFire(t *testing.T) {
	d := defaultDeployment(t, doorsFlow(time.Hour))
	n := d.names
	u, c := d.as("anonymous")
	in := waitingRefund(t, c, "r-due")
	for _, subject := range []string{n.Due("refund", "expire"), n.Schedule("refund", "r-due", in.RequestID),
		n.Due("refund", protocol.VerbRemind), n.Reminder("refund", "r-due", in.RequestID, 1),
		// A due command held for a version is the workers' alone too.
		n.Held("refund", "1", n.Due("refund", "expire")), n.Held("refund", "1", n.In("refund", "resume"))} {
		u.denied(t, "publish "+subject, subject, publish(u.js, subject))
	}
	ev, err := events.New("forged-expire", "/attacker", protocol.TypeExpire, "r-due", time.Now().UTC(),
		protocol.Expire{RequestID: in.RequestID, ExpiresAt: time.Now().UTC(), Flow: "refund", Run: "r-due"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := events.Encode(ev)
	natstest.PublishRaw(t, u.js, n.In("refund", "expire"), body, nats.Header{"Content-Type": {events.Structured}, jetstream.MsgIDHeader: {"forged-expire"}})
	natstest.WaitFor(t, d.admin, n.DeadLetterStream(), n.DeadLetter(bus.ReasonUnknownSubject), func(rs []natstest.Received) bool { return len(rs) > 0 })
	remind, err := events.New("forged-remind", "/attacker", protocol.TypeRemind, "r-due", time.Now().UTC(),
		protocol.Remind{RequestID: in.RequestID, At: time.Now().UTC(), N: 1, Flow: "refund", Run: "r-due"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = events.Encode(remind)
	natstest.PublishRaw(t, u.js, n.In("refund", protocol.VerbRemind), body, nats.Header{"Content-Type": {events.Structured}, jetstream.MsgIDHeader: {"forged-remind"}})
	natstest.WaitFor(t, d.admin, n.DeadLetterStream(), n.DeadLetter(bus.ReasonUnknownSubject), func(rs []natstest.Received) bool { return len(rs) > 1 })
	d.stillWaits(t, "r-due", in.RequestID)
}

// TestAVouchHoldsOnlyForItsCommandAndItsCaller is the third finding: a
// vouched resume read from the dead letters was republished as a resume
// of another run and applied as the supervisor it named. A vouch now binds
// the subject, the event id, the run and the body it was made for, and
// expires; a vouched resume names the request it decides.
func TestAVouchHoldsOnlyForItsCommandAndItsCaller(t *testing.T) {
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, doorsFlow(0))
	n := svc.Names()
	_, js := natstest.Connect(t, srv.ClientURL())
	c := svc.Client("/test")
	a := waitingRefund(t, c, "r-vouch-a")
	b := waitingRefund(t, c, "r-vouch-b")
	vouched := func(id, run string, r protocol.Resume, approver string, roles []string, expires time.Time, tamper func(*nats.Msg)) *nats.Msg {
		ev, err := events.New(id, "/http", protocol.TypeResume, run, time.Now().UTC(), r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := events.Encode(ev)
		m := nats.NewMsg(n.In("refund", "resume"))
		m.Data = body
		m.Header.Set("Content-Type", events.Structured)
		m.Header.Set(jetstream.MsgIDHeader, id)
		m.Header.Set(protocol.HeaderApprover, approver)
		m.Header.Set(protocol.HeaderRoles, strings.Join(roles, ","))
		m.Header.Set(protocol.HeaderVouch, protocol.Vouch(natstest.Secret, protocol.Vouched{Subject: m.Subject, EventID: id, Run: run,
			Body: body, Approver: approver, Roles: roles}, expires))
		if tamper != nil {
			tamper(m)
		}
		return m
	}
	later := time.Now().Add(time.Hour)
	original := vouched("v-1", "r-vouch-a", protocol.Resume{RequestID: a.RequestID, Decision: "reject", Reason: "no"}, "sam", []string{"supervisor"}, later, nil)
	for i, tc := range []struct {
		what string
		msg  *nats.Msg
		code protocol.Code
	}{
		{"the vouch of a's resume on a resume of b", vouched("v-2", "r-vouch-b", protocol.Resume{RequestID: b.RequestID, Decision: "approve"}, "sam", []string{"supervisor"}, later, func(m *nats.Msg) {
			m.Header.Set(protocol.HeaderVouch, original.Header.Get(protocol.HeaderVouch))
		}), protocol.CodeForbidden},
		{"another approver", vouched("v-3", "r-vouch-b", protocol.Resume{RequestID: b.RequestID, Decision: "approve"}, "sam", []string{"supervisor"}, later, func(m *nats.Msg) {
			m.Header.Set(protocol.HeaderApprover, "mallory")
		}), protocol.CodeForbidden},
		{"more roles", vouched("v-4", "r-vouch-b", protocol.Resume{RequestID: b.RequestID, Decision: "approve"}, "sam", []string{"clerk"}, later, func(m *nats.Msg) {
			m.Header.Set(protocol.HeaderRoles, "clerk,supervisor")
		}), protocol.CodeForbidden},
		{"another body", vouched("v-5", "r-vouch-b", protocol.Resume{RequestID: b.RequestID, Decision: "reject", Reason: "no"}, "sam", []string{"supervisor"}, later, func(m *nats.Msg) {
			m.Data = []byte(strings.Replace(string(m.Data), `"reject"`, `"approve"`, 1))
		}), protocol.CodeForbidden},
		{"another subject", vouched("v-6", "r-vouch-b", protocol.Resume{RequestID: b.RequestID, Decision: "approve"}, "sam", []string{"supervisor"}, later, func(m *nats.Msg) {
			m.Subject = n.ResumeAs("refund", "supervisor")
		}), protocol.CodeForbidden},
		{"an expired vouch", vouched("v-7", "r-vouch-b", protocol.Resume{RequestID: b.RequestID, Decision: "approve"}, "sam", []string{"supervisor"}, time.Now().Add(-time.Second), nil), protocol.CodeForbidden},
		{"a vouch of the first version", vouched("v-8", "r-vouch-b", protocol.Resume{RequestID: b.RequestID, Decision: "approve"}, "sam", []string{"supervisor"}, later, func(m *nats.Msg) {
			m.Header.Set(protocol.HeaderVouch, "rM3vTnDdLy0vvsTmWkfPQdDK2m2Z5SbU3Qbq1bBHaYk")
		}), protocol.CodeForbidden},
		{"no request id", vouched("v-9", "r-vouch-b", protocol.Resume{Decision: "approve"}, "sam", []string{"supervisor"}, later, nil), protocol.CodeInvalidPayload},
	} {
		if _, err := js.PublishMsg(t.Context(), tc.msg); err != nil {
			t.Fatal(err)
		}
		got := natstest.WaitFor(t, js, n.EventStream(), n.Event("refund", "r-vouch-b", "refused"), natstest.Nth("refused", i+1))
		var ref protocol.Refused
		natstest.Last(t, got, "refused").Decode(t, &ref)
		if ref.Code != tc.code {
			t.Errorf("%s: refused %+v, want %s", tc.what, ref, tc.code)
		}
	}
	svcStillWaits(t, js, n, "r-vouch-b", b.RequestID)
	// The vouch as made is good for its own command.
	if _, err := js.PublishMsg(t.Context(), original); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, js, n.EventStream(), n.Event("refund", "r-vouch-a", "completed"), natstest.Nth("completed", 1))
}

func svcStillWaits(t *testing.T, js jetstream.JetStream, n wire.Names, run, rq string) {
	t.Helper()
	d := &deployment{names: n, admin: js}
	d.stillWaits(t, run, rq)
}

// watchers are the client users who may watch the live events, in each
// kind of deployment, with a user of it who may start a run.
var watchers = []struct {
	name    string
	dep     func(*testing.T, *engine.Flow) *deployment
	starter string   // a user who may start a run
	users   []string // the users who watch
}{
	{"deploy config", deployConfigDeployment, "agent", []string{"agent", "bot", "operator"}},
	{"default install", defaultDeployment, "anonymous", []string{"anonymous"}},
}

// TestNoClientMayPublishStoredEventsAndEveryReaderReceivesThem: the events
// stream republishes each event it stores on <prefix>.stored.ev.>, and
// the Go client takes what comes there as stored without reading it back.
// No client user may publish there, and each that may watch the live
// events receives the stored ones, with the stream's headers.
func TestNoClientMayPublishStoredEventsAndEveryReaderReceivesThem(t *testing.T) {
	for _, tc := range watchers {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.dep(t, doorsFlow(0))
			n := d.names
			_, starter := d.as(tc.starter)
			for i, name := range tc.users {
				run := fmt.Sprintf("r-stored-%d", i)
				u, _ := d.as(name)
				got := make(chan *nats.Msg, 16)
				if _, err := u.nc.Subscribe(n.StoredEvents(), func(m *nats.Msg) { got <- m }); err != nil {
					t.Fatal(err)
				}
				if err := u.nc.Flush(); err != nil {
					t.Fatal(err)
				}
				if u.violated(n.StoredEvents()) {
					t.Fatalf("%s may not subscribe to %s", name, n.StoredEvents())
				}

				forged := nats.NewMsg("interlock.stored.ev.refund." + run + ".completed")
				forged.Data = []byte(`{"specversion":"1.0","id":"forged-1","source":"/attacker","type":"` + protocol.TypeCompleted + `","subject":"` + run + `"}`)
				forged.Header.Set("Content-Type", events.Structured)
				forged.Header.Set(jetstream.StreamHeader, n.EventStream())
				forged.Header.Set(jetstream.SubjectHeader, n.Event("refund", run, "completed"))
				forged.Header.Set(jetstream.SequenceHeader, "1")
				if err := u.nc.PublishMsg(forged); err != nil {
					t.Fatal(err)
				}
				natstest.Eventually(t, name+" refused publishing on "+forged.Subject, func() bool { return u.violated(forged.Subject) })

				waitingRefund(t, starter, run)
				want := n.Event("refund", run, protocol.EventInterrupted)
				timeout := time.After(natstest.Wait)
				for received := false; !received; {
					var m *nats.Msg
					select {
					case m = <-got:
					case <-timeout:
						t.Fatalf("%s did not receive %s stored", name, want)
					}
					if strings.Contains(string(m.Data), "forged-1") {
						t.Fatalf("%s received the event it published on %s", name, m.Subject)
					}
					if m.Subject != "interlock.stored."+want[len("interlock."):] {
						continue
					}
					if m.Header.Get(jetstream.StreamHeader) != n.EventStream() || m.Header.Get(jetstream.SubjectHeader) != want || m.Header.Get(jetstream.SequenceHeader) == "" {
						t.Fatalf("%s received %s with headers %v, want those of %s in %s", name, m.Subject, m.Header, want, n.EventStream())
					}
					received = true
				}
			}
		})
	}
}

// signatureHeader is the shape docs/asyncapi.yaml gives Interlock-Signature.
var signatureHeader = regexp.MustCompile(`^[0-9a-f]{16}:[A-Za-z0-9+/]{86}==$`)

// TestEverySettlingEventIsSignedAndEveryClientUserMayCheckIt: the workers
// sign each event that settles a command with the deployment's audit key,
// over its subject and body, and every client user that may watch the
// live events may read the audit keys that check the signature (so the Go
// client believes its outcomes live); an event that settles nothing is
// not signed.
func TestEverySettlingEventIsSignedAndEveryClientUserMayCheckIt(t *testing.T) {
	for _, tc := range watchers {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.dep(t, doorsFlow(0))
			n := d.names
			_, starter := d.as(tc.starter)
			for i, name := range tc.users {
				run := fmt.Sprintf("r-signed-%d", i)
				u, c := d.as(name)
				list, err := c.AuditKeys(t.Context())
				if err != nil {
					t.Fatalf("%s: reading the audit keys: %v", name, err)
				}
				keys := map[string]ed25519.PublicKey{}
				for _, k := range list {
					pub, err := k.Key()
					if err != nil {
						t.Fatal(err)
					}
					keys[k.Kid] = pub
				}
				got := make(chan *nats.Msg, 16)
				if _, err := u.nc.Subscribe(n.Event("refund", run, ">"), func(m *nats.Msg) { got <- m }); err != nil {
					t.Fatal(err)
				}
				if err := u.nc.Flush(); err != nil {
					t.Fatal(err)
				}
				waitingRefund(t, starter, run)
				seen := map[string]bool{}
				for !seen[protocol.EventInterrupted] || !seen[protocol.EventStarted] {
					var m *nats.Msg
					select {
					case m = <-got:
					case <-time.After(natstest.Wait):
						t.Fatalf("%s: saw %v of run %s, want started and interrupted", name, seen, run)
					}
					kind := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
					seen[kind] = true
					sig := m.Header.Get(protocol.HeaderEventSignature)
					switch {
					case protocol.SignedKind(kind) && (!signatureHeader.MatchString(sig) || !protocol.VerifyEventSignature(keys, m.Subject, m.Data, sig)):
						t.Errorf("%s: %s carries %s %q, which the audit keys do not verify", name, m.Subject, protocol.HeaderEventSignature, sig)
					case !protocol.SignedKind(kind) && sig != "":
						t.Errorf("%s: %s, which settles nothing, is signed", name, m.Subject)
					}
				}
			}
		})
	}
}
