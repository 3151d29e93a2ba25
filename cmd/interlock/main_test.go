package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// serveForTest runs `interlock serve` on a free port, with extra flags,
// and returns its URL.
func serveForTest(t *testing.T, extra ...string) string {
	t.Helper()
	// Metrics on a free port too, not on the default one.
	extra = append([]string{"--metrics", "127.0.0.1:0"}, extra...)
	// The data dir's cleanup must be registered before the one that stops
	// serve, so that it runs after it (cleanups run last-in, first-out).
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, append([]string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", dir, "--lazy-fsync", "--log-format", "json", "--log-level", "warn", "--http", "127.0.0.1:0"}, extra...), pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v after Ctrl-C, want a clean stop", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30 s of Ctrl-C")
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	_, rest, ok := strings.Cut(line, " on ")
	url, _, _ := strings.Cut(rest, " ")
	if !ok || !strings.HasPrefix(url, "nats://") {
		t.Fatalf("serve's first line has no URL: %q", line)
	}
	return url
}

func run(t *testing.T, url string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(t.Context(), append(args, "--nats-url", url), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestServeAndClientCommandsWalkABookingRun(t *testing.T) {
	url := serveForTest(t)

	out, _, err := run(t, url, "start", "booking", "--run", "r-cli", "name=Ann")
	if err != nil || !strings.Contains(out, "waiting at ask_email") || !strings.Contains(out, "interlock answer booking r-cli email=...") {
		t.Fatalf("start: %v\n%s", err, out)
	}
	out, _, err = run(t, url, "answer", "booking", "r-cli", "email=nope")
	if codeOf(err) != exitReasked || !strings.Contains(out, "ERROR: That doesn't look like an email.") {
		t.Fatalf("bad email: %v (exit %d, want %d)\n%s", err, codeOf(err), exitReasked, out)
	}
	out, _, err = run(t, url, "answer", "booking", "r-cli", "email=ann@example.com")
	if err != nil || !strings.Contains(out, "(phone)") || strings.Contains(out, "(name)") {
		t.Fatalf("auto-skip of name: %v\n%s", err, out)
	}
	out, _, err = run(t, url, "pending", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var pending struct {
		Items []map[string]any `json:"items"`
		Total int              `json:"total"`
		Next  string           `json:"next"`
	}
	if err := json.Unmarshal([]byte(out), &pending); err != nil || len(pending.Items) != 1 || pending.Items[0]["run"] != "r-cli" || pending.Total != 1 || pending.Next != "" {
		t.Fatalf("pending --json: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"answer", "booking", "r-cli", "phone=555"},
		{"answer", "booking", "r-cli", "level=beginner"},
		{"answer", "booking", "r-cli", "driver.name=Bob", "driver.license=D1"},
	} {
		if out, _, err := run(t, url, args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	_, errOut, err := run(t, url, "answer", "booking", "r-cli", "--select", "cooking")
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), `"cooking" is not an option; choose one or more of product, design, engineering`) {
		t.Fatalf("unknown option: %v %q", err, errOut)
	}
	out, _, err = run(t, url, "answer", "booking", "r-cli", "--select", "design")
	if err != nil || !strings.Contains(out, "completed") || !strings.Contains(out, `"design"`) {
		t.Fatalf("choice: %v\n%s", err, out)
	}
	out, _, err = run(t, url, "show", "booking", "r-cli", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["status"] != "completed" || doc["checkpoint"] == nil {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	out, _, err = run(t, url, "pending")
	if err != nil || !strings.Contains(out, "No runs are waiting.") {
		t.Fatalf("pending: %v\n%s", err, out)
	}
}

func TestCancelAndRefusalsFromTheShell(t *testing.T) {
	url := serveForTest(t)
	if _, _, err := run(t, url, "start", "booking", "--run", "r-cancel"); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, url, "cancel", "booking", "r-cancel", "--reason", "test")
	if err != nil || !strings.Contains(out, "cancelled") {
		t.Fatalf("cancel: %v\n%s", err, out)
	}
	_, errOut, err := run(t, url, "cancel", "booking", "r-cancel")
	if codeOf(err) != exitRefused || !strings.Contains(errOut, "refused (not_waiting)") {
		t.Fatalf("second cancel: %v %q", err, errOut)
	}
	_, errOut, err = run(t, url, "start", "nosuch")
	if codeOf(err) != exitRefused || !strings.Contains(errOut, "refused (unknown_flow)") || !strings.Contains(errOut, "booking") {
		t.Fatalf("unknown flow: %v %q", err, errOut)
	}
}

func TestClientCommandsSayWhenNoServerRuns(t *testing.T) {
	_, _, err := run(t, "nats://127.0.0.1:1", "pending")
	if err == nil || !strings.Contains(err.Error(), "interlock serve") || codeOf(err) != exitUnreachable {
		t.Fatalf("err = %v (exit %d), want a hint to run interlock serve and exit %d", err, codeOf(err), exitUnreachable)
	}
}

func TestFieldValueReadsEveryValueByOneRule(t *testing.T) {
	as, err := parseAssignments("argument", []string{"email=a=b@c", "n:=3", "ok:=true", "driver.name=Bob", "empty=", "amount=900", "zip=01234", "last4=4242", "code:=\"7\""})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{"last4": "string", "code": "string"}
	got, err := values("argument", as, func(f string) string { return types[f] })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"email": `"a=b@c"`, "n": "3", "ok": "true", "driver.name": `"Bob"`, "empty": `""`,
		"amount": "900", "zip": `"01234"`, "last4": `"4242"`, "code": `"7"`}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	as, _ = parseAssignments("argument", []string{"amount=lots"})
	_, err = values("argument", as, func(string) string { return "number" })
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), `"lots" is not a number`) {
		t.Errorf("a number field given text: %v, want a usage error saying it is not a number", err)
	}
}

func TestStartTakesANumberFieldAsANumberAndSaysHowToForceAType(t *testing.T) {
	url := serveForTest(t)
	out, errOut, err := run(t, url, "start", "refund", "--run", "r-num", "orderId=o-1", "amount=900")
	if err != nil || !strings.Contains(out, "waiting at verify_identity") {
		t.Fatalf("start refund amount=900: %v\n%s%s", err, out, errOut)
	}
	// The workers say orderId is a string: 123 is sent as one.
	if _, errOut, err := run(t, url, "start", "refund", "--run", "r-str", "orderId=123", "amount=900"); err != nil {
		t.Fatalf("start refund orderId=123: %v %s", err, errOut)
	}
	out, _, _ = run(t, url, "show", "refund", "r-str", "--json")
	if !strings.Contains(out, `"orderId": "123"`) || !strings.Contains(out, `"amount": 900`) {
		t.Fatalf("the state of r-str does not hold orderId as a string and amount as a number:\n%s", out)
	}
	_, errOut, err = run(t, url, "start", "refund", "--run", "r-json", `amount:="900"`)
	if codeOf(err) != exitRefused || !strings.Contains(errOut, "does not fit") || !strings.Contains(errOut, `amount:=900 is a number`) {
		t.Fatalf("start refund amount:=\"900\": exit %d, %q; want a refusal with the rule and how to force a number", codeOf(err), errOut)
	}
	out, errOut, err = run(t, url, "answer", "refund", "r-num", "last4=4242")
	if err != nil || strings.Contains(errOut, "does not fit") {
		t.Fatalf("answer last4=4242 (a string field): %v\n%s%s", err, out, errOut)
	}
}

func TestReannounceHandsOutAFreshTokenThatAnswerUses(t *testing.T) {
	url := serveForTest(t)
	if _, _, err := run(t, url, "start", "booking", "--run", "r-re"); err != nil {
		t.Fatal(err)
	}
	before, _, err := run(t, url, "show", "booking", "r-re", "--json")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, url, "reannounce", "booking", "r-re", "--reason", "lost the message")
	if err != nil || !strings.Contains(out, "waiting at ask_email") {
		t.Fatalf("reannounce: %v\n%s%s", err, out, errOut)
	}
	after, _, err := run(t, url, "show", "booking", "r-re", "--json")
	if err != nil || before == after {
		t.Fatalf("the checkpoint did not move: %v", err)
	}
	if out, errOut, err := run(t, url, "answer", "booking", "r-re", "email=ann@example.com"); err != nil || !strings.Contains(out, "(name)") {
		t.Fatalf("answer after reannounce: %v\n%s%s", err, out, errOut)
	}
	if _, _, err := run(t, url, "cancel", "booking", "r-re"); err != nil {
		t.Fatal(err)
	}
	_, errOut, err = run(t, url, "reannounce", "booking", "r-re")
	if codeOf(err) != exitRefused || !strings.Contains(errOut, "not_waiting") {
		t.Fatalf("reannounce of a cancelled run: exit %d, %q", codeOf(err), errOut)
	}
	if _, _, err := run(t, url, "reannounce", "booking"); codeOf(err) != exitUsage {
		t.Fatalf("reannounce without a run: exit %d", codeOf(err))
	}
}
