package client_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// TestAssignAsClaimsForTheVouchedCallerOnly: a claim vouched for with the
// deployment's secret claims for the caller vouched for, never the by of
// its body; one vouched with another secret, or for someone without the
// approval's role, is refused.
func TestAssignAsClaimsForTheVouchedCallerOnly(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, refund.Flow())
	c := svc.Client("/test")
	state := map[string]json.RawMessage{"orderId": raw("o-1"), "amount": json.RawMessage(`4800`), "currency": raw("USD"), "last4": raw("4242")}
	ev, err := c.Start(t.Context(), refund.Name, "r-1", state, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := interrupted(t, ev)
	claim := protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignClaim, By: "mallory"}

	ev, err = c.AssignAs(t.Context(), refund.Name, "r-1", claim, bytes.Repeat([]byte("x"), 32), "ann", []string{refund.SupervisorRole})
	refusedWith(t, ev, err, protocol.CodeForbidden, "does not verify")
	ev, err = svc.AssignAs(t.Context(), c, refund.Name, "r-1", claim, "bob", []string{"agent"})
	refusedWith(t, ev, err, protocol.CodeForbidden, "approver role supervisor")

	ev, err = svc.AssignAs(t.Context(), c, refund.Name, "r-1", claim, "ann", []string{refund.SupervisorRole})
	if err != nil {
		t.Fatal(err)
	}
	var a protocol.Assigned
	if ev.Kind != protocol.EventAssigned || ev.Decode(&a) != nil || a.ClaimedBy != "ann" || a.By != "ann" {
		t.Fatalf("outcome %s %+v, want assigned, claimed by the vouched ann", ev.Kind, a)
	}
}

func refusedWith(t *testing.T, ev client.Event, err error, code protocol.Code, says string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var r protocol.Refused
	if ev.Kind != protocol.EventRefused || ev.Decode(&r) != nil || r.Code != code || !strings.Contains(r.Message, says) {
		t.Fatalf("outcome %s %+v, want refused %s saying %q", ev.Kind, r, code, says)
	}
}
