package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
)

// served is what `interlock serve` said once serving: the fields of its
// "Interlock is serving" log line, and the lines it printed (read on).
type served struct {
	log    map[string]any
	before []map[string]any // the lines logged before it
	lines  chan string
}

// serveLogged runs `interlock serve` on free ports with extra flags, and
// returns once it logs that it serves.
func serveLogged(t *testing.T, extra ...string) served {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	done := make(chan error, 1)
	args := []string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", dir, "--lazy-fsync", "--log-format", "json", "--log-level", "info", "--metrics", "127.0.0.1:0"}
	go func() {
		done <- Run(ctx, append(args, extra...), outW, errW)
		_ = outW.Close()
		_ = errW.Close()
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
	s := served{lines: make(chan string, 16)}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			select {
			case s.lines <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, outR)
	}()
	sc := bufio.NewScanner(errR)
	for sc.Scan() {
		var fields map[string]any
		if err := json.Unmarshal(sc.Bytes(), &fields); err != nil {
			t.Fatalf("serve logged a line that is not JSON: %q", sc.Text())
		}
		if msg, _ := fields["message"].(string); strings.HasPrefix(msg, "Interlock is serving") {
			s.log = fields
			break
		}
		s.before = append(s.before, fields)
	}
	if s.log == nil {
		t.Fatalf("serve stopped before serving: %v", sc.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, errR) }()
	return s
}

// line waits for a printed line that starts with prefix.
func (s served) line(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("serve printed no line starting %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("serve printed no line starting %q within 10 s", prefix)
		}
	}
}

func TestServeServesMetricsAndHealth(t *testing.T) {
	s := serveLogged(t)
	url, _ := s.log["metrics"].(string)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/metrics") {
		t.Fatalf("serve's log names no metrics endpoint: %v", s.log)
	}
	if l := s.line(t, "Metrics on "); !strings.HasPrefix(l, "Metrics on "+url+" ") {
		t.Errorf("serve printed %q, want the metrics endpoint %s", l, url)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for path, want := range map[string]string{"/metrics": "interlock_ready 1", "/healthz": "ok", "/readyz": `{"ready":true}`} {
		resp, err := c.Get(strings.TrimSuffix(url, "/metrics") + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %v, want 200 with %q:\n%.300s", path, resp.StatusCode, err, want, body)
		}
	}
}

func TestServeWithoutMetrics(t *testing.T) {
	s := serveLogged(t, "--metrics", "")
	if url, ok := s.log["metrics"]; ok {
		t.Fatalf("--metrics \"\" still serves metrics on %v", url)
	}
}

// TestServeNamesItsAuditKey checks that serve logs and prints the key it
// signs audit records with: the one derived from its secret.
func TestServeNamesItsAuditKey(t *testing.T) {
	secret := "8f4e2a6c1b3d5f7091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70a"
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := bus.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	want, err := engine.AuditKeyOf(raw)
	if err != nil {
		t.Fatal(err)
	}
	s := serveLogged(t, "--secret-file", file)
	if s.log["audit_kid"] != want.ID || s.log["audit_key"] != want.String() {
		t.Fatalf("serve logged audit key %v (%v), want %s (%s)", s.log["audit_kid"], s.log["audit_key"], want.ID, want)
	}
	l := s.line(t, "Audit records are signed")
	if wantLine := "Audit records are signed with key " + want.ID + ", Ed25519 public key " + want.String() + "; pin it with: interlock audit verify --key " + want.String() + " <flow> <run>"; l != wantLine {
		t.Fatalf("serve printed %q, want %q", l, wantLine)
	}
}
