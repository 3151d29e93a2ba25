package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// sized is one command of a chosen size on the wire (headers and body).
type sized struct {
	name, subject, flow, run, id string
	msg                          *nats.Msg
}

// sizedCommand builds a structured CloudEvent of type typ for run whose
// message (headers and body) is exactly size bytes: data(pad) is its data,
// padded with pad.
func sizedCommand(t *testing.T, name, subject, flow, run, typ string, size int, data func(pad string) any) sized {
	t.Helper()
	id := "ev-" + name
	build := func(pad string) *nats.Msg {
		ev, err := events.New(id, "/size-test", typ, run, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), data(pad))
		if err != nil {
			t.Fatal(err)
		}
		body, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(subject)
		m.Data = body
		m.Header.Set("Content-Type", events.Structured)
		m.Header.Set(jetstream.MsgIDHeader, id)
		return m
	}
	wire := func(m *nats.Msg) int { return m.Size() - len(m.Subject) }
	base := wire(build(""))
	if size < base {
		t.Fatalf("%s: %d bytes is less than the command's %d without padding", name, size, base)
	}
	m := build(strings.Repeat("x", size-base))
	if got := wire(m); got != size {
		t.Fatalf("%s: built %d bytes, want %d", name, got, size)
	}
	return sized{name: name, subject: subject, flow: flow, run: run, id: id, msg: m}
}

// TestCommandsOfEverySizeUpToTheServersLimitAreAnswered sends starts,
// resumes and tool requests from 1 KiB to exactly what the server takes,
// the bulk in the origin, the state, the answers or the arguments. Each is
// answered (its run moves, or it is refused, or dead-lettered) and
// acknowledged once, nothing stays in INTERLOCK_IN, and the service stops
// within its stop context.
func TestCommandsOfEverySizeUpToTheServersLimitAreAnswered(t *testing.T) {
	t.Parallel()
	rules := exampleRules(t)
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), GateRules: rules})
	nc, js := natstest.Connect(t, srv.ClientURL())
	r := &rig{t: t, srv: srv, js: js, names: svc.Names()}
	limit := int(nc.MaxPayload())
	if limit < 1<<20 {
		t.Fatalf("the server takes %d bytes in a message; the test expects NATS's default, 1 MiB", limit)
	}

	sizes := []int{1 << 10, 64 << 10, 512 << 10, limit - 300, limit}
	var cmds []sized
	for i, size := range sizes {
		// A run of booking waiting on its first question, for the resume.
		waiting := fmt.Sprintf("r-wait-%d", i)
		r.start("booking", waiting, nil)
		in := r.interrupt("booking", waiting, 1)
		n := func(kind string) string { return fmt.Sprintf("%s-%d", kind, i) }
		cmds = append(cmds,
			sizedCommand(t, n("start-origin"), r.names.In("refund", "start"), "refund", n("r-origin"), protocol.TypeStart, size, func(pad string) any {
				return map[string]any{"state": map[string]any{"orderId": "o-1", "amount": 4800, "last4": "4242"},
					"origin": map[string]any{"note": pad}}
			}),
			sizedCommand(t, n("start-state"), r.names.In("booking", "start"), "booking", n("r-state"), protocol.TypeStart, size, func(pad string) any {
				return map[string]any{"state": map[string]any{"name": pad}}
			}),
			sizedCommand(t, n("resume"), r.names.In("booking", "resume"), "booking", waiting, protocol.TypeResume, size, func(pad string) any {
				return map[string]any{"resumeToken": in.ResumeToken, "answers": map[string]any{"email": pad + "@example.com"}}
			}),
			sizedCommand(t, n("request-args"), r.names.GateRequest(), "gate", n("call-args"), protocol.TypeToolRequest, size, func(pad string) any {
				return map[string]any{"callId": n("call-args"), "tool": "issue_refund", "args": map[string]any{"amount": 4800, "memo": pad}}
			}),
			sizedCommand(t, n("request-origin"), r.names.GateRequest(), "gate", n("call-origin"), protocol.TypeToolRequest, size, func(pad string) any {
				return map[string]any{"callId": n("call-origin"), "tool": "lookup_order", "args": map[string]any{},
					"origin": map[string]any{"note": pad}}
			}),
			// No rule fires: the decided event echoes the tool's name.
			sizedCommand(t, n("request-tool"), r.names.GateRequest(), "gate", n("call-tool"), protocol.TypeToolRequest, size, func(pad string) any {
				return map[string]any{"callId": n("call-tool"), "tool": "lookup_" + pad, "args": map[string]any{}}
			}),
		)
	}
	// The largest size is exactly what fits: one byte more is refused.
	last := cmds[len(cmds)-1].msg
	over := nats.NewMsg(last.Subject)
	over.Header, over.Data = last.Header, append(append([]byte(nil), last.Data...), ' ')
	if _, err := js.PublishMsg(t.Context(), over); !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("a message of %d bytes, one more than max_payload: %v; want nats.ErrMaxPayload", over.Size()-len(over.Subject), err)
	}
	for _, c := range cmds {
		if _, err := js.PublishMsg(t.Context(), c.msg); err != nil {
			t.Fatalf("%s: the server refused %d bytes: %v", c.name, c.msg.Size()-len(c.msg.Subject), err)
		}
	}
	natstest.WaitDrained(t, js, r.names.InStream())

	// Each command is answered: applied to its run, refused, or
	// dead-lettered.
	refusedIDs, deadIDs := map[string]bool{}, map[string]bool{}
	for _, e := range natstest.Read(t, js, r.names.EventStream(), r.names.Event("*", "*", protocol.EventRefused)) {
		var ref protocol.Refused
		e.Decode(t, &ref)
		refusedIDs[ref.EventID] = true
	}
	for _, d := range natstest.Read(t, js, r.names.DeadLetterStream(), ">") {
		deadIDs[d.Header.Get(bus.HeaderOriginal+jetstream.MsgIDHeader)] = true
	}
	kv, err := js.KeyValue(t.Context(), r.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	applied := func(c sized) bool {
		e, err := kv.Get(t.Context(), c.flow+"."+c.run)
		if err != nil {
			return false
		}
		var cp struct {
			Applied []string `json:"applied"`
		}
		return json.Unmarshal(e.Value(), &cp) == nil && slices.Contains(cp.Applied, c.id)
	}
	decided := func(c sized) bool {
		return len(natstest.Read(t, js, r.names.EventStream(), r.names.Event(c.flow, c.run, protocol.EventDecided))) > 0
	}
	for _, c := range cmds {
		how := ""
		switch {
		case refusedIDs[c.id]:
			how = "refused"
		case deadIDs[c.id]:
			how = "dead-lettered"
		case applied(c):
			how = "applied"
		case c.flow == "gate" && decided(c):
			how = "decided"
		default:
			t.Errorf("%s (%d bytes) was acknowledged unanswered", c.name, c.msg.Size()-len(c.msg.Subject))
			continue
		}
		t.Logf("%s (%d bytes): %s", c.name, c.msg.Size()-len(c.msg.Subject), how)
	}
	// The smallest commands are applied, the origins over 64 KiB refused.
	for _, name := range []string{"start-origin-0", "start-state-0", "resume-0", "request-args-0"} {
		i := slices.IndexFunc(cmds, func(c sized) bool { return c.name == name })
		if !applied(cmds[i]) {
			t.Errorf("%s was not applied", name)
		}
	}
	for _, name := range []string{"start-origin-2", "start-origin-4", "request-origin-2", "request-origin-4", "request-tool-4"} {
		i := slices.IndexFunc(cmds, func(c sized) bool { return c.name == name })
		if !refusedIDs[cmds[i].id] || !deadIDs[cmds[i].id] {
			t.Errorf("%s was not refused and dead-lettered", name)
		}
	}

	// Acknowledged once each: no command was delivered again.
	cons, err := js.Consumer(t.Context(), r.names.InStream(), r.names.Consumer())
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 || info.NumAckPending != 0 {
		t.Errorf("commands were delivered again (%d) or are still in hand (%d)", info.NumRedelivered, info.NumAckPending)
	}

	ctx, cancel := context.WithTimeout(t.Context(), natstest.Wait)
	defer cancel()
	if err := svc.Stop(ctx); err != nil {
		t.Fatalf("the service did not stop within its stop context: %v", err)
	}
}
