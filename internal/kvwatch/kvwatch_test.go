package kvwatch_test

import (
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/internal/kvwatch"
	"github.com/interlockhq/interlock/internal/natstest"
)

func TestAWatchAppliesTheCurrentValueBeforeItReturnsThenEachChangeUntilStopped(t *testing.T) {
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "cfg"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(t.Context(), "k", "one"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
	w, err := kvwatch.Start(t.Context(), kv, "k", func(e jetstream.KeyValueEntry) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(e.Value()))
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := got(); len(s) != 1 || s[0] != "one" {
		t.Fatalf("applied %q when Start returned, want the current value", s)
	}
	if _, err := kv.PutString(t.Context(), "k", "two"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the change applied", func() bool { return len(got()) == 2 })
	if err := w.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(t.Context()); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
	if _, err := kv.PutString(t.Context(), "k", "three"); err != nil {
		t.Fatal(err)
	}
	// A value put after Stop is never applied: a watch of its own sees it
	// arrive, and the stopped one has not.
	seen2 := make(chan struct{}, 4)
	w2, err := kvwatch.Start(t.Context(), kv, "k", func(jetstream.KeyValueEntry) { seen2 <- struct{}{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-seen2
	_ = w2.Stop(t.Context())
	if s := got(); len(s) != 2 {
		t.Fatalf("applied %q; a value put after Stop was applied", s)
	}
}
