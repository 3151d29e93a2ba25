//go:build unix

// Package python_test runs the Python client's tests (python3 -m unittest
// in clients/python) against a real Interlock service and HTTP API.
package python_test

import (
	"context"
	"io/fs"
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
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/internal/tooltest"
)

// TestMain checks that the service leaves no goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// minPython is the oldest Python the client supports (pyproject.toml's
// requires-python).
const minPython = 9

// rulesFile holds the gate rules the Python tests expect.
const rulesFile = "tests/gate-rules.yaml"

// Callers of the API, as the Python tests know them.
const (
	agentName    = "py-agent"
	approverName = "sam"
)

// unittestWait bounds the whole Python test run.
const unittestWait = 4 * time.Minute

// TestPythonClient serves the test gate rules over the HTTP API, with an
// auth file of an agent (no roles) and an approver (supervisor, legal),
// and a second API of a service without gate rules, and runs `python3 -m unittest discover` in clients/python against it:
// every test must run and pass, none may be skipped.
func TestPythonClient(t *testing.T) {
	python := requirePython(t)
	statSources(t)
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := gate.Parse(b, rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	authPath := filepath.Join(t.TempDir(), "auth.yaml")
	agentToken, err := httpapi.AddCaller(authPath, agentName, nil)
	if err != nil {
		t.Fatal(err)
	}
	approverToken, err := httpapi.AddCaller(authPath, approverName, []string{"supervisor", "legal"})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := httpapi.LoadAuth(authPath)
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, GateRules: rules})
	api, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0", Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(t.Context(), api); err != nil {
		t.Fatal(err)
	}

	// A second deployment, without gate rules and without an auth file.
	offSrv := natstest.StartServer(t, "")
	offSvc := natstest.StartWith(t, offSrv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret})
	offAPI, err := httpapi.New(offSvc, httpapi.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := offSvc.Attach(t.Context(), offAPI); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), unittestWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Env = append(os.Environ(),
		"INTERLOCK_URL=http://"+api.Addr(),
		"INTERLOCK_TOKEN="+agentToken,
		"INTERLOCK_TEST_AGENT="+agentName,
		"INTERLOCK_TEST_APPROVER="+approverName,
		"INTERLOCK_TEST_APPROVER_TOKEN="+approverToken,
		"INTERLOCK_TEST_GATE_OFF_URL=http://"+offAPI.Addr(),
		"INTERLOCK_TEST_REQUIRED=1",
		"PYTHONDONTWRITEBYTECODE=1",
	)
	cmd.WaitDelay = natstest.Wait
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^Ran (\d+) tests? in`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("python3 -m unittest printed no count of tests run:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n == 0 {
		t.Fatalf("python3 -m unittest found no tests:\n%s", out)
	}
	if strings.Contains(string(out), "skipped") {
		t.Fatalf("python3 -m unittest skipped tests against a running API:\n%s", out)
	}
	t.Logf("python3 -m unittest:\n%s", out)
}

// statSources looks at every file of the client and its tests, so that
// `go test` caches this test's result only as long as none changes.
func statSources(t *testing.T) {
	t.Helper()
	for _, dir := range []string{"interlock", "tests", "../testdata", "../../docs/schema", "../../docs/asks.md", "../../docs/protocol.md"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			_, err = os.Stat(path)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The schemas tests/test_payloads.py checks the types against.
	for _, f := range []string{"pyproject.toml", "build_backend.py", "README.md", "../../docs/schema/index.json", "../../httpapi/openapi.json"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
}

// requirePython returns the path of python3, when it is there and recent
// enough; otherwise it skips the test, or fails it in CI.
func requirePython(t *testing.T) string {
	t.Helper()
	return tooltest.Python(t, minPython, "install Python 3.9 or later (Debian: apt-get install python3)")
}
