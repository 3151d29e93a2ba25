package natstest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/bus"
)

// Cluster is a JetStream cluster of embedded servers on loopback, each with
// its own data dir and the default identities (the workers' password is
// WorkersPassword on every node), shut down at cleanup.
type Cluster struct {
	t     testing.TB
	Nodes []*bus.Server // nil while a node is stopped
	dirs  []string
	ports []int // of the route listeners
	// started marks the nodes that ran once: a restart keeps its port.
	started []bool
}

// StartCluster starts an n-node cluster and waits until its JetStream meta
// group has a leader that every node follows.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := NewCluster(t, n)
	for i := range n {
		c.Start(i)
	}
	c.WaitReady()
	return c
}

// NewCluster prepares an n-node cluster (data dirs, route ports) without
// starting a node: Start starts them, in any order.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Nodes: make([]*bus.Server, n), dirs: make([]string, n), ports: make([]int, n), started: make([]bool, n)}
	for i := range n {
		c.dirs[i] = t.TempDir()
		c.ports[i] = freePort(t)
	}
	t.Cleanup(func() {
		for _, s := range c.Nodes {
			if s != nil {
				s.Shutdown()
			}
		}
	})
	return c
}

// freePort returns a loopback port free a moment ago, taken at random
// below the range the system hands out for listeners on port 0 and
// outgoing connections (32768 and up on Linux): a node may start long
// after its port was picked, and a port of that range would by then be
// any other test's connection.
func freePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			_ = l.Close()
			return port
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Routes are the URLs of the nodes' route listeners.
func (c *Cluster) Routes() []string {
	var r []string
	for _, p := range c.ports {
		r = append(r, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return r
}

// Start starts node i (again, after Stop: on the same data dir and route
// port, with a new client port).
func (c *Cluster) Start(i int) *bus.Server {
	c.t.Helper()
	if c.Nodes[i] != nil {
		c.t.Fatalf("natstest: node %d is running", i)
	}
	start := func() (*bus.Server, error) {
		return bus.StartServer(c.t.Context(), bus.ServerConfig{
			DataDir: c.dirs[i], Port: -1, LazyFsync: true, WorkersPassword: WorkersPassword,
			Name: fmt.Sprintf("node-%d", i),
			Cluster: &bus.ClusterConfig{
				Name: "natstest", Port: c.ports[i], Routes: c.Routes(),
			},
		})
	}
	srv, err := start()
	for try := 0; err != nil && !c.started[i] && strings.Contains(err.Error(), "address already in use") && try < 3; try++ {
		// Taken since it was picked, before the node ever ran: another
		// port (the nodes running know it from the routes' gossip).
		c.ports[i] = freePort(c.t)
		srv, err = start()
	}
	if err != nil {
		c.t.Fatalf("natstest: starting node %d: %v", i, err)
	}
	c.Nodes[i], c.started[i] = srv, true
	return srv
}

// Stop shuts node i down, as a crash of its machine would (its data dir
// stays).
func (c *Cluster) Stop(i int) {
	c.Nodes[i].Shutdown()
	c.Nodes[i] = nil
}

// Node returns the index of the running node named name, or -1.
func (c *Cluster) Node(name string) int {
	for i, s := range c.Nodes {
		if s != nil && s.Name() == name {
			return i
		}
	}
	return -1
}

// URLs lists the client URLs of the running nodes, comma-separated, as
// nats.go takes them.
func (c *Cluster) URLs() string {
	var urls []string
	for _, s := range c.Nodes {
		if s != nil {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// WaitReady waits until every running node is current with the JetStream
// meta group's leader.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	Eventually(c.t, "every node current with a JetStream meta leader", func() bool {
		for _, s := range c.Nodes {
			if s != nil && (!s.NATS().JetStreamIsCurrent() || !c.hasMetaLeader(s)) {
				return false
			}
		}
		return true
	})
}

func (c *Cluster) hasMetaLeader(s *bus.Server) bool {
	info, err := s.NATS().Jsz(nil)
	return err == nil && info.Meta != nil && info.Meta.Leader != ""
}
