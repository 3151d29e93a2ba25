package bus_test

import (
	"testing"
	"time"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/wire"
)

// TestPublisherRecheckSkipsWhatTheStreamAlreadyHolds publishes a
// transition's messages, lets the deduplication window pass, and publishes
// them again as a redelivered transition would: with recheck nothing is
// stored twice; without it, the repeat lands.
func TestPublisherRecheckSkipsWhatTheStreamAlreadyHolds(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{Duplicates: time.Second, EventMaxAge: time.Minute, AuditMaxAge: time.Minute}); err != nil {
		t.Fatal(err)
	}
	p := bus.NewPublisher(js, names, "interlock/test")
	at := time.Now().UTC()
	msgs := []engine.Message{
		{Stream: engine.EventStream, Kind: engine.EventStarted, ID: "u-1", Flow: "booking", Run: "r-1", Time: at, Data: &engine.StartedEvent{Flow: "booking", Run: "r-1"}},
		{Stream: engine.AuditStream, Kind: engine.ActionStarted, ID: "u-2", Flow: "booking", Run: "r-1", Time: at, Data: &engine.AuditRecord{Flow: "booking", Run: "r-1", Action: engine.ActionStarted, At: at}},
	}
	count := func() int {
		return len(natstest.Read(t, js, names.EventStream(), ">")) + len(natstest.Read(t, js, names.AuditStream(), ">"))
	}
	if err := p.Publish(t.Context(), msgs, 1, false); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(t.Context(), msgs, 1, false); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d messages stored; the repeat within the window must be dropped", n)
	}
	// Past the window, only the recheck keeps the repeat out.
	natstest.Eventually(t, "past the deduplication window", func() bool { return time.Since(at) > 1500*time.Millisecond })
	if err := p.Publish(t.Context(), msgs, 1, true); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d messages stored after a rechecked repeat, want 2", n)
	}
	if err := p.Publish(t.Context(), msgs, 1, false); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 4 {
		t.Fatalf("%d messages stored after an unchecked repeat past the window, want 4 (the test is no test otherwise)", n)
	}
}
