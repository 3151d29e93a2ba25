package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// pausedRun starts a booking run through a service, stops the service (so
// that the next command waits in the inbound stream), and returns the
// server, a client, the run's interrupt and a function that starts the
// workers again.
func pausedRun(t *testing.T, run string) (*bus.Server, *client.Client, protocol.Interrupted, func()) {
	t.Helper()
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, booking.Flow())
	nc, js := natstest.Connect(t, srv.ClientURL())
	c := client.New(nc, js, wire.Names{}, "/test", time.Minute)
	ev, err := c.Start(t.Context(), "booking", run, map[string]json.RawMessage{"name": raw("Ann")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := interrupted(t, ev)
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	return srv, c, in, func() { natstest.Start(t, srv, booking.Flow()) }
}

// sent returns a channel that receives the event id of each command sent
// on subject, as the server sees it.
func sent(t *testing.T, srv *bus.Server, subject string) <-chan string {
	t.Helper()
	nc, _ := natstest.Connect(t, srv.ClientURL())
	ids := make(chan string, 4)
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) { ids <- m.Header.Get(jetstream.MsgIDHeader) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// outcome is what a call returned.
type outcome struct {
	ev  client.Event
	err error
}

// resumeAsync resumes the run in the background and returns its outcome's
// channel.
func resumeAsync(ctx context.Context, c *client.Client, run string, in protocol.Interrupted) <-chan outcome {
	done := make(chan outcome, 1)
	go func() {
		ev, err := c.Resume(ctx, "booking", run, protocol.Resume{ResumeToken: in.ResumeToken, Answers: map[string]json.RawMessage{"email": raw("ann@example.com")}})
		done <- outcome{ev, err}
	}()
	return done
}

// eventBody returns an interrupted event of the run as a worker would
// publish it, caused by the command with event id cause.
func eventBody(t *testing.T, id, run, cause string) []byte {
	t.Helper()
	body, err := events.AppendOutbound(nil, id, "interlock/elsewhere", protocol.TypeInterrupted, "booking", run, "", cause, time.Now().UTC(),
		&protocol.Interrupted{Flow: "booking", Run: run, Node: "ask_contact", RequestID: "rq-other", Kind: protocol.KindQuestion, ResumeToken: "not-a-token"})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// The outcome of a call is the event that names its command: an event of
// the same run that another command caused, stored between the call's
// publish and its outcome, is not taken for it.
func TestAnotherCommandsEventOfTheRunIsNotTheCallsOutcome(t *testing.T) {
	t.Parallel()
	srv, c, in, serve := pausedRun(t, "r-other")
	_, js := natstest.Connect(t, srv.ClientURL())
	ids := sent(t, srv, "interlock.in.booking.resume")
	done := resumeAsync(t.Context(), c, "r-other", in)
	id := <-ids

	natstest.PublishRaw(t, js, "interlock.ev.booking.r-other.interrupted", eventBody(t, "other-1", "r-other", "another-command"),
		nats.Header{"Content-Type": {events.Structured}, jetstream.MsgIDHeader: {"other-1"}})
	serve()
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.ev.Event.ID() == "other-1" {
		t.Fatal("the call took another command's interrupted event for its outcome")
	}
	if cause := events.StringExtension(got.ev.Event, protocol.ExtCausation); cause != id {
		t.Fatalf("outcome %s %s names cause %q, want the resume's id %q", got.ev.Kind, got.ev.Event.ID(), cause, id)
	}
	if out := interrupted(t, got.ev); out.Node != "ask_contact" || out.ResumeToken == "" {
		t.Fatalf("outcome %+v, want the interrupt at ask_contact", out)
	}
}

// A live event is believed only once the events stream holds it: a forged
// one on the run's subject that names the call's command, but that the
// stream refused to store, is not the call's outcome.
func TestAForgedLiveEventThatIsNotStoredIsNotBelieved(t *testing.T) {
	t.Parallel()
	srv, c, in, serve := pausedRun(t, "r-forged")
	nc, _ := natstest.Connect(t, srv.ClientURL())
	ids := sent(t, srv, "interlock.in.booking.resume")
	subject := "interlock.ev.booking.r-forged.interrupted"
	seen := make(chan struct{}, 1)
	if _, err := nc.Subscribe(subject, func(*nats.Msg) { seen <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	done := resumeAsync(t.Context(), c, "r-forged", in)
	id := <-ids

	// The stream refuses a message whose expected last sequence is wrong,
	// and every core subscriber receives it all the same.
	forged := nats.NewMsg(subject)
	forged.Data = eventBody(t, "forged-1", "r-forged", id)
	forged.Header.Set("Content-Type", events.Structured)
	forged.Header.Set(jetstream.ExpectedLastSeqHeader, "1")
	if err := nc.PublishMsg(forged); err != nil {
		t.Fatal(err)
	}
	<-seen
	serve()
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.ev.Event.ID() == "forged-1" {
		t.Fatal("the call believed a live event the events stream does not hold")
	}
	if cause := events.StringExtension(got.ev.Event, protocol.ExtCausation); cause != id {
		t.Fatalf("outcome %s names cause %q, want %q", got.ev.Event.ID(), cause, id)
	}
}

// A connection that may subscribe to some event subjects only still gets
// its calls' outcomes: it follows each run on a subscription of its own.
func TestACallWorksWithoutTheRightToSubscribeToEveryEvent(t *testing.T) {
	t.Parallel()
	c, _, _ := clientWith(t, "narrow", `{subscribe: {allow: ["_INBOX.>", "interlock.ev.booking.>"]}}`)
	for _, run := range []string{"r-narrow-1", "r-narrow-2"} {
		ev, err := c.Start(t.Context(), "booking", run, map[string]json.RawMessage{"name": raw("Ann")}, nil)
		if err != nil {
			t.Fatalf("start %s: %v", run, err)
		}
		in := interrupted(t, ev)
		ev, err = c.Resume(t.Context(), "booking", run, protocol.Resume{ResumeToken: in.ResumeToken, Answers: map[string]json.RawMessage{"email": raw("ann@example.com")}})
		if err != nil {
			t.Fatalf("resume %s: %v", run, err)
		}
		if in := interrupted(t, ev); in.Node != "ask_contact" {
			t.Fatalf("resume %s: interrupt at %s, want ask_contact", run, in.Node)
		}
	}
}

// Calls waiting at the same time, on a client and on copies of it made for
// other sources and people, share the client's one subscription to the
// deployment's events: a call adds no subscription of its own.
func TestCopiesOfAClientShareOneSubscription(t *testing.T) {
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, booking.Flow())
	nc, js := natstest.Connect(t, srv.ClientURL())
	c := client.New(nc, js, wire.Names{}, "/test", time.Minute)
	ev, err := c.Start(t.Context(), "booking", "r-share", map[string]json.RawMessage{"name": raw("Ann")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := interrupted(t, ev)
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	ids := sent(t, srv, "interlock.in.booking.resume")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	waitSent := func() {
		t.Helper()
		select {
		case <-ids:
		case <-time.After(30 * time.Second):
			t.Fatal("the resume was not sent")
		}
	}
	// The connection's subscriptions to event subjects, as the server
	// has them (a call's reads make short-lived subscriptions of their
	// own to reply subjects).
	eventSubs := func() int {
		t.Helper()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		cid, err := nc.GetClientID()
		if err != nil {
			t.Fatal(err)
		}
		z, err := srv.NATS().Connz(&server.ConnzOptions{CID: cid, Subscriptions: true})
		if err != nil || len(z.Conns) != 1 {
			t.Fatalf("connz of the client's connection: %v", err)
		}
		n := 0
		for _, s := range z.Conns[0].Subs {
			switch {
			case strings.HasPrefix(s, "interlock.ev."):
				n++
			case strings.HasPrefix(s, "interlock.stored.ev."):
				t.Fatalf("the connection subscribes to %s, want the live events only: it can read the audit keys that sign them", s)
			}
		}
		return n
	}
	resumeAsync(ctx, c.WithSource("/a"), "r-share", in)
	resumeAsync(ctx, c.As("bea"), "r-share", in)
	resumeAsync(ctx, c.WithSource("/b").WithWait(time.Minute), "r-share", in)
	for range 3 {
		waitSent()
	}
	if got := eventSubs(); got != 1 {
		t.Fatalf("with three calls waiting, on a client and copies of it, the connection has %d subscriptions to event subjects, want 1", got)
	}
}

// anonymous returns a client connected without credentials (the rights of
// bus.AnonymousUser), and its connection.
func anonymous(t *testing.T, srv *bus.Server) (*nats.Conn, *client.Client) {
	t.Helper()
	nc, js := natstest.ConnectWith(t, wire.ConnConfig{URL: srv.ClientURL()})
	return nc, client.New(nc, js, wire.Names{}, "/test/anonymous", time.Minute)
}

// eventSubjects returns the subjects of the connection's subscriptions to
// events, live or stored, as the server has them.
func eventSubjects(t *testing.T, srv *bus.Server, nc *nats.Conn) []string {
	t.Helper()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	cid, err := nc.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	z, err := srv.NATS().Connz(&server.ConnzOptions{CID: cid, Subscriptions: true})
	if err != nil || len(z.Conns) != 1 {
		t.Fatalf("connz of the client's connection: %v", err)
	}
	var out []string
	for _, s := range z.Conns[0].Subs {
		if strings.HasPrefix(s, "interlock.ev.") || strings.HasPrefix(s, "interlock.stored.ev.") {
			out = append(out, s)
		}
	}
	return out
}

// A client may make the server answer a request on any subject, a stored
// event's among them: a direct get of an event the stream holds, aimed
// at the subject of another kind of the run, is no stored event of that
// kind, and not the call's outcome, though it names the call's command.
func TestAStoredEventAimedAtAnotherSubjectIsNotBelieved(t *testing.T) {
	t.Parallel()
	srv, _, in, serve := pausedRun(t, "r-aimed")
	_, js := natstest.Connect(t, srv.ClientURL())
	withoutAuditKeys(t, js) // so that the client trusts the stored events
	nc, c := anonymous(t, srv)
	ids := sent(t, srv, "interlock.in.booking.resume")
	target := "interlock.stored.ev.booking.r-aimed.completed"
	watch, _ := natstest.ConnectWith(t, wire.ConnConfig{URL: srv.ClientURL()})
	seen := make(chan *nats.Msg, 1)
	if _, err := watch.Subscribe(target, func(m *nats.Msg) { seen <- m }); err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	done := resumeAsync(t.Context(), c, "r-aimed", in)
	id := <-ids
	if subs := eventSubjects(t, srv, nc); len(subs) != 1 || subs[0] != "interlock.stored.ev.>" {
		t.Fatalf("the client subscribes to %v, want [interlock.stored.ev.>]", subs)
	}

	// An event of the run that names the resume, stored on a subject of
	// a kind that settles nothing.
	planted := "interlock.ev.booking.r-aimed.noted"
	natstest.PublishRaw(t, js, planted, eventBody(t, "planted-1", "r-aimed", id),
		nats.Header{"Content-Type": {events.Structured}, jetstream.MsgIDHeader: {"planted-1"}})
	get := nats.NewMsg("$JS.API.DIRECT.GET.INTERLOCK_EVENTS")
	get.Reply = target
	get.Data = []byte(`{"last_by_subj":"` + planted + `"}`)
	if err := nc.PublishMsg(get); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-seen:
		if m.Header.Get(jetstream.SubjectHeader) != planted {
			t.Fatalf("the direct get's answer on %s has Nats-Subject %q, want %q", target, m.Header.Get(jetstream.SubjectHeader), planted)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the direct get's answer did not reach " + target)
	}
	serve()
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.ev.Kind != protocol.EventInterrupted || got.ev.Event.ID() == "planted-1" {
		t.Fatalf("outcome %s %s, want the worker's interrupted event: a direct get aimed at %s was believed", got.ev.Kind, got.ev.Event.ID(), target)
	}
}

// A deployment whose events stream does not republish what it stores
// (provisioned by an older version) still settles calls: the client
// subscribes to the live events and reads each outcome back.
func TestACallWorksOnAnEventsStreamThatDoesNotRepublish(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, booking.Flow())
	_, js := natstest.Connect(t, srv.ClientURL())
	s, err := js.Stream(t.Context(), "INTERLOCK_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.RePublish == nil {
		t.Fatal("the events stream does not republish: nothing to take away")
	}
	cfg.RePublish = nil
	if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	withoutAuditKeys(t, js) // nor did it sign its events
	nc, c := anonymous(t, srv)
	ev, err := c.Start(t.Context(), "booking", "r-older", map[string]json.RawMessage{"name": raw("Ann")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := interrupted(t, ev)
	if subs := eventSubjects(t, srv, nc); len(subs) != 1 || subs[0] != "interlock.ev.>" {
		t.Fatalf("the client subscribes to %v, want [interlock.ev.>]", subs)
	}
	ev, err = c.Resume(t.Context(), "booking", "r-older", protocol.Resume{ResumeToken: in.ResumeToken, Answers: map[string]json.RawMessage{"email": raw("ann@example.com")}})
	if err != nil {
		t.Fatal(err)
	}
	if in := interrupted(t, ev); in.Node != "ask_contact" {
		t.Fatalf("resume: interrupt at %s, want ask_contact", in.Node)
	}
}

// A connection that may neither read the audit keys nor ask for the
// events stream's configuration cannot trust signatures nor know that the
// stream republishes: it subscribes to the live events, reads each
// outcome back, and its calls are settled all the same.
func TestACallWorksWithoutTheRightToAskWhetherTheStreamRepublishes(t *testing.T) {
	t.Parallel()
	c, srv, nc := clientWith(t, "noinfo", `{publish: {deny: ["$JS.API.STREAM.INFO.INTERLOCK_EVENTS", "$JS.API.STREAM.INFO.KV_interlock_config", "$JS.API.DIRECT.GET.KV_interlock_config", "$JS.API.DIRECT.GET.KV_interlock_config.>"]}}`)
	for _, run := range []string{"r-noinfo-1", "r-noinfo-2"} {
		ev, err := c.Start(t.Context(), "booking", run, map[string]json.RawMessage{"name": raw("Ann")}, nil)
		if err != nil {
			t.Fatalf("start %s: %v", run, err)
		}
		if in := interrupted(t, ev); in.Node != "ask_email" {
			t.Fatalf("start %s: interrupt at %s, want ask_email", run, in.Node)
		}
		if subs := eventSubjects(t, srv, nc); len(subs) != 1 || subs[0] != "interlock.ev.>" {
			t.Fatalf("the client subscribes to %v, want [interlock.ev.>]", subs)
		}
	}
}

// withoutAuditKeys removes the audit keys the workers published, as a
// deployment that predates them has none.
func withoutAuditKeys(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), "interlock_config")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(t.Context(), protocol.AuditKeysKey); err != nil {
		t.Fatal(err)
	}
}

// signedEvent returns an interrupted event of the run caused by the
// command with event id cause, as a worker publishes it on subject, not
// stored (the stream refuses it: its expected last sequence is wrong),
// with signature sig, or, when sig is "", signed for subject by the
// worker whose secret is secret (the deployment's when nil).
func signedEvent(t *testing.T, subject, id, run, cause, sig string, secret ...byte) *nats.Msg {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = eventBody(t, id, run, cause)
	if sig == "" {
		if secret == nil {
			secret = natstest.Secret
		}
		signer, err := engine.NewEventSigner(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig = signer.Sign(subject, m.Data)
	}
	m.Header.Set("Content-Type", events.Structured)
	m.Header.Set(protocol.HeaderEventSignature, sig)
	m.Header.Set(jetstream.ExpectedLastSeqHeader, "1")
	return m
}

// A live event signed with the deployment's key, over its subject and
// body, is the call's outcome at once, before the events stream holds it:
// here the stream never does, and no worker runs.
func TestALiveEventSignedWithTheDeploymentsKeyIsBelievedBeforeItIsStored(t *testing.T) {
	t.Parallel()
	srv, c, in, _ := pausedRun(t, "r-signed")
	nc, _ := natstest.Connect(t, srv.ClientURL())
	ids := sent(t, srv, "interlock.in.booking.resume")
	done := resumeAsync(t.Context(), c, "r-signed", in)
	id := <-ids
	if err := nc.PublishMsg(signedEvent(t, "interlock.ev.booking.r-signed.interrupted", "signed-1", "r-signed", id, "")); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if got.err != nil || got.ev.Event.ID() != "signed-1" {
			t.Fatalf("outcome %v %v, want the signed event", got.ev.Event.ID(), got.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not take the signed event for its outcome")
	}
}

// A signature vouches for one body on one subject: a body changed to
// name the call's command under another event's signature, and an event
// signed for another run's subject, are not believed (nor stored), and
// the call waits for the worker's outcome.
func TestALiveEventWithAnotherEventsSignatureIsNotBelieved(t *testing.T) {
	t.Parallel()
	srv, c, in, serve := pausedRun(t, "r-copied")
	nc, _ := natstest.Connect(t, srv.ClientURL())
	ids := sent(t, srv, "interlock.in.booking.resume")
	subject := "interlock.ev.booking.r-copied.interrupted"
	seen := make(chan struct{}, 2)
	if _, err := nc.Subscribe(subject, func(*nats.Msg) { seen <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	done := resumeAsync(t.Context(), c, "r-copied", in)
	id := <-ids

	genuine := signedEvent(t, subject, "copied-1", "r-copied", "another-command", "")
	altered := signedEvent(t, subject, "copied-1", "r-copied", id, genuine.Header.Get(protocol.HeaderEventSignature))
	elsewhere := signedEvent(t, "interlock.ev.booking.r-other.interrupted", "copied-2", "r-copied", id, "")
	moved := signedEvent(t, subject, "copied-2", "r-copied", id, elsewhere.Header.Get(protocol.HeaderEventSignature))
	for _, m := range []*nats.Msg{altered, moved} {
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		<-seen
	}
	settledByTheWorker(t, done, serve, id, "copied-1", "copied-2")
}

// settledByTheWorker checks that the call whose outcome comes on done,
// for the command with event id id, does not end before serve starts a
// worker, and that its outcome is then the worker's, none of the forged
// events.
func settledByTheWorker(t *testing.T, done <-chan outcome, serve func(), id string, forged ...string) {
	t.Helper()
	select {
	case got := <-done:
		t.Fatalf("the call ended with %v %v before any worker ran: it believed a forged event", got.ev.Event.ID(), got.err)
	case <-time.After(300 * time.Millisecond):
	}
	serve()
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if slices.Contains(forged, got.ev.Event.ID()) {
		t.Fatalf("the call believed the forged event %s", got.ev.Event.ID())
	}
	if cause := events.StringExtension(got.ev.Event, protocol.ExtCausation); cause != id {
		t.Fatalf("outcome %s names cause %q, want %q", got.ev.Event.ID(), cause, id)
	}
}

// publishKeys replaces the audit keys the workers published with keys,
// each the key of a secret, published at since.
func publishKeys(t *testing.T, js jetstream.JetStream, keys map[time.Time][]byte) {
	t.Helper()
	var list []protocol.AuditKey
	for since, secret := range keys {
		k, err := engine.AuditKeyOf(secret)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, protocol.AuditKey{Kid: k.ID, PublicKey: k.String(), Since: since})
	}
	slices.SortFunc(list, func(a, b protocol.AuditKey) int { return a.Since.Compare(b.Since) })
	kv, err := js.KeyValue(t.Context(), "interlock_config")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(list)
	if _, err := kv.Put(t.Context(), protocol.AuditKeysKey, b); err != nil {
		t.Fatal(err)
	}
}

// A key the deployment replaced (its secret changed, perhaps because it
// leaked) is kept to verify old audit records, but vouches for no
// outcome: an event it signs waits to be stored like any other.
func TestALiveEventSignedWithAReplacedKeyIsNotBelieved(t *testing.T) {
	t.Parallel()
	srv, _, in, serve := pausedRun(t, "r-retired")
	nc, js := natstest.Connect(t, srv.ClientURL())
	old := []byte("an-older-secret-of-this-deployment-0123456789")
	now := time.Now().UTC()
	publishKeys(t, js, map[time.Time][]byte{now.Add(-24 * time.Hour): old, now: natstest.Secret})
	_, c := anonymous(t, srv)
	ids := sent(t, srv, "interlock.in.booking.resume")
	done := resumeAsync(t.Context(), c, "r-retired", in)
	id := <-ids
	if err := nc.PublishMsg(signedEvent(t, "interlock.ev.booking.r-retired.interrupted", "retired-1", "r-retired", id, "", old...)); err != nil {
		t.Fatal(err)
	}
	settledByTheWorker(t, done, serve, id, "retired-1")
}

// A client whose calls keep coming stays subscribed, and reads the audit
// keys again once it has trusted them for a while: a key replaced in the
// meantime no longer vouches for an outcome.
func TestAClientThatStaysSubscribedReadsTheKeysAgain(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, booking.Flow())
	nc, js := natstest.Connect(t, srv.ClientURL())
	c := client.New(nc, js, wire.Names{}, "/test", time.Minute)
	client.SetKeyRefresh(c, time.Nanosecond)
	var ins []protocol.Interrupted
	for _, run := range []string{"r-keys-1", "r-keys-2"} {
		ev, err := c.Start(t.Context(), "booking", run, map[string]json.RawMessage{"name": raw("Ann")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, interrupted(t, ev))
	}
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	serve := func() { natstest.Start(t, srv, booking.Flow()) }
	ids := sent(t, srv, "interlock.in.booking.resume")
	// A call that waits keeps the client subscribed with the keys it read.
	first := resumeAsync(t.Context(), c, "r-keys-1", ins[0])
	<-ids
	// The deployment's key is replaced by a newer one.
	now := time.Now().UTC()
	publishKeys(t, js, map[time.Time][]byte{now.Add(-time.Hour): natstest.Secret, now: []byte("the-new-secret-of-this-deployment-0123456789")})
	done := resumeAsync(t.Context(), c, "r-keys-2", ins[1])
	id := <-ids
	if err := nc.PublishMsg(signedEvent(t, "interlock.ev.booking.r-keys-2.interrupted", "stale-1", "r-keys-2", id, "")); err != nil {
		t.Fatal(err)
	}
	settledByTheWorker(t, done, serve, id, "stale-1")
	if got := <-first; got.err != nil {
		t.Fatal(got.err)
	}
}

// A connection that may subscribe to the stored events but not to the
// live ones settles its calls there, though it can read the audit keys.
func TestACallWorksWithTheRightToSubscribeToTheStoredEventsOnly(t *testing.T) {
	t.Parallel()
	c, srv, nc := clientWith(t, "stored", `{subscribe: {allow: ["_INBOX.>", "interlock.stored.ev.>"]}}`)
	ev, err := c.Start(t.Context(), "booking", "r-stored-only", map[string]json.RawMessage{"name": raw("Ann")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in := interrupted(t, ev); in.Node != "ask_email" {
		t.Fatalf("start: interrupt at %s, want ask_email", in.Node)
	}
	if subs := eventSubjects(t, srv, nc); len(subs) != 1 || subs[0] != "interlock.stored.ev.>" {
		t.Fatalf("the client subscribes to %v, want [interlock.stored.ev.>]", subs)
	}
}

// clientWith starts a booking service on a server whose users are the
// workers and user, with permissions (a NATS config permissions block),
// and returns a client connected as user, the server and the client's
// connection.
func clientWith(t *testing.T, user, permissions string) (*client.Client, *bus.Server, *nats.Conn) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	users := "authorization {\n  users = [\n    {user: workers, password: \"workers-secret\"}\n" +
		"    {user: " + user + ", password: \"" + user + "-secret\", permissions: " + permissions + "}\n  ]\n}\n"
	if err := os.WriteFile(conf, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := bus.StartServer(t.Context(), bus.ServerConfig{ConfigFile: conf, DataDir: filepath.Join(dir, "data"), Host: "127.0.0.1", Port: -1,
		LazyFsync: true, WorkersUser: "workers", WorkersPassword: "workers-secret", InsecureSharedAccount: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret})
	nc, js := natstest.ConnectWith(t, wire.ConnConfig{URL: srv.ClientURL(), User: user, Password: user + "-secret"})
	return client.New(nc, js, wire.Names{}, "/test", time.Minute), srv, nc
}

// A connection refused the audit keys is not refused again and again: it
// asks once, then settles its calls from the stored events.
func TestAClientRefusedTheAuditKeysAsksForThemOnce(t *testing.T) {
	t.Parallel()
	c, _, nc := clientWith(t, "nokeys", `{publish: {allow: [">"], deny: ["$JS.API.DIRECT.GET.KV_interlock_config.>"]}, subscribe: {allow: [">"]}}`)
	var mu sync.Mutex
	refused := 0
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), "KV_interlock_config") {
			mu.Lock()
			refused++
			mu.Unlock()
		}
	})
	client.SetKeyRefresh(c, time.Nanosecond)
	for _, run := range []string{"r-nokeys-1", "r-nokeys-2", "r-nokeys-3"} {
		ev, err := c.Start(t.Context(), "booking", run, map[string]json.RawMessage{"name": raw("Ann")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if in := interrupted(t, ev); in.Node != "ask_email" {
			t.Fatalf("%s: interrupt at %s, want ask_email", run, in.Node)
		}
		// As once idle: the next call subscribes the hub again.
		client.DropHub(c)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the refusal of the keys reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if refused != 1 {
		t.Errorf("the audit keys were asked for %d times after a refusal, want once", refused)
	}
}
