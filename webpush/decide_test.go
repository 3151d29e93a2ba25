package webpush_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/inbox"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/notify/channeltest"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/webpush"
)

// deployment is an Interlock with a directory of ann (finance), its HTTP
// API and inbox on loopback, and a push service.
type deployment struct {
	t    *testing.T
	svc  *interlock.Service
	base string
	push *pushService
	dir  *people.Directory
	log  *natstest.Buffer
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	dir, err := people.New("test", []people.Person{{Name: "ann", Roles: []string{channeltest.Role}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &deployment{t: t, push: startPushService(t), dir: dir, log: &natstest.Buffer{}}
	srv := natstest.StartServer(t, "")
	d.svc = natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{channeltest.Flow()}, Secret: natstest.Secret, People: people.NewLive(dir)})
	logger := zerolog.New(d.log).Level(zerolog.DebugLevel)
	directory := func() *people.Directory { return dir }
	api, err := httpapi.New(d.svc, httpapi.Config{Addr: "127.0.0.1:0", Links: d.svc.Links(), Uses: d.svc.LinkUses(), People: directory, Logger: &logger})
	if err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(d.svc, inbox.Config{Links: d.svc.Links(), Uses: d.svc.LinkUses(), People: directory, Logger: &logger})
	if err != nil {
		t.Fatal(err)
	}
	in.Register(api)
	if err := d.svc.Attach(t.Context(), api); err != nil {
		t.Fatal(err)
	}
	d.base = "http://" + api.Addr()
	return d
}

// start starts the channel sending to the push service with transport
// (the push service's own when nil).
func (d *deployment) start(transport http.RoundTripper) {
	d.t.Helper()
	if transport == nil {
		transport = d.push.srv.Client().Transport
	}
	logger := zerolog.New(d.log).Level(zerolog.DebugLevel)
	ch, err := webpush.New(d.svc, webpush.Config{Directory: func() *people.Directory { return d.dir }, PublicURL: d.base, Transport: transport,
		FirstRetry: 50 * time.Millisecond, MaxRetry: 200 * time.Millisecond, Logger: &logger})
	if err != nil {
		d.t.Fatal(err)
	}
	if err := d.svc.Attach(d.t.Context(), ch); err != nil {
		d.t.Fatal(err)
	}
}

// refund starts a refund run and returns its approval.
func (d *deployment) refund(run string, amount float64) protocol.Interrupted {
	d.t.Helper()
	b, _ := json.Marshal(amount)
	state := map[string]json.RawMessage{"amount": b}
	if _, err := d.svc.Client("/test").Start(d.t.Context(), "refund", run, state, nil); err != nil {
		d.t.Fatal(err)
	}
	var in protocol.Interrupted
	natstest.Eventually(d.t, run+" waiting", func() bool {
		var err error
		in, err = d.svc.Client("/test").LastInterrupt(d.t.Context(), "refund", run)
		return err == nil
	})
	return in
}

// notices waits for n notices and returns them.
func (d *deployment) notices(n int) []pushed {
	d.t.Helper()
	natstest.Eventually(d.t, "the notices pushed", func() bool { return len(d.push.received()) >= n })
	return d.push.received()
}

// TestApproveOnTheNoticeDecidesAsItsPersonOnce: the notice carries the
// approval's title, key args and deadline, and Approve and Reject; its
// Approve is what the service worker does, a POST of the person's own
// decision link with the link's form token: the run is approved by ann,
// and the same link decides nothing twice.
func TestApproveOnTheNoticeDecidesAsItsPersonOnce(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	_, sub := d.push.add("ann-phone")
	subscribe(t, d.svc, "ann", sub)
	d.start(nil)
	in := d.refund("r-approve", 4800)
	p := d.notices(1)[0]
	if p.Payload.Title != "Refund $4,800.00" || !strings.Contains(p.Payload.Body, "Decide by ") {
		t.Errorf("the notice says %q / %q; want the title and the deadline", p.Payload.Title, p.Payload.Body)
	}
	if len(p.Payload.Actions) != 2 || p.Payload.Actions[0].Action != "approve" || p.Payload.Actions[1].Action != "reject" {
		t.Errorf("actions %+v, want approve and reject", p.Payload.Actions)
	}
	if p.Header.Get("Urgency") != "high" || p.Header.Get("Topic") == "" {
		t.Errorf("Urgency %q, Topic %q", p.Header.Get("Urgency"), p.Header.Get("Topic"))
	}
	text, ok := strings.CutPrefix(p.Payload.URL, d.base+links.DecidePath)
	if !ok {
		t.Fatalf("the notice opens %q, not a decision link of the inbox", p.Payload.URL)
	}
	c, err := d.svc.Links().Check(text, links.KindDecide, time.Now())
	if err != nil || c.Person != "ann" || c.RequestID != in.RequestID || !d.svc.Links().CheckFormToken(c.ID, p.Payload.CSRF) {
		t.Fatalf("the notice's link grants %+v (%v), form token ok %v", c, err, d.svc.Links().CheckFormToken(c.ID, p.Payload.CSRF))
	}
	approve := func() int {
		form := url.Values{"csrf": {p.Payload.CSRF}, "decision": {"approve"}, "key": {"inbox-0123456789abcdef01234567"}}
		res, err := http.PostForm(p.Payload.URL, form)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	if code := approve(); code != http.StatusOK {
		t.Fatalf("Approve: %d", code)
	}
	cp, err := d.svc.Client("/test").Checkpoint(t.Context(), "refund", "r-approve")
	if err != nil || cp.Status != engine.Completed {
		t.Fatalf("after Approve the run is %s (%v), want completed", cp.Status, err)
	}
	recs, err := d.svc.Client("/test").VouchedAudit(t.Context(), "refund", "r-approve")
	if err != nil {
		t.Fatal(err)
	}
	if last := recs[len(recs)-1]; last.Action != protocol.ActionApproved || last.By != "ann" {
		t.Errorf("the last audit record is %s by %s, want approved by ann", last.Action, last.By)
	}
	// The notice that asked is replaced on the device by one that says
	// how it was decided, with no buttons.
	var follow pushed
	natstest.Eventually(t, "the follow-up pushed", func() bool {
		for _, m := range d.push.received() {
			if m.Payload.Settled {
				follow = m
				return true
			}
		}
		return false
	})
	if follow.Payload.Title != "Approved by ann" || len(follow.Payload.Actions) != 0 || follow.Payload.CSRF != "" || follow.Payload.Tag != p.Payload.Tag {
		t.Errorf("the follow-up = %+v; want Approved by ann, no buttons, the tag of the notice it replaces", follow.Payload)
	}
	// A forged form token decides nothing.
	second := d.refund("r-forged", 900)
	var q pushed
	natstest.Eventually(t, "the second notice pushed", func() bool {
		for _, m := range d.push.received() {
			if !m.Payload.Settled && m.Payload.Title == "Refund $900.00" {
				q = m
				return true
			}
		}
		return false
	})
	form := url.Values{"csrf": {"forged"}, "decision": {"approve"}}
	res, err := http.PostForm(q.Payload.URL, form)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("a forged form token: %d, want 403", res.StatusCode)
	}
	if cp, _ := d.svc.Client("/test").Checkpoint(t.Context(), "refund", "r-forged"); cp.Status != engine.Waiting || cp.Interrupt.RequestID != second.RequestID {
		t.Errorf("after a forged Approve the run is %s, want still waiting", cp.Status)
	}
}

// TestADeviceItsPushServiceForgotIsForgottenAndNothingDeadLettered: a
// 410 Gone says the browser unsubscribed: the device is forgotten, not
// tried again, and nothing is dead-lettered.
func TestADeviceItsPushServiceForgotIsForgottenAndNothingDeadLettered(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	gone, sub := d.push.add("ann-old-phone")
	subscribe(t, d.svc, "ann", sub)
	_, sub2 := d.push.add("ann-new-phone")
	subscribe(t, d.svc, "ann", sub2)
	d.push.answerStatus(gone, http.StatusGone)
	d.start(nil)
	d.refund("r-gone", 700)
	d.notices(1)
	devices, err := webpush.OpenDevices(t.Context(), d.svc.JetStream(), d.svc.Names())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the gone device forgotten", func() bool {
		keys, err := devices.Of(t.Context(), "ann")
		return err == nil && len(keys) == 1
	})
	waitIdle(t, d.svc)
	if n := deadLetters(t, d.svc); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
}

// TestAnEndpointOnAPrivateAddressIsRefusedAndNeverShown: with the
// deployment's outbound policy (no transport given), a subscription
// whose push service is on loopback is refused at once, dead-lettered
// with the refusal, and neither the dead letter nor the log shows its
// endpoint.
func TestAnEndpointOnAPrivateAddressIsRefusedAndNeverShown(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	endpoint, sub := d.push.add("ann-phone")
	subscribe(t, d.svc, "ann", sub)
	d.start(d.svc.Egress().Transport())
	d.refund("r-private", 700)
	names := d.svc.Names()
	var why string
	natstest.Eventually(t, "the event dead-lettered", func() bool {
		s, err := d.svc.JetStream().Stream(t.Context(), names.DeadLetterStream())
		if err != nil {
			return false
		}
		m, err := s.GetLastMsgForSubject(t.Context(), names.DeadLetter(notify.ReasonUndeliverable))
		if err != nil {
			return false
		}
		why = m.Header.Get(bus.HeaderError)
		return true
	})
	if !strings.Contains(why, "ann") || !strings.Contains(why, "refused") {
		t.Errorf("the dead letter says %q; want ann's device refused", why)
	}
	path := strings.TrimPrefix(endpoint, d.push.srv.URL)
	if strings.Contains(why, path) || strings.Contains(d.log.String(), path) {
		t.Errorf("the endpoint, a credential, is shown:\n%s\n%s", why, d.log.String())
	}
	if n := len(d.push.received()); n != 0 {
		t.Errorf("the push service on loopback took %d notices", n)
	}
}

// TestTheVAPIDKeyIsMadeOnceAndASubscriptionIsChecked: every process of a
// deployment signs with the key the first made, and a subscription that
// is not a browser's is refused saying why.
func TestTheVAPIDKeyIsMadeOnceAndASubscriptionIsChecked(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, channeltest.Flow())
	a, err := webpush.OpenDevices(t.Context(), svc.JetStream(), svc.Names())
	if err != nil {
		t.Fatal(err)
	}
	b, err := webpush.OpenDevices(t.Context(), svc.JetStream(), svc.Names())
	if err != nil {
		t.Fatal(err)
	}
	if a.PublicKey() == "" || a.PublicKey() != b.PublicKey() {
		t.Fatalf("public keys %q and %q, want one", a.PublicKey(), b.PublicKey())
	}
	good := `{"endpoint": "https://push.example.com/p/1", "keys": {"p256dh": "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "auth": "BTBZMqHH6r4Tts7J_aSIgg"}}`
	if _, err := webpush.ParseSubscription([]byte(good)); err != nil {
		t.Fatalf("a browser's subscription: %v", err)
	}
	for _, c := range []struct{ name, sub, says string }{
		{"not JSON", `nope`, "not a PushSubscription"},
		{"http endpoint", strings.Replace(good, "https://", "http://", 1), "https://"},
		{"short key", strings.Replace(good, "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "BCVx", 1), "p256dh"},
		{"short auth", strings.Replace(good, "BTBZMqHH6r4Tts7J_aSIgg", "BTBZ", 1), "keys.auth"},
	} {
		if _, err := webpush.ParseSubscription([]byte(c.sub)); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.says)
		}
	}
}

// waitIdle waits until the channel's consumer is idle.
func waitIdle(t *testing.T, svc *interlock.Service) {
	t.Helper()
	names := svc.Names()
	name := notify.ConsumerName(names, webpush.Name)
	natstest.Eventually(t, "the channel idle", func() bool {
		c, err := svc.JetStream().Consumer(t.Context(), names.EventStream(), name)
		if err != nil {
			return false
		}
		info, err := c.Info(t.Context())
		waiting, werr := notify.Waiting(t.Context(), svc.JetStream(), names, name)
		return err == nil && werr == nil && info.NumPending == 0 && info.NumAckPending == 0 && waiting == 0
	})
}

// deadLetters counts the dead letters.
func deadLetters(t *testing.T, svc *interlock.Service) uint64 {
	t.Helper()
	s, err := svc.JetStream().Stream(context.WithoutCancel(t.Context()), svc.Names().DeadLetterStream())
	if err != nil {
		return 0
	}
	info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(">"))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
