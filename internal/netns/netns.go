// Package netns builds a small network of Linux network namespaces for
// fault tests: one namespace per host, each joined by a veth pair to a
// bridge in a namespace of its own, with addresses of a private /24 that
// exists only inside them. Nothing is added to the namespace of the
// process that builds it: its programs run inside a host's namespace
// ([Network.Command]), and its own connections are dialed from one
// ([Network.Dialer]).
//
// Faults are made with blackhole routes ([Network.Partition]): a host's
// packets to a host cut from it are dropped without a word, as a cable
// pulled out or a firewall's DROP rule, so that connections across the cut
// stall rather than fail; [Network.Heal] removes the routes, and stalled
// connections carry on where they stopped.
//
// A network whose maker died without closing it is removed by the next
// New on the machine.
//
// Building one needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and the ip
// command of iproute2: [Available] says whether this machine has both.
package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// subnet holds the hosts' addresses; each network has it to itself, as its
// namespaces reach no other.
var subnet = netip.MustParsePrefix("10.77.0.0/24")

// Host is one host of a Network.
type Host struct {
	// Name is the host's name, which every host resolves to Addr.
	Name string
	// Namespace is the name of its network namespace (ip netns).
	Namespace string
	// Addr is its address on the bridge.
	Addr netip.Addr
}

// Network is a bridge and the hosts on it. Its methods are safe for
// concurrent use. Close removes everything it made.
type Network struct {
	id    string
	hub   string
	hosts []Host

	mu   sync.Mutex
	cuts map[[2]int]bool // host pairs (lower index first) cut from each other
}

// New makes a host for each name, each in a new namespace with loopback up
// and an address on the bridge, and an /etc/netns/<namespace>/hosts file
// that resolves every name (which `ip netns exec` mounts over /etc/hosts).
// Names must be distinct host names, at most 200 of them.
func New(ctx context.Context, names ...string) (_ *Network, err error) {
	if len(names) == 0 || len(names) > 200 {
		return nil, fmt.Errorf("netns: %d hosts; give 1 to 200 names", len(names))
	}
	removeAbandoned(ctx)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	n := &Network{id: fmt.Sprintf("%s%d-%s", idPrefix, os.Getpid(), hex.EncodeToString(b)), cuts: map[[2]int]bool{}}
	n.hub = n.id + "-hub"
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()
	if err := ip(ctx, "netns", "add", n.hub); err != nil {
		return nil, err
	}
	if err := ip(ctx, "-n", n.hub, "link", "add", "br0", "type", "bridge"); err != nil {
		return nil, err
	}
	if err := ip(ctx, "-n", n.hub, "link", "set", "br0", "up"); err != nil {
		return nil, err
	}
	addr := subnet.Addr()
	var hostsFile strings.Builder
	hostsFile.WriteString("127.0.0.1 localhost\n::1 localhost\n")
	for i, name := range names {
		if name == "" || strings.ContainsAny(name, " \t\n/") || slices.Contains(names[:i], name) {
			return nil, fmt.Errorf("netns: host name %q is empty, repeated or not a host name", name)
		}
		addr = addr.Next()
		h := Host{Name: name, Namespace: fmt.Sprintf("%s-%d", n.id, i+1), Addr: addr}
		if err := ip(ctx, "netns", "add", h.Namespace); err != nil {
			return nil, err
		}
		n.hosts = append(n.hosts, h)
		veth := fmt.Sprintf("v%d", i+1)
		prefix := netip.PrefixFrom(h.Addr, subnet.Bits()).String()
		for _, args := range [][]string{
			{"-n", n.hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.Namespace},
			{"-n", n.hub, "link", "set", veth, "master", "br0", "up"},
			{"-n", h.Namespace, "addr", "add", prefix, "dev", "eth0"},
			{"-n", h.Namespace, "link", "set", "eth0", "up"},
			{"-n", h.Namespace, "link", "set", "lo", "up"},
		} {
			if err := ip(ctx, args...); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(&hostsFile, "%s %s\n", h.Addr, h.Name)
	}
	for _, h := range n.hosts {
		dir := filepath.Join("/etc/netns", h.Namespace)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("netns: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hostsFile.String()), 0o644); err != nil {
			return nil, fmt.Errorf("netns: %w", err)
		}
	}
	return n, nil
}

// Hosts are the network's hosts, in the order of New's names.
func (n *Network) Hosts() []Host { return slices.Clone(n.hosts) }

// Host returns the host named name.
func (n *Network) Host(name string) (Host, bool) {
	i := n.index(name)
	if i < 0 {
		return Host{}, false
	}
	return n.hosts[i], true
}

func (n *Network) index(name string) int {
	return slices.IndexFunc(n.hosts, func(h Host) bool { return h.Name == name })
}

// Command returns a command that runs program with args inside host's
// namespace, with /etc/hosts resolving every host. Exec'd by ip, the
// process started is the program itself: signals sent to it reach it.
func (n *Network) Command(host, program string, args ...string) (*exec.Cmd, error) {
	h, ok := n.Host(host)
	if !ok {
		return nil, fmt.Errorf("netns: no host %q", host)
	}
	return exec.Command("ip", append([]string{"netns", "exec", h.Namespace, program}, args...)...), nil
}

// Partition cuts every host of each group from every host of the other
// groups, in both directions, on top of the cuts already made. Hosts in no
// group keep every link they have. A host named twice is an error.
func (n *Network) Partition(ctx context.Context, groups ...[]string) error {
	idx := make([][]int, len(groups))
	seen := map[int]bool{}
	for g, names := range groups {
		for _, name := range names {
			i := n.index(name)
			if i < 0 || seen[i] {
				return fmt.Errorf("netns: host %q is unknown or in two groups", name)
			}
			seen[i] = true
			idx[g] = append(idx[g], i)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for g := range idx {
		for _, a := range idx[g] {
			for _, other := range idx[g+1:] {
				for _, b := range other {
					if err := n.cut(ctx, a, b); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// Cut cuts host a from host b, in both directions.
func (n *Network) Cut(ctx context.Context, a, b string) error {
	i, j := n.index(a), n.index(b)
	if i < 0 || j < 0 || i == j {
		return fmt.Errorf("netns: cannot cut %q from %q", a, b)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut(ctx, i, j)
}

// cut blackholes i's packets to j and j's to i. n.mu is held.
func (n *Network) cut(ctx context.Context, i, j int) error {
	key := [2]int{min(i, j), max(i, j)}
	if n.cuts[key] {
		return nil
	}
	for _, p := range [][2]int{{i, j}, {j, i}} {
		from, to := n.hosts[p[0]], n.hosts[p[1]]
		if err := ip(ctx, "-n", from.Namespace, "route", "replace", "blackhole", to.Addr.String()+"/32"); err != nil {
			return err
		}
	}
	n.cuts[key] = true
	return nil
}

// Cuts are the pairs of hosts cut from each other now, by name.
func (n *Network) Cuts() [][2]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out [][2]string
	for k := range n.cuts {
		out = append(out, [2]string{n.hosts[k[0]].Name, n.hosts[k[1]].Name})
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
	return out
}

// Heal removes every cut.
func (n *Network) Heal(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var err error
	for k := range n.cuts {
		for _, p := range [][2]int{{k[0], k[1]}, {k[1], k[0]}} {
			from, to := n.hosts[p[0]], n.hosts[p[1]]
			if e := ip(ctx, "-n", from.Namespace, "route", "del", "blackhole", to.Addr.String()+"/32"); e != nil && !strings.Contains(e.Error(), "No such process") {
				err = errors.Join(err, e)
			}
		}
		delete(n.cuts, k)
	}
	return err
}

// Close removes the namespaces (and with them the veth pairs and routes)
// and the hosts files. It may be called more than once.
func (n *Network) Close() error {
	var err error
	ctx := context.Background()
	for _, ns := range append([]string{n.hub}, n.namespaces()...) {
		if _, statErr := os.Stat(filepath.Join("/run/netns", ns)); statErr == nil {
			err = errors.Join(err, ip(ctx, "netns", "del", ns))
		}
		if ns != n.hub {
			err = errors.Join(err, os.RemoveAll(filepath.Join("/etc/netns", ns)))
		}
	}
	return err
}

func (n *Network) namespaces() []string {
	var out []string
	for _, h := range n.hosts {
		out = append(out, h.Namespace)
	}
	return out
}

// Resolve maps a host name of the network to its address; other
// addresses are returned as they are.
func (n *Network) Resolve(address string) (string, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", fmt.Errorf("netns: address %q: %w", address, err)
	}
	if h, ok := n.Host(host); ok {
		return net.JoinHostPort(h.Addr.String(), port), nil
	}
	return address, nil
}

// idPrefix begins every namespace a Network makes, followed by the
// process id of its maker: il<pid>-<random>-<host number or hub>.
const idPrefix = "il"

// removeAbandoned removes the namespaces, and their hosts files, of
// networks whose maker is gone without closing them (killed, say).
func removeAbandoned(ctx context.Context) {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, idPrefix)
		pid, _, found := strings.Cut(rest, "-")
		if !ok || !found || strings.Count(rest, "-") != 2 {
			continue
		}
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", pid)); err == nil {
			continue // its maker is alive
		}
		_ = ip(ctx, "netns", "del", name)
		_ = os.RemoveAll(filepath.Join("/etc/netns", name))
	}
}

// ip runs the ip command with args.
func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
