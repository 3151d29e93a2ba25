package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/wire"
)

// TestReadsGiveUpWhenNoReplyComes: a read whose request is lost (as when
// the server is killed between request and reply) returns an error once
// the client's bound has passed, however long the caller's context would
// let it wait.
func TestReadsGiveUpWhenNoReplyComes(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, booking.Flow())
	nc, _ := natstest.Connect(t, srv.ClientURL())
	// The client's JetStream requests go to a subscriber that passes
	// stream lookups on to JetStream and drops every read of a message:
	// the read's request is lost, and no reply ever comes.
	sub, err := nc.Subscribe("void.API.>", func(m *nats.Msg) {
		rest := strings.TrimPrefix(m.Subject, "void.API.")
		if !strings.HasPrefix(rest, "STREAM.INFO.") {
			return
		}
		req := nats.NewMsg("$JS.API." + rest)
		req.Data = m.Data
		if res, err := nc.RequestMsg(req, natstest.Wait); err == nil {
			out := nats.NewMsg(m.Reply)
			out.Header, out.Data = res.Header, res.Data
			_ = nc.PublishMsg(out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	js, err := jetstream.NewWithAPIPrefix(nc, "void.API")
	if err != nil {
		t.Fatal(err)
	}
	names, _ := wire.NewNames("")
	c := client.New(nc, js, names, "/test", 50*time.Millisecond)
	// A deadline far beyond the test's: the client must bound the read.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for name, read := range map[string]func() error{
		"Checkpoint":    func() error { _, err := c.Checkpoint(ctx, "booking", "r-1"); return err },
		"LastInterrupt": func() error { _, err := c.LastInterrupt(ctx, "booking", "r-1"); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- read() }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s = %v, want an error wrapping context.DeadlineExceeded", name, err)
			}
		case <-time.After(natstest.Wait):
			t.Fatalf("%s still waits for a reply after %s", name, natstest.Wait)
		}
	}
}
