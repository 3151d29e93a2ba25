package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Defaults of [ServerConfig].
const (
	DefaultHost    = "127.0.0.1"
	DefaultPort    = 4222
	DefaultDataDir = "interlock-data"
	// DefaultReadyTimeout bounds how long Start waits for the server.
	DefaultReadyTimeout = 15 * time.Second
)

// ServerConfig configures the embedded NATS server.
type ServerConfig struct {
	// DataDir holds JetStream's files. Defaults to DefaultDataDir.
	DataDir string
	// Host to listen on. Defaults to DefaultHost (loopback only).
	Host string
	// Port to listen on; -1 picks a free port. Defaults to DefaultPort.
	Port int
	// LazyFsync lets JetStream acknowledge writes before they reach the
	// disk, syncing every two minutes as nats-server does by default. It is
	// faster, but a power cut (not a process crash) can lose acknowledged
	// checkpoints and decisions. Defaults to false: fsync before every
	// acknowledgement.
	LazyFsync bool
	// Name is the server's name. Defaults to "interlock".
	Name string
	// Logger, if set, receives the server's own log lines.
	Logger server.Logger
}

// Server is an embedded nats-server with JetStream on file storage.
type Server struct {
	ns  *server.Server
	dir string
}

// StartServer starts an embedded server and waits until it accepts clients.
func StartServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	dir := cmp.Or(cfg.DataDir, DefaultDataDir)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("bus: data dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("bus: creating data dir %q: %w", abs, err)
	}
	port := cfg.Port
	if port == 0 {
		port = DefaultPort
	}
	opts := &server.Options{
		ServerName: cmp.Or(cfg.Name, "interlock"),
		Host:       cmp.Or(cfg.Host, DefaultHost),
		Port:       port,
		JetStream:  true,
		StoreDir:   abs,
		NoSigs:     true,
		SyncAlways: !cfg.LazyFsync,
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: configuring embedded NATS server: %w", err)
	}
	if cfg.Logger != nil {
		ns.SetLoggerV2(cfg.Logger, false, false, false)
	}
	go ns.Start()
	deadline := DefaultReadyTimeout
	if d, ok := ctx.Deadline(); ok {
		deadline = time.Until(d)
	}
	if !ns.ReadyForConnections(deadline) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("bus: embedded NATS server did not start on %s:%d within %s (is the port in use? try --listen with another port)", opts.Host, port, deadline)
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, errors.New("bus: embedded NATS server started without JetStream")
	}
	return &Server{ns: ns, dir: abs}, nil
}

// ClientURL is the URL clients connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// DataDir is the absolute path of the server's data.
func (s *Server) DataDir() string { return s.dir }

// NATS returns the embedded server, for in-process connections.
func (s *Server) NATS() *server.Server { return s.ns }

// Shutdown stops the server and waits for it to finish. It is safe to call twice.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}
