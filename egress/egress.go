package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/interlockhq/interlock/internal/netaddr"
)

// Flag is the option of `interlock serve` that allows destinations, named
// in refusals so that an operator knows where to allow one.
const Flag = "--egress-allow"

// EnvAllow is the environment variable that holds the default of Flag.
const EnvAllow = "INTERLOCK_EGRESS_ALLOW"

// ErrRefused is what every refusal of the policy is (errors.Is): the
// destination resolved to an address the policy refuses, and it was not
// allowed.
var ErrRefused = errors.New("egress: destination refused by the outbound policy")

// Dial timeouts, as http.DefaultTransport's.
const (
	dialTimeout = 30 * time.Second
	keepAlive   = 30 * time.Second
)

// Policy says where Interlock's outbound calls may connect. Its zero
// value is the default: every public address, and no loopback,
// link-local, private, unspecified, shared, multicast or broadcast one
// (see [Class]). A Policy is a value: copy it freely.
type Policy struct {
	// Allow names destinations allowed although they resolve to an
	// address the policy refuses, each one of
	//
	//   - a host name (hooks.internal.example.com, localhost): any
	//     address it resolves to, on any port;
	//   - a host name and port (hooks.internal.example.com:8443);
	//   - an IP address (10.1.2.3, 127.0.0.1, ::1): that address, whatever
	//     name led to it, on any port;
	//   - an IP address and port (127.0.0.1:9000, [::1]:9000);
	//   - a CIDR range (10.1.0.0/16, fd00:1::/64), on any port.
	//
	// Names are compared without case and without a trailing dot; there
	// are no wildcards. Defaults to none: every such address refused.
	Allow []string
	// Proxy, if set, picks the proxy each request goes through (nil for
	// none), as http.Transport.Proxy: http.ProxyFromEnvironment uses
	// HTTPS_PROXY, HTTP_PROXY and NO_PROXY. Interlock then connects to the
	// proxy only (which the policy checks, so a proxy at a private address
	// must be allowed), and of the destination it checks what the URL
	// says: an IP address or localhost is refused as above, a name is the
	// proxy's to resolve and to refuse. Defaults to nil: no proxy, every
	// destination connected to and checked directly.
	Proxy func(*http.Request) (*url.URL, error)
	// Resolver resolves host names for the connections. Defaults to
	// net.DefaultResolver.
	Resolver *net.Resolver
}

// IsZero reports whether p is the default policy: nothing allowed beyond
// public addresses, no proxy, the default resolver.
func (p Policy) IsZero() bool {
	return len(p.Allow) == 0 && p.Proxy == nil && p.Resolver == nil
}

// ParseAllow splits a comma-separated list of destinations (the value of
// Flag or EnvAllow) into Policy.Allow entries, spaces trimmed and empty
// ones dropped, and checks each as [Policy.Validate] does.
func ParseAllow(list string) ([]string, error) {
	var out []string
	for e := range strings.SplitSeq(list, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if _, err := parseEntry(e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Validate reports the first entry of Allow that is not a host name, a
// host:port, an IP address or a CIDR range, saying how to write it.
func (p Policy) Validate() error {
	for i, e := range p.Allow {
		if _, err := parseEntry(e); err != nil {
			return fmt.Errorf("egress: Allow[%d]: %w", i, err)
		}
	}
	return nil
}

// entry is one parsed entry of Allow: a name or a prefix, and a port (0
// for any).
type entry struct {
	name   string
	prefix netip.Prefix
	port   uint16
}

// hostChars are the characters of a host name entry.
const hostChars = "abcdefghijklmnopqrstuvwxyz0123456789-._"

func parseEntry(raw string) (entry, error) {
	s := strings.ToLower(strings.TrimSpace(raw))
	switch {
	case s == "":
		return entry{}, errors.New("an empty destination; give a host name, host:port, an IP address or a CIDR range")
	case strings.Contains(s, "://"):
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			return entry{}, fmt.Errorf("%q is a URL; give its host alone, such as %s", raw, u.Host)
		}
		return entry{}, fmt.Errorf("%q is a URL; give its host alone", raw)
	case strings.Contains(s, "/"):
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return entry{}, fmt.Errorf("%q is not a CIDR range such as 10.1.0.0/16 or fd00:1::/64 (a range takes no port)", raw)
		}
		return entry{prefix: unmapPrefix(pfx.Masked())}, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		a = a.Unmap().WithZone("")
		return entry{prefix: netip.PrefixFrom(a, a.BitLen())}, nil
	}
	var e entry
	if host, port, err := net.SplitHostPort(s); err == nil {
		n, perr := strconv.ParseUint(port, 10, 16)
		if perr != nil || n == 0 {
			return entry{}, fmt.Errorf("%q: port %q is not a number from 1 to 65535", raw, port)
		}
		e.port, s = uint16(n), host
		if a, err := netip.ParseAddr(s); err == nil {
			a = a.Unmap().WithZone("")
			e.prefix = netip.PrefixFrom(a, a.BitLen())
			return e, nil
		}
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 || strings.Trim(s, hostChars) != "" || strings.HasPrefix(s, ".") || strings.Contains(s, "..") {
		return entry{}, fmt.Errorf("%q is not a host name (letters, digits, -, _ and dots, no wildcard), host:port, IP address or CIDR range", raw)
	}
	e.name = s
	return e, nil
}

// unmapPrefix turns an IPv4-mapped IPv6 range (::ffff:10.0.0.0/104) into
// its IPv4 range (10.0.0.0/8), which addresses are compared with once
// unmapped.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// entries are the parsed entries of Allow; one that does not parse
// (Validate refuses it) allows nothing.
func (p Policy) entries() []entry {
	out := make([]entry, 0, len(p.Allow))
	for _, s := range p.Allow {
		if e, err := parseEntry(s); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// normalHost is host as names are compared: lower case, without a
// trailing dot, brackets or zone.
func normalHost(host string) string {
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	return host
}

// allowsName reports whether host (as the URL names it) is allowed by
// name on port.
func (p Policy) allowsName(host string, port uint16) bool {
	host = normalHost(host)
	for _, e := range p.entries() {
		if e.name != "" && e.name == host && (e.port == 0 || e.port == port) {
			return true
		}
	}
	return false
}

// allowsAddr reports whether addr (unmapped, without zone) is allowed by
// address or range on port.
func (p Policy) allowsAddr(addr netip.Addr, port uint16) bool {
	for _, e := range p.entries() {
		if e.prefix.IsValid() && e.prefix.Contains(addr) && (e.port == 0 || e.port == port) {
			return true
		}
	}
	return false
}

// Check reports whether a connection to addr, made for host (the name or
// address the URL gives), is allowed: nil, or a [*RefusedError].
func (p Policy) Check(host string, addr netip.AddrPort) error {
	a := addr.Addr().Unmap().WithZone("")
	port := addr.Port()
	if p.allowsName(host, port) || p.allowsAddr(a, port) {
		return nil
	}
	class := Class(a)
	if class == "" {
		return nil
	}
	return &RefusedError{Host: normalHost(host), Addr: netip.AddrPortFrom(a, port), Class: class}
}

// ranges are the addresses the policy refuses, by class.
var ranges = []struct {
	prefix netip.Prefix
	class  string
}{
	// 0.0.0.0/8 is "this network": a connection to 0.x.x.x reaches this
	// host on Linux.
	{netip.MustParsePrefix("0.0.0.0/8"), ClassUnspecified},
	{netip.MustParsePrefix("127.0.0.0/8"), ClassLoopback},
	{netip.MustParsePrefix("10.0.0.0/8"), ClassPrivate},
	{netip.MustParsePrefix("172.16.0.0/12"), ClassPrivate},
	{netip.MustParsePrefix("192.168.0.0/16"), ClassPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), ClassShared},
	{netip.MustParsePrefix("169.254.0.0/16"), ClassLinkLocal},
	{netip.MustParsePrefix("224.0.0.0/4"), ClassMulticast},
	{netip.MustParsePrefix("255.255.255.255/32"), ClassBroadcast},
	{netip.MustParsePrefix("::/128"), ClassUnspecified},
	{netip.MustParsePrefix("::1/128"), ClassLoopback},
	{netip.MustParsePrefix("fe80::/10"), ClassLinkLocal},
	{netip.MustParsePrefix("fc00::/7"), ClassPrivate},
	{netip.MustParsePrefix("ff00::/8"), ClassMulticast},
}

// nat64 is the well-known NAT64 prefix: 64:ff9b::a.b.c.d reaches the IPv4
// address a.b.c.d through a NAT64 gateway, so it is judged by it.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// The classes of address the policy refuses, as [Class] names them.
const (
	ClassLoopback    = "loopback"
	ClassLinkLocal   = "link-local"
	ClassPrivate     = "private"
	ClassUnspecified = "unspecified"
	ClassShared      = "shared (CGNAT)"
	ClassMulticast   = "multicast"
	ClassBroadcast   = "broadcast"
)

// Class is the class of address the policy refuses addr for (ClassLoopback,
// ClassLinkLocal, ...), or "" for an address it allows: a public one. An
// IPv4-mapped IPv6 address (::ffff:127.0.0.1) and a NAT64 one
// (64:ff9b::7f00:1) are of the class of the IPv4 address they carry.
func Class(addr netip.Addr) string {
	if !addr.IsValid() {
		return ClassUnspecified
	}
	addr = addr.Unmap().WithZone("")
	if nat64.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, r := range ranges {
		if r.prefix.Contains(addr) {
			return r.class
		}
	}
	return ""
}

// metadata are the addresses of cloud metadata services, named in
// refusals.
var metadata = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254")}

// RefusedError is a connection the policy refused.
type RefusedError struct {
	// Host is the host the URL named: a name, or the address itself.
	Host string
	// Addr is the address (and port) refused.
	Addr netip.AddrPort
	// Class is why: the class of Addr (ClassLoopback...).
	Class string
}

// Error says which address was refused, why, and how to allow it.
func (e *RefusedError) Error() string {
	what := e.Class + " address"
	for _, m := range metadata {
		if e.Addr.Addr() == m {
			what = "link-local address (a cloud's metadata service)"
		}
	}
	article := "a"
	if strings.ContainsRune("aeiou", rune(what[0])) {
		article = "an"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "egress: refused to connect to %s", e.Addr)
	host := e.Host
	if host == "" || host == e.Addr.Addr().String() {
		host = e.Addr.Addr().String()
	} else {
		fmt.Fprintf(&b, " (%s resolved to it)", host)
	}
	fmt.Fprintf(&b, ": %s %s, which Interlock does not call unless the operator allows it; "+
		"if this destination is meant, allow it: %s %s (or %s for port %d only; %s, or egress.Policy.Allow in Go)",
		article, what, Flag, host, net.JoinHostPort(host, strconv.Itoa(int(e.Addr.Port()))), e.Addr.Port(), EnvAllow)
	return b.String()
}

// Is makes a RefusedError match [ErrRefused].
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// IsRefused reports whether err is, or wraps, a refusal of the policy.
func IsRefused(err error) bool { return errors.Is(err, ErrRefused) }

// DialContext connects to address (host:port) on network as a
// net.Dialer does, checking every address it is about to connect to
// (each one a name resolves to, in turn) with [Policy.Check]: a refused
// one is not connected to, and when none is left the error is a
// [*RefusedError].
func (p Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	d := &net.Dialer{
		Timeout: dialTimeout, KeepAlive: keepAlive, Resolver: p.Resolver,
		Control: func(_, ipPort string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(ipPort)
			if err != nil {
				return fmt.Errorf("egress: connecting to %s: %q is not an address the policy can check: %w", host, ipPort, ErrRefused)
			}
			return p.Check(host, ap)
		},
	}
	return d.DialContext(ctx, network, address)
}

// Transport returns an HTTP transport with http.DefaultTransport's
// settings whose every connection [Policy.DialContext] makes, and which
// goes through Proxy (none by default). A redirect is followed or not as
// the http.Client using it says, and its connection is checked too.
func (p Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = p.DialContext
	t.Proxy = nil
	if p.Proxy != nil {
		t.Proxy = p.proxy
	}
	return t
}

// proxy is Proxy, refusing first a destination the URL gives as an
// address (or as localhost) the policy refuses: through a proxy, the
// connection to the destination is the proxy's, not checked here.
func (p Policy) proxy(req *http.Request) (*url.URL, error) {
	u, err := p.Proxy(req)
	if err != nil || u == nil {
		return u, err
	}
	port := req.URL.Port()
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	n, _ := strconv.ParseUint(port, 10, 16)
	host := req.URL.Hostname()
	a, aerr := netip.ParseAddr(host)
	if aerr != nil && netaddr.IsLoopbackHost(host) {
		a, aerr = netip.AddrFrom4([4]byte{127, 0, 0, 1}), nil
		if p.allowsName(host, uint16(n)) {
			return u, nil
		}
	}
	if aerr == nil {
		if err := p.Check(host, netip.AddrPortFrom(a, uint16(n))); err != nil {
			return nil, err
		}
	}
	return u, nil
}
