package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTheAsksCurlWalkWorksAsWritten replays docs/asks.md's curl section
// in a real shell with real curl against `interlock serve`: the ask is
// announced, the answer is sent as the docs send it while the waiting
// GET waits, and the GET returns the answer.
func TestTheAsksCurlWalkWorksAsWritten(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is not on PATH; .ci/run installs it when it is missing")
		}
		t.Skip("curl is not on PATH")
	}
	b, err := os.ReadFile("../../docs/asks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## curl\n")
	if !ok {
		t.Fatal(`docs/asks.md has no "## curl" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var cmds []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, line := range strings.Split(block[1], "\n") {
			switch {
			case strings.HasPrefix(line, "curl "):
				cmds = append(cmds, line)
			case len(cmds) > 0 && line != "":
				cmds[len(cmds)-1] += "\n" + line
			}
		}
	}
	if len(cmds) != 3 {
		t.Fatalf("docs/asks.md's curl section has %d commands, the test knows 3 (ask, wait for the answer, answer): teach it the others\n%q", len(cmds), cmds)
	}
	dir := t.TempDir()
	at := serveAnnounced(t, filepath.Join(dir, "data"))
	sh := func(cmd string) *exec.Cmd {
		c := exec.CommandContext(t.Context(), "bash", "-c", strings.ReplaceAll(cmd, "http://127.0.0.1:8080", "http://"+at.http))
		c.Dir = dir
		return c
	}
	decode := func(what string, out []byte) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%s printed no JSON object: %v\n%s", what, err, out)
		}
		return m
	}
	out, err := sh(cmds[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("the ask: %v\n%s", err, out)
	}
	if m := decode("the ask", out); m["askId"] != "ask-7f3" || !strings.Contains(string(out), `"kind":"question"`) {
		t.Fatalf("the ask: %s", out)
	}
	// The waiting GET waits while the answer is sent.
	wait := sh(cmds[1])
	var waited strings.Builder
	wait.Stdout = &waited
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	out, err = sh(cmds[2]).CombinedOutput()
	if err != nil {
		t.Fatalf("the answer: %v\n%s", err, out)
	}
	if m := decode("the answer", out); m["outcome"] != "completed" {
		t.Fatalf("the answer: %s", out)
	}
	if err := wait.Wait(); err != nil {
		t.Fatalf("the waiting GET: %v\n%s", err, waited.String())
	}
	m := decode("the waiting GET", []byte(waited.String()))
	answered, _ := m["answered"].(map[string]any)
	answers, _ := answered["answers"].(map[string]any)
	if m["askId"] != "ask-7f3" || answered["status"] != "answered" || answers["address"] != "1 Rue de Rivoli, Paris" {
		t.Fatalf("the waiting GET: %s", waited.String())
	}
}
