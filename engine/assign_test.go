package engine_test

import (
	"sync/atomic"
	"testing"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/protocol"
)

// TestWhereCallersAreIdentifiedAClaimantIsNotTakenAtTheirWord checks that an
// assign or a decision that only names the claimant, with no vouch and no
// role subject behind the name, is refused where callers are identified
// (a directory of people is in force): anyone could type the name.
func TestWhereCallersAreIdentifiedAClaimantIsNotTakenAtTheirWord(t *testing.T) {
	// Ana claims while nobody is identified; then a directory of people
	// comes into force.
	var identified atomic.Bool
	h := enginetest.NewWithConfig(t, engine.Config{Authority: authority.New(authority.Config{Identified: identified.Load})}, contractFlow(engine.Approval{ApproverRole: "legal"}))
	run := h.Start(map[string]any{"value": 12000})
	wantAccepted(t, assign(t, h, run, "ana", protocol.AssignClaim, ""))
	identified.Store(true)

	out, err := h.Runner.Assign(t.Context(), engine.Assign{Flow: "contract", Run: run, RequestID: h.Interrupt(run).RequestID,
		Op: protocol.AssignRelease, By: "ana", Inbound: engine.Inbound{EventID: "typed-ana", Source: "/test"}})
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, out, protocol.CodeForbidden, "only by a person a service of the deployment vouches for: send it through the HTTP API")
	if in := h.Checkpoint(run).Interrupt; in.ClaimedBy != "ana" {
		t.Fatalf("claimedBy = %q after a refused release", in.ClaimedBy)
	}
	// Nor is a decision that names the claimant on a token alone.
	out = h.Resume(run, engine.Resume{Decision: "approve", Approver: "ana",
		Inbound: engine.Inbound{EventID: "typed-ana-approve", Source: "/test"}})
	wantRefused(t, out, protocol.CodeForbidden, "is decided only by someone the deployment authenticates")
	// With her role known, the claimant decides.
	wantAccepted(t, vote(t, h, run, "ana", "approve", nil, "legal"))
	h.WantStatus(run, engine.Completed)
}
