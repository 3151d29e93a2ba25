package client_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// newClient starts a server with the booking flow and returns a client.
func newClient(t *testing.T, wait time.Duration) *client.Client {
	t.Helper()
	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, booking.Flow())
	nc, js := natstest.Connect(t, srv.ClientURL())
	return client.New(nc, js, wire.Names{}, "/test", wait)
}

func raw(v string) json.RawMessage { b, _ := json.Marshal(v); return b }

func interrupted(t *testing.T, ev client.Event) protocol.Interrupted {
	t.Helper()
	if ev.Kind != protocol.EventInterrupted {
		t.Fatalf("outcome %q, want %q", ev.Kind, protocol.EventInterrupted)
	}
	var in protocol.Interrupted
	if err := ev.Decode(&in); err != nil {
		t.Fatal(err)
	}
	return in
}

func TestStartResumeCancelAndReadTheRun(t *testing.T) {
	t.Parallel()
	c := newClient(t, 0)
	ctx := t.Context()

	ev, err := c.Start(ctx, "booking", "r-1", map[string]json.RawMessage{"name": raw("Ann")}, json.RawMessage(`{"slack":{"channel":"C1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	in := interrupted(t, ev)
	if in.Node != "ask_email" || in.ResumeToken == "" {
		t.Fatalf("start: %+v", in)
	}
	last, err := c.LastInterrupt(ctx, "booking", "r-1")
	if err != nil || last.ResumeToken != in.ResumeToken || last.RequestID != in.RequestID {
		t.Fatalf("LastInterrupt = %+v, %v; want the start's interrupt", last, err)
	}

	ev, err = c.Resume(ctx, "booking", "r-1", protocol.Resume{ResumeToken: in.ResumeToken, Answers: map[string]json.RawMessage{"email": raw("nope")}})
	if err != nil {
		t.Fatal(err)
	}
	in = interrupted(t, ev)
	if in.Node != "ask_email" || !strings.HasPrefix(in.Questions[0].Context, "ERROR: ") {
		t.Fatalf("bad email: %+v", in)
	}
	ev, err = c.Resume(ctx, "booking", "r-1", protocol.Resume{ResumeToken: in.ResumeToken, Answers: map[string]json.RawMessage{"email": raw("ann@example.com")}})
	if err != nil {
		t.Fatal(err)
	}
	in = interrupted(t, ev)

	cp, err := c.Checkpoint(ctx, "booking", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	if cp.Status != protocol.StatusWaiting || cp.Node != "ask_contact" || cp.Checkpoint != in.Checkpoint || !cp.Waiting() ||
		cp.Interrupt.RequestID != in.RequestID || string(cp.Origin) != `{"slack":{"channel":"C1"}}` || cp.CreatedAt.IsZero() {
		t.Fatalf("checkpoint %+v, interrupt %+v", cp, in)
	}
	var state map[string]string
	if err := json.Unmarshal(cp.State, &state); err != nil || state["name"] != "Ann" || state["email"] != "ann@example.com" {
		t.Fatalf("state %s: %v", cp.State, err)
	}

	page, err := c.ListPending(ctx, client.PendingQuery{})
	if ps := page.Items; err != nil || len(ps) != 1 || ps[0].Run != "r-1" || ps[0].Node != "ask_contact" || ps[0].Checkpoint != cp.Checkpoint {
		t.Fatalf("ListPending = %+v, %v", page, err)
	}
	if page, err := c.ListPending(ctx, client.PendingQuery{Flow: "other"}); err != nil || len(page.Items) != 0 {
		t.Fatalf("ListPending(other) = %+v, %v", page, err)
	}

	ev, err = c.Cancel(ctx, "booking", "r-1", "test")
	if err != nil || ev.Kind != protocol.EventCancelled {
		t.Fatalf("cancel: %q, %v", ev.Kind, err)
	}
	ev, err = c.Cancel(ctx, "booking", "r-1", "again")
	var ref protocol.Refused
	if err != nil || ev.Kind != protocol.EventRefused || ev.Decode(&ref) != nil || ref.Code != "not_waiting" {
		t.Fatalf("second cancel: %q %+v, %v", ev.Kind, ref, err)
	}
	cp, err = c.Checkpoint(ctx, "booking", "r-1")
	if err != nil || cp.Status != protocol.StatusCancelled || !cp.Finished() || cp.Waiting() {
		t.Fatalf("after cancel: %+v, %v", cp, err)
	}
	if page, err := c.ListPending(ctx, client.PendingQuery{}); err != nil || len(page.Items) != 0 {
		t.Fatalf("ListPending after cancel = %+v, %v", page, err)
	}
}

// TestRepeatedIdempotencyKeyReportsTheRun checks that a resume Interlock
// absorbs as a repeat is reported at once, with the run as it stands,
// instead of waiting for an event that never comes.
func TestRepeatedIdempotencyKeyReportsTheRun(t *testing.T) {
	t.Parallel()
	const wait = time.Minute
	c := newClient(t, wait)
	ctx := t.Context()
	ev, err := c.Start(ctx, "booking", "r-2", map[string]json.RawMessage{"name": raw("Ann")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := interrupted(t, ev)
	r := protocol.Resume{ResumeToken: in.ResumeToken, Answers: map[string]json.RawMessage{"email": raw("ann@example.com")}, IdempotencyKey: "k-1"}
	ev, err = c.Resume(ctx, "booking", "r-2", r)
	if err != nil || ev.Repeat {
		t.Fatalf("first resume: %+v, %v", ev, err)
	}
	next := interrupted(t, ev)

	began := time.Now()
	ev, err = c.Resume(ctx, "booking", "r-2", r)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Repeat || ev.Kind != "" || ev.Current == nil || ev.Current.Node != "ask_contact" ||
		ev.Current.Checkpoint != next.Checkpoint || !ev.Current.HasApplied("k-1") {
		t.Fatalf("repeat: %+v (current %+v)", ev, ev.Current)
	}
	if took := time.Since(began); took > wait/2 {
		t.Errorf("the repeat was reported after %s; it should not wait for an event", took)
	}
}

func TestCheckpointOfAnUnknownRunOrFlow(t *testing.T) {
	t.Parallel()
	c := newClient(t, 0)
	ctx := t.Context()
	if _, err := c.Start(ctx, "booking", "r-3", nil, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ flow, run, want string }{
		{"booking", "r-none", "there is no run r-none of flow booking; `interlock pending --flow booking`"},
		{"bookng", "r-3", "there is no run r-3 of flow bookng, and no run of a flow named bookng at all"},
	}
	for _, tc := range cases {
		_, err := c.Checkpoint(ctx, tc.flow, tc.run)
		if !errors.Is(err, client.ErrNotFound) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Checkpoint(%s, %s) = %v, want ErrNotFound saying %q", tc.flow, tc.run, err, tc.want)
		}
	}
}

func TestBadNamesAreRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	c := newClient(t, 0)
	ctx := t.Context()
	cases := []struct {
		name    string
		call    func() error
		wantErr string
	}{
		{"flow with a dot", func() error { _, err := c.Start(ctx, "book.ing", "r-1", nil, nil); return err }, `flow name "book.ing" has '.'`},
		{"run with a wildcard", func() error { _, err := c.Resume(ctx, "booking", "r-*", protocol.Resume{}); return err }, `run name "r-*" has '*'`},
		{"empty run", func() error { _, err := c.Cancel(ctx, "booking", "", ""); return err }, "run name is empty"},
		{"long flow", func() error { _, err := c.Checkpoint(ctx, strings.Repeat("f", 129), "r"); return err }, "129 characters long"},
		{"pending of a bad flow", func() error { _, err := c.ListPending(ctx, client.PendingQuery{Flow: "a>b"}); return err }, `flow name "a>b"`},
	}
	for _, tc := range cases {
		if err := tc.call(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		wantErr bool
	}{
		{"booking", false}, {"r-42", false}, {"A_b-9", false}, {strings.Repeat("x", 128), false},
		{"", true}, {strings.Repeat("x", 129), true}, {"a.b", true}, {"a b", true}, {"a*", true}, {"a>", true}, {"é", true},
	}
	for _, tc := range cases {
		if err := protocol.CheckName("run", tc.name); (err != nil) != tc.wantErr {
			t.Errorf("CheckName(%q) = %v, wantErr %v", tc.name, err, tc.wantErr)
		}
	}
}

func TestNoWorkerMeansErrNoAnswer(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, booking.Flow())
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	nc, js := natstest.Connect(t, srv.ClientURL())
	c := client.New(nc, js, wire.Names{}, "/test", 200*time.Millisecond)
	_, err := c.Start(t.Context(), "booking", "r-4", nil, nil)
	if !errors.Is(err, client.ErrNoAnswer) || !strings.Contains(err.Error(), "interlock serve") {
		t.Fatalf("err = %v, want ErrNoAnswer with a hint", err)
	}
}

// TestACommandLargerThanAMessageIsErrTooLarge: a command the server could
// not take is refused before it is sent, with the size and the limit.
func TestACommandLargerThanAMessageIsErrTooLarge(t *testing.T) {
	t.Parallel()
	c := newClient(t, 0)
	big := raw(strings.Repeat("x", 1<<20))
	calls := map[string]func() error{
		"start": func() error {
			_, err := c.Start(t.Context(), "booking", "r-big", map[string]json.RawMessage{"name": big}, nil)
			return err
		},
		"resume": func() error {
			_, err := c.Resume(t.Context(), "booking", "r-big", protocol.Resume{Answers: map[string]json.RawMessage{"email": big}})
			return err
		},
		"tool request": func() error {
			_, err := c.RequestTool(t.Context(), protocol.ToolRequest{CallID: "call-big", Tool: "t", Args: map[string]json.RawMessage{"memo": big}}, time.Second)
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, client.ErrTooLarge) || !strings.Contains(err.Error(), "1048576") || !strings.Contains(err.Error(), "max_payload") {
			t.Errorf("%s: err = %v, want ErrTooLarge naming the limit", name, err)
		}
	}
	if _, err := c.Checkpoint(t.Context(), "booking", "r-big"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a command too large reached a worker: %v", err)
	}
}
