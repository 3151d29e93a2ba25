package main

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/internal/natstest"
)

// TestServeRefusesClusterSettingsItCannotHonour: each refusal names the
// fix, and none leaves a server behind.
func TestServeRefusesClusterSettingsItCannotHonour(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		args    []string
		wantIs  error
		wantErr string
	}{
		{name: "replicas 2", args: []string{"--replicas", "2"}, wantErr: "use 1, 3"},
		{name: "cluster flags with --nats-url", args: []string{"--nats-url", "nats://127.0.0.1:1", "--cluster-name", "c"}, wantErr: "configure the embedded server"},
		{name: "bad cluster listen", args: []string{"--cluster-name", "c", "--cluster-listen", "6222"}, wantErr: "--cluster-listen"},
		{name: "cluster without a name", args: []string{"--routes", "nats://127.0.0.1:6222"}, wantErr: "--cluster-name"},
		{name: "cluster without routes", args: []string{"--cluster-name", "c", "--cluster-listen", "127.0.0.1:-1"}, wantErr: "set --routes"},
		{name: "routes beyond loopback unauthenticated", args: []string{"--cluster-name", "c", "--cluster-listen", "0.0.0.0:-1", "--routes", "nats://127.0.0.1:6222"}, wantIs: bus.ErrNoClusterAuth, wantErr: "--insecure-cluster-no-auth"},
		{name: "3 replicas on one server", args: []string{"--replicas", "3"}, wantIs: bus.ErrReplicas, wantErr: "use --replicas 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", t.TempDir(), "--lazy-fsync", "--metrics", "", "--log-level", "error"}, tc.args...)
			err := Run(t.Context(), args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Fatalf("serve %v = %v, want an error saying %q", tc.args, err, tc.wantErr)
			}
		})
	}
}

// TestServeListensForRoutesBeyondLoopbackOnlyWhenToldItIsInsecure: with
// --insecure-cluster-no-auth the route listener takes an address beyond
// loopback without route authentication, and serve warns, in capitals,
// what that lets anyone do.
func TestServeListensForRoutesBeyondLoopbackOnlyWhenToldItIsInsecure(t *testing.T) {
	t.Parallel()
	// serve is node 0 of a 3-node cluster whose other nodes are embedded
	// test servers: a JetStream cluster node serves once it has a quorum.
	c := natstest.NewCluster(t, 3)
	c.Start(1)
	c.Start(2)
	routes := c.Routes()
	_, port0, _ := net.SplitHostPort(strings.TrimPrefix(routes[0], "nats://"))
	s := serveLogged(t, "--http", "", "--cluster-name", "natstest", "--server-name", "node-0",
		"--cluster-listen", "0.0.0.0:"+port0, "--routes", strings.Join(routes, ","), "--insecure-cluster-no-auth")
	cluster, _ := s.log["cluster"].(string)
	host, port, err := net.SplitHostPort(strings.TrimPrefix(cluster, "nats://"))
	if err != nil || port == "0" || !net.ParseIP(host).IsUnspecified() {
		t.Fatalf("serving log says cluster %q, want a route listener on 0.0.0.0 and a real port", cluster)
	}
	warned := false
	for _, l := range s.before {
		msg, _ := l["message"].(string)
		if l["level"] == "warn" && strings.Contains(msg, "--insecure-cluster-no-auth") && strings.Contains(msg, "ANYONE WHO REACHES ITS PORT MAY JOIN THE CLUSTER") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("serve did not warn that its routes take anyone; logged before serving: %v", s.before)
	}
	// The route port takes a connection from beyond loopback's name for
	// it: it listens on every address, not on 127.0.0.1 alone.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(outboundIP(t), port), 5*time.Second)
	if err != nil {
		t.Fatalf("dialing the route listener on a non-loopback address: %v", err)
	}
	conn.Close()
}

// outboundIP is an address of this machine that is not loopback, or the
// test is skipped when it has none.
func outboundIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("this machine has no IPv4 address beyond loopback")
	return ""
}

// A node restarted while its peers still elect leaders binds its channels'
// consumers through bus.Ensure, which waits for the cluster up to
// bus.DefaultClusterWait: serve's bound on a channel's start must not end
// that wait first (the network soak found a restarted node exiting after
// 30 s of "JetStream system temporarily unavailable").
func TestAChannelsStartWaitsForAFormingClusterAsLongAsProvisioningDoes(t *testing.T) {
	if channelStartTimeout <= bus.DefaultClusterWait {
		t.Fatalf("a channel's start is bounded by %s, not longer than the %s bus.Ensure waits for a forming cluster", channelStartTimeout, bus.DefaultClusterWait)
	}
}
