package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/docs"
)

func TestSchemaPrintsTheBuiltInContract(t *testing.T) {
	t.Parallel()
	run := func(args ...string) (string, error) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := Run(t.Context(), append([]string{"schema"}, args...), &stdout, &stderr)
		if stderr.Len() != 0 {
			t.Errorf("schema %q wrote to stderr: %q", args, stderr.String())
		}
		return stdout.String(), err
	}

	list, err := run()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range docs.Index() {
		if !strings.Contains(list, "\n"+e.Name+" ") {
			t.Errorf("the list lacks %s:\n%s", e.Name, list)
		}
	}
	if !strings.Contains(list, "io.interlock.run.interrupted") || !strings.Contains(list, "interlock_runs {flow}.{run}") {
		t.Errorf("the list says no type or bucket:\n%s", list)
	}

	names, err := run("--names")
	if err != nil || len(strings.Fields(names)) != len(docs.Index()) {
		t.Errorf("--names printed %q, %v", names, err)
	}

	for _, name := range []string{"interrupted", "interrupted.json"} {
		out, err := run(name)
		want, _ := docs.Schema("interrupted")
		if err != nil || out != string(want) {
			t.Errorf("schema %s: %v, printed %.80q", name, err, out)
		}
		var s struct {
			ID string `json:"$id"`
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil || s.ID != docs.Base()+"interrupted.json" {
			t.Errorf("schema %s printed $id %q (%v)", name, s.ID, err)
		}
	}

	for _, args := range [][]string{{"--asyncapi"}, {"asyncapi"}} {
		out, err := run(args...)
		if err != nil || out != string(docs.AsyncAPI()) || !strings.HasPrefix(out, "asyncapi: 3.0.0\n") {
			t.Errorf("schema %q: %v, printed %.80q", args, err, out)
		}
	}

	var stdout, stderr bytes.Buffer
	if err := Run(t.Context(), []string{"--json", "schema"}, &stdout, &stderr); err != nil || stdout.String() != string(docs.IndexJSON()) {
		t.Errorf("--json schema: %v, printed %.80q", err, stdout.String())
	}

	for _, tc := range []struct {
		args    []string
		wantMsg string
	}{
		{[]string{"nope"}, `no schema "nope"; the schemas are start, resume,`},
		{[]string{"start", "resume"}, `schema takes one name, but was given ["start" "resume"]`},
		{[]string{"--asyncapi", "start"}, "give a NAME, --asyncapi, --names or --json, not several"},
		{[]string{"--bogus"}, "schema: flag provided but not defined: -bogus"},
	} {
		_, err := run(tc.args...)
		if codeOf(err) != exitUsage || err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
			t.Errorf("schema %q: %v (exit %d), want a usage error saying %q", tc.args, err, codeOf(err), tc.wantMsg)
		}
	}

	help, err := run("--help")
	if err != nil || !strings.Contains(help, "Usage: interlock schema") || !strings.Contains(help, "--asyncapi") {
		t.Errorf("schema --help: %v, printed %q", err, help)
	}
}

// TestBinaryCarriesNoContractTestHelpers: the contract's test helpers
// (internal/schematest) stay out of the interlock binary. The engine's
// validator of approvals' argsSchema and questions' schema
// (santhosh-tekuri/jsonschema) is part of it, as is the MCP SDK's own
// schema package (google/jsonschema-go) for `interlock mcp`.
func TestBinaryCarriesNoContractTestHelpers(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, dep := range deps {
		if strings.HasSuffix(dep, "/schematest") || strings.HasSuffix(dep, "/natstest") {
			t.Errorf("the interlock binary depends on %s", dep)
		}
	}
}
