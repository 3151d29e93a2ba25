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

	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/internal/netaddr"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/wire"
)

// Port is what the channel needs of a running Interlock: the
// dispatcher's port (see package notify) and the deployment's outbound
// policy. *interlock.Service is one.
type Port interface {
	notify.Port
	// Egress is the deployment's outbound policy (interlock.Config.Egress).
	Egress() egress.Policy
}

// Name is the channel's name: its consumer is <prefix>-teams, and a
// role's Workflows URL is its teams address in the directory.
const Name = people.ChannelTeams

// Defaults of [Config].
const (
	DefaultTimeout = 30 * time.Second
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
	// Observe, if set, hears the end of every attempt (see
	// notify.Config.Observe). It must not block.
	Observe func(d notify.Delivery, err error, deadLettered bool)
	// Logger for the channel. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

func (c Config) withDefaults() Config {
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
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
	}{{"Timeout", c.Timeout}, {"FirstRetry", c.FirstRetry}, {"MaxRetry", c.MaxRetry}, {"RetryFor", c.RetryFor}} {
		if d.v < 0 {
			return fmt.Errorf("teams: Config.%s is negative (%s)", d.name, d.v)
		}
	}
	return nil
}

// ConsumerName is the channel's durable consumer on the events stream.
func ConsumerName(names wire.Names) string { return notify.ConsumerName(names, Name) }

// Teams posts Interlock's interrupts, reminders and outcomes to the
// Microsoft Teams channels of their roles, as Adaptive Cards, through
// each channel's Workflows URL. It is a channel of the notify seam
// ([notify.Channel], [notify.Addresser], [notify.Settler]) and a
// background service of an interlock.Service: Start returns once it
// follows the events; Stop ends it.
type Teams struct {
	port Port
	cfg  Config
	log  zerolog.Logger
	http *http.Client

	mu      sync.Mutex
	started bool
	stopped bool
	d       *notify.Dispatcher
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

// Name is the channel's name, [Name].
func (t *Teams) Name() string { return Name }

// Start binds the channel's durable consumer (made the first time, it
// starts at the events published from then on) and follows the events.
func (t *Teams) Start(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started || t.stopped {
		return errors.New("teams: Start called twice, or after Stop")
	}
	t.started = true
	d, err := notify.StartDispatch(ctx, t.port, t, notify.Dispatch{
		Directory:   t.cfg.Directory,
		PublicURL:   t.cfg.PublicURL,
		Description: "Interlock's Microsoft Teams channel",
		// A role's Teams channel is its team's place: it shows every
		// request of the role, the assigned ones too, and who took them.
		RolesSeeAll: true,
		FirstRetry:  t.cfg.FirstRetry,
		MaxRetry:    t.cfg.MaxRetry,
		RetryFor:    t.cfg.RetryFor,
		AckWait:     2*t.cfg.Timeout + time.Minute,
		Observe:     t.cfg.Observe,
		Logger:      &t.log,
	})
	if err != nil {
		return fmt.Errorf("teams: %w", err)
	}
	t.d = d
	t.log.Info().Str("consumer", d.Name()).Str("public_url", t.cfg.PublicURL).Msg("Teams channel following the events")
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
	if t.d != nil {
		return t.d.Stop(ctx)
	}
	return nil
}
