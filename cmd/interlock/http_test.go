//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestTheCommandServeSuggestsWorksAsPrinted runs the command serve suggests on its
// HTTP API line, as printed, in a shell with real curl: it must list the
// pending interrupts (200 with items), with an auth file too, where it
// sends the token of a caller `interlock auth add` made, from $TOKEN.
func TestTheCommandServeSuggestsWorksAsPrinted(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := tool + " is not on PATH; .ci/run installs curl when it is missing"
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	for _, tc := range []struct {
		name string
		http string
		auth bool
	}{
		{"without an auth file", "127.0.0.1:0", false},
		{"with an auth file", "127.0.0.1:0", true},
		{"with an auth file, on every interface", "0.0.0.0:0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"--http", tc.http}
			token := ""
			if tc.auth {
				file := filepath.Join(dir, "callers.yaml")
				var out strings.Builder
				if err := Run(t.Context(), []string{"auth", "add", "sam", "--auth-file", file}, &out, io.Discard); err != nil {
					t.Fatal(err)
				}
				token = strings.TrimSpace(out.String())
				args = append(args, "--auth-file", file)
			}
			hint := serveHint(t, filepath.Join(dir, "data"), args...)
			cmd := exec.CommandContext(t.Context(), "bash", "-c", hint)
			cmd.Env = append(os.Environ(), "TOKEN="+token)
			out, err := cmd.Output()
			var page struct {
				Items []json.RawMessage `json:"items"`
			}
			if err != nil || json.Unmarshal(out, &page) != nil || page.Items == nil {
				t.Fatalf("serve suggests %q, which answers %v:\n%s", hint, err, out)
			}
		})
	}
}

// hintLine is serve's line about its HTTP API, with the command to try.
var hintLine = regexp.MustCompile(`^HTTP API on http://\S+ \(try(?:, [^:]+)?: (.+)\)\.$`)

// serveHint runs serve with args and returns the command its HTTP API
// line suggests; serve stops when the test ends.
func serveHint(t *testing.T, dataDir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, append([]string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", dataDir, "--lazy-fsync",
			"--log-format", "json", "--log-level", "warn", "--metrics", ""}, args...), pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v after Ctrl-C, want a clean stop", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30 s of Ctrl-C")
		}
	})
	rd := bufio.NewReader(pr)
	defer func() { go func() { _, _ = io.Copy(io.Discard, rd) }() }()
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("serve %v stopped before announcing its HTTP API: %v", args, err)
		}
		if strings.HasPrefix(line, "HTTP API on ") {
			m := hintLine.FindStringSubmatch(strings.TrimSpace(line))
			if m == nil {
				t.Fatalf("serve's HTTP API line suggests no command: %q", line)
			}
			return m[1]
		}
	}
}
