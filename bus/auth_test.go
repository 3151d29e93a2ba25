package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// user is a client connection that records the permissions violations the
// server reports to it.
type user struct {
	name string
	nc   *nats.Conn
	js   jetstream.JetStream
	mu   sync.Mutex
	errs []string
}

func connectUser(t *testing.T, name, url string, opts ...nats.Option) *user {
	t.Helper()
	u := &user{name: name}
	if name != bus.AnonymousUser && !strings.HasPrefix(name, "workers") && name != "admin" {
		// A deploy configuration's client user reads replies on its own prefix.
		opts = append(opts, nats.CustomInboxPrefix(bus.ClientInboxPrefix(name)))
	}
	opts = append(opts, nats.Name("authtest-"+name), nats.PermissionErrOnSubscribe(true), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.errs = append(u.errs, err.Error())
	}))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("%s: connecting: %v", name, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	u.nc, u.js = nc, js
	return u
}

func (u *user) violated(subject string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, e := range u.errs {
		if strings.Contains(e, "Permissions Violation") && (strings.Contains(e, `"`+subject+`"`) || strings.Contains(e, `"`+subject+`.`)) {
			return true
		}
	}
	return false
}

// denied runs op and checks that the server refuses it with a permissions
// violation naming subject, or a subject under it (the first subject op
// needs and may not use),
// and that op fails. op must block until its context ends if nothing
// answers it.
func (u *user) denied(t *testing.T, what, subject string, op func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), natstest.Wait)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !u.violated(subject) {
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s may %s, want a permissions violation on %s", u.name, what, subject)
				return
			}
			done <- err
			<-tick.C
		case <-ctx.Done():
			u.mu.Lock()
			t.Errorf("%s: %s: no permissions violation on %s; the server said: %q", u.name, what, subject, u.errs)
			u.mu.Unlock()
			return
		case <-tick.C:
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Errorf("%s may %s: it succeeded despite the violation on %s", u.name, what, subject)
	}
}

// waitSub fails unless a message arrives on sub before ctx ends.
func waitSub(ctx context.Context, sub *nats.Subscription) error {
	_, err := sub.NextMsgWithContext(ctx)
	return err
}

// publish publishes through JetStream and waits for the stream's ack.
func publish(js jetstream.JetStream, subject string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := js.Publish(ctx, subject, []byte(`{}`))
		return err
	}
}

func request(nc *nats.Conn, subject, body string) func(context.Context) error {
	return func(ctx context.Context) error {
		m, err := nc.RequestWithContext(ctx, subject, []byte(body))
		if err == nil && m.Header.Get("Status") != "" {
			return errors.New(m.Header.Get("Description"))
		}
		return err
	}
}

// denyTampering checks, as u, every way of reading the keys or changing
// what only Interlock may write.
func denyTampering(t *testing.T, u *user, n wire.Names) {
	t.Helper()
	js, nc := u.js, u.nc
	keys := "KV_" + n.KeysBucket()
	secret := "$KV." + n.KeysBucket() + ".resume-token-secret"
	u.denied(t, "bind the keys bucket", "$JS.API.STREAM.INFO."+keys, func(ctx context.Context) error {
		_, err := js.KeyValue(ctx, n.KeysBucket())
		return err
	})
	u.denied(t, "direct-get the secret", "$JS.API.DIRECT.GET."+keys+"."+secret, request(nc, "$JS.API.DIRECT.GET."+keys+"."+secret, ""))
	u.denied(t, "msg-get the secret", "$JS.API.STREAM.MSG.GET."+keys, request(nc, "$JS.API.STREAM.MSG.GET."+keys, `{"last_by_subj":"`+secret+`"}`))
	u.denied(t, "read the keys with a consumer", "$JS.API.CONSUMER.CREATE."+keys, func(ctx context.Context) error {
		c, err := js.OrderedConsumer(ctx, keys, jetstream.OrderedConsumerConfig{FilterSubjects: []string{secret, secret + "x"}})
		if err == nil {
			_, err = c.Next(jetstream.FetchContext(ctx))
		}
		return err
	})
	// The config bucket holds the directory of people, the webhook
	// subscriptions, the Web Push VAPID key and the devices people
	// subscribed (their endpoints are credentials): clients read its
	// audit keys and flow descriptions by key, and nothing else of it.
	cfg := "KV_" + n.ConfigBucket()
	for _, key := range []string{"people", "webhooks", "webpush.vapid", "webpush.sub.0a1b.2c3d"} {
		subj := "$KV." + n.ConfigBucket() + "." + key
		u.denied(t, "direct-get config key "+key, "$JS.API.DIRECT.GET."+cfg+"."+subj, request(nc, "$JS.API.DIRECT.GET."+cfg+"."+subj, ""))
		u.denied(t, "msg-get config key "+key, "$JS.API.STREAM.MSG.GET."+cfg, request(nc, "$JS.API.STREAM.MSG.GET."+cfg, `{"last_by_subj":"`+subj+`"}`))
	}
	u.denied(t, "direct-get the config bucket by sequence", "$JS.API.DIRECT.GET."+cfg, request(nc, "$JS.API.DIRECT.GET."+cfg, `{"seq":1}`))
	// The A2A buckets hold clients' push tokens and credentials, and the
	// remote agents' tasks followed: the workers' only.
	for _, b := range []string{n.A2APushBucket(), n.A2AFollowBucket()} {
		kv, subj := "KV_"+b, "$KV."+b+".a2a-0a1b.cfg"
		u.denied(t, "direct-get "+b, "$JS.API.DIRECT.GET."+kv+"."+subj, request(nc, "$JS.API.DIRECT.GET."+kv+"."+subj, ""))
		u.denied(t, "msg-get "+b, "$JS.API.STREAM.MSG.GET."+kv, request(nc, "$JS.API.STREAM.MSG.GET."+kv, `{"last_by_subj":"`+subj+`"}`))
		u.denied(t, "bind "+b, "$JS.API.STREAM.INFO."+kv, func(ctx context.Context) error {
			_, err := js.KeyValue(ctx, b)
			return err
		})
	}
	u.denied(t, "subscribe to the keys' subjects", "$KV."+n.KeysBucket()+".>", func(ctx context.Context) error {
		sub, err := nc.SubscribeSync("$KV." + n.KeysBucket() + ".>")
		if err != nil {
			return err
		}
		return waitSub(ctx, sub)
	})
	u.denied(t, "delete the audit stream", "$JS.API.STREAM.DELETE."+n.AuditStream(), func(ctx context.Context) error {
		return js.DeleteStream(ctx, n.AuditStream())
	})
	u.denied(t, "delete the events stream", "$JS.API.STREAM.DELETE."+n.EventStream(), func(ctx context.Context) error {
		return js.DeleteStream(ctx, n.EventStream())
	})
	u.denied(t, "purge the events stream", "$JS.API.STREAM.PURGE."+n.EventStream(), request(nc, "$JS.API.STREAM.PURGE."+n.EventStream(), ""))
	u.denied(t, "reconfigure the events stream", "$JS.API.STREAM.UPDATE."+n.EventStream(), func(ctx context.Context) error {
		_, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: n.EventStream(), Subjects: []string{n.Prefix + ".ev.>"}, MaxAge: time.Second})
		return err
	})
	for _, b := range []string{n.RunsBucket(), n.PendingBucket(), n.KeysBucket()} {
		u.denied(t, "delete bucket "+b, "$JS.API.STREAM.DELETE.KV_"+b, func(ctx context.Context) error {
			return js.DeleteKeyValue(ctx, b)
		})
		u.denied(t, "purge bucket "+b, "$JS.API.STREAM.PURGE.KV_"+b, request(nc, "$JS.API.STREAM.PURGE.KV_"+b, ""))
		u.denied(t, "reconfigure bucket "+b, "$JS.API.STREAM.UPDATE.KV_"+b, request(nc, "$JS.API.STREAM.UPDATE.KV_"+b, `{"name":"KV_`+b+`","subjects":["$KV.`+b+`.>"],"max_msgs_per_subject":1}`))
		u.denied(t, "write an entry of "+b, "$KV."+b+".booking.r-forged", publish(js, "$KV."+b+".booking.r-forged"))
	}
	u.denied(t, "forge an event", n.Event("booking", "r-forged", "completed"), publish(js, n.Event("booking", "r-forged", "completed")))
	u.denied(t, "forge an audit record", n.Audit("booking", "r-forged"), publish(js, n.Audit("booking", "r-forged")))
	u.denied(t, "forge a dead letter", n.DeadLetter("forged"), publish(js, n.DeadLetter("forged")))
	u.denied(t, "create a stream", "$JS.API.STREAM.CREATE.FORGED", func(ctx context.Context) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FORGED", Subjects: []string{"forged.>"}})
		return err
	})
	u.denied(t, "delete the workers' consumer", "$JS.API.CONSUMER.DELETE."+n.InStream()+"."+n.Consumer(), func(ctx context.Context) error {
		return js.DeleteConsumer(ctx, n.InStream(), n.Consumer())
	})
	u.denied(t, "pull the workers' commands", "$JS.API.CONSUMER.MSG.NEXT."+n.InStream()+"."+n.Consumer(),
		request(nc, "$JS.API.CONSUMER.MSG.NEXT."+n.InStream()+"."+n.Consumer(), `{"batch":1}`))
	u.denied(t, "listen to the workers' replies", bus.WorkerInboxPrefix(n)+".>", func(ctx context.Context) error {
		sub, err := nc.SubscribeSync(bus.WorkerInboxPrefix(n) + ".>")
		if err != nil {
			return err
		}
		return waitSub(ctx, sub)
	})
}

// checkIntact checks, with every right, that nothing denyTampering tried
// took effect.
func checkIntact(t *testing.T, js jetstream.JetStream, n wire.Names) {
	t.Helper()
	for _, s := range []string{n.InStream(), n.EventStream(), n.AuditStream(), n.DeadLetterStream(), "KV_" + n.RunsBucket(), "KV_" + n.PendingBucket(), "KV_" + n.KeysBucket()} {
		st, err := js.Stream(t.Context(), s)
		if err != nil {
			t.Errorf("stream %s after the attempts: %v", s, err)
			continue
		}
		info, err := st.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if s == n.EventStream() && (info.Config.MaxAge != bus.DefaultEventMaxAge || info.State.Msgs == 0) {
			t.Errorf("%s was changed: max age %s, %d messages", s, info.Config.MaxAge, info.State.Msgs)
		}
	}
	if _, err := js.Stream(t.Context(), "FORGED"); err == nil {
		t.Error("stream FORGED exists")
	}
	for _, b := range []string{n.RunsBucket(), n.PendingBucket()} {
		kv, err := js.KeyValue(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Get(t.Context(), "booking.r-forged"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("%s has a forged entry: %v", b, err)
		}
	}
	if _, err := js.Consumer(t.Context(), n.InStream(), n.Consumer()); err != nil {
		t.Errorf("the workers' consumer: %v", err)
	}
	st, err := js.Stream(t.Context(), n.EventStream())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetLastMsgForSubject(t.Context(), n.Event("booking", "r-forged", ">")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a forged event was stored: %v", err)
	}
}

// startBooking starts a booking run as c and checks it waits for an answer.
func startBooking(t *testing.T, c *client.Client, run string) {
	t.Helper()
	ev, err := c.Start(t.Context(), "booking", run, nil, nil)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if ev.Kind != "interrupted" {
		t.Fatalf("start settled with %s, want interrupted", ev.Kind)
	}
}

// lastInterrupt reads the run's last interrupted event as c. A subscriber
// may see the event before the stream has stored it: it polls.
func lastInterrupt(t *testing.T, c *client.Client, run string) protocol.Interrupted {
	t.Helper()
	return lastInterruptOf(t, c, "booking", run)
}

// lastInterruptOf is lastInterrupt for a run of any flow.
func lastInterruptOf(t *testing.T, c *client.Client, flow, run string) protocol.Interrupted {
	t.Helper()
	deadline := time.Now().Add(natstest.Wait)
	for {
		in, err := c.LastInterrupt(t.Context(), flow, run)
		if err == nil && in.ResumeToken != "" {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("last interrupt of %s: %+v %v", run, in, err)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestAnonymousClientsMayUseInterlockButNotTamperWithIt(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"", "acme"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			t.Parallel()
			n, err := wire.NewNames(prefix)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := bus.StartServer(t.Context(), bus.ServerConfig{DataDir: t.TempDir(), Port: -1, LazyFsync: true, Prefix: prefix, WorkersPassword: natstest.WorkersPassword})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Shutdown)
			// No secret: the generated one, kept in the keys bucket.
			natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Prefix: prefix})

			anon := connectUser(t, "anonymous", srv.ClientURL())
			c := client.New(anon.nc, anon.js, n, "/test/anonymous", natstest.Wait)
			startBooking(t, c, "r-1")
			in := lastInterrupt(t, c, "r-1")
			ev, err := c.Resume(t.Context(), "booking", "r-1", protocol.Resume{ResumeToken: in.ResumeToken, RequestID: in.RequestID, Answers: map[string]json.RawMessage{"email": json.RawMessage(`"ann@example.com"`)}})
			if err != nil || ev.Kind != "interrupted" {
				t.Fatalf("resume: %s %v", ev.Kind, err)
			}
			if got := natstest.Read(t, anon.js, n.EventStream(), n.Event("booking", "r-1", ">")); len(got) < 3 {
				t.Errorf("read %d events of r-1, want started, interrupted, resumed...", len(got))
			}
			if cp, err := c.Checkpoint(t.Context(), "booking", "r-1"); err != nil || cp.Checkpoint == 0 {
				t.Errorf("checkpoint: %+v %v", cp, err)
			}
			if p, err := c.ListPending(t.Context(), client.PendingQuery{}); err != nil || len(p.Items) != 1 {
				t.Errorf("pending: %v %v", p, err)
			}
			// A command no flow knows goes to the dead letters, which clients may read.
			natstest.Publish(t, anon.js, n.In("nosuch", "start"), protocol.TypeStart, "r-2", protocol.Start{})
			natstest.WaitFor(t, anon.js, n.DeadLetterStream(), n.Prefix+".dlq.>", natstest.Nth(n.Prefix+".dlq", 0))

			denyTampering(t, anon, n)
			denied := func(what, subject string, op func(context.Context) error) {
				t.Helper()
				anon.denied(t, what, subject, op)
			}
			// The README walk reads a run's audit records.
			if got := natstest.Read(t, anon.js, n.AuditStream(), n.Audit("booking", "r-1")); len(got) == 0 {
				t.Error("read no audit records of r-1")
			}
			denied("read the commands", n.Prefix+".in.>", func(ctx context.Context) error {
				sub, err := anon.nc.SubscribeSync(n.Prefix + ".in.>")
				if err != nil {
					return err
				}
				return waitSub(ctx, sub)
			})
			_, js := natstest.Connect(t, srv.ClientURL())
			checkIntact(t, js, n)
		})
	}
}

func TestClientsReadTheGateRulesKeyTheGateWrites(t *testing.T) {
	if bus.GateRulesKey != gate.Key {
		t.Fatalf("clients may read config key %q, but the gate writes its rules to %q", bus.GateRulesKey, gate.Key)
	}
}
