package netns_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/internal/netns"
)

// network builds a network of names, or skips the test where this machine
// cannot.
func network(t *testing.T, names ...string) *netns.Network {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	n, err := netns.New(t.Context(), names...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// echo serves lines back on host's port 7000.
func echo(t *testing.T, n *netns.Network, host string) {
	t.Helper()
	l, err := n.Listen(host, "tcp", ":7000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write([]byte(sc.Text() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// roundTrip writes a line to c and reads it back within d.
func roundTrip(c net.Conn, r *bufio.Reader, line string, d time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(got) != line {
		return errors.New("echoed " + got)
	}
	return nil
}

func dial(t *testing.T, n *netns.Network, from, to string, d time.Duration) (net.Conn, error) {
	t.Helper()
	dl, err := n.Dialer(from)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return dl.DialContext(ctx, "tcp", to)
}

// TestAPartitionDropsPacketsAndHealingCarriesOn shows a cut as a pulled
// cable: a connection across it stalls (no error, no answer), a new one
// cannot be made, hosts outside the partition still reach both sides, and
// once healed the stalled connection carries on.
func TestAPartitionDropsPacketsAndHealingCarriesOn(t *testing.T) {
	n := network(t, "a", "b", "c")
	echo(t, n, "b")
	c, err := dial(t, n, "a", "b:7000", 5*time.Second)
	if err != nil {
		t.Fatalf("dialing b from a: %v", err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if err := roundTrip(c, r, "before", 5*time.Second); err != nil {
		t.Fatalf("before the partition: %v", err)
	}
	if err := n.Partition(t.Context(), []string{"a"}, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	if got := n.Cuts(); len(got) != 1 || got[0] != [2]string{"a", "b"} {
		t.Fatalf("cuts %v, want a from b", got)
	}
	var ne net.Error
	if err := roundTrip(c, r, "during", 500*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a line across the cut: %v, want a timeout (dropped, not refused)", err)
	}
	if c2, err := dial(t, n, "a", "b:7000", 500*time.Millisecond); err == nil {
		c2.Close()
		t.Fatal("a new connection across the cut was made")
	}
	c3, err := dial(t, n, "c", "b:7000", 5*time.Second)
	if err != nil {
		t.Fatalf("c, in no group, cannot reach b: %v", err)
	}
	c3.Close()
	if err := n.Heal(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := n.Cuts(); len(got) != 0 {
		t.Fatalf("cuts %v after healing", got)
	}
	// The line sent during the cut was retransmitted: it comes back first.
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadString('\n'); err != nil || got != "during\n" {
		t.Fatalf("after healing, read %q, %v; want the line sent during the cut", got, err)
	}
	if err := roundTrip(c, r, "after", 10*time.Second); err != nil {
		t.Fatalf("after healing: %v", err)
	}
}

// TestHostsResolveEachOtherAndCloseRemovesEverything runs a program in a
// host's namespace, which resolves every host's name, and shows Close
// leaving no namespace and no hosts file behind.
func TestHostsResolveEachOtherAndCloseRemovesEverything(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	n, err := netns.New(t.Context(), "nats-1", "nats-2")
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := n.Command("nats-1", "cat", "/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	h2, _ := n.Host("nats-2")
	if err != nil || !strings.Contains(string(out), h2.Addr.String()+" nats-2") {
		t.Fatalf("/etc/hosts in nats-1: %s (%v); want nats-2 at %s", out, err, h2.Addr)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range n.Hosts() {
		for _, p := range []string{filepath.Join("/run/netns", h.Namespace), filepath.Join("/etc/netns", h.Namespace)} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left behind after Close (%v)", p, err)
			}
		}
	}
	if err := n.Partition(t.Context(), []string{"nats-1", "nats-3"}); err == nil {
		t.Error("a partition naming an unknown host was made")
	}
}

// TestANetworkWhoseMakerDiedIsRemovedByTheNext: a network left behind by
// a process killed before Close is removed when the next one is made.
func TestANetworkWhoseMakerDiedIsRemovedByTheNext(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	left := fmt.Sprintf("il%d-0a0b0c-hub", gone.Process.Pid)
	if out, err := exec.Command("ip", "netns", "add", left).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", left, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", left).Run() })
	network(t, "a")
	if _, err := os.Stat(filepath.Join("/run/netns", left)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the namespace %s of a dead process is still there (%v)", left, err)
	}
}
