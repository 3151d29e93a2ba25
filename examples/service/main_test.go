//go:build unix

package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/interlockhq/interlock/internal/natstest"
)

// TestTheServiceServesAFlowOfItsOwnAndDrainsOnCtrlC builds the example
// service, runs it on free ports, and drives one claim through its
// approval over the HTTP API: the start waits on the manager's approval,
// the approval completes it, the inbox serves its page and the metrics
// count the decision. Then SIGINT, as Ctrl-C sends it: the service drains
// and exits 0, saying it stopped.
func TestTheServiceServesAFlowOfItsOwnAndDrainsOnCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the service")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "service")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// mia, a manager, calls the API with her token, as the directory of
	// people says.
	const token = "mia-token-3f0c2a9d4b6e8f1a0c2e4a6b8d0f1e3c"
	sum := sha256.Sum256([]byte(token))
	peopleFile := filepath.Join(dir, "people.yaml")
	if err := os.WriteFile(peopleFile, []byte("people:\n  - name: mia\n    roles: [manager]\n    tokenSha256: "+hex.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-listen", "127.0.0.1:-1", "-http", "127.0.0.1:0", "-metrics", "127.0.0.1:0", "-data-dir", filepath.Join(dir, "data"), "-people", peopleFile)
	// Wait returns once the service exited and its log was copied whole.
	logR, logW := io.Pipe()
	cmd.Stderr = logW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	exited := make(chan struct{})
	go func() {
		exitErr = cmd.Wait()
		_ = logW.Close()
		close(exited)
	}()

	// The log is JSON lines; the serving line says where everything is.
	lines := make(chan map[string]any)
	testDone := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(logR)
		for sc.Scan() {
			var l map[string]any
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l = map[string]any{"message": "not JSON: " + sc.Text()}
			}
			select {
			case lines <- l:
			case <-testDone:
			}
		}
	}()
	t.Cleanup(func() {
		close(testDone)
		_ = cmd.Process.Kill() // if the test failed before it stopped
		<-exited
	})
	var logged []map[string]any
	next := func(what string) map[string]any {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the service ended its log before %s; logged %v", what, logged)
			}
			logged = append(logged, l)
			return l
		case <-time.After(time.Minute):
			t.Fatalf("no log line for a minute while waiting for %s; logged %v", what, logged)
		}
		return nil
	}
	var serving map[string]any
	for serving == nil {
		if l := next("the serving line"); strings.HasPrefix(fmt.Sprint(l["message"]), "serving") {
			serving = l
		}
	}
	api, _ := serving["http"].(string)
	metricsURL, _ := serving["metrics"].(string)
	if !strings.HasPrefix(api, "http://127.0.0.1:") || !strings.HasPrefix(metricsURL, "http://127.0.0.1:") || !strings.HasPrefix(fmt.Sprint(serving["nats"]), "nats://127.0.0.1:") {
		t.Fatalf("the serving line does not say where the API, the metrics and NATS are: %v", serving)
	}

	type outcome struct {
		Outcome string `json:"outcome"`
		Event   struct {
			Data map[string]any `json:"data"`
		} `json:"event"`
	}
	post := func(path, body string) outcome {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, api+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var o outcome
		if res.StatusCode != http.StatusAccepted || json.Unmarshal(b, &o) != nil {
			t.Fatalf("POST %s: %s\n%s", path, res.Status, b)
		}
		return o
	}
	get := func(url string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", url, res.Status, b)
		}
		return string(b)
	}

	if res, err := http.Get(api + "/v1/interrupts"); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a call without mia's token: %v %v, want 401: the directory of people authenticates the API", res, err)
	} else {
		_ = res.Body.Close()
	}
	o := post("/v1/runs/expense", `{"run":"c-1","state":{"employee":"ann","amount":250}}`)
	if d := o.Event.Data; o.Outcome != "interrupted" || d["kind"] != "approval" || d["approverRole"] != "manager" || d["action"] != "pay" {
		t.Fatalf("a claim of 250: %+v, want it waiting on a manager's approval to pay", o)
	}
	if page := get(api + "/v1/interrupts?role=manager"); !strings.Contains(page, `"run":"c-1"`) {
		t.Fatalf("the manager's queue does not list c-1: %s", page)
	}
	if page := get(api + "/"); !strings.Contains(page, "<html") {
		t.Fatalf("the inbox serves no page at /: %.200s", page)
	}
	o = post("/v1/runs/expense/c-1/resume", `{"decision":"approve","reason":"receipts attached"}`)
	if state, _ := o.Event.Data["state"].(map[string]any); o.Outcome != "completed" || state["outcome"] != "paid" {
		t.Fatalf("the approval: %+v, want the claim completed and paid", o)
	}
	// The workers count a transition once it is published, which may be
	// after the API heard its outcome.
	decided := regexp.MustCompile(`(?m)^interlock_decisions_total\{[^}]*flow="expense"[^}]*outcome="approved"[^}]*\} 1$`)
	var m string
	natstest.Eventually(t, "the metrics counting the approval", func() bool {
		m = get(metricsURL)
		return decided.MatchString(m)
	})

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for l := next("the drain"); l["message"] != "stopped"; l = next("the stop") {
		if l["level"] == "error" {
			t.Errorf("the service logged an error while it stopped: %v", l)
		}
	}
	go func() {
		for range lines {
		}
	}()
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("the service exited with %v after Ctrl-C, want 0", exitErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the service did not exit within 30 s of Ctrl-C")
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err != nil {
		t.Errorf("the service kept no data in -data-dir: %v", err)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var b bytes.Buffer
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
