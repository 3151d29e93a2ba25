//go:build linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// dialTimeout bounds one dial from a Dialer.
const dialTimeout = 5 * time.Second

// Dialer dials TCP connections from a host's namespace, for a process that
// runs outside the network (a test, a soak's agents) yet must reach it as
// that host: a socket belongs to the namespace it was made in, and stays
// there. Its Dial is nats.go's CustomDialer.
type Dialer struct {
	n    *Network
	host Host
}

// Dialer returns a Dialer from host.
func (n *Network) Dialer(host string) (*Dialer, error) {
	h, ok := n.Host(host)
	if !ok {
		return nil, fmt.Errorf("netns: no host %q", host)
	}
	return &Dialer{n: n, host: h}, nil
}

// Dial dials address (a host name of the network, or an address) from the
// dialer's host.
func (d *Dialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialContext is Dial with a context.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	addr, err := d.n.Resolve(address)
	if err != nil {
		return nil, err
	}
	var c net.Conn
	err = d.n.in(d.host, func() (err error) {
		// The socket is made here, in the host's namespace; connecting it
		// may then wait on the runtime's poller like any other.
		c, err = (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens on address (such as ":4222") in host's namespace.
func (n *Network) Listen(host, network, address string) (net.Listener, error) {
	h, ok := n.Host(host)
	if !ok {
		return nil, fmt.Errorf("netns: no host %q", host)
	}
	var l net.Listener
	err := n.in(h, func() (err error) {
		l, err = net.Listen(network, address)
		return err
	})
	return l, err
}

// in calls f in h's namespace: on a goroutine locked to an OS thread of
// its own for as long as it is in the other namespace. A thread that
// cannot come back is ended with the goroutine instead of being handed
// back to the runtime.
func (n *Network) in(h Host, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := enter(h.Namespace, f)
		if back {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// enter enters namespace ns on this thread, calls f, and comes back. back
// reports whether the thread is in its own namespace again.
func enter(ns string, f func() error) (back bool, _ error) {
	own, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
	if err != nil {
		return true, fmt.Errorf("netns: %w", err)
	}
	defer own.Close()
	target, err := os.Open(filepath.Join("/run/netns", ns))
	if err != nil {
		return true, fmt.Errorf("netns: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return true, fmt.Errorf("netns: entering %s: %w", ns, err)
	}
	ferr := f()
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		return false, ferr
	}
	return true, ferr
}

// Available reports why this machine cannot build a Network, or nil if it
// can: it needs root and the ip command, and must allow a namespace.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: needs root to make network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("netns: needs the ip command of iproute2 (apt-get install iproute2)")
	}
	n, err := New(context.Background(), "probe")
	if err != nil {
		return err
	}
	return n.Close()
}
