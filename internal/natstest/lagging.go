package natstest

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// LaggingReplica makes stream answer direct gets as a replica that fell
// behind does (cut off, paused, catching up): a mirror of it that serves
// its direct gets (MirrorDirect) and holds none of the messages stored
// so far, so that the server hands about half the direct gets of those
// messages to the mirror, which answers "not found". Messages stored
// later reach the mirror too. Reads from the stream's leader (the
// STREAM.MSG.GET API, wire.LeaderMsg) are not affected. It returns once
// the mirror serves; the mirror goes at cleanup.
func LaggingReplica(t testing.TB, js jetstream.JetStream, stream string) {
	t.Helper()
	ctx := t.Context()
	origin, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("natstest: binding %s: %v", stream, err)
	}
	name := "LAGGING_" + strings.NewReplacer(".", "_", "$", "_").Replace(stream)
	m, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Mirror: &jetstream.StreamSource{Name: stream}, MirrorDirect: true, AllowDirect: true})
	if err != nil {
		t.Fatalf("natstest: mirroring %s: %v", stream, err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(ctx, name) })
	// Caught up, then emptied: it serves direct gets, and has none of
	// what was stored before.
	Eventually(t, "the mirror of "+stream+" caught up", func() bool {
		oi, err1 := origin.Info(ctx)
		mi, err2 := m.Info(ctx)
		return err1 == nil && err2 == nil && mi.State.LastSeq >= oi.State.LastSeq
	})
	if err := m.Purge(ctx); err != nil {
		t.Fatalf("natstest: purging the mirror of %s: %v", stream, err)
	}
}
