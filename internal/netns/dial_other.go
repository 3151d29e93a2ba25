//go:build !linux

package netns

import (
	"context"
	"errors"
	"net"
)

// Dialer dials TCP connections from a host's namespace; on this system it
// has none.
type Dialer struct{}

// Dialer returns an error: network namespaces are Linux's.
func (n *Network) Dialer(host string) (*Dialer, error) { return nil, Available() }

// Dial fails: network namespaces are Linux's.
func (d *Dialer) Dial(network, address string) (net.Conn, error) { return nil, Available() }

// DialContext fails: network namespaces are Linux's.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return nil, Available()
}

// Listen fails: network namespaces are Linux's.
func (n *Network) Listen(host, network, address string) (net.Listener, error) {
	return nil, Available()
}

// Available reports that network namespaces are Linux's.
func Available() error {
	return errors.New("netns: network namespaces are Linux's; this system has none")
}
