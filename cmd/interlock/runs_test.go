package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/client"
)

func TestRunsListsEveryStatusNewestFirstWithHowEachEndedAndAHintForTheNextPage(t *testing.T) {
	url := serveForTest(t)
	if out, errOut, err := run(t, url, "start", "booking", "--run", "r-waits"); err != nil {
		t.Fatalf("start: %v\n%s%s", err, out, errOut)
	}
	startRefund(t, url, "r-rejected", 4800)
	if out, errOut, err := run(t, url, "answer", "refund", "r-rejected", "--reject", "--reason", "not eligible", "--approver", "sam"); err != nil {
		t.Fatalf("reject: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := run(t, url, "start", "booking", "--run", "r-cancelled"); err != nil {
		t.Fatalf("start: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := run(t, url, "cancel", "booking", "r-cancelled", "--reason", "customer called back", "--as", "ann"); err != nil {
		t.Fatalf("cancel: %v\n%s%s", err, out, errOut)
	}

	out, _, err := run(t, url, "runs")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "booking ") || strings.HasPrefix(line, "refund ") {
			rows = append(rows, line)
		}
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^booking\s+r-cancelled\s+cancelled\s+\S+\s+cancelled by ann: customer called back\s`),
		regexp.MustCompile(`^refund\s+r-rejected\s+completed\s+\S+\s+rejected by sam: not eligible\s`),
		regexp.MustCompile(`^booking\s+r-waits\s+waiting\s+ask_email\s+waiting for email\s`),
	}
	if len(rows) != len(want) {
		t.Fatalf("runs printed %d runs, want %d:\n%s", len(rows), len(want), out)
	}
	for i, re := range want {
		if !re.MatchString(rows[i]) {
			t.Errorf("row %d = %q, want it to match %s", i, rows[i], re)
		}
	}
	if !strings.Contains(out, "3 shown, newest first; statuses waiting, completed, failed, cancelled, expired") || strings.Contains(out, "Next page") {
		t.Errorf("runs footer:\n%s", out)
	}

	// A page at a time, following the hint.
	out, _, err = run(t, url, "runs", "--status", "finished", "--limit", "1")
	hint := regexp.MustCompile(`Next page: (interlock runs --status finished --limit 1 --after \S+)`).FindStringSubmatch(out)
	if err != nil || !strings.Contains(out, "r-cancelled") || hint == nil {
		t.Fatalf("runs --status finished --limit 1: %v\n%s", err, out)
	}
	out, _, err = run(t, url, strings.Fields(hint[1])[1:]...)
	if err != nil || !strings.Contains(out, "r-rejected") || strings.Contains(out, "r-cancelled") || strings.Contains(out, "Next page") {
		t.Fatalf("%s: %v\n%s", hint[1], err, out)
	}

	out, _, err = run(t, url, "runs", "--status", "waiting,cancelled", "--flow", "booking", "--json")
	var page client.RunsPage
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Items) != 2 || page.Items[1].Pending == nil ||
		page.Items[0].Finished == nil || page.Items[0].Finished.Reason != "customer called back" {
		t.Fatalf("runs --json: %v\n%s", err, out)
	}
}

func TestRunsRefusesWhatItCannotListAsBadUsage(t *testing.T) {
	url := serveForTest(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "--status", "running"}, "not listed while running"},
		{[]string{"runs", "--status", "done"}, `--status "done": use waiting, completed, failed, cancelled, expired, finished`},
		{[]string{"runs", "--after", "bm90LWEtY3Vyc29y"}, "not a cursor of a list of runs"},
		{[]string{"runs", "--limit", "0"}, "--limit 0: use 1 to 1000"},
		{[]string{"runs", "booking"}, "runs takes no arguments"},
	} {
		_, _, err := run(t, url, tc.args...)
		if codeOf(err) != exitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v (exit %d), want a usage error saying %q", tc.args, err, codeOf(err), tc.want)
		}
	}
}
