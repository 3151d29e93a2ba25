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
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// Port is what the bridge needs of a running Interlock: a client of the
// wire protocol, resumes vouched for on behalf of the Slack user it
// mapped, and claims and releases the same way (the deployment's secret
// stays with the port), and the
// JetStream context and names to keep its consumer and its bucket.
// *interlock.Service is one.
type Port interface {
	Client(source string) *client.Client
	ClientAs(source string, caller protocol.Caller) (*client.Client, error)
	Authority() *authority.Authority
	JetStream() jetstream.JetStream
	Names() wire.Names
	// Egress is the deployment's outbound policy (interlock.Config.Egress).
	Egress() egress.Policy
}

// Kinds are the events the bridge follows.
var Kinds = []string{protocol.EventInterrupted, protocol.EventResumed, protocol.EventExpired, protocol.EventCancelled,
	protocol.EventAssigned, protocol.EventVoted, protocol.EventReminded}

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

	mu       sync.Mutex
	srv      *http.Server
	addr     net.Addr
	served   chan struct{}
	serveErr error
	it       jetstream.MessagesContext
	followed chan struct{}
	// work bounds the Slack calls of the follower; Stop ends it.
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
func ConsumerName(names wire.Names) string { return names.Prefix + "-slack" }

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
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      BucketName(names),
		Description: "Interlock's Slack bridge: the message posted for each waiting run",
		History:     1,
		TTL:         b.cfg.Keep,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("slackbridge: binding bucket %s: %w", BucketName(names), err)
	}
	b.store = notify.NewRecords[record](kv, "the bridge's bucket")
	subjects := make([]string, 0, len(Kinds))
	for _, k := range Kinds {
		subjects = append(subjects, names.Event("*", "*", k))
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, names.EventStream(), jetstream.ConsumerConfig{
		Durable:        ConsumerName(names),
		Description:    "Interlock's Slack bridge",
		FilterSubjects: subjects,
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        ackWait,
		// One at a time, so that a run's events are handled in order even
		// when one is delivered again.
		MaxAckPending: 1,
	})
	if err != nil {
		return fmt.Errorf("slackbridge: binding consumer %s on %s: %w", ConsumerName(names), names.EventStream(), err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", b.cfg.Addr)
	if err != nil {
		return fmt.Errorf("slackbridge: listening on %s: %w", b.cfg.Addr, err)
	}
	it, err := cons.Messages()
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("slackbridge: following %s: %w", names.EventStream(), err)
	}
	b.it = it
	b.followed = make(chan struct{})
	go func() {
		defer close(b.followed)
		b.follow(it)
	}()
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
	if b.it != nil {
		b.it.Stop()
		stop := context.AfterFunc(ctx, b.endWork)
		<-b.followed
		stop()
	}
	b.endWork()
	b.stopErr = errors.Join(errs...)
	return b.stopErr
}
