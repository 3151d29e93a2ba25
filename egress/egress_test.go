package egress_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/interlockhq/interlock/egress"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

func TestEveryClassOfInternalAddressIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr, class string
	}{
		{"127.0.0.1", egress.ClassLoopback},
		{"127.8.9.10", egress.ClassLoopback},
		{"::1", egress.ClassLoopback},
		{"::ffff:127.0.0.1", egress.ClassLoopback},
		{"169.254.169.254", egress.ClassLinkLocal},
		{"169.254.1.1", egress.ClassLinkLocal},
		{"fe80::1", egress.ClassLinkLocal},
		{"::ffff:169.254.169.254", egress.ClassLinkLocal},
		{"10.0.0.1", egress.ClassPrivate},
		{"172.16.0.1", egress.ClassPrivate},
		{"172.31.255.254", egress.ClassPrivate},
		{"192.168.1.1", egress.ClassPrivate},
		{"fc00::1", egress.ClassPrivate},
		{"fd12:3456::1", egress.ClassPrivate},
		{"::ffff:10.1.2.3", egress.ClassPrivate},
		{"::ffff:192.168.0.1", egress.ClassPrivate},
		{"0.0.0.0", egress.ClassUnspecified},
		{"0.1.2.3", egress.ClassUnspecified},
		{"::", egress.ClassUnspecified},
		{"::ffff:0.0.0.0", egress.ClassUnspecified},
		{"100.64.0.1", egress.ClassShared},
		{"100.127.255.254", egress.ClassShared},
		{"::ffff:100.64.0.1", egress.ClassShared},
		{"224.0.0.1", egress.ClassMulticast},
		{"239.255.255.250", egress.ClassMulticast},
		{"ff02::1", egress.ClassMulticast},
		{"255.255.255.255", egress.ClassBroadcast},
		{"64:ff9b::7f00:1", egress.ClassLoopback},
		{"64:ff9b::a9fe:a9fe", egress.ClassLinkLocal},
	} {
		addr := netip.MustParseAddr(tc.addr)
		if got := egress.Class(addr); got != tc.class {
			t.Errorf("Class(%s) = %q, want %q", tc.addr, got, tc.class)
		}
		err := egress.Policy{}.Check("hooks.example.com", netip.AddrPortFrom(addr, 443))
		var refused *egress.RefusedError
		if !errors.As(err, &refused) || !errors.Is(err, egress.ErrRefused) || refused.Class != tc.class {
			t.Errorf("Check(%s) = %v; want a refusal of a %s address", tc.addr, err, tc.class)
			continue
		}
		msg := err.Error()
		for _, want := range []string{":443", tc.class, "hooks.example.com resolved to it", "--egress-allow hooks.example.com", "INTERLOCK_EGRESS_ALLOW"} {
			if !strings.Contains(msg, want) {
				t.Errorf("Check(%s) says %q, which does not say %q", tc.addr, msg, want)
			}
		}
	}
	if msg := (egress.Policy{}).Check("169.254.169.254", netip.MustParseAddrPort("169.254.169.254:80")).Error(); !strings.Contains(msg, "metadata") {
		t.Errorf("the metadata address's refusal %q does not say what it is", msg)
	}
}

func TestAPublicAddressIsAllowed(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"93.184.215.14", "8.8.8.8", "172.32.0.1", "100.128.0.1", "192.169.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"} {
		addr := netip.MustParseAddr(a)
		if c := egress.Class(addr); c != "" {
			t.Errorf("Class(%s) = %q, want public", a, c)
		}
		if err := (egress.Policy{}).Check("api.example.com", netip.AddrPortFrom(addr, 443)); err != nil {
			t.Errorf("Check(%s) = %v, want allowed", a, err)
		}
	}
}

func TestAnAllowedDestinationIsAllowedByNameAddressPortOrRange(t *testing.T) {
	t.Parallel()
	p := egress.Policy{Allow: []string{"Hooks.Internal.", "api.internal:8443", "127.0.0.1:9000", "10.1.0.0/16", "[::1]:9001", "fd00:1::/64"}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host, addr string
		allowed    bool
	}{
		{"hooks.internal", "10.9.9.9:443", true},
		{"HOOKS.INTERNAL.", "192.168.0.2:80", true},
		{"other.internal", "10.9.9.9:443", false},
		{"api.internal", "10.9.9.9:8443", true},
		{"api.internal", "10.9.9.9:443", false},
		{"127.0.0.1", "127.0.0.1:9000", true},
		{"localhost", "127.0.0.1:9000", true},
		{"127.0.0.1", "127.0.0.1:4222", false},
		{"db.internal", "10.1.200.3:5432", true},
		{"db.internal", "10.2.0.1:5432", false},
		{"::1", "[::1]:9001", true},
		{"::1", "[::1]:9000", false},
		{"v6.internal", "[fd00:1::5]:443", true},
		{"v6.internal", "[::ffff:10.1.0.7]:443", true},
	} {
		err := p.Check(tc.host, netip.MustParseAddrPort(tc.addr))
		if (err == nil) != tc.allowed {
			t.Errorf("Check(%s, %s) = %v, want allowed %v", tc.host, tc.addr, err, tc.allowed)
		}
	}
}

func TestBadAllowEntriesAreRefusedSayingHowToWriteThem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		entry, wantErr string
	}{
		{"", "empty"},
		{"https://hooks.internal/x", "give its host alone, such as hooks.internal"},
		{"10.0.0.0/33", "not a CIDR range"},
		{"10.0.0.0/8:443", "not a CIDR range"},
		{"hooks.internal:0", "not a number from 1 to 65535"},
		{"hooks.internal:http", "not a number from 1 to 65535"},
		{"hooks internal", "is not a host name"},
		{"*.internal", "is not a host name"},
		{"hooks..internal", "is not a host name"},
	} {
		err := egress.Policy{Allow: []string{"ok.example.com", tc.entry}}.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "Allow[1]") {
			t.Errorf("Validate(%q) = %v, want an error naming Allow[1] and saying %q", tc.entry, err, tc.wantErr)
		}
	}
	if got, err := egress.ParseAllow(" a.example, ,127.0.0.1:9000,"); err != nil || len(got) != 2 || got[0] != "a.example" || got[1] != "127.0.0.1:9000" {
		t.Errorf("ParseAllow = %q, %v", got, err)
	}
	if _, err := egress.ParseAllow("a.example,http://b.example:8080/x"); err == nil || !strings.Contains(err.Error(), `"http://b.example:8080/x" is a URL; give its host alone, such as b.example:8080`) {
		t.Errorf("ParseAllow of a URL = %v", err)
	}
}

// sink is a local HTTP server that counts the requests it gets.
type sink struct {
	*httptest.Server
	hits atomic.Int32
}

func newSink(t *testing.T, h http.HandlerFunc) *sink {
	t.Helper()
	s := &sink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sink) port() string { return s.URL[strings.LastIndex(s.URL, ":")+1:] }

// resolver answers DNS queries for the names of hosts, over an in-memory
// connection: nothing leaves the process. Other names do not exist.
func resolver(hosts map[string]netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go serveDNS(server, hosts)
		return client, nil
	}}
}

// serveDNS answers the queries that come on c, framed as over TCP (the
// resolver frames them so on a connection that is no net.PacketConn),
// until c is closed.
func serveDNS(c net.Conn, hosts map[string]netip.Addr) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil || len(q) < 12 {
			return
		}
		// The question: labels up to a zero byte, then type and class.
		i, labels := 12, []string{}
		for i < len(q) && q[i] != 0 {
			l := int(q[i])
			if i+1+l > len(q) {
				return
			}
			labels = append(labels, string(q[i+1:i+1+l]))
			i += 1 + l
		}
		if i+5 > len(q) {
			return
		}
		qtype := binary.BigEndian.Uint16(q[i+1:])
		question := q[12 : i+5]
		addr, known := hosts[strings.ToLower(strings.Join(labels, "."))]
		var answer []byte
		if known && (qtype == 1 && addr.Is4() || qtype == 28 && addr.Is6()) {
			answer = append([]byte{0xc0, 12}, binary.BigEndian.AppendUint16(nil, qtype)...)
			answer = append(answer, 0, 1, 0, 0, 0, 60)
			answer = binary.BigEndian.AppendUint16(answer, uint16(addr.BitLen()/8))
			answer = append(answer, addr.AsSlice()...)
		}
		rcode := byte(0)
		if !known {
			rcode = 3 // NXDOMAIN
		}
		resp := append([]byte{q[0], q[1], 0x85, 0x80 | rcode, 0, 1, 0, 0, 0, 0, 0, 0}, question...)
		if answer != nil {
			resp[7] = 1
			resp = append(resp, answer...)
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(resp))), resp...)); err != nil {
			return
		}
	}
}

func TestANameThatResolvesToLoopbackIsRefusedUnlessAllowedByName(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	dns := resolver(map[string]netip.Addr{"hooks.test": netip.MustParseAddr("127.0.0.1")})
	url := "http://hooks.test:" + s.port() + "/hook"

	c := &http.Client{Transport: egress.Policy{Resolver: dns}.Transport()}
	defer c.CloseIdleConnections()
	_, err := c.Get(url)
	var refused *egress.RefusedError
	if !errors.As(err, &refused) || refused.Host != "hooks.test" || refused.Addr.Addr() != netip.MustParseAddr("127.0.0.1") || refused.Class != egress.ClassLoopback {
		t.Fatalf("GET %s = %v; want a refusal of 127.0.0.1 for hooks.test", url, err)
	}
	if n := s.hits.Load(); n != 0 {
		t.Fatalf("the local server got %d requests through the default policy", n)
	}

	allowed := &http.Client{Transport: egress.Policy{Resolver: dns, Allow: []string{"hooks.test"}}.Transport()}
	defer allowed.CloseIdleConnections()
	resp, err := allowed.Get(url)
	if err != nil {
		t.Fatalf("GET %s with hooks.test allowed: %v", url, err)
	}
	_ = resp.Body.Close()
	if n := s.hits.Load(); n != 1 {
		t.Fatalf("the local server got %d requests with hooks.test allowed, want 1", n)
	}
}

func TestARedirectToLoopbackIsRefusedWhenOnlyTheFirstHopIsAllowed(t *testing.T) {
	t.Parallel()
	target := newSink(t, nil)
	first := newSink(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/admin", http.StatusFound)
	})
	dns := resolver(map[string]netip.Addr{"hooks.test": netip.MustParseAddr("127.0.0.1")})
	// The client follows redirects: the policy holds at every hop.
	c := &http.Client{Transport: egress.Policy{Resolver: dns, Allow: []string{"hooks.test:" + first.port()}}.Transport()}
	defer c.CloseIdleConnections()
	_, err := c.Get("http://hooks.test:" + first.port() + "/hook")
	var refused *egress.RefusedError
	if !errors.As(err, &refused) || refused.Addr.String() != "127.0.0.1:"+target.port() {
		t.Fatalf("GET through a redirect to %s = %v; want the redirect's target refused", target.URL, err)
	}
	if first.hits.Load() != 1 || target.hits.Load() != 0 {
		t.Fatalf("first hop got %d requests, redirect target %d; want 1 and 0", first.hits.Load(), target.hits.Load())
	}
}

func TestNoProxyIsUsedUnlessOneIsGiven(t *testing.T) {
	t.Parallel()
	if tr := (egress.Policy{}).Transport(); tr.Proxy != nil {
		t.Fatal("the default transport has a proxy; HTTPS_PROXY and HTTP_PROXY must not be read unless asked")
	}
	proxy := newSink(t, nil)
	p := egress.Policy{Proxy: func(*http.Request) (*url.URL, error) { return url.Parse(proxy.URL) }, Allow: []string{"127.0.0.1:" + proxy.port()}}
	c := &http.Client{Transport: p.Transport()}
	defer c.CloseIdleConnections()
	// Through a proxy, a destination given as an internal address is
	// refused before the proxy is asked.
	for _, dest := range []string{"http://169.254.169.254/latest/meta-data/", "http://localhost:4222/", "http://[::1]:9090/metrics"} {
		if _, err := c.Get(dest); !egress.IsRefused(err) {
			t.Errorf("GET %s through a proxy = %v, want refused", dest, err)
		}
	}
	if n := proxy.hits.Load(); n != 0 {
		t.Fatalf("the proxy got %d requests for internal destinations", n)
	}
	// A name goes to the proxy, which resolves it.
	resp, err := c.Get("http://hooks.example.com/hook")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if n := proxy.hits.Load(); n != 1 {
		t.Fatalf("the proxy got %d requests for a named destination, want 1", n)
	}
}
