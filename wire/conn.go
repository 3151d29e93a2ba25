package wire

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultURL is where clients find the server `interlock serve` embeds.
const DefaultURL = "nats://127.0.0.1:4222"

// ConnConfig says how to reach a NATS server.
type ConnConfig struct {
	// URL of the server, or a comma-separated list. Defaults to DefaultURL.
	URL string
	// Name identifies the connection in server monitoring.
	Name string
	// CredsFile is a NATS credentials file (JWT and NKey seed).
	CredsFile string
	// TLSCert and TLSKey are a client certificate for mutual TLS.
	TLSCert, TLSKey string
	// TLSCA is a CA file to verify the server with.
	TLSCA string
	// InProcess, if set, is an embedded server to connect to in-process,
	// without a socket (a *bus.Server's NATS()). URL is then ignored.
	InProcess nats.InProcessConnProvider
	// User and Password authenticate the connection (user/password auth).
	User, Password string
	// InboxPrefix replaces "_INBOX" as the prefix of the connection's reply
	// subjects, so that a server can let other users subscribe to "_INBOX.>"
	// without letting them read this connection's replies. Defaults to "_INBOX".
	InboxPrefix string
	// Dialer, if set, opens the connection's sockets instead of a
	// net.Dialer: one that dials from another network namespace, or
	// through a tunnel.
	Dialer nats.CustomDialer
}

// Connect connects to NATS and returns the connection and its JetStream
// context. It fails with an error saying what to check when the server
// cannot be reached or has no JetStream.
func Connect(ctx context.Context, cfg ConnConfig) (*nats.Conn, jetstream.JetStream, error) {
	// A reply subject the user may not subscribe to shows only as an
	// asynchronous error, and the request then times out: keep it, to say
	// why.
	var (
		mu     sync.Mutex
		denied string
	)
	opts := []nats.Option{
		nats.Name(cmp.Or(cfg.Name, "interlock")),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), "Subscription") {
				mu.Lock()
				denied = err.Error()
				mu.Unlock()
			}
		}),
	}
	url := cmp.Or(cfg.URL, DefaultURL)
	where := RedactURLs(url) // for messages: a password in a URL stays out of them
	if cfg.InProcess != nil {
		opts = append(opts, nats.InProcessServer(cfg.InProcess))
		url, where = "in-process", "in-process"
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	if cfg.Dialer != nil {
		opts = append(opts, nats.SetCustomDialer(cfg.Dialer))
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("wire: connecting to NATS at %s: %w (is `interlock serve` or a nats-server running there?)", where, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("wire: JetStream on %s: %w", where, err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		if nc.ConnectedClusterName() != "" && ctx.Err() == nil && clusterForming(err) {
			// A cluster node whose JetStream has no meta leader yet: its
			// peers are starting. Provisioning waits for them.
			return nc, js, nil
		}
		nc.Close()
		mu.Lock()
		why := denied
		mu.Unlock()
		if why != "" {
			return nil, nil, fmt.Errorf("wire: no reply from JetStream on %s: %w; the server said %q: this user may not receive replies on %s.>, "+
				"so connect with the inbox prefix it may use (with deploy/interlock-auth.conf, _INBOX_<user>: --inbox-prefix, NATS_INBOX_PREFIX, "+
				"or a natscli context's inbox_prefix)", where, err, why, cmp.Or(cfg.InboxPrefix, nats.InboxPrefix[:len(nats.InboxPrefix)-1]))
		}
		return nil, nil, fmt.Errorf("wire: JetStream is not available on %s: %w (start nats-server with -js)", where, err)
	}
	return nc, js, nil
}

// RedactURLs returns a NATS server URL, or a comma-separated list of them,
// with the password of each replaced by "xxxxx" (and a user name alone, a
// token, kept out as well), for messages and logs.
func RedactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		u, err := neturl.Parse(p)
		switch {
		case err == nil && u.User == nil:
			parts[i] = p
		case err == nil:
			if _, ok := u.User.Password(); !ok {
				u.User = neturl.User("xxxxx") // a token alone
			}
			parts[i] = u.Redacted()
		default:
			// Not a URL: keep only what follows any user information.
			if at := strings.LastIndex(p, "@"); at >= 0 {
				p = "xxxxx@" + p[at+1:]
			}
			parts[i] = p
		}
	}
	return strings.Join(parts, ",")
}

// clusterForming reports whether err is what JetStream answers, or fails
// to answer, while its cluster has no meta leader.
func clusterForming(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == 10008 // JetStream system temporarily unavailable
}
