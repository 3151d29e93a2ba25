package bus_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// earlierInbound creates the inbound stream as an earlier version of
// Interlock did: the deadlines' schedules in it, so message schedules and
// roll-ups allowed.
func earlierInbound(t *testing.T, js jetstream.JetStream, n wire.Names) {
	t.Helper()
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: n.InStream(), Subjects: []string{n.Prefix + ".in.>", n.Prefix + ".schedule.>"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
		AllowMsgSchedules: true, AllowRollup: true,
	}); err != nil {
		t.Fatal(err)
	}
}

// earlierDeadline stores a deadline as an earlier version did: a schedule
// in the inbound stream aimed at <prefix>.in.<flow>.expire.
func earlierDeadline(t *testing.T, js jetstream.JetStream, n wire.Names, run, rq string, at time.Time) {
	t.Helper()
	ev, err := events.New("expire-"+run, "interlock/test", protocol.TypeExpire, run, time.Now().UTC(),
		protocol.Expire{RequestID: rq, ExpiresAt: at.UTC(), Flow: "refund", Run: run})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := events.Encode(ev)
	m := nats.NewMsg(n.Schedule("refund", run, rq))
	m.Data = body
	m.Header.Set("Content-Type", events.Structured)
	m.Header.Set(bus.HeaderSchedule, "@at "+at.UTC().Format(time.RFC3339))
	m.Header.Set(bus.HeaderScheduleTarget, n.In("refund", "expire"))
	if _, err := js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

// TestAnInboundStreamOfAnEarlierVersionIsMadeAnewWithItsCommandsAndDeadlines:
// an earlier version's inbound stream allowed schedules (which a server
// never turns off again); at start it is made anew without them, its
// commands put back in order and its deadlines moved to the schedule
// stream, aimed at the due subject, where they fire.
func TestAnInboundStreamOfAnEarlierVersionIsMadeAnewWithItsCommandsAndDeadlines(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	n, _ := wire.NewNames("")
	earlierInbound(t, js, n)
	// Two commands waiting, and a deadline of a run that waits until far
	// ahead (it is moved, not fired) and one already due.
	for _, run := range []string{"r-a", "r-b"} {
		natstest.Publish(t, js, n.In("refund", "start"), protocol.TypeStart, run, protocol.Start{})
	}
	earlierDeadline(t, js, n, "r-later", "rq_later", time.Now().Add(time.Hour))
	if err := bus.Provision(t.Context(), js, n, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(t.Context(), n.InStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.AllowMsgSchedules || info.Config.AllowRollup || len(info.Config.Subjects) != 2 {
		t.Fatalf("inbound stream after the move: %+v", info.Config)
	}
	got := natstest.Read(t, js, n.InStream(), n.Prefix+".in.>")
	if len(got) != 2 || got[0].Event.Subject() != "r-a" || got[1].Event.Subject() != "r-b" || got[0].Header.Get(jetstream.MsgIDHeader) == "" {
		t.Fatalf("commands after the move: %d %+v", len(got), got)
	}
	moved := natstest.Read(t, js, n.ScheduleStream(), n.Schedule("refund", "r-later", "rq_later"))
	if len(moved) != 1 || moved[0].Header.Get(bus.HeaderScheduleTarget) != n.Due("refund", "expire") {
		t.Fatalf("deadline after the move: %+v", moved)
	}
	if _, err := js.Stream(t.Context(), n.InStream()+"_MIGRATING"); err == nil {
		t.Error("the holding stream is left")
	}
	// Provisioning again changes nothing.
	if err := bus.Provision(t.Context(), js, n, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	if again := natstest.Read(t, js, n.InStream(), n.Prefix+".in.>"); len(again) != 2 {
		t.Fatalf("%d commands after provisioning again", len(again))
	}
}

// TestAMoveStoppedHalfWayFinishesAtTheNextStart: the inbound stream was
// deleted while its commands waited in the holding stream; the next start
// makes it anew and puts them back.
func TestAMoveStoppedHalfWayFinishesAtTheNextStart(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	n, _ := wire.NewNames("")
	hold := n.InStream() + "_MIGRATING"
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: hold, Subjects: []string{n.Prefix + ".migrating.>"}}); err != nil {
		t.Fatal(err)
	}
	for i, run := range []string{"r-x", "r-y"} {
		ev, err := events.New("ev-"+run, "/test", protocol.TypeStart, run, time.Now().UTC(), protocol.Start{})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := events.Encode(ev)
		m := nats.NewMsg(n.Prefix + ".migrating." + string(rune('1'+i)))
		m.Data = body
		m.Header.Set("Interlock-Migrated-From", n.In("refund", "start"))
		m.Header.Set("Interlock-Migrated-Msg-Id", "ev-"+run)
		if _, err := js.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := bus.Provision(t.Context(), js, n, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	got := natstest.Read(t, js, n.InStream(), n.Prefix+".in.>")
	if len(got) != 2 || got[0].Header.Get(jetstream.MsgIDHeader) != "ev-r-x" || got[1].Event.Subject() != "r-y" {
		t.Fatalf("commands put back: %+v", got)
	}
	if _, err := js.Stream(t.Context(), hold); err == nil {
		t.Error("the holding stream is left")
	}
}

// TestAnEmbeddedServerKeepsTheRunsOfAnEarlierVersion: an earlier version
// kept its data in the account $G; the embedded server moves it to the
// account of Interlock's streams, and a run waiting there is answered.
func TestAnEmbeddedServerKeepsTheRunsOfAnEarlierVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n, _ := wire.NewNames("")
	// The earlier layout: one account, the inbound stream with schedules.
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true}
	old, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go old.Start()
	if !old.ReadyForConnections(10 * time.Second) {
		t.Fatal("the earlier server did not start")
	}
	nc, err := nats.Connect(old.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	earlierInbound(t, js, n)
	natstest.Publish(t, js, n.In("refund", "start"), protocol.TypeStart, "r-old", protocol.Start{})
	nc.Close()
	old.Shutdown()
	old.WaitForShutdown()
	if _, err := os.Stat(filepath.Join(dir, "jetstream", server.DEFAULT_GLOBAL_ACCOUNT)); err != nil {
		t.Fatalf("no data in the global account: %v", err)
	}

	srv := natstest.StartServer(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "jetstream", bus.InterlockAccount, "streams", n.InStream())); err != nil {
		t.Fatalf("the data did not move to %s: %v", bus.InterlockAccount, err)
	}
	natstest.Start(t, srv, doorsFlow(0))
	_, js = natstest.Connect(t, srv.ClientURL())
	natstest.WaitFor(t, js, n.EventStream(), n.Event("refund", "r-old", "interrupted"), natstest.Nth("interrupted", 1))
	natstest.WaitDrained(t, js, n.InStream())
}
