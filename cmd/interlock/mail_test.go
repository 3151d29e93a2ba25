package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServeRefusesBadMailFlagsAsBadUsageNamingTheFix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	smtp := filepath.Join(dir, "smtp.yaml")
	if err := os.WriteFile(smtp, []byte("host: smtp.example.com\ntls: none\nfrom: interlock@example.com\npublicURL: https://interlock.example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"--try-mail with --smtp-config", []string{"--try-mail", "--smtp-config", smtp}, "leave out --smtp-config (and INTERLOCK_SMTP_HOST) to try, or --try-mail to send"},
		{"--try-mail without the HTTP API", []string{"--try-mail", "--http", ""}, "--try-mail links to the decision page of the HTTP API"},
		{"a configuration without TLS beyond loopback", []string{"--smtp-config", smtp}, "--smtp-config: tls none sends mail and its decision links in clear to smtp.example.com"},
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
			if !strings.Contains(printed.String(), tc.want) {
				t.Errorf("serve %v says %q, not %q", tc.args, printed.String(), tc.want)
			}
		})
	}
}
