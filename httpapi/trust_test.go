package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/authority/authoritytest"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// trustRig is a deployment whose directory of people is the authority's
// fixture, each person with a token, and an HTTP API on it.
type trustRig struct {
	*api
	tokens map[string]string
}

// startTrustRig starts the trust rig.
func startTrustRig(t *testing.T) *trustRig {
	t.Helper()
	tokens := map[string]string{}
	dir := authoritytest.Directory(func(p authoritytest.Person) people.Person {
		tokens[p.Name] = people.NewToken()
		return people.Person{Name: p.Name, Roles: p.Roles, TokenSHA256: people.HashToken(tokens[p.Name])}
	})
	cfg := authoritytest.Deploy(interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret}, dir)
	live := cfg.People
	svc := natstest.StartWith(t, natstest.StartServer(t, ""), cfg)
	s, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0", People: live.Current, Links: svc.Links(), Uses: svc.LinkUses()})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return &trustRig{api: &api{t: t, svc: svc, server: s, base: "http://" + s.Addr()}, tokens: tokens}
}

// by is the API called by the person named.
func (r *trustRig) by(name string) *api { return r.as(r.tokens[name]) }

// TestTheRequesterOfAGateCallIsItsCallerNotTheAgentItNames checks that
// separation of duties keeps whoever asked for a call out of its quorum:
// a supervisor who asks the gate over HTTP, naming an agent in the body,
// is still the requester, and her own vote is refused; another's counts.
func TestTheRequesterOfAGateCallIsItsCallerNotTheAgentItNames(t *testing.T) {
	t.Parallel()
	r := startTrustRig(t)
	ann, bob := r.by(authoritytest.Ann), r.by(authoritytest.Bob)
	for _, body := range []map[string]any{
		{"callId": "c-named", "tool": "issue_refund", "agent": "some-agent", "args": map[string]any{"amount": 9000}},
		{"callId": "c-plain", "tool": "issue_refund", "args": map[string]any{"amount": 9000}},
	} {
		call := body["callId"].(string)
		var ans httpapi.GateAnswer
		ann.must(http.StatusAccepted, "POST", "/v1/gate/requests?wait=5s", body).decode(t, &ans)
		if ans.Pending == nil {
			t.Fatalf("%s: %+v, want it pending", call, ans)
		}
		run := ann.run(protocol.GateFlow, call)
		if run.StartedBy != authoritytest.Ann || run.Interrupt == nil || run.Interrupt.Requester != authoritytest.Ann {
			t.Fatalf("%s: started by %q, requester %+v; want %s, whoever asked", call, run.StartedBy, run.Interrupt, authoritytest.Ann)
		}
		res := ann.do("POST", "/v1/runs/gate/"+call+"/resume", map[string]any{"decision": "approve"})
		if p := res.problem(t); res.status != http.StatusForbidden || p.Code != string(protocol.CodeForbidden) {
			t.Fatalf("%s: ann's vote on her own request = %d %+v, want 403 forbidden", call, res.status, p)
		}
		if got := bob.accepted("POST", "/v1/runs/gate/"+call+"/resume", map[string]any{"decision": "approve"}); got.Outcome != protocol.EventInterrupted {
			t.Fatalf("%s: bob's vote = %+v, want the approval asked again for the second vote", call, got)
		}
	}
}

// TestAnAsksStarterIsWhoPostedItNotTheAgentItNames checks that an ask
// posted by one agent naming another is the poster's.
func TestAnAsksStarterIsWhoPostedItNotTheAgentItNames(t *testing.T) {
	t.Parallel()
	r := startTrustRig(t)
	b := r.by(authoritytest.AgentB)
	b.must(http.StatusAccepted, "POST", "/v1/asks", map[string]any{"askId": "ask-1", "agent": authoritytest.AgentA,
		"interrupt": map[string]any{"kind": "question", "questions": []map[string]any{{"field": "address", "question": "Where to?"}}}})
	if run := b.run(protocol.AskFlow, "ask-1"); run.StartedBy != authoritytest.AgentB {
		t.Fatalf("ask-1 started by %q, want %s, who posted it", run.StartedBy, authoritytest.AgentB)
	}
}

// TestAnEditIsCheckedAgainstTheRuleAgain is the example rules' promise,
// "You may lower the amount", kept: with examples/gate/rules.yaml, a
// supervisor's edit of a refund of 4800 up to 9000 is refused, saying
// why, and the call still waits; lowering it runs.
func TestAnEditIsCheckedAgainstTheRuleAgain(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	var ans httpapi.GateAnswer
	a.must(http.StatusAccepted, "POST", "/v1/gate/requests?wait=5s", map[string]any{"callId": "c-edit", "tool": "issue_refund",
		"args": map[string]any{"orderId": "o-1042", "amount": 4800, "currency": "USD"}}).decode(t, &ans)
	if ans.Pending == nil {
		t.Fatalf("%+v, want the refund pending", ans)
	}
	res := a.do("POST", "/v1/runs/gate/c-edit/resume", map[string]any{"decision": "edit", "edits": map[string]any{"amount": 9000}, "reason": "more"})
	if p := res.problem(t); res.status != http.StatusUnprocessableEntity || p.Code != string(protocol.CodeInvalidAnswer) || !strings.Contains(p.Detail, "allows an edit only where") {
		t.Fatalf("raising the refund: %d %+v, want 422 saying the rule's bound", res.status, p)
	}
	if run := a.run(protocol.GateFlow, "c-edit"); run.Status != protocol.StatusWaiting {
		t.Fatalf("after the refused edit the call is %s, want waiting", run.Status)
	}
	if got := a.accepted("POST", "/v1/runs/gate/c-edit/resume", map[string]any{"decision": "edit", "edits": map[string]any{"amount": 400}, "reason": "partial"}); got.Outcome != protocol.EventCompleted {
		t.Fatalf("lowering the refund: %+v, want the call decided", got)
	}
}

// TestAnAskIsReadByItsAgentAndItsDecidersAlone checks that, with a
// directory of people in force, an ask, its conversation and its callback
// URL are read and listed by the agent that asked and by the people who
// may answer it, and by no other token holder.
func TestAnAskIsReadByItsAgentAndItsDecidersAlone(t *testing.T) {
	t.Parallel()
	r := startTrustRig(t)
	a := r.by(authoritytest.AgentA)
	a.must(http.StatusAccepted, "POST", "/v1/asks", map[string]any{"askId": "ask-card", "conversationId": "conv-1",
		"messages":    []map[string]any{{"role": "user", "content": "my card is 4111 1111 1111 1111"}},
		"callbackUrl": "https://agent-a.example/hooks/interlock",
		"interrupt":   map[string]any{"kind": "approval", "action": "issue_refund", "args": map[string]any{"amount": 900}, "approverRole": authoritytest.Supervisor}})
	for _, who := range []string{authoritytest.AgentA, authoritytest.Ann, authoritytest.Ops} {
		if res := r.by(who).do("GET", "/v1/runs/ask/ask-card", nil); res.status != http.StatusOK {
			t.Errorf("%s reading the ask: %d", who, res.status)
		}
	}
	for _, who := range []string{authoritytest.AgentB, authoritytest.Ray} {
		for _, path := range []string{"/v1/runs/ask/ask-card", "/v1/asks/ask-card"} {
			res := r.by(who).do("GET", path, nil)
			if res.status != http.StatusForbidden || strings.Contains(string(res.body), "4111") || strings.Contains(string(res.body), "agent-a.example") {
				t.Errorf("%s reading %s: %d %s, want 403 and nothing of the ask", who, path, res.status, res.body)
			}
		}
		var page httpapi.InterruptPage
		r.by(who).must(http.StatusOK, "GET", "/v1/interrupts", nil).decode(t, &page)
		for _, p := range page.Items {
			if p.Run == "ask-card" {
				t.Errorf("%s lists the ask", who)
			}
		}
	}
	var page httpapi.InterruptPage
	r.by(authoritytest.Ann).must(http.StatusOK, "GET", "/v1/interrupts", nil).decode(t, &page)
	if len(page.Items) != 1 || page.Items[0].Run != "ask-card" {
		t.Errorf("a supervisor's list: %+v, want the ask", page.Items)
	}
}

// TestARunWaitingOnOthersIsCancelledByItsStarterItsDecidersAndTheCancelRole
// checks cancels with a directory in force: a token holder with no say in
// an approval cannot cancel it, nor can another agent; its starter, a
// supervisor and the operators' cancel role can.
func TestARunWaitingOnOthersIsCancelledByItsStarterItsDecidersAndTheCancelRole(t *testing.T) {
	t.Parallel()
	r := startTrustRig(t)
	a := r.by(authoritytest.AgentA)
	for _, call := range []string{"c-1", "c-2", "c-3"} {
		a.must(http.StatusAccepted, "POST", "/v1/gate/requests?wait=5s", map[string]any{"callId": call, "tool": "issue_refund", "args": map[string]any{"amount": 900}})
	}
	for _, who := range []string{authoritytest.Ray, authoritytest.AgentB} {
		res := r.by(who).do("POST", "/v1/runs/gate/c-1/cancel", map[string]any{"reason": "mine now"})
		if p := res.problem(t); res.status != http.StatusForbidden || p.Code != string(protocol.CodeForbidden) {
			t.Fatalf("%s cancelling agent-a's approval: %d %+v, want 403 forbidden", who, res.status, p)
		}
	}
	for call, who := range map[string]string{"c-1": authoritytest.AgentA, "c-2": authoritytest.Ann, "c-3": authoritytest.Ops} {
		if got := r.by(who).accepted("POST", "/v1/runs/gate/"+call+"/cancel", map[string]any{"reason": "not needed"}); got.Outcome != protocol.EventCancelled {
			t.Errorf("%s cancelling %s: %+v, want cancelled", who, call, got)
		}
	}
}
