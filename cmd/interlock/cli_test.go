package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/wire"
)

// TestCommandLineMistakesAreUsageErrors checks that mistakes are found
// before any connection is made (the URL leads nowhere, which would exit
// 5), and that they are said in plain words.
func TestCommandLineMistakesAreUsageErrors(t *testing.T) {
	t.Setenv("INTERLOCK_NATS_URL", "nats://127.0.0.1:1")
	cases := []struct {
		args    []string
		wantMsg string
	}{
		{nil, "no command given"},
		{[]string{"--json"}, "no command given"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"start"}, "start needs a flow name: interlock start <flow>"},
		{[]string{"start", "--run", "r-1"}, "start needs a flow name"},
		{[]string{"start", "book.ing"}, `flow name "book.ing" has '.'`},
		{[]string{"start", "booking", "--run", "a b"}, `--run: run name "a b" has ' '`},
		{[]string{"start", "booking", "--state", "[1]"}, "--state must be a JSON object"},
		{[]string{"answer"}, "answer needs a flow and a run: interlock answer <flow> <run> field=value ..."},
		{[]string{"answer", "booking"}, "answer needs a flow and a run: interlock answer <flow> <run> field=value ..."},
		{[]string{"answer", "booking", "r-1"}, "nothing to send: give field=value answers or --select ID"},
		{[]string{"answer", "booking", "r-1", "just-a-word"}, `argument "just-a-word" is not field=value or field:=JSON`},
		{[]string{"answer", "booking", "r-1", "n:={bad json"}, "the value after := must be JSON"},
		{[]string{"answer", "booking", "r 1", "a=b"}, `run name "r 1" has ' '`},
		{[]string{"answer", "refund", "r-1", "--approve", "--reject"}, "give one decision, not --approve and --reject: --approve, --reject, --respond --message TEXT or --edit field=value"},
		{[]string{"answer", "refund", "r-1", "--reject", "--edit", "amount=4"}, "give one decision, not --reject and --edit"},
		{[]string{"answer", "refund", "r-1", "--approve", "last4=1234"}, "--approve decides an approval, while field=value answers, --answers and --select answer a question or choice"},
		{[]string{"answer", "refund", "r-1", "--reject", "--select", "x"}, "--reject decides an approval"},
		{[]string{"answer", "refund", "r-1", "--edit", "amount"}, `--edit "amount" is not field=value or field:=JSON`},
		{[]string{"answer", "refund", "r-1", "--edit", "amount:=four"}, "the value after := must be JSON"},
		{[]string{"answer", "refund", "r-1", "--respond"}, "--respond needs --message TEXT, the answer for whoever asked"},
		{[]string{"answer", "refund", "r-1", "--approve", "--message", "hi"}, "--message goes with --respond"},
		{[]string{"answer", "refund", "r-1", "--approve", "--respond", "--message", "hi"}, "give one decision, not --approve and --respond"},
		{[]string{"assign"}, "assign needs an op, a flow and a run: interlock assign claim|release|delegate <flow> <run>"},
		{[]string{"assign", "claim", "refund"}, "assign needs an op, a flow and a run"},
		{[]string{"assign", "claim", "refund", "r-1", "x"}, `assign takes an op, a flow and a run, but was also given "x"`},
		{[]string{"assign", "grab", "refund", "r-1"}, `"grab" is not claim, release or delegate`},
		{[]string{"assign", "delegate", "refund", "r-1"}, "delegate needs --to: a person, or a role as role:NAME"},
		{[]string{"assign", "claim", "refund", "r-1", "--to", "bob"}, "claim takes none"},
		{[]string{"assign", "release", "refund", "r 1"}, `run name "r 1" has ' '`},
		{[]string{"audit"}, "audit needs a flow and a run: interlock audit <flow> <run>"},
		{[]string{"audit", "refund"}, "audit needs a flow and a run"},
		{[]string{"audit", "refund", "r-1", "x"}, `audit takes a flow and a run, but was also given "x"`},
		{[]string{"audit", "verify", "refund"}, "audit verify needs a flow and a run: interlock audit verify <flow> <run>"},
		{[]string{"audit", "verify", "refund", "r-1", "x"}, `audit verify takes a flow and a run, but was also given "x"`},
		{[]string{"audit", "verify", "refund", "r 1"}, `run name "r 1" has ' '`},
		{[]string{"audit", "refund", "r-1", "--nope"}, "audit: flag provided but not defined: -nope"},
		{[]string{"audit", "key", "x"}, `audit key takes no arguments, but was given "x": interlock audit key`},
		{[]string{"audit", "verify", "refund", "r-1", "--key", "k"}, `audit: invalid value "k" for flag -key: audit key "k" is not an Ed25519 public key`},
		{[]string{"show"}, "show needs a flow and a run: interlock show <flow> <run>"},
		{[]string{"show", "booking"}, "show needs a flow and a run"},
		{[]string{"show", "booking", "r-1", "extra"}, `show takes a flow and a run, but was also given "extra"`},
		{[]string{"show", "booking", "r-1", "--nope"}, "show: flag provided but not defined: -nope"},
		{[]string{"cancel", "booking"}, "cancel needs a flow and a run"},
		{[]string{"cancel", "booking", "r-1", "x", "y"}, `cancel takes a flow and a run, but was also given "x" "y"`},
		{[]string{"pending", "booking"}, `pending takes no arguments, but was given "booking"; to list one flow's runs: interlock pending --flow booking`},
		{[]string{"show", "booking", "r-1", "--prefix", "Bad"}, "--prefix: wire: prefix"},
		{[]string{"show", "booking", "r-1", "--wait", "soon"}, "invalid value"},
		{[]string{"serve", "--listen", "nowhere"}, "--listen"},
		{[]string{"serve", "--log-level", "loud"}, "--log-level"},
		{[]string{"serve", "--metrics", "nowhere"}, `--metrics "nowhere"`},
		{[]string{"serve", "--metrics", "0.0.0.0:9090"}, "--metrics 0.0.0.0:9090 listens beyond loopback"},
		{[]string{"serve", "--metrics", ":9090"}, "--metrics :9090 listens beyond loopback"},
		{[]string{"serve", "--http", "0.0.0.0:8080"}, `--http 0.0.0.0:8080 listens beyond loopback without --auth-file`},
		{[]string{"serve", "--http", "nowhere"}, `--http "nowhere": address nowhere: missing port in address; use host:port such as 127.0.0.1:8080`},
		{[]string{"serve", "--http", "", "--auth-file", "callers.yaml"}, `--auth-file is for the HTTP API, which --http "" turns off`},
		{[]string{"serve", "--auth-file", "/nonexistent/callers.yaml"}, "--auth-file: "},
		{[]string{"serve", "--public-url", "interlock.example.com"}, `--public-url: "interlock.example.com" is not an absolute http or https URL; use one such as https://interlock.example.com`},
		{[]string{"serve", "--public-url", "https://interlock.example.com/?x=1"}, "has a query or a fragment"},
		{[]string{"serve", "--http", "", "--public-url", "https://interlock.example.com"}, `--public-url is the HTTP API's, which --http "" turns off`},
		{[]string{"serve", "--slack-config", "/nonexistent/slack.yaml"}, "--slack-config: "},
		{[]string{"serve", "--egress-allow", "hooks.internal,https://crm.internal/hooks"}, `--egress-allow: "https://crm.internal/hooks" is a URL; give its host alone, such as crm.internal`},
		{[]string{"auth"}, "use: interlock auth add <name> --role ROLE --auth-file FILE, interlock auth list --auth-file FILE, or interlock auth remove <name> --auth-file FILE"},
		{[]string{"auth", "rm", "sam"}, `unknown auth command "rm"`},
		{[]string{"auth", "list", "sam", "--auth-file", "x.yaml"}, `auth list takes no name, but was given "sam"`},
		{[]string{"auth", "list"}, "auth list needs --auth-file FILE"},
		{[]string{"auth", "remove", "--auth-file", "x.yaml"}, "auth remove takes one name, got 0"},
		{[]string{"auth", "remove", "sam"}, "auth remove needs --auth-file FILE"},
		{[]string{"auth", "remove", "sam", "--role", "supervisor", "--auth-file", "x.yaml"}, "--role is for auth add"},
		{[]string{"auth", "add", "sam"}, "auth add needs --auth-file FILE"},
		{[]string{"auth", "add", "--auth-file", "x.yaml"}, "auth add takes one name, got 0"},
		{[]string{"auth", "add", "sam bob", "--auth-file", "x.yaml"}, `name "sam bob" has ' '`},
		{[]string{"auth", "add", "sam", "--role", "a.b", "--auth-file", "x.yaml"}, `--role: role "a.b" has '.'`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(t.Context(), tc.args, &stdout, &stderr)
			if code := codeOf(err); code != exitUsage {
				t.Fatalf("exit %d (%v), want %d", code, err, exitUsage)
			}
			var printed bytes.Buffer
			exitCode(err, &printed)
			first, _, _ := strings.Cut(printed.String(), "\n")
			if !strings.HasPrefix(first, "interlock: ") || !strings.Contains(first, tc.wantMsg) {
				t.Errorf("first line %q does not say %q", first, tc.wantMsg)
			}
			if !strings.Contains(printed.String(), "interlock help") {
				t.Errorf("no pointer to the help:\n%s", printed.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("a mistake printed on stdout: %q", stdout.String())
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		err       error
		want      int
		wantPrint string // "" when nothing is printed
	}{
		{"done", nil, exitOK, ""},
		{"usage", usageError{msg: "start needs a flow name", hint: "Run \"interlock help start\" for its usage.\n"}, exitUsage,
			"interlock: start needs a flow name\nRun \"interlock help start\" for its usage.\n"},
		{"refused, reported", reported(exitRefused), exitRefused, ""},
		{"asked again, reported", reported(exitReasked), exitReasked, ""},
		{"failed run, reported", reported(exitFailed), exitFailed, ""},
		{"no such run", fmt.Errorf("%w: there is no run r-1 of flow booking", client.ErrNotFound), exitRefused,
			"interlock: client: run not found: there is no run r-1 of flow booking\n"},
		{"no worker answered", fmt.Errorf("%w: queued", client.ErrNoAnswer), exitUnreachable,
			"interlock: client: no answer from Interlock in time: queued\n"},
		{"unreachable", &exitError{code: exitUnreachable, err: errors.New("wire: connecting")}, exitUnreachable, "interlock: wire: connecting\n"},
		{"anything else", errors.New("disk full"), exitFailed, "interlock: disk full\n"},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		if got := exitCode(tc.err, &out); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
		if out.String() != tc.wantPrint {
			t.Errorf("%s: printed %q, want %q", tc.name, out.String(), tc.wantPrint)
		}
	}
}

func TestHelpGoesToStdout(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"serve", "start", "answer", "show", "cancel", "assign", "pending", "runs", "reannounce", "audit", "mcp"} {
		for _, args := range [][]string{{"help", cmd}, {cmd, "--help"}, {cmd, "-h"}, {"--json", cmd, "-h"}} {
			var stdout, stderr bytes.Buffer
			if err := Run(t.Context(), args, &stdout, &stderr); err != nil {
				t.Errorf("%q: %v", args, err)
			}
			if !strings.Contains(stdout.String(), "Usage: interlock "+cmd) || !strings.Contains(stdout.String(), "Environment:") || stderr.Len() != 0 {
				t.Errorf("%q: stdout %q, stderr %q", args, stdout.String(), stderr.String())
			}
		}
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"help", "help"}} {
		var stdout, stderr bytes.Buffer
		if err := Run(t.Context(), args, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "Exit codes:") || stderr.Len() != 0 {
			t.Errorf("%q: %v, stdout %q, stderr %q", args, err, stdout.String(), stderr.String())
		}
	}
}

// TestEveryEnvironmentVariableIsInTheHelp reads the command's source for
// the environment variables each file reads, and checks that the help of
// every command of that file names them.
func TestEveryEnvironmentVariableIsInTheHelp(t *testing.T) {
	t.Parallel()
	commands := map[string][]string{
		"serve.go":       {"serve"},
		"http.go":        {"serve"},
		"slack.go":       {"serve"},
		"people.go":      {"serve", "people"},
		"peopleclear.go": {"people clear"},
		"ask.go":         {"ask"},
		"away.go":        {"away"},
		"webhooks.go":    {"serve"},
		"tracing.go":     {"serve"},
		"clientflags.go": {"start", "answer", "show", "cancel", "assign", "pending", "runs", "reannounce", "audit"},
		"natscontext.go": {"start", "answer", "show", "cancel", "assign", "pending", "runs", "reannounce", "audit", "mcp"},
		"mcp.go":         {"mcp"},
		"mcpgateway.go":  {"mcp gateway"},
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	env := regexp.MustCompile(`(?:envOr|Getenv|LookupEnv)\("([A-Z0-9_]+)"`)
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		vars := env.FindAllStringSubmatch(string(src), -1)
		if len(vars) > 0 && commands[f] == nil {
			t.Errorf("%s reads %v; add the file's commands to this test", f, vars)
		}
		for _, v := range vars {
			seen++
			for _, cmd := range commands[f] {
				var stdout bytes.Buffer
				_ = Run(t.Context(), append([]string{"help"}, strings.Fields(cmd)...), &stdout, &stdout)
				if !strings.Contains(stdout.String(), v[1]) {
					t.Errorf("%s reads %s, but `interlock help %s` does not name it", f, v[1], cmd)
				}
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d environment variable reads; is the pattern still right?", seen)
	}
}

func writeContext(t *testing.T, dir, name, doc string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "nats", "context"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nats", "context", name+".json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestWhereClientCommandsConnect checks the order: flag, INTERLOCK_NATS_URL,
// NATS_URL, the natscli context, the default.
func TestWhereClientCommandsConnect(t *testing.T) {
	cfgDir := t.TempDir()
	home, _ := os.UserHomeDir()
	writeContext(t, cfgDir, "prod", `{"description":"prod","url":"nats://ctx:4222","creds":"~/prod.creds","user":"ann","password":"pw","ca":"/etc/ca.pem","jetstream_domain":""}`)
	writeContext(t, cfgDir, "nkey", `{"url":"nats://ctx:4222","nkey":"/k.nk"}`)
	writeContext(t, cfgDir, "broken", `{"url":`)
	pathCtx := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(pathCtx, []byte(`{"url":"nats://file:4222"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		env       map[string]string
		args      []string
		wantURL   string
		wantCreds string
		wantUser  string
		wantErr   string
	}{
		{name: "default", wantURL: wire.DefaultURL},
		{name: "NATS_URL", env: map[string]string{"NATS_URL": "nats://std:4222"}, wantURL: "nats://std:4222"},
		{name: "INTERLOCK_NATS_URL wins over NATS_URL", env: map[string]string{"NATS_URL": "nats://std:4222", "INTERLOCK_NATS_URL": "nats://il:4222"}, wantURL: "nats://il:4222"},
		{name: "the flag wins", env: map[string]string{"INTERLOCK_NATS_URL": "nats://il:4222"}, args: []string{"--nats-url", "nats://flag:4222"}, wantURL: "nats://flag:4222"},
		{name: "NATS_CREDS", env: map[string]string{"NATS_CREDS": "/a.creds"}, wantURL: wire.DefaultURL, wantCreds: "/a.creds"},
		{name: "INTERLOCK_CREDS is serve's, not the client's", env: map[string]string{"INTERLOCK_CREDS": "/worker.creds"}, wantURL: wire.DefaultURL},
		{name: "INTERLOCK_SERVE_NATS_URL is serve's, not the client's", env: map[string]string{"INTERLOCK_SERVE_NATS_URL": "nats://serve:4222"}, wantURL: wire.DefaultURL},
		{name: "a context", args: []string{"--context", "prod"}, wantURL: "nats://ctx:4222", wantCreds: filepath.Join(home, "prod.creds"), wantUser: "ann"},
		{name: "NATS_CONTEXT", env: map[string]string{"NATS_CONTEXT": "prod"}, wantURL: "nats://ctx:4222", wantCreds: filepath.Join(home, "prod.creds"), wantUser: "ann"},
		{name: "the environment wins over the context", env: map[string]string{"NATS_CONTEXT": "prod", "NATS_URL": "nats://std:4222", "NATS_CREDS": "/a.creds"},
			wantURL: "nats://std:4222", wantCreds: "/a.creds", wantUser: "ann"},
		{name: "a context file", args: []string{"--context", pathCtx}, wantURL: "nats://file:4222"},
		{name: "no such context", args: []string{"--context", "nosuch"}, wantErr: `reading the natscli context "nosuch"`},
		{name: "an nkey context", args: []string{"--context", "nkey"}, wantErr: "nkey, which interlock does not support"},
		{name: "a broken context", args: []string{"--context", "broken"}, wantErr: "not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"NATS_URL", "INTERLOCK_NATS_URL", "NATS_CREDS", "NATS_CONTEXT", "INTERLOCK_CREDS", "INTERLOCK_SERVE_NATS_URL"} {
				t.Setenv(k, tc.env[k])
			}
			t.Setenv("XDG_CONFIG_HOME", cfgDir)
			fs := newFlagSet("show", "show", &bytes.Buffer{})
			cf := &clientFlags{}
			cf.register(fs)
			if _, err := parse(fs, tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := cf.connConfig()
			if tc.wantErr != "" {
				if codeOf(err) != exitUsage || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a usage error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.URL != tc.wantURL || cfg.CredsFile != tc.wantCreds || cfg.User != tc.wantUser {
				t.Errorf("url %q creds %q user %q; want %q %q %q", cfg.URL, cfg.CredsFile, cfg.User, tc.wantURL, tc.wantCreds, tc.wantUser)
			}
		})
	}
}

// TestAnswerOutcomesAndExitCodes walks the outcomes of `answer` against a
// real server: re-asks, refusals, unknown runs and flows, and repeats of
// an idempotency key.
func TestAnswerOutcomesAndExitCodes(t *testing.T) {
	url := serveForTest(t)

	if _, _, err := run(t, url, "start", "booking", "--run", "r-x"); err != nil {
		t.Fatal(err)
	}
	// A rejected answer with --json: the JSON is printed and the exit code
	// says it was asked again.
	out, _, err := run(t, url, "answer", "booking", "r-x", "email=nope", "--json")
	var ev map[string]any
	if codeOf(err) != exitReasked || json.Unmarshal([]byte(out), &ev) != nil || ev["type"] != "io.interlock.run.interrupted" {
		t.Fatalf("rejected answer: exit %d (%v)\n%s", codeOf(err), err, out)
	}
	// Flags before the command.
	var stdout, stderr bytes.Buffer
	err = Run(t.Context(), []string{"--json", "--nats-url", url, "show", "booking", "r-x"}, &stdout, &stderr)
	var doc map[string]any
	if err != nil || json.Unmarshal(stdout.Bytes(), &doc) != nil || doc["status"] != "waiting" || doc["checkpoint"] == nil {
		t.Fatalf("--json before show: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	// Partial answers are asked again too: ask_contact asks name and phone.
	out, _, err = run(t, url, "answer", "booking", "r-x", "email=ann@example.com", "--idempotency-key", "k-1")
	if err != nil || !strings.Contains(out, "waiting at ask_contact") {
		t.Fatalf("good email: %v\n%s", err, out)
	}
	// The same answer again, with the same key: already applied, at once.
	began := time.Now()
	out, _, err = run(t, url, "answer", "booking", "r-x", "email=ann@example.com", "--idempotency-key", "k-1", "--wait", "60s")
	if err != nil || !strings.Contains(out, `already applied: an answer with idempotency key "k-1" was applied before`) ||
		!strings.Contains(out, "waiting at node ask_contact") {
		t.Fatalf("repeated key: %v\n%s", err, out)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("the repeat took %s to report; it should not wait for an event that never comes", took)
	}
	out, _, err = run(t, url, "answer", "booking", "r-x", "email=ann@example.com", "--idempotency-key", "k-1", "--json")
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || doc["alreadyApplied"] != true {
		t.Fatalf("repeated key, --json: %v\n%s", err, out)
	}
	out, _, err = run(t, url, "answer", "booking", "r-x", "name=Ann")
	if codeOf(err) != exitReasked || !strings.Contains(out, "(phone)") || strings.Contains(out, "(name)") {
		t.Fatalf("partial answer: exit %d (%v)\n%s", codeOf(err), err, out)
	}
	out, _, err = run(t, url, "answer", "booking", "r-x", "phone=555")
	if err != nil || !strings.Contains(out, "waiting at ask_level") {
		t.Fatalf("phone: exit %d (%v)\n%s", codeOf(err), err, out)
	}
	// A refused answer: a wrong token.
	_, errOut, err := run(t, url, "answer", "booking", "r-x", "level=beginner", "--token", "wrong")
	if codeOf(err) != exitRefused || !strings.Contains(errOut, "refused (token_mismatch)") {
		t.Fatalf("wrong token: exit %d (%v) %q", codeOf(err), err, errOut)
	}
	out, _, err = run(t, url, "answer", "booking", "r-x", "level=beginner", "--token", "wrong", "--json")
	if codeOf(err) != exitRefused || json.Unmarshal([]byte(out), &ev) != nil || ev["type"] != "io.interlock.resume.refused" {
		t.Fatalf("wrong token, --json: exit %d (%v)\n%s", codeOf(err), err, out)
	}

	// Unknown runs and flows, and runs that no longer wait.
	_, _, err = run(t, url, "answer", "booking", "r-never", "email=a@b.c")
	if codeOf(err) != exitRefused || !strings.Contains(err.Error(), "there is no run r-never of flow booking") {
		t.Fatalf("unknown run: exit %d: %v", codeOf(err), err)
	}
	_, _, err = run(t, url, "answer", "bookng", "r-x", "email=a@b.c")
	if codeOf(err) != exitRefused || !strings.Contains(err.Error(), "no run of a flow named bookng at all") {
		t.Fatalf("unknown flow: exit %d: %v", codeOf(err), err)
	}
	_, _, err = run(t, url, "show", "booking", "r-never")
	if codeOf(err) != exitRefused || !strings.Contains(err.Error(), "there is no run r-never of flow booking") {
		t.Fatalf("show of an unknown run: exit %d: %v", codeOf(err), err)
	}
	if out, _, err := run(t, url, "cancel", "booking", "r-x"); err != nil {
		t.Fatalf("cancel: %v\n%s", err, out)
	}
	_, _, err = run(t, url, "answer", "booking", "r-x", "level=beginner")
	if codeOf(err) != exitRefused || !strings.Contains(err.Error(), "run r-x of flow booking is cancelled, not waiting for an answer") {
		t.Fatalf("answer to a cancelled run: exit %d: %v", codeOf(err), err)
	}
}
