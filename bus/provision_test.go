package bus_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/wire"
)

func TestProvisionCreatesTheProtocolsStreamsAndBucketsIdempotently(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	for _, prefix := range []string{"", "acme"} {
		n, err := wire.NewNames(prefix)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a second worker provisions the same names
			if err := bus.Provision(t.Context(), js, n, bus.StreamConfig{}); err != nil {
				t.Fatalf("prefix %q: %v", prefix, err)
			}
		}
		info := func(name string) *jetstream.StreamInfo {
			t.Helper()
			s, err := js.Stream(t.Context(), name)
			if err != nil {
				t.Fatalf("stream %s: %v", name, err)
			}
			i, err := s.Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return i
		}
		in := info(n.InStream())
		if in.Config.Retention != jetstream.WorkQueuePolicy || in.Config.Storage != jetstream.FileStorage || in.Config.Subjects[0] != n.Prefix+".in.>" {
			t.Errorf("%s: %+v", n.InStream(), in.Config)
		}
		ev := info(n.EventStream())
		if ev.Config.Retention != jetstream.LimitsPolicy || ev.Config.MaxAge != 7*24*time.Hour || ev.Config.Subjects[0] != n.Prefix+".ev.>" {
			t.Errorf("%s: retention %v max age %v", n.EventStream(), ev.Config.Retention, ev.Config.MaxAge)
		}
		au := info(n.AuditStream())
		if !au.Config.DenyDelete || !au.Config.DenyPurge || au.Config.Subjects[0] != n.Prefix+".audit.>" || au.Config.MaxAge != bus.DefaultAuditMaxAge {
			t.Errorf("%s: deny delete %v, deny purge %v", n.AuditStream(), au.Config.DenyDelete, au.Config.DenyPurge)
		}
		if dl := info(n.DeadLetterStream()); dl.Config.Subjects[0] != n.Prefix+".dlq.>" {
			t.Errorf("%s: subjects %v", n.DeadLetterStream(), dl.Config.Subjects)
		}
		if _, err := js.KeyValue(t.Context(), n.ConfigBucket()); err != nil {
			t.Errorf("%s: %v", n.ConfigBucket(), err)
		}
		// The store's buckets are kv's to provision.
		if _, err := js.KeyValue(t.Context(), n.RunsBucket()); err == nil {
			t.Errorf("bus.Provision made %s, which kv.Provision owns", n.RunsBucket())
		}
	}

	// The audit stream is append-only: neither a delete nor a purge goes through.
	n, _ := wire.NewNames("")
	if _, err := js.Publish(t.Context(), n.Audit("booking", "r-1"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	audit, err := js.Stream(t.Context(), n.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.DeleteMsg(t.Context(), 1); err == nil {
		t.Error("deleting an audit record succeeded")
	}
	if err := audit.Purge(t.Context()); err == nil {
		t.Error("purging the audit stream succeeded")
	}
}

func TestProvisionRefusesABadConfigurationBeforeTheServerSeesIt(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	n, _ := wire.NewNames("")
	cases := []struct {
		name    string
		cfg     bus.StreamConfig
		wantErr string
	}{
		{"defaults", bus.StreamConfig{}, ""},
		{"events kept as long as the dedupe window", bus.StreamConfig{EventMaxAge: 2 * time.Minute}, ""},
		{"events kept less than the dedupe window", bus.StreamConfig{EventMaxAge: time.Minute}, "(--events-max-age) 1m0s is shorter than the deduplication window 2m0s: keep events at least 2m0s"},
		{"shorter window, shorter events", bus.StreamConfig{EventMaxAge: time.Minute, Duplicates: 30 * time.Second}, ""},
		{"audit kept less than the dedupe window", bus.StreamConfig{AuditMaxAge: time.Second}, "--audit-max-age"},
		{"too many replicas", bus.StreamConfig{Replicas: 7}, "Replicas 7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := bus.Provision(t.Context(), js, n, tc.cfg)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Provision(%+v) = %v, want error containing %q", tc.cfg, err, tc.wantErr)
			}
		})
	}
}

func TestServersWithoutMessageSchedulesAreRefused(t *testing.T) {
	for _, tt := range []struct {
		version string
		ok      bool
	}{
		{"2.15.2", true}, {"2.12.0", true}, {"3.0.0", true}, {"v2.12.1", true},
		{"2.11.9", false}, {"2.10.22", false}, {"1.4.0", false}, {"", false}, {"nats", false},
	} {
		err := bus.CheckServerVersion(tt.version)
		if (err == nil) != tt.ok {
			t.Errorf("CheckServerVersion(%q) = %v, want ok=%v", tt.version, err, tt.ok)
		}
		if err != nil && tt.version != "" && tt.version != "nats" && !strings.Contains(err.Error(), "needs nats-server 2.12.0 or later") {
			t.Errorf("CheckServerVersion(%q) = %v: the error must name the version needed", tt.version, err)
		}
	}
}

// TestProvisionWaitsForTheClusterToForm starts the nodes of a cluster one
// by one: alone, a node cannot hold 3 replicas, and Provision gives up
// after its bounded wait saying what to do; given time, it waits (and
// says so) until the other nodes start, and converges.
func TestProvisionWaitsForTheClusterToForm(t *testing.T) {
	t.Parallel()
	n, _ := wire.NewNames("")
	c := natstest.NewCluster(t, 3)
	c.Start(2)
	_, js := natstest.Connect(t, c.Nodes[2].ClientURL())
	var logs natstest.Buffer
	log := zerolog.New(&logs)

	start := time.Now()
	err := bus.Provision(t.Context(), js, n, bus.StreamConfig{Replicas: 3, ClusterWait: 500 * time.Millisecond, Logger: &log})
	if err == nil || !strings.Contains(err.Error(), "start enough nodes") && !strings.Contains(err.Error(), "start the cluster's other nodes") {
		t.Fatalf("Provision on 1 node of 3 = %v, want a refusal saying to start the other nodes", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("giving up took %s, bounded by 500ms", d)
	}

	done := make(chan error, 1)
	go func() {
		done <- bus.Provision(t.Context(), js, n, bus.StreamConfig{Replicas: 3, Logger: &log})
	}()
	natstest.Eventually(t, "Provision logging its wait", func() bool {
		return strings.Contains(logs.String(), "waiting for the JetStream cluster to form")
	})
	c.Start(0)
	c.Start(1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Provision once the cluster formed: %v", err)
		}
	case <-time.After(natstest.Wait):
		t.Fatalf("Provision still waiting %s after the cluster's nodes started", natstest.Wait)
	}
	s, err := js.Stream(t.Context(), n.InStream())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Replicas; got != 3 {
		t.Errorf("%s has %d replicas, want 3", n.InStream(), got)
	}
	if got := c.Nodes[0].JetStreamNodes(); got != 3 {
		t.Errorf("JetStreamNodes = %d, want 3", got)
	}
}

// TestProvisionMakesAnOlderEventsStreamRepublishWhatItStores: an events
// stream provisioned by an earlier version republishes nothing; the next
// worker's Provision makes it republish each event it stores on
// <prefix>.stored.ev.>, and keeps the events it holds.
func TestProvisionMakesAnOlderEventsStreamRepublishWhatItStores(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	nc, js := natstest.Connect(t, srv.ClientURL())
	n, _ := wire.NewNames("acme")
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: n.EventStream(), Subjects: []string{n.Prefix + ".ev.>"}, Description: "Interlock run events",
		MaxAge: bus.DefaultEventMaxAge, Duplicates: bus.DefaultDuplicates, AllowDirect: true,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), n.Event("booking", "r-old", "completed"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := bus.Provision(t.Context(), js, n, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), n.EventStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rp := info.Config.RePublish; rp == nil || rp.Source != "acme.ev.>" || rp.Destination != "acme.stored.ev.>" || rp.HeadersOnly {
		t.Fatalf("%s republishes %+v, want acme.ev.> to acme.stored.ev.>, whole", n.EventStream(), rp)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%s holds %d events after Provision, want the 1 it held", n.EventStream(), info.State.Msgs)
	}
	sub, err := nc.SubscribeSync(n.StoredEvents())
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(t.Context(), n.Event("booking", "r-new", "completed"), []byte(`{"new":true}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(natstest.Wait)
	if err != nil {
		t.Fatalf("no event republished on %s: %v", n.StoredEvents(), err)
	}
	if m.Subject != "acme.stored.ev.booking.r-new.completed" || string(m.Data) != `{"new":true}` ||
		m.Header.Get(jetstream.StreamHeader) != n.EventStream() || m.Header.Get(jetstream.SequenceHeader) != strconv.FormatUint(ack.Sequence, 10) {
		t.Fatalf("republished %s %q with headers %v, want the event stored at sequence %d", m.Subject, m.Data, m.Header, ack.Sequence)
	}
}

// A write made on start (the gate's rules into the configuration bucket)
// by a node restarting into a cluster whose stream has no leader yet is
// answered by nobody: Ensure retries it until the stream answers, instead
// of ending the service at its first attempt.
func TestEnsureRetriesAWriteNoStreamAnswersUntilOneDoes(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	cfg := jetstream.KeyValueConfig{Bucket: "config"}
	kv, err := js.CreateKeyValue(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(t.Context(), "KV_config"); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	done := make(chan error, 1)
	attempts := 0
	go func() {
		done <- bus.Ensure(t.Context(), "the gate's rules", func(ctx context.Context) error {
			_, err := kv.Put(ctx, "gate.rules", []byte("rules: []"))
			if attempts++; attempts == 1 {
				first <- err
			}
			return err
		})
	}()
	if err := <-first; !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("the first write, with the bucket's stream gone: %v; want no response from stream", err)
	}
	if _, err := js.CreateKeyValue(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Ensure: %v; want the write retried once the stream answers", err)
	}
	if e, err := kv.Get(t.Context(), "gate.rules"); err != nil || string(e.Value()) != "rules: []" {
		t.Fatalf("the bucket holds %v, %v; want the write", e, err)
	}
}
