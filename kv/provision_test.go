package kv_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/wire"
)

func TestProvisionMakesTheStoresBucketsAndTheFinishedRunsIndex(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	for _, prefix := range []string{"", "acme"} {
		n, err := wire.NewNames(prefix)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a second worker provisions the same names
			if err := kv.Provision(t.Context(), js, n, kv.BucketConfig{}); err != nil {
				t.Fatalf("prefix %q: %v", prefix, err)
			}
		}
		for _, status := range wire.FinishedStatuses {
			s, err := js.Stream(t.Context(), n.FinishedStream(status))
			if err != nil {
				t.Fatalf("stream %s: %v", n.FinishedStream(status), err)
			}
			c := s.CachedInfo().Config
			if c.Retention != jetstream.LimitsPolicy || !c.AllowMsgTTL || !c.AllowDirect ||
				c.MaxAge != 0 || c.Subjects[0] != n.Prefix+".finished."+status+".>" || c.Duplicates != kv.DefaultDuplicates {
				t.Errorf("%s: %+v; want limits retention, per-message TTLs, direct gets, no max age", n.FinishedStream(status), c)
			}
		}
		runs, err := js.KeyValue(t.Context(), n.RunsBucket())
		if err != nil {
			t.Fatal(err)
		}
		st, err := runs.Status(t.Context())
		if err != nil || st.History() != kv.DefaultHistory || st.LimitMarkerTTL() != kv.DefaultMarkerTTL {
			t.Errorf("%s: history %d, marker TTL %v (%v); want %d and %v", n.RunsBucket(), st.History(), st.LimitMarkerTTL(), err, kv.DefaultHistory, kv.DefaultMarkerTTL)
		}
		pending, err := js.KeyValue(t.Context(), n.PendingBucket())
		if err != nil {
			t.Fatalf("%s: %v", n.PendingBucket(), err)
		}
		if st, err := pending.Status(t.Context()); err != nil || st.History() != 1 || st.LimitMarkerTTL() != kv.DefaultMarkerTTL {
			t.Errorf("%s: history %d, marker TTL %v (%v); want 1 and %v", n.PendingBucket(), st.History(), st.LimitMarkerTTL(), err, kv.DefaultMarkerTTL)
		}
		if _, err := kv.Open(t.Context(), js, n, kv.Options{}); err != nil {
			t.Errorf("Open after Provision: %v", err)
		}
	}
}

func TestProvisionRefusesABadConfigurationBeforeTheServerSeesIt(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	n, _ := wire.NewNames("")
	for _, tc := range []struct {
		name    string
		cfg     kv.BucketConfig
		wantErr string
	}{
		{"defaults", kv.BucketConfig{}, ""},
		{"history too short", kv.BucketConfig{History: 2}, "history 2"},
		{"history too long", kv.BucketConfig{History: 65}, "history 65"},
		{"marker TTL under a second", kv.BucketConfig{MarkerTTL: time.Millisecond}, "MarkerTTL"},
		{"too many replicas", kv.BucketConfig{Replicas: 7}, "Replicas 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := kv.Provision(t.Context(), js, n, tc.cfg)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Provision(%+v) = %v, want error containing %q", tc.cfg, err, tc.wantErr)
			}
		})
	}
}

func TestOpenWithoutProvisionSaysToProvision(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	n, _ := wire.NewNames("")
	if _, err := kv.Open(t.Context(), js, n, kv.Options{}); err == nil || !strings.Contains(err.Error(), "kv.Provision") {
		t.Fatalf("Open on a bare server = %v, want an error saying to provision with kv.Provision", err)
	}
}
