package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/internal/natstest"
)

func TestAskWaitsForTheAnswerAndAskStatusReadsIt(t *testing.T) {
	url := serveForTest(t)

	out, errOut, err := run(t, url, "ask", "question", "Where should we ship it?", "--field", "address",
		"--schema", `{"type":"string","minLength":10}`, "--title", "Delivery address", "--id", "ask-addr", "--wait", "1s")
	if codeOf(err) != exitReasked || !strings.Contains(out, "Waiting: ask ask-addr has no answer yet") || !strings.Contains(out, "Where should we ship it?") {
		t.Fatalf("ask question: %v (exit %d)\n%s%s", err, codeOf(err), out, errOut)
	}
	out, errOut, err = run(t, url, "answer", "ask", "ask-addr", "address=short")
	if codeOf(err) != exitRefused || !strings.Contains(out+errOut, "invalid_answer") {
		t.Fatalf("a too short answer: %v (exit %d)\n%s%s", err, codeOf(err), out, errOut)
	}
	if out, errOut, err = run(t, url, "answer", "ask", "ask-addr", "address=1 Main Street, Springfield"); err != nil {
		t.Fatalf("answer: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = run(t, url, "ask", "status", "ask-addr")
	if err != nil || !strings.Contains(out, "Ask ask-addr: answered") || !strings.Contains(out, "1 Main Street, Springfield") {
		t.Fatalf("ask status: %v\n%s%s", err, out, errOut)
	}

	out, errOut, err = run(t, url, "ask", "choice", "Which plan?", "pro=Pro plan", "team=Team plan", "--id", "ask-plan", "--wait", "1s")
	if codeOf(err) != exitReasked || !strings.Contains(out, "Pro plan") {
		t.Fatalf("ask choice: %v (exit %d)\n%s%s", err, codeOf(err), out, errOut)
	}
	run(t, url, "cancel", "ask", "ask-plan")
	out, _, err = run(t, url, "ask", "status", "ask-plan")
	if codeOf(err) != exitRefused || !strings.Contains(out, "Ask ask-plan: cancelled") {
		t.Fatalf("a cancelled ask: %v (exit %d)\n%s", err, codeOf(err), out)
	}

	for _, bad := range [][]string{
		{"ask", "poll", "Which?"},
		{"ask", "choice", "Which?", "no-label"},
		{"ask", "question", "Q?", "--schema", "{not json"},
		{"ask", "question"},
	} {
		if _, errOut, err := run(t, url, bad...); codeOf(err) != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", bad, codeOf(err), exitUsage, errOut)
		}
	}
	out, errOut, err = run(t, url, "ask", "question", "Q?", "--field", "answered", "--id", "ask-bad")
	if codeOf(err) != exitRefused || !strings.Contains(err.Error(), "kept by the ask run") {
		t.Fatalf("a malformed ask: %v (exit %d)\n%s%s", err, codeOf(err), out, errOut)
	}
}

func TestAskApprovalAndAskFromAFile(t *testing.T) {
	url := serveForTest(t)

	out, errOut, err := run(t, url, "ask", "approval", "rotate_keys", "service=billing", "keys:=2", "--role", "supervisor",
		"--args-schema", `{"type":"object","properties":{"keys":{"type":"integer","maximum":3}}}`, "--title", "Rotate the billing keys", "--id", "ask-rotate", "--wait", "1s")
	if codeOf(err) != exitReasked || !strings.Contains(out, "Waiting: ask ask-rotate has no answer yet") || !strings.Contains(out, "rotate_keys") {
		t.Fatalf("ask approval: %v (exit %d)\n%s%s", err, codeOf(err), out, errOut)
	}
	// The args schema holds the approver's edit.
	out, errOut, err = run(t, url, "answer", "ask", "ask-rotate", "--edit", "keys=5", "--role", "supervisor", "--as", "sam")
	if codeOf(err) != exitRefused || !strings.Contains(out+errOut, "/keys") {
		t.Fatalf("an edit the args schema refuses: %v (exit %d)\n%s%s", err, codeOf(err), out, errOut)
	}
	if out, errOut, err = run(t, url, "answer", "ask", "ask-rotate", "--edit", "keys=3", "--role", "supervisor", "--as", "sam"); err != nil {
		t.Fatalf("edit: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = run(t, url, "ask", "status", "ask-rotate", "--json")
	if err != nil || !strings.Contains(out, `"decision": "edit"`) || !strings.Contains(out, `"keys": 3`) || !strings.Contains(out, `"approver": "sam"`) {
		t.Fatalf("ask status: %v\n%s%s", err, out, errOut)
	}

	file := filepath.Join(t.TempDir(), "ask.json")
	if err := os.WriteFile(file, []byte(`{"askId": "ask-file", "interrupt": {"kind": "choice", "question": "Which region?",
		"options": [{"id": "eu", "label": "Europe"}, {"id": "us", "label": "United States"}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = run(t, url, "ask", "--file", file, "--wait", "1s")
	if codeOf(err) != exitReasked || !strings.Contains(out, "ask-file") || !strings.Contains(out, "Europe") {
		t.Fatalf("ask --file: %v (exit %d)\n%s%s", err, codeOf(err), out, errOut)
	}
	if _, errOut, err := run(t, url, "ask", "--file", file, "question", "Q?"); codeOf(err) != exitUsage || !strings.Contains(fmt.Sprint(err)+errOut, "--file holds the whole ask") {
		t.Errorf("--file with a kind too: exit %d\n%s", codeOf(err), errOut)
	}
	if err := os.WriteFile(file, []byte(`{"askId": `), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := run(t, url, "ask", "--file", file); codeOf(err) != exitUsage || !strings.Contains(fmt.Sprint(err)+errOut, "is not an ask in JSON") {
		t.Errorf("--file of broken JSON: exit %d\n%s", codeOf(err), errOut)
	}
}

// interlock ask says the ask's id and its page in the inbox as soon as
// it waits, before it waits for the answer: the next command needs them.
func TestAskPrintsItsIDAndInboxLinkBeforeWaiting(t *testing.T) {
	url := serveForTest(t)
	out, errOut := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(t.Context(), []string{"ask", "question", "Which warehouse?", "--nats-url", url, "--wait", "1m",
			"--inbox", "https://interlock.example.com"}, out, errOut)
	}()
	line := regexp.MustCompile(`Asked (ask-[0-9a-f]+): answer it in the inbox, https://interlock\.example\.com/runs/ask/(ask-[0-9a-f]+);`)
	var m []string
	natstest.Eventually(t, "the ask's id and link on stderr", func() bool {
		m = line.FindStringSubmatch(errOut.String())
		return m != nil
	})
	select {
	case err := <-done:
		t.Fatalf("ask returned (%v) before its answer; stdout:\n%s", err, out.String())
	default:
	}
	if m[1] != m[2] || !strings.Contains(errOut.String(), "interlock ask status "+m[1]) {
		t.Errorf("the line names %s and links %s:\n%s", m[1], m[2], errOut.String())
	}
	if o, e, err := run(t, url, "answer", "ask", m[1], "answer=Lyon"); err != nil {
		t.Fatalf("answer: %v\n%s%s", err, o, e)
	}
	if err := <-done; err != nil || !strings.Contains(out.String(), "Ask "+m[1]+": answered") {
		t.Fatalf("ask: %v\n%s", err, out.String())
	}
}
