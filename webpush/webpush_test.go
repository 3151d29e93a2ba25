package webpush_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/notify/channeltest"
	"github.com/interlockhq/interlock/webpush"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestWebPushPassesTheChannelSuite: Web Push is a channel of the seam,
// against a push service on loopback that checks each notice's VAPID
// signature and decrypts it.
func TestWebPushPassesTheChannelSuite(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, channeltest.Harness{
		Name:     webpush.Name,
		Features: channeltest.Features{RetryAfter: true, SecretAddresses: true, Settle: true},
		New:      func(t *testing.T) channeltest.Remote { return &pushRemote{p: startPushService(t)} },
	})
}

// pushRemote is the suite's push service.
type pushRemote struct {
	p *pushService
}

func (r *pushRemote) Reach(t *testing.T, svc *interlock.Service, person string) (string, string) {
	t.Helper()
	endpoint, sub := r.p.add(person)
	subscribe(t, svc, person, sub)
	return "", endpoint
}

// subscribe subscribes the device of sub as person's.
func subscribe(t *testing.T, svc *interlock.Service, person string, sub []byte) {
	t.Helper()
	devices, err := webpush.OpenDevices(t.Context(), svc.JetStream(), svc.Names())
	if err != nil {
		t.Fatal(err)
	}
	s, err := webpush.ParseSubscription(sub)
	if err != nil {
		t.Fatal(err)
	}
	if err := devices.Subscribe(t.Context(), person, s); err != nil {
		t.Fatal(err)
	}
}

func (r *pushRemote) RoleAddress(string) string { return "" }

func (r *pushRemote) Start(t *testing.T, svc *interlock.Service, d notify.Dispatch) func() {
	t.Helper()
	return startChannel(t, svc, r.p, d)
}

// startChannel starts the channel on svc, sending to p, and returns what
// stops it.
func startChannel(t *testing.T, svc *interlock.Service, p *pushService, d notify.Dispatch) func() {
	t.Helper()
	ch, err := webpush.New(svc, webpush.Config{Directory: d.Directory, PublicURL: d.PublicURL, Transport: p.srv.Client().Transport,
		FirstRetry: d.FirstRetry, MaxRetry: d.MaxRetry, AckWait: d.AckWait, Logger: d.Logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return func() { _ = ch.Stop(context.WithoutCancel(t.Context())) }
}

func (r *pushRemote) Received() []channeltest.Received {
	var out []channeltest.Received
	for _, m := range r.p.received() {
		out = append(out, channeltest.Received{Address: m.Endpoint, Link: m.Payload.URL, Text: m.Payload.Title + "\n" + m.Payload.Body, Settle: m.Payload.Settled})
	}
	return out
}

func (r *pushRemote) Answer(endpoint string, a channeltest.Answer) { r.p.answer(endpoint, a) }
