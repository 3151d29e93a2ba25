//go:build unix

// Package typescript_test runs the TypeScript client's tests (node --test)
// against a real Interlock service: the example flows and gate rules on an
// embedded NATS server, with the HTTP API on a loopback port.
package typescript_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/internal/tooltest"
)

// TestMain checks that the service leaves no goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// minNode is the oldest Node.js major version the client supports
// (package.json's engines).
const minNode = 20

// nodeWait bounds the build and the test run.
const nodeWait = 5 * time.Minute

// testDist is where the test builds the package, beside its dist.
const testDist = "dist-test"

// callerToken is the bearer token of the API's one caller, who holds every
// role the example gate rules name.
const callerToken = "ts-client-test-token-0123456789abcdef"

// TestTypeScriptClient builds the client with tsc and runs its tests with
// node --test against a real service, over NATS and over HTTP; every test
// file must pass.
func TestTypeScriptClient(t *testing.T) {
	node, npm := requireNode(t)
	rules, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, GateRules: rules})
	sum := sha256.Sum256([]byte(callerToken))
	authFile := filepath.Join(t.TempDir(), "callers.yaml")
	callers := fmt.Sprintf("- name: ts-test\n  roles: [supervisor, retention_lead, legal]\n  tokenSha256: %s\n", hex.EncodeToString(sum[:]))
	if err := os.WriteFile(authFile, []byte(callers), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := httpapi.LoadAuth(authFile)
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0", Auth: auth, Links: svc.Links(), Uses: svc.LinkUses()})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(t.Context(), api); err != nil {
		t.Fatal(err)
	}

	// A deployment whose workers have stopped: its streams take commands,
	// and nobody answers them.
	idle := natstest.StartServer(t, "")
	if err := natstest.StartWith(t, idle, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret}).Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), nodeWait)
	defer cancel()
	// The tests are built apart from dist, which examples/node runs: a
	// build here never rewrites a file a test there is reading.
	run(ctx, t, npm, "run", "build", "--", "--outDir", testDist)
	env := append(os.Environ(),
		"INTERLOCK_NATS_URL="+srv.ClientURL(),
		"INTERLOCK_IDLE_NATS_URL="+idle.ClientURL(),
		"INTERLOCK_HTTP_URL=http://"+api.Addr(),
		"INTERLOCK_TOKEN="+callerToken,
		"INTERLOCK_TEST_WAIT_MS="+strconv.Itoa(int(natstest.Wait/time.Millisecond)))
	// TS_TESTS narrows the run to one test file while working on it
	// (TS_TESTS=ai runs ai.test.js).
	pattern := testDist + "/test/*.test.js"
	if only := os.Getenv("TS_TESTS"); only != "" {
		pattern = testDist + "/test/" + only + ".test.js"
	}
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("npm run build wrote no test files %s (%v)", pattern, err)
	}
	args := append([]string{"--test", "--test-concurrency=1", "--test-reporter=spec"}, files...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = natstest.Wait
	err = cmd.Run()
	t.Logf("node --test:\n%s", out.String())
	if err != nil {
		t.Fatalf("node --test failed (%v): see its output above", err)
	}
	if !regexp.MustCompile(`(?m)^ℹ fail 0$`).Match(out.Bytes()) || !regexp.MustCompile(`(?m)^ℹ pass [1-9]`).Match(out.Bytes()) {
		t.Fatalf("node --test passed no test or failed one; its summary is not `pass N, fail 0`")
	}
}

// run runs npm with args in the package's folder, failing the test with
// its output when it fails.
func run(ctx context.Context, t *testing.T, npm string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, npm, args...)
	cmd.WaitDelay = natstest.Wait
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// requireNode returns the paths of node and npm, when they and the
// package's node_modules are there; otherwise it skips the test, or fails
// it in CI.
func requireNode(t *testing.T) (node, npm string) {
	t.Helper()
	const how = "install Node.js 20 or later (Debian: apt-get install nodejs npm) and run `npm ci` in clients/typescript"
	node = tooltest.Node(t, minNode, how)
	npm, err := exec.LookPath("npm")
	if err != nil {
		tooltest.Missing(t, "npm is not on PATH", how)
	}
	for _, dep := range []string{"typescript", "@nats-io/jetstream", "json-schema-to-typescript"} {
		if _, err := os.Stat(filepath.Join("node_modules", dep)); err != nil {
			tooltest.Missing(t, "clients/typescript/node_modules/"+dep+" is missing", how)
		}
	}
	return node, npm
}
