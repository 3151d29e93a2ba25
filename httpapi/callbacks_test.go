package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/protocol"
)

// callbackAPI starts the example flows with an API of sam (supervisor)
// and bob (finance_lead), logging into log, and returns it as sam and
// without a token.
func callbackAPI(t *testing.T, log *natstest.Buffer, flows ...*engine.Flow) (sam, bob, anon *api) {
	t.Helper()
	auth, samToken, bobToken := writeAuth(t)
	l := zerolog.New(&natstest.Buffer{}).Level(zerolog.DebugLevel)
	if log != nil {
		l = zerolog.New(log).Level(zerolog.DebugLevel)
	}
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: flows, Secret: natstest.Secret})
	s, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0", Auth: auth, Links: svc.Links(), Uses: svc.LinkUses(), Logger: &l})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	anon = &api{t: t, svc: svc, server: s, base: "http://" + s.Addr()}
	return anon.as(samToken), anon.as(bobToken), anon
}

// mintCallback asks the API, as a, for a callback URL of the refund
// run's pending request, and returns it with its path on the API.
func (a *api) mintCallback(run string) (links.Callback, string) {
	a.t.Helper()
	var cb links.Callback
	a.must(http.StatusCreated, "POST", "/v1/runs/refund/"+run+"/callbacks", nil).decode(a.t, &cb)
	path, ok := strings.CutPrefix(cb.URL, a.server.PublicURL())
	if !ok || !strings.HasPrefix(path, links.CallbackPath) {
		a.t.Fatalf("callback URL %s is not under the public URL %s", cb.URL, a.server.PublicURL())
	}
	return cb, path
}

func TestACallbackURLSettlesItsRequestOnceAsTheCallerWhoAskedForIt(t *testing.T) {
	t.Parallel()
	var log natstest.Buffer
	sam, _, anon := callbackAPI(t, &log, examples.Flows()...)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-1", "state": refundState(nil)["state"]})
	cb, path := sam.mintCallback("r-1")
	if cb.RequestID != sam.run("refund", "r-1").Checkpoint.Interrupt.RequestID || cb.ExpiresAt.IsZero() {
		t.Fatalf("minted %+v", cb)
	}

	// No token: the URL is the credential.
	acc := anon.accepted("POST", path, map[string]any{"decision": "reject", "reason": "duplicate"})
	if acc.Outcome == httpapi.OutcomeQueued {
		t.Fatalf("the callback's resume was not applied: %+v", acc)
	}
	recs, err := anon.svc.Client("/test").VouchedAudit(t.Context(), "refund", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(recs, func(r protocol.AuditRecord) bool { return r.Action == protocol.ActionRejected })
	if i < 0 || recs[i].By != "sam@example.com" || recs[i].Reason != "duplicate" {
		t.Fatalf("audit %+v: want the rejection by sam@example.com, who asked for the URL", recs)
	}

	p := anon.must(http.StatusConflict, "POST", path, map[string]any{"decision": "approve"}).problem(t)
	if p.Code != "not_waiting" || p.Detail != "this callback URL was already used" {
		t.Errorf("second POST = %+v", p)
	}
	text := strings.TrimPrefix(path, links.CallbackPath)
	if strings.Contains(log.String(), text) || strings.Contains(log.String(), text[:20]) {
		t.Errorf("the log holds the callback URL's text:\n%s", log.String())
	}
	if !strings.Contains(log.String(), `"route":"/v1/callbacks/{link}"`) {
		t.Errorf("the log has no line of the callback's request:\n%s", log.String())
	}
}

func TestARetryOfACallbackWithItsIdempotencyKeyIsAnsweredAsARepeat(t *testing.T) {
	t.Parallel()
	sam, _, anon := callbackAPI(t, nil, examples.Flows()...)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-1", "state": refundState(nil)["state"]})
	_, path := sam.mintCallback("r-1")
	if acc := anon.accepted("POST", path, map[string]any{"decision": "approve"}, "Idempotency-Key", "ticket-4821"); acc.Outcome == httpapi.OutcomeQueued || acc.Outcome == httpapi.OutcomeRepeat {
		t.Fatalf("first POST: %+v, want the decision applied", acc)
	}
	// The caller did not hear the answer and sends the same request again
	// (even with another body): the same use, answered as a repeat.
	for _, decision := range []string{"approve", "reject"} {
		acc := anon.accepted("POST", path, map[string]any{"decision": decision}, "Idempotency-Key", "ticket-4821")
		if acc.Outcome != httpapi.OutcomeRepeat || acc.Checkpoint == nil || acc.Checkpoint.Status != protocol.StatusCompleted {
			t.Fatalf("retry with the use's key (%s): %+v, want a repeat with the completed run", decision, acc)
		}
	}
	// Another key, or none, is another use of a used URL.
	for _, h := range [][]string{{"Idempotency-Key", "ticket-9999"}, nil} {
		p := anon.must(http.StatusConflict, "POST", path, map[string]any{"decision": "reject"}, h...).problem(t)
		if p.Code != "not_waiting" || p.Detail != "this callback URL was already used" {
			t.Errorf("POST with %v = %+v, want 409 already used", h, p)
		}
	}
	recs, err := anon.svc.Client("/test").Audit(t.Context(), "refund", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	decided := 0
	for _, r := range recs {
		if r.Action == protocol.ActionApproved || r.Action == protocol.ActionRejected {
			decided++
			if r.Action != protocol.ActionApproved {
				t.Errorf("audited %s, want the first POST's approval", r.Action)
			}
		}
	}
	if decided != 1 {
		t.Errorf("%d decisions audited, want 1", decided)
	}
}

func TestTwoRacingPostsOfOneCallbackURLDecideOnce(t *testing.T) {
	t.Parallel()
	sam, _, anon := callbackAPI(t, nil, examples.Flows()...)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-1", "state": refundState(nil)["state"]})
	_, path := sam.mintCallback("r-1")
	statuses := make([]int, 2)
	var wg sync.WaitGroup
	for i, decision := range []string{"approve", "reject"} {
		wg.Go(func() {
			statuses[i] = anon.do("POST", path, map[string]any{"decision": decision, "reason": "race"}).status
		})
	}
	wg.Wait()
	slices.Sort(statuses)
	if !slices.Equal(statuses, []int{http.StatusAccepted, http.StatusConflict}) {
		t.Fatalf("statuses %v, want one 202 and one 409", statuses)
	}
	recs, _ := anon.svc.Client("/test").Audit(t.Context(), "refund", "r-1")
	decided := 0
	for _, r := range recs {
		if r.Action == protocol.ActionApproved || r.Action == protocol.ActionRejected {
			decided++
		}
	}
	if decided != 1 {
		t.Errorf("%d decisions audited, want 1", decided)
	}
}

func TestACallbackURLOfARequestThatMovedOnIsRefused(t *testing.T) {
	t.Parallel()
	sam, _, anon := callbackAPI(t, nil, examples.Flows()...)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-1", "state": refundState(nil)["state"]})
	_, path := sam.mintCallback("r-1")
	sam.accepted("POST", "/v1/runs/refund/r-1/resume", map[string]any{"decision": "approve"})

	r := anon.do("POST", path, map[string]any{"decision": "reject", "reason": "late"})
	if p := r.problem(t); r.status != http.StatusConflict || p.Code != "not_waiting" && p.Code != "token_mismatch" {
		t.Fatalf("a callback after the run moved on = %d %+v", r.status, p)
	}
	if st := sam.run("refund", "r-1").Checkpoint.Status; st == "waiting" {
		t.Fatalf("the run waits again: %s", st)
	}
}

func TestACallbackURLRefusesAnotherRequestIdAndGivesItselfBackForAFixableBody(t *testing.T) {
	t.Parallel()
	sam, _, anon := callbackAPI(t, nil, examples.Flows()...)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-1", "state": refundState(nil)["state"]})
	_, path := sam.mintCallback("r-1")

	p := anon.must(http.StatusBadRequest, "POST", path, map[string]any{"decision": "approve", "requestId": "rq_other"}).problem(t)
	if !strings.Contains(p.Detail, "not the request this callback URL settles") {
		t.Errorf("another requestId = %+v", p)
	}
	p = anon.must(http.StatusBadRequest, "POST", path, map[string]any{"decision": "approve", "approver": "mallory"}).problem(t)
	if !strings.Contains(p.Detail, "sam@example.com") {
		t.Errorf("another approver = %+v", p)
	}
	p = anon.must(http.StatusUnprocessableEntity, "POST", path, map[string]any{"decision": "edit", "edits": map[string]any{"amount": 9000}}).problem(t)
	if p.Code != "invalid_answer" {
		t.Errorf("a bad edit = %+v", p)
	}
	// Neither used it up.
	anon.accepted("POST", path, map[string]any{"decision": "approve"})
}

func TestOnlySomeoneWhoMayDecideGetsACallbackURL(t *testing.T) {
	t.Parallel()
	sam, bob, _ := callbackAPI(t, nil, examples.Flows()...)
	sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-1", "state": refundState(nil)["state"]})
	p := bob.must(http.StatusForbidden, "POST", "/v1/runs/refund/r-1/callbacks", nil).problem(t)
	if p.Code != "forbidden" || !strings.Contains(p.Detail, "bob") {
		t.Errorf("bob's mint = %+v", p)
	}
	p = sam.must(http.StatusConflict, "POST", "/v1/runs/refund/r-1/callbacks", map[string]any{"requestId": "rq_other"}).problem(t)
	if p.Code != "token_mismatch" {
		t.Errorf("a mint for another request = %+v", p)
	}
}

// quorumFlow asks two supervisors to approve a payout.
func quorumFlow() *engine.Flow {
	type state struct {
		Verdict string `json:"verdict,omitempty"`
	}
	return engine.NewFlow[state]("payout").
		Node("review", func(ctx context.Context, n *engine.Node[state]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "pay", Args: map[string]any{"amount": 100}, ApproverRole: "supervisor", Quorum: &protocol.Quorum{Required: 2}})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict)})
		}).Start("review").MustBuild()
}

// Over HTTP as everywhere: an approver votes once, and whoever started
// the run votes not at all (separation of duties).
func TestOverHTTPEachApproverVotesOnceAndTheStarterNotAtAll(t *testing.T) {
	t.Parallel()
	sam, bob, _ := callbackAPI(t, nil, quorumFlow())
	sam.accepted("POST", "/v1/runs/payout", map[string]any{"run": "p-sam"})
	if p := sam.must(http.StatusForbidden, "POST", "/v1/runs/payout/p-sam/resume", map[string]any{"decision": "approve"}).problem(t); p.Code != "forbidden" ||
		!strings.Contains(p.Detail, "sam@example.com started run p-sam and may not vote") {
		t.Errorf("the starter's vote: %+v", p)
	}
	bob.accepted("POST", "/v1/runs/payout", map[string]any{"run": "p-2"})
	sam.accepted("POST", "/v1/runs/payout/p-2/resume", map[string]any{"decision": "approve"})
	if p := sam.must(http.StatusForbidden, "POST", "/v1/runs/payout/p-2/resume", map[string]any{"decision": "approve"}).problem(t); p.Code != "forbidden" ||
		!strings.Contains(p.Detail, "sam@example.com voted on pay already") {
		t.Errorf("a second vote by the same approver: %+v", p)
	}
	if cp := sam.run("payout", "p-2").Checkpoint; cp.Status != "waiting" || len(cp.Interrupt.Votes) != 1 {
		t.Errorf("after a refused second vote: %s with %+v", cp.Status, cp.Interrupt)
	}
}

func TestACallbackURLCastsOneVoteOfAQuorum(t *testing.T) {
	t.Parallel()
	sam, bob, anon := callbackAPI(t, nil, quorumFlow())
	// Bob starts the payout: sam, who did not, may vote on it.
	bob.accepted("POST", "/v1/runs/payout", map[string]any{"run": "p-1"})
	var cb links.Callback
	sam.must(http.StatusCreated, "POST", "/v1/runs/payout/p-1/callbacks", nil).decode(t, &cb)
	path := strings.TrimPrefix(cb.URL, sam.server.PublicURL())

	acc := anon.accepted("POST", path, map[string]any{"decision": "approve"})
	cp := sam.run("payout", "p-1").Checkpoint
	if cp.Status != "waiting" || len(cp.Interrupt.Votes) != 1 || cp.Interrupt.Votes[0].Approver != "sam@example.com" {
		t.Fatalf("after the callback's vote (%s): %+v", acc.Outcome, cp.Interrupt)
	}
	// The vote asked again under a new request id; the URL is used.
	if cp.Interrupt.RequestID == cb.RequestID {
		t.Errorf("the vote did not ask again")
	}
	if r := anon.do("POST", path, map[string]any{"decision": "approve"}); r.status != http.StatusConflict {
		t.Errorf("a second vote through the URL = %d %s", r.status, r.body)
	}
}

func TestPublicURLMustBeAnAbsoluteHTTPURLWithoutQuery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url     string
		wantErr string
	}{
		{"https://interlock.example.com", ""},
		{"https://interlock.example.com/", ""},
		{"http://127.0.0.1:8080", ""},
		{"interlock.example.com", "not an absolute http or https URL"},
		{"ftp://interlock.example.com", "not an absolute http or https URL"},
		{"https://interlock.example.com/?a=1", "query"},
		{"https://interlock.example.com/#x", "fragment"},
		{"https://interlock.example.com/interlock", "has a path"},
		{"https://user:pw@interlock.example.com", "credentials"},
	} {
		err := httpapi.Config{Addr: "127.0.0.1:0", PublicURL: tc.url}.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.url, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want an error saying %q", tc.url, err, tc.wantErr)
		}
	}
}

func TestThePublicURLDefaultsToTheAPIsAddress(t *testing.T) {
	t.Parallel()
	sam, _, _ := callbackAPI(t, nil, examples.Flows()...)
	if got, want := sam.server.PublicURL(), "http://"+sam.server.Addr(); got != want {
		t.Errorf("PublicURL = %s, want %s", got, want)
	}
	a := startAPIWith(t, httpapi.Config{Addr: "127.0.0.1:0", PublicURL: "https://interlock.example.com/"})
	a.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-1", "state": refundState(nil)["state"]})
	var cb links.Callback
	a.must(http.StatusCreated, "POST", "/v1/runs/refund/r-1/callbacks", nil).decode(t, &cb)
	if !strings.HasPrefix(cb.URL, "https://interlock.example.com/v1/callbacks/") {
		t.Errorf("callback URL %s is not under the public URL", cb.URL)
	}
}

// An ask hands out a callback URL as a flow's interrupt does: a system
// that holds no token settles it once, as the caller who asked for the
// URL, and the ask's answer says so.
func TestACallbackURLSettlesAnAskOnce(t *testing.T) {
	t.Parallel()
	sam, bob, anon := callbackAPI(t, nil, quorumFlow())
	bob.must(http.StatusAccepted, "POST", "/v1/asks", map[string]any{"askId": "ask-cb", "interrupt": map[string]any{
		"kind": "approval", "action": "rotate_keys", "args": map[string]any{"service": "billing"}, "approverRole": "supervisor"}})
	var cb links.Callback
	sam.must(http.StatusCreated, "POST", "/v1/runs/ask/ask-cb/callbacks", nil).decode(t, &cb)
	path := strings.TrimPrefix(cb.URL, sam.server.PublicURL())
	if acc := anon.accepted("POST", path, map[string]any{"decision": "approve", "reason": "change window open"}); acc.Outcome == httpapi.OutcomeQueued {
		t.Fatalf("the callback's resume was not applied: %+v", acc)
	}
	var ans httpapi.AskAnswer
	sam.must(http.StatusOK, "GET", "/v1/asks/ask-cb", nil).decode(t, &ans)
	if a := ans.Answered; a == nil || a.Decision != protocol.VerdictApprove || a.Approver != "sam@example.com" || a.Reason != "change window open" {
		t.Fatalf("the ask after its callback: %+v", ans.Answered)
	}
	if p := anon.must(http.StatusConflict, "POST", path, map[string]any{"decision": "reject", "reason": "no"}).problem(t); p.Code != "not_waiting" {
		t.Errorf("a second POST: %+v", p)
	}
}
