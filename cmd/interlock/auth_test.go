package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/httpapi"
)

// authRun runs `interlock auth ...` and returns its stdout.
func authRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut strings.Builder
	err := Run(t.Context(), append([]string{"auth"}, args...), &out, &errOut)
	return out.String(), err
}

// TestAuthListShowsNamesAndRolesNeverHashes: auth list prints every
// caller of the file with their roles, and neither a token nor a token's
// hash.
func TestAuthListShowsNamesAndRolesNeverHashes(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "callers.yaml")
	out, err := authRun(t, "list", "--auth-file", file)
	if err == nil || codeOf(err) != exitFailed || !strings.Contains(err.Error(), file) {
		t.Fatalf("auth list of no file: %v (exit %d), want exit %d naming the file", err, codeOf(err), exitFailed)
	}
	sam, err := authRun(t, "add", "sam@example.com", "--role", "supervisor", "--role", "legal", "--auth-file", file)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := authRun(t, "add", "bob", "--auth-file", file)
	if err != nil {
		t.Fatal(err)
	}
	out, err = authRun(t, "list", "--auth-file", file)
	if err != nil {
		t.Fatal(err)
	}
	want := "NAME             ROLES\nsam@example.com  supervisor, legal\nbob              -\n"
	if out != want {
		t.Errorf("auth list printed\n%s\nwant\n%s", out, want)
	}
	for _, token := range []string{strings.TrimSpace(sam), strings.TrimSpace(bob)} {
		if strings.Contains(out, token) || strings.Contains(out, httpapi.HashToken(token)) {
			t.Errorf("auth list shows a token or its hash:\n%s", out)
		}
	}
}

// TestAuthRemoveRevokesACallerAndKeepsTheRest: after auth remove, the
// caller's token authenticates no one, the other callers' tokens still
// do, the file's comments stay, and a name the file does not have is
// refused, listing those it has.
func TestAuthRemoveRevokesACallerAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "callers.yaml")
	tokens := map[string]string{}
	for _, name := range []string{"sam", "bob", "ann"} {
		out, err := authRun(t, "add", name, "--role", "supervisor", "--auth-file", file)
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = strings.TrimSpace(out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// A comment of the operator's, before bob's entry.
	commented := strings.Replace(string(b), "- name: bob\n", "# bob is the inbox bot\n- name: bob\n", 1)
	if err := os.WriteFile(file, []byte(commented), 0o600); err != nil {
		t.Fatal(err)
	}
	authenticates := func(name string) bool {
		t.Helper()
		auth, err := httpapi.LoadAuth(file)
		if err != nil {
			t.Fatalf("the file no longer loads: %v", err)
		}
		c, ok := auth.Authenticate(tokens[name])
		return ok && c.Name == name
	}

	out, err := authRun(t, "remove", "sam", "--auth-file", file)
	if err != nil || !strings.Contains(out, "Removed sam from "+file) {
		t.Fatalf("auth remove sam: %v\n%s", err, out)
	}
	if authenticates("sam") || !authenticates("bob") || !authenticates("ann") {
		t.Fatalf("after removing sam: sam %v, bob %v, ann %v; want only bob and ann", authenticates("sam"), authenticates("bob"), authenticates("ann"))
	}
	b, _ = os.ReadFile(file)
	for _, comment := range []string{"# Callers of Interlock's HTTP API", "# bob is the inbox bot\n- name: bob\n"} {
		if !strings.Contains(string(b), comment) {
			t.Errorf("the file lost %q:\n%s", comment, b)
		}
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("auth file mode = %v (%v), want 0600", fi.Mode(), err)
	}

	_, err = authRun(t, "remove", "sam", "--auth-file", file)
	if err == nil || codeOf(err) != exitFailed || !strings.Contains(err.Error(), `no caller named "sam"; it has bob, ann`) || strings.Contains(err.Error(), "httpapi:") {
		t.Fatalf("removing sam again: %v (exit %d)", err, codeOf(err))
	}
	for _, name := range []string{"bob", "ann"} {
		if _, err := authRun(t, "remove", name, "--auth-file", file); err != nil {
			t.Fatalf("auth remove %s: %v", name, err)
		}
	}
	if out, err := authRun(t, "list", "--auth-file", file); err != nil || !strings.Contains(out, "has no callers") {
		t.Fatalf("auth list of an emptied file: %v\n%s", err, out)
	}
	// The name is free again: the caller comes back with a new token.
	out, err = authRun(t, "add", "sam", "--role", "supervisor", "--auth-file", file)
	if err != nil {
		t.Fatal(err)
	}
	tokens["sam"] = strings.TrimSpace(out)
	if !authenticates("sam") {
		t.Fatal("sam, added again, does not authenticate")
	}
}
