package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesAListenerBeyondLoopbackWithoutAuthenticationAsBadUsage:
// every listener that would let anyone who reaches it act without
// authentication is refused before anything serves, with the same exit
// code (2, bad usage), in words that name the flag and the fix, never a
// Go field or package.
func TestServeRefusesAListenerBeyondLoopbackWithoutAuthenticationAsBadUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"--http", []string{"--http", "0.0.0.0:8080"},
			[]string{"--http 0.0.0.0:8080 listens beyond loopback without --auth-file", "--auth-file FILE", "interlock auth add", "127.0.0.1"}},
		{"--http on every interface", []string{"--http", ":8080"},
			[]string{"--http :8080 listens beyond loopback without --auth-file"}},
		{"--listen", []string{"--listen", "0.0.0.0:-1"},
			[]string{"--listen 0.0.0.0:-1 listens beyond loopback without authentication", "--nats-config", "127.0.0.1", "--insecure-no-auth"}},
		{"--cluster-listen", []string{"--cluster-name", "c", "--cluster-listen", "0.0.0.0:-1", "--routes", "nats://127.0.0.1:6222"},
			[]string{"--cluster-listen 0.0.0.0:-1 listens beyond loopback without route authentication", "--nats-config", "--insecure-cluster-no-auth"}},
		{"--metrics", []string{"--metrics", "0.0.0.0:9090"},
			[]string{"--metrics 0.0.0.0:9090 listens beyond loopback", "--metrics-insecure-public"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", t.TempDir(), "--lazy-fsync",
				"--http", "127.0.0.1:0", "--metrics", "", "--log-level", "error"}, tc.args...)
			var stdout, stderr bytes.Buffer
			err := Run(t.Context(), args, &stdout, &stderr)
			if code := codeOf(err); code != exitUsage {
				t.Fatalf("serve %v: exit %d (%v), want %d", tc.args, code, err, exitUsage)
			}
			var printed bytes.Buffer
			exitCode(err, &printed)
			msg := printed.String()
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("serve %v says %q, which does not say %q", tc.args, msg, want)
				}
			}
			for _, goName := range []string{"Config.", "httpapi:", "bus:", "interlock: interlock"} {
				if strings.Contains(msg, goName) {
					t.Errorf("serve %v says %q, naming %q: say it in the command line's words", tc.args, msg, goName)
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("serve %v printed %q on stdout before refusing", tc.args, stdout.String())
			}
		})
	}
}

// TestServeRefusesANATSConfigListeningBeyondLoopbackWithoutUsersAsBadUsage:
// the same refusal when the address comes from --nats-config's listen.
func TestServeRefusesANATSConfigListeningBeyondLoopbackWithoutUsersAsBadUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte("listen: 0.0.0.0:-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Run(t.Context(), []string{"serve", "--nats-config", conf, "--data-dir", filepath.Join(dir, "data"), "--lazy-fsync",
		"--http", "", "--metrics", "", "--log-level", "error"}, &bytes.Buffer{}, &bytes.Buffer{})
	if code := codeOf(err); code != exitUsage || !strings.Contains(err.Error(), "--nats-config "+conf+" listens beyond loopback without authentication") {
		t.Fatalf("serve --nats-config with a public listen and no users: exit %d, %v; want %d naming --nats-config", code, err, exitUsage)
	}
}

// TestTheExitCodeOfAnUnauthenticatedListenerIsDocumented: the usage text,
// serve's help and the exit-code table of docs/operations.md say that
// such a listener is refused with exit code 2, naming every flag.
func TestTheExitCodeOfAnUnauthenticatedListenerIsDocumented(t *testing.T) {
	t.Parallel()
	var help bytes.Buffer
	if err := Run(t.Context(), []string{"help", "serve"}, &help, &help); err != nil {
		t.Fatal(err)
	}
	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(ops), "### Exit codes")
	row := ""
	for line := range strings.SplitSeq(table, "\n") {
		if strings.HasPrefix(line, "| 2 |") {
			row = line
		}
	}
	_, usageRow, _ := strings.Cut(usage, "\n  2  ")
	usageRow, _, _ = strings.Cut(usageRow, "\n  3  ")
	_, helpRow, _ := strings.Cut(help.String(), "Exit codes:")
	for where, text := range map[string]string{"the usage text's code 2": usageRow, "interlock help serve": helpRow, "docs/operations.md's row of code 2": row} {
		for _, want := range []string{"beyond loopback without authentication", "--listen", "--http", "--metrics", "--cluster-listen"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not say %q: %q", where, want, text)
			}
		}
	}
}
