package bus_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/wire"
)

// TestAWorkerStartsWhenItsEntrysFirstWriteGoesUnanswered: a node
// restarted while its cluster still elects leaders writes its worker's
// entry before the workers bucket's stream answers. The write is retried,
// as provisioning's are, until the stream answers, instead of stopping
// the worker.
func TestAWorkerStartsWhenItsEntrysFirstWriteGoesUnanswered(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	nc, js := natstest.Connect(t, srv.ClientURL())
	n, _ := wire.NewNames("")
	cfg := jetstream.KeyValueConfig{Bucket: n.WorkersBucket()}
	if _, err := js.CreateKeyValue(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	p, err := bus.NewPresence(t.Context(), js, n, "node-1", map[string]string{"refund": ""}, 0, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(t.Context(), "KV_"+n.WorkersBucket()); err != nil {
		t.Fatal(err)
	}
	// Something hears the write and answers nothing, as a stream without
	// a leader.
	sub, err := nc.SubscribeSync("$KV." + n.WorkersBucket() + ".>")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Start(t.Context()) }()
	if _, err := sub.NextMsg(natstest.Wait); err != nil {
		t.Fatalf("no write of the entry: %v", err)
	}
	if _, err := js.CreateKeyValue(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("starting while the bucket's stream did not answer, then did: %v", err)
	}
	t.Cleanup(func() { _ = p.Stop(t.Context()) })
	kv, err := js.KeyValue(t.Context(), n.WorkersBucket())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the worker's entry written", func() bool {
		keys, err := kv.ListKeys(t.Context())
		if err != nil {
			return false
		}
		defer func() { _ = keys.Stop() }()
		for range keys.Keys() {
			return true
		}
		return false
	})
}
