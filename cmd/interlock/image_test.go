package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/wire"
)

// nonroot is the uid and gid of the distroless nonroot user the image of
// deploy/Dockerfile runs as.
const nonroot = 65532

// TestImageServesAsNonrootWithTheDeployConfig does what the image of
// deploy/Dockerfile does, without Docker: it builds the binary the same way,
// and runs `serve --data-dir DIR --nats-config deploy/nats-server.conf` as
// uid 65532 in a directory that user owns. The server must accept an
// authenticated TLS client with JetStream, and stop cleanly on SIGTERM.
func TestImageServesAsNonrootWithTheDeployConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run serve as uid 65532")
	}
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir, err := os.MkdirTemp("", "interlock-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "interlock")
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tlsFiles := natstest.TLS(t)
	files := map[string]string{
		"../../deploy/nats-server.conf":    "nats-server.conf",
		"../../deploy/interlock-auth.conf": "interlock-auth.conf",
		tlsFiles.Cert:                      "tls.crt",
		tlsFiles.Key:                       "tls.key",
		tlsFiles.CA:                        "ca.crt",
	}
	for from, to := range files {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	owned := []string{"", "interlock"}
	for _, to := range files {
		owned = append(owned, to)
	}
	for _, name := range owned {
		if err := os.Chown(filepath.Join(dir, name), nonroot, nonroot); err != nil {
			t.Fatal(err)
		}
	}
	password := "4f1c9a0e7b3d52a8c6e1f0b9d7a3c5e2"
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	data := filepath.Join(dir, "data")
	cmd := exec.CommandContext(ctx, bin, "serve", "--data-dir", data, "--nats-config", filepath.Join(dir, "nats-server.conf"),
		"--listen", "127.0.0.1:-1", "--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--log-format", "json", "--log-level", "warn")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nonroot, Gid: nonroot}}
	cmd.Env = []string{
		"INTERLOCK_SECRET=9f3c2a7be1d04f86a5c3e2b17d9084f6c1e2a3b4d5f60718293a4b5c6d7e8f90",
		"INTERLOCK_TLS_CERT=" + filepath.Join(dir, "tls.crt"),
		"INTERLOCK_TLS_KEY=" + filepath.Join(dir, "tls.key"),
		"INTERLOCK_TLS_CA=" + filepath.Join(dir, "ca.crt"),
		"INTERLOCK_METRICS=127.0.0.1:0",
	}
	for _, u := range []string{"WORKERS", "AGENT", "BOT", "OPERATOR", "ADMIN"} {
		cmd.Env = append(cmd.Env, "INTERLOCK_"+u+"_PASSWORD="+password+strings.ToLower(u))
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cancel()
		<-done
		t.Fatalf("serve printed nothing: %v\n%s", err, stderr.String())
	}
	_, rest, _ := strings.Cut(line, " on ")
	url, _, _ := strings.Cut(rest, " ")
	nc, js, err := wire.Connect(t.Context(), wire.ConnConfig{URL: url, User: "agent", Password: password + "agent", TLSCA: tlsFiles.CA, InboxPrefix: "_INBOX_agent"})
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	if _, err := js.AccountInfo(t.Context()); err != nil {
		t.Errorf("agent sees no JetStream: %v", err)
	}
	nc.Close()
	st, err := os.Stat(filepath.Join(data, "interlock.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Uid != nonroot {
		t.Errorf("the lock file is not owned by uid %d", nonroot)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not stop within 40 s of SIGTERM")
	}
}
