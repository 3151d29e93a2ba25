// Package netaddr decides, by one rule, whether a listen address's host
// reaches this machine only. Every listener that refuses to serve beyond
// loopback without authentication (the embedded NATS server and its route
// listener, the HTTP API and its Host check, the metrics endpoint, the MCP
// server's HTTP transport) asks [IsLoopbackHost], so that they agree on
// every spelling of a host. It uses the standard library only.
package netaddr

import (
	"net/netip"
	"strings"
)

// IsLoopbackHost reports whether host, the host part of a listen address
// or of a request's Host (no port), names this machine's loopback
// interface only. It does when host is
//
//   - an IP address in 127.0.0.0/8 (127.0.0.1, 127.0.0.2, ...), or its
//     IPv4-mapped IPv6 form (::ffff:127.0.0.1);
//   - the IPv6 address ::1;
//
// either written with or without one pair of enclosing brackets ([::1]),
// with any IPv6 zone ignored (::1%lo); or
//
//   - the name localhost, in any case, with or without one trailing dot
//     (localhost, LOCALHOST, localhost.).
//
// Nothing else is loopback. In particular an empty host, 0.0.0.0 and ::
// listen on every interface, so they are not; nor is a name below
// localhost (app.localhost), an IP address with a trailing dot, or
// any other name, whatever it resolves to.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
