package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// The attacker's chain of the doors issue, end to end: a supervisor's
// resume to a mistyped flow goes to the dead letters; whoever may read
// them republishes it, headers and all, as a resume of a real run. It
// must not decide anything: the dead letter holds no vouch, and a vouch
// binds the subject, run and body it was made for.
func TestADeadLetteredVouchedResumeCannotBeReplayedAsAnotherRunsApproval(t *testing.T) {
	t.Parallel()
	sam, _, anon := callbackAPI(t, nil, examples.Flows()...)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-1", "state": refundState(nil)["state"]})
	in := sam.run("refund", "r-1").Checkpoint.Interrupt
	r := sam.do("POST", "/v1/runs/refnud/r-1/resume", map[string]any{"decision": "approve", "requestId": in.RequestID})
	if r.status == http.StatusOK {
		t.Fatalf("a resume of a flow nobody serves was answered 200: %s", r.body)
	}
	svc := anon.svc
	n := svc.Names()
	js := svc.JetStream()
	var dead *nats.Msg
	natstest.Eventually(t, "the resume dead-lettered", func() bool {
		st, err := js.Stream(t.Context(), n.DeadLetterStream())
		if err != nil {
			return false
		}
		info, err := st.Info(t.Context())
		if err != nil || info.State.Msgs == 0 {
			return false
		}
		m, err := st.GetMsg(t.Context(), info.State.LastSeq)
		if err != nil {
			return false
		}
		dead = &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data}
		return true
	})
	for k := range dead.Header {
		if strings.EqualFold(k, protocol.HeaderVouch) || strings.EqualFold(k, "Interlock-Original-"+protocol.HeaderVouch) {
			t.Errorf("the dead letter holds the vouch under %s", k)
		}
	}
	// Replayed as the resume of the real run, with every header the dead
	// letter kept put back as it was.
	nc, _ := natstest.Connect(t, js.Conn().ConnectedUrl())
	replay := nats.NewMsg(n.In("refund", "resume"))
	replay.Data = dead.Data
	for k, vs := range dead.Header {
		k = strings.TrimPrefix(k, "Interlock-Original-")
		if strings.HasPrefix(k, "Nats-") {
			continue
		}
		replay.Header[k] = vs
	}
	if _, err := nc.RequestMsg(replay, natstest.Wait); err != nil {
		t.Fatalf("replaying the dead letter: %v", err)
	}
	refused := natstest.WaitFor(t, js, n.EventStream(), n.Event("refund", "r-1", protocol.EventRefused), natstest.Nth(protocol.EventRefused, 1))
	if !strings.Contains(string(refused[0].Data), "resumeToken is missing") {
		t.Errorf("the replay was refused with %s, want: no token", refused[0].Data)
	}
	if cp := sam.run("refund", "r-1").Checkpoint; cp.Status != protocol.StatusWaiting || cp.Interrupt.RequestID != in.RequestID {
		t.Fatalf("after the replay r-1 is %s at %+v, want still waiting on %s", cp.Status, cp.Interrupt, in.RequestID)
	}
	recs, err := svc.Client("/test").VouchedAudit(t.Context(), "refund", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.Action == protocol.ActionApproved {
			t.Fatalf("the replayed dead letter approved r-1: %+v", rec)
		}
	}
}
