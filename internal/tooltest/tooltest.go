// Package tooltest finds the tools beside Go that some tests drive
// (Node.js, python3): a test whose tool is missing, or too old, is
// skipped, and fails instead under CI=true, where .ci/run has installed
// it, saying what is missing and how to get it.
package tooltest

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// versionWait bounds running a tool for its version.
const versionWait = 30 * time.Second

// Missing skips t, or fails it under CI=true, saying what is missing and
// how to get it.
func Missing(t testing.TB, what, how string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: %s", what, how)
	}
	t.Skipf("%s: %s", what, how)
}

// Require returns the path of the command name, whose version (what
// versionArg prints, matched by version, whose first group is a number)
// is at least least; else Missing.
func Require(t testing.TB, name, versionArg string, version *regexp.Regexp, least int, how string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" is not on PATH", how)
	}
	ctx, cancel := context.WithTimeout(t.Context(), versionWait)
	defer cancel()
	v, err := exec.CommandContext(ctx, path, versionArg).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v", name, versionArg, err)
	}
	m := version.FindSubmatch(v)
	if m == nil {
		t.Fatalf("%s %s printed %q", name, versionArg, v)
	}
	if n, _ := strconv.Atoi(string(m[1])); n < least {
		Missing(t, name+" "+strings.TrimSpace(string(v))+" is too old", how)
	}
	return path
}

// Node returns the path of node, Node.js least or later; else Missing.
func Node(t testing.TB, least int, how string) string {
	t.Helper()
	return Require(t, "node", "--version", regexp.MustCompile(`^v(\d+)\.`), least, how)
}

// Python returns the path of python3, Python 3.least or later; else
// Missing.
func Python(t testing.TB, least int, how string) string {
	t.Helper()
	return Require(t, "python3", "--version", regexp.MustCompile(`^Python 3\.(\d+)\.`), least, how)
}
