package soak

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/wire"
)

// readyWait bounds how long a serve process takes to say it is serving: a
// cluster node waits for a quorum, and catches up after a restart.
const readyWait = 2 * time.Minute

// stopWait bounds a graceful stop of a serve process at the end: longer
// than serve's own bound on draining its work (30 s), and its shutdown
// after it.
const stopWait = 45 * time.Second

// servingLine is what serve prints on stdout once it serves.
const servingLine = "Interlock is serving"

// proc is one `interlock serve` process (or another of its commands),
// which can be killed and started again with the same arguments.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  string // file that collects its output, across restarts
	// ready begins the line the process prints once it serves: servingLine
	// when empty.
	ready string

	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd has been waited for
	serving time.Time     // when it last said it serves
}

// start starts the process and returns once it prints its ready line.
func (p *proc) start(ctx context.Context) error {
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("soak: %s: %w", p.name, err)
	}
	fmt.Fprintf(logf, "--- soak: starting %s at %s\n", p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stderr = logf
	cmd.SysProcAttr = procAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		_ = logf.Close()
		return fmt.Errorf("soak: %s: %w", p.name, err)
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("soak: starting %s: %w", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	ready := make(chan struct{})
	readyLine := cmp.Or(p.ready, servingLine)
	go func() {
		sc := bufio.NewScanner(out)
		seen := false
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if !seen && strings.HasPrefix(sc.Text(), readyLine) {
				seen = true
				close(ready)
			}
		}
		_ = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	timer := time.NewTimer(readyWait)
	defer timer.Stop()
	select {
	case <-ready:
		p.serving = time.Now()
		return nil
	case <-p.done:
		return fmt.Errorf("soak: %s ended before serving (%s); see %s", p.name, cmd.ProcessState, p.log)
	case <-timer.C:
		err = fmt.Errorf("soak: %s did not serve within %s; see %s", p.name, readyWait, p.log)
	case <-ctx.Done():
		err = ctx.Err()
	}
	_ = cmd.Process.Kill()
	<-p.done
	return err
}

// kill kills the process with SIGKILL and waits for it to be gone.
func (p *proc) kill() error {
	select {
	case <-p.done:
		return fmt.Errorf("soak: %s ended by itself (%s); see %s", p.name, p.cmd.ProcessState, p.log)
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("soak: killing %s: %w", p.name, err)
	}
	<-p.done
	return nil
}

// pause stops the process with SIGSTOP and, after d (or once ctx ends),
// continues it with SIGCONT: a machine that stalled, its sockets open.
func (p *proc) pause(ctx context.Context, d time.Duration) error {
	select {
	case <-p.done:
		return fmt.Errorf("soak: %s ended by itself (%s); see %s", p.name, p.cmd.ProcessState, p.log)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("soak: pausing %s: %w", p.name, err)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("soak: continuing %s: %w", p.name, err)
	}
	p.serving = time.Now()
	return nil
}

// stop stops the process as an operator would, with SIGTERM, and kills it
// if it has not stopped within stopWait.
func (p *proc) stop() error {
	if p.cmd == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopWait)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("soak: %s did not stop within %s of SIGTERM; killed it", p.name, stopWait)
	}
}

// deployment is the processes of one soak.
type deployment struct {
	// clientURL is where the agents connect: every client URL,
	// comma-separated.
	clientURL string
	// all are every process, in start order; victims those that are killed.
	all, victims []*proc
	// workersPassword is the password of the workers' user on the servers;
	// secret the deployment's resume-token secret (INTERLOCK_SECRET).
	workersPassword, secret string
	// clustered is set when the processes are the nodes of one cluster.
	clustered bool
	// network is ModeNetwork's network and worker, else nil.
	network *network
	// names are the names of Interlock's streams and buckets.
	names wire.Names
}

// deploy starts the processes of cfg.Mode, with data and logs under dir.
func deploy(ctx context.Context, cfg Config, dir string) (_ *deployment, err error) {
	d := &deployment{}
	d.names, _ = wire.NewNames("")
	defer func() {
		if err != nil {
			err = errors.Join(err, d.stop())
		}
	}()
	d.workersPassword, d.secret = randomHex(24), randomHex(32)
	env := environ(d.workersPassword, d.secret)
	serve := func(name string, args ...string) *proc {
		args = append([]string{"serve", "--metrics", "", "--http", "", "--log-format", "json", "--log-level", "warn",
			"--ack-wait", cfg.AckWait.String(), "--instance", name}, args...)
		if cfg.LazyFsync && !slices.Contains(args, "--nats-url") {
			args = append(args, "--lazy-fsync")
		}
		if cfg.Replicas != 0 && !slices.Contains(args, "--replicas") {
			args = append(args, "--replicas", strconv.Itoa(cfg.Replicas))
		}
		p := &proc{name: name, bin: cfg.Binary, args: args, env: env, log: filepath.Join(dir, name+".log")}
		d.all = append(d.all, p)
		return p
	}
	switch cfg.Mode {
	case ModeNetwork:
		return d, deployNetwork(ctx, cfg, dir, d, env, serve)
	case ModeWorker, ModeServer:
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		d.clientURL = "nats://" + listen
		args := []string{"--listen", listen, "--data-dir", filepath.Join(dir, "server")}
		if cfg.Mode == ModeWorker {
			// The server's own worker takes a small share; the worker
			// processes, which are killed, do most of the work.
			args = append(args, "--concurrency", "1")
		}
		srv := serve("server", args...)
		if err := srv.start(ctx); err != nil {
			return nil, err
		}
		if cfg.Mode == ModeServer {
			d.victims = []*proc{srv}
			return d, nil
		}
		for i := range cfg.Workers {
			w := serve(fmt.Sprintf("worker-%d", i+1), "--nats-url", d.clientURL)
			if err := w.start(ctx); err != nil {
				return nil, err
			}
			d.victims = append(d.victims, w)
		}
		return d, nil
	}
	// ModeNode: three nodes, started at once since each waits for a quorum.
	const nodes = 3
	var listens, routes []string
	for range nodes {
		cp, err1 := freePort()
		rp, err2 := freePort()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		listens = append(listens, net.JoinHostPort("127.0.0.1", strconv.Itoa(cp)))
		routes = append(routes, "nats://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(rp)))
	}
	urls := make([]string, nodes)
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i+1)
		urls[i] = "nats://" + listens[i]
		d.victims = append(d.victims, serve(name, "--listen", listens[i], "--data-dir", filepath.Join(dir, name),
			"--server-name", name, "--cluster-name", "soak", "--cluster-listen", strings.TrimPrefix(routes[i], "nats://"),
			"--routes", strings.Join(routes, ",")))
	}
	d.clientURL, d.clustered = strings.Join(urls, ","), true
	errs := make(chan error, nodes)
	for _, p := range d.victims {
		go func() { errs <- p.start(ctx) }()
	}
	for range nodes {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// stop stops every process, the last started first.
//
// The nodes of a cluster are stopped at once, as an operator stops a
// cluster: stopped one after another, the last would drain alone, without
// a quorum for its streams, until serve's drain bound.
func (d *deployment) stop() (err error) {
	if d.network != nil {
		defer func() { err = errors.Join(err, d.network.close()) }()
	}
	if d.clustered {
		errs := make(chan error, len(d.all))
		for _, p := range d.all {
			go func() { errs <- p.stop() }()
		}
		for range d.all {
			err = errors.Join(err, <-errs)
		}
		return err
	}
	for i := len(d.all) - 1; i >= 0; i-- {
		err = errors.Join(err, d.all[i].stop())
	}
	return err
}

// environ is this process's environment without Interlock's variables,
// with the workers' password and the resume-token secret.
func environ(workersPassword, secret string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INTERLOCK_") {
			env = append(env, kv)
		}
	}
	return append(env, "INTERLOCK_WORKERS_PASSWORD="+workersPassword, "INTERLOCK_SECRET="+secret)
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("soak: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// kill kills a victim of d every cfg.Every, in turn, and starts it again,
// until ctx is done or cfg.Kills have been made. A kill waits for the
// process killed before to serve again, and for its victim to have served
// for cfg.AckWait, so that the commands the previous kill of that process
// left in hand are delivered again before the next: ticks that come
// meanwhile are dropped. Without that wait, a server killed more often
// than the ack wait never delivers them again.
//
// In node mode a kill also waits for the cluster to be whole again: every
// replica of every stream online and within wholeLag entries of its
// leader. A node killed while the one killed before is still catching up
// leaves its streams without a quorum of current replicas, and they stall
// until it has: kills that fast measure a cluster without a quorum, not
// the loss of a node.
func kill(ctx context.Context, cfg Config, d *deployment, js jetstream.JetStream, kills *atomic.Int64) error {
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for n := 0; cfg.Kills == 0 || n < cfg.Kills; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		p := d.victims[n%len(d.victims)]
		if time.Since(p.serving) < cfg.AckWait || cfg.Mode.clustered() && !whole(ctx, js) {
			n--
			continue
		}
		if cfg.Mode == ModePause {
			if err := p.pause(ctx, cfg.Pause); err != nil {
				return err
			}
			kills.Add(1)
			fmt.Fprintf(cfg.Progress, "soak: paused %s for %s (pause %d)\n", p.name, cfg.Pause, n+1)
			continue
		}
		if err := p.kill(); err != nil {
			return err
		}
		kills.Add(1)
		began := time.Now()
		// Started with a context of its own: the restart completes even
		// if the runs end meanwhile, so that every process serves for
		// the checks.
		if err := p.start(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		fmt.Fprintf(cfg.Progress, "soak: killed %s (kill %d); serving again after %s\n", p.name, n+1, time.Since(began).Round(time.Millisecond))
	}
	return nil
}

// wholeLag is how many entries behind its leader a replica may be and
// still count as caught up. Under load the slowest replica is always a few
// entries behind (JetStream then reports it not current), while a node
// catching up after a restart is thousands behind.
const wholeLag = 100

// whole reports whether every stream has a leader and every replica of it
// is online and caught up to within wholeLag entries.
func whole(ctx context.Context, js jetstream.JetStream) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	streams := js.ListStreams(ctx)
	n := 0
	for info := range streams.Info() {
		n++
		c := info.Cluster
		if c == nil || c.Leader == "" {
			return false
		}
		for _, r := range c.Replicas {
			if r.Offline || r.Lag > wholeLag {
				return false
			}
		}
	}
	return streams.Err() == nil && n > 0
}
