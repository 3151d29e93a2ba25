package interlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// journal records the lifecycle calls of background services.
type journal struct {
	mu    sync.Mutex
	calls []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, s)
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.calls, " ")
}

type background struct {
	name     string
	j        *journal
	startErr error
	stopErr  error
}

func (b *background) Start(context.Context) error {
	b.j.add("start:" + b.name)
	return b.startErr
}

func (b *background) Stop(context.Context) error {
	b.j.add("stop:" + b.name)
	return b.stopErr
}

func TestServiceStartsBackgroundServicesInOrderAndStopsThemInReverseOnce(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	j := &journal{}
	stopErr := errors.New("http: drain timed out")
	cfg := interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret, Conn: srv.WorkerConn(),
		Services: []interlock.Background{&background{name: "deadlines", j: j}, &background{name: "http", j: j, stopErr: stopErr}}}
	svc, err := interlock.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := j.String(); got != "start:deadlines start:http" {
		t.Fatalf("started %q", got)
	}
	first := svc.Stop(t.Context())
	second := svc.Stop(t.Context())
	if !errors.Is(first, stopErr) || !errors.Is(second, stopErr) {
		t.Fatalf("Stop = %v then %v; want the background service's error both times", first, second)
	}
	if got := j.String(); got != "start:deadlines start:http stop:http stop:deadlines" {
		t.Fatalf("lifecycle %q; want each stopped once, in reverse order", got)
	}
}

func TestServiceThatCannotStartABackgroundServiceStopsWhatItStarted(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	j := &journal{}
	cfg := interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret, Conn: srv.WorkerConn(),
		Services: []interlock.Background{&background{name: "a", j: j}, &background{name: "b", j: j, startErr: errors.New("port in use")},
			&background{name: "c", j: j}}}
	_, err := interlock.Start(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "port in use") {
		t.Fatalf("Start = %v, want the failing service's error", err)
	}
	if got := j.String(); got != "start:a start:b stop:a" {
		t.Fatalf("lifecycle %q; want a stopped, c never started", got)
	}
}

func TestServiceConfigIsValidatedBeforeAnythingStarts(t *testing.T) {
	t.Parallel()
	flows := []*engine.Flow{booking.Flow()}
	cases := []struct {
		name    string
		cfg     interlock.Config
		wantErr string
	}{
		{"no flows", interlock.Config{}, "Config.Flows is empty"},
		{"short secret", interlock.Config{Flows: flows, Secret: []byte("short")}, "Config.Secret is 5 bytes"},
		{"negative concurrency", interlock.Config{Flows: flows, Concurrency: -1}, "Config.Concurrency"},
		{"nil service", interlock.Config{Flows: flows, Services: []interlock.Background{nil}}, "Config.Services[0] is nil"},
		{"bad prefix", interlock.Config{Flows: flows, Prefix: "Bad.Prefix"}, "prefix"},
		{"events kept less than the dedupe window", interlock.Config{Flows: flows, Streams: bus.StreamConfig{EventMaxAge: 1}}, "EventMaxAge"},
	}
	for _, tc := range cases {
		// No server is running at the default URL in tests: a config error
		// must come before any attempt to connect.
		tc.cfg.Conn = wire.ConnConfig{URL: "nats://127.0.0.1:1"}
		_, err := interlock.Start(t.Context(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: Start = %v, want an error naming %q", tc.name, err, tc.wantErr)
		}
	}
}

// TestServicePublishesTheAuditKeyOfItsSecret starts a service, then one
// with another secret on the same server, and checks that the config
// bucket lists the key each signs with, derived from its secret, the
// first one kept.
func TestServicePublishesTheAuditKeyOfItsSecret(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	first := natstest.Start(t, srv, booking.Flow())
	other := []byte("another-secret-another-secret-0123456789")
	second := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: other, Instance: "second"})

	want, err := engine.AuditKeyOf(natstest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if got := first.Runner().AuditKey(); got.ID != want.ID {
		t.Fatalf("the service signs with key %s, its secret's is %s", got.ID, want.ID)
	}
	otherKey := second.Runner().AuditKey()
	kv, err := first.JetStream().KeyValue(t.Context(), first.Names().ConfigBucket())
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), protocol.AuditKeysKey)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := protocol.DecodeAuditKeys(e.Value())
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].Kid != want.ID || keys[0].PublicKey != want.String() || keys[1].Kid != otherKey.ID || keys[1].PublicKey != otherKey.String() {
		t.Fatalf("%s lists %+v; want %s then %s", protocol.AuditKeysKey, keys, want.ID, otherKey.ID)
	}
	if keys[0].Since.IsZero() || keys[1].Since.Before(keys[0].Since) {
		t.Errorf("since: %v, %v", keys[0].Since, keys[1].Since)
	}
}

// TestAServiceRunsOnTheStoreItIsGiven: with Config.Store, the engine
// keeps checkpoints in that store (here an in-memory one a test could
// make fail), while the service still provisions its buckets.
func TestAServiceRunsOnTheStoreItIsGiven(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	store := enginetest.NewStore()
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret, Store: store})
	ev, err := svc.Client("/test").Start(t.Context(), booking.Name, "r-own", nil, nil)
	if err != nil || ev.Kind != protocol.EventInterrupted {
		t.Fatalf("start: %v %v", ev.Kind, err)
	}
	if cp, _, err := store.Load(t.Context(), booking.Name, "r-own"); err != nil || cp.Status != engine.Waiting {
		t.Fatalf("the given store holds %+v (%v), want the waiting run", cp, err)
	}
	if _, _, err := svc.Store().Load(t.Context(), booking.Name, "r-own"); err == nil {
		t.Error("the KV store holds the run as well; the engine was to use the store given")
	}
	if _, err := svc.JetStream().KeyValue(t.Context(), svc.Names().RunsBucket()); err != nil {
		t.Errorf("the runs bucket was not provisioned: %v", err)
	}
}

// TestAStartingServiceSweepsThePendingIndexOfRunsThatNoLongerWait: an
// entry of the pending index whose run finished (a purge nats-server
// undid after a crash, its issue #8505) is listed as waiting until a
// service starts: it sweeps it away, and keeps the entries of runs that
// wait. Listed at a node the flow no longer has, it does not make the
// start refuse, as a run that waits there would.
func TestAStartingServiceSweepsThePendingIndexOfRunsThatNoLongerWait(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	first := natstest.Start(t, srv, booking.Flow())
	ctx := t.Context()
	if ev, err := first.Client("/test").Start(ctx, booking.Name, "r-waits", nil, nil); err != nil || ev.Kind != protocol.EventInterrupted {
		t.Fatalf("start: %v %v", ev.Kind, err)
	}
	// Stopped, its own sweep is over: what follows is the next start's.
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	nc, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	store, err := kv.Open(ctx, js, names, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	done := &engine.Checkpoint{Flow: booking.Name, Run: "r-revived", Status: engine.Completed, State: engine.Doc{}, CreatedAt: now, UpdatedAt: now}
	if _, err := store.Create(ctx, done); err != nil {
		t.Fatal(err)
	}
	if err := store.PutPending(ctx, &protocol.Pending{Flow: booking.Name, Run: "r-revived", Node: "ask", Kind: "question", Checkpoint: 1, AskedAt: now}); err != nil {
		t.Fatal(err)
	}
	c := client.New(nc, js, names, "/test", natstest.Wait)
	listed := func() []string {
		page, err := c.ListPending(ctx, client.PendingQuery{Flow: booking.Name})
		if err != nil {
			t.Fatal(err)
		}
		var runs []string
		for _, p := range page.Items {
			runs = append(runs, p.Run)
		}
		slices.Sort(runs)
		return runs
	}
	if got := listed(); !slices.Equal(got, []string{"r-revived", "r-waits"}) {
		t.Fatalf("before the start, the index lists %v", got)
	}
	natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret, Instance: "second"})
	natstest.Eventually(t, "the finished run swept from the pending index", func() bool { return slices.Equal(listed(), []string{"r-waits"}) })
}
