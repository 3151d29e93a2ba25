package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/interlockhq/interlock/bus"
)

// Where a measurement's nats-server runs (the --server flag).
const (
	// serverAuto runs the server in a child process for the paused check
	// and in this process for the throughput measurements.
	serverAuto = "auto"
	// serverProcess runs the server in a child process, so that the memory
	// figures of this process are the worker's and the clients'.
	serverProcess = "process"
	// serverInProcess runs the server in this process.
	serverInProcess = "inprocess"
)

// Environment of the server child process: the bench binary run again
// with serverEnv set serves nats-server and nothing else.
const (
	// serverEnv is the child's data directory.
	serverEnv = "INTERLOCK_BENCH_SERVER"
	// serverFsyncEnv is the child's fsync mode: "always" or "lazy".
	serverFsyncEnv = "INTERLOCK_BENCH_SERVER_FSYNC"
)

// natsServer is the nats-server of one measurement, in this process or in
// a child process, with its own data directory.
type natsServer struct {
	// url is the server's client URL.
	url string
	// where is serverProcess or serverInProcess.
	where string
	// pid is the child's process id; 0 when the server runs in this process.
	pid int

	stopOnce sync.Once
	stopErr  error
	shutdown func() error
	dir      string
}

// startNATS starts a nats-server with fsync mode m in a fresh temporary
// directory, in this process or (where is serverProcess) in a child
// process. The child's standard error goes to stderr. stop shuts the
// server down, waits for the child, and removes the directory.
func startNATS(ctx context.Context, where string, m mode, stderr io.Writer) (_ *natsServer, err error) {
	dir, err := os.MkdirTemp("", "interlock-bench-")
	if err != nil {
		return nil, fmt.Errorf("creating data directory: %w", err)
	}
	defer func() {
		if err != nil {
			if rerr := os.RemoveAll(dir); rerr != nil {
				err = errors.Join(err, fmt.Errorf("removing data directory %s: %w", dir, rerr))
			}
		}
	}()
	s := &natsServer{where: where, dir: dir}
	if where == serverProcess {
		p, err := startServerProcess(ctx, dir, m, stderr)
		if err != nil {
			return nil, err
		}
		s.url, s.pid, s.shutdown = p.url, p.cmd.Process.Pid, p.stop
		return s, nil
	}
	srv, err := bus.StartServer(ctx, bus.ServerConfig{DataDir: dir, Port: -1, LazyFsync: m.lazy, Name: "bench"})
	if err != nil {
		return nil, err
	}
	s.url = workersURL(srv)
	s.shutdown = func() error { srv.Shutdown(); return nil }
	return s, nil
}

// stop shuts the server down and removes its data directory. Stopping
// twice is safe.
func (s *natsServer) stop() error {
	s.stopOnce.Do(func() {
		err := s.shutdown()
		if rerr := os.RemoveAll(s.dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("removing data directory %s: %w", s.dir, rerr))
		}
		s.stopErr = err
	})
	return s.stopErr
}

// describe says where the server runs, for progress lines.
func (s *natsServer) describe() string {
	if s.pid != 0 {
		return fmt.Sprintf("in child process %d at %s", s.pid, redacted(s.url))
	}
	return "in this process at " + redacted(s.url)
}

// memory reads the child's resident set now and its peak so far (VmRSS
// and VmHWM), in bytes; ok is false when the server runs in this process
// or they cannot be read.
func (s *natsServer) memory() (rss, hwm uint64, ok bool) {
	if s == nil || s.pid == 0 {
		return 0, 0, false
	}
	return processRSS(s.pid)
}

// serverProc is a nats-server in a child process: the bench binary run
// again with serverEnv set. It stops when its standard input closes, so it
// does not outlive this process.
type serverProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

// startServerProcess starts the child and reads its client URL, the first
// line it prints.
func startServerProcess(ctx context.Context, dir string, m mode, stderr io.Writer) (*serverProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the bench binary to run the server: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), serverEnv+"="+dir, serverFsyncEnv+"="+m.name)
	cmd.Stderr = stderr
	// Its own process group: a terminal's ^C reaches only this process,
	// which drains and then stops the child.
	cmd.SysProcAttr = childProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the server process: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the server process: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the server process %s: %w", exe, err)
	}
	p := &serverProc{cmd: cmd, stdin: stdin}
	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	go func() {
		s, err := bufio.NewReader(stdout).ReadString('\n')
		got <- line{s, err}
	}()
	timer := time.NewTimer(bus.DefaultReadyTimeout)
	defer timer.Stop()
	var (
		l    line
		read bool
	)
	select {
	case l = <-got:
		read = true
	case <-timer.C:
		l.err = fmt.Errorf("no client URL within %s", bus.DefaultReadyTimeout)
	case <-ctx.Done():
		l.err = ctx.Err()
	}
	if l.err == nil {
		p.url = strings.TrimSpace(l.s)
		if !strings.HasPrefix(p.url, "nats://") {
			l.err = fmt.Errorf("first line %q is not a client URL", truncate([]byte(l.s), 200))
		}
	}
	if l.err != nil {
		// Kill closes the child's end of stdout, so the reader returns.
		_ = cmd.Process.Kill()
		if !read {
			<-got
		}
		werr := cmd.Wait()
		return nil, errors.Join(fmt.Errorf("starting the server process: %w", l.err), exitError(werr))
	}
	return p, nil
}

// childStopWait bounds how long the child takes to shut down once its
// standard input is closed.
const childStopWait = 30 * time.Second

// stop closes the child's standard input, which shuts its server down, and
// waits for it to exit, killing it if it takes longer than childStopWait.
// Call it once.
func (p *serverProc) stop() error {
	_ = p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	timer := time.NewTimer(childStopWait)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("server process %d: %w", p.cmd.Process.Pid, exitError(err))
		}
		return nil
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("server process %d did not stop within %s; killed it (%w)", p.cmd.Process.Pid, childStopWait, exitError(<-done))
	}
}

// exitError describes how a child that failed ended.
func exitError(err error) error {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("server process ended: %s", exit.ProcessState)
	}
	return err
}

// serverMain is the whole of the server child process: it serves
// nats-server on a free port with data in dir and fsync mode fsync, prints
// the client URL as the first line of stdout, and returns the process's
// exit code once stdin closes or the process is signalled.
func serverMain(dir, fsync string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, dir, fsync, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench: server process: %v\n", err)
		return 1
	}
	return 0
}

// serve runs a server until stdin closes or ctx is done.
func serve(ctx context.Context, dir, fsync string, stdin io.Reader, stdout io.Writer) error {
	if dir == "" {
		return fmt.Errorf("%s is empty; it must name the data directory", serverEnv)
	}
	if fsync != "always" && fsync != "lazy" {
		return fmt.Errorf("%s is %q; use always or lazy", serverFsyncEnv, fsync)
	}
	srv, err := bus.StartServer(ctx, bus.ServerConfig{DataDir: dir, Port: -1, LazyFsync: fsync == "lazy", Name: "bench"})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	if _, err := fmt.Fprintln(stdout, workersURL(srv)); err != nil {
		return fmt.Errorf("writing the client URL: %w", err)
	}
	// The reader returns when the parent closes stdin or exits. If a
	// signal comes first it stays blocked in read(2) on a blocking pipe,
	// which nothing can interrupt, and ends with the process, which exits
	// as soon as the server has shut down.
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	return nil
}

// workersURL is srv's URL with the credentials of its workers' identity:
// the benchmark's clients create streams and consumers as Interlock does.
func workersURL(srv *bus.Server) string {
	w := srv.WorkerConn()
	u, err := url.Parse(w.URL)
	if err != nil {
		return w.URL
	}
	u.User = url.UserPassword(w.User, w.Password)
	return u.String()
}

// redacted is u without its password, for progress lines.
func redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Redacted()
}
