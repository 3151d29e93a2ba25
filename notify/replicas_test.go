package notify_test

import (
	"testing"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/wire"
)

func TestAChannelsBucketHasAsManyReplicasAsTheDeploymentsStreams(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	names, _ := wire.NewNames("")
	_, js := natstest.Connect(t, c.Nodes[0].ClientURL())
	if got := notify.Replicas(t.Context(), js, names, 0); got != 1 {
		t.Errorf("Replicas before the deployment's streams exist = %d, want 1", got)
	}
	if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	// Every channel opens the shared bucket with 0 (as the deployment):
	// the first makes it with 3 copies, none scales it down.
	for range 2 {
		if _, err := notify.OpenSent(t.Context(), js, names, 0, 0); err != nil {
			t.Fatal(err)
		}
		kv, err := js.KeyValue(t.Context(), notify.SentBucket(names))
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r := st.Config().Replicas; r != 3 {
			t.Fatalf("bucket %s has %d replicas, want the deployment's 3", notify.SentBucket(names), r)
		}
	}
	if got := notify.Replicas(t.Context(), js, names, 5); got != 5 {
		t.Errorf("Replicas(5) = %d, want 5 as asked", got)
	}
}
