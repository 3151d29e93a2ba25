package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
)

// peopleRun runs `interlock people ...` and returns its stdout and
// stderr.
func peopleRun(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut strings.Builder
	err := Run(t.Context(), append([]string{"people"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestPeopleCommandsPrintTokensOnceAndKeepOnlyTheirHashes: people add
// --token and rotate-token print the token alone on stdout, once; the
// file (mode 0600) holds its SHA-256; list shows names, roles and handles
// but never a token or a hash; remove revokes one person.
func TestPeopleCommandsPrintTokensOnceAndKeepOnlyTheirHashes(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "people.yaml")
	ann, stderr, err := peopleRun(t, "add", "ann@example.com", "--role", "supervisor", "--role", "legal", "--email", "ann@example.com", "--slack", "U012AB3CD", "--token", "--people", file)
	ann = strings.TrimSpace(ann)
	if err != nil || ann == "" || strings.Contains(ann, "\n") || !strings.Contains(stderr, "shown only this once") {
		t.Fatalf("people add --token: %v, stdout %q, stderr %q", err, ann, stderr)
	}
	if out, _, err := peopleRun(t, "add", "bob", "--teams", "bob@example.com", "--people", file); err != nil || !strings.Contains(out, "Added bob (no role)") {
		t.Fatalf("people add without a token: %v %q", err, out)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", fi.Mode(), err)
	}
	d, err := people.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := d.ByToken(ann); !ok || p.Name != "ann@example.com" || p.Slack != "U012AB3CD" {
		t.Fatalf("ann's token finds %+v, %v", p, ok)
	}
	b, _ := os.ReadFile(file)
	if strings.Contains(string(b), ann) {
		t.Fatal("the file holds the token")
	}

	list, _, err := peopleRun(t, "list", "--people", file)
	if err != nil {
		t.Fatal(err)
	}
	want := "NAME             ROLES              TOKEN  EMAIL            SLACK      TEAMS\n" +
		"ann@example.com  supervisor, legal  yes    ann@example.com  U012AB3CD  -\n" +
		"bob              -                  -      -                -          bob@example.com\n"
	if list != want {
		t.Errorf("people list printed\n%s\nwant\n%s", list, want)
	}
	if strings.Contains(list, ann) || strings.Contains(list, people.HashToken(ann)) {
		t.Error("people list shows a token or its hash")
	}

	rotated, _, err := peopleRun(t, "rotate-token", "ann@example.com", "--people", file)
	rotated = strings.TrimSpace(rotated)
	if err != nil || rotated == "" || rotated == ann {
		t.Fatalf("rotate-token: %v %q", err, rotated)
	}
	d, _ = people.ReadFile(file)
	if _, ok := d.ByToken(ann); ok {
		t.Error("the old token still works after rotate-token")
	}
	if _, ok := d.ByToken(rotated); !ok {
		t.Error("the new token does not work")
	}
	if out, _, err := peopleRun(t, "remove", "ann@example.com", "--people", file); err != nil || !strings.Contains(out, "Removed ann@example.com") {
		t.Fatalf("remove: %v %q", err, out)
	}
	if _, _, err := peopleRun(t, "remove", "ann@example.com", "--people", file); err == nil || codeOf(err) != exitFailed ||
		!strings.Contains(err.Error(), `no person named "ann@example.com"; it has bob`) || strings.Contains(err.Error(), "people: ") {
		t.Fatalf("removing ann again: %v (exit %d)", err, codeOf(err))
	}
}

func TestPeopleCommandsRefuseBadUsageSayingHow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "use: interlock people add <name>"},
		{[]string{"rm", "x"}, `unknown people command "rm"`},
		{[]string{"add", "ann"}, "people add needs --people FILE"},
		{[]string{"add", "--people", "x.yaml"}, "people add takes one name, got 0"},
		{[]string{"add", "ann smith", "--people", "x.yaml"}, "use only A-Z a-z 0-9 . _ @ -"},
		{[]string{"add", "ann", "--role", "a.b", "--people", "x.yaml"}, "--role: "},
		{[]string{"list", "ann", "--people", "x.yaml"}, `people list takes no name, but was given "ann"`},
		{[]string{"remove", "ann", "--token", "--people", "x.yaml"}, "are for people add"},
		{[]string{"import"}, "people import needs --auth-file FILE, --slack-config FILE, or both"},
		{[]string{"import", "--people", "x.yaml", "--auth-file", "a.yaml"}, "people import takes only --auth-file and --slack-config"},
		{[]string{"list", "--auth-file", "a.yaml", "--people", "x.yaml"}, "are for people import"},
	} {
		_, _, err := peopleRun(t, tc.args...)
		if codeOf(err) != exitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("people %v: %v (exit %d), want a usage error saying %q", tc.args, err, codeOf(err), tc.want)
		}
	}
}

// TestPeopleImportPrintsTheOlderFilesAsOneDirectory: an auth file and a
// Slack configuration's users and channels become one directory, a person
// in both joined by name, their token still theirs.
func TestPeopleImportPrintsTheOlderFilesAsOneDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	callers := filepath.Join(dir, "callers.yaml")
	var tok strings.Builder
	if err := Run(t.Context(), []string{"auth", "add", "ann@example.com", "--role", "supervisor", "--auth-file", callers}, &tok, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	slack := filepath.Join(dir, "slack.yaml")
	// No credentials are read: import needs only the users and channels.
	if err := os.WriteFile(slack, []byte("botToken: {env: NOT_SET_HERE}\nchannels: {supervisor: C0SUP}\nusers:\n  U0ANN: {name: ann@example.com, roles: [legal]}\n  U0BOB: {name: bob, roles: [supervisor]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := peopleRun(t, "import", "--auth-file", callers, "--slack-config", slack)
	if err != nil {
		t.Fatal(err)
	}
	d, err := people.Parse([]byte(out), "imported")
	if err != nil {
		t.Fatalf("the import does not parse: %v\n%s", err, out)
	}
	ann, ok := d.ByToken(strings.TrimSpace(tok.String()))
	if !ok || ann.Slack != "U0ANN" || !ann.Holds("supervisor") || !ann.Holds("legal") || d.Len() != 2 {
		t.Fatalf("imported ann = %+v, %v (%d people)\n%s", ann, ok, d.Len(), out)
	}
	if r, _ := d.Role("supervisor"); r.Slack != "C0SUP" {
		t.Errorf("imported role = %+v", r)
	}
	if !strings.HasPrefix(out, "# Interlock's directory of people") {
		t.Errorf("the import does not say what it is:\n%s", out)
	}
}

func TestServeRefusesADirectoryFileThatDoesNotParse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "people.yaml")
	if err := os.WriteFile(file, []byte("people:\n  - name: ann\n    tokenSha256: abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	err := Run(t.Context(), []string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", filepath.Join(dir, "data"), "--lazy-fsync",
		"--metrics", "", "--log-level", "error", "--people", file}, &stdout, &bytes.Buffer{})
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), "--people: "+file) || !strings.Contains(err.Error(), "64 hex digits") {
		t.Fatalf("serve --people with a bad file: %v (exit %d)", err, codeOf(err))
	}
	if stdout.Len() != 0 {
		t.Errorf("serve printed %q before refusing", stdout.String())
	}
}

// apiURL is the URL of GET /v1/interrupts in serve's hint.
var apiURL = regexp.MustCompile(`http://\S+/v1/interrupts`)

// TestServeWithPeopleAuthenticatesAndFollowsTheFile: serve --people lets
// the API listen beyond loopback, authenticates the directory's people,
// and follows the file: a person added gets in without a restart, one
// removed no longer does.
func TestServeWithPeopleAuthenticatesAndFollowsTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "people.yaml")
	ann, _, err := peopleRun(t, "add", "ann", "--role", "supervisor", "--token", "--people", file)
	if err != nil {
		t.Fatal(err)
	}
	url := apiURL.FindString(serveHint(t, filepath.Join(dir, "data"), "--http", "0.0.0.0:0", "--people", file))
	if url == "" {
		t.Fatal("serve's hint names no URL")
	}
	status := func(token string) int {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(token))
		res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	waitStatus := func(token string, want int) {
		t.Helper()
		natstest.Eventually(t, fmt.Sprintf("the API answering %d", want), func() bool { return status(token) == want })
	}
	if got := status(ann); got != http.StatusOK {
		t.Fatalf("ann gets %d", got)
	}
	bob, _, err := peopleRun(t, "add", "bob", "--token", "--people", file)
	if err != nil {
		t.Fatal(err)
	}
	if got := status(bob); got != http.StatusUnauthorized && got != http.StatusOK {
		t.Fatalf("bob gets %d", got)
	}
	waitStatus(bob, http.StatusOK)
	if _, _, err := peopleRun(t, "remove", "ann", "--people", file); err != nil {
		t.Fatal(err)
	}
	waitStatus(ann, http.StatusUnauthorized)
}

// serve reads an auth file as a directory of people, and says how to
// move it to one.
func TestServeSaysHowToMoveAnAuthFileToADirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	auth := filepath.Join(dir, "callers.yaml")
	if _, err := authRun(t, "add", "sam", "--role", "supervisor", "--auth-file", auth); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	out, errOut := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", filepath.Join(dir, "data"), "--lazy-fsync",
			"--log-format", "json", "--log-level", "warn", "--metrics", "", "--http", "127.0.0.1:0", "--auth-file", auth}, out, errOut)
	}()
	natstest.Eventually(t, "serve announcing its HTTP API", func() bool { return strings.Contains(out.String(), "HTTP API on ") })
	natstest.Eventually(t, "serve saying how to move the auth file", func() bool {
		return strings.Contains(errOut.String(), "--auth-file is read as a directory of people; move to --people FILE")
	})
	if want := "interlock people import --auth-file " + auth + " > people.yaml"; !strings.Contains(errOut.String(), want) {
		t.Errorf("serve's warning does not say %q:\n%s", want, errOut.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve returned %v after Ctrl-C", err)
	}
}

// TestWithADirectoryNoOneDecidesAsAPersonOverNATSWithoutTheirCredentials
// checks that, with a directory of people in force, the embedded server's
// clients on loopback, who authenticate as nobody, decide no approval: not
// typing a supervisor's name nor another's (Ray holds only support), not on
// the role's subject either; the run still waits, and a supervisor decides
// it through a surface that authenticates her (tested with the HTTP API).
func TestWithADirectoryNoOneDecidesAsAPersonOverNATSWithoutTheirCredentials(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "people.yaml")
	if _, _, err := peopleRun(t, "add", "ann@example.com", "--role", "supervisor", "--people", file); err != nil {
		t.Fatal(err)
	}
	if _, _, err := peopleRun(t, "add", "ray@example.com", "--role", "support", "--token", "--people", file); err != nil {
		t.Fatal(err)
	}
	url := serveForTest(t, "--people", file)
	if out, _, err := run(t, url, "start", "refund", "--run", "r-cli", "orderId=o-1", "amount=9000", "last4=4821"); err != nil || !strings.Contains(out, "waiting") {
		t.Fatalf("start: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"--as", "ray@example.com"},
		{"--as", "ann@example.com"},
		{"--approver", "ann@example.com", "--role", "supervisor"},
	} {
		_, errOut, err := run(t, url, append([]string{"answer", "refund", "r-cli", "--approve"}, args...)...)
		if codeOf(err) != exitRefused || !strings.Contains(errOut, "refused (forbidden)") || !strings.Contains(errOut, "decided only by someone the deployment authenticates") {
			t.Fatalf("answer --approve %v: exit %d (%v) %q, want refused forbidden", args, codeOf(err), err, errOut)
		}
	}
	out, _, err := run(t, url, "show", "refund", "r-cli", "--json")
	var doc map[string]any
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || doc["status"] != "waiting" {
		t.Fatalf("after the answers over NATS: %v\n%s", err, out)
	}
}

// TestServeReadAndCancelRolesLetOperatorsReadAndCancelAnyRun: with a
// directory in force, serve --read-role and --cancel-role let the
// holders of those roles read an agent's ask and cancel a run another
// started, which a token holder with no say in them may not; a role that
// is no role is bad usage.
func TestServeReadAndCancelRolesLetOperatorsReadAndCancelAnyRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "people.yaml")
	token := map[string]string{}
	for name, role := range map[string]string{"agent-a": "", "ray": "support", "ops": "ops"} {
		args := []string{"add", name, "--token", "--people", file}
		if role != "" {
			args = append(args, "--role", role)
		}
		tok, _, err := peopleRun(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		token[name] = strings.TrimSpace(tok)
	}
	var stdout bytes.Buffer
	err := Run(t.Context(), []string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", filepath.Join(dir, "bad"), "--lazy-fsync",
		"--metrics", "", "--log-level", "error", "--people", file, "--cancel-role", "ops,no such role"}, &stdout, &bytes.Buffer{})
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), "--cancel-role") {
		t.Fatalf("serve --cancel-role with a bad role: %v (exit %d)", err, codeOf(err))
	}

	url := apiURL.FindString(serveHint(t, filepath.Join(dir, "data"), "--http", "127.0.0.1:0", "--people", file, "--read-role", "ops", "--cancel-role", "ops"))
	base := strings.TrimSuffix(url, "/v1/interrupts")
	if base == "" {
		t.Fatal("serve's hint names no URL")
	}
	call := func(who, method, path, body string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token[who])
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := call("agent-a", "POST", "/v1/asks", `{"askId":"ask-1","interrupt":{"kind":"approval","action":"send_contract","approverRole":"legal"}}`); got != http.StatusAccepted {
		t.Fatalf("agent-a asking: %d", got)
	}
	for who, want := range map[string]int{"ray": http.StatusForbidden, "ops": http.StatusOK, "agent-a": http.StatusOK} {
		if got := call(who, "GET", "/v1/runs/ask/ask-1", ""); got != want {
			t.Errorf("%s reading agent-a's ask: %d, want %d", who, got, want)
		}
	}
	if got := call("ray", "POST", "/v1/runs/ask/ask-1/cancel", `{"reason":"mine now"}`); got != http.StatusForbidden {
		t.Errorf("ray cancelling agent-a's ask: %d, want 403", got)
	}
	if got := call("ops", "POST", "/v1/runs/ask/ask-1/cancel", `{"reason":"not needed"}`); got != http.StatusAccepted {
		t.Errorf("ops cancelling agent-a's ask: %d, want 202", got)
	}
}

// A directory of people given once with --people stays in the
// configuration bucket when the flag is dropped: serve says so at start,
// and how to go back; interlock people clear deletes it, and serve,
// started again, serves the local user.
func TestADirectoryLeftInTheBucketIsNamedAtStartAndPeopleClearGoesBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "people.yaml")
	if _, _, err := peopleRun(t, "add", "ann", "--role", "supervisor", "--token", "--people", file); err != nil {
		t.Fatal(err)
	}
	type served struct {
		out, errOut *lockedBuffer
		stop        func()
		api, nats   string
	}
	serve := func(extra ...string) served {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		s := served{out: &lockedBuffer{}, errOut: &lockedBuffer{}}
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, append([]string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", filepath.Join(dir, "data"), "--lazy-fsync",
				"--log-format", "json", "--log-level", "info", "--metrics", "", "--http", "127.0.0.1:0"}, extra...), s.out, s.errOut)
		}()
		s.stop = func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve returned %v after Ctrl-C", err)
			}
		}
		natstest.Eventually(t, "serve announcing its HTTP API", func() bool { return strings.Contains(s.out.String(), "HTTP API on ") })
		s.api = apiURL.FindString(s.out.String())
		s.nats = regexp.MustCompile(`nats://127\.0\.0\.1:\d+`).FindString(s.out.String())
		return s
	}
	status := func(url string) int {
		res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(url)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}

	first := serve("--people", file)
	if !strings.Contains(first.errOut.String(), "the directory in force is --people's file") {
		t.Errorf("serve with --people does not say its directory is in force:\n%s", first.errOut.String())
	}
	first.stop()

	second := serve()
	log := second.errOut.String()
	for _, want := range []string{"the directory in force is the configuration bucket's", "interlock people clear, then restart serve"} {
		if !strings.Contains(log, want) {
			t.Errorf("serve without --people, the bucket holding a directory, does not say %q:\n%s", want, log)
		}
	}
	if got := status(second.api); got != http.StatusUnauthorized {
		t.Errorf("the API without a token answers %d, want 401 while the bucket's directory is in force", got)
	}
	if _, _, err := peopleRun(t, "clear", "--data-dir", filepath.Join(dir, "data")); err == nil || !strings.Contains(err.Error(), "stop serve first") {
		t.Errorf("people clear while serve runs on the data dir: %v, want it refused, saying to stop serve", err)
	}
	if _, _, err := peopleRun(t, "clear", "--nats-url", second.nats); err == nil || !strings.Contains(err.Error(), "administrator") {
		t.Errorf("people clear as an anonymous client: %v, want it refused, saying who may", err)
	}
	second.stop()
	out, _, err := peopleRun(t, "clear", "--data-dir", filepath.Join(dir, "data"))
	if err != nil || !strings.Contains(out, "Deleted the directory of people") {
		t.Fatalf("people clear: %v\n%s", err, out)
	}

	third := serve()
	if !strings.Contains(third.errOut.String(), "no directory of people: every caller of the HTTP API and the inbox is the local user") {
		t.Errorf("serve after people clear does not say it serves the local user:\n%s", third.errOut.String())
	}
	if got := status(third.api); got != http.StatusOK {
		t.Errorf("the API without a token answers %d after people clear, want 200: the local user", got)
	}
	third.stop()
	if out, _, err := peopleRun(t, "clear", "--data-dir", filepath.Join(dir, "data")); err != nil || !strings.Contains(out, "nothing to clear") {
		t.Errorf("people clear again: %v\n%s", err, out)
	}
}
