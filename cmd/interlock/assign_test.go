package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
)

func TestAssignClaimsReleasesAndDelegatesFromTheShell(t *testing.T) {
	url := serveForTest(t)
	if out, errOut, err := run(t, url, "start", "refund", "--run", "r-a", "orderId=o-1", "amount:=4800", "last4=4242"); err != nil {
		t.Fatalf("start: %v\n%s%s", err, out, errOut)
	}

	out, errOut, err := run(t, url, "assign", "claim", "refund", "r-a", "--as", "ana", "--reason", "mine")
	if err != nil || !strings.Contains(out, "of run r-a of refund claimed by ana") || !strings.Contains(out, "only ana may decide it") {
		t.Fatalf("claim: %v\n%s%s", err, out, errOut)
	}
	out, _, _ = run(t, url, "show", "refund", "r-a")
	if !strings.Contains(out, "claimed by ana") {
		t.Fatalf("show does not say who claimed it:\n%s", out)
	}
	out, errOut, err = run(t, url, "answer", "refund", "r-a", "--approve", "--as", "ben")
	if codeOf(err) != exitRefused || !strings.Contains(errOut, "refused (forbidden)") || !strings.Contains(errOut, "claimed by ana") {
		t.Fatalf("ben's approve of ana's claim: exit %d (%v)\n%s%s", codeOf(err), err, out, errOut)
	}
	_, errOut, err = run(t, url, "assign", "claim", "refund", "r-a", "--as", "ben")
	if codeOf(err) != exitRefused || !strings.Contains(errOut, "claimed by ana") {
		t.Fatalf("ben's claim of ana's claim: exit %d (%v)\n%s", codeOf(err), err, errOut)
	}
	out, errOut, err = run(t, url, "assign", "release", "refund", "r-a", "--as", "ana")
	if err != nil || !strings.Contains(out, "released by ana") || !strings.Contains(out, "anyone with role supervisor may decide it") {
		t.Fatalf("release: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = run(t, url, "assign", "delegate", "refund", "r-a", "--to", "role:finance_lead", "--as", "ana", "--json")
	var ev struct {
		Type string `json:"type"`
		Data struct {
			ApproverRole string `json:"approverRole"`
			By           string `json:"by"`
		} `json:"data"`
	}
	if err != nil || json.Unmarshal([]byte(out), &ev) != nil || ev.Type != "io.interlock.run.assigned" || ev.Data.ApproverRole != "finance_lead" || ev.Data.By != "ana" {
		t.Fatalf("delegate --json: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := run(t, url, "answer", "refund", "r-a", "--approve", "--role", "finance_lead", "--as", "fin"); err != nil || !strings.Contains(out, "completed") {
		t.Fatalf("finance_lead's approve: %v\n%s%s", err, out, errOut)
	}

	// A run that is no longer waiting, and one that never was.
	_, _, err = run(t, url, "assign", "claim", "refund", "r-a", "--as", "ana")
	if codeOf(err) != exitRefused || !strings.Contains(err.Error(), "run r-a of flow refund is completed, not waiting on an approval") {
		t.Fatalf("claim of a completed run: exit %d: %v", codeOf(err), err)
	}
	_, _, err = run(t, url, "assign", "claim", "refund", "r-never", "--as", "ana")
	if codeOf(err) != exitRefused || !strings.Contains(err.Error(), "there is no run r-never of flow refund") {
		t.Fatalf("claim of an unknown run: exit %d: %v", codeOf(err), err)
	}
	// A question has nothing to claim.
	run(t, url, "start", "booking", "--run", "b-a")
	_, errOut, err = run(t, url, "assign", "claim", "booking", "b-a", "--as", "ana")
	if codeOf(err) != exitRefused || !strings.Contains(errOut, "only an approval is claimed") {
		t.Fatalf("claim of a question: exit %d (%v)\n%s", codeOf(err), err, errOut)
	}
}

// contractState is the state of the contract flow of
// TestAnswerRespondsWithAMessage.
type contractState struct {
	Verdict string `json:"verdict,omitempty"`
	Message string `json:"message,omitempty"`
}

func TestAnswerRespondsWithAMessage(t *testing.T) {
	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, engine.NewFlow[contractState]("contract").
		Node("review", func(ctx context.Context, n *engine.Node[contractState]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "send_contract", Args: map[string]any{"customer": "Acme"},
				Decisions: []engine.Verdict{engine.VerdictApprove, engine.VerdictRespond}})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict), "message": d.Message})
		}).
		Start("review").
		MustBuild())
	url := srv.ClientURL()

	out, errOut, err := run(t, url, "start", "contract", "--run", "c-1")
	if err != nil || !strings.Contains(out, "--respond --message TEXT") {
		t.Fatalf("start does not say respond is a way to answer: %v\n%s%s", err, out, errOut)
	}
	// The approval lists no reject: said before anything is sent.
	_, _, err = run(t, url, "answer", "contract", "c-1", "--reject", "--reason", "no")
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), "--respond --message TEXT") {
		t.Fatalf("a reject where the approval lists none: exit %d: %v", codeOf(err), err)
	}
	out, errOut, err = run(t, url, "answer", "contract", "c-1", "--respond", "--message", "Use the 2026 template.")
	if err != nil || !strings.Contains(out, `"message": "Use the 2026 template."`) || !strings.Contains(out, `"verdict": "respond"`) {
		t.Fatalf("respond: %v\n%s%s", err, out, errOut)
	}
}

func TestAnswerRespondWhereTheApprovalListsNoneSaysWhatItTakes(t *testing.T) {
	url := serveForTest(t)
	run(t, url, "start", "refund", "--run", "r-n", "orderId=o-1", "amount:=4800", "last4=4242")
	_, _, err := run(t, url, "answer", "refund", "r-n", "--respond", "--message", "hello")
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), `decision "respond" is not allowed here`) || !strings.Contains(err.Error(), "--approve") {
		t.Fatalf("respond where none is listed: exit %d: %v", codeOf(err), err)
	}
}
