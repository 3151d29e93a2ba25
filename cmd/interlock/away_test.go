package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAwayNamesADelegateThroughTheHTTPAPI: interlock away set names a
// delegate as the person the token names; show says it, to the person
// and to the delegate; end ends it; bad usage says how.
func TestAwayNamesADelegateThroughTheHTTPAPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "people.yaml")
	ann, _, err := peopleRun(t, "add", "ann", "--role", "finance", "--token", "--people", file)
	if err != nil {
		t.Fatal(err)
	}
	ben, _, err := peopleRun(t, "add", "ben", "--token", "--people", file)
	if err != nil {
		t.Fatal(err)
	}
	ann, ben = strings.TrimSpace(ann), strings.TrimSpace(ben)
	url := strings.TrimSuffix(apiURL.FindString(serveHint(t, filepath.Join(dir, "data"), "--http", "127.0.0.1:0", "--people", file)), "/v1/interrupts")
	away := func(token string, args ...string) (string, error) {
		t.Helper()
		var out, errOut strings.Builder
		err := Run(t.Context(), append([]string{"away"}, append(args, "--api", url, "--token", token)...), &out, &errOut)
		return out.String() + errOut.String(), err
	}
	to := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	if out, err := away(ann, "set", "--delegate", "ben", "--to", to, "--role", "finance"); err != nil || !strings.Contains(out, "ben decides for you (finance)") {
		t.Fatalf("away set: %v\n%s", err, out)
	}
	if out, err := away(ben, "show"); err != nil || !strings.Contains(out, "You decide for ann (finance) until") {
		t.Errorf("away show as ben: %v\n%s", err, out)
	}
	if out, err := away(ann, "set", "--delegate", "ben", "--to", to); codeOf(err) != exitRefused || !strings.Contains(err.Error(), "run_exists") {
		t.Errorf("a second absence: %v\n%s", err, out)
	}
	if out, err := away(ann, "end"); err != nil || !strings.Contains(out, "Your absence is over") {
		t.Errorf("away end: %v\n%s", err, out)
	}
	if out, err := away(ann, "show"); err != nil || !strings.Contains(out, "You are not away.") {
		t.Errorf("away show after the end: %v\n%s", err, out)
	}
	for _, bad := range [][]string{{"set", "--delegate", "ben"}, {"set", "--delegate", "ben", "--to", "tomorrow"}, {"show", "--delegate", "ben"}, {"leave"}} {
		if _, err := away(ann, bad...); codeOf(err) != exitUsage {
			t.Errorf("away %v: exit %d, want %d", bad, codeOf(err), exitUsage)
		}
	}
	var out, errOut strings.Builder
	if err := Run(t.Context(), []string{"away", "show", "--api", "nats://127.0.0.1:4222", "--token", ann}, &out, &errOut); codeOf(err) != exitUsage || !strings.Contains(err.Error(), "away talks HTTP") {
		t.Errorf("away with a NATS URL: %v", err)
	}
}
