package slackbridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/slack-go/slack"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// Port is what the bridge needs of a running Interlock: the channel
// dispatcher's port (see package notify: a client of the wire protocol,
// the JetStream context and names), resumes vouched for on behalf of the
// Slack user it mapped, and claims and releases the same way (the
// deployment's secret stays with the port). *interlock.Service is one.
type Port interface {
	notify.Port
	ClientAs(source string, caller protocol.Caller) (*client.Client, error)
	Authority() *authority.Authority
	// Egress is the deployment's outbound policy (interlock.Config.Egress).
	Egress() egress.Policy
}

// Timeouts of the interactivity endpoint and of the follower.
const (
	readHeaderTimeout = 10 * time.Second
	// ackWait is how long an event may be in the follower's hands.
	ackWait = time.Minute
	// maxBody is the largest interaction Slack sends, with room to spare.
	maxBody = 1 << 20
)

// Bridge posts Interlock's interrupts to Slack, takes the decisions people
// make there, and updates each message when its interrupt is decided,
// wherever that happened. It is a background service of an
// interlock.Service: Start returns once it follows the events and serves
// the interactivity endpoint; Stop ends both.
type Bridge struct {
	port Port
	cfg  Config
	log  zerolog.Logger
	api  *slack.Client
	h    http.Handler

	store *store
	// own is the configuration's users and channels as a directory, for
	// a bridge without a directory of people.
	own *people.Directory

	mu       sync.Mutex
	srv      *http.Server
	addr     net.Addr
	served   chan struct{}
	serveErr error
	d        *notify.Dispatcher
	// work bounds what interactions do once they answered Slack; Stop
	// ends it.
	work    context.Context
	endWork context.CancelFunc
	started bool
	stopped bool
	stopErr error
}

// New returns a bridge between port's Interlock and Slack.
func New(port Port, cfg Config) (*Bridge, error) {
	if port == nil {
		return nil, errors.New("slackbridge: New needs a Port, such as the *interlock.Service")
	}
	if cfg.Egress.IsZero() {
		cfg.Egress = port.Egress()
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// Slack's Web API through the outbound policy, as every call out.
	opts := []slack.Option{slack.OptionHTTPClient(&http.Client{Transport: cfg.Egress.Transport()})}
	if cfg.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(cfg.APIURL))
	}
	b := &Bridge{port: port, cfg: cfg, log: *cfg.Logger, api: slack.New(cfg.Token, opts...)}
	if own, err := cfg.Directory("the Slack configuration"); err == nil {
		b.own = own
	}
	b.h = http.HandlerFunc(b.interact)
	b.work, b.endWork = context.WithCancel(context.Background())
	return b, nil
}

// Handler is the interactivity endpoint, for a server of one's own or a
// test: Slack's request URL points at it.
func (b *Bridge) Handler() http.Handler { return b.h }

// Addr is the address the endpoint listens on, once started.
func (b *Bridge) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.addr == nil {
		return ""
	}
	return b.addr.String()
}

// ConsumerName is the durable consumer the bridge follows the events
// with, so that a restart carries on where it stopped.
func ConsumerName(names wire.Names) string { return notify.ConsumerName(names, Name) }

// BucketName is the bridge's KV bucket: the channel and ts of each posted
// message, by run.
func BucketName(names wire.Names) string { return names.Prefix + "_slack" }

// Start checks the bot token with Slack (auth.test), binds the bridge's
// bucket and durable consumer, listens on Config.Addr and starts following
// the events. A consumer made for the first time starts at the events
// published from then on.
func (b *Bridge) Start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started || b.stopped {
		return errors.New("slackbridge: Start called twice, or after Stop")
	}
	b.started = true
	auth, err := b.api.AuthTestContext(ctx)
	if err != nil {
		return fmt.Errorf("slackbridge: checking the bot token with Slack (auth.test): %w", err)
	}
	js, names := b.port.JetStream(), b.port.Names()
	var kv jetstream.KeyValue
	err = bus.Ensure(ctx, "bucket "+BucketName(names), func(ctx context.Context) (err error) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      BucketName(names),
			Description: "Interlock's Slack bridge: the message posted for each waiting run",
			History:     1,
			TTL:         b.cfg.Keep,
			Storage:     jetstream.FileStorage,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("slackbridge: binding bucket %s: %w", BucketName(names), err)
	}
	b.store = notify.NewRecords[record](kv, "the bridge's bucket")
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", b.cfg.Addr)
	if err != nil {
		return fmt.Errorf("slackbridge: listening on %s: %w", b.cfg.Addr, err)
	}
	d, err := notify.StartDispatch(ctx, b.port, b, notify.Dispatch{
		Directory:   b.dispatchDirectory,
		Description: "Interlock's Slack bridge",
		// A role's Slack channel is its team's place: it shows every
		// request of the role, and who claimed or was handed it.
		RolesSeeAll: true,
		FirstRetry:  b.cfg.FirstRetry,
		MaxRetry:    b.cfg.MaxRetry,
		RetryFor:    b.cfg.RetryFor,
		AckWait:     ackWait,
		Logger:      &b.log,
	})
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("slackbridge: %w", err)
	}
	b.d = d
	b.addr = ln.Addr()
	b.srv = &http.Server{Handler: b.h, ReadHeaderTimeout: readHeaderTimeout, MaxHeaderBytes: 64 << 10}
	b.served = make(chan struct{})
	go func() {
		defer close(b.served)
		if err := b.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			b.serveErr = err
		}
	}()
	b.log.Info().Str("slack_team", auth.Team).Str("slack_bot", auth.UserID).Str("slack_interactivity", "http://"+b.addr.String()).
		Int("slack_users", len(b.cfg.Users)).Bool("people", b.cfg.People != nil).Msg("Slack bridge serving")
	return nil
}

// Stop stops following the events (the one in hand finishes, or is left
// to be delivered again when ctx ends) and shuts the endpoint down.
// Stopping twice is safe; the second call returns what the first did.
func (b *Bridge) Stop(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return b.stopErr
	}
	b.stopped = true
	var errs []error
	if b.srv != nil {
		if err := b.srv.Shutdown(ctx); err != nil {
			_ = b.srv.Close()
			errs = append(errs, err)
		}
		<-b.served
		errs = append(errs, b.serveErr)
	}
	if b.d != nil {
		errs = append(errs, b.d.Stop(ctx))
	}
	b.endWork()
	b.stopErr = errors.Join(errs...)
	return b.stopErr
}

// dispatchDirectory is the directory the dispatcher finds recipients in:
// the directory of people, else the configuration's users and channels.
func (b *Bridge) dispatchDirectory() *people.Directory {
	if d := b.directory(); d != nil {
		return d
	}
	if b.own != nil {
		return b.own
	}
	return people.Empty()
}
