package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/authority/authoritytest"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/protocol"
)

// TestTheHTTPAPIAnswersTheConformanceTable runs the authority's table
// through the HTTP API, each caller with their own token.
func TestTheHTTPAPIAnswersTheConformanceTable(t *testing.T) {
	t.Parallel()
	authoritytest.Conform(t, authoritytest.SurfaceHTTP, httpDoor{startTrustRig(t)})
}

// TestCallbackURLsAnswerTheConformanceTable runs the table's decisions
// through callback URLs, each issued to the case's caller whether or not
// they may decide (as a URL minted before its holder lost a role, or
// before another claimed the approval, is): the URL is the credential of
// its holder, never more.
func TestCallbackURLsAnswerTheConformanceTable(t *testing.T) {
	t.Parallel()
	authoritytest.Conform(t, authoritytest.SurfaceCallback, callbackDoor{httpDoor{startTrustRig(t)}})
}

// httpDoor is the HTTP API as the table's door.
type httpDoor struct{ r *trustRig }

// Start makes run r through the API, as the person who starts it.
func (d httpDoor) Start(t *testing.T, r authoritytest.Run, id string) (flow, run string) {
	by := d.r.by(r.StartedBy).in(t)
	if req := r.ToolRequest(id); req != nil {
		// The request is answered once its wait is over: the call is
		// pending then, or soon after.
		by.must(http.StatusAccepted, "POST", "/v1/gate/requests?wait=10ms", req)
		flow, run = protocol.GateFlow, id
	} else {
		by.must(http.StatusAccepted, "POST", "/v1/asks", r.AskRequest(id))
		flow, run = protocol.AskFlow, id
	}
	ops := d.r.by(authoritytest.Ops).in(t)
	natstest.Eventually(t, run+" of "+flow+" waiting", func() bool {
		res := ops.do("GET", "/v1/runs/"+flow+"/"+run, nil)
		var got httpapi.Run
		if res.status == http.StatusOK {
			res.decode(t, &got)
		}
		return got.Status == protocol.StatusWaiting
	})
	if r.ApprovedBy != "" {
		if got := d.r.by(r.ApprovedBy).in(t).accepted("POST", "/v1/runs/"+flow+"/"+run+"/resume", map[string]any{"decision": "approve"}); got.Outcome != protocol.EventCompleted {
			t.Fatalf("%s approving %s: %+v", r.ApprovedBy, r.Key, got)
		}
	}
	if claimant := r.Pending.ClaimedBy; claimant != "" {
		if got := d.r.by(claimant).in(t).accepted("POST", "/v1/runs/"+flow+"/"+run+"/assign", map[string]any{"op": protocol.AssignClaim}); got.Outcome != protocol.EventAssigned {
			t.Fatalf("%s claiming %s: %+v", claimant, r.Key, got)
		}
	}
	return flow, run
}

// Ask sends the case's request with its caller's token.
func (d httpDoor) Ask(t *testing.T, c authoritytest.Case, flow, run string) protocol.Code {
	path := "/v1/runs/" + flow + "/" + run
	by := d.r.by(c.Who).in(t)
	var res response
	switch c.Action {
	case authority.Decide:
		res = by.do("POST", path+"/resume", map[string]any{"decision": cmpVerdict(c.Verdict)})
	case authority.Claim:
		res = by.do("POST", path+"/assign", map[string]any{"op": protocol.AssignClaim})
	case authority.Delegate:
		res = by.do("POST", path+"/assign", map[string]any{"op": protocol.AssignDelegate, "to": authoritytest.Bob})
	case authority.Read:
		res = by.do("GET", path, nil)
	case authority.Cancel:
		res = by.do("POST", path+"/cancel", map[string]any{"reason": "conformance"})
	case authority.MintLink:
		res = by.do("POST", path+"/callbacks", nil)
	case authority.Consume:
		res = by.do("POST", "/v1/gate/requests/"+run+"/consume", map[string]any{"argsDigest": authoritytest.RunNamed(c.Run).FinalDigest(run)})
	default:
		t.Fatalf("the HTTP door has no %s", c.Action)
	}
	return codeOf(t, res)
}

// codeOf is the refusal a response says, or "" for a success.
func codeOf(t *testing.T, res response) protocol.Code {
	t.Helper()
	if res.status < 300 {
		var acc httpapi.Accepted
		if res.status == http.StatusAccepted && strings.Contains(string(res.body), `"outcome"`) {
			res.decode(t, &acc)
			if acc.Outcome == httpapi.OutcomeQueued {
				t.Fatalf("the command was queued, not answered: %s", res.body)
			}
		}
		return ""
	}
	return protocol.Code(res.problem(t).Code)
}

// cmpVerdict is v, approve when empty.
func cmpVerdict(v protocol.Verdict) string {
	if v == "" {
		return string(protocol.VerdictApprove)
	}
	return string(v)
}

// callbackDoor decides through callback URLs.
type callbackDoor struct{ httpDoor }

// Ask issues the case's caller a callback URL of the pending request,
// with the deployment's link signer, and decides with it, without a
// token.
func (d callbackDoor) Ask(t *testing.T, c authoritytest.Case, flow, run string) protocol.Code {
	api := d.r.api.in(t)
	in := d.r.by(authoritytest.Ops).in(t).run(flow, run).Checkpoint.Interrupt
	cb, err := api.svc.Links().MintCallback(api.server.PublicURL(), flow, run, in.RequestID, c.Who, time.Now().Add(time.Hour), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	path, ok := strings.CutPrefix(cb.URL, api.server.PublicURL())
	if !ok || !strings.HasPrefix(path, links.CallbackPath) {
		t.Fatalf("callback URL %s is not under %s", cb.URL, api.server.PublicURL())
	}
	return codeOf(t, api.as("").do("POST", path, map[string]any{"decision": cmpVerdict(c.Verdict)}))
}
