package e2e_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// The rig, and the helpers the test files share.

// rig is a service on an embedded server, and a client connection.
type rig struct {
	t     *testing.T
	srv   *bus.Server
	js    jetstream.JetStream
	names wire.Names
}

// newRig starts a service running flows (booking if none) on a new
// embedded server, and connects to it with every right.
func newRig(t *testing.T, flows ...*engine.Flow) *rig {
	t.Helper()
	if len(flows) == 0 {
		flows = []*engine.Flow{booking.Flow()}
	}
	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, flows...)
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	return &rig{t: t, srv: srv, js: js, names: names}
}

func (r *rig) start(flow, run string, state map[string]any) string {
	r.t.Helper()
	return natstest.Publish(r.t, r.js, r.names.In(flow, "start"), protocol.TypeStart, run, map[string]any{"state": state})
}

func (r *rig) resume(flow, run string, data map[string]any) string {
	r.t.Helper()
	return natstest.Publish(r.t, r.js, r.names.In(flow, "resume"), protocol.TypeResume, run, data)
}

// wait reads the run's events until the n-th of kind.
func (r *rig) wait(flow, run, kind string, n int) []natstest.Received {
	r.t.Helper()
	return natstest.WaitFor(r.t, r.js, r.names.EventStream(), r.names.Event(flow, run, ">"), natstest.Nth(kind, n))
}

// interrupt waits for the n-th interrupted event of a run and decodes it.
func (r *rig) interrupt(flow, run string, n int) protocol.Interrupted {
	r.t.Helper()
	var in protocol.Interrupted
	natstest.Last(r.t, r.wait(flow, run, "interrupted", n), "interrupted").Decode(r.t, &in)
	return in
}

func (r *rig) refusal(flow, run string, n int) protocol.Refused {
	r.t.Helper()
	var ref protocol.Refused
	natstest.Last(r.t, r.wait(flow, run, "refused", n), "refused").Decode(r.t, &ref)
	return ref
}

func (r *rig) checkpoint(flow, run string) (*engine.Checkpoint, uint64) {
	r.t.Helper()
	kv, err := r.js.KeyValue(r.t.Context(), r.names.RunsBucket())
	if err != nil {
		r.t.Fatal(err)
	}
	e, err := kv.Get(r.t.Context(), flow+"."+run)
	if err != nil {
		r.t.Fatalf("checkpoint %s.%s: %v", flow, run, err)
	}
	var cp engine.Checkpoint
	if err := json.Unmarshal(e.Value(), &cp); err != nil {
		r.t.Fatal(err)
	}
	return &cp, e.Revision()
}

func (r *rig) pending(flow, run string) bool {
	r.t.Helper()
	kv, err := r.js.KeyValue(r.t.Context(), r.names.PendingBucket())
	if err != nil {
		r.t.Fatal(err)
	}
	_, err = kv.Get(r.t.Context(), flow+"."+run)
	switch {
	case err == nil:
		return true
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return false
	}
	r.t.Fatal(err)
	return false
}

// answer is the data of a resume answering in with answers.
func answer(in protocol.Interrupted, answers map[string]any) map[string]any {
	return map[string]any{"resumeToken": in.ResumeToken, "answers": answers}
}

// newRigWith is newRig with a service configured by cfg (flows default to
// booking, the secret to the test secret).
func newRigWith(t *testing.T, cfg interlock.Config) *rig {
	t.Helper()
	if len(cfg.Flows) == 0 {
		cfg.Flows = []*engine.Flow{booking.Flow()}
	}
	if cfg.Secret == nil {
		cfg.Secret = natstest.Secret
	}
	srv := natstest.StartServer(t, "")
	natstest.StartWith(t, srv, cfg)
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	return &rig{t: t, srv: srv, js: js, names: names}
}

func (r *rig) send(flow, verb, typ, run string, data any) string {
	r.t.Helper()
	return natstest.Publish(r.t, r.js, r.names.In(flow, verb), typ, run, data)
}

// gateRig is a rig whose service runs the tool-call gate with the example
// rules, and the refund flow.
func gateRig(t *testing.T) *rig {
	t.Helper()
	return gateRigWith(t, interlock.Config{})
}

// gateRigWith is gateRig with a service configured by cfg (flows and gate
// rules are set).
func gateRigWith(t *testing.T, cfg interlock.Config) *rig {
	t.Helper()
	srv := natstest.StartServer(t, "")
	cfg.Flows, cfg.GateRules = []*engine.Flow{refund.Flow()}, exampleRules(t)
	svc := natstest.StartWith(t, srv, cfg)
	_, js := natstest.Connect(t, srv.ClientURL())
	return &rig{t: t, srv: srv, js: js, names: svc.Names()}
}

func (r *rig) request(callID, tool string, args map[string]any) string {
	r.t.Helper()
	return natstest.Publish(r.t, r.js, r.names.GateRequest(), protocol.TypeToolRequest, "",
		map[string]any{"callId": callID, "tool": tool, "args": args, "agent": "support-bot", "conversationId": "conv-1",
			"origin": map[string]any{"slack": map[string]any{"channel": "C1", "threadTs": "171.2"}}})
}

func (r *rig) decided(callID string, n int) protocol.Decided {
	r.t.Helper()
	var d protocol.Decided
	natstest.Last(r.t, r.wait("gate", callID, "decided", n), "decided").Decode(r.t, &d)
	return d
}

// mustNames are the default names.
func mustNames(t *testing.T) wire.Names {
	t.Helper()
	n, err := wire.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readyForTopics is a booking start state that fills every question, so
// the run goes straight to the topics choice.
func readyForTopics() map[string]any {
	return map[string]any{"email": "a@b.c", "name": "A", "phone": "1", "level": "beginner",
		"driver": map[string]any{"name": "B", "license": "L"}}
}

// expiresAt is an interrupt's deadline, or an error if it has none.
func expiresAt(in protocol.Interrupted) (time.Time, error) {
	if in.ExpiresAt == nil {
		return time.Time{}, errors.New("no deadline")
	}
	return *in.ExpiresAt, nil
}

// exampleRulesFile is the example rule set of the tool-call gate, which
// the gate's tests run with.
const exampleRulesFile = "../examples/gate/rules.yaml"

// exampleRules parses exampleRulesFile.
func exampleRules(t *testing.T) *gate.RuleSet {
	t.Helper()
	b, err := os.ReadFile(exampleRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := gate.Parse(b, exampleRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}
