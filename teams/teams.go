package teams

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/internal/netaddr"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// Port is what the channel needs of a running Interlock: the JetStream
// context and names to keep its consumer and buckets. *interlock.Service
// is one.
type Port interface {
	JetStream() jetstream.JetStream
	Names() wire.Names
	// Egress is the deployment's outbound policy (interlock.Config.Egress).
	Egress() egress.Policy
}

// Kinds are the events the channel follows.
var Kinds = []string{protocol.EventInterrupted, protocol.EventReminded, protocol.EventVoted, protocol.EventAssigned,
	protocol.EventResumed, protocol.EventExpired, protocol.EventCancelled}

// Defaults of [Config].
const (
	DefaultTimeout = 30 * time.Second
	DefaultKeep    = 30 * 24 * time.Hour
	userAgent      = "Interlock-Teams/1"
)

// Config configures the Teams channel.
type Config struct {
	// Directory returns the directory of people in force: each role's
	// Teams channel (its Workflows URL) and each person's Teams account.
	// Required.
	Directory func() *people.Directory
	// PublicURL is the address people open the inbox at
	// (https://interlock.example.com): each card's button opens the
	// request's page under it. https, or http to a loopback address to
	// try it out. Required.
	PublicURL string
	// Egress says where the posts may connect (see package egress): a
	// Workflows URL that resolves to a refused address is dead-lettered
	// at once. The zero Policy takes the port's; that default refuses
	// loopback, private and link-local addresses (and the other internal
	// ones) unless they are allowed. Ignored when Transport is set.
	Egress egress.Policy
	// Transport makes the requests to Teams. Defaults to Egress's
	// transport (egress.Policy.Transport).
	Transport http.RoundTripper
	// Timeout bounds one post. Defaults to DefaultTimeout.
	Timeout time.Duration
	// FirstRetry, MaxRetry and RetryFor say how a post that fails is tried
	// again (see notify.Config). Default to notify's defaults.
	FirstRetry, MaxRetry, RetryFor time.Duration
	// Keep is how long the channel remembers where it posted an interrupt,
	// to follow it up when it is settled. Defaults to DefaultKeep.
	Keep time.Duration
	// Replicas of the channel's buckets. 0: as many as the deployment's
	// events stream has.
	Replicas int
	// Observe, if set, hears the end of every attempt (see
	// notify.Config.Observe). It must not block.
	Observe func(d notify.Delivery, err error, deadLettered bool)
	// Logger for the channel. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

func (c Config) withDefaults() Config {
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Keep = cmp.Or(c.Keep, DefaultKeep)
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.Transport == nil {
		c.Transport = c.Egress.Transport()
	}
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	return c
}

func (c Config) validate() error {
	if c.Directory == nil {
		return errors.New("teams: Config.Directory is nil; give the function that returns the directory of people in force")
	}
	u, err := url.Parse(c.PublicURL)
	switch {
	case c.PublicURL == "":
		return errors.New("teams: Config.PublicURL is empty; give the https:// address people open the inbox at, for the cards' buttons")
	case err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("teams: Config.PublicURL %q is not a base address such as https://interlock.example.com", c.PublicURL)
	case u.Scheme == "https":
	case u.Scheme == "http" && netaddr.IsLoopbackHost(u.Hostname()):
	default:
		return fmt.Errorf("teams: Config.PublicURL %q: use https:// (http:// only to a loopback address, to try it out)", c.PublicURL)
	}
	if err := c.Egress.Validate(); err != nil {
		return fmt.Errorf("teams: Config.Egress: %w", err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Timeout", c.Timeout}, {"FirstRetry", c.FirstRetry}, {"MaxRetry", c.MaxRetry}, {"RetryFor", c.RetryFor}, {"Keep", c.Keep}} {
		if d.v < 0 {
			return fmt.Errorf("teams: Config.%s is negative (%s)", d.name, d.v)
		}
	}
	return nil
}

// ConsumerName is the channel's durable consumer on the events stream.
func ConsumerName(names wire.Names) string { return names.Prefix + "-teams" }

// BucketName is the channel's bucket: where each waiting run's
// interrupt was posted, by run.
func BucketName(names wire.Names) string { return names.Prefix + "_teams" }

// Teams posts Interlock's interrupts, reminders and outcomes to the
// Microsoft Teams channels of their roles, as Adaptive Cards, through
// each channel's Workflows URL. It is a background service of an
// interlock.Service: Start returns once it follows the events; Stop
// ends it.
type Teams struct {
	port Port
	cfg  Config
	log  zerolog.Logger
	http *http.Client

	mu      sync.Mutex
	started bool
	stopped bool
	f       *notify.Follower
	sent    *notify.Sent
	store   *store
}

// New returns the Teams channel of port's Interlock.
func New(port Port, cfg Config) (*Teams, error) {
	if port == nil {
		return nil, errors.New("teams: New needs a Port, such as the *interlock.Service")
	}
	if cfg.Transport == nil && cfg.Egress.IsZero() {
		cfg.Egress = port.Egress()
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Teams{port: port, cfg: cfg, log: *cfg.Logger,
		http: &http.Client{
			Transport: cfg.Transport,
			Timeout:   cfg.Timeout,
			// A Workflows URL answers 202; a redirect is a wrong URL, and
			// following it would send the card elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}, nil
}

// Start binds the channel's buckets and its durable consumer (made the
// first time, it starts at the events published from then on) and
// follows the events.
func (t *Teams) Start(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started || t.stopped {
		return errors.New("teams: Start called twice, or after Stop")
	}
	t.started = true
	js, names := t.port.JetStream(), t.port.Names()
	sent, err := notify.OpenSent(ctx, js, names, 0, t.cfg.Replicas)
	if err != nil {
		return fmt.Errorf("teams: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      BucketName(names),
		Description: "Interlock's Teams channel: the roles each waiting run's interrupt was posted to",
		History:     1,
		TTL:         t.cfg.Keep,
		Replicas:    notify.Replicas(ctx, js, names, t.cfg.Replicas),
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("teams: binding bucket %s: %w", BucketName(names), err)
	}
	t.sent, t.store = sent, notify.NewRecords[record](kv, "the Teams bucket")
	f, err := notify.Follow(ctx, js, names, notify.Config{
		Name:        ConsumerName(names),
		Description: "Interlock's Microsoft Teams channel",
		Kinds:       Kinds,
		FirstRetry:  t.cfg.FirstRetry,
		MaxRetry:    t.cfg.MaxRetry,
		RetryFor:    t.cfg.RetryFor,
		AckWait:     2*t.cfg.Timeout + time.Minute,
		// One first attempt at a time, so that a run's card is tried
		// before its follow-ups (one that failed is tried again after
		// them, and not at all once they settled its request).
		Parallel: 1,
		Observe:  t.cfg.Observe,
		Logger:   &t.log,
	}, t.handle)
	if err != nil {
		return fmt.Errorf("teams: %w", err)
	}
	t.f = f
	t.log.Info().Str("consumer", f.Name()).Str("public_url", t.cfg.PublicURL).Msg("Teams channel following the events")
	return nil
}

// Stop stops following the events: the one in hand finishes, or is left
// to be delivered again when ctx ends. Stopping twice is safe.
func (t *Teams) Stop(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return nil
	}
	t.stopped = true
	defer t.http.CloseIdleConnections()
	if t.f != nil {
		return t.f.Stop(ctx)
	}
	return nil
}

// link is the page of a run in the inbox, where a person decides.
func (t *Teams) link(flow, run string) string {
	return t.cfg.PublicURL + "/runs/" + url.PathEscape(flow) + "/" + url.PathEscape(run)
}
