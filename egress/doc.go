// Package egress is the one policy for the connections Interlock opens to
// other systems: outbound webhooks, the POSTs to asks' callback URLs,
// Microsoft Teams and Slack. Agents and subscriptions choose those URLs,
// so without a policy any of them could make Interlock call its own HTTP
// API, its metrics, a cloud's metadata service or any host of the private
// network it runs in.
//
// A [Policy] checks the address each connection is about to be made to,
// after DNS resolution, in the dialer itself: so a name that resolves to
// an internal address, a redirect to one, and a name whose address
// changes between two lookups (DNS rebinding) are all caught. It refuses
// loopback, link-local (the cloud metadata address 169.254.169.254
// among them), private, unspecified, shared (CGNAT), multicast and
// broadcast addresses, in IPv4, IPv6 and IPv4-mapped IPv6 forms (see
// [Class]), unless the operator allows the destination: by host name,
// host:port, address or CIDR range ([Policy].Allow, `interlock serve
// --egress-allow`). Public addresses are always allowed.
//
//	p := egress.Policy{Allow: []string{"hooks.internal.example.com"}}
//	if err := p.Validate(); err != nil { ... }
//	client := &http.Client{Transport: p.Transport()}
//
// A refused connection fails with a [*RefusedError] (errors.Is
// [ErrRefused]) that names the address, why it was refused and how to
// allow it. Another attempt would be refused the same, so the channels
// dead-letter such a delivery at once.
//
// The transport uses no proxy unless [Policy].Proxy names one: the
// HTTPS_PROXY and HTTP_PROXY of the environment are not read, since
// through a proxy Interlock would connect to the proxy only, and could no
// longer check where a request goes.
package egress
