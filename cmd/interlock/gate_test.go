package main

import (
	"strings"
	"testing"
)

func TestGateRequestWaitsForTheDecision(t *testing.T) {
	url := serveForTest(t, "--gate-rules", "../../examples/gate/rules.yaml")

	out, errOut, err := run(t, url, "gate", "request", "issue_refund", "orderId=o-1", "amount=200")
	if err != nil || !strings.Contains(out, "Allowed: call ") {
		t.Fatalf("small refund: %v\n%s%s", err, out, errOut)
	}

	out, errOut, err = run(t, url, "gate", "request", "issue_refund", "orderId=o-1", "amount=4800", "--call", "call-big", "--wait", "1s")
	if codeOf(err) != exitReasked || !strings.Contains(out, "Waiting: call call-big needs approval") || !strings.Contains(out, "supervisor") {
		t.Fatalf("large refund: %v (exit %d)\n%s%s", err, codeOf(err), out, errOut)
	}
	out, errOut, err = run(t, url, "answer", "gate", "call-big", "--edit", "amount=400", "--reason", "partial")
	if err != nil {
		t.Fatalf("edit: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = run(t, url, "gate", "request", "issue_refund", "orderId=o-1", "amount=4800", "--call", "call-big")
	if err != nil || !strings.Contains(out, "Edited: call call-big of issue_refund (rule large-refund)") || !strings.Contains(out, `"amount":400`) {
		t.Fatalf("asking again after the edit: %v\n%s%s", err, out, errOut)
	}

	run(t, url, "gate", "request", "cancel_subscription", "plan=pro", "--call", "call-cancel", "--wait", "1s")
	run(t, url, "answer", "gate", "call-cancel", "--reject", "--reason", "offer a discount first")
	out, _, err = run(t, url, "gate", "request", "cancel_subscription", "plan=pro", "--call", "call-cancel")
	if codeOf(err) != exitRefused || !strings.Contains(out, "Rejected: call call-cancel") || !strings.Contains(out, "offer a discount first") {
		t.Fatalf("rejected call: %v (exit %d)\n%s", err, codeOf(err), out)
	}

	if _, _, err := run(t, url, "gate", "allow", "x"); codeOf(err) != exitUsage {
		t.Fatalf("unknown gate command: exit %d, want %d", codeOf(err), exitUsage)
	}
}

func TestAnswerWithARoleDecidesOnTheRoleSubject(t *testing.T) {
	url := serveForTest(t)
	out, errOut, err := run(t, url, "start", "refund", "--run", "r-role", "orderId=o-1", "amount:=4800", "last4=4242")
	if err != nil || !strings.Contains(out, "supervisor") {
		t.Fatalf("start: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = run(t, url, "answer", "refund", "r-role", "--approve", "--role", "legal")
	if codeOf(err) != exitRefused || !strings.Contains(out+errOut, "forbidden") {
		t.Fatalf("deciding as legal: %v (exit %d)\n%s%s", err, codeOf(err), out, errOut)
	}
	out, errOut, err = run(t, url, "answer", "refund", "r-role", "--approve", "--role", "supervisor")
	if err != nil || !strings.Contains(out, "completed") {
		t.Fatalf("deciding as supervisor: %v\n%s%s", err, out, errOut)
	}
}

// TestGateRequestToAServeWithoutRulesSaysTheGateIsOff: without
// --gate-rules the gate is off, and gate request says so at once, with
// how to turn it on, and exits 3 (the call may not run), rather than
// waiting and calling the request queued.
func TestGateRequestToAServeWithoutRulesSaysTheGateIsOff(t *testing.T) {
	url := serveForTest(t)
	out, errOut, err := run(t, url, "gate", "request", "issue_refund", "orderId=o-1", "amount=200", "--call", "call-off")
	if codeOf(err) != exitRefused || !strings.Contains(err.Error(), "gate is off") || !strings.Contains(err.Error(), "--gate-rules") {
		t.Fatalf("gate request with the gate off: exit %d, %v\n%s%s", codeOf(err), err, out, errOut)
	}
	if strings.Contains(err.Error()+out+errOut, "queued") {
		t.Errorf("gate request with the gate off calls the request queued: %v %s%s", err, out, errOut)
	}
}
