//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
)

// servedAt is where a serve started by serveAnnounced listens.
type servedAt struct {
	http, metrics string // host:port
	stop          func()
	// printed is what serve printed after its announcements (the mails
	// of --try-mail).
	printed *lockedBuffer
}

// lockedBuffer is a buffer one goroutine writes and another reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveAnnounced runs `interlock serve` with args after the test's own
// (a free NATS port, metrics on a free port, the data dir), and returns
// the addresses it announces on stdout.
func serveAnnounced(t *testing.T, dataDir string, args ...string) servedAt {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	all := append([]string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", dataDir, "--lazy-fsync",
		"--log-format", "json", "--log-level", "warn", "--metrics", "127.0.0.1:0"}, args...)
	go func() {
		done <- Run(ctx, all, pw, io.Discard)
		pw.Close()
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v after Ctrl-C, want a clean stop", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30 s of Ctrl-C")
		}
	}
	t.Cleanup(stop)
	var at servedAt
	rd := bufio.NewReader(pr)
	httpLine := regexp.MustCompile(`^HTTP API on http://(\S+) `)
	metricsLine := regexp.MustCompile(`^Metrics on http://(\S+)/metrics`)
	for at.metrics == "" {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("serve %v stopped announcing before its metrics (http %q): %v", args, at.http, err)
		}
		if m := httpLine.FindStringSubmatch(line); m != nil {
			at.http = m[1]
		}
		if m := metricsLine.FindStringSubmatch(line); m != nil {
			at.metrics = m[1]
		}
	}
	at.printed = &lockedBuffer{}
	go func() { _, _ = io.Copy(at.printed, rd) }()
	if at.http == "" {
		t.Fatalf("serve %v announced no HTTP API", args)
	}
	at.stop = stop
	return at
}

// readmeHTTPCommands returns the commands of the README's HTTP section
// and of the two-person refund that continues it, continuation lines
// joined.
func readmeHTTPCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, title := range []string{"## Over HTTP", "## Two people for a large refund"} {
		_, section, ok := strings.Cut(string(b), title)
		if !ok {
			t.Fatalf("README.md has no %q section", title)
		}
		section, _, _ = strings.Cut(section, "\n## ")
		for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
			for line := range strings.SplitSeq(strings.ReplaceAll(block[1], "\\\n", " "), "\n") {
				if strings.TrimSpace(line) != "" {
					cmds = append(cmds, line)
				}
			}
		}
	}
	return cmds
}

// TestReadmeHTTPWalkWorksAsWritten replays the README's HTTP section: its
// curl lines run in a real shell with real curl against `interlock
// serve`, their addresses moved to the test's ports, and the `interlock`
// lines run through the command itself.
func TestReadmeHTTPWalkWorksAsWritten(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := tool + " is not on PATH; .ci/run installs curl when it is missing"
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	cmds := readmeHTTPCommands(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "interlock-data")
	at := serveAnnounced(t, data) // go run ./cmd/interlock serve, as in the two commands
	// tokens are the shell variables the walk sets (TOKEN, FAY, RAY).
	tokens := map[string]string{}

	// sh runs a README line in bash, its addresses moved to the test's.
	sh := func(line string) string {
		t.Helper()
		line = strings.ReplaceAll(line, "http://127.0.0.1:8080", "http://"+at.http)
		line = strings.ReplaceAll(line, "http://127.0.0.1:9090", "http://"+at.metrics)
		cmd := exec.CommandContext(t.Context(), "bash", "-c", line)
		cmd.Dir = dir
		cmd.Env = os.Environ()
		for k, v := range tokens {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README: %s: %v\n%s", line, err, out)
		}
		return string(out)
	}
	var (
		curls   int
		decoded map[string]any
	)
	decode := func(line, out string) map[string]any {
		t.Helper()
		decoded = nil
		if err := json.Unmarshal([]byte(out), &decoded); err != nil {
			t.Fatalf("README: %s printed no JSON object: %v\n%s", line, err, out)
		}
		return decoded
	}
	peopleAdd := regexp.MustCompile(`^([A-Z]+)=\$\(go run \./cmd/interlock (people add .*)\)$`)
	for _, line := range cmds {
		switch {
		case strings.HasPrefix(line, "curl "):
			out := sh(line)
			if strings.Contains(line, "$RAY") {
				// serve reads the people file again within a second of
				// its change: a person just added may wait that long.
				natstest.Eventually(t, "ray known to serve", func() bool {
					if !strings.Contains(out, `"code":"unauthorized"`) {
						return true
					}
					out = sh(line)
					return false
				})
			}
			curls++
			switch curls {
			case 1: // start r-8
				if d := decode(line, out); d["outcome"] != "interrupted" || d["run"] != "r-8" || !strings.Contains(out, `"resumeToken":"[redacted]"`) {
					t.Fatalf("start: %s", out)
				}
			case 2: // the supervisor's queue
				var page struct{ Items []map[string]any }
				if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Items) != 1 || page.Items[0]["run"] != "r-8" || page.Items[0]["node"] != "review" || page.Items[0]["approverRole"] != "supervisor" {
					t.Fatalf("interrupts: %v\n%s", err, out)
				}
			case 3: // approve
				if d := decode(line, out); d["outcome"] != "completed" {
					t.Fatalf("approve: %s", out)
				}
				// A retry with the same key is a repeat; a second approval
				// without one is refused not_waiting, as the README says.
				if d := decode(line, sh(line)); d["outcome"] != "repeat" {
					t.Fatalf("the approval again: %v", d)
				}
				again := strings.Replace(line, "-H 'Idempotency-Key: approve-r-8' ", "", 1)
				if again == line {
					t.Fatal("README: the approval has no Idempotency-Key header")
				}
				if d := decode(again, sh(again)); d["code"] != "not_waiting" || d["status"] != float64(http.StatusConflict) {
					t.Fatalf("a second approval: %v", d)
				}
			case 4: // the run
				d := decode(line, out)
				if evs, _ := d["events"].([]any); d["status"] != "completed" || len(evs) == 0 {
					t.Fatalf("run: %s", out)
				}
			case 5: // metrics
				if !regexp.MustCompile(`(?m)^interlock_decisions_total\{[^}]*flow="refund"[^}]*\} 1$`).MatchString(out) {
					t.Fatalf("metrics: %s", out)
				}
			case 6: // as sam, after the restart with the auth file
				var page struct{ Items []map[string]any }
				if err := json.Unmarshal([]byte(out), &page); err != nil || page.Items == nil {
					t.Fatalf("interrupts as sam: %v\n%s", err, out)
				}
				noToken := strings.Replace(line, `-H "Authorization: Bearer $TOKEN" `, "", 1)
				if noToken == line {
					t.Fatal("README: the call as sam sends no bearer token")
				}
				if d := decode(noToken, sh(noToken)); d["status"] != float64(http.StatusUnauthorized) || d["code"] != "unauthorized" {
					t.Fatalf("without the token: %v", d)
				}
			case 7: // a refund whose approval is mailed to sam
				if d := decode(line, out); d["outcome"] != "interrupted" || d["run"] != "r-mail" {
					t.Fatalf("start r-mail: %s", out)
				}
				decideByMail(t, at, "r-mail", tokens["TOKEN"])
			case 8: // r-9, started by ray, waits on two votes
				d := decode(line, out)
				ev, _ := d["event"].(map[string]any)
				data, _ := ev["data"].(map[string]any)
				if d["outcome"] != "interrupted" || d["run"] != "r-9" || data["separationOfDuties"] != true || data["title"] != "Refund $12,500.00 to Ann on order o-9" ||
					!strings.Contains(out, `"quorum":[{"role":"supervisor","count":1},{"role":"finance_lead","count":1}]`) {
					t.Fatalf("start r-9: %s", out)
				}
				// Had Sam started it, he could not have voted on it.
				samStart := strings.Replace(strings.Replace(line, "$RAY", "$TOKEN", 1), `"run":"r-9"`, `"run":"r-9-sam"`, 1)
				if d := decode(samStart, sh(samStart)); d["outcome"] != "interrupted" {
					t.Fatalf("r-9 started by sam: %v", d)
				}
				vote := `curl -s -X POST http://127.0.0.1:8080/v1/runs/refund/r-9-sam/resume -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"decision":"approve"}'`
				if out := sh(vote); decode(vote, out)["status"] != float64(http.StatusForbidden) || !strings.Contains(out, "sam@example.com started run r-9-sam and may not vote") {
					t.Fatalf("sam's vote on the refund he started: %s", out)
				}
			case 9: // sam claims it
				if d := decode(line, out); d["outcome"] != "assigned" || !strings.Contains(out, `"claimedBy":"sam@example.com"`) {
					t.Fatalf("claim: %s", out)
				}
			case 10: // fay's approve, refused: sam claimed it
				if d := decode(line, out); d["status"] != float64(http.StatusForbidden) || d["code"] != "forbidden" || !strings.Contains(out, "claimed by sam@example.com") {
					t.Fatalf("fay's approve while sam holds the claim: %s", out)
				}
			case 11: // sam's vote, one of two
				if d := decode(line, out); d["outcome"] != "interrupted" || !strings.Contains(out, `"approver":"sam@example.com","verdict":"approve","role":"supervisor"`) {
					t.Fatalf("sam's vote: %s", out)
				}
			case 12: // fay's vote completes it
				if d := decode(line, out); d["outcome"] != "completed" || !strings.Contains(out, `"approvedBy":"fay@example.com","approvers":["sam@example.com","fay@example.com"]`) {
					t.Fatalf("fay's vote: %s", out)
				}
			default:
				t.Fatalf("README: teach this test what %s shows", line)
			}

		case peopleAdd.MatchString(line):
			m := peopleAdd.FindStringSubmatch(line)
			args := strings.Fields(m[2])
			var out, errOut strings.Builder
			for i, a := range args {
				if i > 0 && args[i-1] == "--people" {
					args[i] = filepath.Join(dir, a)
				}
			}
			if err := Run(t.Context(), args, &out, &errOut); err != nil {
				t.Fatalf("README: %s: %v\n%s", line, err, errOut.String())
			}
			token := strings.TrimSpace(out.String())
			if token == "" || strings.Contains(token, "\n") {
				t.Fatalf("people add printed %q on stdout and %q on stderr: the token alone belongs on stdout", out.String(), errOut.String())
			}
			tokens[m[1]] = token
			b, err := os.ReadFile(filepath.Join(dir, "people.yaml"))
			if err != nil || strings.Contains(string(b), token) || !strings.Contains(string(b), args[2]) {
				t.Fatalf("people.yaml holds the token, or not %s: %v\n%s", args[2], err, b)
			}

		case strings.HasPrefix(line, "go run ./cmd/interlock serve "):
			at.stop()
			args := strings.Fields(strings.TrimPrefix(line, "go run ./cmd/interlock serve "))
			for i, a := range args {
				switch {
				case a == "0.0.0.0:8080":
					args[i] = "127.0.0.1:0" // the port of the test
				case i > 0 && (args[i-1] == "--auth-file" || args[i-1] == "--people"):
					args[i] = filepath.Join(dir, a)
				}
			}
			at = serveAnnounced(t, data, args...)

		default:
			t.Fatalf("README: teach this test to run %s", line)
		}
	}
	if curls != 12 || len(tokens) != 3 {
		t.Fatalf("the walk ran %d curl lines and added %d people; the test expects 12 and three", curls, len(tokens))
	}
}

// decideByMail does what the README's e-mail step says: it reads the
// decision link of run's mail on serve's console, opens it (which
// decides nothing), and approves on its page, as sam; the run completes,
// and the link is used.
func decideByMail(t *testing.T, at servedAt, run, token string) {
	t.Helper()
	link := regexp.MustCompile(`(?m)^Mail to sam@example\.com: .*\n  open: (http://\S+/decide/\S+)$`)
	var url string
	natstest.Eventually(t, "the mail of "+run+" on the console", func() bool {
		if m := link.FindStringSubmatch(at.printed.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	url = strings.Replace(url, "127.0.0.1:8080", at.http, 1)
	get := func() (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, page := get()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if code != http.StatusOK || csrf == nil || !strings.Contains(page, `value="approve"`) {
		t.Fatalf("the mail's link: %d\n%s", code, page)
	}
	status := func() string {
		req, _ := http.NewRequest(http.MethodGet, "http://"+at.http+"/v1/runs/refund/"+run, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d struct{ Status string }
		_ = json.NewDecoder(resp.Body).Decode(&d)
		return d.Status
	}
	if s := status(); s != "waiting" {
		t.Fatalf("opening the link left %s %s, want it waiting", run, s)
	}
	resp, err := http.PostForm(url, map[string][]string{"csrf": {csrf[1]}, "decision": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("approving on the link's page: %d\n%s", resp.StatusCode, b)
	}
	natstest.Eventually(t, run+" completed", func() bool { return status() == "completed" })
	if code, _ := get(); code != http.StatusConflict {
		t.Fatalf("the link opened again: %d, want 409: it decides once", code)
	}
}

func TestAuthAddPrintsATokenOnceAndKeepsOnlyItsHash(t *testing.T) {
	file := filepath.Join(t.TempDir(), "callers.yaml")
	add := func(name string, roles ...string) (string, error) {
		args := []string{"auth", "add", name, "--auth-file", file}
		for _, r := range roles {
			args = append(args, "--role", r)
		}
		var out, errOut strings.Builder
		err := Run(t.Context(), args, &out, &errOut)
		return strings.TrimSpace(out.String()), err
	}
	sam, err := add("sam@example.com", "supervisor", "legal")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := add("bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := add("bob", "supervisor"); err == nil || !strings.Contains(err.Error(), `already has a caller named "bob"`) {
		t.Fatalf("adding bob twice: %v", err)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("auth file mode = %v (%v), want 0600", fi.Mode(), err)
	}
	b, _ := os.ReadFile(file)
	for _, tok := range []string{sam, bob} {
		if len(tok) < 32 || strings.Contains(string(b), tok) || !strings.Contains(string(b), httpapi.HashToken(tok)) {
			t.Fatalf("the file holds the token %q, or not its hash:\n%s", tok, b)
		}
	}
	auth, err := httpapi.LoadAuth(file)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := auth.Authenticate(sam); !ok || c.Name != "sam@example.com" || strings.Join(c.Roles, ",") != "supervisor,legal" {
		t.Fatalf("sam = %+v, %v", c, ok)
	}
	if c, ok := auth.Authenticate(bob); !ok || c.Name != "bob" || len(c.Roles) != 0 {
		t.Fatalf("bob = %+v, %v", c, ok)
	}
}

func TestServeSaysTheAPIIsLoopbackOnlyWithoutAnAuthFile(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var logs natstest.Buffer
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", t.TempDir(), "--lazy-fsync",
			"--log-format", "json", "--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0"}, pw, &logs)
		pw.Close()
	}()
	rd := bufio.NewReader(pr)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("serve stopped before announcing its HTTP API: %v\n%s", err, logs.String())
		}
		if strings.HasPrefix(line, "HTTP API on http://127.0.0.1:") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, rd) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.SplitSeq(logs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["level"] == "info" && strings.Contains(fmt.Sprint(l["message"]), "on loopback only") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no info line says the API is loopback only:\n%s", logs.String())
	}
}
