package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/wire"
)

// Where a measurement's nats-server runs (the --server flag).
const (
	// serverProcess runs the server in a child process (each node of a
	// cluster in its own), as a deployment would, so that the memory
	// figures of this process are the workers' and the clients'.
	serverProcess = "process"
	// serverInProcess runs the server in this process.
	serverInProcess = "inprocess"
)

// Environment of a server child process: the bench binary run again with
// serverEnv set serves nats-server and nothing else.
const (
	// serverEnv is the child's data directory.
	serverEnv = "INTERLOCK_BENCH_SERVER"
	// serverFsyncEnv is the child's fsync mode: "always" or "lazy".
	serverFsyncEnv = "INTERLOCK_BENCH_SERVER_FSYNC"
	// serverNameEnv is the server's name; a cluster's nodes each have
	// their own. Optional.
	serverNameEnv = "INTERLOCK_BENCH_SERVER_NAME"
	// serverClusterEnv is the port of a cluster node's route listener on
	// loopback; unset for a single server.
	serverClusterEnv = "INTERLOCK_BENCH_SERVER_CLUSTER"
	// serverRoutesEnv is the cluster's route URLs, comma-separated, the
	// node's own among them.
	serverRoutesEnv = "INTERLOCK_BENCH_SERVER_ROUTES"
	// serverPasswordEnv is the password of the workers' identity, the same
	// on every node of a cluster. Optional: a single server makes one up.
	serverPasswordEnv = "INTERLOCK_BENCH_SERVER_PASSWORD"
)

// clusterName is the name of the benchmark's cluster.
const clusterName = "bench"

// clusterReadyWait bounds how long a new cluster takes to hold a stream
// with a replica on every node.
const clusterReadyWait = 2 * time.Minute

// natsServer is the nats-server of one measurement, a single server or a
// cluster, in this process or in child processes, with its own data
// directory.
type natsServer struct {
	// url is the client URL of the first node, with the workers'
	// credentials; the clients connect there.
	url string
	// urls are every node's client URL, with the workers' credentials.
	urls []string
	// where is serverProcess or serverInProcess.
	where string
	// pids are the child processes' ids, one per node; none when the
	// server runs in this process.
	pids []int
	// dir holds the data of every node.
	dir string

	stopOnce sync.Once
	stopErr  error
	shutdown []func() error
	failures []func() error
}

// nodeURL is the client URL of the node that worker process i connects
// to: the workers spread over the nodes.
func (s *natsServer) nodeURL(i int) string { return s.urls[i%len(s.urls)] }

// serverSpec is how one server node is started.
type serverSpec struct {
	dir   string
	fsync string // "always" or "lazy"
	name  string
	// clusterPort is the port of the node's route listener, 0 for a
	// single server; routes are the cluster's route URLs.
	clusterPort int
	routes      []string
	password    string
}

// env is the environment that makes the bench binary serve spec.
func (sp serverSpec) env() []string {
	env := []string{serverEnv + "=" + sp.dir, serverFsyncEnv + "=" + sp.fsync}
	if sp.name != "" {
		env = append(env, serverNameEnv+"="+sp.name)
	}
	if sp.clusterPort != 0 {
		env = append(env, serverClusterEnv+"="+strconv.Itoa(sp.clusterPort), serverRoutesEnv+"="+strings.Join(sp.routes, ","))
	}
	if sp.password != "" {
		env = append(env, serverPasswordEnv+"="+sp.password)
	}
	return env
}

// serverSpecFromEnv reads the spec of a server child from its environment.
func serverSpecFromEnv() (serverSpec, error) {
	sp := serverSpec{
		dir: os.Getenv(serverEnv), fsync: os.Getenv(serverFsyncEnv),
		name: os.Getenv(serverNameEnv), password: os.Getenv(serverPasswordEnv),
	}
	if p, ok := os.LookupEnv(serverClusterEnv); ok {
		port, err := strconv.Atoi(p)
		if err != nil || port <= 0 {
			return sp, fmt.Errorf("%s is %q; it must be the port of the route listener", serverClusterEnv, p)
		}
		sp.clusterPort = port
		if r := os.Getenv(serverRoutesEnv); r != "" {
			sp.routes = strings.Split(r, ",")
		}
	}
	return sp, nil
}

// config is the bus configuration of spec.
func (sp serverSpec) config() (bus.ServerConfig, error) {
	if sp.dir == "" {
		return bus.ServerConfig{}, fmt.Errorf("%s is empty; it must name the data directory", serverEnv)
	}
	if sp.fsync != "always" && sp.fsync != "lazy" {
		return bus.ServerConfig{}, fmt.Errorf("%s is %q; use always or lazy", serverFsyncEnv, sp.fsync)
	}
	cfg := bus.ServerConfig{DataDir: sp.dir, Port: -1, LazyFsync: sp.fsync == "lazy", Name: sp.name, WorkersPassword: sp.password}
	if cfg.Name == "" {
		cfg.Name = "bench"
	}
	if sp.clusterPort != 0 {
		if len(sp.routes) < 2 {
			return cfg, fmt.Errorf("%s is %q; a cluster node needs the route URLs of every node", serverRoutesEnv, strings.Join(sp.routes, ","))
		}
		cfg.Cluster = &bus.ClusterConfig{Name: clusterName, Port: sp.clusterPort, Routes: sp.routes}
	}
	return cfg, nil
}

// startNATS starts a nats-server with fsync mode m in a fresh temporary
// directory: a single server, or, with nodes > 1, a cluster of that many
// nodes on loopback, each with a directory of its own under it. It runs
// in this process or (where is serverProcess) in child processes, one per
// node, whose standard error goes to stderr. A cluster is returned once it
// can hold streams with a replica on every node. stop shuts the server
// down, waits for the children, and removes the directory.
func startNATS(ctx context.Context, where string, m mode, nodes int, stderr io.Writer) (_ *natsServer, err error) {
	nodes = max(nodes, 1)
	dir, err := os.MkdirTemp("", "interlock-bench-")
	if err != nil {
		return nil, fmt.Errorf("creating data directory: %w", err)
	}
	s := &natsServer{where: where, dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.stop())
		}
	}()
	specs := []serverSpec{{dir: dir, fsync: m.name}}
	if nodes > 1 {
		// JetStream forms a cluster's meta group from the routes each
		// node is given, so every node must know every route listener
		// before it starts: pick free ports for them, as
		// internal/natstest does. The client ports are picked by the
		// servers.
		ports, err := freePorts(nodes)
		if err != nil {
			return nil, err
		}
		routes := make([]string, nodes)
		for i, p := range ports {
			routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
		}
		password := newID()
		specs = make([]serverSpec, nodes)
		for i := range specs {
			specs[i] = serverSpec{
				dir: filepath.Join(dir, fmt.Sprintf("node-%d", i)), fsync: m.name, name: fmt.Sprintf("bench-%d", i),
				clusterPort: ports[i], routes: routes, password: password,
			}
		}
	}
	// The nodes start together: each waits for its routes on its own.
	started := make([]*natsNode, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, sp := range specs {
		wg.Go(func() { started[i], errs[i] = startNode(ctx, where, sp, stderr) })
	}
	wg.Wait()
	for i, n := range started {
		if n != nil {
			s.shutdown = append(s.shutdown, n.shutdown)
			if n.failure != nil {
				s.failures = append(s.failures, n.failure)
			}
			if n.pid != 0 {
				s.pids = append(s.pids, n.pid)
			}
			s.urls = append(s.urls, n.url)
		}
		if errs[i] != nil && nodes > 1 {
			errs[i] = fmt.Errorf("node %d of %d: %w", i, nodes, errs[i])
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.url = s.urls[0]
	if nodes > 1 {
		if err := waitCluster(ctx, s.url, nodes); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// natsNode is one node of a natsServer.
type natsNode struct {
	url      string
	pid      int // 0 in this process
	shutdown func() error
	failure  func() error // nil in this process
}

// startNode starts the node sp describes, in this process or in a child
// process as where says.
func startNode(ctx context.Context, where string, sp serverSpec, stderr io.Writer) (*natsNode, error) {
	if where == serverProcess {
		p, lines, err := startChild(ctx, "server process", sp.env(), 1, bus.DefaultReadyTimeout, stderr)
		if err != nil {
			return nil, err
		}
		n := &natsNode{url: lines[0], pid: p.pid(), shutdown: p.stop, failure: p.failure}
		if !strings.HasPrefix(n.url, "nats://") {
			return n, fmt.Errorf("starting the server process: its first line %q is not a client URL", truncate([]byte(n.url), 200))
		}
		return n, nil
	}
	cfg, err := sp.config()
	if err != nil {
		return nil, err
	}
	srv, err := bus.StartServer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &natsNode{url: workersURL(srv), shutdown: func() error { srv.Shutdown(); return nil }}, nil
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port for a cluster node's routes: %w", err)
		}
		// Kept open until all are picked, so that none is picked twice.
		defer func() { _ = l.Close() }()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitCluster waits until the cluster at url can hold a stream with a
// replica on each of its nodes: its JetStream meta group has a leader and
// every node has joined it. A request made before the meta group has a
// leader may never be answered, so every attempt is short.
func waitCluster(ctx context.Context, url string, nodes int) error {
	ctx, cancel := context.WithTimeout(ctx, clusterReadyWait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	// Short attempts while the meta group elects its leader; longer ones
	// if the machine is too busy for them.
	attempt := 500 * time.Millisecond
	for {
		actx, acancel := context.WithTimeout(ctx, attempt)
		err := probeCluster(actx, url, nodes)
		acancel()
		if err == nil {
			return nil
		}
		attempt = min(2*attempt, 5*time.Second)
		select {
		case <-ctx.Done():
			return fmt.Errorf("the %d-node cluster could not hold a stream with %d replicas within %s: %w", nodes, nodes, clusterReadyWait, err)
		case <-tick.C:
		}
	}
}

// probeCluster creates and deletes a stream with a replica on each of the
// nodes of the cluster at url.
func probeCluster(ctx context.Context, url string, nodes int) error {
	nc, js, err := wire.Connect(ctx, connConfig(url, "bench-cluster-check"))
	if err != nil {
		return err
	}
	defer nc.Close()
	const probe = "bench_cluster_ready"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: probe, Subjects: []string{probe}, Storage: jetstream.MemoryStorage, Replicas: nodes}); err != nil {
		return fmt.Errorf("creating a stream with %d replicas: %w", nodes, err)
	}
	if err := js.DeleteStream(ctx, probe); err != nil {
		return fmt.Errorf("deleting the stream %s that checked the cluster: %w", probe, err)
	}
	return nil
}

// stop shuts every node down and removes the data directory. Stopping
// twice is safe.
func (s *natsServer) stop() error {
	s.stopOnce.Do(func() {
		errs := make([]error, len(s.shutdown))
		var wg sync.WaitGroup
		for i, stop := range s.shutdown {
			wg.Go(func() { errs[i] = stop() })
		}
		wg.Wait()
		err := errors.Join(errs...)
		if rerr := os.RemoveAll(s.dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("removing data directory %s: %w", s.dir, rerr))
		}
		s.stopErr = err
	})
	return s.stopErr
}

// failure is how a node's child process ended, if one ended before it
// was stopped.
func (s *natsServer) failure() error {
	for _, f := range s.failures {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// nodes is how many nodes the server has.
func (s *natsServer) nodes() int { return len(s.urls) }

// describe says where the server runs, for progress lines.
func (s *natsServer) describe() string {
	what := "a single server"
	if n := s.nodes(); n > 1 {
		what = fmt.Sprintf("a %d-node cluster", n)
	}
	if len(s.pids) > 0 {
		pids := make([]string, len(s.pids))
		for i, p := range s.pids {
			pids[i] = strconv.Itoa(p)
		}
		return fmt.Sprintf("%s in child process %s at %s", what, strings.Join(pids, ", "), redacted(s.url))
	}
	return what + " in this process at " + redacted(s.url)
}

// memory reads the resident set now and the peak so far (VmRSS and
// VmHWM) of the server's child processes, summed over the nodes, in
// bytes; ok is false when the server runs in this process or they cannot
// be read.
func (s *natsServer) memory() (rss, hwm uint64, ok bool) {
	if s == nil || len(s.pids) == 0 {
		return 0, 0, false
	}
	return processesRSS(s.pids)
}

// processesRSS sums the resident sets now and the peaks so far of pids;
// ok is false if one cannot be read.
func processesRSS(pids []int) (rss, hwm uint64, ok bool) {
	for _, pid := range pids {
		r, h, ok := processRSS(pid)
		if !ok {
			return 0, 0, false
		}
		rss, hwm = rss+r, hwm+h
	}
	return rss, hwm, len(pids) > 0
}

// serverMain is the whole of a server child process: it serves
// nats-server as its environment says (a single server or a cluster
// node, on a free client port, with data in the directory it names),
// prints the client URL as the first line of stdout, and returns the
// process's exit code once stdin closes or the process is signalled.
func serverMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sp, err := serverSpecFromEnv()
	if err == nil {
		err = serve(ctx, sp, os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: server process: %v\n", err)
		return 1
	}
	return 0
}

// serve runs a server until stdin closes or ctx is done.
func serve(ctx context.Context, sp serverSpec, stdin io.Reader, stdout io.Writer) error {
	cfg, err := sp.config()
	if err != nil {
		return err
	}
	srv, err := bus.StartServer(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	if _, err := fmt.Fprintln(stdout, workersURL(srv)); err != nil {
		return fmt.Errorf("writing the client URL: %w", err)
	}
	untilClosed(ctx, stdin)
	return nil
}

// untilClosed returns when stdin closes or ctx is done. The reader
// returns when the parent closes stdin or exits. If a signal comes first
// it stays blocked in read(2) on a blocking pipe, which nothing can
// interrupt, and ends with the process, which exits as soon as it has
// shut down.
func untilClosed(ctx context.Context, stdin io.Reader) {
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
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

// connConfig is how a process of the benchmark named name connects to the
// server at u, a URL that may carry credentials: they go apart, so that
// errors naming the URL do not show the password.
func connConfig(u, name string) wire.ConnConfig {
	c := wire.ConnConfig{URL: u, Name: name}
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return c
	}
	c.User = p.User.Username()
	c.Password, _ = p.User.Password()
	p.User = nil
	c.URL = p.String()
	return c
}

// redacted is u without its password, for progress lines.
func redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Redacted()
}
