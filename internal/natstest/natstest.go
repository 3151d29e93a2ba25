// Package natstest is the shared test helper: an embedded nats-server with
// JetStream file storage in a temporary directory, Interlock services on it,
// and readers for what they publish. Tests run against the real thing.
package natstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/wire"
)

// Wait bounds every wait of the helpers.
const Wait = 15 * time.Second

// Secret is a fixed resume-token secret for tests.
var Secret = []byte("natstest-secret-natstest-secret-0123456789")

// WorkersPassword is the password of the workers' identity
// (bus.DefaultWorkersUser) on the servers of StartServer, so that Connect
// and workers in other processes can use it with only a URL.
const WorkersPassword = "natstest-workers"

// StartServer starts an embedded server in dir (a new temporary directory
// if dir is ""), listening on a free loopback port, shut down at cleanup.
// It has the default identities: the workers' (with WorkersPassword) and
// the restricted anonymous user.
func StartServer(t testing.TB, dir string) *bus.Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	srv, err := bus.StartServer(t.Context(), bus.ServerConfig{DataDir: dir, Port: -1, LazyFsync: true, WorkersPassword: WorkersPassword})
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// Connect connects a client with every right (the workers' identity) to
// the server of StartServer at url, closed at cleanup. Tests use it to set
// up and inspect anything; ConnectWith with only a URL connects as a
// client without credentials, with the rights of bus.AnonymousUser.
func Connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return ConnectWith(t, wire.ConnConfig{URL: url, User: bus.DefaultWorkersUser, Password: WorkersPassword})
}

// ConnectWith connects with cfg (named "natstest" if cfg has no name),
// closed at cleanup.
func ConnectWith(t testing.TB, cfg wire.ConnConfig) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "natstest"
	}
	nc, js, err := wire.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}

// WorkersURL is a URL of srv (a server of StartServer) that carries the
// workers' credentials, for a worker in another process.
func WorkersURL(srv *bus.Server) string {
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		panic(fmt.Sprintf("natstest: server URL %q: %v", srv.ClientURL(), err))
	}
	u.User = url.UserPassword(bus.DefaultWorkersUser, WorkersPassword)
	return u.String()
}

// Start starts an Interlock service running flows on srv with the test
// secret, stopped at cleanup.
func Start(t testing.TB, srv *bus.Server, flows ...*engine.Flow) *interlock.Service {
	t.Helper()
	return StartWith(t, srv, interlock.Config{Flows: flows, Secret: Secret})
}

// StartWith starts a service with cfg on srv, stopped at cleanup. It sets
// the connection, and the instance name and concurrency where cfg leaves
// them empty; an empty Secret means the generated one kept in NATS.
func StartWith(t testing.TB, srv *bus.Server, cfg interlock.Config) *interlock.Service {
	t.Helper()
	cfg.Conn = srv.WorkerConn()
	cfg.Conn.InProcess = nil
	cfg.Conn.Name = "natstest-service"
	if cfg.Instance == "" {
		cfg.Instance = "test"
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 8
	}
	svc, err := interlock.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("natstest: starting service: %v", err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.WithoutCancel(t.Context())) })
	return svc
}

// Publish publishes a structured CloudEvent of type typ with subject run
// and data to subject, with the event id as Nats-Msg-Id, and returns the id.
func Publish(t testing.TB, js jetstream.JetStream, subject, typ, run string, data any) string {
	t.Helper()
	id := "ev-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000000")
	ev, err := events.New(id, "/natstest", typ, run, time.Now().UTC(), data)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	body, err := events.Encode(ev)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	PublishRaw(t, js, subject, body, nats.Header{"Content-Type": {events.Structured}, jetstream.MsgIDHeader: {id}})
	return id
}

// PublishRaw publishes body with headers to subject through JetStream.
func PublishRaw(t testing.TB, js jetstream.JetStream, subject string, body []byte, h nats.Header) {
	t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = body
	for k, vs := range h {
		msg.Header[k] = vs
	}
	if _, err := js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatalf("natstest: publishing to %s: %v", subject, err)
	}
}

// Received is a message read back from a stream.
type Received struct {
	Subject string
	Kind    string
	Header  nats.Header
	Data    []byte
	Event   events.Event
	// Stored is when the stream stored the message.
	Stored time.Time
}

// Decode decodes the event's data into v.
func (r Received) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Event.Data(), v); err != nil {
		t.Fatalf("natstest: decoding %s: %v", r.Subject, err)
	}
}

// Read returns every message stored in stream under filter, in order.
func Read(t testing.TB, js jetstream.JetStream, stream, filter string) []Received {
	t.Helper()
	return read(t, js, stream, filter, nil)
}

// WaitFor reads stream under filter until a message satisfies ok, and
// returns every message up to it. It fails the test after Wait.
func WaitFor(t testing.TB, js jetstream.JetStream, stream, filter string, ok func([]Received) bool) []Received {
	t.Helper()
	return read(t, js, stream, filter, ok)
}

func read(t testing.TB, js jetstream.JetStream, stream, filter string, ok func([]Received) bool) []Received {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Wait)
	defer cancel()
	// Message gets, one at a time: a client of Interlock may read a
	// stream, but not create a consumer on it. In a cluster that is
	// electing leaders a request may go unanswered: ask again, each
	// attempt short, until Wait.
	var st jetstream.Stream
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := js.Stream(actx, stream)
		acancel()
		if err == nil {
			st = s
			break
		}
		if ctx.Err() != nil || !retryable(err) {
			t.Fatalf("natstest: reading %s: %v", stream, err)
		}
	}
	var got []Received
	next := uint64(1)
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		msg, err := st.GetMsg(actx, next, jetstream.WithGetMsgSubject(filter))
		acancel()
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			if ok == nil {
				return got
			}
			select {
			case <-ctx.Done():
				t.Fatalf("natstest: waited %s on %s %s; got %d messages: %s", Wait, stream, filter, len(got), subjects(got))
			case <-time.After(10 * time.Millisecond):
			}
			continue
		case err != nil && ctx.Err() == nil && retryable(err):
			continue
		case err != nil:
			t.Fatalf("natstest: reading %s: %v", stream, err)
		}
		next = msg.Sequence + 1
		r := Received{Subject: msg.Subject, Header: msg.Header, Data: msg.Data, Stored: msg.Time}
		r.Kind = r.Subject[strings.LastIndex(r.Subject, ".")+1:]
		if ev, err := events.Decode(msg.Header, msg.Data); err == nil {
			r.Event = ev
		}
		got = append(got, r)
		if ok != nil && ok(got) {
			return got
		}
	}
}

// retryable reports whether a request may have gone unanswered for a
// while only: a cluster electing leaders, interest not yet propagated.
func retryable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)
}

func subjects(rs []Received) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.Subject)
	}
	return strings.Join(s, ", ")
}

// Nth returns a condition: the n-th (1-based) message of kind has arrived.
func Nth(kind string, n int) func([]Received) bool {
	return func(rs []Received) bool {
		c := 0
		for _, r := range rs {
			if r.Kind == kind {
				c++
			}
		}
		return c >= n
	}
}

// Last returns the last message of kind among rs.
func Last(t testing.TB, rs []Received, kind string) Received {
	t.Helper()
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Kind == kind {
			return rs[i]
		}
	}
	t.Fatalf("natstest: no %s among %s", kind, subjects(rs))
	return Received{}
}

// Count counts the messages of kind among rs.
func Count(rs []Received, kind string) int {
	c := 0
	for _, r := range rs {
		if r.Kind == kind {
			c++
		}
	}
	return c
}

// WaitDrained waits until every command of a work-queue stream has been
// acknowledged: no message is left but deadlines waiting on their time
// (subjects <prefix>.schedule.>). It polls, and fails the test after Wait.
func WaitDrained(t testing.TB, js jetstream.JetStream, stream string) {
	t.Helper()
	deadline := time.After(Wait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		s, err := js.Stream(t.Context(), stream)
		if err != nil {
			t.Fatalf("natstest: %v", err)
		}
		info, err := s.Info(t.Context(), jetstream.WithSubjectFilter("*.in.>"))
		if err != nil {
			t.Fatalf("natstest: %v", err)
		}
		var held uint64
		for _, n := range info.State.Subjects {
			held += n
		}
		if held == 0 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("natstest: %s still holds %d unacknowledged commands after %s", stream, held, Wait)
		case <-tick.C:
		}
	}
}

// Eventually polls cond every 10 ms until it holds, and fails the test
// with what after Wait.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(Wait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("natstest: after %s, still not %s", Wait, what)
		case <-tick.C:
		}
	}
}
