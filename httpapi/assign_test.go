package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// startAPIFlows starts a service of flows with an HTTP API configured by
// cfg.
func startAPIFlows(t *testing.T, cfg httpapi.Config, flows ...*engine.Flow) *api {
	t.Helper()
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: flows, Secret: natstest.Secret})
	s, err := httpapi.New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return &api{t: t, svc: svc, server: s, base: "http://" + s.Addr()}
}

// supervisors returns the API with an auth file of sam and sue
// (supervisor) and bob (finance_lead), called by each.
func supervisors(t *testing.T) (sam, sue, bob *api) {
	t.Helper()
	auth, samToken, bobToken := writeAuth(t)
	sueToken, err := httpapi.AddCaller(auth.Path(), "sue", []string{"supervisor"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Refresh(); err != nil {
		t.Fatal(err)
	}
	a := startAPI(t, auth)
	return a.as(samToken), a.as(sueToken), a.as(bobToken)
}

// assign sends an assign of a refund run and returns its assigned event.
func (a *api) assign(run string, body any) protocol.Assigned {
	a.t.Helper()
	acc := a.accepted("POST", "/v1/runs/refund/"+run+"/assign", body)
	if acc.Outcome != protocol.EventAssigned {
		a.t.Fatalf("assign = %+v, want assigned", acc)
	}
	var ev struct {
		Data protocol.Assigned `json:"data"`
	}
	if err := json.Unmarshal(acc.Event, &ev); err != nil {
		a.t.Fatal(err)
	}
	return ev.Data
}

func TestACallerWithoutTheRoleMayNotClaim(t *testing.T) {
	t.Parallel()
	sam, _, bob := supervisors(t)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-1", "state": refundState(nil)["state"]})

	p := bob.must(http.StatusForbidden, "POST", "/v1/runs/refund/r-1/assign", map[string]any{"op": "claim"}).problem(t)
	if p.Code != "forbidden" || !strings.Contains(p.Detail, "supervisor") || !strings.Contains(p.Detail, "bob") {
		t.Fatalf("bob's claim = %+v", p)
	}
	recs, err := sam.svc.Client("/test").Audit(t.Context(), "refund", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	if last := recs[len(recs)-1]; last.Action != "refused" || last.Code != "forbidden" || last.By != "bob" {
		t.Fatalf("the refusal's audit record = %+v", last)
	}
	if in := sam.run("refund", "r-1").Interrupt; in.ClaimedBy != "" {
		t.Fatalf("claimed by %q after a refused claim", in.ClaimedBy)
	}
}

func TestAClaimedApprovalIsDecidedOnlyByTheClaimantOverHTTP(t *testing.T) {
	t.Parallel()
	sam, sue, _ := supervisors(t)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-2", "state": refundState(nil)["state"]})
	pending := sam.run("refund", "r-2").Interrupt.RequestID

	a := sam.assign("r-2", map[string]any{"op": "claim", "reason": "I know this customer"})
	if a.ClaimedBy != "sam@example.com" || a.By != "sam@example.com" || a.RequestID != pending || a.ApproverRole != "supervisor" {
		t.Fatalf("claim = %+v", a)
	}
	p := sue.must(http.StatusForbidden, "POST", "/v1/runs/refund/r-2/resume", map[string]any{"decision": "approve"}).problem(t)
	if p.Code != "forbidden" || !strings.Contains(p.Detail, "claimed by sam@example.com") {
		t.Fatalf("sue's approve of sam's claim = %+v", p)
	}
	p = sue.must(http.StatusForbidden, "POST", "/v1/runs/refund/r-2/assign", map[string]any{"op": "release"}).problem(t)
	if p.Code != "forbidden" || !strings.Contains(p.Detail, "claimed by sam@example.com") {
		t.Fatalf("sue's release of sam's claim = %+v", p)
	}
	// Released, anyone with the role may decide again.
	if a := sam.assign("r-2", map[string]any{"op": "release", "requestId": pending}); a.ClaimedBy != "" {
		t.Fatalf("release = %+v", a)
	}
	sue.assign("r-2", map[string]any{"op": "claim"})
	if acc := sue.accepted("POST", "/v1/runs/refund/r-2/resume", map[string]any{"decision": "approve"}); acc.Outcome != protocol.EventCompleted {
		t.Fatalf("the claimant's approve = %+v", acc)
	}
	recs, err := sam.svc.Client("/test").Audit(t.Context(), "refund", "r-2")
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range recs {
		if r.Action == protocol.ActionClaimed || r.Action == protocol.ActionReleased {
			actions = append(actions, r.Action+" by "+r.By)
		}
	}
	if got := strings.Join(actions, ", "); got != "claimed by sam@example.com, released by sam@example.com, claimed by sue" {
		t.Fatalf("assignment audit = %s", got)
	}
}

func TestADelegationToARoleMakesItDecidableByThatRolesCallersOnly(t *testing.T) {
	t.Parallel()
	sam, sue, bob := supervisors(t)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-3", "state": refundState(nil)["state"]})

	a := sam.assign("r-3", map[string]any{"op": "delegate", "to": "role:finance_lead", "reason": "over my limit"})
	if a.ApproverRole != "finance_lead" || len(a.Assignees) != 0 || a.ClaimedBy != "" || a.Op != "delegate" {
		t.Fatalf("delegate = %+v", a)
	}
	for _, who := range []*api{sam, sue} {
		if p := who.must(http.StatusForbidden, "POST", "/v1/runs/refund/r-3/resume", map[string]any{"decision": "approve"}).problem(t); !strings.Contains(p.Detail, "finance_lead") {
			t.Fatalf("a supervisor's approve after the delegation = %+v", p)
		}
	}
	if acc := bob.accepted("POST", "/v1/runs/refund/r-3/resume", map[string]any{"decision": "approve"}); acc.Outcome != protocol.EventCompleted {
		t.Fatalf("finance_lead's approve = %+v", acc)
	}
}

func TestADelegationToAPersonMakesThemTheAssignee(t *testing.T) {
	t.Parallel()
	sam, _, bob := supervisors(t)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-4", "state": refundState(nil)["state"]})
	a := sam.assign("r-4", map[string]any{"op": "delegate", "to": "bob"})
	if strings.Join(a.Assignees, ",") != "bob" || a.ApproverRole != "supervisor" {
		t.Fatalf("delegate to bob = %+v", a)
	}
	// bob holds no supervisor role, but is now the assignee.
	if acc := bob.accepted("POST", "/v1/runs/refund/r-4/resume", map[string]any{"decision": "reject", "reason": "duplicate"}); acc.Outcome != protocol.EventCompleted {
		t.Fatalf("the assignee's reject = %+v", acc)
	}
	// The run completed, and its outcome says it was rejected.
	if r := sam.run("refund", "r-4"); r.Status != protocol.StatusCompleted || r.Outcome != protocol.OutcomeRejected {
		t.Errorf("GET the rejected run: status %s, outcome %q; want completed, rejected", r.Status, r.Outcome)
	}
}

func TestAssignBodiesTheAPIRefuses(t *testing.T) {
	t.Parallel()
	sam, _, _ := supervisors(t)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-5", "state": refundState(nil)["state"]})
	for _, c := range []struct {
		body, says string
	}{
		{``, "body is empty"},
		{`[]`, "JSON object"},
		{`{"op":"claim","by":"sam@example.com"}`, "by is the authenticated caller, sam@example.com; leave it out"},
		{`{"op":"claim","by":"mallory"}`, "by is the authenticated caller"},
		{`{"op":"grab"}`, "claim, release or delegate"},
		{`{}`, "op"},
		{`{"op":"delegate"}`, "to: is missing"},
		{`{"op":"claim","to":"bob"}`, "only with op delegate"},
		{`{"op":"claim","who":"bob"}`, "unknown field"},
		{`{"op":"claim","op":"release"}`, "twice"},
		{`{"op":"release"}`, "not claimed"},
		{`{"op":"delegate","to":"role:no such role"}`, "to:"},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		p := sam.must(http.StatusBadRequest, "POST", "/v1/runs/refund/r-5/assign", body).problem(t)
		if p.Code != httpapi.CodeInvalidPayload || !strings.Contains(p.Detail, c.says) {
			t.Errorf("%s: %+v, want invalid_payload saying %q", c.body, p, c.says)
		}
	}
	// A bad body is said before the run is read.
	if p := sam.must(http.StatusBadRequest, "POST", "/v1/runs/refund/r-none/assign", `{"op":"grab"}`).problem(t); !strings.Contains(p.Detail, "claim, release or delegate") {
		t.Fatalf("a bad body on a run that does not exist = %+v", p)
	}
	// A request that is no longer pending: a lost race.
	if p := sam.must(http.StatusConflict, "POST", "/v1/runs/refund/r-5/assign", map[string]any{"op": "claim", "requestId": "rq_gone"}).problem(t); p.Code != "token_mismatch" {
		t.Fatalf("an old request = %+v", p)
	}
	// A run that waits on a question has nothing to claim.
	sam.accepted("POST", "/v1/runs/booking", map[string]any{"run": "b-1"})
	if p := sam.must(http.StatusBadRequest, "POST", "/v1/runs/booking/b-1/assign", map[string]any{"op": "claim"}).problem(t); !strings.Contains(p.Detail, "only an approval") {
		t.Fatalf("a claim of a question = %+v", p)
	}
}

// respondFlow asks a supervisor to approve, reject or respond to
// send_contract, and records the message of a respond.
func respondFlow() *engine.Flow {
	type state struct {
		Message string `json:"message,omitempty"`
	}
	return engine.NewFlow[state]("contract").
		Node("review", func(ctx context.Context, n *engine.Node[state]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "send_contract", Args: map[string]any{"customer": "Acme"}, ApproverRole: "supervisor",
				Decisions: []engine.Verdict{engine.VerdictApprove, engine.VerdictReject, engine.VerdictRespond}})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"message": d.Message})
		}).
		Start("review").
		MustBuild()
}

func TestTheResumeBodyTakesTheMessageOfARespond(t *testing.T) {
	t.Parallel()
	a := startAPIFlows(t, httpapi.Config{Addr: "127.0.0.1:0"}, respondFlow())
	a.accepted("POST", "/v1/runs/contract", map[string]any{"run": "c-1"})

	if p := a.must(http.StatusUnprocessableEntity, "POST", "/v1/runs/contract/c-1/resume", map[string]any{"decision": "respond"}).problem(t); !strings.Contains(p.Detail, "needs a message") {
		t.Fatalf("respond without a message = %+v", p)
	}
	if p := a.must(http.StatusUnprocessableEntity, "POST", "/v1/runs/contract/c-1/resume", map[string]any{"decision": "approve", "message": "hi"}).problem(t); !strings.Contains(p.Detail, "only with decision respond") {
		t.Fatalf("approve with a message = %+v", p)
	}
	acc := a.accepted("POST", "/v1/runs/contract/c-1/resume", map[string]any{"decision": "respond", "message": "Use the 2026 template."})
	if acc.Outcome != protocol.EventCompleted {
		t.Fatalf("respond = %+v", acc)
	}
	if s := string(a.run("contract", "c-1").State); !strings.Contains(s, "Use the 2026 template.") {
		t.Fatalf("state %s holds no message", s)
	}

	// Where the approval does not list respond, it is refused.
	b := startAPI(t, nil)
	b.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-6", "state": refundState(nil)["state"]})
	if p := b.must(http.StatusUnprocessableEntity, "POST", "/v1/runs/refund/r-6/resume", map[string]any{"decision": "respond", "message": "hi"}).problem(t); !strings.Contains(p.Detail, "not allowed here") {
		t.Fatalf("respond where it is not listed = %+v", p)
	}
}
