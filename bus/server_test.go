package bus_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/wire"
	"github.com/rs/zerolog"
)

func TestSecondServerOnADataDirIsRefusedNamingThePID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := bus.StartServer(t.Context(), bus.ServerConfig{DataDir: dir, Port: -1, LazyFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bus.StartServer(t.Context(), bus.ServerConfig{DataDir: dir, Port: -1, LazyFsync: true})
	if err == nil || !strings.Contains(err.Error(), "PID "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("second server on %s: %v, want a refusal naming PID %d", dir, err, os.Getpid())
	}
	first.Shutdown()
	first.Shutdown() // twice is safe
	again, err := bus.StartServer(t.Context(), bus.ServerConfig{DataDir: dir, Port: -1, LazyFsync: true})
	if err != nil {
		t.Fatalf("a server after the first stopped: %v", err)
	}
	again.Shutdown()
	if _, err := os.Stat(filepath.Join(dir, bus.LockFile)); err != nil {
		t.Errorf("lock file: %v", err)
	}
}

func TestServerOnABusyPortFailsAtOnce(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	start := time.Now()
	_, err = bus.StartServer(t.Context(), bus.ServerConfig{DataDir: t.TempDir(), Port: port, LazyFsync: true})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("cannot listen on 127.0.0.1:%d", port)) || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("err = %v, want a refusal naming the address and --listen", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing took %s", d)
	}
}

// writeConf writes a nats-server configuration file.
func writeConf(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServerRefusesToListenBeyondLoopbackWithoutAuth(t *testing.T) {
	t.Parallel()
	noAuth := writeConf(t, "max_payload: 2MB\n")
	withAuth := writeConf(t, `authorization { users = [ {user: workers, password: "s3cret-workers"}, {user: agent, password: "s3cret-agent"} ] }`)
	openNoAuthUser := writeConf(t, `authorization { users = [ {user: workers, password: "w"}, {user: anyone, password: "a"} ] }
no_auth_user: anyone`)
	cases := []struct {
		name       string
		cfg        bus.ServerConfig
		wantErr    bool
		wantErrHas string
	}{
		{name: "loopback by default", cfg: bus.ServerConfig{}},
		{name: "all interfaces, default identities", cfg: bus.ServerConfig{Host: "0.0.0.0"}, wantErr: true, wantErrHas: "--nats-config"},
		{name: "a name below localhost, default identities", cfg: bus.ServerConfig{Host: "app.localhost"}, wantErr: true, wantErrHas: "--insecure-no-auth"},
		{name: "all interfaces, insecure", cfg: bus.ServerConfig{Host: "0.0.0.0", InsecureNoAuth: true}},
		{name: "file without auth", cfg: bus.ServerConfig{Host: "0.0.0.0", ConfigFile: noAuth}, wantErr: true, wantErrHas: "deploy/nats-server.conf"},
		{name: "file with an all-powerful no_auth_user", cfg: bus.ServerConfig{Host: "::", ConfigFile: openNoAuthUser, WorkersPassword: "w"}, wantErr: true, wantErrHas: "--insecure-no-auth"},
		{name: "file with auth", cfg: bus.ServerConfig{Host: "0.0.0.0", ConfigFile: withAuth, WorkersPassword: "s3cret-workers"}},
		{name: "file with auth, no password for the workers", cfg: bus.ServerConfig{ConfigFile: withAuth}, wantErr: true, wantErrHas: "INTERLOCK_WORKERS_PASSWORD"},
		{name: "bad file", cfg: bus.ServerConfig{ConfigFile: filepath.Join(t.TempDir(), "missing.conf")}, wantErr: true, wantErrHas: "missing.conf"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			cfg.DataDir, cfg.Port, cfg.LazyFsync = t.TempDir(), -1, true
			srv, err := bus.StartServer(t.Context(), cfg)
			if tc.wantErr {
				if err == nil {
					srv.Shutdown()
					t.Fatal("started, want a refusal")
				}
				if !strings.HasPrefix(err.Error(), "bus: ") || !strings.Contains(err.Error(), tc.wantErrHas) {
					t.Errorf("err %q does not say %q", err, tc.wantErrHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown()
			// The workers' identity works, in process.
			nc, _, err := wire.Connect(t.Context(), srv.WorkerConn())
			if err != nil {
				t.Fatalf("workers: %v", err)
			}
			nc.Close()
		})
	}
}

func TestServerWithAConfigFileMergesInterlocksSettings(t *testing.T) {
	t.Parallel()
	conf := writeConf(t, `server_name: from-file
listen: 127.0.0.1:-1
jetstream { store_dir: /nonexistent/elsewhere, sync_interval: 2m }
authorization { users = [ {user: w, password: "pw-of-w"}, {user: reader, password: "r", permissions: {publish: "$JS.API.INFO", subscribe: "_INBOX.>"}} ] }
`)
	dir := t.TempDir()
	srv, err := bus.StartServer(t.Context(), bus.ServerConfig{DataDir: dir, ConfigFile: conf, WorkersUser: "w", WorkersPassword: "pw-of-w", InsecureSharedAccount: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	opts := srv.NATS().JetStreamConfig()
	if opts == nil || opts.StoreDir != filepath.Join(dir, "jetstream") || !opts.SyncAlways {
		t.Errorf("JetStream config %+v, want the data dir and sync always", opts)
	}
	if srv.NATS().Name() != "from-file" {
		t.Errorf("server name %q, want the file's", srv.NATS().Name())
	}
	nc, _, err := wire.Connect(t.Context(), srv.WorkerConn())
	if err != nil {
		t.Fatalf("workers as w: %v", err)
	}
	nc.Close()
	if nc, _, err := wire.Connect(t.Context(), wire.ConnConfig{URL: srv.ClientURL()}); err == nil {
		nc.Close()
		t.Error("a client without credentials connected to a server whose file requires them")
	}
	if nc, _, err := wire.Connect(t.Context(), wire.ConnConfig{URL: srv.ClientURL(), User: "reader", Password: "r"}); err != nil {
		t.Errorf("the file's user reader: %v", err)
	} else {
		nc.Close()
	}
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	good := "9f3c2a7be1d04f86a5c3e2b17d9084f6c1e2a3b4d5f60718293a4b5c6d7e8f90"
	cases := []struct {
		name, text string
		wantErr    string
	}{
		{name: "hex", text: good},
		{name: "hex with a newline", text: good + "\n"},
		{name: "base64", text: "nzwqe+HQT4alw+KxfZCE9sHio7TV9gcYKTpLXG1+j5A="},
		{name: "base64 url, unpadded", text: "nzwqe-HQT4alw-KxfZCE9sHio7TV9gcYKTpLXG1-j5A"},
		{name: "empty", text: " \n", wantErr: "empty"},
		{name: "placeholder", text: "<replace with: openssl rand -hex 32>", wantErr: "placeholder"},
		{name: "old placeholder", text: "replace-with-64-hex-characters-from-openssl-rand-hex-32-0000000", wantErr: "placeholder"},
		{name: "short hex", text: good[:62], wantErr: "31 bytes"},
		{name: "not an encoding", text: "correct horse battery staple, correct horse battery staple!", wantErr: "neither hex nor base64"},
		{name: "repeated character", text: strings.Repeat("a", 64), wantErr: "pattern of 1"},
		{name: "short pattern", text: strings.Repeat("deadbeef", 8), wantErr: "pattern of 4"},
		{name: "long pattern", text: strings.Repeat("0f1e2d3c4b5a69788796a5b4c3d2e1f0", 2), wantErr: "pattern of 16"},
		{name: "counting", text: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", wantErr: "counting"},
		{name: "few byte values", text: "00000000000000000000000000000000000000000000000000000000000000ff", wantErr: "distinct"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := bus.ParseSecret(tc.text)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseSecret accepted %q", tc.text)
				}
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "openssl rand -hex 32") || !strings.Contains(err.Error(), "hex or base64") {
					t.Errorf("error %q does not say %q, the encodings and how to make one", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSecret: %v", err)
			}
			if string(got) != strings.TrimSpace(tc.text) {
				t.Errorf("key %q, want the trimmed text", got)
			}
		})
	}
}

func TestGeneratedSecretsAreAccepted(t *testing.T) {
	t.Parallel()
	for range 200 {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{hex.EncodeToString(b), base64.StdEncoding.EncodeToString(b)} {
			if _, err := bus.ParseSecret(text); err != nil {
				t.Fatalf("ParseSecret(%q): %v", text, err)
			}
		}
	}
}

// TestDefaultIdentitiesStartWithoutAPasswordWarning: the workers' password
// is held as a bcrypt hash and the anonymous user has none by design, so a
// newcomer's first start warns of nothing.
func TestDefaultIdentitiesStartWithoutAPasswordWarning(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	log := zerolog.New(&buf).Level(zerolog.WarnLevel)
	srv, err := bus.StartServer(t.Context(), bus.ServerConfig{DataDir: t.TempDir(), Port: -1, LazyFsync: true, Logger: bus.ServerLogger(log)})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	if out := buf.String(); strings.Contains(out, "assword") || strings.Contains(out, "\"level\":\"error\"") {
		t.Fatalf("the embedded server warned: %s", out)
	}
}
