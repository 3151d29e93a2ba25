package gate_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/internal/natstest"
)

// logBuffer collects log lines written from the watch's goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// configBucket starts a server and returns a new configuration bucket on
// it, and the client connection's JetStream.
func configBucket(t *testing.T) (jetstream.KeyValue, jetstream.JetStream) {
	t.Helper()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "interlock_config", History: 5})
	if err != nil {
		t.Fatal(err)
	}
	return kv, js
}

const (
	rulesV1 = `rules:
  - name: large-refund
    tool: issue_refund
    when: args.amount > 500
    reason: Refund exceeds $500.
    approverRole: supervisor
    timeout: 30m
`
	rulesV2 = `rules:
  - name: large-refund
    tool: issue_refund
    when: args.amount > 100
    reason: Refund exceeds $100.
    approverRole: supervisor
  - tool: cancel_subscription
    reason: Every cancellation is reviewed.
    approverRole: retention_lead
`
	// rulesBad does not compile: rule 2 reads an undeclared variable.
	rulesBad = `rules:
  - tool: cancel_subscription
    reason: r
    approverRole: retention_lead
  - name: large-refund
    tool: issue_refund
    when: arg.amount > 1
    reason: r
    approverRole: supervisor
`
)

func refund(amount float64) gate.Request {
	return gate.Request{Tool: "issue_refund", Args: map[string]any{"amount": amount}}
}

func TestLiveWatch(t *testing.T) {
	t.Parallel()
	kv, _ := configBucket(t)
	ctx := t.Context()
	logs := &logBuffer{}
	log := zerolog.New(logs)

	initial := mustParse(t, rulesV1)
	rev1, err := gate.Put(ctx, kv, initial)
	if err != nil {
		t.Fatal(err)
	}
	live := gate.NewLive(initial)
	if live.Revision() != 0 || live.Current() != initial {
		t.Fatalf("NewLive: revision %d", live.Revision())
	}
	if err := live.Watch(ctx, kv, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Stop(context.WithoutCancel(ctx)) })
	if err := live.Watch(ctx, kv, log); err == nil || !strings.Contains(err.Error(), "already watching") {
		t.Errorf("second Watch: %v", err)
	}
	// Watch returns once the key's value is applied.
	if live.Revision() != rev1 {
		t.Fatalf("after Watch: revision %d, want %d", live.Revision(), rev1)
	}
	if m := live.Match(ctx, refund(200)); !m.Allowed() {
		t.Errorf("refund of 200 under v1: %+v", m)
	}

	// A new rule set that compiles is applied.
	rev2, err := kv.Put(ctx, gate.Key, []byte(rulesV2))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "rules v2 applied", func() bool { return live.Revision() == rev2 })
	if m := live.Match(ctx, refund(200)); m.Rule == nil || m.Rule.Reason != "Refund exceeds $100." {
		t.Errorf("refund of 200 under v2: %+v", m)
	}
	if n := len(live.Current().Rules()); n != 2 {
		t.Errorf("v2 has %d rules", n)
	}
	if !strings.Contains(logs.String(), `"revision":`+strconv.FormatUint(rev2, 10)) || !strings.Contains(logs.String(), "applied a new rule set") {
		t.Errorf("no log of v2 applied:\n%s", logs)
	}
	v2 := live.Current()

	// One that does not compile is refused: v2 stays, and the log names
	// the rule and the position.
	rev3, err := kv.Put(ctx, gate.Key, []byte(rulesBad))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the bad rules refused", func() bool { r := live.Refused(); return r != nil && r.Revision == rev3 })
	if live.Current() != v2 || live.Revision() != rev2 {
		t.Errorf("after a bad value: revision %d, want %d", live.Revision(), rev2)
	}
	logged := logs.String()
	for _, want := range []string{
		`"level":"error"`,
		"gate rules kv interlock_config gate.rules: line 7: rule 2 (large-refund): when: undeclared reference to 'arg'",
		"(at 1:1)",
		`"rule":2`, `"rule_name":"large-refund"`, `"line":7`, `"field":"when"`,
		`"revision":` + strconv.FormatUint(rev3, 10), `"applied_revision":` + strconv.FormatUint(rev2, 10),
	} {
		if !strings.Contains(logged, want) {
			t.Errorf("log does not contain %s:\n%s", want, logged)
		}
	}
	if err := live.Refused().Err; !strings.Contains(err.Error(), "rule 2 (large-refund)") {
		t.Errorf("Refused().Err = %v", err)
	}
	if m := live.Match(ctx, refund(200)); m.Rule == nil || m.Err != nil {
		t.Errorf("refund of 200 after the bad value: %+v", m)
	}

	// Deleting the key keeps v2, with a warning.
	if err := kv.Delete(ctx, gate.Key); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the delete logged", func() bool { return strings.Contains(logs.String(), "was deleted") })
	if live.Current() != v2 || live.Revision() != rev2 {
		t.Errorf("after a delete: revision %d, want %d", live.Revision(), rev2)
	}
	if !strings.Contains(logs.String(), `"level":"warn"`) {
		t.Errorf("the delete is not a warning:\n%s", logs)
	}
	if live.Refused() != nil {
		t.Errorf("Refused after a delete: %+v", live.Refused())
	}

	// A value put after the delete is applied, and clears a refusal.
	if _, err := kv.Put(ctx, gate.Key, []byte("rules: [")); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the bad YAML refused", func() bool { return live.Refused() != nil })
	rev4, err := gate.Put(ctx, kv, initial)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "rules v1 applied again", func() bool { return live.Revision() == rev4 })
	if live.Refused() != nil {
		t.Errorf("Refused after a good value: %+v", live.Refused())
	}

	if err := live.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := live.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	// Stopped, it applies nothing more, and keeps matching.
	if _, err := kv.Put(ctx, gate.Key, []byte(rulesV2)); err != nil {
		t.Fatal(err)
	}
	if m := live.Match(ctx, refund(200)); !m.Allowed() || live.Revision() != rev4 {
		t.Errorf("after Stop: revision %d, %+v", live.Revision(), m)
	}

	// It can watch again, and catches up with the key.
	if err := live.Watch(ctx, kv, log); err != nil {
		t.Fatal(err)
	}
	if live.Revision() <= rev4 || len(live.Current().Rules()) != 2 {
		t.Errorf("after watching again: revision %d", live.Revision())
	}
	if err := live.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// Watching a key that holds nothing keeps the initial rules; the first
// value put is applied.
func TestLiveWatchEmptyKey(t *testing.T) {
	t.Parallel()
	kv, _ := configBucket(t)
	ctx := t.Context()
	live := gate.NewLive(nil)
	if err := live.Watch(ctx, kv, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Stop(context.WithoutCancel(ctx)) })
	if live.Revision() != 0 || !live.Match(ctx, refund(1e6)).Allowed() {
		t.Fatalf("initial: revision %d", live.Revision())
	}
	rev, err := gate.Put(ctx, kv, mustParse(t, rulesV1))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "rules applied", func() bool { return live.Revision() == rev })
	if live.Match(ctx, refund(1e6)).Allowed() {
		t.Error("refund of 1e6 allowed under v1")
	}
}

// A bad value in the bucket at start is refused, and the initial rules
// stay.
func TestLiveWatchBadValueAtStart(t *testing.T) {
	t.Parallel()
	kv, _ := configBucket(t)
	ctx := t.Context()
	rev, err := kv.Put(ctx, gate.Key, []byte(rulesBad))
	if err != nil {
		t.Fatal(err)
	}
	initial := mustParse(t, rulesV1)
	live := gate.NewLive(initial)
	logs := &logBuffer{}
	if err := live.Watch(ctx, kv, zerolog.New(logs)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Stop(context.WithoutCancel(ctx)) })
	if live.Current() != initial || live.Revision() != 0 {
		t.Errorf("revision %d, want the initial rules", live.Revision())
	}
	if r := live.Refused(); r == nil || r.Revision != rev {
		t.Errorf("Refused = %+v, want revision %d", r, rev)
	}
	if !strings.Contains(logs.String(), "rule 2 (large-refund)") {
		t.Errorf("log:\n%s", logs)
	}
}

// When the connection closes, the watch ends with a warning, the rules
// stay, and Stop returns.
func TestLiveConnectionClosed(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	nc, js := natstest.Connect(t, srv.ClientURL())
	ctx := t.Context()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "interlock_config"})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := gate.Put(ctx, kv, mustParse(t, rulesV1))
	if err != nil {
		t.Fatal(err)
	}
	live := gate.NewLive(nil)
	logs := &logBuffer{}
	if err := live.Watch(ctx, kv, zerolog.New(logs)); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	natstest.Eventually(t, "the end of the watch logged", func() bool { return strings.Contains(logs.String(), "the watch of the configuration key ended") })
	if live.Revision() != rev || live.Match(ctx, refund(1e6)).Allowed() {
		t.Errorf("after the connection closed: revision %d, want %d", live.Revision(), rev)
	}
	if err := live.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := live.Watch(ctx, kv, zerolog.Nop()); err == nil {
		t.Error("Watch on a closed connection succeeded")
	}
}

// A Live that does not watch stops at once; NewLive(nil) allows every
// call.
func TestLiveStopNotWatching(t *testing.T) {
	t.Parallel()
	live := gate.NewLive(nil)
	if err := live.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if live.Current() == nil || len(live.Current().Rules()) != 0 || live.Refused() != nil {
		t.Errorf("NewLive(nil) = %+v", live.Current())
	}
}

func TestLoadAndPut(t *testing.T) {
	t.Parallel()
	kv, _ := configBucket(t)
	ctx := t.Context()
	if _, _, err := gate.Load(ctx, kv); !errors.Is(err, gate.ErrNoRules) {
		t.Fatalf("Load of an empty bucket: %v", err)
	}
	rs := mustParse(t, rulesV1)
	rev, err := gate.Put(ctx, kv, rs)
	if err != nil {
		t.Fatal(err)
	}
	got, gotRev, err := gate.Load(ctx, kv)
	if err != nil {
		t.Fatal(err)
	}
	if gotRev != rev || !bytes.Equal(got.Source(), rs.Source()) || got.Name() != "kv interlock_config gate.rules" {
		t.Errorf("Load = %s rev %d, want rev %d", got.Name(), gotRev, rev)
	}
	for _, rs := range []*gate.RuleSet{nil, {}} {
		if _, err := gate.Put(ctx, kv, rs); err == nil || !strings.Contains(err.Error(), "gate.Parse") {
			t.Errorf("Put of %v: %v", rs, err)
		}
	}
	if _, err := kv.Put(ctx, gate.Key, []byte(rulesBad)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gate.Load(ctx, kv); err == nil || !strings.Contains(err.Error(), "rule 2 (large-refund)") {
		t.Errorf("Load of a bad value: %v", err)
	}
	if err := kv.Delete(ctx, gate.Key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gate.Load(ctx, kv); !errors.Is(err, gate.ErrNoRules) {
		t.Errorf("Load of a deleted key: %v", err)
	}
}

// Stop ends every goroutine the watch started, while the connection
// stays open. (Not parallel: it counts goroutines.)
func TestLiveStopLeavesNoGoroutine(t *testing.T) {
	kv, _ := configBucket(t)
	ctx := t.Context()
	if _, err := gate.Put(ctx, kv, mustParse(t, rulesV1)); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	live := gate.NewLive(nil)
	if err := live.Watch(ctx, kv, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(ctx, gate.Key, []byte(rulesV2))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "rules v2 applied", func() bool { return live.Revision() == rev })
	if err := live.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}
